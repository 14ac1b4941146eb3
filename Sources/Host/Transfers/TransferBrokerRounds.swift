import AppHostProtocol
import Plugins

/// The delivery of finished transfers: at once to an app in front, in rounds of a
/// session's events to one that is not (see ``EventRound``).
extension TransferBroker {
    static func activityName(_ session: SessionIdentifier) -> String { "URLSession events \(session)" }

    /// What delivers a finished transfer's events: to an app in the foreground, at once;
    /// to one in the background, suspended, or ended by the system, in its session's
    /// round (an `EventRound`: one wake or background launch for all the transfers that
    /// finish meanwhile, not one per transfer).
    mutating func finishedDelivery(_ id: TransferID, world: World) -> [Effect] {
        guard var r = records[id], let outcome = r.outcome else { return [] }
        let app = r.job.bundleIdentifier
        let session = r.job.session
        guard world.isInstalled(app) else { return forget([id]) }
        let state = world.state(app)
        let key = Self.counterKey(app, session)
        let (handOver, sessionEvents) = finishedEvents(r, outcome)
        if var round = rounds[key] {
            if round.finishSent {
                round.next.append(id)
                r.stage = .nextRound
                rounds[key] = round
                records[id] = r
                return []
            }
            round.awaiting.insert(id)
            r.stage = .delivering
            rounds[key] = round
            records[id] = r
            return handOver + sessionEvents.map { .mode(.deliver(app: app, $0, wake: .wake, because: "background URLSession event")) }
        }
        if state == .active || state == .inactive {
            r.stage = .delivering
            records[id] = r
            return handOver + sessionEvents.map { .mode(.deliver(app: app, $0, wake: .ifRunning, because: "background transfer finished")) }
        }
        let config = sessions[app]?[session]
        // sessionSendsLaunchEvents false: "whether the app should be resumed or launched in
        // the background when transfers finish" — neither: the events wait until it runs.
        if state == .notRunning && !(config?.sessionSendsLaunchEvents ?? true) {
            r.stage = .pending
            records[id] = r
            return [.note(app: app, "transfer \(id) finished; sessionSendsLaunchEvents is false: its events wait for the next launch",
                          .init(transfer: .heldForNextLaunch, session: session, transferTask: r.job.taskIdentifier))]
        }
        if state == .suspended && !(config?.sessionSendsLaunchEvents ?? true) {
            r.stage = .heldWhileSuspended
            records[id] = r
            return [.note(app: app, "transfer \(id) finished; sessionSendsLaunchEvents is false: its events wait until the app runs again (it is not resumed for them)",
                          .init(transfer: .heldUntilResumed, session: session, transferTask: r.job.taskIdentifier))]
        }
        rounds[key] = EventRound(awaiting: [id])
        r.stage = .delivering
        records[id] = r
        // The activity after the launch or wake (an app not running yet has no machine to
        // hold it); while it lasts no background budget runs, each handler has the wake
        // budget, and the completion its own timer once urlSessionDidFinishEvents is sent.
        return handOver
            + [.mode(.deliver(app: app, .urlSessionHandleEvents(session: session), wake: .launch(.urlSessionEvents), because: "background transfer finished")),
               .mode(.beginActivity(app: app, name: Self.activityName(session)))]
            + sessionEvents.map { .mode(.deliver(app: app, $0, wake: .wake, because: "background URLSession event")) }
    }

    /// A transfer's `didCompleteWithError` returned: the last of its round sends
    /// `urlSessionDidFinishEvents` and starts the completion's timer.
    mutating func roundProgressed(app: BundleID, session: SessionIdentifier, id: TransferID, world: World) -> [Effect] {
        let key = Self.counterKey(app, session)
        guard var round = rounds[key], round.awaiting.remove(id) != nil else { return [] }
        guard round.awaiting.isEmpty && !round.finishSent else {
            rounds[key] = round
            return []
        }
        let done: Effect = .mode(.deliver(app: app, .urlSessionDidFinishEvents(session: session), wake: .wake, because: "background URLSession events done"))
        if round.completed {
            // The completion came early: the activity held the app running until this last
            // delivery, and ends behind it (the app stops once the callback returned).
            rounds[key] = nil
            var effects: [Effect] = [done, .mode(.endActivity(app: app, name: Self.activityName(session)))]
            for next in round.next { effects += finishedDelivery(next, world: world) }
            return effects
        }
        round.finishSent = true
        rounds[key] = round
        return [done, .startRoundTimer(app: app, session: session)]
    }

    /// The app called the completion of `handleEventsForBackgroundURLSession`: the round
    /// ends; transfers that finished meanwhile open the next one.
    mutating func roundCompleted(app: BundleID, session: SessionIdentifier, world: World) -> [Effect] {
        let endActivity: Effect = .mode(.endActivity(app: app, name: Self.activityName(session)))
        let key = Self.counterKey(app, session)
        guard var round = rounds[key] else { return [endActivity] }
        guard round.finishSent else {
            // Early: the round's events and urlSessionDidFinishEvents still follow, and the
            // activity keeps the app running until they are delivered (else it would be
            // stopped between two events and woken again at once).
            round.completed = true
            rounds[key] = round
            return []
        }
        var effects: [Effect] = [.cancelRoundTimer(app: app, session: session), endActivity]
        rounds[key] = nil
        for id in round.next { effects += finishedDelivery(id, world: world) }
        return effects
    }

    /// The events a finished transfer's delegate hears, and the hand-over of its file first.
    func finishedEvents(_ r: TransferRecord, _ outcome: TransferOutcome) -> (handOver: [Effect], events: [ServiceEvent]) {
        let session = r.job.session
        let task = r.job.taskIdentifier
        switch outcome {
        case .completed where r.job.kind == .download:
            // Written by the daemon: handed to the app's own uid before it hears of it.
            return ([.handOver(path: r.job.destination, app: r.job.bundleIdentifier)],
                    [.urlSessionDidFinishDownloading(session: session, taskIdentifier: task, location: r.job.destination),
                     .urlSessionDidComplete(session: session, taskIdentifier: task, errorCode: nil, errorReason: nil)])
        case .completed:
            return ([], [.urlSessionDidComplete(session: session, taskIdentifier: task, errorCode: nil, errorReason: nil)])
        case .failed(let code, let reason):
            return ([], [.urlSessionDidComplete(session: session, taskIdentifier: task, errorCode: code, errorReason: reason)])
        case .cancelled:
            let answer: [ServiceEvent] = r.resumeDataRequested ? [.urlSessionResumeData(session: session, taskIdentifier: task, data: nil)] : []
            return ([], answer + [.urlSessionDidComplete(session: session, taskIdentifier: task, errorCode: "cancelled", errorReason: "cancelled")])
        case .cancelledResumable(let resume):
            let data = ResumeData.encode(url: r.job.url, headers: r.job.headers, resume)
            return ([], [.urlSessionResumeData(session: session, taskIdentifier: task, data: data),
                         .urlSessionDidComplete(session: session, taskIdentifier: task, errorCode: "cancelled", errorReason: "cancelled")])
        }
    }
}
