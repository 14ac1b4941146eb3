import AppHostProtocol
import Plugins

/// The delivery of finished transfers: at once to an app in front; to one that is not,
/// in one round of a session's events once the session's tasks are all complete (see
/// ``EventRound`` and ``releaseWaiting(_:world:)``).
extension TransferBroker {
    static func activityName(_ session: SessionIdentifier) -> String { "URLSession events \(session)" }

    /// The most transfers of a round whose events are in the app's hands at once (sent,
    /// their `didCompleteWithError` not returned): 256 transfers' events are a few
    /// hundred KiB, far below the 4 MiB an app may leave unread.
    static let roundWindow = 256

    static func inFront(_ state: AppState) -> Bool { state == .active || state == .inactive }

    /// What delivers a finished transfer's events: to an app in the foreground, at once;
    /// to one in the background, suspended, or ended by the system, nothing yet: they
    /// wait for the session's other tasks (``releaseWaiting(_:world:)``). A transfer that
    /// finishes while its session's round is open joins it.
    mutating func finishedDelivery(_ id: TransferID, world: World) -> [Effect] {
        guard var r = records[id], let outcome = r.outcome else { return [] }
        let app = r.job.bundleIdentifier
        let session = r.job.session
        guard world.isInstalled(app) else { return forget([id]) }
        let state = world.state(app)
        let key = Self.counterKey(app, session)
        if var round = rounds[key] {
            if round.finishSent {
                round.next.append(id)
                r.stage = .nextRound
                rounds[key] = round
                records[id] = r
                return []
            }
            round.queue.append(id)
            r.stage = .inRound
            rounds[key] = round
            records[id] = r
            return pump(key)
        }
        if Self.inFront(state) {
            r.stage = .delivering
            records[id] = r
            let (handOver, sessionEvents) = finishedEvents(r, outcome)
            return handOver + sessionEvents.map { .mode(.deliver(app: app, $0, wake: .ifRunning, because: "background transfer finished")) }
        }
        if let held = holdWithoutLaunchEvents(id, state: state) { return held }
        r.stage = .waitingForSession
        records[id] = r
        return releaseWaiting(key, world: world)
    }

    /// **iOS's rule for waking an app for a background session.** The events of a
    /// session's finished transfers wait while the app is not in front, and are released:
    /// - once the session has no unfinished task left: one round, a wake (or background
    ///   launch) with `handleEventsForBackgroundURLSession` once, every waiting transfer's
    ///   events, then `urlSessionDidFinishEvents`. Apple, "Downloading files in the
    ///   background": when the app is suspended or terminated the transfers run in another
    ///   process, and the system resumes or relaunches it and calls
    ///   `handleEventsForBackgroundURLSession` "when all of the tasks associated with a
    ///   session are complete"; Apple's older `UIApplicationDelegate` reference: "The app
    ///   calls this method when all background transfers associated with an NSURLSession
    ///   object are done, whether they finished successfully or resulted in an error".
    ///   Quinn "The Eskimo!" (Apple DTS, developer.apple.com/forums/thread/14854, "the
    ///   resume rate limiter"): with 10 tasks handed to a background session at once,
    ///   "as tasks complete, nsurlsessiond starts working on subsequent ones. Eventually
    ///   all the tasks complete and nsurlsessiond resumes your app": one resume, not ten.
    /// - or at once when the app is in front (a foreground round: the delegate's events
    ///   only, as to any app in front).
    /// Nothing is released while the session's round is open: its end releases.
    mutating func releaseWaiting(_ key: SessionKey, world: World) -> [Effect] {
        guard rounds[key] == nil else { return [] }
        let state = world.state(key.app)
        let front = Self.inFront(state)
        guard front || unfinished[key] == nil else { return [] }
        let waiting = records.filter { $0.value.stage == .waitingForSession && $0.value.job.bundleIdentifier == key.app && $0.value.job.session == key.session }
            .map(\.key).sorted()
        guard !waiting.isEmpty else { return [] }
        if !front {
            var held: [Effect] = []
            for id in waiting { held += holdWithoutLaunchEvents(id, state: state) ?? [] }
            if !held.isEmpty { return held }
        }
        for id in waiting { records[id]?.stage = .inRound }
        rounds[key] = EventRound(background: !front, queue: waiting)
        guard !front else { return pump(key) }
        // The activity after the launch or wake (an app not running yet has no machine to
        // hold it); while it lasts no background budget runs, each handler has the wake
        // budget, and the completion its own timer once urlSessionDidFinishEvents is sent.
        return [.mode(.deliver(app: key.app, .urlSessionHandleEvents(session: key.session), wake: .launch(.urlSessionEvents),
                               because: "the session's \(waiting.count) finished transfer(s): its tasks are all complete")),
                .mode(.beginActivity(app: key.app, name: Self.activityName(key.session)))]
            + pump(key)
    }

    /// sessionSendsLaunchEvents false: "whether the app should be resumed or launched in
    /// the background when transfers finish" — neither: the events of transfer `id` wait
    /// until the app runs (suspended) or makes its session (not running); nil otherwise.
    private mutating func holdWithoutLaunchEvents(_ id: TransferID, state: AppState) -> [Effect]? {
        guard let r = records[id], sessions[r.job.bundleIdentifier]?[r.job.session]?.sessionSendsLaunchEvents == false else { return nil }
        let app = r.job.bundleIdentifier
        if state == .notRunning {
            records[id]?.stage = .pending
            return [.note(app: app, "transfer \(id) finished; sessionSendsLaunchEvents is false: its events wait for the next launch",
                          .init(transfer: .heldForNextLaunch, session: r.job.session, transferTask: r.job.taskIdentifier))]
        }
        if state == .suspended {
            records[id]?.stage = .heldWhileSuspended
            return [.note(app: app, "transfer \(id) finished; sessionSendsLaunchEvents is false: its events wait until the app runs again (it is not resumed for them)",
                          .init(transfer: .heldUntilResumed, session: r.job.session, transferTask: r.job.taskIdentifier))]
        }
        return nil
    }

    /// Sends the events of the round's next transfers, up to ``roundWindow`` in the app's hands.
    private mutating func pump(_ key: SessionKey) -> [Effect] {
        guard var round = rounds[key] else { return [] }
        var effects: [Effect] = []
        let wake: WakePolicy = round.background ? .wake : .ifRunning
        let because = round.background ? "background URLSession event" : "background transfer finished while the app was away"
        while round.awaiting.count < Self.roundWindow, round.head < round.queue.count {
            let id = round.queue[round.head]
            round.head += 1
            guard var r = records[id], let outcome = r.outcome else { continue }
            r.stage = .delivering
            records[id] = r
            round.awaiting.insert(id)
            let (handOver, events) = finishedEvents(r, outcome)
            effects += handOver + events.map { .mode(.deliver(app: key.app, $0, wake: wake, because: because)) }
        }
        if round.head == round.queue.count {
            round.queue = []
            round.head = 0
        }
        rounds[key] = round
        return effects
    }

    /// A transfer's `didCompleteWithError` returned: the next of the round are sent; the
    /// last of a background round sends `urlSessionDidFinishEvents` and starts the
    /// completion's timer; the last of a foreground round ends it.
    mutating func roundProgressed(app: BundleID, session: SessionIdentifier, id: TransferID, world: World) -> [Effect] {
        let key = Self.counterKey(app, session)
        guard var round = rounds[key], round.awaiting.remove(id) != nil else { return [] }
        rounds[key] = round
        var effects = pump(key)
        round = rounds[key] ?? round
        guard round.awaiting.isEmpty && round.unsent.isEmpty && !round.finishSent else { return effects }
        guard round.background else {
            rounds[key] = nil
            return effects + releaseWaiting(key, world: world)
        }
        let done: Effect = .mode(.deliver(app: app, .urlSessionDidFinishEvents(session: session), wake: .wake, because: "background URLSession events done"))
        if round.completed {
            // The completion came early: the activity held the app running until this last
            // delivery, and ends behind it (the app stops once the callback returned).
            rounds[key] = nil
            effects += [done, .mode(.endActivity(app: app, name: Self.activityName(session)))]
            for next in round.next { effects += finishedDelivery(next, world: world) }
            return effects + releaseWaiting(key, world: world)
        }
        round.finishSent = true
        rounds[key] = round
        return effects + [done, .startRoundTimer(app: app, session: session)]
    }

    /// The app called the completion of `handleEventsForBackgroundURLSession`: the round
    /// ends; transfers that finished meanwhile go to the next one (when the session's
    /// tasks are all complete, or at once to an app in front).
    mutating func roundCompleted(app: BundleID, session: SessionIdentifier, world: World) -> [Effect] {
        let endActivity: Effect = .mode(.endActivity(app: app, name: Self.activityName(session)))
        let key = Self.counterKey(app, session)
        guard var round = rounds[key], round.background else { return [endActivity] }
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
        return effects + releaseWaiting(key, world: world)
    }

    /// The app came to the front: what waited for its sessions goes to it now.
    mutating func appCameToFront(_ app: BundleID, world: World) -> [Effect] {
        let keys = Set(records.values.filter { $0.stage == .waitingForSession && $0.job.bundleIdentifier == app }.map(\.job.session))
        return keys.sorted().flatMap { releaseWaiting(Self.counterKey(app, $0), world: world) }
    }

    /// The app left the front: a foreground round ends; the events it had not sent wait
    /// again, for the session's tasks to be complete (at once if they are: a wake).
    mutating func appLeftFront(_ app: BundleID, world: World) -> [Effect] {
        var effects: [Effect] = []
        for key in rounds.keys.filter({ $0.app == app && rounds[$0]?.background == false }).sorted(by: { $0.session < $1.session }) {
            guard let round = rounds.removeValue(forKey: key) else { continue }
            // Those sent are the app's (their returns find no round, as in front).
            for id in round.unsent { records[id]?.stage = .waitingForSession }
            effects += releaseWaiting(key, world: world)
        }
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
