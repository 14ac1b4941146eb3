import AppHostProtocol
import Foundation
import HostConfig

/// `fetch`: background app refresh. An app sets a minimum interval
/// (`setMinimumBackgroundFetchInterval`, default never); the scheduler wakes it, or
/// launches it in the background, and calls `performFetch`, which must call its
/// completion within the `fetch` budget or the app is killed (0x2182bad4).
///
/// Scheduling is deterministic on the host clock and explainable
/// (`apphost fetch schedule`):
/// - an app's next fetch is its last fetch (or the moment it set its interval) plus
///   its interval (at least `fetchMinimum`) times its backoff, never earlier;
/// - when the earliest fetch falls due, every app due within `fetchCoalescing` of it
///   runs with it (one wake-up for several apps);
/// - `noData`, `failed` and slow completions (over half the budget) double the backoff
///   (up to ×16); `newData` resets it to ×1;
/// - nothing runs while Background App Refresh is not available for the app, nor for an
///   app the user terminated until the user launches it again.
public struct FetchPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .fetch }
    public var emulation: ModeEmulation { .emulated }
    public var summary: String { "periodic background fetch (performFetch)" }
    public var services: [String] { ["Application.setMinimumBackgroundFetchInterval", "Application.backgroundRefreshStatus", "ApplicationDelegate.performFetch"] }
    public var keepsRunning: [String] { ["a fetch until its completion (fetch budget)"] }
    public var wakeSources: [String] { ["the fetch scheduler", "apphost fetch <id>"] }

    /// The largest backoff factor.
    public static let maximumBackoff = 16
    static let activity = "background fetch"

    struct App: Sendable {
        var interval: FetchInterval = .never
        /// When the interval was set (the schedule's origin before the first fetch).
        var since: Duration = .zero
        var lastFetch: Duration?
        var lastResult: FetchResult?
        var lastDuration: Duration?
        var backoff = 1
        var outstanding: (id: UInt64, started: Duration)?
        /// The last fetch that stopped running, and whether its budget ran out: a late
        /// completion for it is refused naming that cause.
        var lastEnded: (id: UInt64, expired: Bool)?
        var userTerminated = false
    }
    struct State: PluginState {
        var apps: [BundleID: App] = [:]
        var nextID: UInt64 = 0
        var armedFor: Duration?
        init() {}
    }

    public func lint(_ app: LintSubject) -> [LintFinding] {
        guard app.manifest.bgTaskIdentifiers.isEmpty else { return [] }
        return [LintFinding(.warning, file: app.manifestPath, key: "UIBackgroundModes", mode: mode.rawValue,
            "background mode \"fetch\" with setMinimumBackgroundFetchInterval is deprecated since iOS 13; schedule a BGAppRefreshTask and list its identifier in BGTaskSchedulerPermittedIdentifiers")]
    }

    // MARK: requests

    public func handle(_ request: ServiceRequest, from app: BundleID, in ctx: ModeContext) -> ServiceReply? {
        guard let info = ctx.apps[app] else { return nil }
        switch request {
        case .backgroundRefreshStatus:
            return .refreshStatus(ctx.state(DeviceState.self).refreshStatus(app))
        case .fetchSetMinimumInterval(let interval):
            if case .seconds(let s) = interval, !(s.isFinite && s >= 0) {
                return .failed(code: "invalidArgument", reason: "setMinimumBackgroundFetchInterval: \(s) is not a number of seconds ≥ 0")
            }
            ctx.update(State.self) { s in
                s.apps[app, default: App()].interval = interval
                s.apps[app]?.since = ctx.now
            }
            if interval != .never && !info.declares(.fetch) {
                ctx.emit(.refused(app: app, mode: mode, "setMinimumBackgroundFetchInterval (no fetch will run)"))
            }
            reschedule(ctx)
            return .ok
        case .fetchCompleted(let id, let result):
            guard let a = ctx.state(State.self).apps[app], let out = a.outstanding, out.id == id else {
                let ended = ctx.state(State.self).apps[app]?.lastEnded
                let why = ended?.id != id ? "no performFetch \(id) is running in this app"
                    : ended?.expired == true ? "performFetch \(id)'s completion came after the fetch budget of \(DurationText.format(ctx.profile.fetch)) ran out"
                    : "performFetch \(id) was completed already: its completion handler was called twice"
                return .refused(reason: why)
            }
            let took = ctx.now - out.started
            let slow = took > ctx.profile.duration(.fetch) / 2
            ctx.update(State.self) { s in
                var a = s.apps[app] ?? App()
                a.outstanding = nil
                a.lastEnded = (id, false)
                a.lastResult = result
                a.lastDuration = took
                a.backoff = result == .newData && !slow ? 1 : min(a.backoff * 2, Self.maximumBackoff)
                s.apps[app] = a
            }
            // The completion's line first, then what it ends: the log reads "completed",
            // then the activity's end, then (the host takes it before the effects) the picture.
            let backoff = ctx.state(State.self).apps[app]?.backoff ?? 1
            ctx.emit(.typedNote(app: app, "fetch \(id) completed: \(result.rawValue) after \(DurationText.format(seconds(took)))\(slow ? " (slow)" : ""); backoff ×\(backoff)",
                                .init(fetch: id, result: result)))
            ctx.emit(.cancelTimer(app: app, timer: PluginTimer(mode, "budget")))
            ctx.emit(.endActivity(app: app, name: Self.activity))
            reschedule(ctx)
            return .ok
        default:
            return nil
        }
    }

    // MARK: commands

    public func handle(_ command: ModeCommand, in ctx: ModeContext) throws(ModeCommandError) -> String? {
        switch command {
        case .fetchNow(let app):
            guard let info = ctx.apps[app] else { throw ModeCommandError("unknown bundle id \"\(app)\"") }
            guard info.declares(.fetch) else {
                throw ModeCommandError("\(app) does not declare \"fetch\" in UIBackgroundModes: iOS never fetches for it")
            }
            if let out = ctx.state(State.self).apps[app]?.outstanding {
                throw ModeCommandError("fetch \(out.id) of \(app) is still running (started \(DurationText.format(seconds(ctx.now - out.started))) ago)")
            }
            let id = start(app, ctx, why: "simulated (apphost fetch)")
            reschedule(ctx)
            return "performFetch \(id) sent to \(app) (it has \(DurationText.format(ctx.profile.fetch)) to call its completion)"
        case .fetchSchedule:
            return scheduleText(ctx)
        default:
            return nil
        }
    }

    // MARK: events

    public func timerFired(_ name: String, app: BundleID?, in ctx: ModeContext) {
        switch name {
        case "tick":
            ctx.update(State.self) { $0.armedFor = nil }
            runDue(ctx)
            reschedule(ctx)
        case "budget":
            guard let app, let out = ctx.state(State.self).apps[app]?.outstanding else { return }
            ctx.update(State.self) { s in
                s.apps[app]?.outstanding = nil
                s.apps[app]?.lastEnded = (out.id, true)
                let backoff = s.apps[app]?.backoff ?? 1
                s.apps[app]?.backoff = min(backoff * 2, Self.maximumBackoff)
            }
            ctx.emit(.kill(app: app, namespace: "RUNNINGBOARD", code: .backgroundFetchTimeout,
                           reason: "performFetch \(out.id) did not call its completion handler within the fetch budget of \(DurationText.format(ctx.profile.fetch))"))
            reschedule(ctx)
        default:
            break
        }
    }

    public func appExited(_ app: BundleID, byUser: Bool, in ctx: ModeContext) {
        let had = ctx.update(State.self) { s -> Bool in
            let had = s.apps[app]?.outstanding != nil
            s.apps[app]?.outstanding = nil
            if byUser { s.apps[app, default: App()].userTerminated = true }
            return had
        }
        if had { ctx.emit(.cancelTimer(app: app, timer: PluginTimer(mode, "budget"))) }
        if byUser, ctx.state(State.self).apps[app]?.interval != .never {
            ctx.emit(.note(app: app, "terminated by the user: no background fetch until the user launches it again"))
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
        // A fetch the change made due (refresh back on, Low Power Mode off) runs now, in
        // this step, as the tick would: on the virtual clock too, where a timer armed for
        // "now" would wait for the next `clock advance`.
        if let earliest = earliestDue(ctx), earliest <= ctx.now { runDue(ctx) }
        reschedule(ctx)
    }

    // MARK: scheduling

    /// The interval in force, or nil for never.
    static func interval(_ a: App, _ ctx: ModeContext) -> Duration? {
        let minimum = ctx.profile.fetchMinimum
        switch a.interval {
        case .never: return nil
        case .minimum: return Duration(clampingSeconds: minimum)
        case .seconds(let s): return Duration(clampingSeconds: max(s, minimum))
        }
    }

    /// When `app` is next due, or why it is not scheduled.
    static func next(_ app: BundleID, _ ctx: ModeContext) -> Result<Duration, Blocked> {
        next(app, ctx, state: ctx.state(State.self), device: ctx.state(DeviceState.self))
    }

    /// ``next(_:_:)`` with the states read once by a caller that asks for many apps (a
    /// state read is a table lookup and a dynamic cast: per app, it was most of a
    /// reschedule's cost).
    static func next(_ app: BundleID, _ ctx: ModeContext, state: State, device: DeviceState) -> Result<Duration, Blocked> {
        guard let declares = ctx.declares(app, .fetch) else { return .failure(.notInstalled) }
        let a = state.apps[app] ?? App()
        guard declares else { return .failure(.noMode) }
        guard let interval = interval(a, ctx) else { return .failure(.never) }
        if let why = device.refreshBlocked(app) { return .failure(.refresh(why)) }
        if a.userTerminated { return .failure(.userTerminated) }
        if let out = a.outstanding { return .failure(.running(out.started)) }
        return .success((a.lastFetch ?? a.since) + interval * a.backoff)
    }

    enum Blocked: Error {
        case notInstalled, noMode, never, userTerminated
        case refresh(String)
        case running(Duration)
    }

    /// The apps that can have a due fetch: those that set an interval. An app enters
    /// `State.apps` only through a request or a fetch of its own, and installing an app
    /// removes its entry, so an install or a tick costs the apps that fetch, not every
    /// app installed (10,000 installed apps made each install walk all of them).
    private static func candidates(_ state: State) -> [BundleID] {
        state.apps.compactMap { $0.value.interval == .never ? nil : $0.key }
    }

    /// When the next batch runs: the earliest due fetch, delayed to the latest one due
    /// within the coalescing window after it, so the batch runs each fetch at or after its
    /// own time, never before (coalescing only delays; iOS never runs a fetch before the
    /// minimum interval). Nil when nothing is scheduled.
    private func earliestDue(_ ctx: ModeContext) -> Duration? {
        let state = ctx.state(State.self), device = ctx.state(DeviceState.self)
        var dues: [Duration] = []
        for app in Self.candidates(state) {
            if case .success(let due) = Self.next(app, ctx, state: state, device: device) { dues.append(due) }
        }
        return Self.batchTime(dues, window: ctx.profile.duration(.fetchCoalescing))
    }

    /// The time a batch of work due at `dues` runs: the latest due time within `window` of
    /// the earliest. Every item in the batch is due by then; none runs early.
    static func batchTime(_ dues: [Duration], window: Duration) -> Duration? {
        guard let earliest = dues.min() else { return nil }
        return dues.filter { $0 <= earliest + window }.max()
    }

    private func reschedule(_ ctx: ModeContext) {
        let earliest = earliestDue(ctx)
        let armed = ctx.state(State.self).armedFor
        guard earliest != armed else { return }
        ctx.update(State.self) { $0.armedFor = earliest }
        if let earliest {
            ctx.emit(.startTimer(app: nil, timer: PluginTimer(mode, "tick"), after: max(.zero, earliest - ctx.now)))
        } else {
            ctx.emit(.cancelTimer(app: nil, timer: PluginTimer(mode, "tick")))
        }
    }

    /// Runs every fetch due now (the tick waited for the latest of a batch: see
    /// ``earliestDue(_:)``); none before its time.
    private func runDue(_ ctx: ModeContext) {
        var due: [BundleID] = []
        let state = ctx.state(State.self), device = ctx.state(DeviceState.self)
        for app in Self.candidates(state).sorted() {
            if case .success(let at) = Self.next(app, ctx, state: state, device: device), at <= ctx.now { due.append(app) }
        }
        guard !due.isEmpty else { return }
        if due.count > 1 { ctx.emit(.note(app: nil, "background fetch: \(due.count) apps run together (coalesced): \(due.map(\.rawValue).joined(separator: ", "))")) }
        for app in due {
            if ctx.apps[app]?.isForeground == true {
                // iOS does not fetch for the app in front; its schedule restarts from now.
                ctx.update(State.self) { $0.apps[app]?.lastFetch = ctx.now }
                ctx.emit(.note(app: app, "background fetch skipped: the app is in the foreground"))
                continue
            }
            start(app, ctx, why: "scheduled")
        }
    }

    /// Sends performFetch to `app` (waking or launching it).
    @discardableResult
    private func start(_ app: BundleID, _ ctx: ModeContext, why: String) -> UInt64 {
        let id = ctx.update(State.self) { s -> UInt64 in
            s.nextID += 1
            var a = s.apps[app] ?? App()
            a.outstanding = (s.nextID, ctx.now)
            a.lastFetch = ctx.now
            s.apps[app] = a
            return s.nextID
        }
        // Delivered first, then held: an app the delivery launches has a process only after
        // it, and the hold must reach a cold launch as it does a resumed app.
        ctx.emit(.deliver(app: app, .performFetch(id: id), wake: .launch(.backgroundFetch), because: "background fetch (\(why))"))
        ctx.emit(.beginActivity(app: app, name: Self.activity))
        ctx.emit(.startTimer(app: app, timer: PluginTimer(mode, "budget"), after: ctx.profile.duration(.fetch)))
        ctx.emit(.typedUse(app: app, mode: mode, "background fetch \(id) (\(why))", .init(fetch: id)))
        return id
    }

    private func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// Every app that declares `fetch` or set an interval: when its next fetch is and why.
    func schedule(_ ctx: ModeContext) -> FetchSchedule {
        var entries: [FetchScheduleEntry] = []
        for info in ctx.sortedApps {
            let app = info.bundleIdentifier
            let a = ctx.state(State.self).apps[app] ?? App()
            guard info.declares(.fetch) || a.interval != .never else { continue }
            var e = FetchScheduleEntry(bundleIdentifier: app, status: .scheduled, backoff: a.backoff)
            switch Self.next(app, ctx) {
            case .success(let due):
                e.nextInSeconds = due <= ctx.now ? 0 : seconds(due - ctx.now)
                e.intervalSeconds = seconds(Self.interval(a, ctx) ?? .zero)
                e.lastFetchAgoSeconds = a.lastFetch.map { seconds(ctx.now - $0) }
                e.lastResult = a.lastResult
                e.lastDurationSeconds = a.lastDuration.map(seconds)
            case .failure(.noMode):
                (e.status, e.reason, e.explanation) = (.never, .noFetchMode, "\"fetch\" is not in UIBackgroundModes")
            case .failure(.never):
                (e.status, e.reason, e.explanation) = (.never, .noMinimumInterval, "no minimum interval set (setMinimumBackgroundFetchInterval)")
            case .failure(.refresh(let why)):
                (e.status, e.reason, e.explanation) = (.notScheduled, .backgroundRefreshUnavailable, why)
            case .failure(.userTerminated):
                (e.status, e.reason, e.explanation) = (.notScheduled, .terminatedByUser, "the user terminated it; waits until the user launches it")
            case .failure(.running(let since)):
                e.status = .running
                e.runningForSeconds = seconds(ctx.now - since)
            case .failure(.notInstalled): continue
            }
            entries.append(e)
        }
        return FetchSchedule(apps: entries, coalescingSeconds: ctx.profile.fetchCoalescing)
    }

    public func answer(_ query: ModeQuery, in ctx: ModeContext) throws(ModeCommandError) -> ModeAnswer? {
        guard case .fetchSchedule = query else { return nil }
        return .fetchSchedule(schedule(ctx))
    }

    private func scheduleText(_ ctx: ModeContext) -> String {
        schedule(ctx).text
    }
}

extension FetchSchedule {
    /// One line per app, as `fetch schedule` prints it.
    public var text: String {
        let fmt = { (s: Double) -> String in DurationText.format(s) }
        var lines: [String] = []
        for e in apps {
            var line = "\(e.bundleIdentifier): "
            switch e.status {
            case .scheduled:
                let next = e.nextInSeconds ?? 0
                line += next <= 0 ? "next fetch now" : "next fetch in \(fmt(next))"
                line += " (interval \(fmt(e.intervalSeconds ?? 0))"
                if e.backoff > 1 { line += " × backoff \(e.backoff)" }
                line += e.lastFetchAgoSeconds.map { ", from the last fetch \(fmt($0)) ago" } ?? ", from when the interval was set"
                if let r = e.lastResult { line += "; last result \(r.rawValue)\(e.lastDurationSeconds.map { " in \(fmt($0))" } ?? "")" }
                line += ")"
            case .never: line += "never: \(e.explanation ?? "")"
            case .notScheduled: line += "not scheduled: \(e.explanation ?? "")"
            case .running: line += "fetch running for \(fmt(e.runningForSeconds ?? 0))"
            }
            lines.append(line)
        }
        if lines.isEmpty { return "no app fetches in the background (none declares \"fetch\" and sets an interval)" }
        lines.append("fetches due within \(DurationText.format(coalescingSeconds)) of the earliest run together, when the last of them is due (never early)")
        return lines.joined(separator: "\n")
    }
}
