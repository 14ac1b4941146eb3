import AppHostProtocol
import Foundation
import HostConfig

/// `voip`: a VoIP push registry and call reporting. A VoIP push (`apphost push --type
/// voip`) wakes or launches the app; it must report an incoming call (CallKit) within
/// the `voipReport` budget of the push (the delegate included) or it is killed with
/// 0xbaadca11 (AppKitLess aborts the app before, as PushKit does, when the delegate
/// returns without a report). After `maximumUnreported` unreported pushes in a row, pushes to it are
/// no longer delivered until it is reinstalled. A reported call keeps the app running
/// until it is ended.
public struct VoIPPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .voip }
    public var emulation: ModeEmulation { .emulated }
    public var summary: String { "VoIP pushes (PushKit) and calls (CallKit)" }
    public var services: [String] { ["PushRegistry.register", "CallProvider.reportNewIncomingCall", "CallProvider.reportCallEnded"] }
    public var keepsRunning: [String] { ["a reported call, until it ends"] }
    public var wakeSources: [String] { ["apphost push --type voip"] }

    /// Unreported pushes in a row after which delivery stops (IOS-MODEL 1.12: "after ~4").
    public static let maximumUnreported = 4

    struct App: Sendable {
        var pushOutstanding = false
        var unreported = 0
        var blocked = false
        var calls: Set<String> = []
    }
    struct State: PluginState {
        var apps: [BundleID: App] = [:]
        init() {}
    }

    public func handle(_ request: ServiceRequest, from app: BundleID, in ctx: ModeContext) -> ServiceReply? {
        guard let info = ctx.apps[app] else { return nil }
        switch request {
        case .voipRegister:
            guard info.declares(.voip) else {
                ctx.emit(.refused(app: app, mode: mode, "PushKit VoIP registration"))
                return .refused(reason: "VoIP pushes need \"voip\" in UIBackgroundModes; no token is issued")
            }
            ctx.emit(.used(app: app, mode: mode, "registered for VoIP pushes"))
            return .token(DeviceTokens.token(for: app, .voip, in: ctx))
        case .voipReportIncomingCall(let uuid, let handle):
            let wasOutstanding = ctx.update(State.self) { state -> Bool in
                var a = state.apps[app, default: App()]
                let was = a.pushOutstanding
                a.pushOutstanding = false
                a.unreported = 0
                a.calls.insert(uuid)
                state.apps[app] = a
                return was
            }
            if wasOutstanding { ctx.emit(.cancelTimer(app: app, timer: PluginTimer(mode, "report"))) }
            ctx.emit(.beginActivity(app: app, name: "VoIP call \(uuid)"))
            ctx.emit(.used(app: app, mode: mode, "reported incoming call \(uuid) from \(handle)"))
            return .ok
        case .voipEndCall(let uuid):
            let had = ctx.update(State.self) { $0.apps[app]?.calls.remove(uuid) != nil }
            guard had else { return .refused(reason: "no call \(uuid) was reported") }
            ctx.emit(.endActivity(app: app, name: "VoIP call \(uuid)"))
            ctx.emit(.note(app: app, "call \(uuid) ended"))
            return .ok
        default:
            return nil
        }
    }

    public func handle(_ command: ModeCommand, in ctx: ModeContext) throws(ModeCommandError) -> String? {
        guard case .voipPush(let app, let payload) = command else { return nil }
        guard let info = ctx.apps[app] else { throw ModeCommandError("unknown bundle id \"\(app)\"") }
        guard info.declares(.voip) else {
            throw ModeCommandError("\(app) does not declare \"voip\" in UIBackgroundModes: VoIP pushes are not delivered to it")
        }
        guard let data = payload.data(using: .utf8),
              (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] != nil else {
            throw ModeCommandError("the VoIP payload must be a JSON object")
        }
        let a = ctx.state(State.self).apps[app] ?? App()
        if a.blocked {
            ctx.emit(.note(app: app, "VoIP push not delivered: \(a.unreported) pushes in a row were not reported as calls, so delivery stopped (reinstall the app to reset)"))
            throw ModeCommandError("not delivered: \(app) failed to report \(a.unreported) VoIP pushes in a row as calls, so the system stopped delivering them (reinstall to reset)")
        }
        ctx.update(State.self) { $0.apps[app, default: App()].pushOutstanding = true }
        ctx.emit(.deliver(app: app, .voipPush(payload: payload), wake: .launch(.voipPush), because: "VoIP push"))
        ctx.emit(.startTimer(app: app, timer: PluginTimer(mode, "report"), after: ctx.profile.duration(.voipReport)))
        ctx.emit(.used(app: app, mode: mode, "VoIP push delivered"))
        return "VoIP push delivered to \(app) (must report a call within \(DurationText.format(ctx.profile[.voipReport])))"
    }

    public func timerFired(_ name: String, app: BundleID?, in ctx: ModeContext) {
        guard name == "report", let app, ctx.state(State.self).apps[app]?.pushOutstanding == true else { return }
        let count = countUnreported(app, in: ctx)
        ctx.emit(.kill(app: app, namespace: "FRONTBOARD", code: .badCall,
                       reason: "did not report an incoming call to CallKit within \(DurationText.format(ctx.profile[.voipReport])) of a VoIP push (\(count) unreported in a row)"))
        noteIfBlocked(app, count, in: ctx)
    }

    /// One more push in a row not reported as a call; the count.
    private func countUnreported(_ app: BundleID, in ctx: ModeContext) -> Int {
        ctx.update(State.self) { state -> Int in
            state.apps[app]?.pushOutstanding = false
            state.apps[app]?.unreported += 1
            let n = state.apps[app]?.unreported ?? 0
            if n >= Self.maximumUnreported { state.apps[app]?.blocked = true }
            return n
        }
    }

    private func noteIfBlocked(_ app: BundleID, _ count: Int, in ctx: ModeContext) {
        guard count >= Self.maximumUnreported else { return }
        ctx.emit(.note(app: app, "\(count) VoIP pushes in a row not reported: VoIP pushes to this app are no longer delivered"))
    }

    /// An app that ends with a push outstanding (PushKit's own abort when the delegate
    /// returned without a report, or any other death) did not report it either: it counts
    /// toward the stop of deliveries, unless the user terminated the app.
    public func appExited(_ app: BundleID, byUser: Bool, in ctx: ModeContext) {
        let outstanding = ctx.state(State.self).apps[app]?.pushOutstanding ?? false
        if outstanding {
            ctx.emit(.cancelTimer(app: app, timer: PluginTimer(mode, "report")))
            if byUser {
                ctx.update(State.self) { $0.apps[app]?.pushOutstanding = false }
            } else {
                noteIfBlocked(app, countUnreported(app, in: ctx), in: ctx)
            }
        }
        ctx.update(State.self) { $0.apps[app]?.calls = [] }
    }

    public func appInstalled(_ app: BundleID, in ctx: ModeContext) {
        ctx.update(State.self) { $0.apps.removeValue(forKey: app) }
    }
}
