import AppHostProtocol
import AsyncHTTPClient
import AppHostSystem
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
#if canImport(Glibc)
import Glibc
#endif

/// One download attempt's body on its way from the event loop to the partial file.
///
/// The event loop copies each body part into a ring (`append`, a `memcpy`, no system
/// call); a writer on a thread pool writes what has piled up, so the event loop never
/// waits for the disk and there is one hand-over per quarter mebibyte instead of one
/// per 64 KiB part. Full pages go to the file with `O_DIRECT` from the ring: no copy
/// into the page cache (in this VM first touch of fresh page-cache pages was the
/// daemon's main cost) and no dirty pages for the final fsync. The unaligned head of a
/// resumed download and the tail go through the page cache. A file system without
/// direct I/O (`EINVAL`) gets ordinary writes with write-behind.
///
/// Progress is committed from the writer thread once at least `commitBytes` more
/// bytes are in the file, and offered to `progress` (newest value wins). At most
/// `wakeBytes` wait in the ring before the writer is woken, so a kill -9 loses little
/// more than `commitBytes` + `wakeBytes` when the network is slower than the disk.
///
/// Ownership: the ring bytes in `[written, filled)` belong to the writer, the rest to
/// the event loop; both positions are published under `lock`. At most one `drain`
/// runs at a time (`writerBusy`), so the writer-side fields are never shared.
final class BodyWriter: @unchecked Sendable {
    /// How the attempt's body ended up.
    enum End: Sendable {
        /// Every byte up to the offset is in the file.
        case finished(Int64)
        /// A write failed; the file holds the bytes up to the offset.
        case failed(WriteFailure, Int64)
        /// The response stopped (error, cancel); the file holds every byte received, up to the offset.
        case stopped(Int64)
        /// Every byte of a small body (at most ``inlineBytes``) is still in memory and no
        /// file was made (a writer that opens its file itself): ``heldBody()`` has them.
        case held(Int64)
    }

    static let maximumRing = 4 << 20
    static let wakeBytes = 256 << 10
    /// Offset, length and memory alignment of direct writes (a page: enough for any
    /// logical block size the kernel accepts; a file system that wants more says EINVAL).
    static let alignment = 4096

    private let ring: UnsafeMutableRawBufferPointer
    private let capacity: Int
    private let wakeAt: Int
    /// The partial file: given, or opened by the writer when it first writes (-1 until then).
    private var fd: Int32
    /// The writer opens (and owns) `fd` itself, from byte 0, when it first writes.
    private let opensFile: Bool
    private var ownsFD: Bool
    private let path: String
    private let files: AppFiles
    private let eventLoop: any EventLoop
    private let pool: NIOThreadPool
    private let store: TransferStore
    private let id: TransferID
    private let commitBytes: Int64
    private let progress: AsyncStream<Int64>.Continuation
    private let ended: EventLoopPromise<End>

    private struct Shared {
        var filled: Int64
        var written: Int64
        var writerBusy = false
        var ending = false
        var stopping = false
        var failure: WriteFailure?
        var done = false
        /// The event loop waits here for room in the ring.
        var waiter: EventLoopPromise<Void>?
    }
    private let lock = NSLock()
    private var shared: Shared

    // Writer side (one drain at a time).
    private var directFD: Int32 = -1
    private var directOff: Bool
    private var behind: WriteBehind?
    private var point: ResumePoint
    private var lastCommit: Int64

    /// - Parameters:
    ///   - fd: the partial file, opened for writing; the caller closes it after `end`.
    ///     nil: the writer makes `path` itself (from byte 0, `O_TRUNC`) when it first
    ///     writes, and a body that fits in ``inlineBytes`` is never written here at all:
    ///     it ends `.held`, and the daemon's finisher writes it with its batch, off the
    ///     event loop (see ``takeDescriptor()``, ``heldBody()``).
    ///   - offset: where the body starts in the file (0 when `fd` is nil).
    ///   - length: the body's length if known (sizes the ring).
    ///   - point: the resume point to commit progress into (validators, expected size).
    init(fd: Int32?, path: String, files: AppFiles, offset: Int64, length: Int64?, point: ResumePoint, store: TransferStore, id: TransferID,
         commitBytes: Int64, progress: AsyncStream<Int64>.Continuation, eventLoop: any EventLoop, pool: NIOThreadPool = .singleton) {
        let align = Self.alignment
        let want = Int(min(Int64(Self.maximumRing), max(length ?? Int64(Self.maximumRing), 1)))
        capacity = (want + align - 1) / align * align
        ring = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: align)
        wakeAt = min(Self.wakeBytes, capacity)
        self.fd = fd ?? -1
        opensFile = fd == nil
        ownsFD = false
        self.path = path
        self.files = files
        self.eventLoop = eventLoop
        self.pool = pool
        self.store = store
        self.id = id
        self.commitBytes = commitBytes
        self.progress = progress
        self.point = point
        lastCommit = offset
        directOff = false
        shared = Shared(filled: offset, written: offset)
        ended = eventLoop.makePromise(of: End.self)
    }

    deinit {
        if directFD >= 0 { close(directFD) }
        if ownsFD && fd >= 0 { close(fd) }
        ring.deallocate()
    }

    /// Completes once no write is running or will run; the file descriptors may then be closed.
    var end: EventLoopFuture<End> { ended.futureResult }

    /// After `end`: the partial file the writer opened itself (now the caller's to
    /// close), or -1 if it made none.
    func takeDescriptor() -> Int32 {
        guard ownsFD else { return -1 }
        ownsFD = false
        return fd
    }

    /// After `end` was `.held(n)`: the body's `n` bytes.
    func heldBody() -> [UInt8] {
        let n = Int(lock.withLock { shared.filled })
        return [UInt8](UnsafeRawBufferPointer(start: ring.baseAddress, count: n))
    }

    // MARK: Event loop side

    /// Takes one body part; the future completes when the next one may come (room in the ring).
    func append(_ part: ByteBuffer) -> EventLoopFuture<Void> {
        var part = part
        while part.readableBytes > 0 {
            let (room, at, stop) = lock.withLock { () -> (Int, Int64, (any Error)?) in
                if let f = shared.failure { return (0, 0, f) }
                if shared.stopping { return (0, 0, CancellationError()) }
                return (capacity - Int(shared.filled - shared.written), shared.filled, nil)
            }
            if let stop { return eventLoop.makeFailedFuture(stop) }
            if room == 0 {
                let promise = eventLoop.makePromise(of: Void.self)
                let parked = lock.withLock { () -> Bool in
                    guard shared.filled - shared.written == Int64(capacity), !shared.stopping, shared.failure == nil else { return false }
                    shared.waiter = promise
                    return true
                }
                if !parked {
                    promise.succeed(())
                    continue
                }
                let rest = part
                return promise.futureResult.flatMap { self.append(rest) }
            }
            let n = min(room, part.readableBytes)
            part.withUnsafeReadableBytes { src in
                let index = Int(at % Int64(capacity))
                let first = min(n, capacity - index)
                ring.baseAddress!.advanced(by: index).copyMemory(from: src.baseAddress!, byteCount: first)
                if n > first {
                    ring.baseAddress!.copyMemory(from: src.baseAddress!.advanced(by: first), byteCount: n - first)
                }
            }
            part.moveReaderIndex(forwardBy: n)
            let wake = lock.withLock { () -> Bool in
                shared.filled += Int64(n)
                guard !shared.writerBusy, shared.filled - shared.written >= Int64(wakeAt) else { return false }
                shared.writerBusy = true
                return true
            }
            if wake { startWriter() }
        }
        return eventLoop.makeSucceededVoidFuture()
    }

    /// At most this much left to write when the body ends is written on the event loop
    /// itself, through the page cache: a small download's one `pwrite` costs less than
    /// handing it to a pool thread and back (two thread wakes, for every small file).
    static let inlineBytes: Int64 = 64 << 10

    /// The body is complete: write what is left, then `end` is `.finished` (or `.failed`).
    func finish() {
        let (start, inline, held) = lock.withLock { () -> (Bool, Bool, Int64?) in
            shared.ending = true
            guard !shared.writerBusy, !shared.done else { return (false, false, nil) }
            let small = shared.filled - shared.written <= Self.inlineBytes
            if opensFile && fd < 0 && small && shared.written == 0 && shared.failure == nil {
                // Nothing written yet, and all of it fits: held for the finisher, no
                // file made on the event loop (an open with O_CREAT was a tenth of the
                // daemon's loop for 10,000 small downloads).
                shared.done = true
                return (false, false, shared.filled)
            }
            shared.writerBusy = true
            return (true, small, nil)
        }
        if let held {
            complete(.held(held))
            return
        }
        guard start else { return }
        if inline {
            if !directOff && directFD < 0 { useBufferedWrites(from: lock.withLock { shared.written }) }
            drain()
        } else {
            startWriter()
        }
    }

    /// The response failed or was cancelled: no more body parts are taken. What the ring
    /// already holds is valid data received before the stop, so it is still written
    /// (a resumed attempt then asks only for the rest); `end` is `.stopped` with the
    /// offset reached once that is done.
    func stop() {
        let (waiter, end, start) = lock.withLock { () -> (EventLoopPromise<Void>?, End?, Bool) in
            shared.stopping = true
            let w = shared.waiter
            shared.waiter = nil
            guard !shared.writerBusy, !shared.done else { return (w, nil, false) }
            if let f = shared.failure {
                shared.done = true
                return (w, .failed(f, shared.written), false)
            }
            if shared.filled == shared.written {
                shared.done = true
                return (w, .stopped(shared.written), false)
            }
            shared.writerBusy = true
            return (w, nil, true)
        }
        waiter?.fail(CancellationError())
        if let end { complete(end) }
        if start { startWriter() }
    }

    private func startWriter() {
        pool.submit { _ in self.drain() }
    }

    private func complete(_ end: End) {
        progress.finish()
        ended.succeed(end)
    }

    // MARK: Writer side

    private enum Step {
        case write(from: Int64, count: Int, direct: Bool)
        case idle
        case end(End)
    }

    /// Writes until nothing is left that can be written now.
    private func drain() {
        while true {
            let step = lock.withLock { () -> Step in
                if shared.done {
                    shared.writerBusy = false
                    return .idle
                }
                if let f = shared.failure {
                    shared.writerBusy = false
                    shared.done = true
                    return .end(.failed(f, shared.written))
                }
                // Stopping: what is in the ring is written out, tail included, then `.stopped`.
                let last = shared.ending || shared.stopping
                let (count, direct) = nextWrite(from: shared.written, pending: Int(shared.filled - shared.written), ending: last)
                if count == 0 {
                    shared.writerBusy = false
                    guard last else { return .idle }
                    shared.done = true
                    return .end(shared.stopping ? .stopped(shared.written) : .finished(shared.written))
                }
                return .write(from: shared.written, count: count, direct: direct)
            }
            switch step {
            case .idle:
                return
            case .end(let end):
                complete(end)
                return
            case .write(let from, let count, let direct):
                if fd < 0 && !openFile() { continue }
                if direct && directFD < 0 && !openDirect(at: from) { continue }
                let (wrote, error) = write(from: from, count: count, direct: direct)
                let waiter = lock.withLock { () -> EventLoopPromise<Void>? in
                    shared.written += Int64(wrote)
                    if let error { shared.failure = error }
                    guard wrote > 0 || error != nil else { return nil }
                    let w = shared.waiter
                    shared.waiter = nil
                    return w
                }
                if let error { waiter?.fail(error) } else { waiter?.succeed(()) }
                if error == nil { didWrite(upTo: from + Int64(wrote), direct: direct) }
            }
        }
    }

    /// What to write next from `from`: direct writes of whole pages; through the page
    /// cache the head up to a page boundary, the tail at the end, or everything when
    /// direct I/O is off. Never past the end of the ring (the next write wraps).
    private func nextWrite(from: Int64, pending: Int, ending: Bool) -> (Int, Bool) {
        let align = Int64(Self.alignment)
        var count = pending
        var direct = false
        if !directOff {
            let misaligned = Int(from % align)
            if misaligned != 0 {
                count = min(pending, Self.alignment - misaligned)
            } else if pending >= Self.alignment {
                count = pending - pending % Self.alignment
                direct = true
            } else if !ending {
                count = 0
            }
        }
        return (min(count, capacity - Int(from % Int64(capacity))), direct)
    }

    /// Makes the partial file of a writer that opens its own (from byte 0); false (the
    /// failure recorded, so the next step ends the body) when it cannot.
    private func openFile() -> Bool {
        let failure: WriteFailure
        switch files.open(path, flags: O_WRONLY | O_CREAT | O_TRUNC) {
        case .success(let made):
            fd = made
            ownsFD = true
            return true
        case .failure(let e):
            failure = WriteFailure(errnoValue: e.rawValue, opening: true)
        }
        let waiter = lock.withLock { () -> EventLoopPromise<Void>? in
            shared.failure = failure
            let w = shared.waiter
            shared.waiter = nil
            return w
        }
        waiter?.fail(failure)
        return false
    }

    /// Opens the O_DIRECT descriptor; false (direct I/O off from here) when the file system refuses.
    private func openDirect(at offset: Int64) -> Bool {
        if case .success(let dfd) = files.open(path, flags: O_WRONLY | WriteBack.directFlag) {
            directFD = dfd
            return true
        }
        useBufferedWrites(from: offset)
        return false
    }

    private func useBufferedWrites(from offset: Int64) {
        directOff = true
        behind = WriteBehind(fd: fd, from: offset)
    }

    /// pwrite(2) until `count` bytes are written or an error; `EINVAL` on the direct
    /// descriptor turns direct I/O off and retries through the page cache.
    private func write(from: Int64, count: Int, direct: Bool) -> (Int, WriteFailure?) {
        let base = ring.baseAddress!.advanced(by: Int(from % Int64(capacity)))
        var done = 0
        var viaDirect = direct
        while done < count {
            let n = pwrite(viaDirect ? directFD : fd, base + done, count - done, off_t(from + Int64(done)))
            if n < 0 {
                let e = errno
                if e == EINTR { continue }
                if viaDirect && e == EINVAL {
                    useBufferedWrites(from: from + Int64(done))
                    viaDirect = false
                    continue
                }
                return (done, WriteFailure(errnoValue: e))
            }
            if n == 0 { return (done, WriteFailure(errnoValue: EIO)) }
            done += n
        }
        return (done, nil)
    }

    /// After a write: write-behind for page-cache writes, and the progress commit.
    private func didWrite(upTo offset: Int64, direct: Bool) {
        if !direct { behind?.wrote(upTo: offset) }
        guard offset - lastCommit >= commitBytes else { return }
        point.bytesDone = offset
        try? store.saveProgress(id: id, point)
        lastCommit = offset
        progress.yield(offset)
    }
}

/// The response side of a download attempt, for `HTTPClient.execute(request:delegate:)`.
/// The head goes to the attempt (`head`), which checks it and then `accept`s a
/// `BodyWriter` (the body then flows to it on the event loop, without a hop per part)
/// or `reject`s it (the request is cancelled).
final class DownloadDelegate: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = Void

    let eventLoop: any EventLoop
    /// The final response head (after redirects); fails if the request fails first.
    let head: EventLoopFuture<HTTPResponseHead>

    private let lock = NSLock()
    private var headPromise: EventLoopPromise<HTTPResponseHead>?
    private var goPromise: EventLoopPromise<Void>?
    private var writer: BodyWriter?
    private var failure: (any Error)?
    private var early: BodyWriter?

    /// Set before the request starts: given the head, a writer to take the body at once
    /// (nil: the attempt checks the head first, and `accept`s or `reject`s).
    var acceptEarly: (@Sendable (HTTPResponseHead) -> BodyWriter?)? {
        get { lock.withLock { acceptEarlyHandler } }
        set { lock.withLock { acceptEarlyHandler = newValue } }
    }
    private var acceptEarlyHandler: (@Sendable (HTTPResponseHead) -> BodyWriter?)?

    /// The writer `acceptEarly` made, once the head came.
    var acceptedEarly: BodyWriter? { lock.withLock { early } }

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        let promise = eventLoop.makePromise(of: HTTPResponseHead.self)
        headPromise = promise
        head = promise.futureResult
    }

    /// Lets the body flow into `writer`. If the request has already failed the writer is stopped.
    func accept(_ writer: BodyWriter) {
        let go = lock.withLock { () -> EventLoopPromise<Void>?? in
            if failure != nil { return .none }
            self.writer = writer
            defer { goPromise = nil }
            return .some(goPromise)
        }
        switch go {
        case .none: writer.stop()
        case .some(let promise): promise?.succeed(())
        }
    }

    /// Refuses the body: the request fails with `error`.
    func reject(_ error: any Error) {
        let go = lock.withLock { () -> EventLoopPromise<Void>? in
            defer { goPromise = nil }
            return goPromise
        }
        go?.fail(error)
    }

    /// The request failed (also called from the task's future, so a failure that never
    /// reaches the delegate still ends the attempt). Idempotent.
    func fail(_ error: any Error) {
        let (hp, go, w) = lock.withLock { () -> (EventLoopPromise<HTTPResponseHead>?, EventLoopPromise<Void>?, BodyWriter?) in
            if failure == nil { failure = error }
            defer { headPromise = nil; goPromise = nil }
            return (headPromise, goPromise, writer)
        }
        hp?.fail(error)
        go?.fail(error)
        w?.stop()
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        if let make = lock.withLock({ failure == nil ? acceptEarlyHandler : nil }), let writer = make(head) {
            let hp = lock.withLock { () -> EventLoopPromise<HTTPResponseHead>? in
                self.writer = writer
                early = writer
                defer { headPromise = nil }
                return headPromise
            }
            hp?.succeed(head)
            return task.eventLoop.makeSucceededVoidFuture()
        }
        let go = task.eventLoop.makePromise(of: Void.self)
        let hp = lock.withLock { () -> EventLoopPromise<HTTPResponseHead>? in
            defer { headPromise = nil }
            if failure == nil { goPromise = go }
            return headPromise
        }
        if let hp {
            hp.succeed(head)
        } else {
            go.fail(HTTPClientError.cancelled)
        }
        return go.futureResult
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        guard let writer = lock.withLock({ writer }) else { return task.eventLoop.makeFailedFuture(HTTPClientError.cancelled) }
        return writer.append(buffer)
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        lock.withLock { writer }?.finish()
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
        fail(error)
    }
}
