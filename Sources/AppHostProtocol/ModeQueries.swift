import Foundation

// Questions to the background-mode plugins whose answers are data, not sentences:
// what `apphost settings show`, `device show`, `fetch schedule` and `bgtask list`
// print with `--json`. The text those verbs print is rendered from the same values,
// so the two never disagree.

/// A question for the plugins (``ControlRequest/modeQuery(_:)``), answered with a
/// ``ModeAnswer`` (``ControlResponse/modeAnswer(_:)``).
public enum ModeQuery: Codable, Sendable, Equatable {
    /// The Background App Refresh switches and Low Power Mode (`settings show`).
    case settings
    /// The simulated device: power, network, lock, memory (`device show`).
    case device
    /// Every app's next background fetch and why (`fetch schedule`).
    case fetchSchedule
    /// Pending and running BGTaskScheduler tasks, of every app or one (`bgtask list`).
    case bgTasks(bundleIdentifier: BundleID?)
    /// The simulated BLE world: peripherals, scanning apps, connections (`ble list`).
    case bleWorld
    /// The connected external accessories (`accessory list`).
    case accessories
}

/// The answer to a ``ModeQuery``.
public enum ModeAnswer: Codable, Sendable, Equatable {
    case settings(RefreshSettings)
    case device(DeviceConditions)
    case fetchSchedule(FetchSchedule)
    case bgTasks([BGTaskListing])
    case bleWorld(BLEWorldListing)
    case accessories([Accessory])
}

/// The simulated BLE world (`apphost ble list`).
public struct BLEWorldListing: Codable, Sendable, Equatable {
    /// A scanning app and its service filter.
    public struct Scanner: Codable, Sendable, Equatable {
        public var bundleIdentifier: BundleID
        /// The services it scans for; nil: everything (which finds nothing in the background).
        public var services: [String]?
        public init(bundleIdentifier: BundleID, services: [String]?) {
            self.bundleIdentifier = bundleIdentifier
            self.services = services
        }
    }
    /// An app's connected peripherals.
    public struct Connection: Codable, Sendable, Equatable {
        public var bundleIdentifier: BundleID
        public var peripherals: [String]
        public init(bundleIdentifier: BundleID, peripherals: [String]) {
            self.bundleIdentifier = bundleIdentifier
            self.peripherals = peripherals
        }
    }
    /// What a central can see: the simulated peripherals (id order), then the apps
    /// advertising (`app:<bundle id>`).
    public var peripherals: [BLEPeripheral]
    /// Apps whose advertising is paused: in the background without `bluetooth-peripheral`.
    public var pausedAdvertisers: [BundleID]
    public var scanners: [Scanner]
    public var connections: [Connection]

    public init(peripherals: [BLEPeripheral], pausedAdvertisers: [BundleID], scanners: [Scanner], connections: [Connection]) {
        self.peripherals = peripherals
        self.pausedAdvertisers = pausedAdvertisers
        self.scanners = scanners
        self.connections = connections
    }

    /// The lines `ble list` prints.
    public var text: String {
        var lines = ["peripherals:"]
        for p in peripherals {
            lines.append("  \(p.id)\(p.name.map { " \"\($0)\"" } ?? "") services \(p.services.isEmpty ? "-" : p.services.joined(separator: ",")) rssi \(p.rssi)")
        }
        for app in pausedAdvertisers {
            lines.append("  app:\(app) (advertising paused: in the background without bluetooth-peripheral)")
        }
        lines.append("scanning:")
        for s in scanners {
            lines.append("  \(s.bundleIdentifier) filter \(s.services.map { $0.joined(separator: ",") } ?? "nil (all; nothing in the background)")")
        }
        lines.append("connections:")
        for c in connections {
            lines.append("  \(c.bundleIdentifier) → \(c.peripherals.joined(separator: ", "))")
        }
        return lines.joined(separator: "\n")
    }
}

extension Accessory {
    /// The lines `accessory list` prints.
    public static func text(_ accessories: [Accessory]) -> String {
        if accessories.isEmpty { return "no accessory connected" }
        return accessories.map { "#\($0.id) \"\($0.name)\" \($0.protocols.joined(separator: ", "))" }.joined(separator: "\n")
    }
}

/// The Settings switches that gate background work (`apphost settings show`).
public struct RefreshSettings: Codable, Sendable, Equatable {
    /// Settings > General > Background App Refresh, the global switch.
    public var backgroundRefresh: Bool
    /// The apps whose own switch is off, in id order.
    public var backgroundRefreshOffFor: [BundleID]
    /// Low Power Mode (background refresh restricted for every app while on).
    public var lowPowerMode: Bool
    /// The host's configuration restricts background refresh (`"backgroundRefresh": "restricted"`).
    public var restrictedByPolicy: Bool

    public init(backgroundRefresh: Bool, backgroundRefreshOffFor: [BundleID], lowPowerMode: Bool, restrictedByPolicy: Bool) {
        self.backgroundRefresh = backgroundRefresh
        self.backgroundRefreshOffFor = backgroundRefreshOffFor
        self.lowPowerMode = lowPowerMode
        self.restrictedByPolicy = restrictedByPolicy
    }
}

/// The simulated device (`apphost device show`).
public struct DeviceConditions: Codable, Sendable, Equatable {
    /// Where the power comes from.
    public enum Power: String, Codable, Sendable, CaseIterable { case plugged, battery }
    /// The lock, as data protection sees it.
    public enum Lock: String, Codable, Sendable, CaseIterable {
        case unlocked
        /// Locked, and the grace after the lock is over: complete-protection files are closed.
        case locked
        /// Locked, within the grace after the lock: protected files close when it ends.
        case lockedGrace
        /// Locked and not unlocked since the host started (a device that booted locked).
        case lockedSinceBoot
    }
    public var power: Power
    public var network: DeviceNetwork
    public var lock: Lock
    /// The device memory and its pressure; the host fills it in (nil only inside the plugins).
    public var memory: DeviceMemoryReading?

    public init(power: Power, network: DeviceNetwork, lock: Lock, memory: DeviceMemoryReading? = nil) {
        self.power = power
        self.network = network
        self.lock = lock
        self.memory = memory
    }
}

/// The device memory as the host last computed it.
public struct DeviceMemoryReading: Codable, Sendable, Equatable {
    /// Bytes in use by the apps (the sum of their footprints).
    public var inUse: UInt64
    /// The device's memory in bytes.
    public var device: UInt64
    /// `inUse` as a share of `device`, in percent (rounded).
    public var percent: Int
    /// The pressure level in force.
    public var pressure: MemoryPressureLevel
    /// The level forced with `apphost device memory` (nil: the level is computed from the
    /// footprints); `pressure` is the higher of the two.
    public var forced: MemoryPressureLevel?
    /// The shares at which the computed level becomes warning and critical, in percent.
    public var warningPercent: Int
    public var criticalPercent: Int
    /// The kernel's PSI file the host also watches, if it does.
    public var psiPath: String?

    public init(inUse: UInt64, device: UInt64, percent: Int, pressure: MemoryPressureLevel, forced: MemoryPressureLevel?,
                warningPercent: Int, criticalPercent: Int, psiPath: String?) {
        self.inUse = inUse
        self.device = device
        self.percent = percent
        self.pressure = pressure
        self.forced = forced
        self.warningPercent = warningPercent
        self.criticalPercent = criticalPercent
        self.psiPath = psiPath
    }
}

/// Every fetching app's next background fetch (`apphost fetch schedule`).
public struct FetchSchedule: Codable, Sendable, Equatable {
    /// Apps that declare `fetch` or set an interval, in id order.
    public var apps: [FetchScheduleEntry]
    /// Fetches due within this many seconds of the earliest run together.
    public var coalescingSeconds: Double

    public init(apps: [FetchScheduleEntry], coalescingSeconds: Double) {
        self.apps = apps
        self.coalescingSeconds = coalescingSeconds
    }
}

/// One app's place in the fetch schedule.
public struct FetchScheduleEntry: Codable, Sendable, Equatable {
    public enum Status: String, Codable, Sendable, CaseIterable {
        /// A fetch is scheduled (`nextInSeconds`; 0: due now).
        case scheduled
        /// A fetch is running (`runningForSeconds`).
        case running
        /// Never fetched: no `fetch` mode, or no minimum interval (`reason`).
        case never
        /// Not scheduled for now: Background App Refresh, or the user terminated it (`reason`).
        case notScheduled
    }
    /// Why an app is not scheduled.
    public enum Reason: String, Codable, Sendable, CaseIterable {
        case noFetchMode, noMinimumInterval, backgroundRefreshUnavailable, terminatedByUser
    }
    public var bundleIdentifier: BundleID
    public var status: Status
    /// For `never` and `notScheduled`.
    public var reason: Reason?
    /// `reason` in words (`backgroundRefreshUnavailable` says which switch).
    public var explanation: String?
    /// Seconds until the next fetch (`scheduled`; 0 when due now).
    public var nextInSeconds: Double?
    /// The interval in force, in seconds, and the backoff factor it is multiplied by.
    public var intervalSeconds: Double?
    public var backoff: Int
    /// Seconds since the last fetch began (nil: none yet; the schedule counts from when the interval was set).
    public var lastFetchAgoSeconds: Double?
    /// What the last fetch's completion gave, and how long it took.
    public var lastResult: FetchResult?
    public var lastDurationSeconds: Double?
    /// How long the running fetch has run (`running`).
    public var runningForSeconds: Double?

    public init(bundleIdentifier: BundleID, status: Status, reason: Reason? = nil, explanation: String? = nil,
                nextInSeconds: Double? = nil, intervalSeconds: Double? = nil, backoff: Int = 1,
                lastFetchAgoSeconds: Double? = nil, lastResult: FetchResult? = nil, lastDurationSeconds: Double? = nil,
                runningForSeconds: Double? = nil) {
        self.bundleIdentifier = bundleIdentifier
        self.status = status
        self.reason = reason
        self.explanation = explanation
        self.nextInSeconds = nextInSeconds
        self.intervalSeconds = intervalSeconds
        self.backoff = backoff
        self.lastFetchAgoSeconds = lastFetchAgoSeconds
        self.lastResult = lastResult
        self.lastDurationSeconds = lastDurationSeconds
        self.runningForSeconds = runningForSeconds
    }
}

/// One pending or running BGTaskScheduler task (`apphost bgtask list`).
public struct BGTaskListing: Codable, Sendable, Equatable {
    public enum State: String, Codable, Sendable, CaseIterable { case running, pending }
    public var bundleIdentifier: BundleID
    /// The task identifier (as in `BGTaskSchedulerPermittedIdentifiers`).
    public var identifier: String
    public var kind: BGTaskRequestInfo.Kind
    public var state: State
    /// `running`: for how long, and whether its expiration handler was called.
    public var runningForSeconds: Double?
    public var expirationHandlerCalled: Bool?
    /// `pending`: what it waits for (nil: nothing), else seconds until it is due (0: now).
    public var waitingFor: String?
    public var dueInSeconds: Double?
    /// The request's conditions (processing tasks).
    public var requiresExternalPower: Bool
    public var requiresNetworkConnectivity: Bool

    public init(bundleIdentifier: BundleID, identifier: String, kind: BGTaskRequestInfo.Kind, state: State,
                runningForSeconds: Double? = nil, expirationHandlerCalled: Bool? = nil, waitingFor: String? = nil,
                dueInSeconds: Double? = nil, requiresExternalPower: Bool = false, requiresNetworkConnectivity: Bool = false) {
        self.bundleIdentifier = bundleIdentifier
        self.identifier = identifier
        self.kind = kind
        self.state = state
        self.runningForSeconds = runningForSeconds
        self.expirationHandlerCalled = expirationHandlerCalled
        self.waitingFor = waitingFor
        self.dueInSeconds = dueInSeconds
        self.requiresExternalPower = requiresExternalPower
        self.requiresNetworkConnectivity = requiresNetworkConnectivity
    }
}
