import AppHostProtocol
import Foundation
import HostConfig

/// `remote-notification`: pushes. Registration (`registerForRemoteNotifications`) needs
/// the `aps-environment` entitlement. A visible push to the app in front reaches its
/// delegate; to an app elsewhere it is shown (an event). A content-available push
/// ("silent") wakes a suspended app or launches it in the background — only with the
/// mode, with Background App Refresh available and unless the user terminated it —
/// and calls `didReceiveRemoteNotification`, whose completion must come within the
/// `silentPush` budget. Silent pushes are throttled per app (`silentPushesPerHour` in
/// the last hour): over budget, the newest is held (an older held one is dropped) and
/// delivered when the app next comes to the foreground; held pushes are dropped when
/// the user terminates the app. Every decision is an event.
public struct RemoteNotificationPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .remoteNotification }
    public var emulation: ModeEmulation { .emulated }
    public var summary: String { "silent pushes wake or launch the app (content-available)" }
    public var services: [String] { ["Application.registerForRemoteNotifications", "ApplicationDelegate.didReceiveRemoteNotification"] }
    public var keepsRunning: [String] { ["a silent push until its completion (silentPush budget)"] }
    public var wakeSources: [String] { ["apphost push", "the push gateway (APNs provider API)"] }

    public static let entitlement = "aps-environment"

    struct Held: Sendable {
        var request: PushRequest
        var since: Duration
    }
    struct App: Sendable {
        /// Host times of the silent pushes delivered in the background (the throttle's window).
        var delivered: [Duration] = []
        var held: Held?
        var outstanding: [UInt64: Duration] = [:]
        /// Visible pushes delivered to the app in front whose completion has not come
        /// (no budget: the app runs anyway), oldest first; at most ``maximumAwaitingVisible``.
        var visible: [UInt64] = []
        /// How the app's latest pushes ended, oldest first; at most ``rememberedEnds``: a
        /// completion for one of them is refused naming its true cause.
        var ended: [(id: UInt64, how: Ended)] = []
        var userTerminated = false
    }
    /// How a push stopped waiting for its completion.
    enum Ended: Sendable, Equatable {
        case completed, budgetExpired, forgotten
    }
    struct State: PluginState {
        var apps: [BundleID: App] = [:]
        var nextID: UInt64 = 0
        init() {}
    }

    public func lint(_ app: LintSubject) -> [LintFinding] {
        guard !app.entitlementKeys.contains(Self.entitlement) else { return [] }
        let file = app.entitlementsPath ?? app.manifestPath
        return [LintFinding(.error, file: file, key: Self.entitlement, mode: mode.rawValue,
            "background mode \"remote-notification\" needs the \(Self.entitlement) entitlement (no entitlements file declares it); without it registerForRemoteNotifications fails and no push arrives")]
    }

    // MARK: requests

    public func handle(_ request: ServiceRequest, from app: BundleID, in ctx: ModeContext) -> ServiceReply? {
        guard let info = ctx.apps[app] else { return nil }
        switch request {
        case .registerForRemoteNotifications:
            guard info.entitlements.contains(Self.entitlement) else {
                ctx.emit(.note(app: app, "registerForRemoteNotifications failed: no \(Self.entitlement) entitlement"))
                return .refused(reason: "no valid \"aps-environment\" entitlement string found for application (add it to \(info.manifest.name).entitlements)")
            }
            let token = DeviceTokens.token(for: app, .apns, in: ctx)
            ctx.emit(.typedNote(app: app, "registered for remote notifications: device token \(token)", .init(deviceToken: token)))
            return .token(token)
        case .remoteNotificationCompleted(let id, let result):
            let a = ctx.state(State.self).apps[app]
            let outstanding = a?.outstanding[id] != nil
            // A visible push to the app in front: its completion is due as a silent push's
            // is, but nothing runs on a budget.
            guard outstanding || a?.visible.contains(id) == true else {
                return .refused(reason: Self.notWaiting(id, a?.ended.last { $0.id == id }?.how, ctx))
            }
            Self.remember(id, .completed, app: app, ctx)
            // The completion's line first, then what it ends (as a fetch's).
            ctx.emit(.typedNote(app: app, "push \(id) completed: \(result.rawValue)", .init(push: id, result: result)))
            if outstanding {
                ctx.update(State.self) { _ = $0.apps[app]?.outstanding.removeValue(forKey: id) }
                ctx.emit(.cancelTimer(app: app, timer: PluginTimer(mode, "budget/\(id)")))
                ctx.emit(.endActivity(app: app, name: Self.activity(id)))
            } else {
                ctx.update(State.self) { $0.apps[app]?.visible.removeAll { $0 == id } }
            }
            return .ok
        default:
            return nil
        }
    }

    static func activity(_ id: UInt64) -> String { "remote notification \(id)" }

    /// Visible pushes per app whose completion is awaited; past it the oldest is forgotten.
    public static let maximumAwaitingVisible = 64
    /// Ended pushes per app whose end is remembered for the refusal of a late completion.
    public static let rememberedEnds = 64

    /// Why a completion for push `id` is refused: its true cause.
    static func notWaiting(_ id: UInt64, _ how: Ended?, _ ctx: ModeContext) -> String {
        switch how {
        case .completed?:
            "push \(id) was completed already: its completion handler was called twice"
        case .budgetExpired?:
            "push \(id)'s completion came after its budget of \(DurationText.format(ctx.profile.silentPush)) ran out"
        case .forgotten?:
            "push \(id) is no longer awaited: more than \(maximumAwaitingVisible) notifications delivered in front were left uncompleted after it"
        case nil:
            "no push \(id) was delivered to this app"
        }
    }

    /// Notes how push `id` ended (the latest ``rememberedEnds`` per app).
    static func remember(_ id: UInt64, _ how: Ended, app: BundleID, _ ctx: ModeContext) {
        ctx.update(State.self) { s in
            s.apps[app, default: App()].ended.append((id, how))
            let extra = (s.apps[app]?.ended.count ?? 0) - rememberedEnds
            if extra > 0 { s.apps[app]?.ended.removeFirst(extra) }
        }
    }

    // MARK: commands

    public func handle(_ command: ModeCommand, in ctx: ModeContext) throws(ModeCommandError) -> String? {
        guard case .push(let request) = command else { return nil }
        let app = request.bundleIdentifier
        guard let info = ctx.apps[app] else { throw ModeCommandError("unknown bundle id \"\(app)\"") }
        let payload: APNsPayload
        do {
            payload = try APNsPayload.parse(Data(request.payload.utf8), name: "payload")
        } catch {
            throw ModeCommandError(error.message)
        }
        let type = request.pushType ?? payload.inferredPushType
        guard type == "alert" || type == "background" else {
            throw ModeCommandError("push type \(type) is not delivered by this path (VoIP pushes: `apphost push --type voip`)")
        }
        let what = payload.summary.map { "\"\($0)\"" } ?? (payload.contentAvailable ? "content-available" : "a push")
        var outcome: [String] = []
        if payload.isVisible {
            if info.isForeground {
                let id = nextID(ctx)
                let forgotten = ctx.update(State.self) { s -> UInt64? in
                    s.apps[app, default: App()].visible.append(id)
                    guard (s.apps[app]?.visible.count ?? 0) > Self.maximumAwaitingVisible else { return nil }
                    return s.apps[app]?.visible.removeFirst()
                }
                if let forgotten { Self.remember(forgotten, .forgotten, app: app, ctx) }
                ctx.emit(.deliver(app: app, .remoteNotification(id: id, userInfo: payload.json, silent: false), wake: .ifRunning,
                                  because: "notification \(what) to the app in front"))
                ctx.emit(.typedNote(app: app, "visible push \(id) (\(request.source))\(Self.idText(request))",
                                    .init(push: id, apnsID: request.apnsID)))
                outcome.append("delivered to the app in front")
            } else {
                ctx.emit(.typedNote(app: app, "notification shown: \(what) (\(request.source))\(Self.idText(request))",
                                    .init(apnsID: request.apnsID)))
                outcome.append("shown as a notification")
            }
        }
        if payload.contentAvailable {
            outcome.append(backgroundDelivery(request, payload, info, ctx))
        } else if type == "background" {
            ctx.emit(.typedNote(app: app, "background push without content-available: nothing to deliver" + Self.idText(request), .init(apnsID: request.apnsID)))
            outcome.append("nothing to deliver (a background push needs content-available: 1)")
        }
        if outcome.isEmpty { outcome.append("nothing shown or delivered (no alert, badge, sound or content-available)") }
        let named = request.apnsID.map { "push \($0) to" } ?? "push to"
        return "\(named) \(app): " + outcome.joined(separator: "; ")
    }

    /// `, apns-id X` for an event's text (the typed field carries it too).
    static func idText(_ request: PushRequest) -> String {
        request.apnsID.map { ", apns-id \($0)" } ?? ""
    }

    /// The content-available part: the rules in order, each decision an event.
    private func backgroundDelivery(_ request: PushRequest, _ payload: APNsPayload, _ info: ModeApp, _ ctx: ModeContext) -> String {
        let app = info.bundleIdentifier
        if info.isForeground {
            if payload.isVisible { return "already delivered in the foreground" }
            deliver(request, payload, app, ctx, why: "silent push to the app in front")
            return "delivered to the app in front"
        }
        guard info.declares(.remoteNotification) else {
            ctx.emit(.refused(app: app, mode: mode, "silent push not delivered in the background"))
            return "not delivered in the background: no \"remote-notification\" in UIBackgroundModes"
        }
        if let why = ctx.state(DeviceState.self).refreshBlocked(app) {
            ctx.emit(.typedNote(app: app, "silent push not delivered: \(why)" + Self.idText(request), .init(apnsID: request.apnsID)))
            return "not delivered: \(why)"
        }
        if ctx.state(State.self).apps[app]?.userTerminated == true {
            ctx.emit(.typedNote(app: app, "silent push not delivered: the user terminated the app (no background launch until the user launches it)" + Self.idText(request), .init(apnsID: request.apnsID)))
            return "not delivered: the user terminated the app"
        }
        let hour = Duration.seconds(3600)
        let budget = Int(ctx.profile.silentPushesPerHour)
        let recent = ctx.update(State.self) { s -> Int in
            let kept = (s.apps[app]?.delivered ?? []).filter { ctx.now - $0 < hour }
            s.apps[app, default: App()].delivered = kept
            return kept.count
        }
        if recent >= budget, request.expiration == 0 {
            ctx.emit(.typedNote(app: app, "silent push dropped: throttled (\(recent) this hour, budget \(budget)/h) and apns-expiration 0 (deliver now or never)\(Self.idText(request))",
                                .init(apnsID: request.apnsID)))
            return "dropped (throttled, and apns-expiration 0 does not wait)"
        }
        if recent >= budget {
            let replaced = ctx.update(State.self) { s -> PushRequest? in
                let old = s.apps[app]?.held?.request
                s.apps[app, default: App()].held = Held(request: request, since: ctx.now)
                return old
            }
            let extra = replaced.map { " (replaces the push held since earlier, now dropped\($0.apnsID.map { ": \($0)" } ?? ""))" } ?? ""
            ctx.emit(.typedNote(app: app, "silent push held: \(recent) delivered in the last hour, budget \(budget)/h; delivered when the app next comes to the foreground\(extra)\(Self.idText(request))",
                                .init(apnsID: request.apnsID)))
            return "held (throttled: \(recent) of \(budget) silent pushes this hour); delivered when the app comes to the foreground"
        }
        ctx.update(State.self) { $0.apps[app, default: App()].delivered.append(ctx.now) }
        deliver(request, payload, app, ctx, why: "silent push (\(recent + 1) of \(budget) this hour)")
        return info.state == .notRunning ? "launching the app in the background" : info.isRunningCode ? "delivered" : "waking the app"
    }

    private func nextID(_ ctx: ModeContext) -> UInt64 {
        ctx.update(State.self) { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
    }

    private func deliver(_ request: PushRequest, _ payload: APNsPayload, _ app: BundleID, _ ctx: ModeContext, why: String) {
        let id = nextID(ctx)
        ctx.update(State.self) { $0.apps[app, default: App()].outstanding[id] = ctx.now }
        // Delivered first, then held (as a fetch): a cold launch keeps the assertion too.
        ctx.emit(.deliver(app: app, .remoteNotification(id: id, userInfo: payload.json, silent: true), wake: .launch(.remoteNotification),
                          because: why))
        ctx.emit(.beginActivity(app: app, name: Self.activity(id)))
        ctx.emit(.startTimer(app: app, timer: PluginTimer(mode, "budget/\(id)"), after: ctx.profile.duration(.silentPush)))
        ctx.emit(.typedUse(app: app, mode: mode, "silent push \(id) (\(request.source))\(Self.idText(request))", .init(push: id, apnsID: request.apnsID)))
    }

    // MARK: events

    public func timerFired(_ name: String, app: BundleID?, in ctx: ModeContext) {
        guard let app, name.hasPrefix("budget/"), let id = UInt64(name.dropFirst("budget/".count)),
              ctx.state(State.self).apps[app]?.outstanding[id] != nil else { return }
        ctx.update(State.self) { _ = $0.apps[app]?.outstanding.removeValue(forKey: id) }
        Self.remember(id, .budgetExpired, app: app, ctx)
        // The same code as a fetch's: a background notification's handler runs under the
        // same "Background Content Fetching" assertion (reason backgroundContentFetching,
        // permittedBackgroundDuration 30 s, in an iOS 7 crash log: gist d108/7841283), and
        // Apple's "EXC_CRASH (SIGKILL)" names 0x2182bad4 for "a background fetch failing to
        // complete in time". (iOS 7 logged that assertion's end as 0x8badf00d, "active
        // assertions beyond permitted time".) Apple's handler doc: call the block "or your
        // app will be terminated".
        ctx.emit(.kill(app: app, namespace: "RUNNINGBOARD", code: .backgroundFetchTimeout,
                       reason: "didReceiveRemoteNotification did not call its completion handler within the push budget of \(DurationText.format(ctx.profile.silentPush))"))
    }

    public func appMoved(_ app: BundleID, from: AppState, to: AppState, in ctx: ModeContext) {
        guard to == .active, let held = ctx.state(State.self).apps[app]?.held else { return }
        ctx.update(State.self) { $0.apps[app]?.held = nil }
        guard let payload = try? APNsPayload.parse(Data(held.request.payload.utf8)) else { return }
        ctx.emit(.note(app: app, "held silent push delivered: the app came to the foreground"))
        deliver(held.request, payload, app, ctx, why: "held silent push, on coming to the foreground")
    }

    public func appExited(_ app: BundleID, byUser: Bool, in ctx: ModeContext) {
        let (outstanding, dropped) = ctx.update(State.self) { s -> ([UInt64], Bool) in
            let ids = (s.apps[app]?.outstanding ?? [:]).keys.sorted()
            s.apps[app]?.outstanding = [:]
            s.apps[app]?.visible = []
            var dropped = false
            if byUser {
                dropped = s.apps[app]?.held != nil
                s.apps[app]?.held = nil
                s.apps[app, default: App()].userTerminated = true
            }
            return (ids, dropped)
        }
        for id in outstanding { ctx.emit(.cancelTimer(app: app, timer: PluginTimer(mode, "budget/\(id)"))) }
        if dropped { ctx.emit(.note(app: app, "held silent push dropped: the user terminated the app")) }
    }

    public func userLaunched(_ app: BundleID, in ctx: ModeContext) {
        // Read first: most launches change nothing (an update writes the state back).
        guard ctx.state(State.self).apps[app]?.userTerminated == true else { return }
        ctx.update(State.self) { $0.apps[app]?.userTerminated = false }
    }

    public func appInstalled(_ app: BundleID, in ctx: ModeContext) {
        ctx.update(State.self) { _ = $0.apps.removeValue(forKey: app) }
    }
}
