import AppHostProtocol
import NIOCore
import NIOPosix
import Testing
@testable import Host

#if canImport(Glibc)
import Glibc
#endif

/// ``SocketWriter`` through a real socketpair and a real NIO channel on its other descriptor.
@Suite struct SocketWriterTests {
    /// A socketpair: `[0]` the host's end (given to a channel and duplicated), `[1]` the app's.
    func socketPair() throws -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            throw SocketWriterTestError(errno)
        }
        return (fds[0], fds[1])
    }

    /// Reads exactly `count` bytes (blocking) from `fd`.
    private func readAll(_ fd: Int32, count: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + got, count - got) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw SocketWriterTestError(n < 0 ? errno : EIO) }
            got += n
        }
        return out
    }

    /// A socketpair whose host end a channel and a writer (on a duplicate) share.
    private struct Pair {
        let app: Int32
        let group: MultiThreadedEventLoopGroup
        let duplicate: Int32
        let channel: any Channel
        let writer: SocketWriter

        static func make(_ tests: SocketWriterTests) async throws -> Pair {
            let (host, app) = try tests.socketPair()
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            let duplicate = fcntl(host, F_DUPFD_CLOEXEC, 0)
            let channel = try await ClientBootstrap(group: group).withConnectedSocket(host).get()
            return Pair(app: app, group: group, duplicate: duplicate, channel: channel, writer: SocketWriter(descriptor: duplicate))
        }

        /// Sends 1,000-byte frames nobody reads until the socket's buffer is full and the
        /// writer hands over; returns what it sent and how many frames.
        func fillUntilHandedOver() -> (bytes: [UInt8], frames: Int) {
            var sent: [UInt8] = []
            var frame = 0
            while !writer.handedOver && frame < 100_000 {
                let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: frame &+ $0) }
                writer.send(bytes, else: channel)
                sent += bytes
                frame += 1
            }
            return (sent, frame)
        }

        func close() async throws {
            writer.close()
            try await channel.close()
            try await group.shutdownGracefully()
            _ = Glibc.close(app)
        }
    }

    @Test func framesGoDirectlyThenThroughTheChannelInOrderOnceTheBufferIsFull() async throws {
        let pair = try await Pair.make(self)
        #expect(pair.duplicate >= 0)
        // Nobody reads the app's end: the socket's buffer fills, and the writer hands over.
        var (expected, frames) = pair.fillUntilHandedOver()
        #expect(pair.writer.handedOver, "the socket's buffer filled")
        #expect(frames > 1, "the first frames went directly")
        for k in 0..<5 {
            let bytes = [UInt8](repeating: UInt8(k), count: 777)
            pair.writer.send(bytes, else: pair.channel)
            expected += bytes
        }
        // Everything arrives once, in order: direct bytes first, then the channel's.
        let received = try readAll(pair.app, count: expected.count)
        #expect(received == expected)
        try await pair.close()
    }

    /// Once the channel has written everything it was handed (the app read), frames go
    /// directly again, still in order.
    @Test func framesGoDirectlyAgainOnceTheChannelHasWrittenItsShare() async throws {
        let pair = try await Pair.make(self)
        var (expected, _) = pair.fillUntilHandedOver()
        #expect(pair.writer.handedOver, "the socket's buffer filled")
        let queued = [UInt8](repeating: 7, count: 333)
        pair.writer.send(queued, else: pair.channel)
        expected += queued
        // The app reads everything; the channel then finishes its writes.
        #expect(try readAll(pair.app, count: expected.count) == expected)
        var rounds = 0
        while pair.writer.handedOver && rounds < 10_000 {
            // A round trip through the channel's loop, where its writes complete.
            try await pair.channel.eventLoop.submit {}.get()
            rounds += 1
        }
        #expect(!pair.writer.handedOver, "direct again once the channel's writes were done")
        pair.writer.send([1, 2, 3], else: pair.channel)
        #expect(!pair.writer.handedOver)
        #expect(try readAll(pair.app, count: 3) == [1, 2, 3])
        try await pair.close()
    }

    @Test func closingTheWriterLeavesTheSocketToTheChannel() async throws {
        let pair = try await Pair.make(self)
        let (app, group, duplicate, channel, writer) = (pair.app, pair.group, pair.duplicate, pair.channel, pair.writer)
        defer { _ = close(app) }
        writer.send([1, 2, 3], else: channel)
        writer.close()
        #expect(fcntl(duplicate, F_GETFD) == -1, "the duplicate is closed")
        writer.send([4, 5], else: channel)
        #expect(try readAll(app, count: 5) == [1, 2, 3, 4, 5])
        // Once the channel closes its descriptor, the app sees EOF: nothing else holds the socket.
        try await channel.close()
        var byte: UInt8 = 0
        #expect(Glibc.read(app, &byte, 1) == 0)
        try await group.shutdownGracefully()
    }
}

/// ``HelloAnswer``: the connection's handler answers the app's first `hello` itself, once,
/// and only in this host's protocol version.
@Suite struct HelloAnswerTests {
    @Test func theFirstHelloInThisVersionIsAnsweredOnceAndNothingElseIs() async throws {
        let pair = try await AttachedPair.make()
        let channel = pair.channel
        let welcome = try Frame.encode(HostMessage.welcome(version: IPCProtocol.version, bundleIdentifier: "com.example.a", screen: .default))
        let answer = HelloAnswer(welcome: welcome)

        // No writer yet (the connection is not attached): nothing is sent, the supervisor answers.
        answer.answer(version: IPCProtocol.version, channel: channel)
        #expect(!answer.answered)

        let writer = SocketWriter(descriptor: pair.duplicate)
        answer.writer = writer
        answer.answer(version: IPCProtocol.version + 1, channel: channel)
        #expect(!answer.answered, "a hello in another version is the supervisor's to reject")
        answer.answer(version: IPCProtocol.version, channel: channel)
        #expect(answer.answered)
        answer.answer(version: IPCProtocol.version, channel: channel)
        writer.send([0xAB], else: channel)

        // Exactly one welcome, then what the supervisor wrote after it.
        #expect(pair.read(welcome.count + 1) == welcome + [0xAB])
        #expect(pair.nothingMore(), "nothing more was sent")
        writer.close()
        try await pair.close()
    }
}

/// The first callback (didFinishLaunching) goes out in the welcome's write, counted as a
/// callback the host sent; one withdrawn before the hello (the app's state changed) does not.
@Suite struct FirstCallbackTests {
    private func exchange(withdraw: Bool) async throws -> (received: [UInt8], welcome: [UInt8], first: [UInt8],
                                                            answer: HelloAnswer, callbacks: CallbacksSent) {
        let pair = try await AttachedPair.make()
        let welcome = try Frame.encode(HostMessage.welcome(version: IPCProtocol.version, bundleIdentifier: "com.example.a", screen: .default))
        let first = try Frame.encode(HostMessage.callback(seq: 1, callback: .didFinishLaunching(options: LaunchOptions(reason: .user)),
                                                          state: .inactive))
        let callbacks = CallbacksSent()
        let answer = HelloAnswer(welcome: welcome, firstCallback: first, state: .inactive, sequence: 1, callbacks: callbacks)
        let writer = SocketWriter(descriptor: pair.duplicate)
        answer.writer = writer
        if withdraw { #expect(answer.withdrawFirstCallback()) }
        #expect(!callbacks.covers(1))
        answer.answer(version: IPCProtocol.version, channel: pair.channel)
        #expect(!answer.withdrawFirstCallback() || withdraw, "a first callback that went out cannot be withdrawn")
        writer.send([0xAB], else: pair.channel)
        let received = pair.read((withdraw ? welcome : welcome + first).count + 1)
        #expect(pair.nothingMore(), "nothing more was sent")
        writer.close()
        try await pair.close()
        return (received, welcome, first, answer, callbacks)
    }

    @Test func theFirstCallbackGoesOutWithTheWelcome() async throws {
        let r = try await exchange(withdraw: false)
        #expect(r.received == r.welcome + r.first + [0xAB])
        #expect(r.answer.firstCallbackSent)
        #expect(r.callbacks.covers(1), "its return is the host's answer, not counted against the app's rate")
    }

    @Test func aWithdrawnFirstCallbackIsLeftToTheSupervisor() async throws {
        let r = try await exchange(withdraw: true)
        #expect(r.received == r.welcome + [0xAB])
        #expect(!r.answer.firstCallbackSent)
        #expect(!r.callbacks.covers(1))
    }
}

/// A socketpair whose host end is a NIO channel, with a duplicate of it for a
/// ``SocketWriter``, as a launch attaches an app's connection; `app` is the app's end.
struct AttachedPair {
    let app: Int32
    let duplicate: Int32
    let channel: any Channel
    let group: MultiThreadedEventLoopGroup

    static func make() async throws -> AttachedPair {
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            throw SocketWriterTestError(errno)
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let duplicate = fcntl(fds[0], F_DUPFD_CLOEXEC, 0)
        let channel = try await ClientBootstrap(group: group).withConnectedSocket(fds[0]).get()
        return AttachedPair(app: fds[1], duplicate: duplicate, channel: channel, group: group)
    }

    /// Reads `count` bytes from the app's end (blocking), fewer if it ends.
    func read(_ count: Int) -> [UInt8] {
        var received = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = received.withUnsafeMutableBytes { Glibc.read(app, $0.baseAddress! + got, $0.count - got) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            got += n
        }
        return Array(received[..<got])
    }

    /// Whether nothing more is waiting at the app's end.
    func nothingMore() -> Bool {
        var extra: UInt8 = 0
        return Glibc.recv(app, &extra, 1, Int32(MSG_DONTWAIT)) == -1 && errno == EAGAIN
    }

    func close() async throws {
        try await channel.close()
        try await group.shutdownGracefully()
        _ = Glibc.close(app)
    }
}

struct SocketWriterTestError: Error {
    let code: Int32
    init(_ code: Int32) { self.code = code }
}
