import AppHostProtocol
@testable import AppKitLess
import Foundation
import Testing

/// What a reader thread delivered: callbacks, then the reason it stopped.
private final class ReaderEvents: Sendable {
    let callbacks: AsyncStream<HostMessage>
    let failure: AsyncStream<ConnectionError>
    private let callbackSink: AsyncStream<HostMessage>.Continuation
    private let failureSink: AsyncStream<ConnectionError>.Continuation

    init(_ connection: Connection) {
        (callbacks, callbackSink) = AsyncStream.makeStream()
        (failure, failureSink) = AsyncStream.makeStream()
        connection.startReader(
            deliver: { [callbackSink] seq, callback, state in
                callbackSink.yield(.callback(seq: seq, callback: callback, state: state))
            },
            onFailure: { [failureSink] error in
                failureSink.yield(error)
                failureSink.finish()
            }
        )
    }

    /// Waits for the reader to stop.
    func stopped() async -> ConnectionError? {
        for await error in failure { return error }
        return nil
    }
}

@Suite("Connection", .serialized, .timeLimit(.minutes(3)))
struct ConnectionTests {
    @Test("hello is the first message and welcome yields the bundle identifier")
    func handshake() throws {
        let host = try TestHost()
        defer { host.closeHostEnd(); host.closeAppEnd() }
        let connection = Connection(descriptor: host.appDescriptor)
        try host.send(.welcome(version: IPCProtocol.version, bundleIdentifier: "com.example.plain"))

        #expect(try connection.handshake(pid: 4242).bundleIdentifier == "com.example.plain")
        #expect(try host.receiveBlocking() == .hello(version: IPCProtocol.version, pid: 4242))
    }

    @Test("the welcome tells the app the host's screen; an older host's welcome means the default screen")
    func welcomeScreen() throws {
        let big = ScreenSize(width: 1500, height: 3000, scale: 2)
        for (sent, expected) in [(big, big), (nil, ScreenSize.default), (ScreenSize(width: 10, height: 10, scale: 0), .default)] {
            let host = try TestHost()
            defer { host.closeHostEnd(); host.closeAppEnd() }
            let connection = Connection(descriptor: host.appDescriptor)
            try host.send(.welcome(version: IPCProtocol.version, bundleIdentifier: "com.example.plain", screen: sent))
            #expect(try connection.handshake(pid: 1) == Connection.Welcome(bundleIdentifier: "com.example.plain", screen: expected))
        }
        // What a host from before the screen was sent writes: no "screen" key at all.
        let old = #"{"welcome":{"version":1,"bundleIdentifier":"com.example.plain"}}"#
        let decoded = try Frame.decode(HostMessage.self, from: Array(old.utf8))
        #expect(decoded == .welcome(version: 1, bundleIdentifier: "com.example.plain", screen: nil))
    }

    @Test("a rejected handshake throws the host's reason")
    func rejected() throws {
        let host = try TestHost()
        defer { host.closeHostEnd(); host.closeAppEnd() }
        let connection = Connection(descriptor: host.appDescriptor)
        try host.send(.rejected(reason: "com.example.nope is not installed"))

        #expect(throws: ConnectionError.rejected(reason: "com.example.nope is not installed")) {
            try connection.handshake(pid: 1)
        }
    }

    @Test("a welcome with another protocol version is refused")
    func versionMismatch() throws {
        let host = try TestHost()
        defer { host.closeHostEnd(); host.closeAppEnd() }
        let connection = Connection(descriptor: host.appDescriptor)
        try host.send(.welcome(version: IPCProtocol.version + 1, bundleIdentifier: "x"))

        #expect(throws: ConnectionError.versionMismatch(host: IPCProtocol.version + 1, app: IPCProtocol.version)) {
            try connection.handshake(pid: 1)
        }
    }

    @Test("a callback before the welcome is a protocol violation")
    func callbackBeforeWelcome() throws {
        let host = try TestHost()
        defer { host.closeHostEnd(); host.closeAppEnd() }
        let connection = Connection(descriptor: host.appDescriptor)
        try host.send(.callback(seq: 1, callback: .didBecomeActive, state: .active))

        let error = #expect(throws: ConnectionError.self) { try connection.handshake(pid: 1) }
        guard case .unexpected = error else {
            Issue.record("expected .unexpected, got \(String(describing: error))")
            return
        }
    }

    @Test("a host that closes before answering is reported as closed")
    func closedBeforeWelcome() throws {
        let host = try TestHost()
        defer { host.closeAppEnd() }
        let connection = Connection(descriptor: host.appDescriptor)
        host.closeHostEnd()

        // Sending hello to a closed peer fails with EPIPE (not SIGPIPE), or the read sees EOF.
        #expect(throws: ConnectionError.closed) { try connection.handshake(pid: 1) }
    }

    @Test("work given to the handshake runs once hello is out; a reader made then reads after it")
    func workWhileTheHostAnswers() async throws {
        let host = try TestHost()
        let connection = Connection(descriptor: host.appDescriptor)
        var helloWasOut = false
        let welcome = try connection.handshake(pid: 7) {
            // The host can only have this hello if it was sent before the work began.
            helloWasOut = (try? host.receiveBlocking()) == .hello(version: IPCProtocol.version, pid: 7)
            connection.prepareReader()
            try? host.send(.welcome(version: IPCProtocol.version, bundleIdentifier: "com.example.plain"))
        }
        #expect(helloWasOut)
        #expect(welcome.bundleIdentifier == "com.example.plain")
        // The parked thread takes the reading over: a callback sent now arrives.
        let events = ReaderEvents(connection)
        let callback = HostMessage.callback(seq: 1, callback: .didFinishLaunching(options: LaunchOptions(reason: .user)), state: .inactive)
        try host.send(callback)
        for await message in events.callbacks {
            #expect(message == callback)
            break
        }
        host.closeHostEnd()
        #expect(await events.stopped() == .closed)
        host.closeAppEnd()
    }

    @Test("callbacks reach the reader's consumer in arrival order")
    func callbacksInOrder() async throws {
        let host = try TestHost()
        let connection = Connection(descriptor: host.appDescriptor)
        let events = ReaderEvents(connection)
        let sent: [HostMessage] = [
            .callback(seq: 1, callback: .didFinishLaunching(options: LaunchOptions(reason: .user, arguments: ["-v"])), state: .inactive),
            .callback(seq: 2, callback: .didBecomeActive, state: .active),
            .callback(seq: 3, callback: .willResignActive, state: .inactive),
            .callback(seq: 4, callback: .didEnterBackground, state: .background),
        ]
        // One write holding all four frames: the reader must split them itself.
        try host.sendRaw(sent.flatMap { try Frame.encode($0) })

        var received: [HostMessage] = []
        for await message in events.callbacks {
            received.append(message)
            if received.count == sent.count { break }
        }
        #expect(received == sent)

        host.closeHostEnd()
        #expect(await events.stopped() == .closed)
        host.closeAppEnd()
    }

    @Test("a request blocks until its reply, while callbacks keep flowing")
    func requestReply() async throws {
        let host = try TestHost()
        let connection = Connection(descriptor: host.appDescriptor)
        let events = ReaderEvents(connection)

        let first = StartedThread { try connection.request(.backgroundTimeRemaining) }
        #expect(try await host.receive() == .request(id: 1, request: .backgroundTimeRemaining))
        // A callback arriving while the requester waits goes to the consumer, not to the requester.
        try host.send(.callback(seq: 1, callback: .didEnterBackground, state: .background))
        var iterator = events.callbacks.makeAsyncIterator()
        #expect(await iterator.next() == .callback(seq: 1, callback: .didEnterBackground, state: .background))
        try host.send(.reply(id: 1, reply: .backgroundTimeRemaining(seconds: 29.5)))
        #expect(try await first.value == .backgroundTimeRemaining(seconds: 29.5))

        let second = StartedThread { try connection.request(.backgroundTimeRemaining) }
        #expect(try await host.receive(replying: .reply(id: 2, reply: .failed(reason: "not now"))) == .request(id: 2, request: .backgroundTimeRemaining))
        #expect(try await second.value == .failed(reason: "not now"))

        host.closeHostEnd()
        #expect(await events.stopped() == .closed)
        host.closeAppEnd()
    }

    @Test("end of stream fails the waiting request and every later one")
    func endOfStreamFailsRequests() async throws {
        let host = try TestHost()
        let connection = Connection(descriptor: host.appDescriptor)
        let events = ReaderEvents(connection)

        let waiting = StartedThread { Result { () throws(ConnectionError) in try connection.request(.backgroundTimeRemaining) } }
        #expect(try await host.receive() == .request(id: 1, request: .backgroundTimeRemaining))
        host.closeHostEnd()

        #expect(try await waiting.value == .failure(.closed))
        #expect(await events.stopped() == .closed)
        #expect(throws: ConnectionError.closed) { try connection.request(.backgroundTimeRemaining) }
        host.closeAppEnd()
    }

    @Test("held returns go out together, before any later frame, in the order made")
    func heldReturnsPrecedeTheNextFrame() throws {
        let host = try TestHost()
        defer { host.closeHostEnd(); host.closeAppEnd() }
        let connection = Connection(descriptor: host.appDescriptor)
        try connection.holdReturn(seq: 1)
        try connection.holdReturn(seq: 2)
        try connection.send(.endBackgroundTask(id: 9))
        try connection.holdReturn(seq: 3)
        connection.flushHeldReturns()
        #expect(try host.receiveBlocking() == .callbackReturned(seq: 1))
        #expect(try host.receiveBlocking() == .callbackReturned(seq: 2))
        #expect(try host.receiveBlocking() == .endBackgroundTask(id: 9))
        #expect(try host.receiveBlocking() == .callbackReturned(seq: 3))
    }

    /// Nothing else is sent and the batch does not end (its next callback hangs on the
    /// main thread): the held returns still reach the host, written by the reader, which
    /// waits in slices while a batch may hold returns. (Without that this read would wait
    /// for its 30 s timeout.)
    @Test("a held return reaches the host on its own within the bound")
    func aHeldReturnIsFlushedWithoutTheBatchEnding() async throws {
        let host = try TestHost()
        let connection = Connection(descriptor: host.appDescriptor)
        // As the reader does when it hands a batch of callbacks to the main queue.
        connection.beginHoldingReturns()
        let events = ReaderEvents(connection)
        try connection.holdReturn(seq: 41)
        #expect(try await host.receive() == .callbackReturned(seq: 41))
        try connection.holdReturn(seq: 42)
        #expect(try await host.receive() == .callbackReturned(seq: 42))
        connection.endHoldingReturns()
        host.closeHostEnd()
        #expect(await events.stopped() == .closed)
        host.closeAppEnd()
    }

    @Test("writing to a vanished host is an error, not SIGPIPE")
    func sendAfterClose() throws {
        let host = try TestHost()
        defer { host.closeAppEnd() }
        let connection = Connection(descriptor: host.appDescriptor)
        host.closeHostEnd()

        #expect(throws: ConnectionError.closed) { try connection.send(.endBackgroundTask(id: 1)) }
    }

    /// Host input that must stop the reader, and how.
    enum BadInput: String, CaseIterable, CustomTestStringConvertible {
        case notJSON, notAHostMessage, oversizedHeader, truncatedFrame, replyToNobody, secondWelcome, rejectedLater

        var testDescription: String { rawValue }

        var bytes: [UInt8] {
            switch self {
            case .notJSON: [0, 0, 0, 5] + Array("hello".utf8)
            case .notAHostMessage: [0, 0, 0, 2] + Array("{}".utf8)
            case .oversizedHeader: [0x06, 0x40, 0, 0]  // 100 MiB announced
            case .truncatedFrame: [0, 0, 0, 50] + Array("{\"welc".utf8)
            case .replyToNobody: (try? Frame.encode(HostMessage.reply(id: 99, reply: .backgroundTimeRemaining(seconds: 1)))) ?? []
            case .secondWelcome: (try? Frame.encode(HostMessage.welcome(version: IPCProtocol.version, bundleIdentifier: "x"))) ?? []
            case .rejectedLater: (try? Frame.encode(HostMessage.rejected(reason: "uninstalled"))) ?? []
            }
        }

        func matches(_ error: ConnectionError?) -> Bool {
            switch (self, error) {
            case (.notJSON, .frame(.malformed)), (.notAHostMessage, .frame(.malformed)): true
            case (.oversizedHeader, .frame(.oversized(length: 100 << 20, maximum: Frame.maximumPayload))): true
            case (.truncatedFrame, .frame(.truncated(buffered: 10))): true
            case (.replyToNobody, .unexpected), (.secondWelcome, .unexpected): true
            case (.rejectedLater, .rejected(reason: "uninstalled")): true
            default: false
            }
        }
    }

    @Test("invalid host input stops the reader with a clear error", arguments: BadInput.allCases)
    func badInput(_ input: BadInput) async throws {
        let host = try TestHost()
        let connection = Connection(descriptor: host.appDescriptor)
        let events = ReaderEvents(connection)
        try host.sendRaw(input.bytes)
        if input == .truncatedFrame { host.closeHostEnd() }

        let error = await events.stopped()
        #expect(input.matches(error), "got \(String(describing: error))")
        if input != .truncatedFrame { host.closeHostEnd() }
        host.closeAppEnd()
    }

    @Test("frames written from many threads at once never interleave")
    func concurrentWrites() async throws {
        let host = try TestHost()
        defer { host.closeHostEnd(); host.closeAppEnd() }
        let connection = Connection(descriptor: host.appDescriptor)
        let threads = 8, perThread = 250
        // A long name makes frames large enough that partial writes and lock contention happen.
        let name = String(repeating: "x", count: 2000)

        let writers = (0..<threads).map { t in
            StartedThread {
                for i in 0..<perThread { try connection.send(.beginBackgroundTask(id: BackgroundTaskID(t * perThread + i), name: name)) }
            }
        }
        var seen = Set<Int>()
        for _ in 0..<(threads * perThread) {
            guard case .beginBackgroundTask(let id, name) = try await host.receive() else {
                Issue.record("unexpected message")
                return
            }
            seen.insert(id.rawValue)
        }
        for w in writers { try await w.value }
        #expect(seen.count == threads * perThread)
    }
}

@Suite("BackgroundTaskTable")
struct BackgroundTaskTableTests {
    @Test("ids start at 1 and an ended or unknown id is not found")
    func ids() {
        var table = BackgroundTaskTable()
        #expect(table.begin(name: "a", expirationHandler: nil) == 1)
        #expect(table.begin(name: nil, expirationHandler: nil) == 2)
        #expect(table.end(1)?.name == "a")
        #expect(table.end(1) == nil)
        #expect(table.end(7) == nil)
        #expect(table.end(BackgroundTaskIdentifier.invalid.rawValue) == nil)
        #expect(table.begin(name: "b", expirationHandler: nil) == 3)
    }
}
