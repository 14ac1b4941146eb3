import AppHostProtocol
@testable import AppKitLess
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The host's end of a socketpair, driven by a test: writes host messages and
/// reads app messages with the real frame codec. Reads block (with a 30 s
/// receive timeout as a safety net, so a bug fails the test instead of hanging it).
final class TestHost: @unchecked Sendable {
    let descriptor: Int32
    /// The app's end, for the `Connection` under test.
    let appDescriptor: Int32
    private var decoder = FrameDecoder()

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    init() throws {
        var fds: [Int32] = [-1, -1]
        // Close-on-exec: a process another test spawns meanwhile must not inherit an end
        // (a host end kept open in a child made "writing to a vanished host" succeed).
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            throw Failure(description: "socketpair: errno \(errno)")
        }
        descriptor = fds[0]
        appDescriptor = fds[1]
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Writes one host message as a frame.
    func send(_ message: HostMessage) throws {
        try sendRaw(Frame.encode(message))
    }

    /// Writes bytes as they are.
    func sendRaw(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            guard n > 0 else { throw Failure(description: "write: errno \(errno)") }
            offset += n
        }
    }

    /// The next whole app message, read on a thread of its own: the read blocks, and a
    /// blocked cooperative-pool thread can deadlock the suite. On a 2-core machine the pool
    /// has two threads; a test blocked in a read for a call that must run on the main
    /// thread, while the main thread runs another test's call whose reply needs a pool
    /// thread, held both until the receive timeout fired (seen in a loaded full run).
    /// Unchecked Sendable: a test awaits each receive before the next, so one thread at a
    /// time touches the decoder.
    func receive() async throws -> AppMessage {
        try await onThread { try self.receiveBlocking() }
    }

    /// The next whole app message, with `reply` written the moment it is read, on the same
    /// thread of its own. For a request the app blocks in (on the main queue, as a service
    /// call does) until its reply: written after the test's task resumed, the reply waited
    /// for a cooperative-pool thread, and the main queue, which every AppKitLess test
    /// shares, stayed blocked that long on each call. In a loaded full run (1,111 tests,
    /// two CPU hogs) three tests of 12 to 44 calls each went over their one-minute limits.
    /// The message is returned for the test to check (a wrong one fails it all the same).
    func receive(replying reply: HostMessage) async throws -> AppMessage {
        try await onThread {
            let message = try self.receiveBlocking()
            try self.send(reply)
            return message
        }
    }

    /// Blocks until one whole app message arrives; for code already on a thread of its own.
    func receiveBlocking() throws -> AppMessage {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let payload = try decoder.next() {
                return try Frame.decode(AppMessage.self, from: payload)
            }
            let n = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard n > 0 else { throw Failure(description: n == 0 ? "app closed the socket" : "read: errno \(errno)") }
            decoder.append(chunk[0..<n])
        }
    }

    /// Closes the host's end: the app sees end of stream.
    func closeHostEnd() {
        close(descriptor)
    }

    /// Closes the app's end; call only once no reader thread uses it.
    func closeAppEnd() {
        close(appDescriptor)
    }
}

/// Runs `body` on a new thread (not the cooperative pool) and returns its result,
/// for calls that block by design.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// A thread started at once (synchronously, needing no cooperative-pool thread)
/// whose result is awaited later. Tests that then block in socket reads on the
/// pool cannot starve it: on a 2-core machine the pool has two threads, and a
/// child task (`async let`) that must first get one to start its thread can wait
/// forever while other suites' blocking reads hold both.
final class StartedThread<T: Sendable>: Sendable {
    private let state = Mutex<(result: Result<T, any Error>?, waiter: CheckedContinuation<T, any Error>?)>((nil, nil))

    init(_ body: @escaping @Sendable () throws -> T) {
        Thread { self.finish(Result { try body() }) }.start()
    }

    private func finish(_ result: Result<T, any Error>) {
        let waiter = state.withLock { s -> CheckedContinuation<T, any Error>? in
            s.result = result
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(with: result)
    }

    /// The body's result, once it has returned.
    var value: T {
        get async throws {
            try await withCheckedThrowingContinuation { c in
                let done = state.withLock { s -> Result<T, any Error>? in
                    if s.result == nil { s.waiter = c }
                    return s.result
                }
                if let done { c.resume(with: done) }
            }
        }
    }
}

/// Process effects that record instead of exiting.
final class RecordedEffects: Sendable {
    private let exits: AsyncStream<Int32>
    private let exitContinuation: AsyncStream<Int32>.Continuation
    private let lines = Mutex<[String]>([])

    init() {
        (exits, exitContinuation) = AsyncStream.makeStream()
    }

    /// Effects for the SDK that land here.
    var effects: ProcessEffects {
        ProcessEffects(exit: { self.exitContinuation.yield($0) }, log: { line in self.lines.withLock { $0.append(line) } })
    }

    /// Lines logged so far.
    var log: [String] { lines.withLock { $0 } }

    /// Takes the lines matching `predicate` out of the log.
    func forget(where predicate: (String) -> Bool) {
        lines.withLock { $0.removeAll(where: predicate) }
    }

    /// Waits for the first exit the code under test asks for. Call once per recorder.
    func firstExit() async -> Int32? {
        for await code in exits { return code }
        return nil
    }
}
