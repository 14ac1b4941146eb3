import AppHostProtocol
import AppHostSystem
import Foundation
import HostConfig
import Logging
import NIOCore
import NIOPosix
import Plugins
import SystemPackage

extension Supervisor {
    // MARK: - Clock

    /// Host time since the host started: real monotonic, or virtual.
    public func hostNow() -> Duration {
        scheduler.now()
    }

    /// Host time as a date (virtual dates start at the host's start date).
    func now() -> Date {
        scheduler.date()
    }

    /// The date the host stamps on an event at `instant` of the real clock (read on any
    /// thread): what a caller compares with event times. `Date()` is another clock (the
    /// wall clock, which the kernel slews apart from the monotonic one the host counts
    /// in): a bench's `Date()` before a call and an event's time a few microseconds later
    /// could be out of order. On the virtual clock, the host's date now.
    public func hostDate(at instant: ContinuousClock.Instant) -> Date {
        scheduler.date(observed: instant)
    }

    /// The clock's mode, host time and date.
    public func clockReading() -> (mode: ClockMode, now: Duration, date: Date) {
        (configuration.clock, hostNow(), now())
    }

    /// Publishes host time to the host's log lines (virtual clock only; see ``HostLogClock``).
    public func publishLogClock() {
        guard configuration.clock == .virtual, let clock = configuration.logClock else { return }
        clock.set(start: scheduler.startDate, elapsed: scheduler.now())
    }

    /// How late real-clock deadlines fired so far (and clears the record).
    public func takeDeadlineLateness() -> [Duration] {
        scheduler.takeLateness()
    }

    /// Virtual clock only: moves time forward by `duration`, firing every deadline
    /// that falls inside, in order. Before each next deadline the host settles: every app
    /// has answered what the last one sent it or is blocked, and the kernel has confirmed
    /// every stop and exit (see ``settle()``), so the apps' replies land at the right
    /// virtual time however slow the machine. Throws when the safety net ran out during
    /// the advance (the machine did not let an app answer within `settleTimeout` of real
    /// time): the outcome then no longer depends only on the apps.
    public func advanceClock(by duration: Duration) async throws(ControlError) -> Duration {
        guard configuration.clock == .virtual else {
            throw ControlError(.badRequest, "the host runs on the real clock; start it with `--clock virtual` to move time by hand")
        }
        guard duration >= .zero else { throw ControlError(.badRequest, "time only moves forward") }
        guard !settling.advancing else { throw ControlError(.badRequest, "the clock is already being advanced") }
        settling.advancing = true
        defer { settling.advancing = false }
        let failuresBefore = safetyNetFailures.count
        let target = scheduler.now() + duration
        await settle()
        while let (key, due) = scheduler.popDue(by: target) {
            observeRunLoops()
            scheduler.advance(to: due)
            publishLogClock()
            fire(key)
            await settle()
            // The app the deadline was for ran: its footprint is read again.
            if memoryAdvanceStep(key.app) { await settle() }
        }
        observeRunLoops()
        scheduler.advance(to: target)
        publishLogClock()
        await settle()
        // Every app running code may have grown meanwhile.
        if memoryAdvanceStep(nil) { await settle() }
        if safetyNetFailures.count > failuresBefore {
            throw ControlError(.safetyNet, safetyNetFailures[failuresBefore...].joined(separator: "; "))
        }
        return scheduler.now()
    }

    func fire(_ key: DeadlineKey) {
        switch key.timer {
        case .lifecycle(.hangCheck):
            guard let app = key.app, processes[app]?.instance == key.instance else { return }
            feed(app, .hangCheck(mainRunLoop(app)))
        case .lifecycle(let timer):
            guard let app = key.app, processes[app]?.instance == key.instance else { return }
            feed(app, .timerFired(timer))
        case .plugin(let timer):
            performMode(modes.timerFired(timer, app: key.app, at: hostNow()))
        case .transferRound(let session):
            guard let app = key.app else { return }
            transferRoundTimedOut(app: app, session: session)
        case .transferRestart:
            transferRestartDue()
        case .transferForget:
            transferForgetDue()
        case .lockGrace:
            performMode(modes.lockGraceEnded(at: hostNow()))
        case .appTimer(let timer):
            guard let app = key.app, processes[app]?.instance == key.instance else { return }
            appTimerFellDue(app, timer: timer)
        }
    }

    /// What an app's run-loop stamp page says at its hang check (see ``HangWatch``).
    func mainRunLoop(_ id: BundleID) -> Lifecycle.MainRunLoop {
        guard let page = processes[id]?.stampPage else {
            return .unwatched("the host could make no run-loop stamp page for this process")
        }
        return processes[id]?.hangWatch.check(page.read(), at: hostNow(), clock: configuration.clock,
                                             monotonicNow: RunLoopStampPage.monotonicNow()) ?? .idle
    }

    /// Virtual clock, before host time moves on: notes which turn each active app's
    /// main run loop is in now (a memory read each; nothing reaches the app), so a turn
    /// that is still the same at the hang check has been running since this host time.
    /// The host has settled, so every app is asleep here: a turn still running is one the
    /// app is blocked in (see ``HangWatch``).
    func observeRunLoops() {
        // An active app is in front: one of the few watched for it (see ``ProcessTable/Watch``).
        let now = hostNow()
        for id in processes.watchList(.front) where processes[id]?.machine.state == .active {
            guard let page = processes[id]?.stampPage else { continue }
            processes[id]?.hangWatch.observe(page.read(), at: now)
        }
    }

    /// Starts (or moves) a deadline of no process instance: a plugin's or the transfer
    /// broker's (`app` nil: host-wide). It outlives the app's process; its owner cancels it.
    func startHostTimer(_ timer: TimerID, app: BundleID?, after: Duration) {
        apply(scheduler.start(DeadlineKey(app: app, instance: 0, timer: timer), after: after))
    }

    /// Cancels a deadline started with ``startHostTimer(_:app:after:)``.
    func cancelHostTimer(_ timer: TimerID, app: BundleID?) {
        apply(scheduler.cancel(DeadlineKey(app: app, instance: 0, timer: timer)))
    }

    func startTimer(_ id: BundleID, _ timer: Lifecycle.Timer, after: Duration) {
        guard let instance = processes[id]?.instance else { return }
        apply(scheduler.start(DeadlineKey(app: id, instance: instance, timer: .lifecycle(timer)), after: after))
    }

    func cancelTimer(_ id: BundleID, _ timer: Lifecycle.Timer) {
        guard let instance = processes[id]?.instance else { return }
        apply(scheduler.cancel(DeadlineKey(app: id, instance: instance, timer: .lifecycle(timer))))
    }

    /// Real clock: arms (or disarms) the one timer as the scheduler says. Inside a step (an input being handled, a feed), the timer is re-armed once, at the
    /// step's end (``armTimerIfChanged()``): re-arming it is a syscall, and a step often moves the
    /// earliest deadline several times, before its signal (didEnterBackground returned
    /// cancels a timer, then SIGSTOP is sent). Outside a step it is re-armed at once.
    func apply(_ change: DeadlineScheduler.TimerChange?) {
        guard change != nil else { return }
        if scope.timerMovedNow() { armTimer() }
    }

    /// At the end of a step: re-arms the timer if a deadline moved during it.
    func armTimerIfChanged() {
        if scope.takeTimerMove() { armTimer() }
    }

    /// Arms the one real-clock timer for the scheduler's earliest deadline (or disarms it).
    private func armTimer() {
        guard let deadlineTimer else { return }
        if let due = scheduler.armedFor {
            deadlineTimer.arm(after: max(.zero, due - scheduler.now()))
        } else {
            deadlineTimer.disarm()
        }
    }

    func fireDue() {
        scheduler.timerFired()
        let t = scheduler.now()
        while let key = scheduler.popDueNow(by: t) {
            fire(key)
        }
        apply(scheduler.rearm())
    }

    /// Virtual clock: waits until the host is settled (see ``SettleTracker``): every app has
    /// answered what it was given or is blocked, the kernel has confirmed what it was asked,
    /// nobody waits for a turn. Real time bounds the wait only as a safety net.
    func settle() async {
        passTurns()
        guard !isSettled() else { return }
        await waitUntilSettled(.settled)
    }

    /// Waits until `condition` holds (checked after every input) or the safety net runs
    /// out; probes the awake apps meanwhile.
    func waitUntilSettled(_ condition: SettleTracker.Condition) async {
        let bound = Duration.nanoseconds(configuration.settleTimeout.clampedNanoseconds)
        let deadline = ContinuousClock.now + bound
        await withCheckedContinuation { continuation in
            _ = settling.add(condition, deadline: deadline, continuation)
            armSafetyNet()
            probeAwake()
        }
    }

    /// Virtual clock: returns once the host has settled with a verb that began after `mark`
    /// (``verbWaitMark()``) still waiting for an app: blocked in it, so only host time (a
    /// watchdog) can end the wait. A scenario's step then goes on, leaving the verb to end
    /// when the watchdog does. Returns at once on the real clock.
    public func untilVerbStuck(after mark: UInt64) async {
        guard takesTurns else { return }
        if isSettled(), verbWaits.anyOpen(after: mark) { return }
        await waitUntilSettled(.verbStuck(after: mark))
    }

    /// Ends every wait of ``untilVerbStuck(after:)``: the verb it was for has finished.
    public func endStuckVerbWaits() {
        let ended = settling.take { waiter in
            if case .verbStuck = waiter.condition { return true }
            return false
        }
        for waiter in ended { waiter.continuation.resume() }
        armSafetyNet()
    }

    /// The number of the last verb that began waiting for an app (see ``untilVerbStuck(after:)``).
    public func verbWaitMark() -> UInt64 { verbWaits.last }

    /// What the safety net caught since the last call (see ``safetyNetFired()``), cleared.
    public func takeSafetyNetFailures() -> [String] {
        defer { safetyNetFailures.removeAll() }
        return safetyNetFailures
    }

    /// Resumes the waiters whose condition holds (after every input of the run loop).
    func checkSettled() {
        // Inside a step its frames are not written yet: judged once it ends (the run loop
        // checks after every input).
        guard settling.isWaiting, scope.isIdle else { return }
        guard isSettled() else {
            probeAwake()
            return
        }
        let done = settling.take { waiter in
            switch waiter.condition {
            case .settled: true
            case .verbStuck(let mark): verbWaits.anyOpen(after: mark)
            }
        }
        for waiter in done { waiter.continuation.resume() }
        armSafetyNet()
    }

    /// Arms the safety net for the earliest waiter (or disarms it).
    func armSafetyNet() {
        guard let settleTimer else { return }
        if let deadline = settling.earliestDeadline {
            settleTimer.arm(after: max(.zero, deadline - ContinuousClock.now))
        } else {
            settleTimer.disarm()
        }
    }

    /// The safety net ran out: the machine did not let an app answer (or the kernel confirm
    /// a stop or an exit) within `settleTimeout` of real time. Determinism is lost for this
    /// run, so it fails, saying whom it waited for (``takeSafetyNetFailures()``; an advance
    /// throws it); the host stops waiting for them, and the waiters past their deadline go on.
    func safetyNetFired() {
        let realNow = ContinuousClock.now
        guard settling.waiters.contains(where: { $0.deadline <= realNow }) else {
            armSafetyNet()
            return
        }
        let bound = configuration.settleTimeout.components
        let seconds = DurationText.format(Double(bound.seconds) + Double(bound.attoseconds) / 1e18)
        var waitedFor: [String] = []
        for process in quiescence.awake.sorted(by: { ($0.app, $0.instance) < ($1.app, $1.instance) }) where isLive(process) {
            waitedFor.append(process.app.rawValue)
            quiescence.excuse(process)
        }
        for view in settleViews() where view.awaitsKernel || view.spawning {
            waitedFor.append(view.app.rawValue)
            if let instance = processes[view.app]?.instance { turns.excuse(instance: instance) }
        }
        // A continue the kernel never confirmed (its report lost): what waited for it goes.
        for (id, rt) in processes.entries where rt.heldForContinue != nil {
            releaseHeldFrames(id, checkingSettled: false)
        }
        if transfers.daemonStarting || (transfers.channel != nil && !transfers.awaitingAccept.isEmpty) {
            waitedFor.append("the transfer daemon")
        }
        excuseTurns()
        let who = waitedFor.isEmpty ? "the host's own work" : Array(Set(waitedFor)).sorted().joined(separator: ", ")
        let failure = "the machine did not let \(who) answer within \(seconds) of real time (the safety net, --settle-timeout): the run no longer depends only on its apps"
        safetyNetFailures.append(failure)
        logger.error("\(failure)")
        events.append(.warning, cause: failure, time: now())
        let late = settling.take { $0.deadline <= realNow }
        for waiter in late { waiter.continuation.resume() }
        checkSettled()
        armSafetyNet()
    }

    /// The runtimes as the settle rules see them: those watched for the settle
    /// (``ProcessTable/Watch/settle``) that have something the kernel or a spawn must still
    /// do (the others leave the list).
    func settleViews() -> [SettleView] {
        // Stops to be confirmed (and their lock checks) and killed apps to be reaped are
        // waited for, so that after `advance` the states a test reads are the final ones;
        // and spawns, so what a launch brings runs at this virtual time.
        // In no particular order: the caller asks whether any is left, and the safety net
        // sorts the names it gives.
        var views: [SettleView] = []
        _ = processes.watched(for: .settle, inOrder: false) { id, rt in
            let view = settleView(rt, app: id)
            guard view.awaitsKernel || view.spawning else { return false }
            views.append(view)
            return true
        }
        return views
    }

    private func settleView(_ rt: Runtime, app: BundleID) -> SettleView {
        SettleView(
            app: app,
            awaitsKernel: rt.machine.stopPending || rt.lockCheck != nil || rt.pendingExit != nil
                || (rt.machine.killSent && rt.machine.isRunning && rt.child != nil)
                // A continue to be confirmed (frames wait for it).
                || rt.heldForContinue != nil,
            spawning: rt.machine.isRunning && (rt.child == nil || rt.channel == nil) && !turns.isExcused(rt.instance))
    }

    /// One app as the settle rules see it.
    struct SettleView {
        var app: BundleID
        /// A stop to be confirmed, an exit to drain, a kill to be reaped, a continue to be confirmed.
        var awaitsKernel: Bool
        /// Its process is being spawned or attached.
        var spawning: Bool
    }

    /// Nothing is waited for: no kernel confirmation or spawn, every live app process quiet,
    /// nobody in line for a turn (see ``TurnOrder``).
    func isSettled() -> Bool {
        let waiting = processes.anyWatched(for: .settle) { id, rt in
            let view = settleView(rt, app: id)
            return view.awaitsKernel || view.spawning
        }
        guard !waiting else { return false }
        for process in quiescence.awake {
            if isLive(process) { return false }
            quiescence.exited(process)
        }
        return turns.isIdle(busy: { turnBusy($0) })
    }

    /// Whether `process` is the current, running, attached process of its app, with
    /// nothing the kernel must confirm first: one a probe can tell about.
    func isLive(_ process: Quiescence.Process) -> Bool {
        guard let rt = processes[process.app], rt.instance == process.instance, rt.machine.isRunning,
              rt.child != nil, rt.pendingExit == nil, !turns.isExcused(rt.instance) else { return false }
        return true
    }

    // MARK: - Quiescence (virtual clock)

    /// The host gave the process of `id` something, or heard from it: it is awake until a
    /// probe finds it asleep again.
    func touch(_ id: BundleID) {
        guard takesTurns, let instance = processes[id]?.instance else { return }
        quiescence.touched(.init(app: id, instance: instance))
    }

    /// Starts a probe of every awake live process that can be probed now (attached, not
    /// waiting for the kernel), while someone waits for the host to settle.
    func probeAwake() {
        // Not inside a step: what it sends the apps is written at its end, and a probe
        // before that would find an app asleep that is about to get a frame.
        guard takesTurns, scope.isIdle,
              settling.isWaiting || !turns.isIdle(busy: { turnBusy($0) }) else { return }
        for process in quiescence.unprobed where isLive(process) {
            // An app that has answered everything it was sent is most likely asleep already:
            // probed at once. One with a callback in flight is most likely still at work (a
            // probe now would find it running and cost a round trip to the event loop for
            // nothing): probed a little later, which only a blocked app waits for.
            let answered = processes[process.app]?.pending.isEmpty ?? true
            startProbe(process, after: answered ? .zero : Self.probeDelayWithCallbacksInFlight)
        }
    }

    /// The first probe of an app with a callback in flight waits this long (real time; it
    /// only sets how soon a blocked app is found, never what happens to it).
    static let probeDelayWithCallbacksInFlight: Duration = .milliseconds(1)

    /// Reads the process's threads on its connection's event loop, `after` from now: first
    /// every thread, then whether the host has read all the app wrote, then every thread
    /// again (see ``QuietProbe``), and yields the verdict as an input. On the event loop
    /// because that is where the app's frames are read: a frame read before the probe was
    /// yielded before its verdict.
    func startProbe(_ process: Quiescence.Process, after delay: Duration) {
        guard let rt = processes[process.app], rt.instance == process.instance, let pid = rt.pid,
              let channel = rt.channel, !rt.machine.stopPending, rt.heldForContinue == nil,
              let token = quiescence.beginProbe(process) else { return }
        let writer = rt.writer
        let pump = rt.logPump
        let input = self.input
        let probe: @Sendable () -> Void = {
            // Unread output too: an app blocked writing to a full log pipe is not idle.
            let asleep = QuietProbe.asleep(pid: pid, unread: { (writer?.unreadInbound() ?? false) || (pump?.hasUnread() ?? false) })
            input.yield(.quietProbe(app: process.app, instance: process.instance, token: token, asleep: asleep))
        }
        if delay <= .zero {
            channel.eventLoop.execute(probe)
        } else {
            _ = channel.eventLoop.scheduleTask(in: .nanoseconds(delay.clampedNanoseconds)) { probe() }
        }
    }

    /// A probe's verdict (see ``Quiescence/probeEnded(_:token:asleep:)``).
    func probeEnded(_ process: Quiescence.Process, token: UInt64, asleep: Bool) {
        switch quiescence.probeEnded(process, token: token, asleep: asleep) {
        case .quiet, .stale:
            break
        case .awake(let retry, let next):
            guard isLive(process), let rt = processes[process.app], let pid = rt.pid, let channel = rt.channel else {
                quiescence.probeAbandoned(process)
                return
            }
            let writer = rt.writer
            let pump = rt.logPump
            let input = self.input
            _ = channel.eventLoop.scheduleTask(in: .nanoseconds(retry.clampedNanoseconds)) {
                let asleep = QuietProbe.asleep(pid: pid, unread: { (writer?.unreadInbound() ?? false) || (pump?.hasUnread() ?? false) })
                input.yield(.quietProbe(app: process.app, instance: process.instance, token: next, asleep: asleep))
            }
        }
    }
}

/// Whether an app process is asleep: two readings of its threads (``ThreadActivity``) with
/// every thread asleep and none scheduled in between, and, between them, nothing the app
/// wrote left unread on the host's side of its socket. Run on the event loop that reads the
/// app's socket, so that everything the app wrote before it slept has been read and passed
/// on to the supervisor before the verdict is.
enum QuietProbe {
    static func asleep(pid: Int32, unread: () -> Bool) -> Bool {
        guard let first = try? ThreadActivity.read(pid: pid), first.allAsleep else { return false }
        guard !unread() else { return false }
        guard let second = try? ThreadActivity.read(pid: pid) else { return false }
        return first.stayedAsleep(until: second)
    }
}
