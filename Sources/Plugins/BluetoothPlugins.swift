import AppHostProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The simulated BLE world both bluetooth plugins share: peripherals from
/// `apphost ble ...` (or a world file), apps scanning, connections, and apps
/// advertising as peripherals.
struct BLEWorld: PluginState {
    struct Advertiser: Sendable {
        var services: [String]
        var localName: String?
        /// Stopped by going to the background without `bluetooth-peripheral`.
        var paused: Bool
    }
    /// One app's scan: its service filter and what it has discovered since it started.
    struct Scan: Sendable, Equatable {
        /// The service UUIDs it scans for (nil: everything).
        var filter: [String]?
        /// Peripherals already reported to it in this scan. Without
        /// `CBCentralManagerScanOptionAllowDuplicatesKey` (not modelled: its default,
        /// false) "the central coalesces multiple discoveries of the same peripheral into a
        /// single discovery event" (Apple, CBCentralManagerScanOptionAllowDuplicatesKey),
        /// and in the background the key is ignored anyway: once per peripheral per scan.
        var discovered: Set<String> = []
    }
    /// Simulated peripherals by id.
    var peripherals: [String: BLEPeripheral] = [:]
    /// Scanning apps and their scans.
    var scanners: [BundleID: Scan] = [:]
    /// Connections: app → peripheral ids.
    var connections: [BundleID: Set<String>] = [:]
    /// Apps advertising as peripherals.
    var advertisers: [BundleID: Advertiser] = [:]

    init() {}

    /// What a central can see: simulated peripherals plus apps advertising (not paused).
    func visible(excluding app: BundleID?) -> [BLEPeripheral] {
        var out = peripherals.values.sorted { $0.id < $1.id }
        for (id, ad) in advertisers.sorted(by: { $0.key < $1.key }) where id != app && !ad.paused {
            out.append(BLEPeripheral(id: "app:\(id)", name: ad.localName ?? id.rawValue, services: ad.services, rssi: -50))
        }
        return out
    }

    static func normalize(_ uuid: String) -> String { uuid.uppercased() }

    /// The world as `ble list` shows it (text and `--json` alike).
    var listing: BLEWorldListing {
        BLEWorldListing(
            peripherals: visible(excluding: nil),
            pausedAdvertisers: advertisers.filter(\.value.paused).keys.sorted(),
            scanners: scanners.sorted { $0.key < $1.key }.map { .init(bundleIdentifier: $0.key, services: $0.value.filter) },
            connections: connections.sorted { $0.key < $1.key }.filter { !$0.value.isEmpty }
                .map { .init(bundleIdentifier: $0.key, peripherals: $0.value.sorted()) })
    }
}

enum BLE {
    /// Offers `peripheral` to every scanning app (except its own advertiser) under the
    /// central rules; returns how many were told.
    @discardableResult
    static func announce(_ peripheral: BLEPeripheral, _ ctx: ModeContext, excluding: BundleID? = nil) -> Int {
        var n = 0
        for app in ctx.state(BLEWorld.self).scanners.keys.sorted() where app != excluding {
            if discover(peripheral, app: app, ctx) { n += 1 }
        }
        return n
    }

    /// Offers every peripheral in range to `app`'s scan (those it has discovered in this
    /// scan already are not reported again); returns how many it discovered.
    @discardableResult
    static func discoverInRange(app: BundleID, _ ctx: ModeContext) -> Int {
        ctx.state(BLEWorld.self).visible(excluding: app).reduce(0) { $0 + (discover($1, app: app, ctx) ? 1 : 0) }
    }

    /// Applies the central rules to one discovery for `app`'s scan: in the foreground
    /// any match of the filter (nil matches all); in the background only with
    /// `bluetooth-central` and a non-nil filter that matches (as iOS), delivered even to
    /// a suspended app. A peripheral the scan has reported already is not reported again
    /// (``BLEWorld/Scan/discovered``); one it could not hear stays undiscovered, so it is
    /// found once the app can hear again (``BluetoothCentralPlugin/appMoved(_:from:to:in:)``).
    @discardableResult
    static func discover(_ p: BLEPeripheral, app: BundleID, _ ctx: ModeContext) -> Bool {
        guard let info = ctx.apps[app], info.state != .notRunning,
              let scan = ctx.state(BLEWorld.self).scanners[app], !scan.discovered.contains(p.id) else { return false }
        let filter = scan.filter
        let matches = filter.map { f in p.services.contains { s in f.contains(BLEWorld.normalize(s)) } } ?? true
        guard matches else { return false }
        if info.isForeground {
            ctx.update(BLEWorld.self) { _ = $0.scanners[app]?.discovered.insert(p.id) }
            ctx.emit(.deliver(app: app, .bleDiscovered(p), wake: .ifRunning, because: "scanning in the foreground"))
            return true
        }
        guard info.declares(.bluetoothCentral) else {
            ctx.emit(.refused(app: app, mode: .bluetoothCentral, "BLE discovery of \(p.id) in the background"))
            return false
        }
        guard filter != nil else {
            ctx.emit(.note(app: app, "BLE discovery of \(p.id) not delivered: a scan without a service filter finds nothing in the background"))
            return false
        }
        ctx.update(BLEWorld.self) { _ = $0.scanners[app]?.discovered.insert(p.id) }
        ctx.emit(.used(app: app, mode: .bluetoothCentral, "BLE discovery of \(p.id) in the background"))
        ctx.emit(.deliver(app: app, .bleDiscovered(p), wake: .wake, because: "bluetooth-central: matching service in the background"))
        return true
    }
}

/// What both bluetooth modes need of the Info.plist: `NSBluetoothAlwaysUsageDescription`.
/// Apple: "This key is required if your app uses the device's Bluetooth interface"; an app
/// that touches Core Bluetooth without it is terminated by iOS ("This app has crashed
/// because it attempted to access privacy-sensitive data without a usage description").
/// So it is an error, as a refusal iOS punishes by termination is in a trace.
enum BluetoothUsage {
    static let key = "NSBluetoothAlwaysUsageDescription"

    static func lint(_ app: LintSubject, _ mode: BackgroundMode) -> [LintFinding] {
        app.missingUsageDescriptions([key], mode: mode, severity: .error) { _ in
            "iOS terminates the app the first time it uses Core Bluetooth (a privacy violation: no usage description), and App Store Connect refuses the build"
        }
    }
}

/// `bluetooth-central`: scanning and connections in the simulated BLE world. In the
/// background, scans return only peripherals matching the app's service filter (a
/// nil filter gets nothing), and notifications from connected peripherals wake a
/// suspended app only with the mode. AF_BLUETOOTH sockets only with a bluetooth mode.
public struct BluetoothCentralPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .bluetoothCentral }
    public var emulation: ModeEmulation { .emulated }
    public var summary: String { "talk to BLE accessories in the background (CBCentralManager)" }
    public var services: [String] { ["CentralManager.scanForPeripherals", "CentralManager.stopScan", "CentralManager.connect", "CentralManager.cancelPeripheralConnection"] }
    public var wakeSources: [String] { ["apphost ble add", "apphost ble notify", "apphost ble remove"] }
    public var sandbox: SandboxGrant { SandboxGrant(socketFamilies: [Int32(AF_BLUETOOTH)]) }

    public func answer(_ query: ModeQuery, in ctx: ModeContext) throws(ModeCommandError) -> ModeAnswer? {
        guard case .bleWorld = query else { return nil }
        return .bleWorld(ctx.state(BLEWorld.self).listing)
    }

    public func lint(_ app: LintSubject) -> [LintFinding] { BluetoothUsage.lint(app, mode) }

    public func handle(_ request: ServiceRequest, from app: BundleID, in ctx: ModeContext) -> ServiceReply? {
        guard let info = ctx.apps[app] else { return nil }
        switch request {
        case .bleScan(let services):
            // A new scan (as a second scanForPeripherals call replaces the first): what is
            // in range is discovered again.
            let filter = services.map { $0.map(BLEWorld.normalize) }
            ctx.update(BLEWorld.self) { $0.scanners[app] = BLEWorld.Scan(filter: filter) }
            if !info.isForeground && !info.declares(.bluetoothCentral) {
                ctx.emit(.refused(app: app, mode: mode, "BLE scan in the background"))
            }
            BLE.discoverInRange(app: app, ctx)
            return .ok
        case .bleStopScan:
            ctx.update(BLEWorld.self) { _ = $0.scanners.removeValue(forKey: app) }
            return .ok
        case .bleConnect(let id):
            guard ctx.state(BLEWorld.self).visible(excluding: app).contains(where: { $0.id == id }) else {
                return .refused(reason: "no peripheral \"\(id)\" is in range (see `apphost ble list`)")
            }
            ctx.update(BLEWorld.self) { _ = $0.connections[app, default: []].insert(id) }
            ctx.emit(.deliver(app: app, .bleConnected(peripheral: id), wake: .ifRunning, because: "connect completed"))
            return .ok
        case .bleDisconnect(let id):
            let had = ctx.update(BLEWorld.self) { $0.connections[app]?.remove(id) != nil }
            guard had else { return .refused(reason: "not connected to \"\(id)\"") }
            ctx.emit(.deliver(app: app, .bleDisconnected(peripheral: id), wake: .ifRunning, because: "disconnected on request"))
            return .ok
        default:
            return nil
        }
    }

    public func handle(_ command: ModeCommand, in ctx: ModeContext) throws(ModeCommandError) -> String? {
        switch command {
        case .bleAdd(var p):
            guard !p.id.isEmpty, !p.id.hasPrefix("app:") else { throw ModeCommandError("a peripheral id must be non-empty and not start with \"app:\"") }
            p.services = p.services.map(BLEWorld.normalize)
            ctx.update(BLEWorld.self) { $0.peripherals[p.id] = p }
            let n = BLE.announce(p, ctx)
            return "peripheral \(p.id) advertising \(p.services.joined(separator: ", ")); discovered by \(n) scanning app(s)"
        case .bleLoad(let list):
            var ids = Set<String>()
            for p in list {
                guard !p.id.isEmpty, ids.insert(p.id).inserted else { throw ModeCommandError("peripheral ids must be unique and non-empty (\"\(p.id)\")") }
            }
            let old = Set(ctx.state(BLEWorld.self).peripherals.keys)
            // In id order, as every walk of the world here: a set's order is its hash
            // seed's, which differs between processes (and so would the events).
            for gone in old.subtracting(ids).sorted() { disconnectAll(gone, ctx) }
            ctx.update(BLEWorld.self) { w in
                w.peripherals = Dictionary(uniqueKeysWithValues: list.map { p in
                    var q = p
                    q.services = q.services.map(BLEWorld.normalize)
                    return (q.id, q)
                })
            }
            var n = 0
            for p in ctx.state(BLEWorld.self).peripherals.values.sorted(by: { $0.id < $1.id }) { n += BLE.announce(p, ctx) }
            return "BLE world loaded: \(list.count) peripheral(s); \(n) discovery event(s)"
        case .bleRemove(let id):
            guard ctx.state(BLEWorld.self).peripherals[id] != nil else { throw ModeCommandError("no peripheral \"\(id)\" (see `apphost ble list`)") }
            ctx.update(BLEWorld.self) { _ = $0.peripherals.removeValue(forKey: id) }
            let n = disconnectAll(id, ctx)
            return "peripheral \(id) removed; \(n) connection(s) dropped"
        case .bleNotify(let id, let characteristic, let value):
            guard ctx.state(BLEWorld.self).visible(excluding: nil).contains(where: { $0.id == id }) else {
                throw ModeCommandError("no peripheral \"\(id)\" (see `apphost ble list`)")
            }
            var delivered: [BundleID] = []
            var held: [BundleID] = []
            for (app, ids) in ctx.state(BLEWorld.self).connections.sorted(by: { $0.key < $1.key }) where ids.contains(id) {
                guard let info = ctx.apps[app] else { continue }
                let event = ServiceEvent.bleNotification(peripheral: id, characteristic: BLEWorld.normalize(characteristic), value: value)
                if info.declares(.bluetoothCentral) {
                    if !info.isForeground { ctx.emit(.used(app: app, mode: mode, "BLE notification from \(id) in the background")) }
                    ctx.emit(.deliver(app: app, event, wake: .wake, because: "bluetooth-central: notification from a connected peripheral"))
                    delivered.append(app)
                } else if info.isRunningCode {
                    ctx.emit(.deliver(app: app, event, wake: .ifRunning, because: "running"))
                    delivered.append(app)
                } else {
                    ctx.emit(.refused(app: app, mode: mode, "BLE notification from \(id) while suspended"))
                    held.append(app)
                }
            }
            var message = "notification \(characteristic) from \(id) (\(value.count) bytes): delivered to \(delivered.isEmpty ? "no app" : delivered.map(\.rawValue).joined(separator: ", "))"
            if !held.isEmpty { message += "; not delivered to \(held.map(\.rawValue).joined(separator: ", ")) (suspended without bluetooth-central)" }
            return message
        case .bleList:
            return ctx.state(BLEWorld.self).listing.text
        default:
            return nil
        }
    }

    /// Going home: said what the scan will not hear. Coming to the front: the scan
    /// hears everything again, so every peripheral in range that matches it and that it
    /// has not discovered yet is discovered now, those that came into range while it
    /// could not hear them included (Apple, "Core Bluetooth Background Processing for iOS
    /// Apps": a foreground-only app "is unable to perform Bluetooth-related tasks, nor is
    /// it aware of any Bluetooth-related events until it resumes to the foreground").
    public func appMoved(_ app: BundleID, from: AppState, to: AppState, in ctx: ModeContext) {
        let front: Set<AppState> = [.active, .inactive]
        guard let scan = ctx.state(BLEWorld.self).scanners[app] else { return }
        if front.contains(to), !front.contains(from) {
            BLE.discoverInRange(app: app, ctx)
            return
        }
        guard to == .background, front.contains(from) else { return }
        let filter = scan.filter
        if ctx.apps[app]?.declares(.bluetoothCentral) != true {
            ctx.emit(.refused(app: app, mode: mode, "BLE scan continued into the background"))
        } else if filter == nil {
            ctx.emit(.note(app: app, "scanning without a service filter: nothing is found in the background"))
        }
    }

    public func appExited(_ app: BundleID, byUser: Bool, in ctx: ModeContext) {
        ctx.update(BLEWorld.self) { w in
            w.scanners.removeValue(forKey: app)
            w.connections.removeValue(forKey: app)
        }
    }

    @discardableResult
    private func disconnectAll(_ id: String, _ ctx: ModeContext) -> Int {
        var n = 0
        for (app, ids) in ctx.state(BLEWorld.self).connections.sorted(by: { $0.key < $1.key }) where ids.contains(id) {
            ctx.update(BLEWorld.self) { _ = $0.connections[app]?.remove(id) }
            let wake: WakePolicy = ctx.apps[app]?.declares(.bluetoothCentral) == true ? .wake : .ifRunning
            ctx.emit(.deliver(app: app, .bleDisconnected(peripheral: id), wake: wake, because: "peripheral went away"))
            n += 1
        }
        return n
    }
}

/// `bluetooth-peripheral`: the app advertises as a BLE peripheral. Advertising
/// continues in the background only with the mode; without it, it pauses until the
/// app is back in the foreground.
public struct BluetoothPeripheralPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .bluetoothPeripheral }
    public var emulation: ModeEmulation { .emulated }
    public var summary: String { "act as a BLE accessory in the background (CBPeripheralManager)" }
    public var services: [String] { ["PeripheralManager.startAdvertising", "PeripheralManager.stopAdvertising"] }
    public var keepsRunning: [String] { [] }
    public var wakeSources: [String] { ["connections from centrals (not simulated)"] }
    public var sandbox: SandboxGrant { SandboxGrant(socketFamilies: [Int32(AF_BLUETOOTH)]) }

    public func lint(_ app: LintSubject) -> [LintFinding] { BluetoothUsage.lint(app, mode) }

    public func handle(_ request: ServiceRequest, from app: BundleID, in ctx: ModeContext) -> ServiceReply? {
        guard let info = ctx.apps[app] else { return nil }
        switch request {
        case .bleStartAdvertising(let services, let localName):
            let paused = !info.isForeground && !info.declares(.bluetoothPeripheral)
            ctx.update(BLEWorld.self) {
                $0.advertisers[app] = BLEWorld.Advertiser(services: services.map(BLEWorld.normalize), localName: localName, paused: paused)
            }
            if paused {
                ctx.emit(.refused(app: app, mode: mode, "BLE advertising in the background"))
            } else if let p = ctx.state(BLEWorld.self).visible(excluding: nil).first(where: { $0.id == "app:\(app)" }) {
                if !info.isForeground { ctx.emit(.used(app: app, mode: mode, "BLE advertising in the background")) }
                BLE.announce(p, ctx, excluding: app)
            }
            return .ok
        case .bleStopAdvertising:
            ctx.update(BLEWorld.self) { _ = $0.advertisers.removeValue(forKey: app) }
            return .ok
        default:
            return nil
        }
    }

    public func appMoved(_ app: BundleID, from: AppState, to: AppState, in ctx: ModeContext) {
        guard let ad = ctx.state(BLEWorld.self).advertisers[app], let info = ctx.apps[app] else { return }
        if to == .background, from == .inactive || from == .active {
            if info.declares(.bluetoothPeripheral) {
                ctx.emit(.used(app: app, mode: mode, "BLE advertising continues in the background"))
            } else {
                ctx.update(BLEWorld.self) { $0.advertisers[app]?.paused = true }
                ctx.emit(.refused(app: app, mode: mode, "BLE advertising paused on going home"))
            }
        } else if to == .active, ad.paused {
            ctx.update(BLEWorld.self) { $0.advertisers[app]?.paused = false }
            ctx.emit(.note(app: app, "BLE advertising resumed in the foreground"))
            if let p = ctx.state(BLEWorld.self).visible(excluding: nil).first(where: { $0.id == "app:\(app)" }) {
                BLE.announce(p, ctx, excluding: app)
            }
        }
    }

    public func appExited(_ app: BundleID, byUser: Bool, in ctx: ModeContext) {
        ctx.update(BLEWorld.self) { _ = $0.advertisers.removeValue(forKey: app) }
    }
}
