import AppHostProtocol
import NIOCore
import Synchronization

/// Reads frames from one app's IPC socket and forwards decoded messages, in order,
/// to the supervisor's input stream. A malformed or oversized frame, a flood of
/// messages past the app's rate, or a reply buffer the app lets fill reports a
/// violation (the supervisor then kills the app with a report) and nothing more is read.
final class AppConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let app: String
    private let instance: UInt64
    private let input: AsyncStream<Supervisor.Input>.Continuation
    private let bounds: AppBounds
    private var decoder = FrameDecoder()
    private var rate: MessageRateLimiter
    private var broken = false
    private let hello: HelloAnswer?
    private let callbacks: CallbacksSent?

    init(app: String, instance: UInt64, input: AsyncStream<Supervisor.Input>.Continuation, bounds: AppBounds = .standard,
         hello: HelloAnswer? = nil, callbacks: CallbacksSent? = nil) {
        self.app = app
        self.instance = instance
        self.input = input
        self.bounds = bounds
        self.hello = hello
        self.callbacks = callbacks
        rate = MessageRateLimiter(burst: bounds.messageBurst, perSecond: bounds.messagesPerSecond)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !broken else { return }
        let buffer = unwrapInboundIn(data)
        decoder.append(buffer.readableBytesView)
        // The messages of this read go on together, in order: a pipelined burst (ten
        // thousand `resume()`s) is one step of the supervisor per read, not one per frame.
        var messages: [AppMessage] = []
        defer { forward(messages) }
        do {
            while let payload = try decoder.next() {
                let message = try Frame.decode(AppMessage.self, from: payload)
                // Counted here, where it is read, so a flood never piles up in the
                // supervisor's input stream: the app is stopped at the rate it crosses.
                // The return of a callback the host sent is not the app's to multiply
                // (a second return of one is a violation that ends the app): it is not
                // counted, so ten thousand downloads' callbacks are no flood.
                let answersTheHost: Bool
                if case .callbackReturned(let seq) = message, callbacks?.covers(seq) == true { answersTheHost = true } else { answersTheHost = false }
                guard answersTheHost || rate.take() else {
                    forward(messages)
                    messages = []
                    fail("flooded the host: more than \(bounds.messageBurst) messages at once, or more than \(bounds.messagesPerSecond) a second after that")
                    return
                }
                if case .hello(let version, _) = message { hello?.answer(version: version, channel: context.channel) }
                messages.append(message)
            }
        } catch {
            // Stop reading; the supervisor kills the app, and its death closes the
            // socket. Closing first would let the app exit on EOF before the kill.
            forward(messages)
            messages = []
            fail("\(error)")
        }
    }

    private func forward(_ messages: [AppMessage]) {
        switch messages.count {
        case 0: return
        case 1: input.yield(.message(app: app, instance: instance, messages[0]))
        default: input.yield(.messages(app: app, instance: instance, messages))
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if !context.channel.isWritable, !broken {
            fail("does not read what the host sends: more than \(ByteCountText.format(UInt64(bounds.unreadBytes))) of replies and callbacks wait unread")
        }
        context.fireChannelWritabilityChanged()
    }

    private func fail(_ reason: String) {
        broken = true
        input.yield(.violation(app: app, instance: instance, reason))
    }

    func channelInactive(context: ChannelHandlerContext) {
        input.yield(.disconnected(app: app, instance: instance))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// The answer to an app's `hello`, sent by its connection's handler where the hello is
/// read instead of after a hop to the supervisor (which still handles the hello: the
/// handshake, the first callback): the welcome is the same for every valid hello of a
/// launch, and the app's first callback follows it sooner. Sent once, for a hello in
/// this host's protocol version, through the runtime's ``SocketWriter`` (set before
/// the channel reads anything), so it precedes every frame the supervisor sends. A hello
/// in another version, or a second one, is left to the supervisor (a rejection, a
/// violation).
final class HelloAnswer: Sendable {
    private struct State {
        var writer: SocketWriter?
        var answered = false
    }

    private let welcome: [UInt8]
    private let state = Mutex(State())

    init(welcome: [UInt8]) {
        self.welcome = welcome
    }

    /// The runtime's writer; set before the channel reads.
    var writer: SocketWriter? {
        get { state.withLock { $0.writer } }
        set { state.withLock { $0.writer = newValue } }
    }

    /// Whether the welcome went out (before the handler passed the hello on).
    var answered: Bool { state.withLock { $0.answered } }

    func answer(version: Int, channel: any Channel) {
        guard version == IPCProtocol.version, !welcome.isEmpty else { return }
        let writer = state.withLock { state -> SocketWriter? in
            guard !state.answered, let writer = state.writer else { return nil }
            state.answered = true
            state.writer = nil // needed once; the runtime keeps its own
            return writer
        }
        writer?.send(welcome, else: channel)
    }
}

/// The highest callback sequence number the host has sent an app's process, shared
/// with the connection's handler, which does not count returns up to it against the
/// app's message rate.
final class CallbacksSent: Sendable {
    private let highest = Atomic<UInt64>(0)

    /// Called before callback `seq` is written.
    func sent(_ seq: UInt64) {
        highest.store(seq, ordering: .releasing)
    }

    func covers(_ seq: UInt64) -> Bool {
        seq <= highest.load(ordering: .acquiring)
    }
}
