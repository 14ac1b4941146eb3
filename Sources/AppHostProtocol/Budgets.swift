import Foundation

/// The name of a budget in a ``BudgetProfile``: the key of the config file's `budgets`
/// object, of `apphost profile show` and of a report's budget. Every key has a value in
/// every profile.
public enum BudgetKey: String, CaseIterable, Codable, Sendable {
    /// See ``BudgetProfile/backgroundTask``.
    case backgroundTask
    /// See ``BudgetProfile/fetch``.
    case fetch
    /// See ``BudgetProfile/silentPush``.
    case silentPush
    /// See ``BudgetProfile/didEnterBackground``.
    case didEnterBackground
    /// See ``BudgetProfile/launch``.
    case launch
    /// See ``BudgetProfile/foregroundHang``.
    case foregroundHang
    /// See ``BudgetProfile/expirationWarning``.
    case expirationWarning
    /// See ``BudgetProfile/heartbeatInterval``.
    case heartbeatInterval
    /// See ``BudgetProfile/wake``.
    case wake
    /// See ``BudgetProfile/audioIdle``.
    case audioIdle
    /// See ``BudgetProfile/voipReport``.
    case voipReport
    /// See ``BudgetProfile/fetchMinimum``.
    case fetchMinimum
    /// See ``BudgetProfile/fetchCoalescing``.
    case fetchCoalescing
    /// See ``BudgetProfile/silentPushesPerHour``.
    case silentPushesPerHour
    /// See ``BudgetProfile/processing``.
    case processing

    /// Where the value comes from (IOS-MODEL.md); UNCONFIRMED ones are profile settings by design.
    public var note: String {
        switch self {
        case .backgroundTask: "beginBackgroundTask: ~600 s iOS ≤ 6, 180 s iOS 7–12, ~30 s iOS 13+ (DTS logs)"
        case .fetch: "performFetch: up to 30 s (Apple doc)"
        case .silentPush: "30 s widely cited — UNCONFIRMED"
        case .didEnterBackground: "\"has five seconds to perform any tasks and return\" (Apple doc)"
        case .launch: "~20 s commonly said — UNCONFIRMED (\"not formally documented\")"
        case .foregroundHang: "scene-update watchdog 10 s seen in crash logs; an active app's main run loop blocked this long is killed, and so is a willResignActive on the way home"
        case .expirationWarning: "handlers run \"shortly before\" expiry — lead time UNCONFIRMED"
        case .heartbeatInterval: "unused since issue 18 (the main run loop stamps its turns; nothing probes it); kept so config files naming it still load"
        case .wake: "~10 s for a BLE or accessory event handler, widely cited — UNCONFIRMED"
        case .audioIdle: "AppHost's own: an audio app that stopped playing is suspended after this"
        case .voipReport: "callservicesd checks ~7 s after a VoIP push (Apple DTS, forum 817976)"
        case .fetchMinimum: "iOS decides; AppHost's own: 15 min between fetches at the minimum interval"
        case .fetchCoalescing: "AppHost's own: due fetches and tasks within 5 min run together, when the last of them is due (only delays: never before the interval or earliestBeginDate)"
        case .silentPushesPerHour: "\"two or three per hour\" (Apple, Pushing background updates) — UNCONFIRMED"
        case .processing: "BGProcessingTask: \"several minutes\" — UNCONFIRMED"
        }
    }
}

/// The time budgets the host enforces, as one table of named profiles.
///
/// Values are seconds. Where IOS-MODEL.md marks a value UNCONFIRMED, the profile
/// says so in ``BudgetProfile/notes`` and `apphost profile show` prints it.
public struct BudgetProfile: Codable, Sendable, Equatable {
    /// Profile name (`ios6`, `ios7`, `ios13`, or `custom` after overrides).
    public var name: String
    /// Background time for `beginBackgroundTask`, counted from entering the background.
    public var backgroundTask: Double
    /// `performFetch` completion budget.
    public var fetch: Double
    /// Silent push handler budget.
    public var silentPush: Double
    /// `didEnterBackground` must return within this.
    public var didEnterBackground: Double
    /// `didFinishLaunching` must return within this.
    public var launch: Double
    /// An active app whose main run loop stays in one turn (blocked) this long is
    /// killed; the host reads the app's run-loop stamp at this deadline.
    public var foregroundHang: Double
    /// How long before the background budget ends the expiration handlers run.
    public var expirationWarning: Double
    /// Unused since issue 18 (heartbeats are gone: the app's run loop stamps its
    /// turns and the host reads the stamp at its ``foregroundHang`` deadline). Kept so
    /// configs and profiles that name it still load.
    public var heartbeatInterval: Double
    /// A handler an app is woken for (a BLE, accessory or location event) must return within this.
    public var wake: Double
    /// With the audio mode: how long after it stops playing an app is still kept running.
    public var audioIdle: Double
    /// After a VoIP push: the app must report an incoming call within this.
    public var voipReport: Double
    /// `UIApplicationBackgroundFetchIntervalMinimum`: the shortest time between two fetches.
    public var fetchMinimum: Double
    /// Fetches (and BGTasks) due within this of each other run together.
    public var fetchCoalescing: Double
    /// Silent pushes delivered to one app per hour before more are held.
    public var silentPushesPerHour: Double
    /// Run time a BGProcessingTask gets before its expiration handler.
    public var processing: Double
    /// The device's memory in bytes, an iPhone of the profile's era (AppHost's own figure:
    /// Apple does not publish RAM sizes). Memory pressure is the apps' footprints against
    /// it; `"memory": {"device": ...}` in the host config overrides it.
    public var deviceMemory: UInt64
    /// Whether region and significant-change events relaunch an app the user force-quit
    /// (before the user opens it again). The sources differ by release (IOS-MODEL §1.13):
    /// iOS 26 does not (Apple developer forums thread 826964: "user-terminated apps do not
    /// receive SLC until reopened/rebooted"; regions likewise); earlier releases did
    /// (Apple, `startMonitoringSignificantLocationChanges()`: "if your app is subsequently
    /// terminated, the system automatically relaunches the app"). `ios13` (iOS 13 and
    /// later, the default) follows the newest; `ios6` and `ios7` relaunch.
    /// `"rules": {"locationRelaunchAfterUserTerminate": true}` in --config overrides.
    public var locationRelaunchAfterUserTerminate: Bool

    /// Where ``locationRelaunchAfterUserTerminate`` comes from, as `profile show` prints it.
    public static let locationRelaunchNote = "region and significant-change events relaunch an app the user force-quit: earlier releases did (Apple, startMonitoringSignificantLocationChanges); iOS 26 does not until the user opens it (Apple forums 826964)"

    /// Every budget key, in table order.
    public static var keys: [BudgetKey] { BudgetKey.allCases }

    public init(name: String, backgroundTask: Double, fetch: Double = 30, silentPush: Double = 30,
                didEnterBackground: Double = 5, launch: Double = 20, foregroundHang: Double = 10,
                expirationWarning: Double = 5, heartbeatInterval: Double = 5,
                wake: Double = 10, audioIdle: Double = 10, voipReport: Double = 7,
                fetchMinimum: Double = 900, fetchCoalescing: Double = 300, silentPushesPerHour: Double = 3,
                processing: Double = 300, deviceMemory: UInt64 = 3 << 30, locationRelaunchAfterUserTerminate: Bool = false) {
        self.deviceMemory = deviceMemory
        self.locationRelaunchAfterUserTerminate = locationRelaunchAfterUserTerminate
        self.fetchMinimum = fetchMinimum
        self.fetchCoalescing = fetchCoalescing
        self.silentPushesPerHour = silentPushesPerHour
        self.processing = processing
        self.wake = wake
        self.audioIdle = audioIdle
        self.voipReport = voipReport
        self.name = name
        self.backgroundTask = backgroundTask
        self.fetch = fetch
        self.silentPush = silentPush
        self.didEnterBackground = didEnterBackground
        self.launch = launch
        self.foregroundHang = foregroundHang
        self.expirationWarning = expirationWarning
        self.heartbeatInterval = heartbeatInterval
    }

    /// iOS 6 and earlier: about 600 s of background time; 1 GiB, an iPhone 5.
    public static let ios6 = BudgetProfile(name: "ios6", backgroundTask: 600, deviceMemory: 1 << 30, locationRelaunchAfterUserTerminate: true)
    /// iOS 7 to 12: 180 s; 2 GiB, an iPhone 6s.
    public static let ios7 = BudgetProfile(name: "ios7", backgroundTask: 180, deviceMemory: 2 << 30, locationRelaunchAfterUserTerminate: true)
    /// iOS 13 and later: about 30 s (the default); 3 GiB, an iPhone XR.
    public static let ios13 = BudgetProfile(name: "ios13", backgroundTask: 30, deviceMemory: 3 << 30)

    /// The named profiles.
    public static let all: [BudgetProfile] = [.ios6, .ios7, .ios13]
    /// The default profile.
    public static let `default` = ios13

    /// A named profile, or nil.
    public static func named(_ name: String) -> BudgetProfile? {
        all.first { $0.name == name }
    }

    /// A value by key, in seconds (a count for ``BudgetKey/silentPushesPerHour``).
    public subscript(key: BudgetKey) -> Double {
        get {
            switch key {
            case .backgroundTask: backgroundTask
            case .fetch: fetch
            case .silentPush: silentPush
            case .didEnterBackground: didEnterBackground
            case .launch: launch
            case .foregroundHang: foregroundHang
            case .expirationWarning: expirationWarning
            case .heartbeatInterval: heartbeatInterval
            case .wake: wake
            case .audioIdle: audioIdle
            case .voipReport: voipReport
            case .fetchMinimum: fetchMinimum
            case .fetchCoalescing: fetchCoalescing
            case .silentPushesPerHour: silentPushesPerHour
            case .processing: processing
            }
        }
        set {
            switch key {
            case .backgroundTask: backgroundTask = newValue
            case .fetch: fetch = newValue
            case .silentPush: silentPush = newValue
            case .didEnterBackground: didEnterBackground = newValue
            case .launch: launch = newValue
            case .foregroundHang: foregroundHang = newValue
            case .expirationWarning: expirationWarning = newValue
            case .heartbeatInterval: heartbeatInterval = newValue
            case .wake: wake = newValue
            case .audioIdle: audioIdle = newValue
            case .voipReport: voipReport = newValue
            case .fetchMinimum: fetchMinimum = newValue
            case .fetchCoalescing: fetchCoalescing = newValue
            case .silentPushesPerHour: silentPushesPerHour = newValue
            case .processing: processing = newValue
            }
        }
    }

    /// Budget `key` as a duration: the one way host, lifecycle and plugins read a budget.
    /// Whole milliseconds, kept within `0...Duration.longestWait` (a validated profile is
    /// always inside; nothing traps on a value that is not). Every key has a value, so
    /// there is no default to disagree about.
    public func duration(_ key: BudgetKey) -> Duration {
        Duration(clampingSeconds: self[key])
    }
}
