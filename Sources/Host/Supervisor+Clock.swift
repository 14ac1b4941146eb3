import AppHostProtocol
import AppHostSystem
import Foundation
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
    /// that falls inside, in order. Before each next deadline the apps get up to
    /// `settleTimeout` of real time to answer what the last one sent them (callback
    /// returns, stop confirmations), so their replies land at the right virtual time.
    public func advanceClock(by duration: Duration) async throws(ControlError) -> Duration {
        guard configuration.clock == .virtual else {
            throw ControlError(.badRequest, "the host runs on the real clock; start it with `--clock virtual` to move time by hand")
        }
        guard duration >= .zero else { throw ControlError(.badRequest, "time only moves forward") }
        guard !settling.advancing else { throw ControlError(.badRequest, "the clock is already being advanced") }
        settling.advancing = true
        defer { settling.advancing = false }
        let target = scheduler.now() + duration
        await settle()
        while let (key, due) = scheduler.popDue(by: target) {
            observeRunLoops()
            scheduler.advance(to: due)
            publishLogClock()
            fire(key)
            await settle()
            await awaitHangVerdicts()
            // The app the deadline was for ran: its footprint is read again.
            if memoryAdvanceStep(key.app) { await settle() }
        }
        observeRunLoops()
        scheduler.advance(to: target)
        publishLogClock()
        await settle()
        // Every app running code may have grown meanwhile.
        if memoryAdvanceStep(nil) { await settle() }
        return scheduler.now()
    }

    func fire(_ key: DeadlineKey) {
        switch key.timer {
        case .lifecycle(.hangCheck):
            guard runtimes[key.app]?.instance == key.instance else { return }
            checkHang(key.app)
        case .lifecycle(let timer):
            guard runtimes[key.app]?.instance == key.instance else { return }
            feed(key.app, .timerFired(timer))
        case .plugin(let timer):
            performMode(modes.timerFired(timer, app: key.app.isEmpty ? nil : key.app, at: hostNow()))
        case .transferRound(let session):
            transferRoundTimedOut(app: key.app, session: session)
        case .transferRestart:
            transferRestartDue()
        case .transferForget:
            transferForgetDue()
        case .lockGrace:
            performMode(modes.lockGraceEnded(at: hostNow()))
        case .appTimer(let timer):
            guard runtimes[key.app]?.instance == key.instance else { return }
            appTimerFellDue(key.app, timer: timer)
        }
    }

    /// The hang check: reads the app's stamp page and feeds what it says.
    ///
    /// Virtual clock: host time can say a turn has blocked `foregroundHang` when only
    /// microseconds of real time passed (an app finishing the turn in which it returned
    /// a callback, seen before and after a 10 s jump). As the settle rules tell a hung
    /// app from a slow one by real time, so does this: the turn must also still run
    /// half the settle timeout of real time after the host first saw it. Until then the
    /// page is read again after 1, 2, 4 … ms, so a slow app costs a millisecond or two
    /// and a hung one half the settle timeout; the advance waits for the verdict
    /// (``awaitHangVerdicts()``).
    func checkHang(_ id: String) {
        let loop = mainRunLoop(id)
        if configuration.clock == .virtual, case .busy(let since) = loop, let rt = runtimes[id],
           rt.machine.hangBlocked(since: since, at: hostNow()) >= rt.machine.profile.duration(.foregroundHang),
           let wait = rt.hangWatch.realWait(grace: configuration.settleTimeout / 2, monotonicNow: RunLoopStampPage.monotonicNow()) {
            runtimes[id]?.hangRecheckPending = true
            hangRechecks.insert(id)
            let (input, instance) = (self.input, rt.instance)
            _ = group.any().scheduleTask(in: .nanoseconds(Int64(clamping: wait))) {
                input.yield(.hangRecheck(app: id, instance: instance))
            }
            return
        }
        feed(id, .hangCheck(loop))
    }

    /// Virtual clock, after a deadline's settle: waits until every hang check that is
    /// looking again at a busy turn has decided (bounded by half the settle timeout of
    /// real time, whatever the settle's own timeout did), then settles what it did (a
    /// kill is reaped), so host time does not move on with the verdict pending.
    func awaitHangVerdicts() async {
        while hangRecheckPending() {
            await withCheckedContinuation { hangVerdictWaiter = $0 }
            await settle()
        }
    }

    /// Whether a hang recheck is pending for any app (of the few in `hangRechecks`; the
    /// others leave it).
    func hangRecheckPending() -> Bool {
        for id in hangRechecks {
            if runtimes[id]?.hangRecheckPending == true { return true }
            hangRechecks.remove(id)
        }
        return false
    }

    /// A hang recheck ran: resumes ``awaitHangVerdicts()`` once none is pending.
    func hangRecheckDone() {
        guard let waiter = hangVerdictWaiter, !hangRecheckPending() else { return }
        hangVerdictWaiter = nil
        waiter.resume()
    }

    /// What an app's run-loop stamp page says at its hang check (see ``HangWatch``).
    func mainRunLoop(_ id: String) -> Lifecycle.MainRunLoop {
        guard let page = runtimes[id]?.stampPage else {
            return .unwatched("the host could make no run-loop stamp page for this process")
        }
        return runtimes[id]?.hangWatch.check(page.read(), at: hostNow(), clock: configuration.clock,
                                             monotonicNow: RunLoopStampPage.monotonicNow()) ?? .idle
    }

    /// Virtual clock, before host time moves on: notes which turn each active app's
    /// main run loop is in now (a memory read each; nothing reaches the app), so a turn
    /// that is still the same at the hang check has been running since this host time.
    func observeRunLoops() {
        // An active app is in front: one of the few `foregroundCandidates` (looking at
        // every runtime copies each one).
        let now = hostNow()
        for id in foregroundCandidates where runtimes[id]?.machine.state == .active {
            guard let page = runtimes[id]?.stampPage else { continue }
            runtimes[id]?.hangWatch.observe(page.read(), at: now, monotonicNow: RunLoopStampPage.monotonicNow())
        }
    }

    /// Starts (or moves) a deadline of no process instance: a plugin's or the transfer
    /// broker's (`app` nil: host-wide). It outlives the app's process; its owner cancels it.
    func startHostTimer(_ timer: TimerID, app: String?, after: Duration) {
        apply(scheduler.start(DeadlineKey(app: app ?? "", instance: 0, timer: timer), after: after))
    }

    /// Cancels a deadline started with ``startHostTimer(_:app:after:)``.
    func cancelHostTimer(_ timer: TimerID, app: String?) {
        apply(scheduler.cancel(DeadlineKey(app: app ?? "", instance: 0, timer: timer)))
    }

    func startTimer(_ id: String, _ timer: Lifecycle.Timer, after: Duration) {
        guard let instance = runtimes[id]?.instance else { return }
        apply(scheduler.start(DeadlineKey(app: id, instance: instance, timer: .lifecycle(timer)), after: after))
    }

    func cancelTimer(_ id: String, _ timer: Lifecycle.Timer) {
        guard let instance = runtimes[id]?.instance else { return }
        apply(scheduler.cancel(DeadlineKey(app: id, instance: instance, timer: .lifecycle(timer))))
    }

    /// Real clock: arms (or disarms) the one timer as the scheduler says. Inside a step (an input being handled, a feed), the timer is re-armed once, at the
    /// step's end (``armTimerIfChanged()``): re-arming it is a syscall, and a step often moves the
    /// earliest deadline several times, before its signal (didEnterBackground returned
    /// cancels a timer, then SIGSTOP is sent). Outside a step it is re-armed at once.
    func apply(_ change: DeadlineScheduler.TimerChange?) {
        guard change != nil else { return }
        if stepDepth > 0 || feedDepth > 0 {
            timerChanged = true
            return
        }
        armTimer()
    }

    /// At the end of a step: re-arms the timer if a deadline moved during it.
    func armTimerIfChanged() {
        guard timerChanged, stepDepth == 0, feedDepth == 0 else { return }
        timerChanged = false
        armTimer()
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

    /// Waits until the apps have answered what this step sent them, or the settle timeout.
    func settle() async {
        defer { settling.stepEnded() }
        passTurns()
        guard !isSettled() else { return }
        _ = settling.beginWait()
        // Real time whatever the host clock, on the settle timer (a timerfd: see
        // `settleTimer`); a cancelled `Task.sleep` leaves its dispatch timer armed on Linux.
        let bound = Duration.nanoseconds(configuration.settleTimeout.clampedNanoseconds)
        settleDeadline = .now + bound
        settleTimer?.arm(after: bound)
        await withCheckedContinuation { settleWaiter = $0 }
        settleDeadline = nil
        settleTimer?.disarm()
    }

    func settleTimedOut(_ token: UInt64) {
        guard let w = settleWaiter, settling.timedOut(token, settleViews()) else { return }
        excuseTurns()
        // A continue the kernel never confirmed (its report lost): what waited for it goes.
        for (id, rt) in runtimes where rt.heldForContinue != nil {
            logger.warning("\(id): no confirmation of SIGCONT within the settle time; sending what waited for it")
            releaseHeldFrames(id, checkingSettled: false)
        }
        settleWaiter = nil
        w.resume()
    }

    /// The runtimes as the settle rules see them: those of ``settleCandidates`` that
    /// have something to wait for (the others leave the candidates).
    func settleViews() -> [SettleTracker.AppView] {
        // Stops to be confirmed (and their lock checks) and killed apps to be reaped are
        // waited for, so that after `advance` the states a test reads are the final ones;
        // and apps being launched (for an event, during the advance), so what their launch
        // brings runs at this virtual time.
        var views: [SettleTracker.AppView] = []
        for id in settleCandidates {
            guard let rt = runtimes[id] else {
                settleCandidates.remove(id)
                continue
            }
            let view = SettleTracker.AppView(
                instance: rt.instance,
                awaitsKernel: rt.machine.stopPending || rt.lockCheck != nil || rt.pendingExit != nil
                    || (rt.machine.killSent && rt.machine.isRunning && rt.child != nil)
                    // A continue to be confirmed (frames wait for it), and an app that
                    // answered willTerminate and is on its way out: its own exit, not the
                    // grace timer the next deadline may be, ends it.
                    || rt.heldForContinue != nil
                    || (rt.machine.terminating != nil && rt.pending.isEmpty && rt.child != nil && rt.machine.isRunning),
                launching: rt.machine.isRunning && !rt.machine.launched && rt.machine.terminating == nil)
            if view.awaitsKernel || view.launching {
                views.append(view)
            } else {
                settleCandidates.remove(id)
            }
        }
        return views
    }

    /// Nothing this step started is waited for: callbacks, the kernel, launches, and
    /// the parties in line for their turn (see ``TurnOrder``).
    func isSettled() -> Bool {
        settling.isSettled(settleViews()) && turns.isIdle(busy: { turnBusy($0) })
    }

    func checkSettled() {
        guard let w = settleWaiter, isSettled() else { return }
        settleWaiter = nil
        w.resume()
    }
}
