import AppHostProtocol
import Foundation

/// `remote-notification`: silent pushes. Registration for a device token
/// (`registerForRemoteNotifications`) is served here: it needs the `aps-environment`
/// entitlement, as on iOS (the background mode is only needed for silent pushes).
/// Push delivery comes with the remote-notifications issue.
public struct RemoteNotificationPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .remoteNotification }
    public var emulation: ModeEmulation { .registered("silent pushes are delivered with the remote-notifications issue; registerForRemoteNotifications already works") }
    public var summary: String { "silent pushes wake or launch the app (content-available)" }
    public var services: [String] { ["Application.registerForRemoteNotifications"] }
    public var wakeSources: [String] { ["apphost push (not built yet)"] }

    public static let entitlement = "aps-environment"

    public func lint(_ app: LintSubject) -> [LintFinding] {
        guard !app.entitlementKeys.contains(Self.entitlement) else { return [] }
        let file = app.entitlementsPath ?? app.manifestPath
        return [LintFinding(.error, file: file, key: Self.entitlement, mode: mode.rawValue,
            "background mode \"remote-notification\" needs the \(Self.entitlement) entitlement (no entitlements file declares it); without it registerForRemoteNotifications fails and no push arrives")]
    }

    public func handle(_ request: ServiceRequest, from app: String, in ctx: ModeContext) -> ServiceReply? {
        guard case .registerForRemoteNotifications = request, let info = ctx.apps[app] else { return nil }
        guard info.entitlements.contains(Self.entitlement) else {
            ctx.emit(.note(app: app, "registerForRemoteNotifications failed: no \(Self.entitlement) entitlement"))
            return .refused(reason: "no valid \"aps-environment\" entitlement string found for application (add it to \(info.manifest.name).entitlements)")
        }
        ctx.emit(.note(app: app, "registered for remote notifications"))
        return .token(Self.token(for: app, salt: "apns"))
    }

    /// A stable 32-byte token (hex) per app and kind, as APNs tokens are stable per install.
    static func token(for app: String, salt: String) -> String {
        // FNV-1a over the id, stretched to 32 bytes: stable, not secret (a simulator token).
        var bytes: [UInt8] = []
        var h: UInt64 = 0xcbf29ce484222325
        for round in 0..<4 {
            for b in Array("\(salt):\(round):\(app)".utf8) {
                h ^= UInt64(b)
                h = h &* 0x100000001b3
            }
            for i in 0..<8 { bytes.append(UInt8((h >> (UInt64(i) * 8)) & 0xff)) }
        }
        return bytes.map { String(format: "%02x", $0) }.joined()
    }
}
