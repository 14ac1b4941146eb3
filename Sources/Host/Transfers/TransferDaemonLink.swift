import AppHostProtocol
import AppHostSystem
import Foundation
import HostConfig
import NIOCore
import NIOPosix
import Plugins
import Synchronization
import SystemPackage

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
/// daemon process (started, supervised, restarted with backoff) and its channel, around
/// the ``TransferBroker`` value that decides what the apps and the daemon hear.
struct TransferBrokerState {
    var broker = TransferBroker()
    var generation: UInt64 = 0
    var child: ChildProcess?
    var channel: (any Channel)?
    /// Writes to the daemon's socket from the supervisor's thread (see ``SocketWriter``):
    /// no wake of the channel's event loop for each batch of requests.
    var writer: SocketWriter?
    /// The apps' transfer folders, reached through no link an app planted (see
    /// ``AppFiles``): the hand-over and removal of delivered downloads. Made on first use.
    var files: AppFiles?
    /// Frames for the daemon made during a list of effects, not written yet: at the list's
    /// end, or, when only `acknowledge`s wait, once the deletes due are written.
    var outgoing: [UInt8] = []
    /// How long to wait before starting a daemon that died (see ``RestartBackoff``).
    var backoff = RestartBackoff()
    var stopping = false
    /// Virtual clock: the daemon is being started and has not said `ready` (its turn lasts
    /// until it has; see ``Supervisor/turnBusy(_:)``).
    var daemonStarting = false
    /// What the daemon said before the host took in its start (the channel's handler reads
    /// as soon as the socket is attached, and its `ready` can be queued ahead of the start):
    /// handled right after "transfer daemon started", so the log always reads started, then
    /// ready, whatever the threads did.
    var saidBeforeStarted: [TransferEvent] = []
    var unavailable: String?
    var exitWaiters: [CheckedContinuation<Void, Never>] = []
    /// The spawn and attach in progress: a shutdown waits for it, so it never tears the
    /// event loops down under a half-made channel or leaves a daemon behind.
    var starting: Task<Void, Never>?
    /// Effects being carried out: a batch write asked for meanwhile waits for the end
    /// of the list (its replies then follow what the list said).
    var performing = false
    var saveDue = false
    /// A write of the waiting batch is scheduled for when the input stream has drained.
    var saveScheduled = false
    /// Delivered transfers to delete from the database together, in one transaction (see
    /// ``Supervisor/transferStepEnded()``); their `acknowledge`s wait in `outgoing` until
    /// then, so the daemon never forgets a transfer the host's database still has.
    var deletesDue: [TransferID] = []
    /// The deadline that writes `deletesDue` is armed (``TimerID/transferForget``).
    var deletesScheduled = false
    /// How long delivered transfers wait to be deleted and acknowledged together.
    static let forgetWindow: Duration = .milliseconds(20)
    /// Frames other than `acknowledge` wait in the daemon's channel: they go out at the
    /// end of the list of effects, with the deletes due before them.
    var urgentDaemonFrames = false
    /// Replies to apps made inside a list of effects, per app, sent together at its end
    /// (a written batch answers hundreds of `resume()`s: one `send(2)`, not one each),
    /// or before anything else the host sends that app.
    var replyBuffers: [BundleID: [UInt8]] = [:]
    /// Largest batch to keep waiting: past it the batch is written at once.
    static let batchLimit = 512
    /// Batches being written on the database's queue, oldest first, by number; their
    /// answers are given in this order (see ``Supervisor/saveTransferBatch(ordered:)``).
    var batchesInFlight: [(number: UInt64, batch: TransferBroker.Unsaved)] = []
    var nextBatch: UInt64 = 0
    /// Each written batch's outcome (nil: written; else why not), set on the writer's queue.
    let batchOutcomes = TransferBatchOutcomes()
    /// Virtual clock: jobs sent to the daemon and not accepted yet (its turn lasts
    /// until they are: see ``TurnOrder``).
    var awaitingAccept: Set<TransferID> = []
}

/// What became of the batches written on the database's queue (see `batchesInFlight`).
final class TransferBatchOutcomes: Sendable {
    private let outcomes = Mutex<[UInt64: String?]>([:])

    func set(_ number: UInt64, _ failure: String?) {
        outcomes.withLock { $0[number] = .some(failure) }
    }

    /// The outcome of `number`, taken out; nil while it is not known.
    func take(_ number: UInt64) -> String?? {
        outcomes.withLock { $0.removeValue(forKey: number) }
    }
}

/// The adapter: the supervisor's entry points for transfers, which feed the broker and
/// carry out its effects, and the daemon process's supervision.
extension Supervisor {
    static let transferDaemonName = "apphost-transferd"

    /// Loads the sessions and undelivered transfers recorded before a host restart (rows
    /// of apps no longer installed are deleted).
    static func restoredTransfers(store: Store, installed: Set<BundleID>, start: Date) throws -> TransferBrokerState {
        let restored = TransferBroker.restored(sessions: try store.transferSessions(), jobs: try store.transfers(),
                                               installed: installed, start: start)
        var broker = restored.broker
        try store.deleteTransfers(ids: restored.orphans)
        try store.deleteCancelledTransfers(ids: broker.restoreCancelled(try store.cancelledTransfers(), installed: installed))
        return TransferBrokerState(broker: broker)
    }

    /// What the broker needs to know of the apps now.
    /// The closures read the actor's state when called (synchronously, on the actor, while
    /// the broker handles an input): a copy of the process table held meanwhile would make every
    /// change of a runtime during the effects copy its tables.
    var transferWorld: TransferBroker.World {
        TransferBroker.World(
            isInstalled: { [unowned self] app in assumeIsolated { $0.apps[app] != nil } },
            state: { [unowned self] app in assumeIsolated { $0.processes[app]?.machine.state ?? .notRunning } },
            isRunningCode: { [unowned self] app in assumeIsolated { $0.processes[app]?.machine.isRunningCode == true } },
            unavailable: configuration.transferDaemon ? transfers.unavailable : (transfers.unavailable ?? "the host runs without a transfer daemon"),
            containersDirectory: configuration.containersDirectory)
    }

    // MARK: - Entry points

    /// The app's URLSession request; false if it is not a transfer request. The reply
    /// is sent here (at once, or once a new session or task is written).
    func transferRequest(_ request: ServiceRequest, id requestID: UInt64, from app: BundleID) -> Bool {
        guard TransferBroker.handles(request) else { return false }
        // On demand: the first request starts the daemon (its start and `ready` take the
        // daemon's turn, so a scenario's log has them at the same place every run).
        if configuration.transferDaemonOnDemand, transfers.child == nil, transfers.starting == nil, !transfers.daemonStarting,
           transfers.unavailable == nil {
            startTransferDaemon()
        }
        switch request {
        case .urlSessionStartTask, .urlSessionResumeTask, .urlSessionCreate:
            break
        default:
            // Answers in the order asked; a cancel or a listing sees written tasks only.
            saveTransferBatch(ordered: true)
        }
        var request = request
        if case .urlSessionStartTask(let session, .upload, let url, let method, let headers, let file?) = request {
            let container = configuration.containersDirectory + "/" + app.rawValue
            let resolved = URL(fileURLWithPath: file, relativeTo: URL(fileURLWithPath: container + "/")).standardizedFileURL.resolvingSymlinksInPath().path
            guard resolved.hasPrefix(container + "/") else {
                send(app, .reply(id: requestID, reply: .service(.failed(code: "noPermissionsToReadFile", reason: "upload files must be inside the app's container (\(file))"))))
                return true
            }
            guard FileManager.default.isReadableFile(atPath: resolved) else {
                send(app, .reply(id: requestID, reply: .service(.failed(code: "fileDoesNotExist", reason: "no readable file at \(file)"))))
                return true
            }
            request = .urlSessionStartTask(session: session, kind: .upload, url: url, method: method, headers: headers, uploadFile: resolved)
        }
        performTransfer(transfers.broker.request(request, id: requestID, from: app, world: transferWorld))
        return true
    }

    /// A service callback about transfers returned.
    func transferCallbackReturned(_ event: ServiceEvent, app: BundleID) {
        performTransfer(transfers.broker.callbackReturned(event, app: app, world: transferWorld))
    }

    /// The daemon's restart backoff ran out (``Supervisor/TimerID/transferRestart``).
    func transferRestartDue() {
        handleTransferInput(.transferDaemonRestart)
    }

    /// The deadline of a session's events round ran out: the completion never came.
    func transferRoundTimedOut(app: BundleID, session: SessionIdentifier) {
        let held = processes[app]?.machine.activities.contains(TransferBroker.activityName(session)) == true
        performTransfer(transfers.broker.roundTimedOut(app: app, session: session, activityHeld: held,
                                                       timeout: DurationText.format(configuration.profile.backgroundTask)))
    }

    /// The suspended app runs again: transfer events held while it was suspended reach it.
    func transfersAppRunsAgain(_ app: BundleID) {
        performTransfer(transfers.broker.appRunsAgain(app))
    }

    /// The app came to the front: the events of its transfers that finished while it was
    /// away (waiting for their sessions' other tasks) reach it now.
    func transfersAppCameToFront(_ app: BundleID) {
        performTransfer(transfers.broker.appCameToFront(app, world: transferWorld))
    }

    /// The app left the front: events not yet sent to it wait for their sessions' tasks
    /// to be complete (iOS's rule for waking an app for a background session).
    func transfersAppLeftFront(_ app: BundleID) {
        performTransfer(transfers.broker.appLeftFront(app, world: transferWorld))
    }

    /// The app's process is gone; a user terminate cancels its transfers, as on iOS.
    func transfersAppExited(_ app: BundleID, byUser: Bool) {
        saveTransferBatch(ordered: true)
        performTransfer(transfers.broker.appExited(app, byUser: byUser))
    }

    /// The system cancels `app`'s background transfers for `reason` (the entry point for
    /// Background App Refresh turned off: `.backgroundUpdatesDisabled`, `only: { $0.discretionary }`):
    /// each is reported to the app with `didCompleteWithError` (`NSURLErrorCancelled` and
    /// `NSURLErrorBackgroundTaskCancelledReasonKey`), at once if it runs code, else when it
    /// next makes the session; remembered in the database until then. `only` nil: every
    /// transfer of the app (a user terminate does this through ``transfersAppExited(_:byUser:)``).
    func transfersCancelledBySystem(_ app: BundleID, reason: BackgroundTaskCancelledReason, only include: ((TransferJob) -> Bool)? = nil) {
        saveTransferBatch(ordered: true)
        performTransfer(transfers.broker.systemCancelled(app, reason: reason, only: include, world: transferWorld))
    }

    /// The app is uninstalled: its transfers are cancelled and its sessions forgotten.
    func transfersAppUninstalled(_ app: BundleID) {
        saveTransferBatch(ordered: true)
        performTransfer(transfers.broker.appUninstalled(app))
    }

    // MARK: - Effects

    /// Carries out the broker's effects in order.
    func performTransfer(_ effects: [TransferBroker.Effect]) {
        let outer = !transfers.performing
        transfers.performing = true
        for effect in effects { performTransfer(effect) }
        guard outer else { return }
        if transfers.saveDue || transfers.broker.unsaved.jobs.count >= TransferBrokerState.batchLimit {
            transfers.saveDue = false
            // On the real clock the batch waits until the inputs already queued (an app's
            // burst of resumes) are handled: one transaction, one answer each. On the
            // virtual clock, at once (a settled host has nothing waiting).
            if configuration.clock == .virtual || transfers.broker.unsaved.jobs.count >= TransferBrokerState.batchLimit {
                saveTransferBatch()
            } else if !transfers.saveScheduled {
                transfers.saveScheduled = true
                Task { self.saveScheduledTransferBatch() }
            }
        }
        if !transfers.outgoing.isEmpty {
            if transfers.deletesDue.isEmpty {
                transfers.urgentDaemonFrames = false
                flushToDaemon()
            } else if transfers.urgentDaemonFrames {
                flushTransferDeletes()
            }
        }
        transfers.performing = false
        let replies = transfers.replyBuffers
        transfers.replyBuffers = [:]
        for (app, bytes) in replies { sendFrames(app, bytes) }
    }

    private func saveScheduledTransferBatch() {
        transfers.saveScheduled = false
        saveTransferBatch()
    }

    private func performTransfer(_ effect: TransferBroker.Effect) {
        switch effect {
        case .daemon(let request):
            sendToDaemon(request)
        case .sendConditions:
            let device = modes.deviceState
            sendToDaemon(.conditions(pluggedIn: device.pluggedIn, network: device.network))
        case .reply(let app, let request, let reply):
            let message = HostMessage.reply(id: request, reply: .service(reply))
            if transfers.performing, let frame = try? Frame.encode(message) {
                transfers.replyBuffers[app, default: []] += frame
            } else {
                send(app, message)
            }
        case .mode(let effect):
            performMode([effect])
        case .progress(let app, let event):
            feed(app, .deliver(event, wake: false, launch: nil))
        case .startRoundTimer(let app, let session):
            startHostTimer(.transferRound(session: session), app: app, after: configuration.profile.duration(.backgroundTask))
        case .cancelRoundTimer(let app, let session):
            cancelHostTimer(.transferRound(session: session), app: app)
        case .save:
            transfers.saveDue = true
        case .deleteTransfers(let ids):
            transfers.deletesDue += ids
            if !scope.inInput { flushTransferDeletes() }
        case .saveCancelled(let entries, let ids, let dropped):
            do {
                try store.saveCancelledTransfers(entries, transfers: ids, dropped: dropped)
            } catch {
                logger.error("could not record \(entries.count) cancelled transfer(s): \(error)")
            }
        case .deleteCancelled(let ids):
            do { try store.deleteCancelledTransfers(ids: ids) } catch { logger.error("could not forget cancelled transfers \(ids): \(error)") }
        case .deleteAppState(let app):
            do { try store.deleteTransferState(bundleIdentifier: app) } catch { logger.error("could not forget \(app)'s transfers: \(error)") }
        case .prepareDirectory(let app):
            // Through `AppFiles`: the app owns the folders on the way (`Library`,
            // `Caches`), and one it swapped for a link must not have the host (root) make
            // a folder, and give it to the app, wherever the link points.
            let owner = identities?.existingUID(app: app).map { (uid: $0, gid: $0) }
            let folder = TransferBroker.transfersDirectory(app, containers: configuration.containersDirectory)
            if let error = transferFiles().makeFolders(folder, mode: 0o700, owner: owner) {
                logger.warning("could not make \(folder): \(error)")
            }
        case .handOver(let path, let app):
            // Written by the daemon (uid 0): handed to the app's own uid before it hears of
            // it. Through `AppFiles`: a folder on the way the app swapped for a link (to
            // another app's transfers) is not followed, and the folder is looked up once.
            if let uid = identities?.existingUID(app: app) { transferFiles().changeOwner(path, uid: uid, gid: uid) }
        case .removeFile(let path):
            // A file the daemon wrote and the app left: unlinkat in the kept folder, not
            // FileManager's removeItem (a stat and a directory walk, a tenth of the host's
            // time per transfer). What the app put there instead (a folder) stays.
            transferFiles().unlink(path)
        case .note(let app, let pid, let text, let fields):
            events.append(.service, app: app, pid: pid, cause: text, fields: fields, time: now())
        }
    }

    /// The apps' transfer folders (``TransferBrokerState/files``), below the containers
    /// folder; should that folder not open, paths as given (the last component still not
    /// followed).
    private func transferFiles() -> AppFiles {
        if let files = transfers.files { return files }
        let files = (try? AppFiles(root: configuration.containersDirectory)) ?? AppFiles()
        transfers.files = files
        return files
    }

    /// The end of a step: delivered transfers are deleted, and acknowledged to the daemon,
    /// together, within ``TransferBrokerState/forgetWindow`` (a group commit: on the real
    /// clock a busy host gathers the deliveries of many steps into one transaction and one
    /// write to the daemon; nothing waits for an acknowledgement but the daemon's row, and
    /// a host that stops first finds no record and acknowledges the daemon's repeated
    /// report then). At once on the virtual clock, when a batch is full, or when other
    /// frames wait for the daemon.
    func transferStepEnded() {
        guard !transfers.deletesDue.isEmpty || !transfers.outgoing.isEmpty else { return }
        if configuration.clock == .virtual || transfers.urgentDaemonFrames
            || transfers.deletesDue.count >= TransferBrokerState.batchLimit {
            flushTransferDeletes()
        } else if !transfers.deletesScheduled {
            transfers.deletesScheduled = true
            startHostTimer(.transferForget, app: nil, after: TransferBrokerState.forgetWindow)
        }
    }

    /// The window of ``transferStepEnded()`` ran out.
    func transferForgetDue() {
        transfers.deletesScheduled = false
        flushTransferDeletes()
    }

    /// Deletes the delivered transfers due (one transaction for all of them), then
    /// flushes what waits in the daemon's channel: their `acknowledge`s go out after the
    /// rows are gone. Also called before anything else is flushed to the daemon.
    func flushTransferDeletes() {
        transfers.urgentDaemonFrames = false
        if transfers.deletesScheduled {
            transfers.deletesScheduled = false
            cancelHostTimer(.transferForget, app: nil)
        }
        if !transfers.deletesDue.isEmpty {
            let ids = transfers.deletesDue
            transfers.deletesDue.removeAll(keepingCapacity: ids.count < 4096)
            do { try store.deleteTransfers(ids: ids) } catch { logger.error("could not forget \(ids.count) transfer(s): \(error)") }
        }
        flushToDaemon()
    }

    /// Writes the frames made for the daemon so far.
    private func flushToDaemon() {
        guard !transfers.outgoing.isEmpty else { return }
        let bytes = transfers.outgoing
        transfers.outgoing.removeAll(keepingCapacity: bytes.count < Int(Allocator.mmapThreshold))
        writeToDaemon(bytes)
    }

    private func writeToDaemon(_ bytes: [UInt8]) {
        guard let channel = transfers.channel else { return }
        if let writer = transfers.writer {
            writer.send(bytes, else: channel)
        } else {
            channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
        }
    }

    /// Writes the broker's waiting sessions and tasks in one transaction, then answers them.
    /// On the real clock the write (and the encoding of the rows) runs on the database's
    /// queue and the answers come with `.transferBatchSaved`: the supervisor takes the next
    /// requests meanwhile, which make the next batch (a group commit). `ordered` (a
    /// cancel, a listing, an app's exit or uninstall) first waits for the batches being
    /// written and gives their answers, then writes the waiting batch at once: so answers
    /// keep the order of the questions and a cancel never reaches the daemon before its
    /// job. On the virtual clock every batch is written at once, so an advance finds it done.
    func saveTransferBatch(ordered: Bool = false) {
        if ordered { finishBatchesInFlight() }
        guard !transfers.broker.unsaved.isEmpty else { return }
        let batch = transfers.broker.takeUnsaved()
        let sessions = batch.sessions.map { Store.TransferSessionRow(bundleIdentifier: $0.app, config: $0.config, lastTaskIdentifier: $0.lastTaskIdentifier) }
        let jobs = batch.jobs.map(\.job)
        guard configuration.clock == .real, !ordered else {
            do {
                try store.saveTransferBatch(sessions: sessions, jobs: jobs)
                performTransfer(transfers.broker.saved(batch))
            } catch {
                performTransfer(transfers.broker.saveFailed(batch, reason: "\(error)", world: transferWorld))
            }
            return
        }
        transfers.nextBatch += 1
        let (number, input, outcomes) = (transfers.nextBatch, self.input, transfers.batchOutcomes)
        transfers.batchesInFlight.append((number, batch))
        store.saveTransferBatchAsync(sessions: sessions, jobs: jobs) { error in
            outcomes.set(number, error.map { "\($0)" })
            input.yield(.transferBatchSaved(number: number))
        }
    }

    /// Gives the answers of the batches written so far, oldest first, up to the first
    /// whose outcome is not known yet.
    func answerWrittenBatches() {
        while let first = transfers.batchesInFlight.first, let outcome = transfers.batchOutcomes.take(first.number) {
            transfers.batchesInFlight.removeFirst()
            if let failure = outcome {
                performTransfer(transfers.broker.saveFailed(first.batch, reason: failure, world: transferWorld))
            } else {
                performTransfer(transfers.broker.saved(first.batch))
            }
        }
    }

    /// Waits for every batch being written (GRDB's writer queue is serial: a barrier runs
    /// after them and their completions) and gives their answers.
    private func finishBatchesInFlight() {
        guard !transfers.batchesInFlight.isEmpty else { return }
        do { try store.flush() } catch { logger.error("could not flush \(configuration.databasePath): \(error)") }
        answerWrittenBatches()
    }

    /// Sends `request` to the daemon; inside a list of effects the channel is flushed
    /// once at its end (ten thousand enqueues are not ten thousand writes).
    @discardableResult
    func sendToDaemon(_ request: TransferRequest) -> Bool {
        guard transfers.channel != nil else { return false }
        if takesTurns, case .enqueue(let job) = request {
            transfers.awaitingAccept.insert(job.id)
            expectTurn(.daemon)
        }
        do {
            let frame = try Frame.encode(request)
            if transfers.performing {
                transfers.outgoing += frame
                if case .acknowledge = request {} else { transfers.urgentDaemonFrames = true }
            } else {
                if !transfers.deletesDue.isEmpty || !transfers.outgoing.isEmpty { flushTransferDeletes() }
                writeToDaemon(frame)
            }
            return true
        } catch {
            logger.error("could not encode \(request): \(error)")
            return false
        }
    }
}
