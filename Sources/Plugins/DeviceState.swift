import AppHostProtocol

/// The simulated device and the Background App Refresh settings
/// (`apphost settings`, `apphost device`), shared by the fetch, processing and
/// remote-notification plugins. Kept by the host in its database.
public struct DeviceState: PluginState {
    /// On external power.
    public var pluggedIn = true
    public var network: DeviceNetwork = .wifi
    /// Low Power Mode: background refresh is restricted.
    public var lowPower = false
    /// Settings > General > Background App Refresh, the global switch, off.
    public var refreshOffGlobally = false
    /// The per-app switches that are off.
    public var refreshOff: Set<BundleID> = []
    /// A configuration policy restricts background refresh (`"backgroundRefresh": "restricted"`).
    public var policyRestricted = false
    /// The device is locked (`apphost device lock`).
    public var locked = false
    /// The device was unlocked since the host started (a host start is a boot; one that
    /// starts unlocked counts as unlocked at once, as if the user had entered the passcode).
    public var unlockedSinceBoot = true
    /// The lock's grace is over: iOS discards the complete class's key "shortly after the
    /// user locks a device (10 seconds ...)", and only then are those files closed.
    /// False while unlocked and during the grace; true for a host that starts locked.
    public var lockGraceOver = false

    /// Which protected files are closed now.
    public var protectionLevel: DataProtectionLevel {
        !locked || !lockGraceOver ? .open : unlockedSinceBoot ? .locked : .lockedSinceBoot
    }

    public init() {}

    /// `backgroundRefreshStatus` for `app`.
    public func refreshStatus(_ app: BundleID) -> BackgroundRefreshStatus {
        if lowPower || policyRestricted { return .restricted }
        if refreshOffGlobally || refreshOff.contains(app) { return .denied }
        return .available
    }

    /// Why refresh is not available, in words; nil when it is.
    public func refreshBlocked(_ app: BundleID) -> String? {
        if policyRestricted { return "background refresh is restricted by the host's configuration" }
        if lowPower { return "Low Power Mode is on (background refresh restricted)" }
        if refreshOffGlobally { return "Background App Refresh is off for every app" }
        if refreshOff.contains(app) { return "Background App Refresh is off for this app" }
        return nil
    }

    /// The switches, for `settings show`.
    public var settings: RefreshSettings {
        RefreshSettings(backgroundRefresh: !refreshOffGlobally, backgroundRefreshOffFor: refreshOff.sorted(),
                        lowPowerMode: lowPower, restrictedByPolicy: policyRestricted)
    }

    /// Power, network and lock, for `device show` (the host adds the memory).
    public var conditions: DeviceConditions {
        let lock: DeviceConditions.Lock = !locked ? .unlocked : !unlockedSinceBoot ? .lockedSinceBoot : lockGraceOver ? .locked : .lockedGrace
        return DeviceConditions(power: pluggedIn ? .plugged : .battery, network: network, lock: lock)
    }

    /// Applies a persisted setting (`key`, `value`); false if the key is not a device setting.
    mutating func restore(_ key: String, _ value: String) -> Bool {
        switch key {
        case "device.power": pluggedIn = value == "plugged"
        case "device.network": network = DeviceNetwork(rawValue: value) ?? .wifi
        // A host stopped while the device was locked starts as a device that booted locked.
        case "device.locked": locked = value == "on"; unlockedSinceBoot = !locked; lockGraceOver = locked
        case "settings.lowPower": lowPower = value == "on"
        case "settings.backgroundRefresh": refreshOffGlobally = value == "off"
        case _ where key.hasPrefix("settings.backgroundRefresh."):
            // A key read back from the database: one that names no app is left alone.
            guard let app = BundleID(String(key.dropFirst("settings.backgroundRefresh.".count))) else { return false }
            if value == "off" { refreshOff.insert(app) } else { refreshOff.remove(app) }
        default: return false
        }
        return true
    }
}

extension RefreshSettings {
    /// One line per setting, as `settings show` prints them.
    public var text: String {
        var lines = ["background refresh: \(backgroundRefresh ? "on" : "off") (global)"]
        if !backgroundRefreshOffFor.isEmpty { lines.append("background refresh off for: \(backgroundRefreshOffFor.map(\.rawValue).joined(separator: ", "))") }
        lines.append("low power mode: \(lowPowerMode ? "on" : "off")")
        if restrictedByPolicy { lines.append("policy: background refresh restricted by the host's configuration") }
        return lines.joined(separator: "\n")
    }
}

extension DeviceConditions {
    /// Power, network and lock, one line each, as `device show` prints them (before the memory).
    public var text: String {
        let lockText = switch lock {
        case .unlocked: "unlocked"
        case .lockedSinceBoot: "locked (not unlocked since the host started)"
        case .locked: "locked"
        case .lockedGrace: "locked (protected files close when the grace after the lock ends)"
        }
        return "power: \(power == .plugged ? "plugged in" : "battery")\nnetwork: \(network.rawValue)\nlock: \(lockText)"
    }
}
