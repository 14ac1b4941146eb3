import AppHostProtocol
import HostConfig
import NIOCore
import Synchronization

/// Reads frames from one app's IPC socket and forwards decoded messages, in order,
/// to the supervisor's input stream. A malformed or oversized frame, a flood of
/// messages past the app's rate, or a reply buffer the app lets fill reports a
/// violation (the supervisor then kills the app with a report) and nothing more is read.
final class AppConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let app: BundleID
    private let instance: UInt64
    private let input: AsyncStream<Supervisor.Input>.Continuation
    private let bounds: AppBounds
    private var decoder = FrameDecoder()
    private var rate: MessageRateLimiter
    /// The rate's origin: real time, as the handler sees messages arrive.
    private let born = ContinuousClock.now
    private var broken = false
    private let hello: HelloAnswer?
    private let callbacks: CallbacksSent?
    /// The app's stdout and stderr, drained before its messages go on (see ``AppLogPump``).
    private let logPump: AppLogPump?

    init(app: BundleID, instance: UInt64, input: AsyncStream<Supervisor.Input>.Continuation, bounds: AppBounds = .standard,
         hello: HelloAnswer? = nil, callbacks: CallbacksSent? = nil, logPump: AppLogPump? = nil) {
        self.logPump = logPump
        self.app = app
        self.instance = instance
        self.input = input
        self.bounds = bounds
        self.hello = hello
        self.callbacks = callbacks
        rate = MessageRateLimiter(burst: bounds.messageBurst, perSecond: bounds.messagesPerSecond, at: .zero)
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
                guard answersTheHost || rate.take(at: .now - born) else {
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
        guard !messages.isEmpty else { return }
        // What the app printed before these is in its log before the host acts on them.
        logPump?.drain()
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
/// handshake, the first callback's bookkeeping): the welcome is the same for every valid
/// hello of a launch, and so is the first callback, `didFinishLaunching` with the launch's
/// options and state, which goes in the same write unless the supervisor withdrew it (the
/// app's state changed before its hello). Sent once, for a hello in this host's protocol
/// version, through the runtime's ``SocketWriter`` (set before the channel reads
/// anything), so it precedes every frame the supervisor sends. A hello in another
/// version, or a second one, is left to the supervisor (a rejection, a violation).
final class HelloAnswer: Sendable {
    private struct State {
        var writer: SocketWriter?
        var answered = false
        /// The first callback's frame until it is sent or withdrawn.
        var firstCallback: [UInt8]?
        var firstCallbackSent = false
    }

    private let welcome: [UInt8]
    /// The app's state in the first callback.
    let firstState: AppState?
    private let firstSequence: UInt64
    private let callbacks: CallbacksSent?
    private let state: Mutex<State>

    init(welcome: [UInt8], firstCallback: [UInt8]? = nil, state: AppState? = nil, sequence: UInt64 = 0,
         callbacks: CallbacksSent? = nil) {
        self.welcome = welcome
        self.firstState = state
        self.firstSequence = sequence
        self.callbacks = callbacks
        self.state = Mutex(State(firstCallback: firstCallback?.isEmpty == false && callbacks != nil ? firstCallback : nil))
    }

    /// The runtime's writer; set before the channel reads.
    var writer: SocketWriter? {
        get { state.withLock { $0.writer } }
        set { state.withLock { $0.writer = newValue } }
    }

    /// Whether the welcome went out (before the handler passed the hello on).
    var answered: Bool { state.withLock { $0.answered } }

    /// Whether the first callback went out with the welcome.
    var firstCallbackSent: Bool { state.withLock { $0.firstCallbackSent } }

    /// Keeps the first callback from going out with the welcome (its state is no longer
    /// the app's); false if it went out already.
    @discardableResult
    func withdrawFirstCallback() -> Bool {
        state.withLock { state in
            guard !state.firstCallbackSent else { return false }
            state.firstCallback = nil
            return true
        }
    }

    func answer(version: Int, channel: any Channel) {
        guard version == IPCProtocol.version, !welcome.isEmpty else { return }
        let (writer, first) = state.withLock { state -> (SocketWriter?, [UInt8]?) in
            guard !state.answered, let writer = state.writer else { return (nil, nil) }
            state.answered = true
            state.writer = nil // needed once; the runtime keeps its own
            let first = state.firstCallback
            state.firstCallback = nil
            state.firstCallbackSent = first != nil
            return (writer, first)
        }
        guard let writer else { return }
        if let first {
            // Before it is written: its return is the host's answer, not the app's message.
            callbacks?.sent(firstSequence)
            writer.send(welcome + first, else: channel)
        } else {
            writer.send(welcome, else: channel)
        }
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
