import AppHostProtocol
import Foundation

/// `external-accessory`: simulated MFi accessories (`apphost accessory ...`). An app
/// with the mode whose `UISupportedExternalAccessoryProtocols` lists the protocol is
/// woken (or launched in the background) and gets the accessory's bytes; an app that
/// lists the protocol without the mode gets them only in the foreground; others never.
/// Serial devices (/dev/ttyUSB*, /dev/ttyACM*) only with the mode.
public struct ExternalAccessoryPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .externalAccessory }
    public var emulation: ModeEmulation { .emulated }
    public var summary: String { "talk to MFi accessories in the background (EAAccessoryManager, EASession)" }
    public var services: [String] { ["AccessoryManager.connectedAccessories"] }
    public var wakeSources: [String] { ["apphost accessory connect", "apphost accessory send", "apphost accessory disconnect"] }
    public var sandbox: SandboxGrant { SandboxGrant(devicePaths: ["/dev/ttyUSB*", "/dev/ttyACM*"]) }

    struct State: PluginState {
        var accessories: [Int: Accessory] = [:]
        var nextID = 1
        init() {}
    }

    public func answer(_ query: ModeQuery, in ctx: ModeContext) throws(ModeCommandError) -> ModeAnswer? {
        guard case .accessories = query else { return nil }
        return .accessories(ctx.state(State.self).accessories.values.sorted { $0.id < $1.id })
    }

    public func lint(_ app: LintSubject) -> [LintFinding] {
        guard app.manifest.externalAccessoryProtocols.isEmpty else { return [] }
        return [LintFinding(.error, file: app.manifestPath, key: "UISupportedExternalAccessoryProtocols", mode: mode.rawValue,
            "background mode \"external-accessory\" needs UISupportedExternalAccessoryProtocols: with no protocol listed no accessory ever reaches the app")]
    }

    public func handle(_ request: ServiceRequest, from app: BundleID, in ctx: ModeContext) -> ServiceReply? {
        guard case .accessoryList = request, let info = ctx.apps[app] else { return nil }
        let mine = ctx.state(State.self).accessories.values.sorted { $0.id < $1.id }
            .filter { !Set($0.protocols).isDisjoint(with: info.manifest.externalAccessoryProtocols) }
        return .accessories(mine)
    }

    public func handle(_ command: ModeCommand, in ctx: ModeContext) throws(ModeCommandError) -> String? {
        switch command {
        case .accessoryConnect(let name, let protocols):
            guard !protocols.isEmpty else { throw ModeCommandError("an accessory needs at least one protocol (e.g. com.example.printer)") }
            let accessory = ctx.update(State.self) { s -> Accessory in
                let a = Accessory(id: s.nextID, name: name, protocols: protocols)
                s.accessories[a.id] = a
                s.nextID += 1
                return a
            }
            let told = fanOut(accessory, protocols: protocols, event: .accessoryConnected(accessory), launch: true, ctx)
            return "accessory #\(accessory.id) \"\(name)\" connected (\(protocols.joined(separator: ", "))); told: \(told.isEmpty ? "no app" : told.map(\.rawValue).joined(separator: ", "))"
        case .accessoryDisconnect(let key):
            let s = ctx.state(State.self)
            guard let a = s.accessories[Int(key.trimmingCharacters(in: CharacterSet(charactersIn: "#"))) ?? -1]
                    ?? s.accessories.values.sorted(by: { $0.id < $1.id }).first(where: { $0.protocols.contains(key) || $0.name == key }) else {
                throw ModeCommandError("no connected accessory matches \"\(key)\" (see `apphost accessory list`)")
            }
            ctx.update(State.self) { _ = $0.accessories.removeValue(forKey: a.id) }
            let told = fanOut(a, protocols: a.protocols, event: .accessoryDisconnected(a), launch: false, ctx)
            return "accessory #\(a.id) \"\(a.name)\" disconnected; told: \(told.isEmpty ? "no app" : told.map(\.rawValue).joined(separator: ", "))"
        case .accessorySend(let proto, let bytes):
            guard let a = ctx.state(State.self).accessories.values.sorted(by: { $0.id < $1.id }).first(where: { $0.protocols.contains(proto) }) else {
                throw ModeCommandError("no connected accessory speaks \(proto) (connect one with `apphost accessory connect \(proto)`)")
            }
            let told = fanOut(a, protocols: [proto], event: .accessoryData(accessory: a, protocolString: proto, bytes: bytes), launch: true, ctx)
            return "\(bytes.count) byte(s) from accessory #\(a.id) on \(proto); delivered to: \(told.isEmpty ? "no app" : told.map(\.rawValue).joined(separator: ", "))"
        case .accessoryList:
            return Accessory.text(ctx.state(State.self).accessories.values.sorted { $0.id < $1.id })
        default:
            return nil
        }
    }

    /// Sends `event` to every app listing one of `protocols`, under the mode's rules.
    private func fanOut(_ a: Accessory, protocols: [String], event: ServiceEvent, launch: Bool, _ ctx: ModeContext) -> [BundleID] {
        var told: [BundleID] = []
        for info in ctx.sortedApps where !Set(info.manifest.externalAccessoryProtocols).isDisjoint(with: protocols) {
            let app = info.bundleIdentifier
            if info.declares(.externalAccessory) {
                if !info.isForeground { ctx.emit(.used(app: app, mode: mode, "\(event.name) in the background")) }
                ctx.emit(.deliver(app: app, event, wake: launch ? .launch(.externalAccessory) : .wake, because: "external-accessory: declared protocol"))
                told.append(app)
            } else if info.isForeground {
                ctx.emit(.deliver(app: app, event, wake: .ifRunning, because: "in the foreground"))
                told.append(app)
            } else if info.state != .notRunning {
                ctx.emit(.refused(app: app, mode: mode, "\(event.name) in the background"))
            }
        }
        return told
    }
}
