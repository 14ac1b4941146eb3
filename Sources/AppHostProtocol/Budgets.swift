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
        case .fetchCoalescing: "AppHost's own: due fetches and tasks within 5 min run together"
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

    /// Every budget key, in table order.
    public static var keys: [BudgetKey] { BudgetKey.allCases }

    public init(name: String, backgroundTask: Double, fetch: Double = 30, silentPush: Double = 30,
                didEnterBackground: Double = 5, launch: Double = 20, foregroundHang: Double = 10,
                expirationWarning: Double = 5, heartbeatInterval: Double = 5,
                wake: Double = 10, audioIdle: Double = 10, voipReport: Double = 7,
                fetchMinimum: Double = 900, fetchCoalescing: Double = 300, silentPushesPerHour: Double = 3,
                processing: Double = 300, deviceMemory: UInt64 = 3 << 30) {
        self.deviceMemory = deviceMemory
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
    public static let ios6 = BudgetProfile(name: "ios6", backgroundTask: 600, deviceMemory: 1 << 30)
    /// iOS 7 to 12: 180 s; 2 GiB, an iPhone 6s.
    public static let ios7 = BudgetProfile(name: "ios7", backgroundTask: 180, deviceMemory: 2 << 30)
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

    /// Checks every value is a finite, positive number of seconds and the warning fits the budget.
    public func validate() throws(BudgetError) {
        for key in Self.keys {
            let v = self[key]
            guard v.isFinite, v > 0 else {
                throw BudgetError(message: "budget \(key.rawValue) must be a positive number of seconds, got \(v)")
            }
        }
        guard expirationWarning < backgroundTask else {
            throw BudgetError(message: "expirationWarning (\(expirationWarning) s) must be shorter than backgroundTask (\(backgroundTask) s)")
        }
    }
}

/// A bad profile, config file or duration.
public struct BudgetError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}

/// The host configuration file (JSON): a profile, single overrides, and where apps'
/// audio goes.
///
/// ```json
/// { "profile": "ios7", "budgets": { "backgroundTask": "45s", "launch": 10 }, "audioSink": "null" }
/// ```
public struct HostConfigFile: Sendable, Equatable {
    public var profile: String?
    public var budgets: [BudgetKey: Double]
    /// `wav` (a WAV file per audio session in the app's container, the default) or `null`.
    public var audioSink: String? = nil

    /// The audio sinks a config may name.
    public static let audioSinks = ["wav", "null"]
    /// `"backgroundRefresh": "restricted"`: a policy that restricts Background App Refresh
    /// for every app (`allowed`, the default, leaves it to the user's settings).
    public var backgroundRefreshRestricted = false
    /// `"transfers": {"extraCA": "ca.pem", "perHost": 4, "maxConcurrent": 16, "retryBase": 1, "maxAttempts": 10}`:
    /// settings of the shared transfer daemon (relative paths are relative to the config file).
    public var transfers = TransferSettings()
    /// `"snapshots": {"policy": "redact", "screen": "1170x2532@3"}`: a host-wide snapshot
    /// policy (wins over an app's when stricter) and the screen snapshots are drawn for.
    public var snapshotPolicy: SnapshotPolicy?
    public var screen: ScreenSize?
    /// `"limits": {"openFiles": 256, "processes": 512, "fileSize": "2 GiB", "memory": "1 GiB",
    /// "apps": {"com.x": {"memory": "64 MiB"}}}`: resource limits per app.
    public var limits = LimitSettings()
    /// `"identities": {"first": 200000, "count": 100000, "registry": "/var/lib/apphost/ids"}`
    /// (any key may be left out), or `false` to run every app of a root host as uid 0
    /// without capabilities. Nil when the file says nothing.
    public var identities: IdentityConfig?
    /// `"memory": {"device": "3 GiB", "source": "computed" | "psi"}`: the simulated device's
    /// memory (default: the profile's) and where memory pressure comes from.
    public var memory = MemorySettings()

    /// Reads and checks a config file; errors name the file and key.
    public static func load(path: String) throws(BudgetError) -> HostConfigFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw BudgetError(message: "\(path): cannot read the config file")
        }
        guard let object = try? JSONSerialization.jsonObject(with: data), let dict = object as? [String: Any] else {
            throw BudgetError(message: "\(path): not a JSON object")
        }
        var file = HostConfigFile(profile: nil, budgets: [:])
        for (key, value) in dict {
            switch key {
            case "profile":
                guard let name = value as? String else { throw BudgetError(message: "\(path): profile: expected a name") }
                file.profile = name
            case "audioSink":
                guard let sink = value as? String, audioSinks.contains(sink) else {
                    throw BudgetError(message: "\(path): audioSink: expected one of \(audioSinks.joined(separator: ", "))")
                }
                file.audioSink = sink
            case "backgroundRefresh":
                guard let policy = value as? String, ["allowed", "restricted"].contains(policy) else {
                    throw BudgetError(message: "\(path): backgroundRefresh: expected \"allowed\" or \"restricted\"")
                }
                file.backgroundRefreshRestricted = policy == "restricted"
            case "transfers":
                file.transfers = try TransferSettings.parse(value, path: path)
            case "snapshots":
                guard let dict = value as? [String: Any] else { throw BudgetError(message: "\(path): snapshots: expected an object") }
                for (k, v) in dict {
                    switch k {
                    case "policy":
                        guard let text = v as? String, let policy = SnapshotPolicy(rawValue: text) else {
                            throw BudgetError(message: "\(path): snapshots.policy: expected one of \(SnapshotPolicy.allCases.map(\.rawValue).joined(separator: ", "))")
                        }
                        file.snapshotPolicy = policy
                    case "screen":
                        guard let text = v as? String, let screen = ScreenSize(parsing: text) else {
                            throw BudgetError(message: "\(path): snapshots.screen: expected WIDTHxHEIGHT[@SCALE] in pixels, e.g. \"1170x2532@3\"")
                        }
                        file.screen = screen
                    default:
                        throw BudgetError(message: "\(path): snapshots.\(k): unknown key (known: policy, screen)")
                    }
                }
            case "limits":
                file.limits = try LimitSettings.parse(value, path: path)
            case "identities":
                file.identities = try IdentityConfig.parse(value, path: path)
            case "memory":
                file.memory = try MemorySettings.parse(value, path: path)
            case "budgets":
                guard let budgets = value as? [String: Any] else { throw BudgetError(message: "\(path): budgets: expected an object") }
                for (name, raw) in budgets {
                    guard let key = BudgetKey(rawValue: name) else {
                        throw BudgetError(message: "\(path): budgets.\(name): unknown budget (known: \(BudgetProfile.keys.map(\.rawValue).joined(separator: ", ")))")
                    }
                    if let n = raw as? Double {
                        file.budgets[key] = n
                    } else if let s = raw as? String {
                        do {
                            file.budgets[key] = try DurationText.seconds(s)
                        } catch {
                            throw BudgetError(message: "\(path): budgets.\(name): \(error.message)")
                        }
                    } else {
                        throw BudgetError(message: "\(path): budgets.\(name): expected seconds or a duration like \"45s\"")
                    }
                }
            default:
                throw BudgetError(message: "\(path): unknown key \"\(key)\" (known: profile, budgets, audioSink, backgroundRefresh, transfers, snapshots, limits, identities, memory)")
            }
        }
        return file
    }

    /// The profile in force: `--profile` beats the file's profile; file overrides apply on top.
    public static func resolve(profile: String?, file: HostConfigFile?) throws(BudgetError) -> BudgetProfile {
        let name = profile ?? file?.profile ?? BudgetProfile.default.name
        guard var p = BudgetProfile.named(name) else {
            throw BudgetError(message: "unknown profile \"\(name)\" (known: \(BudgetProfile.all.map(\.name).joined(separator: ", ")))")
        }
        if let overrides = file?.budgets, !overrides.isEmpty {
            for (k, v) in overrides { p[k] = v }
            p.name = "\(name)+config"
        }
        try p.validate()
        return p
    }
}

/// Durations written as `31s`, `10m`, `1h`, `250ms`, `1.5s`, `1h30m` or bare seconds.
public enum DurationText {
    /// Parses to seconds.
    public static func seconds(_ text: String) throws(BudgetError) -> Double {
        let s = text.trimmingCharacters(in: .whitespaces)
        if let bare = Double(s), bare.isFinite, bare >= 0 { return bare }
        var total = 0.0
        var number = ""
        var unit = ""
        var parts: [(Double, String)] = []
        func flush() throws(BudgetError) {
            guard let n = Double(number), n.isFinite, n >= 0, !unit.isEmpty else {
                throw BudgetError(message: "not a duration: \"\(text)\" (examples: 31s, 10m, 1h, 250ms, 1h30m)")
            }
            parts.append((n, unit))
            number = ""
            unit = ""
        }
        for ch in s {
            if ch.isNumber || ch == "." {
                if !unit.isEmpty { try flush() }
                number.append(ch)
            } else if ch.isLetter {
                unit.append(ch)
            } else {
                throw BudgetError(message: "not a duration: \"\(text)\" (examples: 31s, 10m, 1h, 250ms, 1h30m)")
            }
        }
        try flush()
        for (n, u) in parts {
            switch u {
            case "ms": total += n / 1000
            case "s": total += n
            case "m", "min": total += n * 60
            case "h": total += n * 3600
            case "d": total += n * 86400
            default: throw BudgetError(message: "unknown unit \"\(u)\" in \"\(text)\" (use ms, s, m, h or d)")
            }
        }
        return total
    }

    /// `31s`, `2m30s`, `1h`, `250ms`.
    public static func format(_ seconds: Double) -> String {
        if seconds < 1 { return "\(Int((seconds * 1000).rounded()))ms" }
        if seconds < 60 {
            let r = (seconds * 1000).rounded() / 1000
            return r == r.rounded() ? "\(Int(r))s" : "\(r)s"
        }
        var rest = Int(seconds.rounded())
        var out = ""
        if rest >= 3600 { out += "\(rest / 3600)h"; rest %= 3600 }
        if rest >= 60 { out += "\(rest / 60)m"; rest %= 60 }
        if rest > 0 { out += "\(rest)s" }
        return out
    }
}

/// The transfer daemon's settings from the host config (`"transfers": {...}`).
public struct TransferSettings: Sendable, Equatable {
    /// A PEM file of CAs trusted besides the system store (a test server's own CA).
    public var extraCA: String?
    /// Connections to one host at a time (default 4).
    public var perHost: Int?
    /// Transfers running at once across all hosts (default 16).
    public var maxConcurrent: Int?
    /// First retry delay in seconds, doubled each attempt (default 1).
    public var retryBase: Double?
    /// Failed attempts before a transfer fails for good (default 10).
    public var maxAttempts: Int?

    public init() {}

    public static let keys = ["extraCA", "perHost", "maxConcurrent", "retryBase", "maxAttempts"]

    static func parse(_ value: Any, path: String) throws(BudgetError) -> TransferSettings {
        guard let dict = value as? [String: Any] else { throw BudgetError(message: "\(path): transfers: expected an object") }
        var t = TransferSettings()
        func count(_ key: String, _ raw: Any) throws(BudgetError) -> Int {
            guard let n = raw as? Int, n > 0 else { throw BudgetError(message: "\(path): transfers.\(key): expected a positive whole number") }
            return n
        }
        for (key, raw) in dict {
            switch key {
            case "extraCA":
                guard let file = raw as? String, !file.isEmpty else { throw BudgetError(message: "\(path): transfers.extraCA: expected a path to a PEM file") }
                // Absolute: the daemon runs in another directory.
                let configDirectory = (URL(fileURLWithPath: path).standardizedFileURL.path as NSString).deletingLastPathComponent
                let absolute = file.hasPrefix("/") ? file : URL(fileURLWithPath: file, relativeTo: URL(fileURLWithPath: configDirectory + "/")).standardizedFileURL.path
                guard FileManager.default.isReadableFile(atPath: absolute) else {
                    throw BudgetError(message: "\(path): transfers.extraCA: cannot read \(absolute)")
                }
                t.extraCA = absolute
            case "perHost": t.perHost = try count(key, raw)
            case "maxConcurrent": t.maxConcurrent = try count(key, raw)
            case "maxAttempts": t.maxAttempts = try count(key, raw)
            case "retryBase":
                guard let d = raw as? Double, d >= 0 else { throw BudgetError(message: "\(path): transfers.retryBase: expected seconds") }
                t.retryBase = d
            default:
                throw BudgetError(message: "\(path): transfers.\(key): unknown key (known: \(keys.joined(separator: ", ")))")
            }
        }
        return t
    }

    /// The daemon's command-line options for these settings.
    public var daemonArguments: [String] {
        var a: [String] = []
        if let extraCA { a += ["--extra-ca", extraCA] }
        if let perHost { a += ["--per-host", String(perHost)] }
        if let maxConcurrent { a += ["--max-concurrent", String(maxConcurrent)] }
        if let retryBase { a += ["--retry-base", String(retryBase)] }
        if let maxAttempts { a += ["--max-attempts", String(maxAttempts)] }
        return a
    }
}

/// The host config's `"identities"`: the range of uids (and App Group gids) a root host
/// gives its apps, and where it claims them machine-wide.
public struct IdentityConfig: Sendable, Equatable {
    /// False: apps of a root host run as uid 0 without capabilities.
    public var enabled = true
    /// The first id of the range.
    public var first: UInt32?
    /// How many ids the range holds.
    public var count: UInt32?
    /// The machine-wide claims directory (relative paths are relative to the config file).
    public var registry: String?

    public init(enabled: Bool = true, first: UInt32? = nil, count: UInt32? = nil, registry: String? = nil) {
        self.enabled = enabled
        self.first = first
        self.count = count
        self.registry = registry
    }

    static func parse(_ value: Any, path: String) throws(BudgetError) -> IdentityConfig {
        guard let dict = value as? [String: Any] else {
            if let flag = value as? Bool { return flag ? IdentityConfig() : IdentityConfig(enabled: false) }
            throw BudgetError(message: "\(path): identities: expected an object or false")
        }
        var config = IdentityConfig()
        func number(_ key: String, _ raw: Any, minimum: UInt64) throws(BudgetError) -> UInt32 {
            guard let n = raw as? Int, n >= minimum, n <= Int(UInt32.max) else {
                throw BudgetError(message: "\(path): identities.\(key): expected a whole number from \(minimum) to \(UInt32.max)")
            }
            return UInt32(n)
        }
        for (key, raw) in dict {
            switch key {
            case "first": config.first = try number(key, raw, minimum: 1_000)
            case "count": config.count = try number(key, raw, minimum: 1)
            case "registry":
                guard let text = raw as? String, !text.isEmpty else {
                    throw BudgetError(message: "\(path): identities.registry: expected a folder path")
                }
                config.registry = text.hasPrefix("/") ? text
                    : ((path as NSString).deletingLastPathComponent as NSString).appendingPathComponent(text)
            default:
                throw BudgetError(message: "\(path): identities.\(key): unknown key (known: first, count, registry)")
            }
        }
        if let first = config.first, let count = config.count, UInt64(first) + UInt64(count) > UInt64(UInt32.max) {
            throw BudgetError(message: "\(path): identities: first + count goes past \(UInt32.max)")
        }
        return config
    }
}
