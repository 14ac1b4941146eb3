import AppHostProtocol
import Foundation
import HostConfig

/// `processing`, and BGTaskScheduler for both kinds of task: app-refresh tasks (which
/// need `fetch`) and processing tasks (which need `processing`).
///
/// - Handlers are registered for identifiers in `BGTaskSchedulerPermittedIdentifiers`
///   (others: `notPermitted`). At most one refresh and ten processing requests are
///   pending per app; submitting an identifier again replaces its request.
/// - A request runs once its `earliestBeginDate` has passed, Background App Refresh is
///   available, the user has not terminated the app, and — for processing — the
///   device is plugged in / online when the request requires it. Requests due within
///   `fetchCoalescing` of each other run together, when the last of them is due (coalescing only delays). A request submitted in front waits
///   until the app leaves the foreground. Background App Refresh turned off cancels the
///   pending requests of the apps it covers.
/// - A running task has the `fetch` budget (refresh) or the `processing` budget; its
///   expiration handler is called `expirationWarning` before the end, and a task still
///   not completed at the end gets the app killed (0x2182bad2). A launch for an
///   identifier the app registered no handler for ends it: AppKitLess raises iOS's
///   "No launch handler registered" NSInternalInconsistencyException and aborts
///   (SIGABRT); an app that returns from the launch instead is killed here.
public struct ProcessingPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .processing }
    public var emulation: ModeEmulation { .emulated }
    public var summary: String { "deferrable background work (BGTaskScheduler: BGProcessingTask, BGAppRefreshTask)" }
    public var services: [String] { ["BGTaskScheduler.register", "BGTaskScheduler.submit", "BGTaskScheduler.cancel", "BGTask.setTaskCompleted"] }
    public var keepsRunning: [String] { ["a running BGTask until setTaskCompleted (fetch / processing budget)"] }
    public var wakeSources: [String] { ["the BGTaskScheduler", "apphost bgtask run <id> <identifier>"] }

    /// Pending requests allowed per app.
    public static let maximumRefresh = 1
    public static let maximumProcessing = 10

    struct Pending: Sendable {
        var info: BGTaskRequestInfo
        var earliest: Duration
    }
    struct Running: Sendable {
        var kind: BGTaskRequestInfo.Kind
        var started: Duration
        var expired = false
    }
    struct App: Sendable {
        var registered: Set<String> = []
        var pending: [String: Pending] = [:]
        var running: [String: Running] = [:]
        /// How each identifier's last run ended (true: its budget ran out), for the
        /// refusal of a late `setTaskCompleted`; one entry per permitted identifier at most.
        var ended: [String: Bool] = [:]
        var userTerminated = false
    }
    struct State: PluginState {
        var apps: [BundleID: App] = [:]
        var armedFor: Duration?
        init() {}
    }

    public func lint(_ app: LintSubject) -> [LintFinding] {
        guard app.manifest.bgTaskIdentifiers.isEmpty else { return [] }
        return [LintFinding(.error, file: app.manifestPath, key: "BGTaskSchedulerPermittedIdentifiers", mode: mode.rawValue,
            "background mode \"processing\" needs BGTaskSchedulerPermittedIdentifiers: without it every BGTaskScheduler.register fails (notPermitted)")]
    }

    static func activity(_ identifier: String) -> String { "BGTask \(identifier)" }

    // MARK: requests

    public func handle(_ request: ServiceRequest, from app: BundleID, in ctx: ModeContext) -> ServiceReply? {
        guard let info = ctx.apps[app] else { return nil }
        switch request {
        case .bgRegister(let identifier):
            guard info.manifest.bgTaskIdentifiers.contains(identifier) else {
                return .failed(code: "notPermitted", reason: "\"\(identifier)\" is not in BGTaskSchedulerPermittedIdentifiers")
            }
            ctx.update(State.self) { _ = $0.apps[app, default: App()].registered.insert(identifier) }
            return .ok
        case .bgSubmit(let request):
            if let refusal = submitRefusal(request, info, ctx) { return refusal }
            let earliest = ctx.now + Duration(clampingSeconds: request.earliestBegin ?? 0)
            ctx.update(State.self) { $0.apps[app, default: App()].pending[request.identifier] = Pending(info: request, earliest: earliest) }
            ctx.emit(.used(app: app, mode: request.kind == .refresh ? .fetch : .processing, "submitted \(request.kind.rawValue) task \(request.identifier)"))
            reschedule(ctx)
            return .ok
        case .bgCancel(let identifier):
            ctx.update(State.self) { s in
                if let identifier { s.apps[app]?.pending.removeValue(forKey: identifier) } else { s.apps[app]?.pending = [:] }
            }
            reschedule(ctx)
            return .ok
        case .bgPending:
            let pending = (ctx.state(State.self).apps[app]?.pending ?? [:]).values.map(\.info).sorted { $0.identifier < $1.identifier }
            return .bgRequests(pending)
        case .bgTaskCompleted(let identifier, let success):
            guard ctx.state(State.self).apps[app]?.running[identifier] != nil else {
                let why = switch ctx.state(State.self).apps[app]?.ended[identifier] {
                case true?: "task \(identifier)'s setTaskCompleted came after its budget ran out"
                case false?: "task \(identifier) was completed already: setTaskCompleted was called twice"
                case nil: "no task \(identifier) is running in this app"
                }
                return .refused(reason: why)
            }
            finish(app, identifier, ctx)
            ctx.update(State.self) { $0.apps[app]?.ended[identifier] = false }
            ctx.emit(.typedNote(app: app, "BGTask \(identifier) completed (success: \(success))", .init(bgTask: identifier, success: success)))
            return .ok
        default:
            return nil
        }
    }

    private func submitRefusal(_ r: BGTaskRequestInfo, _ info: ModeApp, _ ctx: ModeContext) -> ServiceReply? {
        if let begin = r.earliestBegin, !begin.isFinite {
            return .failed(code: "invalidArgument", reason: "earliestBeginDate is \(begin) seconds away: not a date")
        }
        guard info.manifest.bgTaskIdentifiers.contains(r.identifier) else {
            return .failed(code: "notPermitted", reason: "\"\(r.identifier)\" is not in BGTaskSchedulerPermittedIdentifiers")
        }
        let needed: BackgroundMode = r.kind == .refresh ? .fetch : .processing
        guard info.declares(needed) else {
            ctx.emit(.refused(app: info.bundleIdentifier, mode: needed, "BGTaskScheduler.submit(\(r.kind.rawValue))"))
            return .failed(code: "notPermitted", reason: "\(r.kind == .refresh ? "app-refresh" : "processing") tasks need \"\(needed.rawValue)\" in UIBackgroundModes")
        }
        if let why = ctx.state(DeviceState.self).refreshBlocked(info.bundleIdentifier) {
            return .failed(code: "unavailable", reason: why)
        }
        let pending = ctx.state(State.self).apps[info.bundleIdentifier]?.pending ?? [:]
        let sameKind = pending.values.filter { $0.info.kind == r.kind && $0.info.identifier != r.identifier }.count
        let limit = r.kind == .refresh ? Self.maximumRefresh : Self.maximumProcessing
        if sameKind >= limit {
            return .failed(code: "tooManyPendingTaskRequests",
                           reason: "at most \(limit) \(r.kind.rawValue) request\(limit == 1 ? "" : "s") may be pending")
        }
        return nil
    }

    // MARK: commands

    public func handle(_ command: ModeCommand, in ctx: ModeContext) throws(ModeCommandError) -> String? {
        switch command {
        case .bgTaskRun(let app, let identifier):
            guard ctx.apps[app] != nil else { throw ModeCommandError("unknown bundle id \"\(app)\"") }
            guard ctx.state(State.self).apps[app]?.pending[identifier] != nil else {
                let pending = (ctx.state(State.self).apps[app]?.pending.keys).map { Array($0).sorted() } ?? []
                throw ModeCommandError("\(app) has no pending request \(identifier) (as in the debugger, a task must be submitted first; pending: \(pending.isEmpty ? "none" : pending.joined(separator: ", ")))")
            }
            start(app, identifier, ctx, why: "simulated (apphost bgtask run)")
            reschedule(ctx)
            return "BGTask \(identifier) launched for \(app)"
        case .bgTaskExpire(let app, let identifier):
            guard ctx.apps[app] != nil else { throw ModeCommandError("unknown bundle id \"\(app)\"") }
            guard ctx.state(State.self).apps[app]?.running[identifier] != nil else {
                throw ModeCommandError("\(app) has no running task \(identifier) (run it with `apphost bgtask run \(app) \(identifier)`)")
            }
            expire(app, identifier, ctx)
            // As at the real expiration: it has the warning lead to complete.
            ctx.emit(.startTimer(app: app, timer: PluginTimer(mode, "end/\(identifier)"), after: ctx.profile.duration(.expirationWarning)))
            return "expiration handler of \(identifier) called in \(app); it has \(DurationText.format(ctx.profile.expirationWarning)) to call setTaskCompleted"
        case .bgTaskList(let only):
            if let only, ctx.apps[only] == nil { throw ModeCommandError("unknown bundle id \"\(only)\"") }
            return listText(only, ctx)
        default:
            return nil
        }
    }

    // MARK: events

    public func timerFired(_ name: String, app: BundleID?, in ctx: ModeContext) {
        if name == "tick" {
            ctx.update(State.self) { $0.armedFor = nil }
            runDue(ctx)
            reschedule(ctx)
            return
        }
        guard let app, let slash = name.firstIndex(of: "/") else { return }
        let identifier = String(name[name.index(after: slash)...])
        guard let running = ctx.state(State.self).apps[app]?.running[identifier] else { return }
        switch name[..<slash] {
        case "warn":
            if !running.expired { expire(app, identifier, ctx) }
        case "end":
            ctx.update(State.self) { s in
                s.apps[app]?.running.removeValue(forKey: identifier)
                s.apps[app]?.ended[identifier] = true
            }
            let budget = running.kind == .refresh ? ctx.profile.fetch : ctx.profile.processing
            ctx.emit(.kill(app: app, namespace: "RUNNINGBOARD", code: .backgroundTaskTimeout,
                           reason: "BGTask \(identifier) did not call setTaskCompleted within \(DurationText.format(budget))\(running.expired ? " (its expiration handler ran)" : "")"))
        default:
            break
        }
    }

    public func callbackReturned(_ event: ServiceEvent, app: BundleID, in ctx: ModeContext) {
        guard case .bgTaskLaunch(let identifier, _) = event,
              ctx.state(State.self).apps[app]?.registered.contains(identifier) != true else { return }
        // iOS raises "No launch handler registered for task with identifier" and the app dies;
        // AppKitLess aborts before returning, so only an app without it gets here.
        finish(app, identifier, ctx)
        ctx.emit(.kill(app: app, namespace: "APPHOST", code: nil,
                       reason: "no launch handler registered for task with identifier \(identifier) (register every permitted identifier before didFinishLaunching returns)"))
    }

    public func appExited(_ app: BundleID, byUser: Bool, in ctx: ModeContext) {
        let running = ctx.update(State.self) { s -> [String] in
            let ids = (s.apps[app]?.running ?? [:]).keys.sorted()
            s.apps[app]?.running = [:]
            s.apps[app]?.registered = []
            if byUser { s.apps[app, default: App()].userTerminated = true }
            return ids
        }
        for identifier in running {
            ctx.emit(.cancelTimer(app: app, timer: PluginTimer(mode, "warn/\(identifier)")))
            ctx.emit(.cancelTimer(app: app, timer: PluginTimer(mode, "end/\(identifier)")))
        }
        reschedule(ctx)
    }

    public func userLaunched(_ app: BundleID, in ctx: ModeContext) {
        guard ctx.state(State.self).apps[app]?.userTerminated == true else { return }
        ctx.update(State.self) { $0.apps[app]?.userTerminated = false }
        reschedule(ctx)
    }

    public func appInstalled(_ app: BundleID, in ctx: ModeContext) {
        ctx.update(State.self) { _ = $0.apps.removeValue(forKey: app) }
        reschedule(ctx)
    }

    public func conditionsChanged(in ctx: ModeContext) {
        cancelWhereRefreshIsOff(ctx)
        runIfDue(ctx)
    }

    /// Background App Refresh turned off (for every app or for one) cancels the pending
    /// requests of the apps it covers; a running task keeps its budget. Low Power Mode and
    /// a configuration's restriction only hold requests back (they are not the user's
    /// "off"). Submitting again while it is off is refused with `unavailable`.
    private func cancelWhereRefreshIsOff(_ ctx: ModeContext) {
        let device = ctx.state(DeviceState.self)
        let cancelled = ctx.update(State.self) { s -> [(BundleID, [String])] in
            var out: [(BundleID, [String])] = []
            for (app, a) in s.apps.sorted(by: { $0.key < $1.key }) where !a.pending.isEmpty
                && (device.refreshOffGlobally || device.refreshOff.contains(app)) {
                out.append((app, a.pending.keys.sorted()))
                s.apps[app]?.pending = [:]
            }
            return out
        }
        for (app, identifiers) in cancelled {
            ctx.emit(.note(app: app, "BGTask requests cancelled, Background App Refresh is off: \(identifiers.joined(separator: ", "))"))
        }
    }

    /// A request submitted while the app was in front waits for it to leave the
    /// foreground; going home makes it runnable (due now if its date has passed), and
    /// coming back to the front holds it again.
    public func appMoved(_ app: BundleID, from: AppState, to: AppState, in ctx: ModeContext) {
        let wasForeground = from == .active || from == .inactive
        let isForeground = to == .active || to == .inactive
        guard wasForeground != isForeground, ctx.state(State.self).apps[app]?.pending.isEmpty == false else { return }
        runIfDue(ctx)
    }

    // MARK: scheduling

    /// Why a pending request cannot run now (nil: it can, once its date has come).
    static func waiting(_ app: BundleID, _ p: Pending, _ ctx: ModeContext) -> String? {
        let device = ctx.state(DeviceState.self)
        if let why = device.refreshBlocked(app) { return why }
        if ctx.state(State.self).apps[app]?.userTerminated == true { return "the user terminated the app; waits until the user launches it" }
        if ctx.apps[app]?.isForeground == true { return "the app is in the foreground" }
        if p.info.kind == .processing {
            if p.info.requiresExternalPower && !device.pluggedIn { return "requires external power (device on battery)" }
            if p.info.requiresNetworkConnectivity && device.network == .none { return "requires network connectivity (no network)" }
        }
        return nil
    }

    /// When the next batch of requests that could run (nothing they wait for) runs: the
    /// first one's `earliestBeginDate`, delayed to the latest one within the coalescing
    /// window after it. Coalescing only delays: no task runs before its
    /// `earliestBeginDate` ("the earliest date and time at which to run the task").
    private func earliestRunnable(_ ctx: ModeContext) -> Duration? {
        var dues: [Duration] = []
        for (app, a) in ctx.state(State.self).apps {
            for p in a.pending.values where Self.waiting(app, p, ctx) == nil && a.running[p.info.identifier] == nil {
                dues.append(p.earliest)
            }
        }
        return FetchPlugin.batchTime(dues, window: ctx.profile.duration(.fetchCoalescing))
    }

    /// A device change (plugged in, online, refresh back on) that makes a request
    /// due runs it now, in this step, as the tick would: on the virtual clock too, where a
    /// timer armed for "now" would wait for the next `clock advance`.
    private func runIfDue(_ ctx: ModeContext) {
        if let earliest = earliestRunnable(ctx), earliest <= ctx.now { runDue(ctx) }
        reschedule(ctx)
    }

    private func reschedule(_ ctx: ModeContext) {
        let earliest = earliestRunnable(ctx)
        guard earliest != ctx.state(State.self).armedFor else { return }
        ctx.update(State.self) { $0.armedFor = earliest }
        if let earliest {
            ctx.emit(.startTimer(app: nil, timer: PluginTimer(mode, "tick"), after: max(.zero, earliest - ctx.now)))
        } else {
            ctx.emit(.cancelTimer(app: nil, timer: PluginTimer(mode, "tick")))
        }
    }

    private func runDue(_ ctx: ModeContext) {
        // Only what is due: the tick waited for the latest of the batch (`earliestRunnable`).
        let horizon = ctx.now
        var due: [(BundleID, String)] = []
        for (app, a) in ctx.state(State.self).apps.sorted(by: { $0.key < $1.key }) {
            for p in a.pending.values.sorted(by: { $0.info.identifier < $1.info.identifier })
            where p.earliest <= horizon && Self.waiting(app, p, ctx) == nil && a.running[p.info.identifier] == nil {
                due.append((app, p.info.identifier))
            }
        }
        if due.count > 1 {
            ctx.emit(.note(app: nil, "BGTaskScheduler: \(due.count) tasks run together (coalesced): \(due.map { "\($0.0) \($0.1)" }.joined(separator: ", "))"))
        }
        for (app, identifier) in due { start(app, identifier, ctx, why: "scheduled") }
    }

    private func start(_ app: BundleID, _ identifier: String, _ ctx: ModeContext, why: String) {
        guard let p = ctx.state(State.self).apps[app]?.pending[identifier] else { return }
        ctx.update(State.self) { s in
            s.apps[app]?.pending.removeValue(forKey: identifier)
            s.apps[app]?.running[identifier] = Running(kind: p.info.kind, started: ctx.now)
        }
        let budget = ctx.profile.duration(p.info.kind == .refresh ? .fetch : .processing)
        let lead = ctx.profile.duration(.expirationWarning)
        // Delivered first, then held (as a fetch): a cold launch keeps the assertion too.
        ctx.emit(.deliver(app: app, .bgTaskLaunch(identifier: identifier, kind: p.info.kind), wake: .launch(.backgroundTask),
                          because: "BGTaskScheduler \(p.info.kind.rawValue) task (\(why))"))
        ctx.emit(.beginActivity(app: app, name: Self.activity(identifier)))
        ctx.emit(.startTimer(app: app, timer: PluginTimer(mode, "warn/\(identifier)"), after: budget > lead ? budget - lead : .zero))
        ctx.emit(.startTimer(app: app, timer: PluginTimer(mode, "end/\(identifier)"), after: budget))
        ctx.emit(.typedUse(app: app, mode: p.info.kind == .refresh ? .fetch : .processing, "BGTask \(identifier) launched (\(why))", .init(bgTask: identifier)))
    }

    private func expire(_ app: BundleID, _ identifier: String, _ ctx: ModeContext) {
        ctx.update(State.self) { $0.apps[app]?.running[identifier]?.expired = true }
        ctx.emit(.cancelTimer(app: app, timer: PluginTimer(mode, "warn/\(identifier)")))
        ctx.emit(.deliver(app: app, .bgTaskExpire(identifier: identifier), wake: .wake, because: "BGTask \(identifier) is about to run out of time"))
    }

    private func finish(_ app: BundleID, _ identifier: String, _ ctx: ModeContext) {
        ctx.update(State.self) { _ = $0.apps[app]?.running.removeValue(forKey: identifier) }
        ctx.emit(.cancelTimer(app: app, timer: PluginTimer(mode, "warn/\(identifier)")))
        ctx.emit(.cancelTimer(app: app, timer: PluginTimer(mode, "end/\(identifier)")))
        ctx.emit(.endActivity(app: app, name: Self.activity(identifier)))
        reschedule(ctx)
    }

    /// The pending and running tasks of every app (or `only`), running first, each in identifier order.
    func listing(_ only: BundleID?, _ ctx: ModeContext) -> [BGTaskListing] {
        func secs(_ d: Duration) -> Double {
            Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
        }
        var out: [BGTaskListing] = []
        for (app, a) in ctx.state(State.self).apps.sorted(by: { $0.key < $1.key }) where only == nil || only == app {
            for (identifier, r) in a.running.sorted(by: { $0.key < $1.key }) {
                out.append(BGTaskListing(bundleIdentifier: app, identifier: identifier, kind: r.kind, state: .running,
                                         runningForSeconds: secs(ctx.now - r.started), expirationHandlerCalled: r.expired))
            }
            for p in a.pending.values.sorted(by: { $0.info.identifier < $1.info.identifier }) {
                let why = Self.waiting(app, p, ctx)
                out.append(BGTaskListing(bundleIdentifier: app, identifier: p.info.identifier, kind: p.info.kind, state: .pending,
                                         waitingFor: why, dueInSeconds: why != nil ? nil : p.earliest <= ctx.now ? 0 : secs(p.earliest - ctx.now),
                                         requiresExternalPower: p.info.requiresExternalPower,
                                         requiresNetworkConnectivity: p.info.requiresNetworkConnectivity))
            }
        }
        return out
    }

    public func answer(_ query: ModeQuery, in ctx: ModeContext) throws(ModeCommandError) -> ModeAnswer? {
        guard case .bgTasks(let only) = query else { return nil }
        if let only, ctx.apps[only] == nil { throw ModeCommandError("unknown bundle id \"\(only)\"") }
        return .bgTasks(listing(only, ctx))
    }

    private func listText(_ only: BundleID?, _ ctx: ModeContext) -> String {
        BGTaskListing.text(listing(only, ctx))
    }
}

extension BGTaskListing {
    /// One line per task, as `bgtask list` prints them.
    public static func text(_ tasks: [BGTaskListing]) -> String {
        let fmt = { (s: Double) -> String in DurationText.format(s) }
        var lines: [String] = []
        for t in tasks {
            var line = "\(t.bundleIdentifier) \(t.identifier) (\(t.kind.rawValue)): "
            switch t.state {
            case .running:
                line += "running for \(fmt(t.runningForSeconds ?? 0))\(t.expirationHandlerCalled == true ? ", expiration handler called" : "")"
            case .pending:
                if let why = t.waitingFor {
                    line += "waiting: \(why)"
                } else {
                    let due = t.dueInSeconds ?? 0
                    line += due <= 0 ? "due now" : "due in \(fmt(due))"
                }
                var needs: [String] = []
                if t.requiresExternalPower { needs.append("external power") }
                if t.requiresNetworkConnectivity { needs.append("network") }
                if !needs.isEmpty { line += " (requires \(needs.joined(separator: " and ")))" }
            }
            lines.append(line)
        }
        return lines.isEmpty ? "no pending or running BGTaskScheduler tasks" : lines.joined(separator: "\n")
    }
}
