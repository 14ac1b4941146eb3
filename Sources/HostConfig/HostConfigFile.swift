import AppHostProtocol
import Foundation

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
    /// `"namespaces": false` runs the apps of a host without per-app uids in the host's
    /// namespaces (no isolation from the user's files and processes but Landlock's).
    /// Nil when the file says nothing.
    public var namespaces: Bool?
    /// `"memory": {"device": "3 GiB", "source": "computed" | "psi"}`: the simulated device's
    /// memory (default: the profile's) and where memory pressure comes from.
    public var memory = MemorySettings()
    /// The bounds of the apps' logs (default: the host's).
    public var logs = LogSettings()
    /// `"rules": {"locationRelaunchAfterUserTerminate": true}`: rules whose sources differ
    /// by iOS release (``BudgetProfile/locationRelaunchAfterUserTerminate``). Nil: the profile's.
    public var locationRelaunchAfterUserTerminate: Bool?

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
            case "namespaces":
                guard let flag = value as? Bool else {
                    throw BudgetError(message: "\(path): namespaces: expected true or false")
                }
                file.namespaces = flag
            case "memory":
                file.memory = try MemorySettings.parse(value, path: path)
            case "rules":
                guard let rules = value as? [String: Any] else { throw BudgetError(message: "\(path): rules: expected an object") }
                for (k, v) in rules {
                    switch k {
                    case "locationRelaunchAfterUserTerminate":
                        guard let flag = v as? Bool else {
                            throw BudgetError(message: "\(path): rules.locationRelaunchAfterUserTerminate: expected true or false")
                        }
                        file.locationRelaunchAfterUserTerminate = flag
                    default:
                        throw BudgetError(message: "\(path): rules.\(k): unknown rule (known: locationRelaunchAfterUserTerminate)")
                    }
                }
            case "logs":
                file.logs = try LogSettings.parse(value, path: path)
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
                throw BudgetError(message: "\(path): unknown key \"\(key)\" (known: profile, budgets, rules, audioSink, backgroundRefresh, transfers, snapshots, limits, identities, namespaces, memory, logs)")
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
        if let relaunch = file?.locationRelaunchAfterUserTerminate, relaunch != p.locationRelaunchAfterUserTerminate {
            p.locationRelaunchAfterUserTerminate = relaunch
            p.name = "\(name)+config"
        }
        try p.validate()
        return p
    }
}

extension BudgetProfile {
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
