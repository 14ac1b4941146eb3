import AppHostProtocol
import Foundation

/// Resource limits of one app (`"limits"` in the host config). A nil field is not limited
/// by the host (the kernel's defaults apply).
///
/// ```json
/// "limits": { "openFiles": 256, "processes": 256, "fileSize": "2 GiB", "memory": "1 GiB",
///             "apps": { "com.example.big": { "memory": "2 GiB" } } }
/// ```
public struct AppLimits: Sendable, Equatable, Codable {
    /// Open descriptors (RLIMIT_NOFILE), iOS's default soft limit being 256.
    public var openFiles: Int?
    /// Processes and threads (a `pids` cgroup where the host can make one; apps make no
    /// process, so this caps their threads). Not limited by default.
    public var processes: Int?
    /// Largest file the app may write, in bytes (RLIMIT_FSIZE: a larger write fails with EFBIG).
    public var fileSize: UInt64?
    /// Memory, in bytes (a `memory` cgroup where the host can make one, else RLIMIT_AS). Over
    /// it the app is killed, as iOS's per-process memory limit (jetsam) kills.
    public var memory: UInt64?

    public init(openFiles: Int? = nil, processes: Int? = nil, fileSize: UInt64? = nil, memory: UInt64? = nil) {
        self.openFiles = openFiles
        self.processes = processes
        self.fileSize = fileSize
        self.memory = memory
    }

    /// What a host applies when the config says nothing: 256 descriptors (iOS's soft
    /// limit). Threads, file size and memory are not limited: a processes or memory
    /// limit puts the app in a cgroup, whose join costs every launch a kernel RCU grace
    /// period (13-15 ms here), and apps make no process (seccomp) for one to cap.
    public static let standard = AppLimits(openFiles: 256)

    /// These limits with `other`'s set fields on top.
    public func overridden(by other: AppLimits) -> AppLimits {
        AppLimits(openFiles: other.openFiles ?? openFiles, processes: other.processes ?? processes,
                  fileSize: other.fileSize ?? fileSize, memory: other.memory ?? memory)
    }

    /// "openFiles 256, processes 512, memory 64 MiB".
    public var summary: String {
        var parts: [String] = []
        if let openFiles { parts.append("openFiles \(openFiles)") }
        if let processes { parts.append("processes \(processes)") }
        if let fileSize { parts.append("fileSize \(ByteCountText.format(fileSize))") }
        if let memory { parts.append("memory \(ByteCountText.format(memory))") }
        return parts.isEmpty ? "none" : parts.joined(separator: ", ")
    }

    public static let keys = ["openFiles", "processes", "fileSize", "memory"]

    /// Parses one limits object (without `apps`); `where` names it in errors ("limits", "limits.apps.X").
    static func parse(_ dict: [String: Any], path: String, where context: String) throws(BudgetError) -> AppLimits {
        var limits = AppLimits()
        func count(_ key: String, _ raw: Any) throws(BudgetError) -> Int {
            guard let n = raw as? Int, n > 0 else {
                throw BudgetError(message: "\(path): \(context).\(key): expected a positive whole number")
            }
            return n
        }
        func bytes(_ key: String, _ raw: Any) throws(BudgetError) -> UInt64 {
            try ByteCountText.bytes(raw, key: "\(context).\(key)", path: path, example: "512 MiB")
        }
        for (key, raw) in dict {
            switch key {
            case "openFiles":
                let n = try count(key, raw)
                guard n >= 16 else { throw BudgetError(message: "\(path): \(context).openFiles: at least 16 (an app needs its standard descriptors, the IPC socket and its runtime's)") }
                limits.openFiles = n
            case "processes":
                let n = try count(key, raw)
                guard n >= 8 else { throw BudgetError(message: "\(path): \(context).processes: at least 8 (the Swift runtime and AppKitLess start threads)") }
                limits.processes = n
            case "fileSize": limits.fileSize = try bytes(key, raw)
            case "memory":
                let n = try bytes(key, raw)
                guard n >= 16 << 20 else { throw BudgetError(message: "\(path): \(context).memory: at least 16 MiB (an app's runtime needs about 10)") }
                limits.memory = n
            default:
                throw BudgetError(message: "\(path): \(context).\(key): unknown key (known: \(keys.joined(separator: ", "))\(context == "limits" ? ", apps" : ""))")
            }
        }
        return limits
    }
}

/// The host config's `"limits"`: for every app, and per bundle identifier on top.
public struct LimitSettings: Sendable, Equatable {
    /// For every app (over ``AppLimits/standard``).
    public var all = AppLimits()
    /// Per bundle identifier, over `all`.
    public var apps: [BundleID: AppLimits] = [:]

    public init(all: AppLimits = AppLimits(), apps: [BundleID: AppLimits] = [:]) {
        self.all = all
        self.apps = apps
    }

    /// The limits of `bundleIdentifier`.
    public func limits(for bundleIdentifier: BundleID) -> AppLimits {
        let base = AppLimits.standard.overridden(by: all)
        return apps[bundleIdentifier].map { base.overridden(by: $0) } ?? base
    }

    static func parse(_ value: Any, path: String) throws(BudgetError) -> LimitSettings {
        guard var dict = value as? [String: Any] else { throw BudgetError(message: "\(path): limits: expected an object") }
        var settings = LimitSettings()
        if let apps = dict.removeValue(forKey: "apps") {
            guard let apps = apps as? [String: Any] else { throw BudgetError(message: "\(path): limits.apps: expected an object of bundle identifiers") }
            for (bundle, raw) in apps {
                guard let one = raw as? [String: Any] else { throw BudgetError(message: "\(path): limits.apps.\(bundle): expected an object") }
                // A key that is no bundle identifier would never match an app: said now.
                let id: BundleID
                do {
                    id = try BundleID(validating: bundle)
                } catch {
                    throw BudgetError(message: "\(path): limits.apps: \"\(bundle)\" is not a bundle identifier: \(error)")
                }
                settings.apps[id] = try AppLimits.parse(one, path: path, where: "limits.apps.\(bundle)")
            }
        }
        settings.all = try AppLimits.parse(dict, path: path, where: "limits")
        return settings
    }
}

/// Sizes written as `512 MiB`, `1GiB`, `64M`, `1.5 GB` or bare bytes.
public enum ByteCountText {
    /// A config file's size value: a positive whole number of bytes or a size text. Errors
    /// say `<path>: <key>: …`, with `example` as the size to write.
    static func bytes(_ raw: Any, key: String, path: String, example: String) throws(BudgetError) -> UInt64 {
        if let n = raw as? Int, n > 0 { return UInt64(n) }
        guard let text = raw as? String else {
            throw BudgetError(message: "\(path): \(key): expected bytes or a size like \"\(example)\"")
        }
        do {
            return try bytes(text)
        } catch {
            throw BudgetError(message: "\(path): \(key): \(error.message)")
        }
    }

    /// Parses to bytes. Binary and decimal units are both accepted (`MiB` = 2^20, `MB` = 10^6;
    /// a bare `M`/`G` is binary, as in `ulimit` and cgroups).
    public static func bytes(_ text: String) throws(BudgetError) -> UInt64 {
        let s = text.trimmingCharacters(in: .whitespaces)
        let digits = s.prefix { $0.isNumber || $0 == "." }
        let unit = s.dropFirst(digits.count).trimmingCharacters(in: .whitespaces).lowercased()
        guard let number = Double(digits), number.isFinite, number > 0 else {
            throw BudgetError(message: "not a size: \"\(text)\" (examples: 512 MiB, 2GiB, 65536)")
        }
        let scale: Double
        switch unit {
        case "", "b": scale = 1
        case "k", "kib": scale = 1024
        case "kb": scale = 1e3
        case "m", "mib": scale = Double(1 << 20)
        case "mb": scale = 1e6
        case "g", "gib": scale = Double(1 << 30)
        case "gb": scale = 1e9
        case "t", "tib": scale = Double(1 << 40)
        case "tb": scale = 1e12
        default: throw BudgetError(message: "unknown unit \"\(unit)\" in \"\(text)\" (use B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB)")
        }
        let value = (number * scale).rounded()
        guard value >= 1, value < 9.2e18 else { throw BudgetError(message: "size out of range: \"\(text)\"") }
        return UInt64(value)
    }

    /// `512 MiB`, `1.5 GiB`, `4096 B`.
    public static func format(_ bytes: UInt64) -> String {
        let units: [(UInt64, String)] = [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
        for (size, name) in units where bytes >= size {
            let v = Double(bytes) / Double(size)
            return v == v.rounded() ? "\(Int(v)) \(name)" : String(format: "%.1f %@", v, name)
        }
        return "\(bytes) B"
    }
}
