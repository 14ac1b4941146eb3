import Foundation

/// The bounds of the apps' logs (`"logs"` in the host config): each app's stdout and stderr
/// reach `logs/<bundle id>.log` through the host, rotated, rate-limited and within a budget
/// for all of them. A nil field keeps the host's default.
///
/// ```json
/// "logs": { "fileSize": "8 MiB", "rate": "1 MiB", "burst": "8 MiB", "total": "256 MiB" }
/// ```
public struct LogSettings: Sendable, Equatable {
    /// A log is rotated (`.log` → `.log.1`) before it would pass this many bytes.
    public var fileSize: UInt64?
    /// Bytes a second an app may write, sustained; past it output is dropped (and counted).
    public var rate: UInt64?
    /// Bytes an app may write at once before the rate applies.
    public var burst: UInt64?
    /// Bytes of all apps' logs together (never more than a quarter of the file system).
    public var total: UInt64?

    public init(fileSize: UInt64? = nil, rate: UInt64? = nil, burst: UInt64? = nil, total: UInt64? = nil) {
        self.fileSize = fileSize
        self.rate = rate
        self.burst = burst
        self.total = total
    }

    public static let keys = ["fileSize", "rate", "burst", "total"]

    /// Parses the `logs` object; errors name the file and key.
    static func parse(_ value: Any, path: String) throws(BudgetError) -> LogSettings {
        guard let dict = value as? [String: Any] else { throw BudgetError(message: "\(path): logs: expected an object") }
        var settings = LogSettings()
        for (key, raw) in dict {
            let bytes = try ByteCountText.bytes(raw, key: "logs.\(key)", path: path, example: "8 MiB")
            // At least a line's worth: a smaller bound would drop every line.
            guard bytes >= 4096 else { throw BudgetError(message: "\(path): logs.\(key): at least 4 KiB") }
            switch key {
            case "fileSize": settings.fileSize = bytes
            case "rate": settings.rate = bytes
            case "burst": settings.burst = bytes
            case "total": settings.total = bytes
            default:
                throw BudgetError(message: "\(path): logs.\(key): unknown key (known: \(keys.joined(separator: ", ")))")
            }
        }
        return settings
    }
}
