import AppHostProtocol
import Foundation
import Plugins

/// A transfer the host mediates: what the app asked for and how far it got.
struct TransferRecord: Equatable {
    /// `inFlight`: not finished; `waitingForSession`: finished while the app was not in
    /// front, its events wait for the session's other tasks (iOS wakes the app once they
    /// are all complete, see ``TransferBroker/releaseWaiting(_:world:)``) or for the app
    /// to come to the front; `inRound`: in a round, its events not sent yet (a round sends
    /// ``TransferBroker/roundWindow`` transfers' at a time); `delivering`: sent;
    /// `nextRound`: finished while its session's round was closing, it goes to the next one;
    /// `pending`: its events wait for the app to make its session again (a new process);
    /// `heldWhileSuspended`: for the suspended process to run again (sessionSendsLaunchEvents
    /// false: neither a launch nor a resume for them).
    enum Stage: Equatable { case inFlight, waitingForSession, inRound, pending, heldWhileSuspended, nextRound, delivering }
    var job: TransferJob
    /// Written to the host's database (the daemon hears of a job only once it is).
    var durable = true
    var accepted = false
    var state: TransferTaskState = .queued
    var bytesDone: Int64 = 0
    var bytesExpected: Int64?
    var outcome: TransferOutcome?
    var stage: Stage = .inFlight
    /// The app asked for resume data when it cancelled: it hears the answer (maybe nil).
    var resumeDataRequested = false
    /// A cancel asked while the daemon was not ready (starting or restarting: it may not
    /// have the job yet, and nothing reaches it): sent after the job once it is ready.
    /// `true`: producing resume data.
    var cancelWhenReady: Bool?
}

/// One wake (or background launch) of an app for a session's events, once the
/// session's tasks are all complete (as iOS: see ``TransferBroker/releaseWaiting(_:world:)``):
/// `handleEventsForBackgroundURLSession`, the events of every finished transfer of the
/// session (and of any that finishes meanwhile), then `urlSessionDidFinishEvents` once the
/// app has returned them all; transfers finishing after that wait for the app's completion
/// and go to the next round. A foreground round (`background` false) is the delivery of
/// the events that waited to an app that came to the front: no `handleEvents…`, no
/// `urlSessionDidFinishEvents`; it ends when the app leaves the front.
///
/// Either sends the events of at most ``TransferBroker/roundWindow`` transfers at a time
/// and the next as the app returns their `didCompleteWithError`: a round of 10,000
/// transfers never puts more than the window's events in the app's socket (whose unread
/// bytes are bounded, ``AppBounds/unreadBytes``).
struct EventRound: Equatable {
    var background = true
    /// Members whose events are not sent yet: `queue[head...]`, oldest first.
    var queue: [TransferID] = []
    var head = 0
    /// Transfers whose events were sent and whose `didCompleteWithError` has not returned.
    var awaiting: Set<TransferID> = []
    var finishSent = false
    /// The app called the completion already (before urlSessionDidFinishEvents, as an
    /// app that has nothing to wait for may): the round ends once that is sent.
    var completed = false
    /// Finished after `urlSessionDidFinishEvents` was sent, oldest first.
    var next: [TransferID] = []

    var unsent: ArraySlice<TransferID> { queue[head...] }
}

/// The host's side of background URLSession, as a value in the manner of
/// ``Lifecycle``: the sessions and transfers of each app, the rounds of session events,
/// progress flow control, and what the database and the daemon must hear. Inputs are
/// method calls (an app's request, a daemon event, a callback returned, an app gone, a
/// round's deadline); each returns ``Effect``s the supervisor carries out (the adapter
/// in `TransferDaemonLink.swift`, which also runs the daemon process). It does no I/O.
///
/// Writes are batched: a new session or task is recorded in memory at once and its
/// row waits in ``unsaved``; the adapter writes the batch (``takeUnsaved()``) in one
/// transaction and reports the result (``saved(_:)`` / ``saveFailed(_:reason:)``).
/// Only then is the app answered and the daemon handed the job: durable before
/// anyone hears of it.
struct TransferBroker {
    /// What the broker asks the supervisor to do, in order.
    enum Effect: Equatable {
        /// Send to the transfer daemon (dropped while it is not connected: unaccepted
        /// jobs are sent again when it says `ready`).
        case daemon(TransferRequest)
        /// The device conditions, to the daemon.
        case sendConditions
        /// Answer an app's request.
        case reply(app: BundleID, request: UInt64, ServiceReply)
        /// Deliver, wake, launch, begin/end an activity, kill: through the plugins' machinery.
        case mode(ModeEffect)
        /// A progress callback to an app running code (no wake, no launch).
        case progress(app: BundleID, ServiceEvent)
        /// The deadline of the completion of a session's events round.
        case startRoundTimer(app: BundleID, session: SessionIdentifier)
        case cancelRoundTimer(app: BundleID, session: SessionIdentifier)
        /// The batch in ``unsaved`` waits to be written (sent once, when it stops being empty).
        case save
        /// Forget rows: delivered or cancelled transfers / every row of an uninstalled app.
        case deleteTransfers([TransferID])
        /// Transfers the system cancelled: in one transaction, their `transfer` rows go,
        /// `cancelledTransfer` rows come (see ``CancelledTransfer``), and the rows of
        /// older cancelled transfers past the bound go.
        case saveCancelled([CancelledTransfer], transfers: [TransferID], dropped: [TransferID])
        /// Cancelled transfers the app has heard of.
        case deleteCancelled([TransferID])
        case deleteAppState(app: BundleID)
        /// The app's downloads folder (made, and the app's, before a job may write into it).
        case prepareDirectory(app: BundleID)
        /// A finished download, written by the daemon, becomes the app's file.
        case handOver(path: String, app: BundleID)
        /// A handed-over file whose delegate returned.
        case removeFile(String)
        /// An event-log line.
        case note(app: BundleID?, pid: Int32? = nil, String, HostEvent.Fields = HostEvent.Fields())
    }

    /// What the broker needs to know of the apps at the moment of an input.
    struct World {
        var isInstalled: (BundleID) -> Bool = { _ in true }
        var state: (BundleID) -> AppState = { _ in .notRunning }
        var isRunningCode: (BundleID) -> Bool = { _ in false }
        /// Why no transfer can be queued (no daemon, or none could be found); nil if it can.
        var unavailable: String? = nil
        /// Where the apps' containers are (an app's downloads land in its `Library/Caches/com.apphost.transfers`).
        var containersDirectory = ""
        /// Wall-clock seconds since 1970, for a new job's `created`.
        var wallClock: () -> Double = { Date().timeIntervalSince1970 }
    }

    /// Writes that wait for the next batch.
    struct Unsaved: Sendable {
        /// With the tasks listed in the answer (as they were when the app asked).
        var sessions: [(app: BundleID, config: BackgroundSessionConfig, lastTaskIdentifier: TransferTaskID, request: UInt64, tasks: [TransferTaskSnapshot])] = []
        var jobs: [(job: TransferJob, request: UInt64)] = []
        var isEmpty: Bool { sessions.isEmpty && jobs.isEmpty }
    }

    /// The daemon has said `ready` on its current connection.
    private(set) var ready = false
    private(set) var nextID: UInt64
    var records: [TransferID: TransferRecord] = [:]
    /// app → session identifier → configuration.
    private(set) var sessions: [BundleID: [SessionIdentifier: BackgroundSessionConfig]] = [:]
    /// "app|session" → last task identifier.
    var taskCounters: [SessionKey: TransferTaskID] = [:]
    /// Transfers whose progress callback the app has not returned yet, and the newest
    /// progress that came meanwhile: an app gets progress as fast as it takes it, never
    /// a backlog (and the daemon is never slowed by a slow app).
    var progressInFlight: Set<TransferID> = []
    var progressPending: [TransferID: Progress] = [:]
    /// "app|session|task" → transfer id: the app names tasks, the daemon ids.
    var taskIndex: [TaskKey: TransferID] = [:]
    /// "app|session" → the round of that session's events being delivered to an app in
    /// the background (see `finishedDelivery`).
    var rounds: [SessionKey: EventRound] = [:]
    /// "app|session" → its tasks not finished yet (whatever their state: queued, running,
    /// waiting, not yet written): iOS wakes an app for a session only once it has none.
    var unfinished: [SessionKey: Set<TransferID>] = [:]
    private(set) var unsaved = Unsaved()
    /// app → transfers the system cancelled that the app has not heard of, oldest first
    /// (see ``systemCancelled(_:reason:only:world:)``); at most ``cancelledLimit`` each.
    var cancelled: [BundleID: [CancelledTransfer]] = [:]
    var cancelledLimit = TransferBroker.cancelledPerApp

    struct Progress: Equatable {
        var done: Int64
        var expected: Int64?
    }

    init(firstID: UInt64 = TransferBroker.firstID(at: Date())) {
        self.nextID = firstID
    }

    /// Transfer ids start from the host's start time (milliseconds, shifted): a restarted
    /// host's are above its last run's. On the virtual clock that is the clock's epoch,
    /// so a scenario's ids are the same in every run.
    static func firstID(at start: Date) -> UInt64 {
        UInt64(max(0, start.timeIntervalSince1970) * 1000) << 12
    }

    /// The broker of a restarted host: sessions and undelivered transfers as recorded,
    /// for the apps still installed; `orphans` are the rows of apps that are not. The
    /// daemon reports every finished transfer again when it starts, so their events are
    /// delivered by the usual rules (a background launch for an app the restart ended).
    static func restored(sessions rows: [Store.TransferSessionRow], jobs: [TransferJob],
                         installed: Set<BundleID>, start: Date = Date()) -> (broker: TransferBroker, orphans: [TransferID]) {
        var broker = TransferBroker(firstID: firstID(at: start))
        for row in rows where installed.contains(row.bundleIdentifier) {
            broker.sessions[row.bundleIdentifier, default: [:]][row.config.identifier] = row.config
            broker.taskCounters[counterKey(row.bundleIdentifier, row.config.identifier)] = row.lastTaskIdentifier
        }
        var orphans: [TransferID] = []
        for job in jobs {
            guard installed.contains(job.bundleIdentifier) else { orphans.append(job.id); continue }
            broker.records[job.id] = TransferRecord(job: job)
            broker.index(job)
            broker.unfinished[counterKey(job.bundleIdentifier, job.session), default: []].insert(job.id)
            broker.nextID = max(broker.nextID, job.id.rawValue)
            let key = counterKey(job.bundleIdentifier, job.session)
            broker.taskCounters[key] = broker.taskCounters[key].map { max($0, job.taskIdentifier) } ?? job.taskIdentifier
        }
        return (broker, orphans)
    }

    /// An app's session: the key of its task counter and of its rounds.
    struct SessionKey: Hashable, Sendable {
        var app: BundleID
        var session: SessionIdentifier
    }

    /// A task as its app names it.
    struct TaskKey: Hashable, Sendable {
        var app: BundleID
        var session: SessionIdentifier
        var task: TransferTaskID
    }

    static func counterKey(_ app: BundleID, _ session: SessionIdentifier) -> SessionKey { SessionKey(app: app, session: session) }
    static func taskKey(_ app: BundleID, _ session: SessionIdentifier, _ task: TransferTaskID) -> TaskKey {
        TaskKey(app: app, session: session, task: task)
    }

    private mutating func index(_ job: TransferJob) {
        taskIndex[Self.taskKey(job.bundleIdentifier, job.session, job.taskIdentifier)] = job.id
    }

    /// `job`'s task has its outcome: no longer one its session waits for.
    mutating func finishedTask(_ id: TransferID, _ job: TransferJob) {
        let key = Self.counterKey(job.bundleIdentifier, job.session)
        guard unfinished[key]?.remove(id) != nil else { return }
        if unfinished[key]?.isEmpty == true { unfinished.removeValue(forKey: key) }
    }

    /// Forgets transfer `id` everywhere in memory (its record, its task's name, its progress).
    mutating func dropRecord(_ id: TransferID) {
        guard let job = records.removeValue(forKey: id)?.job else { return }
        taskIndex.removeValue(forKey: Self.taskKey(job.bundleIdentifier, job.session, job.taskIdentifier))
        finishedTask(id, job)
        progressInFlight.remove(id)
        progressPending.removeValue(forKey: id)
    }

    /// The transfer an app names `task` of `session`.
    func id(app: BundleID, session: SessionIdentifier, task: TransferTaskID) -> TransferID? {
        taskIndex[Self.taskKey(app, session, task)]
    }

    /// Where an app's downloads land until the delegate moves them (and partial files wait for a resume).
    static func transfersDirectory(_ app: BundleID, containers: String) -> String {
        containers + "/" + app.rawValue + "/Library/Caches/com.apphost.transfers"
    }

    // MARK: - The daemon

    /// The daemon connected, or said `ready`: the device conditions, then every durable
    /// job it has not accepted yet (made while it was starting or restarting; a
    /// duplicate is refused by the daemon).
    /// A cancel asked meanwhile follows its job (``TransferRecord/cancelWhenReady``; kept
    /// until the daemon accepts the job or it finishes, as a sync may reach a daemon whose
    /// connection is not attached yet, and come again; a second cancel changes nothing).
    func sync() -> [Effect] {
        var effects: [Effect] = [.sendConditions]
        for (id, r) in records.sorted(by: { $0.key < $1.key }) {
            if !r.accepted && r.durable && r.stage == .inFlight { effects.append(.daemon(.enqueue(r.job))) }
            if let resumeData = r.cancelWhenReady {
                effects.append(.daemon(resumeData ? .cancelProducingResumeData(id: id) : .cancel(id: id)))
            }
        }
        return effects
    }

    /// The daemon's connection ended (it exited): a new one must say `ready` again.
    mutating func daemonGone() {
        ready = false
    }

    /// One of the daemon's events.
    /// An outcome as `String(describing:)` writes it; a completed one without the
    /// reflection that takes (7 % of the host's steps in 10,000 small downloads).
    static func text(of outcome: TransferOutcome) -> String {
        if case .completed(let status, let bytes) = outcome { return "completed(status: \(status), bytes: \(bytes))" }
        return "\(outcome)"
    }

    mutating func handle(_ event: TransferEvent, world: World) -> [Effect] {
        switch event {
        case .ready(let pid, let unfinished):
            ready = true
            return [.note(app: nil, pid: pid, "transfer daemon ready (\(unfinished) unfinished transfer(s))", .init(transfer: .daemonReady))] + sync()
        case .accepted(let id):
            // In memory only: a restarted host offers every transfer again, and the
            // daemon accepts one it has (one commit less per transfer).
            records[id]?.accepted = true
            records[id]?.cancelWhenReady = nil
            return []
        case .progress(let id, let done, let expected):
            guard var r = records[id] else { return [] }
            r.bytesDone = done
            r.bytesExpected = expected
            r.state = .running
            records[id] = r
            if progressInFlight.contains(id) {
                progressPending[id] = Progress(done: done, expected: expected)
                return []
            }
            return deliverProgress(id, Progress(done: done, expected: expected), world: world)
        case .waiting(let id, let reason):
            guard let job = records[id]?.job else { return [] }
            records[id]?.state = .waiting
            return [.note(app: job.bundleIdentifier, "transfer \(id) waiting: \(reason)",
                          .init(transfer: .waiting, session: job.session, transferTask: job.taskIdentifier))]
        case .finished(let id, let outcome):
            // From before a host restart, or cancelled: nothing to deliver.
            guard var r = records[id] else { return [.daemon(.acknowledge(id: id))] }
            guard r.outcome == nil else { return [] }
            r.outcome = outcome
            r.cancelWhenReady = nil
            r.state = .completed
            records[id] = r
            finishedTask(id, r.job)
            return [.note(app: r.job.bundleIdentifier, "transfer \(id) (task \(r.job.taskIdentifier) of \(r.job.session)) finished: \(Self.text(of: outcome))",
                          .init(transfer: .finished, session: r.job.session, transferTask: r.job.taskIdentifier,
                                success: { if case .completed = outcome { true } else { false } }()))]
                + finishedDelivery(id, world: world)
        case .transfers, .error:
            return []
        }
    }

    /// Progress goes only to an app running code, and leaves no event-log line (a 1 GiB
    /// download has thousands).
    private mutating func deliverProgress(_ id: TransferID, _ progress: Progress, world: World) -> [Effect] {
        guard let r = records[id], r.outcome == nil, world.isRunningCode(r.job.bundleIdentifier) else { return [] }
        progressInFlight.insert(id)
        return [.progress(app: r.job.bundleIdentifier, .urlSessionProgress(session: r.job.session, taskIdentifier: r.job.taskIdentifier,
                                                                           bytesDone: progress.done, bytesExpected: progress.expected))]
    }

    // MARK: - The app's callbacks and its process

    /// A service callback about transfers returned: delete a handed-over file, acknowledge a completion.
    mutating func callbackReturned(_ event: ServiceEvent, app: BundleID, world: World) -> [Effect] {
        switch event {
        case .urlSessionProgress(let session, let task, _, _):
            guard let id = id(app: app, session: session, task: task) else { return [] }
            progressInFlight.remove(id)
            guard let newest = progressPending.removeValue(forKey: id) else { return [] }
            return deliverProgress(id, newest, world: world)
        case .urlSessionDidFinishDownloading(_, _, let location):
            // As iOS: the temporary file is gone once the delegate returned (the app moved it or lost it).
            return [.removeFile(location)]
        case .urlSessionDidComplete(let session, let task, _, _, _):
            guard let id = id(app: app, session: session, task: task) else {
                return cancelledReturned(app: app, session: session, task: task)
            }
            return forget([id]) + roundProgressed(app: app, session: session, id: id, world: world)
        default:
            return []
        }
    }

    /// The app's process is gone; a user terminate cancels its transfers, as on iOS, and
    /// the app hears of them when it makes their session again.
    mutating func appExited(_ app: BundleID, byUser: Bool) -> [Effect] {
        // Progress callbacks that died with the process are not waited for.
        for (id, r) in records where r.job.bundleIdentifier == app { progressInFlight.remove(id) }
        rounds = rounds.filter { $0.key.app != app }
        cancelledUnsent(app: app)
        guard byUser else {
            // Events that did not get through wait for the app to recreate its session;
            // so do those that waited for a session whose tasks are all complete (its round
            // was open, or the app was in front). Those of a session with tasks still
            // running wait on: the session's end launches the app for them.
            for (id, r) in records where r.job.bundleIdentifier == app {
                switch r.stage {
                case .delivering, .inRound, .nextRound, .heldWhileSuspended:
                    records[id]?.stage = .pending
                case .waitingForSession where unfinished[Self.counterKey(app, r.job.session)] == nil:
                    records[id]?.stage = .pending
                default:
                    break
                }
            }
            return []
        }
        return systemCancelled(app, reason: .userForceQuitApplication, world: World())
    }

    /// The app is uninstalled: its transfers are cancelled and its sessions forgotten.
    mutating func appUninstalled(_ app: BundleID) -> [Effect] {
        let ids = records.filter { $0.value.job.bundleIdentifier == app }.map(\.key)
        for id in ids { dropRecord(id) }
        rounds = rounds.filter { $0.key.app != app }
        cancelled.removeValue(forKey: app)
        sessions.removeValue(forKey: app)
        taskCounters = taskCounters.filter { $0.key.app != app }
        var effects: [Effect] = [.deleteAppState(app: app)]
        if !ids.isEmpty {
            effects += [.daemon(.cancelApp(bundleIdentifier: app)), .note(app: app, "uninstalled: \(ids.count) background transfer(s) cancelled", .init(transfer: .cancelledByUninstall))]
        }
        return effects
    }

    /// The deadline of a session's events round ran out: the completion never came.
    /// `activityHeld`: the app still holds the round's activity (else it ended meanwhile).
    func roundTimedOut(app: BundleID, session: SessionIdentifier, activityHeld: Bool, timeout: String) -> [Effect] {
        guard activityHeld else { return [] }
        return [.mode(.kill(app: app, namespace: "RUNNINGBOARD", code: .backgroundURLSessionTimeout,
                            reason: "handleEventsForBackgroundURLSession(\(session)): the completion handler was not called within \(timeout)"))]
    }

    /// Drops delivered (or cancelled) transfers from memory and the database, then lets the
    /// daemon forget them: a host that stops in between finds no record and acknowledges
    /// the daemon's repeated report then.
    mutating func forget(_ ids: [TransferID], acknowledge: Bool = true) -> [Effect] {
        for id in ids { dropRecord(id) }
        return [.deleteTransfers(ids)] + (acknowledge ? ids.map { .daemon(.acknowledge(id: $0)) } : [])
    }

    // MARK: - The app's requests

    /// Whether `request` is one of the broker's (a background URLSession call).
    static func handles(_ request: ServiceRequest) -> Bool {
        switch request {
        case .urlSessionCreate, .urlSessionStartTask, .urlSessionResumeTask, .urlSessionCancel, .urlSessionTasks, .urlSessionEventsCompleted:
            true
        default:
            false
        }
    }

    /// The app's URLSession request `requestID`. Its reply is among the effects, at
    /// once or (for a new session or task) once its row is written. An upload's
    /// `uploadFile` has been resolved to a readable file in the app's container.
    mutating func request(_ request: ServiceRequest, id requestID: UInt64, from app: BundleID, world: World) -> [Effect] {
        func reply(_ r: ServiceReply) -> [Effect] { [.reply(app: app, request: requestID, r)] }
        switch request {
        case .urlSessionCreate(var config):
            let timeout = config.timeoutIntervalForResource
            guard timeout.isFinite, timeout > 0 else {
                return reply(.failed(code: "invalidArgument", reason: "timeoutIntervalForResource \(timeout) is not a number of seconds > 0"))
            }
            config.timeoutIntervalForResource = min(timeout, Double(Duration.longestWait.components.seconds))
            sessions[app, default: [:]][config.identifier] = config
            let wasEmpty = unsaved.isEmpty
            unsaved.sessions.append((app, config, taskCounters[Self.counterKey(app, config.identifier)] ?? TransferTaskID(0), requestID,
                                     snapshots(app, config.identifier)))
            return wasEmpty ? [.save] : []
        case .urlSessionStartTask(let session, let kind, let url, let method, let headers, let uploadFile):
            if kind == .upload && uploadFile == nil { return reply(.failed(code: "fileDoesNotExist", reason: "an upload task needs a file")) }
            return queueTask(app: app, request: requestID, session: session, kind: kind, url: url, method: method, headers: headers,
                             upload: kind == .upload ? uploadFile : nil, resume: nil, world: world)
        case .urlSessionResumeTask(let session, let data):
            switch ResumeData.decode(data, transfersDirectory: Self.transfersDirectory(app, containers: world.containersDirectory)) {
            case .success(let resume):
                return queueTask(app: app, request: requestID, session: session, kind: .download, url: resume.url, method: "GET",
                                 headers: resume.headers, upload: nil, resume: resume.resume, world: world)
            case .failure(let problem):
                return reply(.failed(code: "cannotDecodeRawData", reason: "downloadTask(withResumeData:): \(problem.reason)"))
            }
        case .urlSessionCancel(let session, let task, let produceResumeData):
            guard let id = id(app: app, session: session, task: task), let r = records[id] else {
                return reply(.refused(reason: "no task \(task) in \(session)"))
            }
            let resumeData = produceResumeData && r.outcome == nil && r.job.kind == .download
            if produceResumeData { records[id]?.resumeDataRequested = true }
            // A daemon starting or restarting hears nothing now, and may not have the job
            // yet: the cancel goes after the job once it is ready.
            guard ready else {
                if r.outcome == nil { records[id]?.cancelWhenReady = resumeData }
                return reply(.ok)
            }
            return [.daemon(resumeData ? .cancelProducingResumeData(id: id) : .cancel(id: id))] + reply(.ok)
        case .urlSessionTasks(let session):
            return reply(.transferTasks(snapshots(app, session)))
        case .urlSessionEventsCompleted(let session):
            return reply(.ok) + roundCompleted(app: app, session: session, world: world)
        default:
            return []
        }
    }

    /// Records a new task of `session` (its row waits for the next batch).
    private mutating func queueTask(app: BundleID, request: UInt64, session: SessionIdentifier, kind: TransferKind, url: String, method: String,
                                    headers: [String: String], upload: String?, resume: TransferResume?, world: World) -> [Effect] {
        func reply(_ r: ServiceReply) -> [Effect] { [.reply(app: app, request: request, r)] }
        guard let config = sessions[app]?[session] else {
            return reply(.refused(reason: "no background session \"\(session)\" in this process (create it first)"))
        }
        guard let scheme = URL(string: url)?.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            return reply(.failed(code: "unsupportedURL", reason: "background sessions transfer http and https URLs only (\(url))"))
        }
        // A daemon starting or restarting gets the job once it is ready (unaccepted
        // jobs are sent then); only a daemon that cannot run refuses.
        if let unavailable = world.unavailable {
            return reply(.failed(code: "cannotConnectToHost", reason: unavailable))
        }
        let key = Self.counterKey(app, session)
        let taskIdentifier = TransferTaskID((taskCounters[key]?.rawValue ?? 0) + 1)
        taskCounters[key] = taskIdentifier
        nextID += 1
        let id = TransferID(nextID)
        let job = TransferJob(id: id, bundleIdentifier: app, session: session, taskIdentifier: taskIdentifier, kind: kind,
                              url: url, method: method, headers: headers, uploadFile: upload,
                              destination: Self.transfersDirectory(app, containers: world.containersDirectory) + "/CFNetworkDownload_\(id).tmp", discretionary: config.isDiscretionary,
                              allowsCellularAccess: config.allowsCellularAccess, timeoutForResource: config.timeoutIntervalForResource,
                              created: world.wallClock(), resume: resume)
        records[id] = TransferRecord(job: job, durable: false)
        index(job)
        unfinished[key, default: []].insert(id)
        let wasEmpty = unsaved.isEmpty
        unsaved.jobs.append((job, request))
        // The folder before the job: the first of an app's batch makes it.
        let prepare: [Effect] = unsaved.jobs.dropLast().contains { $0.job.bundleIdentifier == app } ? [] : [.prepareDirectory(app: app)]
        return prepare + (wasEmpty ? [.save] : [])
    }

    /// The batch to write (in one transaction); then ``saved(_:)`` or ``saveFailed(_:reason:)``.
    mutating func takeUnsaved() -> Unsaved {
        defer { unsaved = Unsaved() }
        return unsaved
    }

    /// `batch` is written: the apps hear of their sessions and tasks, the daemon gets the jobs.
    mutating func saved(_ batch: Unsaved) -> [Effect] {
        var effects: [Effect] = []
        for s in batch.sessions {
            effects.append(.reply(app: s.app, request: s.request, .transferTasks(s.tasks)))
            effects += deliverPending(app: s.app, session: s.config.identifier)
            effects += sendCancelled(app: s.app, session: s.config.identifier)
        }
        for (job, request) in batch.jobs {
            guard records[job.id] != nil else { continue }
            records[job.id]?.durable = true
            // A daemon not ready yet gets it (after the device conditions) once it is.
            if ready { effects.append(.daemon(.enqueue(job))) }
            let from = job.resume.map { " (resuming at byte \($0.bytes))" } ?? ""
            effects.append(.note(app: job.bundleIdentifier, "\(job.kind.rawValue) task \(job.taskIdentifier) of \(job.session) queued: \(job.url)\(from)",
                                 .init(transfer: .queued, session: job.session, transferTask: job.taskIdentifier)))
            effects.append(.reply(app: job.bundleIdentifier, request: request, .transferTaskCreated(taskIdentifier: job.taskIdentifier)))
        }
        return effects
    }

    /// `batch` could not be written: its requests fail, its tasks are dropped (their
    /// numbers stay used, as a counter only grows).
    mutating func saveFailed(_ batch: Unsaved, reason: String, world: World = World()) -> [Effect] {
        var effects: [Effect] = []
        for s in batch.sessions {
            effects.append(.reply(app: s.app, request: s.request, .failed(code: "cannotWriteToFile", reason: "the host could not record the session: \(reason)")))
        }
        var sessionsTouched = Set<SessionKey>()
        for (job, request) in batch.jobs {
            dropRecord(job.id)
            sessionsTouched.insert(Self.counterKey(job.bundleIdentifier, job.session))
            effects.append(.reply(app: job.bundleIdentifier, request: request,
                                  .failed(code: "cannotWriteToFile", reason: "the host could not record the task: \(reason)")))
        }
        // A dropped task may have been the last unfinished one of its session.
        for key in sessionsTouched.sorted(by: { ($0.app, $0.session) < ($1.app, $1.session) }) { effects += releaseWaiting(key, world: world) }
        return effects
    }

    /// The suspended app runs code again (brought to the front, or woken for something
    /// else): the events held while it was suspended (sessionSendsLaunchEvents false) go to
    /// the process that has their sessions, as iOS delivers them to a running app.
    mutating func appRunsAgain(_ app: BundleID) -> [Effect] {
        deliverKept(app, because: "transfer events kept while the app was suspended") { $0.stage == .heldWhileSuspended }
    }

    /// Events that waited for the app to come back (sessionSendsLaunchEvents false, or a
    /// launch that did not deliver them) are delivered now.
    private mutating func deliverPending(app: BundleID, session: SessionIdentifier) -> [Effect] {
        deliverKept(app, because: "transfer events kept for the next launch") { $0.job.session == session && $0.stage == .pending }
    }

    /// Delivers, in transfer order, the kept events of `app`'s records that `kept` picks,
    /// to the app only if it runs (`.ifRunning`).
    private mutating func deliverKept(_ app: BundleID, because: String, _ kept: (TransferRecord) -> Bool) -> [Effect] {
        var effects: [Effect] = []
        let chosen = records.filter { $0.value.job.bundleIdentifier == app && kept($0.value) }
        for (id, r) in chosen.sorted(by: { $0.key < $1.key }) {
            records[id]?.stage = .delivering
            if let outcome = r.outcome {
                let (handOver, events) = finishedEvents(r, outcome)
                effects += handOver + events.map { .mode(.deliver(app: app, $0, wake: .ifRunning, because: because)) }
            }
        }
        return effects
    }

    /// The tasks of `session` as the app lists them.
    func snapshots(_ app: BundleID, _ session: SessionIdentifier) -> [TransferTaskSnapshot] {
        records.values.filter { $0.job.bundleIdentifier == app && $0.job.session == session }
            .sorted { $0.job.taskIdentifier < $1.job.taskIdentifier }
            .map { TransferTaskSnapshot(taskIdentifier: $0.job.taskIdentifier, kind: $0.job.kind, url: $0.job.url,
                                        state: $0.outcome == nil ? $0.state : .completed, bytesDone: $0.bytesDone, bytesExpected: $0.bytesExpected) }
    }
}
