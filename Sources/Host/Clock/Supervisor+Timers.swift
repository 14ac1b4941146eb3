import AppHostProtocol

extension Supervisor {
    // MARK: - Host-clock timers (AppKitLess HostTimer)
    //
    // The rules are ``AppTimers``' (one per runtime); this is where its effects meet the
    // deadline table and the lifecycle. A fire is a service callback
    // (``ServiceEvent/timerFired(id:)``) sent through the lifecycle (``Lifecycle/Event/fireTimer(id:)``),
    // so it counts as a callback in flight (the app is not stopped with it running) and,
    // on the virtual clock, as something an advance settles: the block and what it sends
    // land at the fire's virtual time, before the advance moves on.
    //
    // Fires leave no host event (a 1 ms repeating timer would write a thousand lines a
    // second, and the log is the scenarios' record): what a block does shows by its own
    // events. What does leave one: a refused `scheduledTimer` (a `service` line, as any
    // refused service call) and timers that fell due while the app ran no code and fire
    // when it runs again (one `service` line per resume).

    /// Whether `id`'s timers may fire now: it runs code and is not terminating.
    func timersCanRun(_ id: BundleID) -> Bool {
        guard let machine = processes[id]?.machine else { return false }
        return machine.isRunningCode && machine.terminating == nil
    }

    /// `HostTimer.scheduledTimer`: schedules timer `timer` of `id`'s process; the answer
    /// for the app.
    func scheduleAppTimer(_ id: BundleID, timer: HostTimerID, seconds: Double, repeats: Bool) -> ServiceReply {
        guard let result = processes[id]?.timers.schedule(id: timer, seconds: seconds, repeats: repeats, at: hostNow()) else {
            return .refused(reason: "the app is not running")
        }
        switch result {
        case .success(let effects):
            performTimers(id, effects)
            return .ok
        case .failure(let refusal):
            events.append(.service, app: id, pid: processes[id]?.pid, cause: "\(ServiceRequest.timerSchedule(id: timer, interval: seconds, repeats: repeats).apiName) refused: \(refusal)", time: now())
            return .refused(reason: refusal.description)
        }
    }

    /// `HostTimer.invalidate()`.
    func invalidateAppTimer(_ id: BundleID, timer: HostTimerID) {
        guard let effects = processes[id]?.timers.invalidate(timer) else { return }
        performTimers(id, effects)
    }

    /// The deadline of `id`'s timer `timer` fell due.
    func appTimerFellDue(_ id: BundleID, timer: HostTimerID) {
        let canRun = timersCanRun(id)
        guard let effects = processes[id]?.timers.fellDue(timer, at: hostNow(), canRun: canRun) else { return }
        performTimers(id, effects)
    }

    /// The fire of `id`'s timer `timer` returned (its block ran).
    func appTimerReturned(_ id: BundleID, timer: HostTimerID) {
        let canRun = timersCanRun(id)
        guard let effects = processes[id]?.timers.returned(timer, at: hostNow(), canRun: canRun) else { return }
        performTimers(id, effects)
    }

    /// After a feed of `id` (at its end, so the fires follow the callbacks that step sent:
    /// `willEnterForeground` and `didBecomeActive` before the timers, as a run loop has
    /// them): timers that fell due while it ran no code fire once each, if it runs now.
    func resumeAppTimers(_ id: BundleID) {
        guard processes[id]?.timers.owedCount ?? 0 > 0, timersCanRun(id),
              let owed = processes[id]?.timers.owedIDs,
              let effects = processes[id]?.timers.resumed(at: hostNow()), !effects.isEmpty else { return }
        let fired = owed.filter { effects.contains(.fire($0)) }
        events.append(.service, app: id, pid: processes[id]?.pid,
                      cause: "HostTimer: \(fired.count == 1 ? "timer \(fired[0]) fell" : "timers \(fired.map(String.init).joined(separator: ", ")) fell") due while the app ran no code; fired once each now that it runs",
                      time: now())
        performTimers(id, effects)
    }

    /// The process of `id` ended: its timers go with it.
    func appTimersEnded(_ id: BundleID) {
        guard let effects = processes[id]?.timers.removeAll(), !effects.isEmpty else { return }
        performTimers(id, effects)
    }

    /// Live host timers of `id`'s process (nil when it has none running): for tests.
    func liveTimerCount(_ id: BundleID) -> Int? {
        processes[id]?.machine.isRunning == true ? processes[id]?.timers.count : nil
    }

    /// Deadlines of `id`'s host timers in the table (any process of it): for tests.
    func appTimerDeadlines(_ id: BundleID) -> Int {
        scheduler.count { key in
            if case .appTimer = key.timer { key.app == id } else { false }
        }
    }

    private func performTimers(_ id: BundleID, _ effects: [AppTimers.Effect]) {
        guard let instance = processes[id]?.instance else { return }
        for effect in effects {
            switch effect {
            case .arm(let timer, let due):
                apply(scheduler.start(DeadlineKey(app: id, instance: instance, timer: .appTimer(timer)), at: due))
            case .disarm(let timer):
                apply(scheduler.cancel(DeadlineKey(app: id, instance: instance, timer: .appTimer(timer))))
            case .fire(let timer):
                feed(id, .fireTimer(id: timer))
            }
        }
    }
}
