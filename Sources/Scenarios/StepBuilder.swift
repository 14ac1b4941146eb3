import AppHostProtocol
import Foundation
import Plugins

/// Turns one `verb: value` of a scenario's steps into an action.
struct StepBuilder {
    let builder: Builder
    let aliases: [String]

    func alias(_ node: Located, _ what: String) throws(ScenarioError) -> String {
        let a = try node.string(what)
        guard aliases.contains(a) else { throw node.error(unknown("app", a, known: aliases)) }
        return a
    }

    /// The keys of a mapping step, checked against `known`.
    func keyed(_ node: Located, _ verb: String, known: [String]) throws(ScenarioError) -> [String: Located] {
        var out: [String: Located] = [:]
        for (key, keyNode, value) in try node.mapping(verb) {
            guard known.contains(key) else { throw keyNode.error(unknown("key of \(verb)", key, known: known)) }
            out[key] = value
        }
        return out
    }

    /// An app alias given alone (`fetch: probe`) or as `{app: probe}`.
    func appOnly(_ node: Located, _ verb: String) throws(ScenarioError) -> String {
        if node.isMapping {
            let k = try keyed(node, verb, known: ["app"])
            guard let a = k["app"] else { throw node.error("\(verb): which app? (\(verb): probe)") }
            return try alias(a, "\(verb).app")
        }
        return try alias(node, verb)
    }

    func action(_ verb: String, _ verbNode: Located, _ value: Located) throws(ScenarioError) -> Scenario.Action {
        switch verb {
        case "install": return .install(app: try appOnly(value, verb))
        case "uninstall": return .uninstall(app: try appOnly(value, verb))
        case "launch":
            if value.isMapping {
                let k = try keyed(value, verb, known: ["app", "background", "args"])
                guard let a = k["app"] else { throw value.error("launch: which app? (launch: {app: probe, background: true})") }
                return .launch(app: try alias(a, "launch.app"), background: try k["background"]?.bool("launch.background") ?? false,
                               args: try k["args"]?.strings("launch.args"))
            }
            return .launch(app: try alias(value, verb), background: false, args: nil)
        case "foreground": return .foreground(app: try appOnly(value, verb))
        case "background", "home": return .background(app: try appOnly(value, verb))
        case "terminate": return .terminate(app: try appOnly(value, verb))
        case "kill": return .kill(app: try appOnly(value, verb))
        case "advance": return .advance(try value.duration("advance"))
        case "fetch": return .fetch(app: try appOnly(value, verb))
        case "snapshot": return .snapshot(app: try appOnly(value, verb))
        case "push": return .push(try push(value))
        case "bgtask":
            let k = try keyed(value, verb, known: ["app", "run", "expire"])
            guard let a = k["app"] else { throw value.error("bgtask: which app? (bgtask: {app: probe, run: com.example.refresh})") }
            switch (k["run"], k["expire"]) {
            case (let r?, nil): return .bgtask(app: try alias(a, "bgtask.app"), run: true, identifier: try r.string("bgtask.run"))
            case (nil, let e?): return .bgtask(app: try alias(a, "bgtask.app"), run: false, identifier: try e.string("bgtask.expire"))
            default: throw value.error("bgtask: one of run: <identifier> or expire: <identifier>")
            }
        case "location": return try location(value)
        case "privacy": return try privacy(value)
        case "settings": return try settings(value)
        case "device": return try device(value)
        case "ble": return try ble(value)
        case "accessory": return try accessory(value)
        case "expect": return .expect(try ExpectationBuilder(step: self).expectation(value))
        default:
            throw verbNode.error(unknown("step", verb, known: ScenarioReader.verbs))
        }
    }

    func push(_ value: Located) throws(ScenarioError) -> Scenario.Push {
        let k = try keyed(value, "push", known: ["app", "payload", "file", "type", "priority", "expiration", "collapseId", "apnsId"])
        guard let a = k["app"] else { throw value.error("push: which app? (push: {app: probe, payload: {aps: {content-available: 1}}})") }
        var text: String
        switch (k["payload"], k["file"]) {
        case (let p?, nil):
            if p.isMapping {
                let object = try p.jsonValue()
                guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]),
                      let s = String(data: data, encoding: .utf8) else { throw p.error("push.payload: cannot be written as JSON") }
                text = s
            } else {
                text = try p.string("push.payload")
            }
        case (nil, let f?):
            let path = builder.path(try f.string("push.file"))
            guard let data = FileManager.default.contents(atPath: path) else { throw f.error("push.file: no such file \(path)") }
            guard data.count <= 64 * 1024, let s = String(data: data, encoding: .utf8) else {
                throw f.error("push.file: \(path) is not UTF-8 text of at most 64 KiB")
            }
            text = s
        default:
            throw value.error("push: one of payload: {...} (inline) or file: x.apns")
        }
        var type: String?
        if let t = k["type"] {
            let s = try t.string("push.type")
            guard ["alert", "background", "voip"].contains(s) else { throw t.error(unknown("push type", s, known: ["alert", "background", "voip"])) }
            type = s
        }
        // Values APNs would refuse are not refused here: the push step's answer says so
        // (`expect: {push: {status: 400, reason: BadPriority}}`), as the gateway's would.
        let priority = try k["priority"]?.int("push.priority", in: 0...100)
        let expiration = try k["expiration"]?.int("push.expiration", in: Int(Int32.min)...Int(Int32.max))
        let collapseID = try k["collapseId"]?.scalar("push.collapseId")
        let apnsID = try k["apnsId"]?.scalar("push.apnsId")
        if let c = collapseID, c.utf8.count > 1024 { throw k["collapseId"]!.error("push.collapseId: at most 1024 bytes") }
        if let i = apnsID, i.utf8.count > 1024 { throw k["apnsId"]!.error("push.apnsId: at most 1024 bytes") }
        return Scenario.Push(app: try alias(a, "push.app"), payload: text, type: type, priority: priority,
                             expiration: expiration, collapseID: collapseID, apnsID: apnsID)
    }

    func location(_ value: Located) throws(ScenarioError) -> Scenario.Action {
        if !value.isMapping {
            let s = try value.string("location")
            guard s == "clear" else { throw value.error("location: clear, {set: [lat, lon]} or {route: file.gpx}") }
            return .mode(.locationClear, what: "location clear")
        }
        let k = try keyed(value, "location", known: ["set", "route", "interval", "clear"])
        if let set = k["set"] {
            let parts = try set.strings("location.set").flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
            guard parts.count == 2, let lat = Double(parts[0]), let lon = Double(parts[1]),
                  (-90...90).contains(lat), (-180...180).contains(lon) else {
                throw set.error("location.set: [latitude, longitude] in degrees (-90...90, -180...180)")
            }
            return .mode(.locationSet(LocationFix(latitude: lat, longitude: lon)), what: "location set \(lat),\(lon)")
        }
        if let route = k["route"] {
            let path = builder.path(try route.string("location.route"))
            let interval = try k["interval"]?.double("location.interval") ?? 1
            guard interval > 0, interval <= 86_400 else { throw k["interval"]!.error("location.interval: seconds, over 0 and at most a day") }
            do throws(GPXError) {
                let (name, fixes) = try GPX.read(path: path)
                return .mode(.locationRoute(name: name, fixes: fixes, interval: interval), what: "location route \(name)")
            } catch {
                throw route.error("location.route: \(error.description)")
            }
        }
        if k["clear"] != nil { return .mode(.locationClear, what: "location clear") }
        throw value.error("location: one of set, route or clear")
    }

    func privacy(_ value: Located) throws(ScenarioError) -> Scenario.Action {
        let k = try keyed(value, "privacy", known: ["grant", "revoke", "reset", "app"])
        let actions: [(PrivacyAction, Located)] = [(.grant, k["grant"]), (.revoke, k["revoke"]), (.reset, k["reset"])].compactMap { a, n in n.map { (a, $0) } }
        guard actions.count == 1, let (action, serviceNode) = actions.first else {
            throw value.error("privacy: one of grant, revoke or reset, with the service (privacy: {grant: location, app: probe})")
        }
        let service = try serviceNode.string("privacy.\(action.rawValue)")
        guard let scope = PrivacyScope(rawValue: service) else {
            throw serviceNode.error(unknown("privacy service", service, known: PrivacyScope.allCases.map(\.rawValue)))
        }
        var bundle: String?
        if let a = k["app"] { bundle = try alias(a, "privacy.app") }
        if action != .reset, bundle == nil { throw value.error("privacy \(action.rawValue): which app? (app: probe)") }
        // The alias is resolved to its bundle id when the step runs.
        return .privacy(action, scope, app: bundle, what: "privacy \(action.rawValue) \(service)")
    }

    func settings(_ value: Located) throws(ScenarioError) -> Scenario.Action {
        let k = try keyed(value, "settings", known: ["backgroundRefresh", "lowPower", "app"])
        if let r = k["backgroundRefresh"] {
            var bundle: String?
            if let a = k["app"] { bundle = try alias(a, "settings.app") }
            let on = try r.bool("settings.backgroundRefresh")
            return .backgroundRefresh(app: bundle, on: on, what: "settings background-refresh \(on ? "on" : "off")")
        }
        if let l = k["lowPower"] {
            let on = try l.bool("settings.lowPower")
            return .mode(.settingsLowPower(on), what: "settings low-power \(on ? "on" : "off")")
        }
        throw value.error("settings: backgroundRefresh: on|off (with app: for one app) or lowPower: on|off")
    }

    func device(_ value: Located) throws(ScenarioError) -> Scenario.Action {
        // `device: lock` / `device: unlock`.
        if case .scalar = value.node {
            let s = try value.string("device")
            guard s == "lock" || s == "unlock" else { throw value.error(unknown("device action", s, known: ["lock", "unlock"])) }
            return .mode(.deviceLock(s == "lock"), what: "device \(s)")
        }
        let k = try keyed(value, "device", known: ["power", "network", "memory"])
        if let p = k["power"] {
            let s = try p.string("device.power")
            guard s == "plugged" || s == "unplugged" else { throw p.error(unknown("power state", s, known: ["plugged", "unplugged"])) }
            return .mode(.devicePower(plugged: s == "plugged"), what: "device power \(s)")
        }
        if let n = k["network"] {
            let s = try n.string("device.network")
            guard let net = DeviceNetwork(rawValue: s) else { throw n.error(unknown("network", s, known: DeviceNetwork.allCases.map(\.rawValue))) }
            return .mode(.deviceNetwork(net), what: "device network \(s)")
        }
        if let m = k["memory"] {
            let s = try m.string("device.memory")
            guard let level = MemoryPressureLevel(rawValue: s) else {
                throw m.error(unknown("memory pressure", s, known: MemoryPressureLevel.allCases.map(\.rawValue)))
            }
            return .mode(.deviceMemory(level), what: "device memory \(s)")
        }
        throw value.error("device: lock, unlock, power: plugged|unplugged, network: wifi|cellular|none or memory: normal|warning|critical")
    }

    func ble(_ value: Located) throws(ScenarioError) -> Scenario.Action {
        let k = try keyed(value, "ble", known: ["add", "services", "name", "rssi", "remove", "notify", "characteristic", "value"])
        if let add = k["add"] {
            let id = try add.string("ble.add")
            guard !id.hasPrefix("app:") else { throw add.error("ble.add: \"app:\" is reserved for apps advertising") }
            guard let s = k["services"] else { throw value.error("ble.add: at least one service (services: [180D])") }
            var uuids: [String] = []
            for u in try s.strings("ble.services") {
                guard let n = BLEWorldFile.normalizedUUID(u) else { throw s.error("ble.services: \"\(u)\" is not a UUID (16-bit 180D or 128-bit)") }
                uuids.append(n)
            }
            guard !uuids.isEmpty else { throw s.error("ble.services: at least one") }
            let rssi = try k["rssi"]?.int("ble.rssi", in: BLEWorldFile.rssiRange) ?? -60
            let name = try k["name"]?.string("ble.name")
            return .mode(.bleAdd(BLEPeripheral(id: id, name: name, services: uuids, rssi: rssi)), what: "ble add \(id)")
        }
        if let r = k["remove"] { return .mode(.bleRemove(id: try r.string("ble.remove")), what: "ble remove") }
        if let n = k["notify"] {
            guard let c = k["characteristic"], let v = k["value"] else { throw value.error("ble.notify: characteristic: and value: too") }
            let cs = try c.string("ble.characteristic")
            guard let uuid = BLEWorldFile.normalizedUUID(cs) else { throw c.error("ble.characteristic: \"\(cs)\" is not a UUID") }
            return .mode(.bleNotify(peripheral: try n.string("ble.notify"), characteristic: uuid, value: try bytes(v, "ble.value")),
                         what: "ble notify")
        }
        throw value.error("ble: one of add, remove or notify")
    }

    func accessory(_ value: Located) throws(ScenarioError) -> Scenario.Action {
        let k = try keyed(value, "accessory", known: ["connect", "name", "disconnect", "send", "data"])
        if let c = k["connect"] {
            let protocols = try c.strings("accessory.connect")
            for p in protocols where p.isEmpty || p.contains(where: \.isWhitespace) {
                throw c.error("accessory.connect: \"\(p)\" is not a protocol string (reverse DNS, e.g. com.example.printer)")
            }
            let name = try k["name"]?.string("accessory.name") ?? "Accessory"
            return .mode(.accessoryConnect(name: name, protocols: protocols), what: "accessory connect")
        }
        if let d = k["disconnect"] { return .mode(.accessoryDisconnect(try d.string("accessory.disconnect")), what: "accessory disconnect") }
        if let s = k["send"] {
            guard let d = k["data"] else { throw value.error("accessory.send: data: too") }
            return .mode(.accessorySend(protocolString: try s.string("accessory.send"), bytes: try bytes(d, "accessory.data")), what: "accessory send")
        }
        throw value.error("accessory: one of connect, disconnect or send")
    }

    /// `hex:0a1b...` or text (UTF-8), as the CLI takes it.
    func bytes(_ node: Located, _ what: String) throws(ScenarioError) -> Data {
        let text = try node.scalar(what)
        guard text.lowercased().hasPrefix("hex:") else { return Data(text.utf8) }
        let digits = Array(text.dropFirst(4).filter { !" :_".contains($0) })
        guard !digits.isEmpty, digits.count % 2 == 0 else { throw node.error("\(what): hex: then two hex digits per byte") }
        var out = Data()
        var i = 0
        while i < digits.count {
            guard let b = UInt8(String(digits[i...i + 1]), radix: 16) else { throw node.error("\(what): \"\(String(digits[i...i + 1]))\" is not a hex byte") }
            out.append(b)
            i += 2
        }
        return out
    }
}
