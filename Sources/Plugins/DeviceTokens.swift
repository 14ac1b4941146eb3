import AppHostProtocol
import Foundation

/// Which registration a device token answers: `registerForRemoteNotifications` (APNs)
/// or PushKit's `PushRegistry.register()` (VoIP).
public enum DeviceTokenKind: String, Sendable, CaseIterable, Codable {
    case apns, voip
}

/// One device token as the host keeps it: whose, for what, and whether it still
/// reaches the app (a retired token is an uninstalled app's: APNs answers 410).
public struct DeviceTokenRecord: Sendable, Equatable {
    /// 64 lowercase hex digits (32 random bytes).
    public var token: String
    public var bundleIdentifier: String
    public var kind: DeviceTokenKind
    /// The app was uninstalled: pushes to it are answered 410 Unregistered.
    public var retired: Bool

    public init(token: String, bundleIdentifier: String, kind: DeviceTokenKind, retired: Bool) {
        self.token = token
        self.bundleIdentifier = bundleIdentifier
        self.kind = kind
        self.retired = retired
    }

    /// 32 bytes from the system's random source, as 64 lowercase hex digits: a token
    /// per app install and per host, as APNs issues them (no two hosts share one).
    public static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
    }
}

/// The device tokens issued on this host: one per app install and kind, made when first
/// asked for (the app registers, or the host is asked for it) and kept
/// (persisted by the host) until the app is uninstalled. An update (install over an
/// installed app) keeps its tokens, as iOS does; an uninstall retires them, and the
/// next install gets new ones (iOS gives a reinstalled app a new token).
struct DeviceTokens: PluginState {
    /// app → kind → its token.
    var active: [String: [DeviceTokenKind: String]] = [:]
    /// token → its record (active and retired).
    var records: [String: DeviceTokenRecord] = [:]
    init() {}

    /// Most retired tokens kept: past it the oldest are forgotten (then answered
    /// BadDeviceToken rather than 410), so a host that installs and uninstalls apps for
    /// years keeps a bounded table. Order of retirement is the order of `retiredOrder`.
    static let maximumRetired = 10_000
    var retiredOrder: [String] = []

    mutating func restore(_ record: DeviceTokenRecord) {
        records[record.token] = record
        if record.retired {
            retiredOrder.append(record.token)
        } else {
            active[record.bundleIdentifier, default: [:]][record.kind] = record.token
        }
    }
}

extension DeviceTokens {
    /// The app's token of `kind`, issued (and persisted through an effect) if it has none.
    static func token(for app: String, _ kind: DeviceTokenKind, in ctx: ModeContext) -> String {
        if let token = ctx.state(DeviceTokens.self).active[app]?[kind] { return token }
        var token = ctx.makeToken()
        // A collision of 256 random bits does not happen; a test's generator might repeat.
        while ctx.state(DeviceTokens.self).records[token] != nil { token = ctx.makeToken() }
        let record = DeviceTokenRecord(token: token, bundleIdentifier: app, kind: kind, retired: false)
        ctx.update(DeviceTokens.self) { $0.restore(record) }
        ctx.emit(.persistDeviceToken(record))
        return token
    }

    /// Retires every token of `app` (it was uninstalled).
    static func retire(_ app: String, in ctx: ModeContext) {
        let retired = ctx.update(DeviceTokens.self) { s -> [DeviceTokenRecord] in
            let tokens = s.active.removeValue(forKey: app) ?? [:]
            var out: [DeviceTokenRecord] = []
            for kind in DeviceTokenKind.allCases {
                guard let token = tokens[kind] else { continue }
                let record = DeviceTokenRecord(token: token, bundleIdentifier: app, kind: kind, retired: true)
                s.records[token] = record
                s.retiredOrder.append(token)
                out.append(record)
            }
            return out
        }
        for record in retired { ctx.emit(.persistDeviceToken(record)) }
        let forgotten = ctx.update(DeviceTokens.self) { s -> [String] in
            let extra = s.retiredOrder.count - maximumRetired
            guard extra > 0 else { return [] }
            let old = Array(s.retiredOrder.prefix(extra))
            s.retiredOrder.removeFirst(extra)
            for token in old { s.records.removeValue(forKey: token) }
            return old
        }
        for token in forgotten { ctx.emit(.forgetDeviceToken(token)) }
    }
}
