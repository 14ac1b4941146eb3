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
    public var bundleIdentifier: BundleID
    public var kind: DeviceTokenKind
    /// The app was uninstalled: pushes to it are answered 410 Unregistered.
    public var retired: Bool

    public init(token: String, bundleIdentifier: BundleID, kind: DeviceTokenKind, retired: Bool) {
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
    var active: [BundleID: [DeviceTokenKind: String]] = [:]
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
    static func token(for app: BundleID, _ kind: DeviceTokenKind, in ctx: ModeContext) -> String {
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
    static func retire(_ app: BundleID, in ctx: ModeContext) {
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

/// Identifiers from a seed instead of the system's random source: a scenario (a
/// policy test on the virtual clock) gives the same tokens and apns-ids, hence the same
/// events, every run. SplitMix64: not secret, only reproducible.
final class SeededIdentifiers {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    private func next() -> UInt64 {
        state &+= 0x9E3779B97F4A7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) &* 0x94D049BB133111EB
        return z ^ (z >> 31)
    }

    private func bytes(_ count: Int) -> [UInt8] {
        (0..<(count + 7) / 8).flatMap { _ in withUnsafeBytes(of: next().littleEndian, Array.init) }.prefix(count).map { $0 }
    }

    /// 64 lowercase hex digits.
    func token() -> String { bytes(32).map { String(format: "%02x", $0) }.joined() }

    /// A lowercase version-4 UUID.
    func uuid() -> String {
        var b = bytes(16)
        b[6] = (b[6] & 0x0f) | 0x40
        b[8] = (b[8] & 0x3f) | 0x80
        let u = UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
        return u.uuidString.lowercased()
    }
}

extension ModeHub {
    /// Device tokens and apns-ids from `seed` from now on (scenario hosts: the same
    /// events every run); a real host keeps the system's random source.
    public func useSeededIdentifiers(seed: UInt64) {
        let ids = SeededIdentifiers(seed: seed)
        ctx.makeToken = ids.token
        ctx.makeMessageID = ids.uuid
    }

    /// A new `apns-id` for a push sent without one.
    public func makeMessageID() -> String { ctx.makeMessageID() }
}
