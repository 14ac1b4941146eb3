import AppHostProtocol
import CAppHostStamp
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Why the connection to the host cannot go on. Every case ends the app: without
/// its host an AppHost app has nobody to run callbacks for.
enum ConnectionError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The host closed the socket (it exited or dropped the app).
    case closed
    /// The host sent bytes that are not a valid frame or message.
    case frame(FrameError)
    /// A system call on the socket failed.
    case system(call: String, errno: Int32)
    /// The host refused the handshake or dropped the app with a reason.
    case rejected(reason: String)
    /// The host speaks another protocol version.
    case versionMismatch(host: Int, app: Int)
    /// The host sent a valid message at a moment the protocol does not allow it.
    case unexpected(String)

    var description: String {
        switch self {
        case .closed: "the host closed the connection"
        case .frame(let error): "the host sent an invalid frame: \(error)"
        case .system(let call, let errno): "\(call) on the host socket failed: \(String(cString: strerror(errno))) (errno \(errno))"
        case .rejected(let reason): "the host rejected this app: \(reason)"
        case .versionMismatch(let host, let app): "the host speaks protocol version \(host), this app speaks \(app)"
        case .unexpected(let what): "protocol violation by the host: \(what)"
        }
    }
}

/// The app's end of the IPC socket: framed writes from any thread, one reader.
///
/// Owns no thread itself: `handshake` and `receive` block the caller, and
/// ``startReader(deliver:onFailure:)`` starts the one thread that reads after the
/// handshake. Requests (`request(_:)`) block their caller until the reader hands
/// them their reply, so they work on the main queue while a callback runs.
final class Connection: Sendable {
    /// The socket descriptor (fd 3 in an app; one end of a socketpair in tests).
    let descriptor: Int32
    /// Serializes writes so frames from different threads never interleave; holds the
    /// returns of callbacks not yet written (see ``holdReturn(seq:)``).
    private let writeLock = Mutex(HeldReturns())

    /// Acknowledgements of callbacks held back: written before any other frame, at the
    /// end of their batch, or by the reader within ``heldReturnBound`` of being held.
    private struct HeldReturns {
        var bytes: [UInt8] = []
    }

    /// Batches handed to the main queue that may hold returns and have not ended (see
    /// ``beginHoldingReturns()``): while there are any, the reader waits for the host in
    /// slices of ``heldReturnBound`` and writes what is held after each, so a later callback of the batch that hangs does not keep
    /// the returns before it from the host. (The reader, not a timer: a libdispatch timer
    /// gave every such app a manager thread and a worker more, which each SIGSTOP then had
    /// to stop: the host's stop confirmation took half as long again.)
    ///
    /// After a slice that found nothing to write (a callback of the batch runs long, or
    /// hangs) the reader waits without a bound, *parked*, and the next return held wakes it
    /// through ``wakeDescriptor``: an app blocked in a callback then sleeps for good, which
    /// is how a virtual-clock host tells it from a slow one (it would otherwise wake every
    /// millisecond, and never look blocked).
    private let holdingBatches = Atomic<Int>(0)
    /// The reader waits without a bound while a batch holds returns (see above).
    private let readerParked = Atomic<Bool>(false)
    /// An eventfd that wakes a parked reader (-1: none could be made; the reader then keeps
    /// to its slices).
    private let wakeDescriptor: Int32

    /// How long a held return waits at most for the rest of its batch: far below any
    /// watchdog the host runs (seconds), and below what a user could notice.
    static let heldReturnBound: Int32 = 1  // milliseconds, poll(2)'s unit
    /// Frame reassembly; only one reader at a time (handshake, then the reader thread).
    private let decoder = Mutex(ReadState())

    /// The reader's decoder and its read buffer (kept: not 16 KiB zeroed per message).
    private struct ReadState {
        var frames = FrameDecoder()
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)

        mutating func next() throws(FrameError) -> [UInt8]? { try frames.next() }
        mutating func finish() throws(FrameError) { try frames.finish() }
        mutating func append(_ bytes: ArraySlice<UInt8>) { frames.append(bytes) }
    }
    /// Requests waiting for their reply.
    private let requests = Mutex(RequestTable())
    /// The reader thread, made early by ``prepareReader()``.
    private let parkedReader = Mutex<ParkedThread?>(nil)

    /// Wraps an open, connected stream socket. The connection does not close it.
    init(descriptor: Int32) {
        self.descriptor = descriptor
        var wake: Int32 = -1
        wakeDescriptor = aph_wake_create(&wake) == 0 ? wake : -1
    }

    deinit {
        if wakeDescriptor >= 0 { close(wakeDescriptor) }
    }

    // MARK: Writing

    /// Encodes `message` as one frame and writes it whole.
    func send(_ message: AppMessage) throws(ConnectionError) {
        let bytes: [UInt8]
        do {
            bytes = try Frame.encode(message)
        } catch let error as FrameError {
            throw .frame(error)
        } catch {
            // AppMessage always encodes; only a frame size limit could fail above.
            throw .unexpected("could not encode \(message): \(error)")
        }
        try writeAll(bytes)
    }

    /// Writes `bytes` completely under the write lock, retrying partial writes and EINTR.
    /// Uses MSG_NOSIGNAL so a vanished host is an error, not a SIGPIPE.
    func writeAll(_ bytes: [UInt8]) throws(ConnectionError) {
        try writeLock.withLock { held throws(ConnectionError) in
            // Held returns first: the host sees frames in the order they were made.
            let bytes = held.bytes.isEmpty ? bytes : held.bytes + bytes
            held.bytes = []
            try Self.writeAll(bytes, to: descriptor)
        }
    }

    /// A batch of callbacks whose returns may be held (``holdReturn(seq:)``) is handed to
    /// the main queue: called by the reader (before it waits again, so it waits in
    /// slices from then on), ended by ``endHoldingReturns()`` on the main queue.
    func beginHoldingReturns() {
        holdingBatches.add(1, ordering: .sequentiallyConsistent)
    }

    /// A batch ended: what is held is written.
    func endHoldingReturns() {
        holdingBatches.subtract(1, ordering: .sequentiallyConsistent)
        flushHeldReturns()
    }

    /// Acknowledges callback `seq` later, with the others of its batch: written before
    /// the next frame of any kind, at the end of the batch, or by the reader at most
    /// ``heldReturnBound`` from now. A batch of 256 callbacks is then one `send(2)` (and
    /// one wake of the host's reader), not 256. Call between ``beginHoldingReturns()``
    /// and ``endHoldingReturns()``.
    func holdReturn(seq: UInt64) throws(ConnectionError) {
        let frame: [UInt8]
        do {
            frame = try Frame.encode(AppMessage.callbackReturned(seq: seq))
        } catch {
            throw .unexpected("could not encode a callback's return: \(error)")
        }
        writeLock.withLock { held in held.bytes += frame }
        // A reader parked while this batch ran long must write it within the bound.
        if readerParked.load(ordering: .sequentiallyConsistent), wakeDescriptor >= 0 {
            var one: UInt64 = 1
            _ = write(wakeDescriptor, &one, 8)
        }
    }

    /// Writes the held returns now (whether there were any). Errors are left to the next
    /// write or read to report (the reader sees the host gone).
    @discardableResult
    func flushHeldReturns() -> Bool {
        writeLock.withLock { held in
            guard !held.bytes.isEmpty else { return false }
            let bytes = held.bytes
            held.bytes = []
            try? Self.writeAll(bytes, to: descriptor)
            return true
        }
    }

    private var holdsReturns: Bool {
        writeLock.withLock { !$0.bytes.isEmpty }
    }

    /// `send` until every byte is written; call under the write lock.
    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32) throws(ConnectionError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { buffer in
                sendWithoutSIGPIPE(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
            }
            if n >= 0 {
                offset += n
            } else if errno == EINTR {
                continue
            } else if errno == EPIPE || errno == ECONNRESET {
                throw .closed
            } else {
                throw .system(call: "send", errno: errno)
            }
        }
    }

    // MARK: Reading

    /// While a batch may hold returns, waits for the host in slices of
    /// ``heldReturnBound``, writing what is held after each; returns once there is
    /// something to read (or an error to meet in `read`) or no batch holds returns.
    ///
    /// After a slice with nothing to write it parks (waits without a bound) until the host
    /// writes or a return is held (``holdReturn(seq:)`` wakes it).
    private func waitWhileHolding() {
        var parking = false
        while holdingBatches.load(ordering: .sequentiallyConsistent) > 0 {
            var entries = [pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0)]
            var timeout = Self.heldReturnBound
            if parking, wakeDescriptor >= 0 {
                readerParked.store(true, ordering: .sequentiallyConsistent)
                // Held before the flag was seen: written now, not slept on.
                if holdsReturns {
                    readerParked.store(false, ordering: .sequentiallyConsistent)
                    parking = !flushHeldReturns()
                    continue
                }
                timeout = -1
            }
            let ready = poll(&entries, wakeDescriptor >= 0 ? 2 : 1, timeout)
            readerParked.store(false, ordering: .sequentiallyConsistent)
            if entries[1].revents != 0 {
                var count: UInt64 = 0
                _ = read(wakeDescriptor, &count, 8)
            }
            if entries[0].revents != 0 || (ready < 0 && errno != EINTR) { return }
            parking = !flushHeldReturns()
        }
    }

    /// Blocks until one whole message arrives. Call from one thread at a time.
    /// `beforeWaiting` runs each time no whole message is buffered, before the read that
    /// may block (the reader hands on what it has gathered then).
    func receive(beforeWaiting: () -> Void = {}) throws(ConnectionError) -> HostMessage {
        try decoder.withLock { decoder throws(ConnectionError) -> HostMessage in
            while true {
                let payload: [UInt8]?
                do throws(FrameError) { payload = try decoder.next() } catch { throw .frame(error) }
                if let payload {
                    do throws(FrameError) { return try Frame.decode(HostMessage.self, from: payload) } catch { throw .frame(error) }
                }
                beforeWaiting()
                waitWhileHolding()
                let n = decoder.chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if n > 0 {
                    decoder.append(decoder.chunk[0..<n])
                } else if n == 0 {
                    do throws(FrameError) { try decoder.finish() } catch { throw .frame(error) }
                    throw .closed
                } else if errno == EINTR {
                    continue
                } else if errno == ECONNRESET {
                    throw .closed
                } else {
                    throw .system(call: "read", errno: errno)
                }
            }
        }
    }

    // MARK: Handshake

    /// What the host's welcome says.
    struct Welcome: Equatable {
        /// The bundle identifier the host welcomed the app as.
        var bundleIdentifier: String
        /// The screen the host draws snapshots for: the one it named if usable, else
        /// ``ScreenSize/default``.
        var screen: ScreenSize
    }

    /// Sends `hello` and waits for the host's answer. `whileWaiting` runs in between,
    /// on the caller: work the app needs next that does not depend on the answer
    /// overlaps the host's round trip instead of following it.
    func handshake(pid: Int32, whileWaiting: () -> Void = {}) throws(ConnectionError) -> Welcome {
        try send(.hello(version: IPCProtocol.version, pid: pid))
        whileWaiting()
        switch try receive() {
        case .welcome(let version, let bundleIdentifier, let screen):
            guard version == IPCProtocol.version else {
                throw .versionMismatch(host: version, app: IPCProtocol.version)
            }
            let usable = screen.flatMap { $0.width > 0 && $0.height > 0 && $0.scale.isFinite && $0.scale > 0 ? $0 : nil }
            return Welcome(bundleIdentifier: bundleIdentifier, screen: usable ?? .default)
        case .rejected(let reason):
            throw .rejected(reason: reason)
        case let other:
            throw .unexpected("expected welcome or rejected, got \(other)")
        }
    }

    // MARK: Requests

    /// Sends `request` and blocks until the reader thread delivers its reply.
    /// Safe on any thread, including the main queue during a delegate callback.
    func request(_ request: AppRequest) throws(ConnectionError) -> HostReply {
        try send(request, waiter: ReplyWaiter()).wait()
    }

    /// Sends `request` without waiting: the reply is taken later with
    /// ``PendingReply/wait()``, and `onReply` runs on the reader thread once it (or the
    /// connection's failure) has arrived. Requests pipelined this way are answered in
    /// the order the host takes them, like every other.
    func startRequest(_ request: AppRequest, onReply: @escaping @Sendable () -> Void) throws(ConnectionError) -> PendingReply {
        try send(request, waiter: ReplyWaiter(onReply: onReply))
    }

    /// Registers `waiter` under the next request id and sends `request` with it.
    private func send(_ request: AppRequest, waiter: ReplyWaiter) throws(ConnectionError) -> PendingReply {
        let id = try requests.withLock { table throws(ConnectionError) -> UInt64 in
            if let failure = table.failure { throw failure }
            table.lastID += 1
            table.waiters[table.lastID] = waiter
            return table.lastID
        }
        do {
            try send(.request(id: id, request: request))
        } catch {
            _ = requests.withLock { $0.waiters.removeValue(forKey: id) }
            throw error
        }
        return PendingReply(waiter: waiter)
    }

    /// Hands a reply to its waiter; false if no request with that id is waiting.
    private func resolve(id: UInt64, with reply: HostReply) -> Bool {
        guard let waiter = requests.withLock({ $0.waiters.removeValue(forKey: id) }) else { return false }
        waiter.resume(with: .success(reply))
        return true
    }

    /// Fails every waiting request and every later one with `error`.
    private func failRequests(with error: ConnectionError) {
        let waiters = requests.withLock { table in
            table.failure = table.failure ?? error
            defer { table.waiters = [:] }
            return Array(table.waiters.values)
        }
        for waiter in waiters { waiter.resume(with: .failure(error)) }
    }

    // MARK: Reader

    /// Reads messages until the connection fails: replies go to their waiters,
    /// callbacks to `deliver` in arrival order. `endOfBatch` runs whenever every message
    /// read so far has been handed on, before the reader waits for more (and once more
    /// when it stops). Returns why it stopped.
    func readLoop(deliver: (_ seq: UInt64, _ callback: LifecycleCallback, _ state: AppState) -> Void,
                  endOfBatch: () -> Void = {}) -> ConnectionError {
        let failure: ConnectionError
        while true {
            let message: HostMessage
            do { message = try receive(beforeWaiting: endOfBatch) } catch { failure = error; break }
            if let error = dispatch(message, deliver: deliver) { failure = error; break }
        }
        endOfBatch()
        failRequests(with: failure)
        return failure
    }

    /// One message from the host: a callback to `deliver`, a reply to its waiter; nil, or
    /// why the connection cannot go on.
    private func dispatch(_ message: HostMessage,
                          deliver: (_ seq: UInt64, _ callback: LifecycleCallback, _ state: AppState) -> Void) -> ConnectionError? {
        switch message {
        case .callback(let seq, let callback, let state):
            deliver(seq, callback, state)
            return nil
        case .reply(let id, let reply):
            return resolve(id: id, with: reply) ? nil : .unexpected("reply to request \(id), which is not waiting")
        case .rejected(let reason):
            return .rejected(reason: reason)
        case .welcome:
            return .unexpected("a second welcome")
        }
    }

    /// The whole frames already read (with the welcome, the host's first callback often
    /// comes in the same read), decoded, without reading the socket.
    private func takeBuffered() throws(ConnectionError) -> [HostMessage] {
        try decoder.withLock { decoder throws(ConnectionError) -> [HostMessage] in
            var messages: [HostMessage] = []
            while true {
                let payload: [UInt8]?
                do throws(FrameError) { payload = try decoder.next() } catch { throw .frame(error) }
                guard let payload else { return messages }
                do throws(FrameError) { messages.append(try Frame.decode(HostMessage.self, from: payload)) } catch { throw .frame(error) }
            }
        }
    }

    /// Makes the reader thread ahead of ``startReader(deliver:onFailure:)``, parked
    /// until then (during the handshake: the thread's creation, a stack mapped and a
    /// clone, then overlaps the host's answer instead of delaying the first callback).
    func prepareReader() {
        parkedReader.withLock { parked in
            if parked == nil { parked = ParkedThread(name: "AppKitLess.reader") }
        }
    }

    /// Starts the reader thread: runs ``readLoop(deliver:)``, then `onFailure` once.
    /// Messages that came with the welcome are handed on first, on the calling thread, so
    /// the first callback (didFinishLaunching) does not wait for the thread to start.
    /// Uses the thread ``prepareReader()`` made, if it did.
    func startReader(
        deliver: @escaping @Sendable (_ seq: UInt64, _ callback: LifecycleCallback, _ state: AppState) -> Void,
        endOfBatch: @escaping @Sendable () -> Void = {},
        onFailure: @escaping @Sendable (ConnectionError) -> Void
    ) {
        do throws(ConnectionError) {
            for message in try takeBuffered() {
                if let error = dispatch(message, deliver: deliver) { throw error }
            }
            endOfBatch()
        } catch {
            endOfBatch()
            failRequests(with: error)
            onFailure(error)
            return
        }
        let body: @Sendable () -> Void = { [self] in
            onFailure(readLoop(deliver: deliver, endOfBatch: endOfBatch))
        }
        if let parked = parkedReader.withLock({ parked in defer { parked = nil }; return parked }) {
            parked.run(body)
        } else {
            let thread = Thread(block: body)
            thread.name = "AppKitLess.reader"
            thread.start()
        }
    }
}

/// A thread started before its work is known: it waits until ``run(_:)`` gives it
/// the work, once.
private final class ParkedThread: Sendable {
    private let go = DispatchSemaphore(value: 0)
    private let work = Mutex<(@Sendable () -> Void)?>(nil)

    init(name: String) {
        let thread = Thread { [self] in
            go.wait()
            work.withLock { $0 }?()
        }
        thread.name = name
        thread.start()
    }

    func run(_ body: @escaping @Sendable () -> Void) {
        work.withLock { $0 = body }
        go.signal()
    }
}

/// `send(2)` that reports a closed peer as EPIPE instead of raising SIGPIPE.
private func sendWithoutSIGPIPE(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    #if os(Linux)
    return send(fd, bytes, count, Int32(MSG_NOSIGNAL))
    #else
    return send(fd, bytes, count, 0)
    #endif
}

/// Requests in flight, keyed by id.
private struct RequestTable {
    var lastID: UInt64 = 0
    var waiters: [UInt64: ReplyWaiter] = [:]
    /// Set once the reader stopped; later requests fail at once.
    var failure: ConnectionError?
}

/// A request sent with ``Connection/startRequest(_:onReply:)``: its reply, once.
struct PendingReply: Sendable {
    fileprivate let waiter: ReplyWaiter

    /// Blocks until the reply (or the connection's failure) has arrived. Call once.
    func wait() throws(ConnectionError) -> HostReply {
        try waiter.wait()
    }
}

/// One blocked requester: a semaphore and the result the reader leaves for it.
private final class ReplyWaiter: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private let result = Mutex<Result<HostReply, ConnectionError>?>(nil)
    /// Told (on the reader thread) once the result is there; for pipelined requests.
    private let onReply: (@Sendable () -> Void)?

    init(onReply: (@Sendable () -> Void)? = nil) {
        self.onReply = onReply
    }

    func resume(with result: Result<HostReply, ConnectionError>) {
        self.result.withLock { $0 = result }
        semaphore.signal()
        onReply?()
    }

    func wait() throws(ConnectionError) -> HostReply {
        semaphore.wait()
        guard let result = result.withLock({ $0 }) else {
            throw .unexpected("request woken without a reply")
        }
        return try result.get()
    }
}
