import AppHostProtocol
import AppHostSystem
import Foundation
import NIOCore
import NIOPosix
import Plugins
import SystemPackage

/// A transfer the host mediates: what the app asked for and how far it got.
struct TransferRecord {
    /// `pending`: finished, its events wait for the app to recreate the session;
    /// `nextRound`: finished while its session's round was closing, it opens the next one.
    enum Stage { case inFlight, pending, nextRound, delivering }
    var job: TransferJob
    var accepted = false
    var state: TransferTaskState = .queued
    var bytesDone: Int64 = 0
    var bytesExpected: Int64?
    var outcome: TransferOutcome?
    var stage: Stage = .inFlight
    /// The app asked for resume data when it cancelled: it hears the answer (maybe nil).
    var resumeDataRequested = false
}

/// When to restart a process that keeps dying: 1 s, 2 s, 4 s, … up to `maximum`; back to
/// `initial` only once a start has stayed up for `stableAfter`. Times are the host's clock.
struct RestartBackoff: Sendable, Equatable {
    var initial: Duration = .seconds(1)
    var maximum: Duration = .seconds(60)
    var stableAfter: Duration = .seconds(30)
    /// Deaths in a row (starts that did not stay up for `stableAfter`).
    private(set) var failures = 0
    /// When the current process started (nil: none running).
    private(set) var upSince: Duration?

    /// The process started (or said it is ready) at host time `now`.
    mutating func started(at now: Duration) {
        upSince = now
    }

    /// The process died, or could not be started, at host time `now`: the delay before the next start.
    mutating func ended(at now: Duration) -> Duration {
        if let upSince, now - upSince >= stableAfter { failures = 0 }
        upSince = nil
        var delay = initial
        for _ in 0..<min(failures, 32) where delay < maximum { delay *= 2 }
        failures += 1
        return min(delay, maximum)
    }
}

/// The host's side of the shared transfer daemon (iOS's background URLSession): the
/// daemon process (started, supervised, restarted with backoff), the sessions and
/// transfers of each app, and the delivery of their events.
struct TransferBrokerState {
    var generation: UInt64 = 0
    var child: ChildProcess?
    var channel: (any Channel)?
    var ready = false
    /// How long to wait before starting a daemon that died (see ``RestartBackoff``).
    var backoff = RestartBackoff()
    var stopping = false
    var unavailable: String?
    var nextID = UInt64(Date().timeIntervalSince1970 * 1000) << 12
    var records: [UInt64: TransferRecord] = [:]
    /// app → session identifier → configuration.
    var sessions: [String: [String: BackgroundSessionConfig]] = [:]
    /// "app|session" → last task identifier.
    var taskCounters: [String: Int] = [:]
    var exitWaiters: [CheckedContinuation<Void, Never>] = []
    /// The spawn and attach in progress: a shutdown waits for it, so it never tears the
    /// event loops down under a half-made channel or leaves a daemon behind.
    var starting: Task<Void, Never>?
    /// Transfers whose progress callback the app has not returned yet, and the newest
    /// progress that came meanwhile: an app gets progress as fast as it takes it, never
    /// a backlog (and the daemon is never slowed by a slow app).
    var progressInFlight: Set<UInt64> = []
    var progressPending: [UInt64: (done: Int64, expected: Int64?)] = [:]
    /// "app|session|task" → transfer id: the app names tasks, the daemon ids.
    var taskIndex: [String: UInt64] = [:]
    /// "app|session" → the round of that session's events being delivered to an app in
    /// the background (see `finishedDelivery`).
    var rounds: [String: EventRound] = [:]

    static func taskKey(_ app: String, _ session: String, _ task: Int) -> String { "\(app)|\(session)|\(task)" }

    mutating func index(_ job: TransferJob) {
        taskIndex[Self.taskKey(job.bundleIdentifier, job.session, job.taskIdentifier)] = job.id
    }

    func id(app: String, session: String, task: Int) -> UInt64? {
        taskIndex[Self.taskKey(app, session, task)]
    }
}

/// One wake (or background launch) of an app for a session's events, as iOS batches
/// them: `handleEventsForBackgroundURLSession`, the events of every transfer of the
/// session that finishes meanwhile, then `urlSessionDidFinishEvents` once the app has
/// returned them all; transfers finishing after that wait for the app's completion
/// and open the next round.
struct EventRound {
    /// Transfers whose events were sent and whose `didCompleteWithError` has not returned.
    var awaiting: Set<UInt64> = []
    var finishSent = false
    /// The app called the completion already (before urlSessionDidFinishEvents, as an
    /// app that has nothing to wait for may): the round ends once that is sent.
    var completed = false
    /// Finished after `urlSessionDidFinishEvents` was sent, oldest first.
    var next: [UInt64] = []
}

extension Supervisor {
    static let transferDaemonName = "apphost-transferd"

    /// Loads the sessions and undelivered transfers recorded before a host restart. The
    /// daemon reports every finished transfer again when it starts, so their events are
    /// delivered by the usual rules (a background launch for an app the restart ended).
    static func restoredTransfers(store: Store, installed: Set<String>) throws -> TransferBrokerState {
        var state = TransferBrokerState()
        for row in try store.transferSessions() where installed.contains(row.bundleIdentifier) {
            state.sessions[row.bundleIdentifier, default: [:]][row.config.identifier] = row.config
            state.taskCounters["\(row.bundleIdentifier)|\(row.config.identifier)"] = row.lastTaskIdentifier
        }
        var orphans: [UInt64] = []
        for job in try store.transfers() {
            guard installed.contains(job.bundleIdentifier) else { orphans.append(job.id); continue }
            state.records[job.id] = TransferRecord(job: job)
            state.index(job)
            state.nextID = max(state.nextID, job.id)
            let key = "\(job.bundleIdentifier)|\(job.session)"
            state.taskCounters[key] = max(state.taskCounters[key] ?? 0, job.taskIdentifier)
        }
        try store.deleteTransfers(ids: orphans)
        return state
    }

    /// Where `apphost-transferd` is: beside the app executables' product directories.
    func transferDaemonPath() -> String? {
        for dir in configuration.productDirectories + [ProcessInfo.processInfo.environment["APPHOST_PRODUCTS_DIR"] ?? ""]
        where !dir.isEmpty {
            let path = dir + "/" + Self.transferDaemonName
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        let beside = ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "") as NSString
        let path = beside.deletingLastPathComponent + "/" + Self.transferDaemonName
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }

    /// Starts (or restarts) the transfer daemon.
    func startTransferDaemon() {
        guard configuration.transferDaemon, !transfers.stopping, transfers.child == nil else { return }
        guard let path = transferDaemonPath() else {
            transfers.unavailable = "\(Self.transferDaemonName) was not found beside the apps' executables (build it: swift build)"
            events.append(.warning, cause: "transfer daemon not started: \(transfers.unavailable!); background URLSession is unavailable", time: now())
            return
        }
        transfers.generation += 1
        let generation = transfers.generation
        let input = self.input
        let group = self.group
        let dir = configuration.stateDirectory + "/transfers"
        let logPath = configuration.logsDirectory + "/\(Self.transferDaemonName).log"
        let device = modes.deviceState
        transfers.starting = Task {
            defer { transfers.starting = nil }
            do {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
                let settings = SpawnSettings(
                    executablePath: path, arguments: [path, "--state-dir", dir, "--power", device.pluggedIn ? "plugged" : "battery",
                                                     "--network", device.network.rawValue] + configuration.transferSettings.daemonArguments,
                    environment: ["HOME": dir, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                                  "APPHOST_TRANSFERD_FD": String(IPCProtocol.descriptor)],
                    workingDirectory: dir,
                    seccomp: .baseline,
                    // Apps under uids of their own: it writes downloads into, and reads uploads
                    // from, containers that are 0700 and the apps'. Nothing else survives.
                    keptCapabilities: identities == nil ? [] : [.dacOverride])
                let child: ChildProcess
                let channel: any Channel
                do throws(ChildLauncher.Failure) {
                    (child, channel) = try await ChildLauncher.launch(
                        settings, logPath: logPath, group: group,
                        makeHandler: { TransferDaemonHandler(input: input, generation: generation) },
                        onEvent: { event in
                            if case .exited(let status) = event { input.yield(.transferDaemonExited(status, generation: generation)) }
                        })
                } catch .attach(let started, let error) {
                    // It runs but cannot be reached: end it (its exit restarts it, after the backoff).
                    try? started.signal(SIGKILL)
                    throw error
                } catch .spawn(let error) {
                    throw error
                }
                handleTransferInput(.transferDaemonStarted(child: child, channel: channel, generation: generation))
            } catch {
                handleTransferInput(.transferDaemonFailed("\(error)", generation: generation))
            }
        }
    }

    /// Stops the daemon (host shutdown): closing its socket ends it; waits for its exit.
    func stopTransferDaemon() async {
        transfers.stopping = true
        if let starting = transfers.starting { await starting.value }
        guard transfers.child != nil else { return }
        transfers.channel?.close(promise: nil)
        await withCheckedContinuation { transfers.exitWaiters.append($0) }
    }

    func handleTransferInput(_ item: Input) {
        switch item {
        case .transferDaemonStarted(let child, let channel, let generation):
            guard generation == transfers.generation else {
                channel.close(promise: nil)
                try? child.signal(SIGKILL)
                return
            }
            transfers.child = child
            transfers.channel = channel
            transfers.backoff.started(at: hostNow())
            // A shutdown that began meanwhile closes the channel and waits for the exit.
            guard !transfers.stopping else { return }
            events.append(.service, pid: child.pid, cause: "transfer daemon started (pid \(child.pid))", time: now())
            // Its `ready` may have been read before this arrived (the channel's handler
            // runs as soon as the socket is attached): what it triggers is sent now.
            if transfers.ready { syncDaemon() }
        case .transferDaemonFailed(let error, let generation):
            guard generation == transfers.generation else { return }
            events.append(.warning, cause: "transfer daemon could not start: \(error)", time: now())
            scheduleTransferRestart()
        case .transferDaemonExited(let status, let generation):
            guard generation == transfers.generation else { return }
            transfers.child = nil
            transfers.channel = nil
            transfers.ready = false
            for w in transfers.exitWaiters { w.resume() }
            transfers.exitWaiters.removeAll()
            guard !transfers.stopping else { return }
            events.append(.warning, cause: "transfer daemon exited (\(status.description)); restarting", time: now())
            scheduleTransferRestart()
        case .transferDaemonRestart:
            startTransferDaemon()
        case .transferEvent(let event, let generation):
            guard generation == transfers.generation else { return }
            handleTransferEvent(event)
        default:
            break
        }
    }

    private func scheduleTransferRestart() {
        guard !transfers.stopping else { return }
        let delay = transfers.backoff.ended(at: hostNow())
        let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
        events.append(.service, cause: "transfer daemon: next start in \(DurationText.format(seconds)) (\(transfers.backoff.failures) start(s) in a row did not stay up)", time: now())
        // A host-clock deadline (real or virtual): `TimerID.transferRestart`.
        startHostTimer(.transferRestart, app: nil, after: delay)
    }

    /// Sends the device conditions and every job the daemon has not accepted yet
    /// (made while it was starting or restarting; a duplicate is refused by the daemon).
    private func syncDaemon() {
        guard transfers.channel != nil else { return }
        let device = modes.deviceState
        sendToDaemon(.conditions(pluggedIn: device.pluggedIn, network: device.network))
        for (_, r) in transfers.records.sorted(by: { $0.key < $1.key }) where !r.accepted && r.stage == .inFlight {
            sendToDaemon(.enqueue(r.job))
        }
    }

    @discardableResult
    func sendToDaemon(_ request: TransferRequest) -> Bool {
        guard let channel = transfers.channel else { return false }
        do {
            channel.writeAndFlush(ByteBuffer(bytes: try Frame.encode(request)), promise: nil)
            return true
        } catch {
            logger.error("could not encode \(request): \(error)")
            return false
        }
    }

    private func handleTransferEvent(_ event: TransferEvent) {
        switch event {
        case .ready(let pid, let unfinished):
            transfers.ready = true
            events.append(.service, pid: pid, cause: "transfer daemon ready (\(unfinished) unfinished transfer(s))", time: now())
            syncDaemon()
        case .accepted(let id):
            guard transfers.records[id] != nil else { return }
            // In memory only: a restarted host offers every transfer again, and the
            // daemon accepts one it has (one commit less per transfer).
            transfers.records[id]?.accepted = true
        case .progress(let id, let done, let expected):
            guard var r = transfers.records[id] else { return }
            r.bytesDone = done
            r.bytesExpected = expected
            r.state = .running
            transfers.records[id] = r
            if transfers.progressInFlight.contains(id) {
                transfers.progressPending[id] = (done, expected)
            } else {
                deliverProgress(id, done, expected)
            }
        case .waiting(let id, let reason):
            transfers.records[id]?.state = .waiting
            if let app = transfers.records[id]?.job.bundleIdentifier {
                events.append(.service, app: app, cause: "transfer \(id) waiting: \(reason)", time: now())
            }
        case .finished(let id, let outcome):
            guard var r = transfers.records[id] else {
                // From before a host restart, or cancelled: nothing to deliver.
                _ = sendToDaemon(.acknowledge(id: id))
                return
            }
            guard r.outcome == nil else { return }
            r.outcome = outcome
            r.state = .completed
            transfers.records[id] = r
            events.append(.service, app: r.job.bundleIdentifier, cause: "transfer \(id) (task \(r.job.taskIdentifier) of \(r.job.session)) finished: \(outcome)", time: now())
            deliverFinished(id)
        case .transfers, .error:
            break
        }
    }

    /// Progress goes only to an app running code, and leaves no event-log line (a 1 GiB
    /// download has thousands).
    private func deliverProgress(_ id: UInt64, _ done: Int64, _ expected: Int64?) {
        guard let r = transfers.records[id], r.outcome == nil, runtimes[r.job.bundleIdentifier]?.machine.isRunningCode == true else { return }
        transfers.progressInFlight.insert(id)
        feed(r.job.bundleIdentifier, .deliver(.urlSessionProgress(session: r.job.session, taskIdentifier: r.job.taskIdentifier,
                                                                  bytesDone: done, bytesExpected: expected), wake: false, launch: nil))
    }

    /// Delivers a finished transfer's events by the iOS rules.
    private func deliverFinished(_ id: UInt64) {
        performMode(finishedDelivery(id))
    }

    /// What delivers a finished transfer's events: to an app in the foreground, at once;
    /// to one in the background, suspended, or ended by the system, in its session's
    /// round (an `EventRound`: one wake or background launch for all the transfers that
    /// finish meanwhile, not one per transfer).
    private func finishedDelivery(_ id: UInt64) -> [ModeEffect] {
        guard var r = transfers.records[id], let outcome = r.outcome else { return [] }
        let app = r.job.bundleIdentifier
        let session = r.job.session
        guard apps[app] != nil else {
            forget([id])
            return []
        }
        let state = runtimes[app]?.machine.state ?? .notRunning
        let key = "\(app)|\(session)"
        let sessionEvents = finishedEvents(r, outcome)
        if var round = transfers.rounds[key] {
            if round.finishSent {
                round.next.append(id)
                r.stage = .nextRound
                transfers.rounds[key] = round
                transfers.records[id] = r
                return []
            }
            round.awaiting.insert(id)
            r.stage = .delivering
            transfers.rounds[key] = round
            transfers.records[id] = r
            return sessionEvents.map { .deliver(app: app, $0, wake: .wake, because: "background URLSession event") }
        }
        if state == .active || state == .inactive {
            r.stage = .delivering
            transfers.records[id] = r
            return sessionEvents.map { .deliver(app: app, $0, wake: .ifRunning, because: "background transfer finished") }
        }
        let config = transfers.sessions[app]?[session]
        if state == .notRunning && !(config?.sessionSendsLaunchEvents ?? true) {
            r.stage = .pending
            transfers.records[id] = r
            events.append(.service, app: app, cause: "transfer \(id) finished; sessionSendsLaunchEvents is false: its events wait for the next launch", time: now())
            return []
        }
        transfers.rounds[key] = EventRound(awaiting: [id])
        r.stage = .delivering
        transfers.records[id] = r
        // The activity after the launch or wake (an app not running yet has no machine to
        // hold it); while it lasts no background budget runs, each handler has the wake
        // budget, and the completion its own timer once urlSessionDidFinishEvents is sent.
        return [.deliver(app: app, .urlSessionHandleEvents(session: session), wake: .launch(.urlSessionEvents), because: "background transfer finished"),
                .beginActivity(app: app, name: "URLSession events \(session)")]
            + sessionEvents.map { .deliver(app: app, $0, wake: .wake, because: "background URLSession event") }
    }

    /// A transfer's `didCompleteWithError` returned: the last of its round sends
    /// `urlSessionDidFinishEvents` and starts the completion's timer.
    private func roundProgressed(app: String, session: String, id: UInt64) {
        let key = "\(app)|\(session)"
        guard var round = transfers.rounds[key], round.awaiting.remove(id) != nil else { return }
        guard round.awaiting.isEmpty && !round.finishSent else {
            transfers.rounds[key] = round
            return
        }
        let done: ModeEffect = .deliver(app: app, .urlSessionDidFinishEvents(session: session), wake: .wake, because: "background URLSession events done")
        if round.completed {
            // The completion came early: the activity held the app running until this last
            // delivery, and ends behind it (the app stops once the callback returned).
            transfers.rounds[key] = nil
            performMode([done, .endActivity(app: app, name: "URLSession events \(session)")] + round.next.flatMap { finishedDelivery($0) })
        } else {
            round.finishSent = true
            transfers.rounds[key] = round
            performMode([done])
            startHostTimer(.transferRound(session: session), app: app, after: configuration.profile.duration(.backgroundTask))
        }
    }

    /// The app called the completion of `handleEventsForBackgroundURLSession`: the round
    /// ends; transfers that finished meanwhile open the next one.
    private func roundCompleted(app: String, session: String) -> [ModeEffect] {
        let endActivity: ModeEffect = .endActivity(app: app, name: "URLSession events \(session)")
        let key = "\(app)|\(session)"
        guard var round = transfers.rounds[key] else { return [endActivity] }
        guard round.finishSent else {
            // Early: the round's events and urlSessionDidFinishEvents still follow, and the
            // activity keeps the app running until they are delivered (else it would be
            // stopped between two events and woken again at once).
            round.completed = true
            transfers.rounds[key] = round
            return []
        }
        cancelHostTimer(.transferRound(session: session), app: app)
        var effects: [ModeEffect] = [endActivity]
        transfers.rounds[key] = nil
        for id in round.next { effects += finishedDelivery(id) }
        return effects
    }

    private func finishedEvents(_ r: TransferRecord, _ outcome: TransferOutcome) -> [ServiceEvent] {
        switch outcome {
        case .completed where r.job.kind == .download:
            // Written by the daemon (uid 0): handed to the app's own uid before it hears of it.
            if let uid = identities?.existingUID(app: r.job.bundleIdentifier) {
                _ = lchown(r.job.destination, uid, uid)
            }
            return [.urlSessionDidFinishDownloading(session: r.job.session, taskIdentifier: r.job.taskIdentifier, location: r.job.destination),
                    .urlSessionDidComplete(session: r.job.session, taskIdentifier: r.job.taskIdentifier, errorCode: nil, errorReason: nil)]
        case .completed:
            return [.urlSessionDidComplete(session: r.job.session, taskIdentifier: r.job.taskIdentifier, errorCode: nil, errorReason: nil)]
        case .failed(let code, let reason):
            return [.urlSessionDidComplete(session: r.job.session, taskIdentifier: r.job.taskIdentifier, errorCode: code, errorReason: reason)]
        case .cancelled:
            let answer: [ServiceEvent] = r.resumeDataRequested ? [.urlSessionResumeData(session: r.job.session, taskIdentifier: r.job.taskIdentifier, data: nil)] : []
            return answer + [.urlSessionDidComplete(session: r.job.session, taskIdentifier: r.job.taskIdentifier, errorCode: "cancelled", errorReason: "cancelled")]
        case .cancelledResumable(let resume):
            let data = ResumeData.encode(url: r.job.url, headers: r.job.headers, resume)
            return [.urlSessionResumeData(session: r.job.session, taskIdentifier: r.job.taskIdentifier, data: data),
                    .urlSessionDidComplete(session: r.job.session, taskIdentifier: r.job.taskIdentifier, errorCode: "cancelled", errorReason: "cancelled")]
        }
    }

    /// A service callback about transfers returned: delete a handed-over file, acknowledge a completion.
    func transferCallbackReturned(_ event: ServiceEvent, app: String) {
        switch event {
        case .urlSessionProgress(let session, let task, _, _):
            guard let id = transfers.id(app: app, session: session, task: task) else { return }
            transfers.progressInFlight.remove(id)
            if let newest = transfers.progressPending.removeValue(forKey: id) {
                deliverProgress(id, newest.done, newest.expected)
            }
        case .urlSessionDidFinishDownloading(_, _, let location):
            // As iOS: the temporary file is gone once the delegate returned (the app moved it or lost it).
            try? FileManager.default.removeItem(atPath: location)
        case .urlSessionDidComplete(let session, let task, _, _):
            if let id = transfers.id(app: app, session: session, task: task) {
                forget([id])
                roundProgressed(app: app, session: session, id: id)
            }
        default:
            break
        }
    }

    /// The daemon's restart backoff ran out (``Supervisor/TimerID/transferRestart``).
    func transferRestartDue() {
        handleTransferInput(.transferDaemonRestart)
    }

    /// The deadline of a session's events round ran out: the completion never came.
    func transferRoundTimedOut(app: String, session: String) {
        guard runtimes[app]?.machine.activities.contains("URLSession events \(session)") == true else { return }
        performMode([.kill(app: app, namespace: "RUNNINGBOARD", code: .backgroundURLSessionTimeout,
                           reason: "handleEventsForBackgroundURLSession(\(session)): the completion handler was not called within \(DurationText.format(configuration.profile.backgroundTask))")])
    }

    /// The app's process is gone; a user terminate cancels its transfers, as on iOS.
    func transfersAppExited(_ app: String, byUser: Bool) {
        // Progress callbacks that died with the process are not waited for.
        for (id, r) in transfers.records where r.job.bundleIdentifier == app { transfers.progressInFlight.remove(id) }
        transfers.rounds = transfers.rounds.filter { !$0.key.hasPrefix(app + "|") }
        guard byUser else {
            // Events that did not get through wait for the app to recreate its session.
            for (id, r) in transfers.records where r.job.bundleIdentifier == app && (r.stage == .delivering || r.stage == .nextRound) {
                transfers.records[id]?.stage = .pending
            }
            return
        }
        let ids = transfers.records.filter { $0.value.job.bundleIdentifier == app }.map(\.key)
        guard !ids.isEmpty else { return }
        forget(ids, acknowledge: false)
        _ = sendToDaemon(.cancelApp(bundleIdentifier: app))
        events.append(.service, app: app, cause: "terminated by the user: \(ids.count) background transfer(s) cancelled", time: now())
    }

    /// The app is uninstalled: its transfers are cancelled and its sessions forgotten.
    func transfersAppUninstalled(_ app: String) {
        let ids = transfers.records.filter { $0.value.job.bundleIdentifier == app }.map(\.key)
        for id in ids {
            if let job = transfers.records.removeValue(forKey: id)?.job {
                transfers.taskIndex.removeValue(forKey: TransferBrokerState.taskKey(app, job.session, job.taskIdentifier))
            }
        }
        transfers.rounds = transfers.rounds.filter { !$0.key.hasPrefix(app + "|") }
        transfers.sessions.removeValue(forKey: app)
        transfers.taskCounters = transfers.taskCounters.filter { !$0.key.hasPrefix(app + "|") }
        do { try store.deleteTransferState(bundleIdentifier: app) } catch { logger.error("could not forget \(app)'s transfers: \(error)") }
        if !ids.isEmpty {
            _ = sendToDaemon(.cancelApp(bundleIdentifier: app))
            events.append(.service, app: app, cause: "uninstalled: \(ids.count) background transfer(s) cancelled", time: now())
        }
    }

    /// Drops delivered (or cancelled) transfers from memory and the database, then lets the
    /// daemon forget them: a host that stops in between finds no record and acknowledges
    /// the daemon's repeated report then.
    private func forget(_ ids: [UInt64], acknowledge: Bool = true) {
        for id in ids {
            if let job = transfers.records.removeValue(forKey: id)?.job {
                transfers.taskIndex.removeValue(forKey: TransferBrokerState.taskKey(job.bundleIdentifier, job.session, job.taskIdentifier))
            }
            transfers.progressInFlight.remove(id)
            transfers.progressPending.removeValue(forKey: id)
        }
        do { try store.deleteTransfers(ids: ids) } catch { logger.error("could not forget transfers \(ids): \(error)") }
        if acknowledge { for id in ids { _ = sendToDaemon(.acknowledge(id: id)) } }
    }

    /// The app's URLSession requests; nil if not a transfer request.
    func transferRequest(_ request: ServiceRequest, from app: String) -> ServiceReply? {
        switch request {
        case .urlSessionCreate(var config):
            let timeout = config.timeoutIntervalForResource
            guard timeout.isFinite, timeout > 0 else {
                return .failed(code: "invalidArgument", reason: "timeoutIntervalForResource \(timeout) is not a number of seconds > 0")
            }
            config.timeoutIntervalForResource = min(timeout, Double(Duration.longestWait.components.seconds))
            transfers.sessions[app, default: [:]][config.identifier] = config
            do {
                try store.saveTransferSession(bundleIdentifier: app, config: config,
                                              lastTaskIdentifier: transfers.taskCounters["\(app)|\(config.identifier)"] ?? 0)
            } catch {
                return .failed(code: "cannotWriteToFile", reason: "the host could not record the session: \(error)")
            }
            let snapshots = snapshots(app, config.identifier)
            // Events that waited for the app to come back (sessionSendsLaunchEvents false, or a
            // launch that did not deliver them) are delivered now.
            let pending = transfers.records.filter { $0.value.job.bundleIdentifier == app && $0.value.job.session == config.identifier && $0.value.stage == .pending }
            if !pending.isEmpty {
                var effects: [ModeEffect] = []
                for (id, r) in pending.sorted(by: { $0.key < $1.key }) {
                    transfers.records[id]?.stage = .delivering
                    if let outcome = r.outcome {
                        effects += finishedEvents(r, outcome).map { .deliver(app: app, $0, wake: .ifRunning, because: "transfer events kept for the next launch") }
                    }
                }
                pendingModeEffects += effects
            }
            return .transferTasks(snapshots)
        case .urlSessionStartTask(let session, let kind, let url, let method, let headers, let uploadFile):
            let container = configuration.containersDirectory + "/" + app
            var upload: String?
            if kind == .upload {
                guard let file = uploadFile else { return .failed(code: "fileDoesNotExist", reason: "an upload task needs a file") }
                let resolved = URL(fileURLWithPath: file, relativeTo: URL(fileURLWithPath: container + "/")).standardizedFileURL.resolvingSymlinksInPath().path
                guard resolved.hasPrefix(container + "/") else {
                    return .failed(code: "noPermissionsToReadFile", reason: "upload files must be inside the app's container (\(file))")
                }
                guard FileManager.default.isReadableFile(atPath: resolved) else {
                    return .failed(code: "fileDoesNotExist", reason: "no readable file at \(file)")
                }
                upload = resolved
            }
            return queueTask(app: app, session: session, kind: kind, url: url, method: method, headers: headers, upload: upload, resume: nil)
        case .urlSessionResumeTask(let session, let data):
            let resume: (url: String, headers: [String: String], resume: TransferResume)
            switch ResumeData.decode(data, transfersDirectory: transfersDirectory(app)) {
            case .success(let decoded): resume = decoded
            case .failure(let problem): return .failed(code: "cannotDecodeRawData", reason: "downloadTask(withResumeData:): \(problem.reason)")
            }
            return queueTask(app: app, session: session, kind: .download, url: resume.url, method: "GET", headers: resume.headers,
                             upload: nil, resume: resume.resume)
        case .urlSessionCancel(let session, let task, let produceResumeData):
            guard let id = transfers.id(app: app, session: session, task: task), let r = transfers.records[id] else {
                return .refused(reason: "no task \(task) in \(session)")
            }
            if produceResumeData {
                transfers.records[id]?.resumeDataRequested = true
                if r.outcome == nil && r.job.kind == .download {
                    _ = sendToDaemon(.cancelProducingResumeData(id: id))
                    return .ok
                }
            }
            _ = sendToDaemon(.cancel(id: id))
            return .ok
        case .urlSessionTasks(let session):
            return .transferTasks(snapshots(app, session))
        case .urlSessionEventsCompleted(let session):
            pendingModeEffects += roundCompleted(app: app, session: session)
            return .ok
        default:
            return nil
        }
    }

    /// Where an app's downloads land until the delegate moves them (and partial files wait for a resume).
    private func transfersDirectory(_ app: String) -> String {
        configuration.containersDirectory + "/" + app + "/Library/Caches/com.apphost.transfers"
    }

    /// Records a new task of `session` (durably) and hands it to the daemon.
    private func queueTask(app: String, session: String, kind: TransferKind, url: String, method: String,
                           headers: [String: String], upload: String?, resume: TransferResume?) -> ServiceReply {
        guard let config = transfers.sessions[app]?[session] else {
            return .refused(reason: "no background session \"\(session)\" in this process (create it first)")
        }
        guard let scheme = URL(string: url)?.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            return .failed(code: "unsupportedURL", reason: "background sessions transfer http and https URLs only (\(url))")
        }
        // A daemon starting or restarting gets the job once it is ready (unaccepted
        // jobs are sent then); only a daemon that cannot run refuses.
        guard configuration.transferDaemon, transfers.unavailable == nil else {
            return .failed(code: "cannotConnectToHost", reason: transfers.unavailable ?? "the host runs without a transfer daemon")
        }
        let key = "\(app)|\(session)"
        let taskIdentifier = (transfers.taskCounters[key] ?? 0) + 1
        transfers.taskCounters[key] = taskIdentifier
        transfers.nextID += 1
        let id = transfers.nextID
        let dir = transfersDirectory(app)
        let container = configuration.containersDirectory + "/" + app
        let owner = identities?.existingUID(app: app).map { ProcessIdentity(uid: $0, gid: $0) }
        try? AppOwnership.makeDirectory(dir, below: container, identity: owner, mode: 0o700)
        let job = TransferJob(id: id, bundleIdentifier: app, session: session, taskIdentifier: taskIdentifier, kind: kind,
                              url: url, method: method, headers: headers, uploadFile: upload,
                              destination: dir + "/CFNetworkDownload_\(id).tmp", discretionary: config.isDiscretionary,
                              allowsCellularAccess: config.allowsCellularAccess, timeoutForResource: config.timeoutIntervalForResource,
                              created: Date().timeIntervalSince1970, resume: resume)
        // Durable in the host before the daemon or the app hears of it.
        do { try store.saveTransfer(job) } catch {
            return .failed(code: "cannotWriteToFile", reason: "the host could not record the task: \(error)")
        }
        transfers.records[id] = TransferRecord(job: job)
        transfers.index(job)
        // A daemon not ready yet gets it (after the device conditions) once it is.
        if transfers.ready { _ = sendToDaemon(.enqueue(job)) }
        let from = resume.map { " (resuming at byte \($0.bytes))" } ?? ""
        events.append(.service, app: app, cause: "\(kind.rawValue) task \(taskIdentifier) of \(session) queued: \(url)\(from)", time: now())
        return .transferTaskCreated(taskIdentifier: taskIdentifier)
    }

    private func snapshots(_ app: String, _ session: String) -> [TransferTaskSnapshot] {
        transfers.records.values.filter { $0.job.bundleIdentifier == app && $0.job.session == session }
            .sorted { $0.job.taskIdentifier < $1.job.taskIdentifier }
            .map { TransferTaskSnapshot(taskIdentifier: $0.job.taskIdentifier, kind: $0.job.kind, url: $0.job.url,
                                        state: $0.outcome == nil ? $0.state : .completed, bytesDone: $0.bytesDone, bytesExpected: $0.bytesExpected) }
    }
}

/// Reads the daemon's frames and forwards them to the supervisor's input.
final class TransferDaemonHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let input: AsyncStream<Supervisor.Input>.Continuation
    private let generation: UInt64
    private var decoder = FrameDecoder()

    init(input: AsyncStream<Supervisor.Input>.Continuation, generation: UInt64) {
        self.input = input
        self.generation = generation
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        decoder.append(buffer.readableBytesView)
        do {
            while let payload = try decoder.next() {
                input.yield(.transferEvent(try Frame.decode(TransferEvent.self, from: payload), generation: generation))
            }
        } catch {
            // A daemon that breaks the protocol is restarted (closing makes it exit).
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

extension Supervisor {
    /// The transfer daemon's pid while it runs (for status and tests).
    public func transferDaemonPID() -> Int32? { transfers.child?.pid }

    /// Waits until the transfer daemon has said it is ready (tests, `status`).
    public func transferDaemonIsReady() -> Bool { transfers.ready }
}
