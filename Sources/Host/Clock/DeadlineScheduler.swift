import AppHostProtocol
import Foundation
import Plugins

/// What a deadline is for: a lifecycle timer of one app, a plugin's timer (per app or
/// world-wide), or one of the transfer broker's. Routed by case, never by name.
enum TimerID: Hashable, Sendable {
    case lifecycle(Lifecycle.Timer)
    case plugin(PluginTimer)
    /// A background URLSession's events round: the completion handler must come
    /// within the background budget of `urlSessionDidFinishEvents` (per app).
    case transferRound(session: SessionIdentifier)
    /// The transfer daemon's restart after its backoff (host-wide).
    case transferRestart
    /// Delivered transfers waiting to be deleted and acknowledged together (host-wide,
    /// real clock only; see ``Supervisor/transferStepEnded()``).
    case transferForget
    /// The app's host-clock timer `id` (AppKitLess `HostTimer`; see ``AppTimers``), keyed
    /// by the app's process instance: it dies with the process.
    case appTimer(HostTimerID)
    /// The grace after a device lock, after which protected files close (host-wide).
    case lockGrace
}

/// One deadline: whose (app and process instance; nil and 0 for host-wide timers, 0 for
/// plugin timers, which outlive a process and are cancelled by their owner) and what for.
struct DeadlineKey: Hashable, Sendable {
    var app: BundleID?
    var instance: UInt64
    var timer: TimerID

    /// The order of ties: host-wide deadlines first, then by app.
    static func precedes(_ a: BundleID?, _ b: BundleID?) -> Bool {
        switch (a, b) {
        case (nil, .some): true
        case (.some(let a), .some(let b)): a < b
        default: false
        }
    }
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
                guard v.due < b.due || (v.due == b.due && (DeadlineKey.precedes(k.app, b.key.app) || (k.app == b.key.app && v.order < b.order))) else { continue }
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

/// Virtual clock: who waits for the host to *settle* — every app has answered what it
/// was given or is blocked (see ``Quiescence``), the kernel has confirmed every stop, kill
/// and exit, no spawn is under way and nobody waits for a turn — and the safety net under
/// each wait. Between two deadlines an advance waits for it, so that the apps' answers to
/// what one deadline sent them land at its virtual time; a scenario's step waits for it
/// before the next one; a verb that waits for a blocked app (a launch whose
/// didFinishLaunching never returns) is known to be stuck once the host has settled.
///
/// Real time never decides an outcome here: the safety net is the longest a machine may
/// take to let an app answer or block, and when it runs out the run has failed (see
/// ``Supervisor/safetyNetFired()``), whatever the apps did.
struct SettleTracker {
    /// What a waiter waits for.
    enum Condition: Equatable {
        /// The host is settled.
        case settled
        /// The host is settled and a verb that began after this mark (``VerbWaits``) still
        /// waits for an app: it waits for host time (a watchdog) or for ever.
        case verbStuck(after: UInt64)
    }

    struct Waiter {
        var token: UInt64
        var condition: Condition
        /// When the safety net runs out for it.
        var deadline: ContinuousClock.Instant
        var continuation: CheckedContinuation<Void, Never>
    }

    /// An advance is in progress (one at a time).
    var advancing = false
    private(set) var waiters: [Waiter] = []
    private var lastToken: UInt64 = 0

    var isWaiting: Bool { !waiters.isEmpty }

    /// The earliest safety-net deadline of the waiters.
    var earliestDeadline: ContinuousClock.Instant? { waiters.lazy.map(\.deadline).min() }

    /// A wait begins: its token.
    mutating func add(_ condition: Condition, deadline: ContinuousClock.Instant,
                      _ continuation: CheckedContinuation<Void, Never>) -> UInt64 {
        lastToken &+= 1
        waiters.append(Waiter(token: lastToken, condition: condition, deadline: deadline, continuation: continuation))
        return lastToken
    }

    /// Takes out the waiters `done` says are done, in the order they began.
    mutating func take(where done: (Waiter) -> Bool) -> [Waiter] {
        let taken = waiters.filter(done)
        guard !taken.isEmpty else { return [] }
        waiters.removeAll(where: done)
        return taken
    }

    /// Takes out the waiter `token`, if it still waits.
    mutating func take(token: UInt64) -> Waiter? {
        take { $0.token == token }.first
    }
}

/// Verbs waiting for an app (a launch for its didFinishLaunching, a terminate or an
/// update for its exit), numbered as they begin, so that a scenario step can tell the
/// verb it started from ones left waiting by earlier steps.
struct VerbWaits {
    private(set) var last: UInt64 = 0
    private var open: Set<UInt64> = []

    /// A verb begins waiting: its number.
    mutating func begin() -> UInt64 {
        last &+= 1
        open.insert(last)
        return last
    }

    /// The verb's wait is over.
    mutating func end(_ number: UInt64) {
        open.remove(number)
    }

    /// Whether a verb that began after `mark` still waits.
    func anyOpen(after mark: UInt64) -> Bool {
        open.contains { $0 > mark }
    }
}
