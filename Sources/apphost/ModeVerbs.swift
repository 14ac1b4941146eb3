import AppHostProtocol
import ArgumentParser
import Foundation
import Plugins

// The verbs that drive the background-mode plugins in a running daemon: privacy
// decisions, the simulated location, pushes (alert, silent and VoIP: `apphost push`
// is in PushVerb.swift), the BLE world and external accessories. Each sends one
// `ControlRequest.mode(...)` and prints the daemon's answer; input is checked here
// first so mistakes get a clear line before any request is made.

extension AppHostCommand {
    // MARK: - privacy

    struct Privacy: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "privacy",
            abstract: "Grant, revoke or reset an app's access to a privacy-protected service, as `simctl privacy`.",
            discussion: """
                Services: \(ModeHub.privacyServices.joined(separator: ", ")).

                Only location and location-always change what AppHost does today: they are the CLLocationManager authorization (location: when in use; location-always: always), and a running app that uses location is told when it changes. The other services are accepted and kept, for when AppHost offers them.

                \(DeviceArgument.help("apphost privacy booted grant location com.example.app"))

                Examples:
                  apphost privacy grant location-always com.example.probe
                  apphost privacy revoke location com.example.probe
                  apphost privacy reset all
                """,
            subcommands: [Grant.self, Revoke.self, Reset.self])

        struct Grant: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Allow an app to use a service without asking.",
                discussion: """
                    As `simctl privacy <device> grant <service> <bundle-id>`. Services: \(ModeHub.privacyServices.joined(separator: ", ")).

                    Example:
                      apphost privacy grant location-always com.example.probe
                    """)
            @Argument(help: ArgumentHelp("The service: all, location, location-always, camera, ...", valueName: "service"),
                      completion: .list(ModeHub.privacyServices))
            var service: String
            @Argument(help: ArgumentHelp("The app.", valueName: "bundle-id")) var bundleIdentifier: BundleID
            @OptionGroup var state: StateOptions
            func run() throws { try Privacy.perform(.grant, service, bundleIdentifier, state) }
        }

        struct Revoke: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Deny an app all use of a service.",
                discussion: """
                    As `simctl privacy <device> revoke <service> <bundle-id>`. Services: \(ModeHub.privacyServices.joined(separator: ", ")).

                    Example:
                      apphost privacy revoke location com.example.probe
                    """)
            @Argument(help: ArgumentHelp("The service: all, location, location-always, camera, ...", valueName: "service"),
                      completion: .list(ModeHub.privacyServices))
            var service: String
            @Argument(help: ArgumentHelp("The app.", valueName: "bundle-id")) var bundleIdentifier: BundleID
            @OptionGroup var state: StateOptions
            func run() throws { try Privacy.perform(.revoke, service, bundleIdentifier, state) }
        }

        struct Reset: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Forget a decision: the app is asked again on its next use (every app without a bundle id).",
                discussion: """
                    As `simctl privacy <device> reset <service> [<bundle-id>]`. Services: \(ModeHub.privacyServices.joined(separator: ", ")).

                    Examples:
                      apphost privacy reset location com.example.probe
                      apphost privacy reset all
                    """)
            @Argument(help: ArgumentHelp("The service: all, location, location-always, camera, ...", valueName: "service"),
                      completion: .list(ModeHub.privacyServices))
            var service: String
            @Argument(help: ArgumentHelp("The app (every app if omitted).", valueName: "bundle-id")) var bundleIdentifier: BundleID?
            @OptionGroup var state: StateOptions
            func run() throws { try Privacy.perform(.reset, service, bundleIdentifier, state) }
        }

        static func perform(_ action: PrivacyAction, _ service: String, _ bundle: BundleID?, _ state: StateOptions) throws {
            var scope = PrivacyScope.all
            try reportingErrors {
                guard let parsed = PrivacyScope(rawValue: service) else {
                    throw ModeInput.usage("unknown privacy service \"\(service)\"; one of: \(ModeHub.privacyServices.joined(separator: ", "))")
                }
                scope = parsed
            }
            try state.perform(.mode(.privacy(action: action, service: scope, bundleIdentifier: bundle)))
        }
    }

    // MARK: - location

    struct LocationCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "location",
            abstract: "Set the simulated location, play a GPX route, or clear it.",
            discussion: """
                Apps that called startUpdatingLocation and are authorized (apphost privacy grant \
                location|location-always <bundle-id>) get each fix in \
                locationManager(_:didUpdateLocations:): in the foreground; in the background while \
                they still run; and, woken from suspension, only with "location" in \
                UIBackgroundModes, always-authorization and allowsBackgroundLocationUpdates.

                \(DeviceArgument.help("apphost location booted set 37.3349,-122.0090"))

                Examples:
                  apphost location set 37.3349,-122.0090
                  apphost location route manifests/routes/commute.gpx
                  apphost location clear
                """,
            subcommands: [SetFix.self, Route.self, Clear.self])

        struct SetFix: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set",
                abstract: "Move the device to a latitude and longitude (stops a playing route).",
                discussion: """
                    Degrees, latitude -90...90 then longitude -180...180, as one argument \
                    `<lat>,<lon>` or two `<lat> <lon>`; negative numbers need no quoting.

                    Examples:
                      apphost location set 37.3349,-122.0090
                      apphost location set -33.8568 151.2153
                    """)

            // `.allUnrecognized` so that `-33.8568` is a value, not an option.
            @Argument(parsing: .allUnrecognized, help: ArgumentHelp("<lat>,<lon> or <lat> <lon>, in degrees.", valueName: "lat,lon"))
            var coordinates: [String] = []
            @OptionGroup var state: StateOptions

            func run() throws {
                var fix = LocationFix(latitude: 0, longitude: 0)
                try reportingErrors { fix = try ModeInput.coordinates(coordinates) }
                try state.perform(.mode(.locationSet(fix)))
            }
        }

        struct Route: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "route",
                abstract: "Play the points of a GPX file as a route on the host clock.",
                discussion: """
                    Reads <trkpt> track points (else <rtept> route points, else <wpt> waypoints, \
                    as Xcode's location files) with their <ele> and <time>. The first point is \
                    delivered at once; each next one after the gap between its <time> and the \
                    previous point's when both have one, else after --interval seconds. On a \
                    daemon started with --clock virtual, `apphost clock advance` moves through the \
                    route. `apphost location set` or `clear` stops it.

                    Examples:
                      apphost location route manifests/routes/commute.gpx
                      apphost location route waypoints.gpx --interval 5
                    """)

            @Argument(help: ArgumentHelp("A GPX 1.0/1.1 file.", valueName: "file.gpx"))
            var file: String
            @Option(name: .long, help: ArgumentHelp("Seconds between points that have no <time>.", valueName: "seconds"))
            var interval: Double = 1
            @OptionGroup var state: StateOptions

            func run() throws {
                var request = ModeCommand.locationClear
                try reportingErrors {
                    guard interval > 0, interval.isFinite else {
                        throw ModeInput.usage("--interval must be a positive number of seconds, got \(interval)")
                    }
                    _ = try ModeInput.existingFile(file)
                    do throws(GPXError) {
                        let (name, fixes) = try GPX.read(path: file)
                        request = .locationRoute(name: name, fixes: fixes, interval: interval)
                    } catch {
                        throw ModeInput.dataError(error.description)
                    }
                }
                try state.perform(.mode(request))
            }
        }

        struct Clear: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "clear",
                abstract: "Forget the location: no fix, and a playing route stops.",
                discussion: "Example: apphost location clear")
            @OptionGroup var state: StateOptions
            func run() throws { try state.perform(.mode(.locationClear)) }
        }
    }

    // MARK: - ble

    struct BLECommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "ble",
            abstract: "Shape the simulated Bluetooth LE world: peripherals that advertise, connect and notify.",
            discussion: """
                Apps scanning with CBCentralManager discover the peripherals added here: in the \
                foreground any that match their filter; in the background only with \
                "bluetooth-central" in UIBackgroundModes and a scan for specific services (as \
                iOS), which wakes a suspended app. Notifications from a connected peripheral wake \
                a suspended app only with bluetooth-central.

                Examples:
                  apphost ble add hrm-1 --service 180D --name "Polar H10" --rssi -58
                  apphost ble notify hrm-1 2A37 hex:0048
                  apphost ble load manifests/ble/world.json
                  apphost ble list
                """,
            subcommands: [Add.self, Remove.self, Notify.self, Load.self, ListWorld.self])

        struct Add: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "add",
                abstract: "Add (or replace) a peripheral; it advertises at once to scanning apps.",
                discussion: """
                    Service UUIDs are 16-bit (180D), 32-bit (0000180D) or 128-bit \
                    (0000180D-0000-1000-8000-00805F9B34FB), as CBUUID takes them.

                    Examples:
                      apphost ble add hrm-1 --service 180D --service 180F --name "Polar H10"
                      apphost ble add thermo --service 1809 --rssi -75
                    """)
            @Argument(help: ArgumentHelp("The peripheral's identifier (any name; `app:` is reserved for apps advertising).", valueName: "id"))
            var id: String
            @Option(name: .customLong("service"), help: ArgumentHelp("An advertised service UUID (repeatable, at least one).", valueName: "uuid"))
            var services: [String] = []
            @Option(name: .long, help: ArgumentHelp("Its advertised local name.", valueName: "name"))
            var name: String?
            @Option(name: .long, parsing: .unconditional, help: ArgumentHelp(
                "Signal strength in dBm, \(BLEWorldFile.rssiRange.lowerBound)...\(BLEWorldFile.rssiRange.upperBound).",
                valueName: "dBm"))
            var rssi: Int = BLEWorldFile.defaultRSSI
            @OptionGroup var state: StateOptions

            func run() throws {
                var peripheral = BLEPeripheral(id: id, services: [])
                try reportingErrors {
                    guard !id.isEmpty, !id.hasPrefix("app:") else {
                        throw ModeInput.usage("a peripheral id must be non-empty and not start with \"app:\" (reserved for apps advertising)")
                    }
                    guard !services.isEmpty else {
                        throw ModeInput.usage("a peripheral advertises at least one service: apphost ble add \(id) --service 180D")
                    }
                    let uuids = try services.map { s in
                        guard let u = BLEWorldFile.normalizedUUID(s) else { throw ModeInput.usage(ModeInput.notUUID(s, what: "--service")) }
                        return u
                    }
                    guard BLEWorldFile.rssiRange.contains(rssi) else {
                        throw ModeInput.usage("--rssi must be \(BLEWorldFile.rssiRange.lowerBound)...\(BLEWorldFile.rssiRange.upperBound) dBm, got \(rssi)")
                    }
                    peripheral = BLEPeripheral(id: id, name: name, services: uuids, rssi: rssi)
                }
                try state.perform(.mode(.bleAdd(peripheral)))
            }
        }

        struct Remove: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "remove",
                abstract: "Take a peripheral out of range; apps connected to it are told it disconnected.",
                discussion: "Example: apphost ble remove hrm-1")
            @Argument(help: ArgumentHelp("The peripheral's identifier.", valueName: "id"))
            var id: String
            @OptionGroup var state: StateOptions
            func run() throws { try state.perform(.mode(.bleRemove(id: id))) }
        }

        struct Notify: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "notify",
                abstract: "Send a characteristic value from a peripheral to the apps connected to it.",
                discussion: """
                    Apps get peripheral(_:didUpdateValueFor:error:). The value is bytes in hex after \
                    `hex:`, or else the text's UTF-8 bytes.

                    Examples:
                      apphost ble notify hrm-1 2A37 hex:0048        # heart rate 72 bpm
                      apphost ble notify thermo 2A1C hex:00620100ff
                      apphost ble notify tag-1 FEED1 "hello"
                    """)
            @Argument(help: ArgumentHelp("The peripheral's identifier.", valueName: "id"))
            var id: String
            @Argument(help: ArgumentHelp("The characteristic's UUID, e.g. 2A37.", valueName: "characteristic"))
            var characteristic: String
            @Argument(help: ArgumentHelp("hex:0a1b... or text (sent as UTF-8).", valueName: "value"))
            var value: String
            @OptionGroup var state: StateOptions

            func run() throws {
                var request = ModeCommand.bleList
                try reportingErrors {
                    guard let uuid = BLEWorldFile.normalizedUUID(characteristic) else {
                        throw ModeInput.usage(ModeInput.notUUID(characteristic, what: "the characteristic"))
                    }
                    request = .bleNotify(peripheral: id, characteristic: uuid, value: try ModeInput.bytes(value))
                }
                try state.perform(.mode(request))
            }
        }

        struct Load: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "load",
                abstract: "Replace every simulated peripheral with those of a world file.",
                discussion: """
                    The file is JSON:
                      {"peripherals": [
                        {"id": "hrm-1", "name": "Polar H10", "services": ["180D"], "rssi": -58},
                        {"id": "thermo", "services": ["1809"]}
                      ]}
                    id and services are required (ids unique), name and rssi (dBm, default -60) \
                    optional; any other key is an error. Peripherals no longer in the file go out of \
                    range (connected apps are told); the others advertise to scanning apps.

                    Example: apphost ble load manifests/ble/world.json
                    """)
            @Argument(help: ArgumentHelp("A BLE world file (JSON).", valueName: "world.json"))
            var file: String
            @OptionGroup var state: StateOptions

            func run() throws {
                var peripherals: [BLEPeripheral] = []
                try reportingErrors {
                    _ = try ModeInput.existingFile(file)
                    do throws(BLEWorldFileError) {
                        peripherals = try BLEWorldFile.read(path: file)
                    } catch {
                        throw ModeInput.dataError(error.description)
                    }
                }
                try state.perform(.mode(.bleLoad(peripherals)))
            }
        }

        struct ListWorld: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "list",
                abstract: "Show the BLE world: peripherals in range, scanning apps, connections.",
                discussion: "--json prints the same as data (docs/json.md). Example: apphost ble list")
            @OptionGroup var state: StateOptions
            @OptionGroup var output: JSONOption
            func run() throws {
                guard output.json else { return try state.perform(.mode(.bleList)) }
                try reportingErrors {
                    guard case .bleWorld(let world) = try state.query(.bleWorld) else {
                        throw CLIError(description: "unexpected answer from the daemon")
                    }
                    try printJSON(.bleList, world)
                }
            }
        }
    }

    // MARK: - accessory

    struct AccessoryCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "accessory",
            abstract: "Connect, feed and disconnect simulated external (MFi) accessories.",
            discussion: """
                An app that lists an accessory's protocol in UISupportedExternalAccessoryProtocols \
                is told it connected (EAAccessoryDidConnect) and gets its bytes: with \
                "external-accessory" in UIBackgroundModes even when suspended or not running (it \
                is woken or launched in the background); without it only in the foreground.

                Examples:
                  apphost accessory connect com.example.printer --name "Label Printer"
                  apphost accessory send com.example.printer hex:1b40
                  apphost accessory disconnect com.example.printer
                  apphost accessory list
                """,
            subcommands: [Connect.self, Disconnect.self, Send.self, ListAccessories.self])

        struct Connect: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "connect",
                abstract: "Plug in an accessory speaking one or more protocols.",
                discussion: """
                    Prints the accessory's connection id (#1, #2, ...), which `disconnect` takes.

                    Examples:
                      apphost accessory connect com.example.printer
                      apphost accessory connect com.acme.obd com.acme.obd.firmware --name "OBD Dongle"
                    """)
            @Argument(help: ArgumentHelp("Protocol strings, reverse DNS (e.g. com.example.printer).", valueName: "protocol"))
            var protocols: [String]
            @Option(name: .long, help: ArgumentHelp("The accessory's name.", valueName: "name"))
            var name: String = "Accessory"
            @OptionGroup var state: StateOptions

            func run() throws {
                try reportingErrors {
                    guard !protocols.isEmpty else {
                        throw ModeInput.usage("an accessory speaks at least one protocol: apphost accessory connect com.example.printer")
                    }
                    for p in protocols where p.isEmpty || p.contains(where: \.isWhitespace) {
                        throw ModeInput.usage("\"\(p)\" is not a protocol string (reverse DNS without spaces, e.g. com.example.printer)")
                    }
                }
                try state.perform(.mode(.accessoryConnect(name: name, protocols: protocols)))
            }
        }

        struct Disconnect: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "disconnect",
                abstract: "Unplug an accessory, named by connection id (#1), a protocol it speaks, or its name.",
                discussion: """
                    Examples:
                      apphost accessory disconnect '#1'
                      apphost accessory disconnect com.example.printer
                      apphost accessory disconnect "Label Printer"
                    """)
            @Argument(help: ArgumentHelp("#id, a protocol string, or the accessory's name.", valueName: "protocol|#id|name"))
            var accessory: String
            @OptionGroup var state: StateOptions
            func run() throws { try state.perform(.mode(.accessoryDisconnect(accessory))) }
        }

        struct Send: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "send",
                abstract: "Send bytes from the accessory speaking a protocol to the apps that use it.",
                discussion: """
                    The apps get them on their EASession's input stream. Data is bytes in hex after \
                    `hex:`, or else the text's UTF-8 bytes.

                    Examples:
                      apphost accessory send com.example.printer hex:1b40
                      apphost accessory send com.acme.obd "ATZ"
                    """)
            @Argument(help: ArgumentHelp("The protocol string.", valueName: "protocol"))
            var protocolString: String
            @Argument(help: ArgumentHelp("hex:0a1b... or text (sent as UTF-8).", valueName: "data"))
            var data: String
            @OptionGroup var state: StateOptions

            func run() throws {
                var bytes = Data()
                try reportingErrors { bytes = try ModeInput.bytes(data) }
                try state.perform(.mode(.accessorySend(protocolString: protocolString, bytes: bytes)))
            }
        }

        struct ListAccessories: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "list",
                abstract: "Show the connected accessories with their ids and protocols.",
                discussion: "--json prints the same as data (docs/json.md). Example: apphost accessory list")
            @OptionGroup var state: StateOptions
            @OptionGroup var output: JSONOption
            func run() throws {
                guard output.json else { return try state.perform(.mode(.accessoryList)) }
                try reportingErrors {
                    guard case .accessories(let accessories) = try state.query(.accessories) else {
                        throw CLIError(description: "unexpected answer from the daemon")
                    }
                    try printJSON(.accessoryList, accessories)
                }
            }
        }
    }
}


/// Checks and conversions of the mode verbs' input.
enum ModeInput {
    /// APNs' limit for a VoIP push payload (other pushes: 4096).
    static let voipPayloadLimit = 5120

    /// A command-line mistake: one line, exit 64 (EX_USAGE).
    static func usage(_ message: String) -> CLIError { CLIError(description: message, exitCode: 64) }

    /// Bad contents of an input file: exit 65 (EX_DATAERR), as an invalid manifest.
    static func dataError(_ message: String) -> CLIError { CLIError(description: message, exitCode: 65) }

    /// The absolute path of an input file that exists, or exit 66 (EX_NOINPUT).
    static func existingFile(_ path: String) throws(CLIError) -> String {
        let abs = absolute(path)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: abs, isDirectory: &isDirectory) else {
            throw CLIError(description: "\(path): no such file", exitCode: 66)
        }
        guard !isDirectory.boolValue else { throw CLIError(description: "\(path): is a directory, not a file", exitCode: 66) }
        return abs
    }

    static func notUUID(_ text: String, what: String) -> String {
        "\(what) \"\(text)\" is not a Bluetooth UUID (16-bit 180D, 32-bit 0000180D or 128-bit 0000180D-0000-1000-8000-00805F9B34FB)"
    }

    /// `<lat>,<lon>` or `<lat> <lon>` (also `<lat>, <lon>`), checked for range.
    static func coordinates(_ words: [String]) throws(CLIError) -> LocationFix {
        let words = words.filter { $0 != "--" }  // `set -- -33.8 151.2` works too
        let parts = words.joined(separator: ",").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard parts.count == 2 else {
            throw usage(words.isEmpty ? "give a location: apphost location set <lat>,<lon> (e.g. 37.3349,-122.0090)"
                                      : "expected <lat>,<lon> or <lat> <lon>, got \"\(words.joined(separator: " "))\"")
        }
        guard let lat = Double(parts[0]), lat.isFinite else { throw usage("latitude \"\(parts[0])\" is not a number of degrees") }
        guard let lon = Double(parts[1]), lon.isFinite else { throw usage("longitude \"\(parts[1])\" is not a number of degrees") }
        guard (-90...90).contains(lat) else { throw usage("latitude \(parts[0]) is out of range: -90...90 degrees") }
        guard (-180...180).contains(lon) else { throw usage("longitude \(parts[1]) is out of range: -180...180 degrees") }
        return LocationFix(latitude: lat, longitude: lon)
    }

    /// `hex:0a1b...` as bytes (spaces, `:` and `_` between bytes allowed), else the text's UTF-8.
    static func bytes(_ text: String) throws(CLIError) -> Data {
        guard text.lowercased().hasPrefix("hex:") else { return Data(text.utf8) }
        let digits = text.dropFirst(4).filter { !" :_".contains($0) }
        guard !digits.isEmpty else { throw usage("\"\(text)\": no bytes after hex:") }
        guard digits.count % 2 == 0 else { throw usage("\"\(text)\": an odd number of hex digits (two per byte, e.g. hex:0a1b)") }
        var out = Data()
        var i = digits.startIndex
        while i < digits.endIndex {
            let j = digits.index(i, offsetBy: 2)
            guard let byte = UInt8(digits[i..<j], radix: 16) else {
                throw usage("\"\(text)\": \"\(digits[i..<j])\" is not a hex byte (0-9, a-f)")
            }
            out.append(byte)
            i = j
        }
        return out
    }

    /// The bytes of `source` (a file, or `-` for standard input) and its name for messages.
    static func readPayload(_ source: String) throws(CLIError) -> (data: Data, label: String) {
        if source == "-" { return (FileHandle.standardInput.readDataToEndOfFile(), "standard input") }
        let path = try existingFile(source)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError(description: "\(source): cannot read the file", exitCode: 66)
        }
        return (data, source)
    }

    /// A JSON-object payload from `source` (a file, or `-` for standard input), at most `limit` bytes.
    static func payload(_ source: String, limit: Int) throws(CLIError) -> String {
        let (data, label) = try readPayload(source)
        guard !data.allSatisfy({ [0x20, 0x0A, 0x0D, 0x09].contains($0) }) else {
            throw dataError("\(label): empty payload; expected a JSON object, e.g. {\"caller\": \"Ada\"}")
        }
        guard data.count <= limit else {
            throw dataError("\(label): the payload is \(data.count) bytes; a VoIP push carries at most \(limit)")
        }
        guard let text = String(data: data, encoding: .utf8) else { throw dataError("\(label): the payload is not UTF-8 text") }
        // Foundation on Linux takes trailing commas; APNs does not.
        if let problem = APNsPayload.strictProblem(data) {
            throw dataError("\(label): the payload is not strict JSON: \(problem)")
        }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw dataError("\(label): the payload is not valid JSON: \(BLEWorldFile.jsonProblem(error, in: data))")
        }
        guard object is [String: Any] else { throw dataError("\(label): the payload must be a JSON object ({...}), not a \(object is [Any] ? "list" : "single value")") }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    // MARK: background verbs

    /// `text` as a bundle identifier, checked here where it comes in (an operand, a
    /// payload's field) by ``BundleID``'s rule; else a one-line usage error that says why.
    static func bundleID(_ text: String, from place: String? = nil) throws(CLIError) -> BundleID {
        do {
            return try BundleID(validating: text)
        } catch {
            let what = place ?? "\"\(text)\""
            throw usage("\(what) is not a bundle identifier: \(error)")
        }
    }

    /// `word` as one of `choices` (case-insensitive), else a one-line usage error.
    static func choice<T>(_ word: String, _ choices: KeyValuePairs<String, T>, what: String) throws(CLIError) -> T {
        for (name, value) in choices where name == word.lowercased() { return value }
        let names = choices.map(\.key).joined(separator: "|")
        throw usage("\(what): expected \(names), got \"\(word)\"")
    }

    /// `on|off`.
    static func onOff(_ word: String, what: String) throws(CLIError) -> Bool {
        try choice(word, ["on": true, "off": false], what: what)
    }
}

extension BundleID: ExpressibleByArgument {
    /// A bundle id operand; ArgumentParser refuses a malformed one before anything is sent.
    public init?(argument: String) { self.init(argument) }

    /// Completes to the installed apps (see ``Completion``).
    public static var defaultCompletionKind: CompletionKind { Completion.bundleIdentifiers }
}
