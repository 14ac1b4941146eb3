import Foundation

/// The transfer daemon's settings from the host config (`"transfers": {...}`); nil leaves the
/// daemon's default. The host starts the daemon with them (`TransferDaemonOptions`).
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
}
