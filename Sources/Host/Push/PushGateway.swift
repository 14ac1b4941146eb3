import AppHostProtocol
import AppHostSystem
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Plugins
import Synchronization

// The push gateway: the APNs provider API (HTTP/2, `POST /3/device/<token>`) on a
// local address, so a provider's own code (or curl) can push to the host's apps the
// way it pushes to Apple. One child channel per HTTP/2 stream; the semantic checks
// are the supervisor's (`Supervisor.apnsPush`), the wire rules are in APNsWire.swift
// (`APNsWire` parses a request head and builds answers as pure functions,
// `APNsRequestAssembler` turns one stream's frames into one request); its settings are
// in PushGatewaySettings.swift and a small client in PushGatewayClient.swift.

// MARK: - The server

/// An HTTP/2 server speaking the APNs provider API: `POST /3/device/<token>` with the
/// `apns-*` headers and a JSON body, answered as APNs answers (200 and `apns-id`, or a
/// status with `{"reason": ...}`). Cleartext HTTP/2 with prior knowledge (h2c) by
/// default, TLS with ALPN `h2` when given a certificate. Many streams on one
/// connection are served concurrently, each in a child task.
///
/// ```swift
/// let gateway = try await PushGateway.bind(settings: .init(port: 0), group: group, supervisor: supervisor, logger: logger)
/// let serving = Task { try await gateway.serve() }
/// print(gateway.url)        // http://127.0.0.1:40123
/// gateway.close()           // GOAWAY to every connection; serve() returns when they end
/// try await serving.value
/// ```
public final class PushGateway: Sendable {
    typealias StreamChannel = NIOAsyncChannel<HTTP2Frame.FramePayload, HTTP2Frame.FramePayload>

    struct Connection: Sendable {
        let channel: any Channel
        let multiplexer: NIOHTTP2Handler.AsyncStreamMultiplexer<StreamChannel>
        /// Closes the connection unless a stream opens first (``PushGatewaySettings/firstRequestTimeout``).
        let firstRequestDeadline: Scheduled<Void>
    }

    /// The file in the state directory naming where the host's gateway listens (`host:port`).
    public static let addressFileName = "push-gateway.address"
    /// How long connections get to finish their streams after ``close()`` before they are cut.
    public static let shutdownGrace: TimeAmount = .seconds(5)
    /// How much of a refused request's body is read and dropped before the stream is reset.
    static let maximumDroppedBody = 256 * 1024
    /// Streams one connection may have open at once (APNs allows up to 1000).
    public static let maximumConcurrentStreams = 1000

    /// What it was asked to do.
    public let settings: PushGatewaySettings
    /// The address it listens on.
    public let host: String
    /// The port it listens on (the real one when ``PushGatewaySettings/port`` was 0).
    public let port: Int

    private let server: NIOAsyncChannel<Connection, Never>
    private let responder: PushResponder
    /// Checks provider tokens; nil when token-based authentication is off.
    private let tokens: ProviderTokenVerifier?
    /// The wall clock provider tokens are checked against (tests pass their own).
    private let now: @Sendable () -> Date
    private let logger: Logger
    private struct State {
        var connections: [ObjectIdentifier: any Channel] = [:]
        var closing = false
        var statistics = Statistics()
    }
    private let state = Mutex(State())
    /// The memory a burst of connections took goes back once the last one closes.
    private let trim = BurstTrim()

    /// What the gateway has served so far.
    public struct Statistics: Sendable, Equatable {
        /// Connections accepted.
        public var connections = 0
        /// Streams (requests) opened on them.
        public var streams = 0
        /// Connections that a close() had to cut after ``shutdownGrace`` (a client that
        /// did not answer the GOAWAY's PING or kept streams open).
        public var cutAfterGrace = 0
        /// Connections closed at once because ``PushGatewaySettings/maximumConnections``
        /// were open.
        public var refusedOverLimit = 0

        /// Counts, for comparisons in tests.
        public init(connections: Int = 0, streams: Int = 0, cutAfterGrace: Int = 0) {
            self.connections = connections
            self.streams = streams
            self.cutAfterGrace = cutAfterGrace
        }
    }

    /// What the gateway has served so far.
    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// TLS or cleartext.
    public var isTLS: Bool { settings.tls != nil }
    /// `127.0.0.1:2197` (IPv6 in brackets).
    public var address: String { Self.hostPort(host, port) }
    /// `http://127.0.0.1:2197` or `https://…`.
    public var url: String { (isTLS ? "https://" : "http://") + address }
    /// `h2c` (cleartext, prior knowledge) or `h2` (TLS, ALPN).
    public var protocolName: String { isTLS ? "h2" : "h2c" }

    private init(settings: PushGatewaySettings, server: NIOAsyncChannel<Connection, Never>, responder: @escaping PushResponder,
                 tokens: ProviderTokenVerifier?, now: @escaping @Sendable () -> Date, logger: Logger) {
        self.settings = settings
        self.server = server
        self.responder = responder
        self.tokens = tokens
        self.now = now
        self.logger = logger
        let local = server.channel.localAddress
        host = local?.ipAddress ?? settings.host
        port = local?.port ?? settings.port
    }

    /// Binds a gateway whose pushes go to `supervisor` (``Supervisor/apnsPush(_:)``).
    public static func bind(settings: PushGatewaySettings, group: any EventLoopGroup, supervisor: Supervisor,
                            logger: Logger, now: @escaping @Sendable () -> Date = Date.init) async throws -> PushGateway {
        try await bind(settings: settings, group: group, logger: logger, now: now) { request in
            await supervisor.apnsPush(request)
        }
    }

    /// Binds a gateway answering with `responder` (tests and benchmarks pass their own).
    /// Throws ``PushGatewayError`` when the address, the certificate or an
    /// authentication key is unusable. `now` is the wall clock provider tokens' age is
    /// measured on.
    public static func bind(settings: PushGatewaySettings, group: any EventLoopGroup, logger: Logger,
                            now: @escaping @Sendable () -> Date = Date.init,
                            responder: @escaping PushResponder) async throws -> PushGateway {
        if settings.authentication.clientCAPath != nil, settings.tls == nil {
            throw PushGatewayError("client certificates (--apns-client-ca) need TLS: give --push-gateway-cert and --push-gateway-key")
        }
        let tls = try settings.tls.map { try makeTLSContext($0, clientRoots: try settings.authentication.clientTrustRoots()) }
        let tokens = settings.authentication.keys.isEmpty ? nil : try await ProviderTokenVerifier.load(settings.authentication.keys)
        let http2 = {
            var c = NIOHTTP2Handler.Configuration()
            c.connection.initialSettings = [
                HTTP2Setting(parameter: .maxConcurrentStreams, value: maximumConcurrentStreams),
                HTTP2Setting(parameter: .maxHeaderListSize, value: HPACKDecoder.defaultMaxHeaderListSize),
            ]
            return c
        }()
        // Providers keep their connections open between pushes; one with no stream for
        // `idleTimeout` is shut down gracefully (GOAWAY), as APNs does. No keep-alive: a
        // host with no connection has no timer to wake it.
        let management = NIOHTTP2ServerConnectionManagementHandler.Configuration(
            maxIdleTime: settings.idleTimeout.map { TimeAmount.nanoseconds($0.clampedNanoseconds) },
            maxAge: nil, maxGraceTime: shutdownGrace, keepalive: nil)
        let firstRequest = TimeAmount.nanoseconds(settings.firstRequestTimeout.clampedNanoseconds)
        let server: NIOAsyncChannel<Connection, Never>
        do {
            server = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .bind(host: settings.host, port: settings.port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        if let tls {
                            try sync.addHandler(NIOSSLServerHandler(context: tls))
                        }
                        // A connection that has not opened its first stream within the
                        // timeout (it never completes TLS, sends only the HTTP/2 preface, or
                        // nothing) holds a descriptor and memory for nothing: 20,000 such
                        // once took every descriptor of the host. Cancelled on the event loop
                        // as the first stream is made (not when a task gets to it).
                        let deadline = channel.eventLoop.scheduleTask(in: firstRequest) { channel.close(promise: nil) }
                        channel.closeFuture.whenComplete { _ in deadline.cancel() }
                        let multiplexer = try sync.configureAsyncHTTP2Pipeline(
                            mode: .server, connectionManagerConfiguration: management, http2HandlerConfiguration: http2
                        ) { stream in
                            deadline.cancel()
                            return stream.eventLoop.makeCompletedFuture { try StreamChannel(wrappingChannelSynchronously: stream) }
                        }
                        try sync.addHandler(ConnectionErrorCloser())
                        return Connection(channel: channel, multiplexer: multiplexer, firstRequestDeadline: deadline)
                    }
                }
        } catch {
            throw PushGatewayError("cannot listen for the push gateway on \(settings): \(error); choose another address or port (--push-gateway HOST:PORT, port 0 for any free one)")
        }
        return PushGateway(settings: settings, server: server, responder: responder, tokens: tokens, now: now, logger: logger)
    }

    private static func makeTLSContext(_ tls: PushGatewaySettings.TLS, clientRoots: NIOSSLTrustRoots?) throws -> NIOSSLContext {
        for (what, path) in [("certificate", tls.certificatePath), ("private key", tls.privateKeyPath)]
        where !FileManager.default.isReadableFile(atPath: path) {
            throw PushGatewayError("push gateway \(what) \(path): no such readable file")
        }
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(tls.certificatePath)
        } catch {
            throw PushGatewayError("push gateway certificate \(tls.certificatePath): \(error); expected a PEM file (-----BEGIN CERTIFICATE-----)")
        }
        guard !chain.isEmpty else {
            throw PushGatewayError("push gateway certificate \(tls.certificatePath): no certificate in it; expected a PEM file (-----BEGIN CERTIFICATE-----)")
        }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: tls.privateKeyPath, format: .pem)
        } catch {
            throw PushGatewayError("push gateway private key \(tls.privateKeyPath): \(error); expected an unencrypted PEM key (-----BEGIN PRIVATE KEY-----)")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) },
                                                                     privateKey: .privateKey(key))
        configuration.applicationProtocols = ["h2"]
        if let clientRoots {
            // Certificate-based provider authentication: the handshake fails for a client
            // without a certificate chained to these roots (no host name to check).
            configuration.certificateVerification = .noHostnameVerification
            configuration.trustRoots = clientRoots
        }
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw PushGatewayError("push gateway TLS: \(error); do the certificate and the key belong together?")
        }
    }

    /// Serves connections until ``close()``; returns once every connection has ended.
    public func serve() async throws {
        try await withThrowingDiscardingTaskGroup { group in
            try await server.executeThenClose { inbound in
                for try await connection in inbound {
                    // Counted here, in the order connections are accepted, not when their
                    // tasks start.
                    guard admit(connection) else { continue }
                    group.addTask { await self.serve(connection) }
                }
            }
        }
    }

    /// Stops accepting connections and shuts open ones down gracefully: GOAWAY, their
    /// streams finish (at most ``shutdownGrace``), then they close. Idempotent.
    public func close() {
        let open = state.withLock { s -> [any Channel] in
            s.closing = true
            return Array(s.connections.values)
        }
        server.channel.close(promise: nil)
        for channel in open { quiesce(channel) }
    }

    private func quiesce(_ channel: any Channel) {
        channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        // The management handler's own grace timer starts only once the client has
        // answered its PING; this one also covers a client that never does.
        let cut = channel.eventLoop.scheduleTask(in: Self.shutdownGrace) { [self] in
            state.withLock { $0.statistics.cutAfterGrace += 1 }
            channel.close(promise: nil)
        }
        channel.closeFuture.whenComplete { _ in cut.cancel() }
    }

    /// Takes a newly accepted connection in, or closes it at once when
    /// ``PushGatewaySettings/maximumConnections`` are open.
    private func admit(_ connection: Connection) -> Bool {
        let key = ObjectIdentifier(connection.channel)
        let limit = max(1, settings.maximumConnections)
        let (closing, full) = state.withLock { s -> (Bool, Bool) in
            s.statistics.connections += 1
            guard s.connections.count < limit else {
                s.statistics.refusedOverLimit += 1
                return (s.closing, true)
            }
            // Tracked even while closing, so that the limit holds; quiesced below.
            s.connections[key] = connection.channel
            trim.opened()
            return (s.closing, false)
        }
        if full {
            logger.notice("push gateway: \(limit) connections open (the limit): closed a new one")
            connection.firstRequestDeadline.cancel()
            connection.channel.close(promise: nil)
            return false
        }
        if closing { quiesce(connection.channel) }
        return true
    }

    private func serve(_ connection: Connection) async {
        let key = ObjectIdentifier(connection.channel)
        defer {
            _ = state.withLock { $0.connections.removeValue(forKey: key) }
            trim.closed()
        }
        await withDiscardingTaskGroup { streams in
            do {
                for try await stream in connection.multiplexer.inbound {
                    streams.addTask { await self.serve(stream) }
                }
            } catch {
                logger.debug("push gateway connection ended: \(error)")
            }
        }
    }

    private func serve(_ stream: StreamChannel) async {
        state.withLock { $0.statistics.streams += 1 }
        let responder = self.responder
        let (tokens, now) = (self.tokens, self.now)
        do {
            try await stream.executeThenClose { inbound, outbound in
                var frames = inbound.makeAsyncIterator()
                var assembler = APNsRequestAssembler()
                var answer: APNsWire.Response?
                var authenticated = tokens == nil
                loop: while let payload = try await frames.next() {
                    let step: APNsRequestAssembler.Step
                    switch payload {
                    case .headers(let h):
                        step = assembler.headers(h.headers.map { ($0.name, $0.value) }, endStream: h.endStream)
                    case .data(let d):
                        guard case .byteBuffer(let buffer) = d.data else { continue }
                        step = assembler.data(buffer.readableBytesView, endStream: d.endStream)
                    default:
                        continue
                    }
                    // Token-based authentication: checked once the head is read, before
                    // the body and before any other rule, as a connection-level check.
                    if !authenticated, let head = assembler.head, let tokens {
                        if let rejection = await tokens.check(head.authorization, now: now()) {
                            answer = APNsWire.response(.failure(rejection), requestAPNsID: head.request.apnsID, now: Date())
                            break loop
                        }
                        authenticated = true
                    }
                    switch step {
                    case .more:
                        continue
                    case .complete(let request):
                        let result = await responder(request)
                        answer = APNsWire.response(result, requestAPNsID: request.apnsID, now: Date())
                        break loop
                    case .reject(let rejection, let apnsID):
                        answer = APNsWire.response(.failure(rejection), requestAPNsID: apnsID, now: Date())
                        break loop
                    }
                }
                // No answer: the client reset the stream or went away.
                guard let answer else { return }
                var headers = HPACKHeaders([(":status", String(answer.status))])
                for (name, value) in answer.headers { headers.add(name: name, value: value) }
                var out: [HTTP2Frame.FramePayload] = [.headers(.init(headers: headers, endStream: answer.body == nil))]
                if let body = answer.body {
                    out.append(.data(.init(data: .byteBuffer(ByteBuffer(bytes: body)), endStream: true)))
                }
                try await outbound.write(contentsOf: out)
                guard !assembler.clientFinished else { return }
                // Answered before the request ended (a bad head, too large a body): read
                // and drop the rest, so the stream ends cleanly; past a limit, reset it
                // with NO_ERROR, which tells the client to stop sending (RFC 9113 §8.1).
                var dropped = 0
                while let payload = try await frames.next() {
                    switch payload {
                    case .headers(let h) where h.endStream: return
                    case .data(let d):
                        if d.endStream { return }
                        dropped += d.data.readableBytes
                        if dropped > Self.maximumDroppedBody {
                            try await outbound.write(.rstStream(.noError))
                            return
                        }
                    default: continue
                    }
                }
            }
        } catch {
            logger.debug("push gateway stream ended: \(error)")
        }
    }

    /// `host:port`, with an IPv6 host in brackets.
    static func hostPort(_ host: String, _ port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// Where a host on `stateDirectory` writes its gateway's address.
    public static func addressFilePath(stateDirectory: String) -> String {
        stateDirectory + "/" + addressFileName
    }

    /// The `host:port` the host on `stateDirectory` serves its gateway on, if it has one.
    public static func boundAddress(stateDirectory: String) -> String? {
        guard let text = try? String(contentsOfFile: addressFilePath(stateDirectory: stateDirectory), encoding: .utf8) else {
            return nil
        }
        let line = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return line.isEmpty ? nil : line
    }
}

/// Closes a gateway connection after an HTTP/2 connection error (a head over the header
/// list size, a protocol violation). NIO writes the GOAWAY and reports the error, but
/// leaves the socket open; a provider's client would wait for its answer for ever. A
/// stream's own error ends that stream only.
private final class ConnectionErrorCloser: ChannelInboundHandler {
    typealias InboundIn = Any

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if !(error is NIOHTTP2Errors.StreamError) {
            context.close(promise: nil)
        }
        context.fireErrorCaught(error)
    }
}
