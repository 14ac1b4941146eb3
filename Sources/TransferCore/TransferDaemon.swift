import AppHostProtocol
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

/// The daemon's settings (command-line options of `apphost-transferd`).
public struct TransferDaemonConfiguration: Sendable {
    /// Holds `transfers.sqlite`.
    public var stateDirectory: String
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
    private enum StopReason { case cancelled, cancelledForResume, timedOut, shutdown, paused }

    private struct Entry {
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

    private struct Running {
        var task: Task<Void, Never>
        var stop: StopReason?
    }

    /// A time-ordered reminder in one of the heaps: checked against the entry when it
    /// comes due (an entry that moved on since leaves a stale reminder, skipped then).
    private struct Due: Comparable {
        let at: Double
        let id: UInt64
        static func < (a: Due, b: Due) -> Bool { (a.at, a.id) < (b.at, b.id) }
    }

    private let config: TransferDaemonConfiguration
    private let store: TransferStore
    private let link: HostLink
    private let client: HTTPClient
    private var entries: [UInt64: Entry] = [:]
    private var running: [UInt64: Running] = [:]
    private var perHost: [String: Int] = [:]
    // The scheduler's queues: an unfinished transfer that is not running is runnable (in
    // its host's queue, oldest first), waiting for its retry (`retries`), or blocked by
    // the device conditions (in neither: a change of conditions places everything
    // again). An enqueue or a finished attempt costs O(log n), not a walk over the
    // whole queue (which made 10,000 queued transfers quadratic).
    private var runnable: [String: Deque<UInt64>] = [:]
    private var retries = Heap<Due>()
    /// Each unfinished transfer's resource deadline.
    private var deadlines = Heap<Due>()
    private var pluggedIn = false
    private var network: DeviceNetwork = .wifi
    private var wakeTimer: (any TransferTimer)?
    private var wakeAt: Double?
    private var shuttingDown = false
    /// Received downloads from their last byte until their batch is recorded: waiting
    /// in `received`, or in the batch `finisherTask` is finishing. They hold no
    /// connection slot; at `maxFinishing` of them (open descriptors) no new attempt
    /// starts (a disk slower than the network must not pile up descriptors).
    private var finishing: Set<UInt64> = []
    private var received: [(id: UInt64, file: ReceivedDownload)] = []
    private var finisherTask: Task<Void, Never>?
    private let finisherPool: NIOThreadPool
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
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: clientConfig)
        let finisherPool = NIOThreadPool(numberOfThreads: 1)
        finisherPool.start()
        var configuration = configuration
        configuration.maxFinishing = finishingBound(configuration.maxFinishing, openFileLimit: openFileLimit())
        let daemon = TransferDaemon(config: configuration, store: store, link: link, client: client, finisherPool: finisherPool)
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

    private init(config: TransferDaemonConfiguration, store: TransferStore, link: HostLink, client: HTTPClient,
                 finisherPool: NIOThreadPool) {
        self.config = config
        self.store = store
        self.link = link
        self.client = client
        self.finisherPool = finisherPool
        pluggedIn = config.pluggedIn
        network = config.network
    }

    private var transferrer: Transferrer {
        Transferrer(client: client, store: store, link: link, commitBytes: config.commitBytes, clock: config.clock) { [weak self] id, done, expected in
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
    private func turn(_ body: () -> Void) {
        if collecting { return body() }
        collecting = true
        body()
        collecting = false
        let events = outbox
        outbox = []
        link.send(events)
    }

    /// Sends `event` to the host: at the end of the current turn, or now outside one.
    private func send(_ event: TransferEvent) {
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
                var ids: [UInt64] = []
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

    private func acknowledge(_ ids: [UInt64]) {
        var finished: [UInt64] = []
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

    private func cancel(_ id: UInt64, keepingPartial: Bool = false) {
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
    private func finishCancelled(_ id: UInt64, keepingPartial: Bool) {
        guard let e = entries[id] else { return }
        let part = e.job.destination + ".part"
        var st = stat()
        if keepingPartial, e.job.kind == .download, let point = try? store.resumePoint(id: id), point.bytesDone > 0,
           point.etag != nil || point.lastModified != nil, stat(part, &st) == 0, Int64(st.st_size) >= point.bytesDone {
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
        var st = stat()
        guard lstat(resume.partialFile, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, rename(resume.partialFile, part) == 0 else {
            FileHandle.standardError.write(Data("apphost-transferd: transfer \(job.id): the resume data's partial file \(resume.partialFile) is gone; starting from zero\n".utf8))
            return
        }
        let bytes = min(resume.bytes, Int64(st.st_size))
        try? store.saveProgress(id: job.id, ResumePoint(bytesDone: bytes, bytesExpected: nil, etag: resume.etag, lastModified: resume.lastModified))
        entries[job.id]?.bytesDone = bytes
    }

    // MARK: Completion

    private func finish(_ id: UInt64, _ outcome: TransferOutcome) {
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

    private func removePartial(_ job: TransferJob) {
        if job.kind == .download { unlink(job.destination + ".part") }
    }

    private func progress(id: UInt64, done: Int64, expected: Int64?) {
        guard entries[id] != nil else { return }
        entries[id]!.bytesDone = done
        entries[id]!.bytesExpected = expected
        send(.progress(id: id, bytesDone: done, bytesExpected: expected))
    }

    private func attemptEnded(_ id: UInt64, _ result: AttemptResult) {
        turn { attemptEndedInTurn(id, result) }
    }

    private func attemptEndedInTurn(_ id: UInt64, _ result: AttemptResult) {
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

    // MARK: Finishing received downloads

    /// The bound on received downloads waiting to be finished, kept to half of the
    /// descriptors the process may open beyond a reserve of 64 (connections, the
    /// database, the running attempts' files), and at least 1.
    static func finishingBound(_ wanted: Int, openFileLimit: Int?) -> Int {
        guard let limit = openFileLimit else { return max(1, wanted) }
        return max(1, min(wanted, (limit - 64) / 2))
    }

    /// RLIMIT_NOFILE's soft limit, nil when unlimited or unknown.
    private static func openFileLimit() -> Int? {
        var rl = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &rl) == 0, rl.rlim_cur != rlim_t.max else { return nil }  // RLIM_INFINITY
        return Int(clamping: rl.rlim_cur)
    }

    /// Starts a batch of what was received, unless one is running (then the next batch
    /// starts when it ends: while the disk syncs one batch, the next one gathers).
    private func startFinisher() {
        guard finisherTask == nil, !received.isEmpty else { return }
        let batch = received
        received = []
        let store = self.store
        let pool = finisherPool
        finisherTask = Task {
            let result: (finished: [Finisher.Finished], recordError: String?)
            do {
                result = try await pool.runIfActive { Finisher.finish(batch, store: store) }
            } catch {
                // The pool stopped (never before the daemon's shutdown waited for this).
                result = Finisher.finish(batch, store: store)
            }
            self.finished(result.finished, recordError: result.recordError)
        }
    }

    /// A batch is synced, moved and recorded: it is reported, in one write.
    private func finished(_ batch: [Finisher.Finished], recordError: String?) {
        turn {
            finisherTask = nil
            if let recordError {
                send(.error("recording \(batch.map { String($0.id) }.joined(separator: ", ")) finished: \(recordError)"))
            }
            for item in batch {
                finishing.remove(item.id)
                guard var e = entries[item.id] else { continue }
                e.state = .finished
                e.outcome = item.outcome
                e.waitReason = nil
                e.bytesDone = item.bytes
                entries[item.id] = e
                send(.finished(id: item.id, outcome: item.outcome))
            }
            startFinisher()
            startRunnable()
        }
    }

    /// A received file whose attempt or transfer is no longer known (not expected: its
    /// descriptor must not leak all the same).
    private func discard(_ file: ReceivedDownload) {
        close(file.fd)
        unlink(file.part)
    }

    // MARK: Scheduling

    private func blockReason(_ job: TransferJob) -> String? {
        if network == .none { return "no network" }
        if job.discretionary && !(pluggedIn && network == .wifi) { return "discretionary: waiting for power and Wi-Fi" }
        if !job.allowsCellularAccess && network != .wifi { return "waiting for Wi-Fi (cellular access not allowed)" }
        return nil
    }

    /// Puts an unfinished transfer that is not running where it belongs: blocked by the
    /// device conditions, waiting for its retry, or runnable behind its host's queue.
    private func place(_ id: UInt64) {
        guard var e = entries[id], e.state != .finished, running[id] == nil, !finishing.contains(id) else { return }
        if let reason = blockReason(e.job) {
            if e.waitReason != reason {
                e.waitReason = reason
                e.state = .waiting
                entries[id] = e
                send(.waiting(id: id, reason: reason))
            }
            return
        }
        if e.nextAttempt > config.clock.now() {
            // Its `waiting` (with the retry's reason) was sent when the attempt failed.
            e.state = .waiting
            entries[id] = e
            retries.insert(Due(at: e.nextAttempt, id: id))
            arm(e.nextAttempt)
            return
        }
        e.state = .queued
        entries[id] = e
        runnable[e.hostKey, default: []].append(id)
    }

    /// Starts runnable transfers, oldest first, while the global and per-host limits allow.
    private func startRunnable() {
        guard !shuttingDown else { return }
        while running.count < config.globalLimit, finishing.count < config.maxFinishing {
            var best: (host: String, id: UInt64)?
            for host in Array(runnable.keys) where perHost[host, default: 0] < config.perHostLimit {
                // Transfers cancelled or finished while queued leave their id behind.
                while let head = runnable[host]?.first, entries[head]?.state != .queued || running[head] != nil {
                    runnable[host]!.removeFirst()
                }
                guard let head = runnable[host]?.first else {
                    runnable[host] = nil
                    continue
                }
                if best == nil || head < best!.id { best = (host, head) }
            }
            guard let (host, id) = best else { return }
            runnable[host]!.removeFirst()
            if runnable[host]!.isEmpty { runnable[host] = nil }
            launch(id)
        }
    }

    private func launch(_ id: UInt64) {
        guard var e = entries[id] else { return }
        e.state = .running
        e.waitReason = nil
        entries[id] = e
        perHost[e.hostKey, default: 0] += 1
        let job = e.job
        let fresh = e.fresh
        let worker = transferrer
        let task = Task {
            // Isolated to the daemon; `run` is nonisolated, so the transfer itself runs off the actor.
            let result = await worker.run(job, fresh: fresh)
            self.attemptEnded(id, result)
        }
        running[id] = Running(task: task, stop: nil)
    }

    /// The device changed: running transfers no longer allowed are paused (they are
    /// placed again when their attempt ends), and everything waiting is placed again.
    private func conditionsChanged() {
        for (id, r) in running where r.stop == nil {
            if let e = entries[id], blockReason(e.job) != nil {
                running[id]!.stop = .paused
                r.task.cancel()
            }
        }
        let waiting = entries.keys.filter { running[$0] == nil && !finishing.contains($0) && entries[$0]?.state != .finished }.sorted()
        runnable.removeAll()
        retries = Heap()
        for id in waiting { place(id) }
        startRunnable()
    }

    /// Due reminders: retries whose backoff ran out, transfers past their resource deadline.
    private func wake() {
        turn { wakeInTurn() }
    }

    private func wakeInTurn() {
        wakeAt = nil
        wakeTimer = nil
        guard !shuttingDown else { return }
        let now = config.clock.now()
        while let due = deadlines.min, due.at <= now {
            deadlines.removeMin()
            guard let e = entries[due.id], e.state != .finished, !finishing.contains(due.id),
                  e.job.created + e.job.timeoutForResource == due.at else { continue }
            if let r = running[due.id] {
                if r.stop == nil {
                    running[due.id]!.stop = .timedOut
                    r.task.cancel()
                }
            } else {
                removePartial(e.job)
                finish(due.id, .failed(code: "timedOut", reason: "timeoutIntervalForResource elapsed"))
            }
        }
        while let due = retries.min, due.at <= now {
            retries.removeMin()
            guard let e = entries[due.id], e.state == .waiting, running[due.id] == nil, e.nextAttempt == due.at else { continue }
            entries[due.id]!.nextAttempt = 0
            place(due.id)
        }
        startRunnable()
        if let next = [deadlines.min?.at, retries.min?.at].compactMap({ $0 }).min() { arm(next) }
    }

    private func arm(_ at: Double) {
        guard at.isFinite else { return }
        if let current = wakeAt, current <= at { return }
        wakeTimer?.cancel()
        wakeAt = at
        wakeTimer = config.clock.schedule(at: at + 0.005) { [weak self] in
            Task { await self?.wake() }
        }
    }

    /// Stops every transfer, keeping partial downloads for a resume, and waits for them.
    func shutdown() async {
        shuttingDown = true
        wakeTimer?.cancel()
        let tasks = running.map { id, r -> Task<Void, Never> in
            running[id]!.stop = .shutdown
            r.task.cancel()
            return r.task
        }
        for t in tasks { await t.value }
        // Downloads already received are finished (synced, moved, recorded, reported).
        while let t = finisherTask { await t.value }
    }
}
