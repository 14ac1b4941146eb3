import Foundation

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
