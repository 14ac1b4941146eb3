import AppHostProtocol

/// One app process's host-clock timers (AppKitLess `HostTimer`) as a value, in the
/// manner of ``Lifecycle``: the app schedules and invalidates, a deadline falls due, a
/// fire returns, the app runs code again; out come effects (arm or disarm a deadline of
/// the ``DeadlineScheduler``, fire a timer at the app). The supervisor keeps one per
/// runtime and performs the effects; `AppTimersTests` check the rules without a process.
///
/// Rules, as Foundation's `Timer` on a run loop has them where they apply:
/// - A timer falls due `interval` (see ``HostTimerInterval``) after it was scheduled, on
///   the host's clock: real time, or on the virtual clock only when an advance passes it.
/// - A repeating timer's next fire is reckoned from when it fell due, not from when its
///   block ran: the next point of its grid (`due + k × interval`) after now. Fires it
///   missed (a late real-clock wake-up, a block that ran long, a suspension) are not
///   made up: it fires once, then keeps to its grid.
/// - A timer falls due only to be fired when the app runs code (not suspended, nor
///   being suspended, nor terminating) and its previous fire has returned. Otherwise it
///   is *owed*: it is not re-armed (a suspended app costs the host no deadline), and it
///   fires once when the app runs again (``resumed(at:)``) or its fire returns
///   (``returned(_:at:canRun:)``): as on iOS, a suspended app's timers do not run, and on
///   resume each overdue one fires once.
/// - A one-shot timer is forgotten once fired; a repeating one lives until invalidated
///   or the process ends.
/// - At most `maximum` live timers; ids are the app's, unique among its live timers.
struct AppTimers: Sendable, Equatable {
    /// One live timer.
    struct Timer: Sendable, Equatable {
        var interval: Duration
        var repeats: Bool
        /// When it falls due next; for an owed timer, when it fell due.
        var due: Duration
        /// Its fire was sent to the app and has not returned (repeating timers only).
        var inFlight = false
        /// It fell due when it could not be fired (see the type's rules).
        var owed = false
    }

    /// What the supervisor must do.
    enum Effect: Sendable, Equatable {
        /// Start (or move) the deadline of timer `id` to host time `at`.
        case arm(HostTimerID, at: Duration)
        /// Cancel the deadline of timer `id`.
        case disarm(HostTimerID)
        /// Send the app the fire of timer `id` (``ServiceEvent/timerFired(id:)``).
        case fire(HostTimerID)
    }

    /// Why a timer was not scheduled: said to the app (``ServiceReply/refused(reason:)``).
    enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// NaN or infinite.
        case notANumber(Double)
        /// `maximum` timers are live already.
        case tooMany(maximum: Int)
        /// The id names a live timer.
        case idInUse(HostTimerID)

        var description: String {
            switch self {
            case .notANumber(let seconds):
                "the interval \(seconds) is not a number of seconds (a host timer needs a finite interval)"
            case .tooMany(let maximum):
                "the app has \(maximum) live host timers, the most one app may have; invalidate one first"
            case .idInUse(let id):
                "timer \(id) is already scheduled"
            }
        }
    }

    /// Live timers one process may have.
    let maximum: Int
    /// The live timers, by id.
    private(set) var timers: [HostTimerID: Timer] = [:]
    /// How many live timers are owed (so a resume with none costs nothing).
    private(set) var owedCount = 0

    init(maximum: Int = AppBounds.standard.liveTimers) {
        self.maximum = maximum
    }

    /// Live timers.
    var count: Int { timers.count }

    /// Timer `id` is scheduled at host time `now`: it falls due `seconds` from now (see
    /// ``HostTimerInterval``), again every interval after that when `repeats`.
    mutating func schedule(id: HostTimerID, seconds: Double, repeats: Bool, at now: Duration) -> Result<[Effect], Refusal> {
        guard let interval = HostTimerInterval.duration(seconds: seconds) else { return .failure(.notANumber(seconds)) }
        guard timers[id] == nil else { return .failure(.idInUse(id)) }
        guard timers.count < maximum else { return .failure(.tooMany(maximum: maximum)) }
        let due = now + interval
        timers[id] = Timer(interval: interval, repeats: repeats, due: due)
        return .success([.arm(id, at: due)])
    }

    /// The app invalidated timer `id` (nothing when it is not live).
    mutating func invalidate(_ id: HostTimerID) -> [Effect] {
        guard let timer = timers.removeValue(forKey: id) else { return [] }
        if timer.owed { owedCount -= 1 }
        return [.disarm(id)]
    }

    /// The deadline of timer `id` fell due at `now`; `canRun`: the app runs code now.
    mutating func fellDue(_ id: HostTimerID, at now: Duration, canRun: Bool) -> [Effect] {
        guard var timer = timers[id] else { return [] }
        if canRun && !timer.inFlight { return fire(id, at: now) }
        if !timer.owed {
            timer.owed = true
            owedCount += 1
            timers[id] = timer
        }
        return []
    }

    /// The fire of timer `id` returned (its block ran) at `now`. A fire it came to owe
    /// meanwhile is made now if the app runs code (`canRun`), else when it runs again.
    mutating func returned(_ id: HostTimerID, at now: Duration, canRun: Bool) -> [Effect] {
        guard var timer = timers[id], timer.inFlight else { return [] }
        timer.inFlight = false
        timers[id] = timer
        return timer.owed && canRun ? fire(id, at: now) : []
    }

    /// The app runs code again at `now` (resumed, or no longer being suspended): each
    /// owed timer whose last fire has returned fires once, in the order of their ids.
    mutating func resumed(at now: Duration) -> [Effect] {
        guard owedCount > 0 else { return [] }
        let owed = timers.filter { $0.value.owed && !$0.value.inFlight }.keys.sorted()
        return owed.flatMap { fire($0, at: now) }
    }

    /// Ids of the timers owed now, in order (for a host event on resume).
    var owedIDs: [HostTimerID] {
        owedCount > 0 ? timers.filter { $0.value.owed }.keys.sorted() : []
    }

    /// The process ended: every timer goes, and its deadline with it.
    mutating func removeAll() -> [Effect] {
        defer {
            timers.removeAll()
            owedCount = 0
        }
        return timers.keys.sorted().map { .disarm($0) }
    }

    /// Fires timer `id` at `now`: a one-shot is forgotten, a repeating one is re-armed on
    /// its grid and waits for this fire to return before it fires again.
    private mutating func fire(_ id: HostTimerID, at now: Duration) -> [Effect] {
        guard var timer = timers[id] else { return [] }
        if timer.owed {
            timer.owed = false
            owedCount -= 1
        }
        guard timer.repeats else {
            timers[id] = nil
            return [.fire(id)]
        }
        timer.inFlight = true
        timer.due = Self.nextDue(after: timer.due, interval: timer.interval, now: now)
        timers[id] = timer
        return [.fire(id), .arm(id, at: timer.due)]
    }

    /// The first point of the grid `due + k × interval` (k ≥ 1) after `now`.
    static func nextDue(after due: Duration, interval: Duration, now: Duration) -> Duration {
        guard now >= due else { return due + interval }
        let steps = ((now - due) / interval).rounded(.down)
        // A grid so far behind that its step count is no longer exact in a Double (an
        // advance of centuries past a 1 ms timer) starts again from now.
        guard steps < 1e15 else { return now + interval }
        var next = due + interval * (Int(steps) + 1)
        // `steps` is a Double quotient: put `next` on the right side of `now` exactly.
        while next <= now { next += interval }
        while next - interval > now { next -= interval }
        return next
    }
}
