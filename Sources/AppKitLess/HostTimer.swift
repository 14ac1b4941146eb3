import AppHostProtocol
import Foundation
import Synchronization

/// A timer that runs on the host's clock, like Foundation's `Timer` scheduled on the main
/// run loop: its block runs on the main queue once its interval has passed, and again
/// every interval if it repeats, until ``invalidate()``.
///
/// The host keeps the deadline, not the app. On the host's real clock a timer fires at
/// real time; on its virtual clock (`apphost daemon --clock virtual`, the policy tests'
/// scenarios) it fires only when `apphost clock advance` moves time past it, and the
/// advance waits for the block to return (and for what it sent the host) before it moves
/// on: what a timed action does lands at its virtual time, the same on every run.
/// `DispatchQueue.asyncAfter`, `DispatchSource` timers, Foundation's `Timer` and
/// `Thread.sleep` keep real time whatever the host's clock: use this for anything a
/// scenario should see at a virtual time.
///
/// As on iOS, a suspended app's timers do not run: one that falls due while the app is
/// suspended fires once when the app runs again (a repeating timer once, not once per
/// interval it missed), after the callbacks that resumed it. A repeating timer keeps to
/// its schedule (fire *n* is due *n* intervals after it was scheduled), not to when its
/// block ran; fires it missed are not made up. A timer does not keep a backgrounded app
/// running: that takes a background task or a mode, as on iOS.
///
/// Bounds (the host's): the interval is at least 1 ms (shorter ones, zero and negative
/// included, become 1 ms, as Foundation raises them to 0.1 ms) and at most 100 years; an
/// interval that is NaN or infinite is refused; an app may have 256 live timers (unless
/// the host is configured otherwise), and the next one is refused until one is
/// invalidated or fires. Scheduling asks the host and waits for its answer (a round trip);
/// invalidating does not wait.
public final class HostTimer: Sendable {
    /// The interval the host runs the timer at, in seconds (``scheduledTimer(withTimeInterval:repeats:block:)``'s,
    /// at least 1 ms and at most 100 years).
    public let timeInterval: TimeInterval
    /// Whether the timer fires again every ``timeInterval`` after its first fire.
    public let repeats: Bool
    /// The number the timer has on the wire; unique among this process's live timers.
    let id: Int

    private struct State {
        var valid = true
        /// The host still knows the timer (a one-shot is forgotten by the host once fired).
        var scheduled = true
        var block: (@MainActor @Sendable (HostTimer) -> Void)?
    }

    private let state: Mutex<State>
    private let scheduler: HostTimerScheduler

    init(id: Int, timeInterval: TimeInterval, repeats: Bool, scheduler: HostTimerScheduler,
         block: @escaping @MainActor @Sendable (HostTimer) -> Void) {
        self.id = id
        self.timeInterval = timeInterval
        self.repeats = repeats
        self.scheduler = scheduler
        state = Mutex(State(block: block))
    }

    /// Schedules a timer on the host's clock, like `Timer.scheduledTimer(withTimeInterval:repeats:block:)`.
    /// Callable from any thread; the block always runs on the main queue (between
    /// delegate callbacks, as the host's other callbacks do).
    ///
    /// - Parameters:
    ///   - interval: Seconds until the first fire, and between fires. Below 1 ms
    ///     (zero and negative included) it is 1 ms; above 100 years, 100 years.
    ///   - repeats: Whether it fires every `interval` until invalidated; if not, it fires
    ///     once and is then invalid.
    ///   - block: Runs at each fire, on the main queue, with the timer (to invalidate it).
    /// - Returns: The scheduled timer. The process keeps it until it is invalidated (or,
    ///   for one that does not repeat, has fired): the result may be ignored.
    /// - Throws: ``ServiceError`` `.refused` when `interval` is NaN or infinite or the app
    ///   has as many live timers as the host allows (256 by default), with the host's
    ///   reason; `.connectionLost` before ``ApplicationMain(delegate:)`` has connected.
    @discardableResult
    public static func scheduledTimer(withTimeInterval interval: TimeInterval, repeats: Bool,
                                      block: @escaping @MainActor @Sendable (HostTimer) -> Void) throws(ServiceError) -> HostTimer {
        try HostTimerScheduler.shared.schedule(interval: interval, repeats: repeats, block: block)
    }

    /// Whether the timer may still fire: true until ``invalidate()``, and for a timer
    /// that does not repeat, until its block has run.
    public var isValid: Bool {
        state.withLock { $0.valid }
    }

    /// Stops the timer, like `Timer.invalidate()`: its block does not run again (a fire
    /// already on its way is dropped) and is released, and the host forgets it. Callable
    /// from any thread, also from the block; again on an invalid timer it does nothing.
    public func invalidate() {
        let tellHost = state.withLock { state -> Bool? in
            guard state.valid else { return nil }
            state.valid = false
            state.block = nil
            defer { state.scheduled = false }
            return state.scheduled
        }
        guard let tellHost else { return }
        scheduler.forget(self, tellHost: tellHost)
    }

    /// A fire from the host: runs the block unless the timer was invalidated meanwhile.
    /// A timer that does not repeat is invalid once its block has returned.
    @MainActor
    func fire() {
        let block = state.withLock { state -> (@MainActor @Sendable (HostTimer) -> Void)? in
            guard state.valid else { return nil }
            if !repeats { state.scheduled = false }
            return state.block
        }
        guard let block else { return }
        block(self)
        if !repeats { invalidate() }
    }
}

/// This process's host timers: the live ones by id, and the connection their requests
/// go over (bound with the ``Application``, as ``BGTaskScheduler`` is). One per process,
/// ``shared``; tests make their own (through ``ServiceRouter``).
final class HostTimerScheduler: Sendable {
    /// The process's timers.
    static let shared = HostTimerScheduler()

    private struct State {
        weak var application: Application?
        var timers: [Int: HostTimer] = [:]
        var lastID = 0
    }

    private let state = Mutex(State())

    /// A scheduler bound to no application yet (``ServiceRouter`` binds it).
    init() {}

    /// Sends later requests over `application`'s connection.
    func bind(_ application: Application?) {
        state.withLock { $0.application = application }
    }

    /// Live timers (scheduled, not yet invalid).
    var count: Int {
        state.withLock { $0.timers.count }
    }

    /// Asks the host for a timer (see ``HostTimer/scheduledTimer(withTimeInterval:repeats:block:)``).
    func schedule(interval: TimeInterval, repeats: Bool,
                  block: @escaping @MainActor @Sendable (HostTimer) -> Void) throws(ServiceError) -> HostTimer {
        // Recorded before asking: a fire the host sends right after its answer (a 1 ms
        // timer scheduled off the main queue) must find it.
        let (timer, application) = state.withLock { state in
            state.lastID += 1
            let timer = HostTimer(id: state.lastID, timeInterval: HostTimerInterval.seconds(interval) ?? interval,
                                  repeats: repeats, scheduler: self, block: block)
            state.timers[timer.id] = timer
            return (timer, state.application)
        }
        let request = ServiceRequest.timerSchedule(id: HostTimerID(timer.id), interval: interval, repeats: repeats)
        do throws(ServiceError) {
            guard let application else {
                throw ServiceError(.connectionLost, reason: "\(request.apiName) was called before ApplicationMain(delegate:) connected to the host")
            }
            let reply = try application.serviceRequest(request)
            guard case .ok = reply else { throw ServiceRouter.unexpected(reply, to: request) }
            return timer
        } catch {
            // Never scheduled: invalid, and nothing for the host to forget.
            timer.markUnscheduled()
            state.withLock { _ = $0.timers.removeValue(forKey: timer.id) }
            throw error
        }
    }

    /// Timer `id` fired (on the main queue): runs it if it is live. A fire of a timer
    /// invalidated meanwhile (the invalidation and the fire crossed on the socket) is
    /// dropped.
    @MainActor
    func fire(_ id: Int) {
        state.withLock { $0.timers[id] }?.fire()
    }

    /// `timer` was invalidated: forgotten here, and by the host when it still knows it.
    fileprivate func forget(_ timer: HostTimer, tellHost: Bool) {
        let application = state.withLock { state in
            _ = state.timers.removeValue(forKey: timer.id)
            return state.application
        }
        guard tellHost, let application else { return }
        do {
            try application.connection.send(.invalidateTimer(id: HostTimerID(timer.id)))
        } catch {
            application.connectionFailed(error)
        }
    }
}

extension HostTimer {
    /// The host refused it or could not be asked: invalid, with nothing to tell the host.
    fileprivate func markUnscheduled() {
        state.withLock { state in
            state.valid = false
            state.scheduled = false
            state.block = nil
        }
    }
}
