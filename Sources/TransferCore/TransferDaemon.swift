import AppHostProtocol
import AppHostSystem
import AsyncHTTPClient
import DequeModule
import Foundation
import HeapModule
import NIOCore
import NIOPosix
import NIOSSL
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's settings: those of its command line (``init(_:)``, from `TransferDaemonOptions`)
/// and those no option names (tests set them).
public struct TransferDaemonConfiguration: Sendable {
    /// Holds `transfers.sqlite`.
    public var stateDirectory: String
    /// The host's containers folder (`--containers`): every file the daemon writes,
    /// reads or moves must lie below it, reached through no symbolic link (see
    /// ``AppFiles``). nil: paths are used as given (tests, a daemon on its own), the
    /// last component still never followed.
    public var containersDirectory: String?
    /// A PEM file of extra trusted CAs (tests).
    public var extraCAFile: String?
    /// First retry delay in seconds; doubles each attempt, capped at `retryCap`.
    public var retryBase: Double = 1
    public var retryCap: Double = 300
    /// Failed attempts before a transfer fails for good.
    public var maxAttempts: Int = 10
    public var perHostLimit: Int = 4
    public var globalLimit: Int = 16
    /// Received downloads (each an open descriptor) waiting for their batch to be synced,
    /// moved and recorded, at most; past this no new attempt starts until a batch is done.
    public var maxFinishing: Int = 256
    /// A received download waits up to this long (seconds) for others to be finished
    /// with it in one batch: one hand-over to the finisher's thread, one transaction,
    /// one report to the host (which then delivers them in one step). Without it each
    /// small download was a batch of its own on a fast disk. A batch of `finishBatch`
    /// starts at once; 0 turns the wait off.
    public var finishGathering: Double = 0.010
    public var finishBatch: Int = 128
    /// Progress is committed (and reported) at least this often.
    public var commitBytes: Int64 = 512 * 1024
    /// Read timeout of one connection (no byte for this long: retry).
    public var readTimeout: Double = 60
    public var connectTimeout: Double = 30
    /// The device conditions at start (the host passes its own; later changes come as requests).
    public var pluggedIn = false
    public var network: DeviceNetwork = .wifi
    /// Where "now" and the daemon's timer come from (a test passes its own).
    public var clock: any TransferClock = SystemTransferClock()

    public init(stateDirectory: String) {
        self.stateDirectory = stateDirectory
    }
}

/// The transfer daemon: queue, scheduler and host protocol.
public actor TransferDaemon {
    enum StopReason { case cancelled, cancelledForResume, timedOut, shutdown, paused }

    struct Entry {
        var job: TransferJob
        var state: TransferState
        var bytesDone: Int64
        var bytesExpected: Int64?
        var attempts: Int
        var nextAttempt: Double
        var outcome: TransferOutcome?
        var waitReason: String?
        let hostKey: String
        /// Nothing stored to resume from (a new job no attempt has touched): the attempt
        /// need not read its resume point from the database.
        var fresh = false
    }

    struct Running {
        var task: Task<Void, Never>
        var stop: StopReason?
    }

    /// A time-ordered reminder in one of the heaps: checked against the entry when it
    /// comes due (an entry that moved on since leaves a stale reminder, skipped then).
    struct Due: Comparable {
        let at: Double
        let id: TransferID
        static func < (a: Due, b: Due) -> Bool { (a.at, a.id) < (b.at, b.id) }
    }

    let config: TransferDaemonConfiguration
    let store: TransferStore
    /// The apps' files, reached through no planted link.
    let files: AppFiles
    private let link: HostLink
    private let client: HTTPClient
    var entries: [TransferID: Entry] = [:]
    var running: [TransferID: Running] = [:]
    var perHost: [String: Int] = [:]
    // The scheduler's queues: an unfinished transfer that is not running is runnable (in
    // its host's queue, oldest first), waiting for its retry (`retries`), or blocked by
    // the device conditions (in neither: a change of conditions places everything
    // again). An enqueue or a finished attempt costs O(log n), not a walk over the
    // whole queue (which made 10,000 queued transfers quadratic).
    var runnable: [String: Deque<TransferID>] = [:]
    var retries = Heap<Due>()
    /// Each unfinished transfer's resource deadline.
    var deadlines = Heap<Due>()
    var pluggedIn = false
    var network: DeviceNetwork = .wifi
    var wakeTimer: (any TransferTimer)?
    var wakeAt: Double?
    var shuttingDown = false
    /// Received downloads from their last byte until their batch is recorded: waiting
    /// in `received`, or in the batch `finisherTask` is finishing. They hold no
    /// connection slot; at `maxFinishing` of them (open descriptors) no new attempt
    /// starts (a disk slower than the network must not pile up descriptors).
    var finishing: Set<TransferID> = []
    var received: [(id: TransferID, file: ReceivedDownload)] = []
    var finisherTask: Task<Void, Never>?
    /// The end of the wait for more received downloads (see `finishGathering`).
    var gatherTimer: Scheduled<Void>?
    let finisherPool: NIOThreadPool
    /// Events of the current turn, written in one go at its end (see `turn`).
    private var outbox: [TransferEvent] = []
    private var collecting = false

    /// Runs the daemon on descriptor `fd` until it reaches EOF; returns after every transfer stopped cleanly.
    public static func run(configuration: TransferDaemonConfiguration, fd: Int32) async throws {
        signal(SIGPIPE, SIG_IGN)
        // A file-size limit must show as EFBIG from write(2), not kill the daemon.
        signal(SIGXFSZ, SIG_IGN)
        try FileManager.default.createDirectory(atPath: configuration.stateDirectory, withIntermediateDirectories: true)
        let store = try TransferStore(path: configuration.stateDirectory + "/transfers.sqlite")
        let files = try AppFiles(root: configuration.containersDirectory)
        let link = HostLink(fd: fd)
        var tls = TLSConfiguration.makeClientConfiguration()
        if let ca = configuration.extraCAFile {
            tls.additionalTrustRoots = [.file(ca)]
        }
        var clientConfig = HTTPClient.Configuration(
            tlsConfiguration: tls,
            redirectConfiguration: .follow(max: 10, allowCycles: false),
            timeout: .init(connect: .milliseconds(Int64(configuration.connectTimeout * 1000)),
                           read: .milliseconds(Int64(configuration.readTimeout * 1000))))
        clientConfig.connectionPool = .init(idleTimeout: .seconds(30),
                                            concurrentHTTP1ConnectionsPerHostSoftLimit: configuration.perHostLimit)
        // The daemon retries with its own backoff (and a failed TLS trust check must not
        // be retried at all): a failed connection fails the attempt at once.
        clientConfig.connectionPool.retryConnectionEstablishment = false
        clientConfig.decompression = .disabled
        // No spans: the daemon exports no traces, and AsyncHTTPClient otherwise named a
        // span (a string interpolation) for every request, on the daemon's one loop.
        clientConfig.tracing.tracer = nil
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: clientConfig)
        let finisherPool = NIOThreadPool(numberOfThreads: 1)
        finisherPool.start()
        var configuration = configuration
        configuration.maxFinishing = finishingBound(configuration.maxFinishing, openFileLimit: openFileLimit())
        let daemon = TransferDaemon(config: configuration, store: store, files: files, link: link, client: client, finisherPool: finisherPool)
        do {
            try await daemon.start()
        } catch {
            try? await client.shutdown()
            try? await finisherPool.shutdownGracefully()
            throw error
        }
        for await batch in link.requests() {
            await daemon.handle(batch)
        }
        await daemon.shutdown()
        try? await client.shutdown()
        try? await finisherPool.shutdownGracefully()
    }

    private init(config: TransferDaemonConfiguration, store: TransferStore, files: AppFiles, link: HostLink, client: HTTPClient,
                 finisherPool: NIOThreadPool) {
        self.config = config
        self.store = store
        self.files = files
        self.link = link
        self.client = client
        self.finisherPool = finisherPool
        pluggedIn = config.pluggedIn
        network = config.network
    }

    var transferrer: Transferrer {
        Transferrer(client: client, store: store, files: files, link: link, commitBytes: config.commitBytes, clock: config.clock) { [weak self] id, done, expected in
            await self?.progress(id: id, done: done, expected: expected)
        }
    }

    private func start() throws {
        for row in try store.loadAll() {
            entries[row.job.id] = Entry(
                job: row.job, state: row.state, bytesDone: row.bytesDone,
                bytesExpected: row.bytesExpected, attempts: row.attempts, nextAttempt: row.nextAttempt,
                outcome: row.outcome, waitReason: nil, hostKey: Transferrer.hostKey(row.job.url))
        }
        let unfinished = entries.values.filter { $0.state != .finished }.count
        turn {
            send(.ready(pid: getpid(), unfinished: unfinished))
            for id in entries.keys.sorted() {
                guard let e = entries[id] else { continue }
                if e.state == .finished, let outcome = e.outcome {
                    send(.finished(id: id, outcome: outcome))
                } else {
                    deadlines.insert(Due(at: e.job.created + e.job.timeoutForResource, id: id))
                    place(id)
                }
            }
        }
        wake()
    }

    // MARK: Events

    /// Runs `body` (synchronous: one turn of the actor) and writes the events it sent
    /// in order, with one write: ten thousand accepts or a batch of finishes are not
    /// ten thousand system calls. Nested turns write once, at the outer end.
    func turn(_ body: () -> Void) {
        if collecting { return body() }
        collecting = true
        body()
        collecting = false
        let events = outbox
        outbox = []
        link.send(events)
    }

    /// Sends `event` to the host: at the end of the current turn, or now outside one.
    func send(_ event: TransferEvent) {
        if collecting { outbox.append(event) } else { link.send(event) }
    }

    // MARK: Requests

    func handle(_ request: TransferRequest) {
        switch request {
        case .enqueue(let job):
            enqueue(job)
        case .cancel(let id):
            cancel(id)
        case .cancelProducingResumeData(let id):
            cancel(id, keepingPartial: true)
        case .cancelApp(let bundle):
            for id in entries.keys.sorted() where entries[id]?.job.bundleIdentifier == bundle {
                cancel(id)
            }
        case .conditions(let plugged, let net):
            pluggedIn = plugged
            network = net
            conditionsChanged()
        case .list:
            let list = entries.keys.sorted().compactMap { id -> TransferStatus? in
                guard let e = entries[id] else { return nil }
                return TransferStatus(job: e.job, state: e.state, bytesDone: e.bytesDone,
                                      bytesExpected: e.bytesExpected, outcome: e.outcome)
            }
            send(.transfers(list))
        case .acknowledge(let id):
            guard let e = entries[id] else { return }
            guard e.state == .finished else {
                send(.error("acknowledge \(id): transfer not finished"))
                return
            }
            do {
                try store.delete(ids: [id])
                entries[id] = nil
            } catch {
                send(.error("acknowledge \(id): \(error)"))
            }
        }
    }

    /// The requests of one read from the host, in order: runs of enqueues are
    /// committed in one transaction, runs of acknowledgements deleted in one.
    func handle(_ batch: [TransferRequest]) {
        turn { handleInOrder(batch) }
    }

    private func handleInOrder(_ batch: [TransferRequest]) {
        var i = 0
        while i < batch.count {
            switch batch[i] {
            case .enqueue:
                var jobs: [TransferJob] = []
                while i < batch.count, case .enqueue(let job) = batch[i] {
                    jobs.append(job)
                    i += 1
                }
                enqueue(jobs)
            case .acknowledge:
                var ids: [TransferID] = []
                while i < batch.count, case .acknowledge(let id) = batch[i] {
                    ids.append(id)
                    i += 1
                }
                acknowledge(ids)
            default:
                handle(batch[i])
                i += 1
            }
        }
    }

    private func acknowledge(_ ids: [TransferID]) {
        var finished: [TransferID] = []
        for id in ids {
            guard let e = entries[id] else { continue }
            guard e.state == .finished else {
                send(.error("acknowledge \(id): transfer not finished"))
                continue
            }
            finished.append(id)
        }
        guard !finished.isEmpty else { return }
        do {
            try store.delete(ids: finished)
            for id in finished { entries[id] = nil }
        } catch {
            send(.error("acknowledge \(finished.map(String.init).joined(separator: ", ")): \(error)"))
        }
    }

    private func enqueue(_ job: TransferJob) {
        enqueue([job])
    }

    /// Queues new jobs, committed in one transaction before any is accepted.
    private func enqueue(_ jobs: [TransferJob]) {
        var fresh: [TransferJob] = []
        for job in jobs {
            if let known = entries[job.id] {
                // A restarted host offers every transfer it has not delivered: one already
                // here is accepted again (and reported again if it finished).
                guard known.job.url == job.url, known.job.bundleIdentifier == job.bundleIdentifier else {
                    send(.error("enqueue \(job.id): duplicate id for another transfer"))
                    continue
                }
                send(.accepted(id: job.id))
            } else {
                fresh.append(job)
            }
        }
        guard !fresh.isEmpty else { return }
        let inserted: [Bool]
        do {
            inserted = try store.insert(fresh)
        } catch {
            for job in fresh { send(.error("enqueue \(job.id): \(error)")) }
            return
        }
        for (job, isNew) in zip(fresh, inserted) {
            guard isNew else {
                send(.error("enqueue \(job.id): duplicate id"))
                continue
            }
            accept(job)
        }
    }

    /// A job committed to the store: it is queued, and accepted.
    private func accept(_ job: TransferJob) {
        entries[job.id] = Entry(job: job, state: .queued, bytesDone: 0, bytesExpected: nil, attempts: 0,
                                nextAttempt: 0, outcome: nil, waitReason: nil, hostKey: Transferrer.hostKey(job.url),
                                fresh: job.resume == nil)
        if let resume = job.resume, job.kind == .download {
            adoptPartial(job, resume)
        }
        send(.accepted(id: job.id))
        if !Transferrer.isSupported(job.url) {
            finish(job.id, .failed(code: "unsupportedURL", reason: "only http and https URLs are supported: \(job.url)"))
            return
        }
        if job.kind == .upload && job.uploadFile == nil {
            finish(job.id, .failed(code: "fileDoesNotExist", reason: "an upload needs uploadFile"))
            return
        }
        let deadline = Due(at: job.created + job.timeoutForResource, id: job.id)
        deadlines.insert(deadline)
        if deadline.at <= config.clock.now() {
            wake()
            return
        }
        arm(deadline.at)
        place(job.id)
        startRunnable()
    }

    func cancel(_ id: TransferID, keepingPartial: Bool = false) {
        // A received download is past the point of no return: it finishes as completed.
        guard entries[id] != nil, entries[id]!.state != .finished, !finishing.contains(id) else { return }
        if running[id] != nil {
            running[id]!.stop = keepingPartial ? .cancelledForResume : .cancelled
            running[id]!.task.cancel()
        } else {
            finishCancelled(id, keepingPartial: keepingPartial)
        }
    }

    /// Ends a cancelled transfer: with `keepingPartial`, a download that got bytes and a
    /// validator keeps its partial file and reports where it stopped (resume data).
    private func finishCancelled(_ id: TransferID, keepingPartial: Bool) {
        guard let e = entries[id] else { return }
        let part = e.job.destination + ".part"
        if keepingPartial, e.job.kind == .download, let point = try? store.resumePoint(id: id), point.bytesDone > 0,
           point.etag != nil || point.lastModified != nil, let st = files.status(part), (st.st_mode & S_IFMT) == S_IFREG,
           Int64(st.st_size) >= point.bytesDone {
            finish(id, .cancelledResumable(TransferResume(partialFile: part, bytes: point.bytesDone,
                                                          etag: point.etag, lastModified: point.lastModified)))
        } else {
            removePartial(e.job)
            finish(id, .cancelled)
        }
    }

    /// `downloadTask(withResumeData:)`: the cancelled download's partial file becomes this
    /// job's, with its offset and validator, so the first attempt sends Range and If-Range.
    /// A partial file that is gone (or not a plain file) means starting from zero.
    private func adoptPartial(_ job: TransferJob, _ resume: TransferResume) {
        let part = job.destination + ".part"
        guard let st = files.status(resume.partialFile), (st.st_mode & S_IFMT) == S_IFREG,
              files.rename(resume.partialFile, to: part) == nil else {
            FileHandle.standardError.write(Data("apphost-transferd: transfer \(job.id): the resume data's partial file \(resume.partialFile) is gone; starting from zero\n".utf8))
            return
        }
        let bytes = min(resume.bytes, Int64(st.st_size))
        try? store.saveProgress(id: job.id, ResumePoint(bytesDone: bytes, bytesExpected: nil, etag: resume.etag, lastModified: resume.lastModified))
        entries[job.id]?.bytesDone = bytes
    }

    // MARK: Completion

    func finish(_ id: TransferID, _ outcome: TransferOutcome) {
        guard var e = entries[id] else { return }
        do {
            try store.finish(id: id, outcome: outcome)
        } catch {
            send(.error("recording \(id) finished: \(error)"))
        }
        e.state = .finished
        e.outcome = outcome
        e.waitReason = nil
        entries[id] = e
        send(.finished(id: id, outcome: outcome))
    }

    func removePartial(_ job: TransferJob) {
        if job.kind == .download { files.unlink(job.destination + ".part") }
    }

    private func progress(id: TransferID, done: Int64, expected: Int64?) {
        guard entries[id] != nil else { return }
        entries[id]!.bytesDone = done
        entries[id]!.bytesExpected = expected
        send(.progress(id: id, bytesDone: done, bytesExpected: expected))
    }

    func attemptEnded(_ id: TransferID, _ result: AttemptResult) {
        turn { attemptEndedInTurn(id, result) }
    }

    private func attemptEndedInTurn(_ id: TransferID, _ result: AttemptResult) {
        guard let r = running.removeValue(forKey: id), var e = entries[id] else {
            if case .received(let file) = result { discard(file) }
            return
        }
        perHost[e.hostKey, default: 1] -= 1
        if perHost[e.hostKey] == 0 { perHost[e.hostKey] = nil }
        if case .received(let file) = result {
            // Complete whatever stopped it meanwhile (as `.completed` always was): the
            // connection slot is free now, the file joins the next batch.
            e.bytesDone = file.bytes
            e.bytesExpected = file.bytesExpected ?? e.bytesExpected
            entries[id] = e
            finishing.insert(id)
            received.append((id, file))
            startFinisher()
            startRunnable()
            return
        }
        e.fresh = false
        if let point = try? store.resumePoint(id: id) {
            e.bytesDone = point.bytesDone
            e.bytesExpected = point.bytesExpected
        }
        e.state = .queued
        entries[id] = e
        switch (r.stop, result) {
        case (_, .completed(let status, let bytes)):
            finish(id, .completed(status: status, bytes: bytes))
        case (.cancelled, _):
            removePartial(e.job)
            finish(id, .cancelled)
        case (.cancelledForResume, _):
            finishCancelled(id, keepingPartial: true)
        case (.timedOut, _):
            removePartial(e.job)
            finish(id, .failed(code: "timedOut", reason: "timeoutIntervalForResource elapsed"))
        case (_, .received):
            break  // handled above
        case (.shutdown, _), (.paused, _), (nil, .stopped):
            break
        case (nil, .fatal(let code, let reason)):
            removePartial(e.job)
            finish(id, .failed(code: code, reason: reason))
        case (nil, .retry(let code, let reason, let progressed)):
            let attempts = (progressed ? 0 : e.attempts) + 1
            if attempts >= config.maxAttempts {
                removePartial(e.job)
                finish(id, .failed(code: code, reason: "\(reason) (gave up after \(attempts) attempts)"))
            } else {
                let delay = min(config.retryBase * pow(2, Double(attempts - 1)), config.retryCap)
                e.attempts = attempts
                e.nextAttempt = config.clock.now() + delay
                e.state = .waiting
                e.waitReason = "retry \(attempts + 1) in \(delay) s after \(code): \(reason)"
                entries[id] = e
                try? store.setState(id: id, state: .waiting, attempts: attempts, nextAttempt: e.nextAttempt)
                send(.waiting(id: id, reason: e.waitReason!))
            }
        }
        if entries[id]?.state != .finished && !shuttingDown { place(id) }
        startRunnable()
    }

}
