import Foundation
import Plugins

/// What a deadline is for: a lifecycle timer of one app, a plugin's timer (per app or
/// world-wide), or one of the transfer broker's. Routed by case, never by name.
enum TimerID: Hashable, Sendable {
    case lifecycle(Lifecycle.Timer)
    case plugin(PluginTimer)
    /// A background URLSession's events round: the completion handler must come
    /// within the background budget of `urlSessionDidFinishEvents` (per app).
    case transferRound(session: String)
    /// The transfer daemon's restart after its backoff (host-wide).
    case transferRestart
    /// Delivered transfers waiting to be deleted and acknowledged together (host-wide,
    /// real clock only; see ``Supervisor/transferStepEnded()``).
    case transferForget
    /// The app's host-clock timer `id` (AppKitLess `HostTimer`; see ``AppTimers``), keyed
    /// by the app's process instance: it dies with the process.
    case appTimer(Int)
    /// The grace after a device lock, after which protected files close (host-wide).
    case lockGrace
}

/// One deadline: whose (app and process instance; "" and 0 for host-wide and plugin
/// timers, which outlive a process and are cancelled by their owner) and what for.
struct DeadlineKey: Hashable, Sendable {
    var app: String
    var instance: UInt64
    var timer: TimerID
}

/// The host's clock and its deadlines, as a value: host time (real monotonic since the
/// host started, or virtual, moved only by ``advance(to:)``), the table of deadlines,
/// which are due and in what order, and when the one real-clock timer must next fire.
/// The supervisor owns one and performs what it says (fires deadlines, arms its NIO
/// timer); the rules are tested here without a process or a timer.
struct DeadlineScheduler {
    /// What the real-clock timer must do after a change of the table.
    enum TimerChange: Equatable {
        /// Fire in this much host time (from now).
        case arm(in: Duration)
        /// No deadline is left.
        case disarm
    }

    let mode: ClockMode
    private let realClock = ContinuousClock()
    private let realStart: ContinuousClock.Instant
    /// The date host time zero stands for (virtual dates start at the host's start).
    let startDate: Date
    private var virtualNow: Duration = .zero
    /// When each deadline falls due, and the order it was started in (ties among one
    /// app's deadlines go to the one started first, so the same inputs fire them in the
    /// same order on every run: a dictionary's order is not stable across processes).
    private var deadlines: [DeadlineKey: (due: Duration, order: UInt64)] = [:]
    private var started: UInt64 = 0
    /// The deadline the real-clock timer is armed for.
    private(set) var armedFor: Duration?
    /// How late real-clock deadlines fired (for the precision benchmark).
    private(set) var lateness: [Duration] = []

    init(mode: ClockMode, startDate: Date = Date()) {
        self.mode = mode
        self.startDate = startDate
        realStart = realClock.now
    }

    /// Host time since the host started.
    func now() -> Duration {
        mode == .real ? realStart.duration(to: realClock.now) : virtualNow
    }

    /// Host time as a date.
    func date() -> Date {
        date(at: now())
    }

    /// The date of host time `t`.
    func date(at t: Duration) -> Date {
        startDate.addingTimeInterval(Double(t.components.seconds) + Double(t.components.attoseconds) / 1e18)
    }

    /// The date of a moment another thread observed on the real clock (the reaper's report
    /// of a stop); on the virtual clock, now (nothing but an advance moves that time).
    func date(observed instant: ContinuousClock.Instant) -> Date {
        mode == .real ? date(at: realStart.duration(to: instant)) : date()
    }

    /// Whether `key` is pending.
    func isPending(_ key: DeadlineKey) -> Bool { deadlines[key] != nil }

    /// How many deadlines are pending.
    var count: Int { deadlines.count }

    /// How many pending deadlines `predicate` selects.
    func count(where predicate: (DeadlineKey) -> Bool) -> Int {
        deadlines.keys.count(where: predicate)
    }

    /// Starts (or moves) `key` to fall due `after` from now.
    mutating func start(_ key: DeadlineKey, after: Duration) -> TimerChange? {
        start(key, at: now() + after)
    }

    /// Starts (or moves) `key` to fall due at host time `due` (now, if that has passed):
    /// for a deadline reckoned from an earlier one (a repeating timer's next fire is its
    /// last due time plus its interval, however late that fired).
    mutating func start(_ key: DeadlineKey, at due: Duration) -> TimerChange? {
        started += 1
        deadlines[key] = (due, started)
        return rearm()
    }

    /// When `key` falls due, if it is pending.
    func due(_ key: DeadlineKey) -> Duration? { deadlines[key]?.due }

    /// Cancels `key` (nothing when it is not pending).
    mutating func cancel(_ key: DeadlineKey) -> TimerChange? {
        guard let entry = deadlines.removeValue(forKey: key) else { return nil }
        // The timer must not wake for a deadline that no longer exists (an idle host
        // with suspended apps would wake for every cancelled one).
        return entry.due == armedFor ? rearm() : nil
    }

    /// The earliest deadline and when it falls due; ties go to the app that sorts first,
    /// then to the deadline started first.
    func earliest() -> (key: DeadlineKey, due: Duration)? {
        var best: (key: DeadlineKey, due: Duration, order: UInt64)?
        for (k, v) in deadlines {
            if let b = best {
                guard v.due < b.due || (v.due == b.due && (k.app < b.key.app || (k.app == b.key.app && v.order < b.order))) else { continue }
            }
            best = (k, v.due, v.order)
        }
        return best.map { ($0.key, $0.due) }
    }

    /// Removes and returns the earliest deadline if it falls due by `t`, with when.
    mutating func popDue(by t: Duration) -> (key: DeadlineKey, due: Duration)? {
        guard let (key, due) = earliest(), due <= t else { return nil }
        deadlines.removeValue(forKey: key)
        return (key, due)
    }

    /// Real clock: the timer fired at host time `t`. Removes and returns the earliest
    /// deadline due by then, recording how late it is; call until nil (with the same
    /// `t`), firing each, then ``rearm()``.
    mutating func popDueNow(by t: Duration) -> DeadlineKey? {
        guard let (key, due) = earliest(), due <= t else { return nil }
        deadlines.removeValue(forKey: key)
        lateness.append(now() - due)
        return key
    }

    /// Virtual clock: moves host time to `t` (never back).
    mutating func advance(to t: Duration) {
        virtualNow = max(virtualNow, t)
    }

    /// The lateness recorded so far, cleared.
    mutating func takeLateness() -> [Duration] {
        defer { lateness.removeAll() }
        return lateness
    }

    /// Real clock: what the timer must do so it fires for the earliest deadline; nil when
    /// it is armed for that already (or the clock is virtual: nothing sleeps there).
    mutating func rearm() -> TimerChange? {
        guard mode == .real else { return nil }
        let earliest = deadlines.values.lazy.map(\.due).min()
        guard earliest != armedFor else { return nil }
        armedFor = earliest
        guard let earliest else { return .disarm }
        return .arm(in: max(.zero, earliest - now()))
    }

    /// The timer fired (or was dropped): it is armed for nothing until ``rearm()``.
    mutating func timerFired() {
        armedFor = nil
    }
}

/// Virtual clock: what an advance waits for between two deadlines, so that the apps'
/// answers to what one deadline sent them land at its virtual time. A step is settled
/// when no callback sent in it is unanswered, no stop or kill awaits the kernel's word,
/// and no app is still launching (one that hangs is waited for at most once, as a
/// callback is: a hung app costs one settle timeout, not one per step). The supervisor
/// says what it sent and what came back; the waiting (bounded in real time) is its own.
struct SettleTracker {
    /// One callback sent to one process instance of an app.
    struct Callback: Hashable {
        var app: String
        var instance: UInt64
        var seq: UInt64
    }

    /// What the tracker needs to know of one app's runtime.
    struct AppView {
        var instance: UInt64
        /// A stop to be confirmed, an exit to drain, or a kill to be reaped.
        var awaitsKernel: Bool
        var launching: Bool
    }

    /// An advance is in progress (one at a time).
    var advancing = false
    /// Callbacks sent in this step and not yet returned.
    private(set) var callbacks: Set<Callback> = []
    /// Launches a settle already waited for until its timeout.
    private var launchesWaited: Set<UInt64> = []
    /// The current wait; a timeout of an earlier one is ignored.
    private(set) var token: UInt64 = 0

    mutating func sent(_ callback: Callback) { callbacks.insert(callback) }

    mutating func returned(_ callback: Callback) { callbacks.remove(callback) }

    /// The process instance is gone: nothing of it is waited for.
    mutating func exited(app: String, instance: UInt64) {
        callbacks = callbacks.filter { $0.app != app || $0.instance != instance }
    }

    /// The step is over (settled or timed out): its callbacks are not waited for again.
    mutating func stepEnded() { callbacks.removeAll() }

    func isSettled(_ apps: some Sequence<AppView>) -> Bool {
        guard callbacks.isEmpty else { return false }
        return !apps.contains { $0.awaitsKernel || ($0.launching && !launchesWaited.contains($0.instance)) }
    }

    /// A wait begins: its token.
    mutating func beginWait() -> UInt64 {
        token += 1
        return token
    }

    /// The wait `token` ran out of real time; whether it is the current one. Apps
    /// launching now are not waited for again.
    mutating func timedOut(_ token: UInt64, _ apps: some Sequence<AppView>) -> Bool {
        guard token == self.token else { return false }
        for app in apps where app.launching { launchesWaited.insert(app.instance) }
        return true
    }
}
