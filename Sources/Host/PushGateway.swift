import AppHostProtocol
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
// are the supervisor's (`Supervisor.apnsPush`), the wire rules are here:
// `APNsWire` parses a request head and builds answers as pure functions, and
// `APNsRequestAssembler` turns one stream's frames into one request.

// MARK: - Settings

/// Where the push gateway listens, and whether it speaks TLS.
public struct PushGatewaySettings: Sendable, Equatable, CustomStringConvertible {
    /// A PEM certificate chain and its private key: the gateway then speaks TLS with ALPN `h2`.
    public struct TLS: Sendable, Equatable {
        /// The PEM file holding the certificate chain (leaf first).
        public var certificatePath: String
        /// The PEM file holding the certificate's private key.
        public var privateKeyPath: String

        /// A certificate chain file and its key file (PEM).
        public init(certificatePath: String, privateKeyPath: String) {
            self.certificatePath = certificatePath
            self.privateKeyPath = privateKeyPath
        }
    }

    /// The address to bind (`127.0.0.1`, `::1`, `0.0.0.0`, a host name).
    public var host: String
    /// The port; 0 takes any free one (see ``PushGateway/port``).
    public var port: Int
    /// TLS, or nil for cleartext HTTP/2 with prior knowledge (h2c).
    public var tls: TLS?

    /// Loopback and any free port, cleartext, unless told otherwise.
    public init(host: String = "127.0.0.1", port: Int = 0, tls: TLS? = nil) {
        self.host = host
        self.port = port
        self.tls = tls
    }

    /// Parses `HOST:PORT` (`[::1]:2197` for IPv6). A bare `PORT` or `:PORT` means 127.0.0.1.
    public init(parsing text: String) throws(PushGatewayError) {
        let text = text.trimmingCharacters(in: .whitespaces)
        var host = "127.0.0.1"
        var portText = text
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw PushGatewayError("push gateway address \"\(text)\": an IPv6 address is written [ADDRESS]:PORT, e.g. [::1]:2197")
            }
            host = String(text[text.index(after: text.startIndex)..<close])
            portText = String(text[text.index(close, offsetBy: 2)...])
        } else if let colon = text.lastIndex(of: ":") {
            let h = text[..<colon]
            if h.contains(":") {
                throw PushGatewayError("push gateway address \"\(text)\": put an IPv6 address in brackets, e.g. [::1]:2197")
            }
            if !h.isEmpty { host = String(h) }
            portText = String(text[text.index(after: colon)...])
        }
        guard let port = Int(portText), (0...65535).contains(port) else {
            throw PushGatewayError("push gateway address \"\(text)\": expected HOST:PORT with a port from 0 to 65535 (0: any free port), e.g. 127.0.0.1:2197")
        }
        self.init(host: host, port: port)
    }

    /// `127.0.0.1:2197`, `[::1]:2197`.
    public var description: String { PushGateway.hostPort(host, port) }
}

/// The push gateway could not start (address, certificate), with what to do.
public struct PushGatewayError: Error, Sendable, CustomStringConvertible {
    /// What went wrong and what to do.
    public var description: String
    /// An error with its message.
    public init(_ description: String) { self.description = description }
}

/// One push as the gateway received it, before APNs' checks (``APNsRequest/validate(owner:makeID:)``).
public typealias PushGatewayRequest = APNsRequest

public typealias PushResponder = @Sendable (PushGatewayRequest) async -> Result<String, APNsRejection>

// MARK: - The wire rules (pure)

/// The APNs provider API's request and response shapes, without sockets.
enum APNsWire {
    /// The largest body the gateway reads: a VoIP payload's limit (others: 4096, checked
    /// by the supervisor). Anything larger is refused with 413 before it is all read.
    static let maximumBody = 5120

    /// The request headers the gateway reads; each may appear once.
    static let apnsHeaders: Set<String> = ["apns-id", "apns-push-type", "apns-topic", "apns-priority",
                                           "apns-expiration", "apns-collapse-id"]

    /// A request head that passed the wire checks.
    struct Head: Equatable {
        var request: PushGatewayRequest
        var contentLength: Int?
    }

    /// The request's `apns-id`, if any (echoed in every answer, as APNs does).
    static func apnsID(in headers: [(String, String)]) -> String? {
        headers.first { $0.0 == "apns-id" }?.1
    }

    /// Checks method, path and the `apns-*` headers (names are lowercase in HTTP/2).
    static func parseHead(_ headers: [(String, String)]) -> Result<Head, APNsRejection> {
        var method: String?
        var path: String?
        var seen: [String: String] = [:]
        var contentLength: Int?
        for (name, value) in headers {
            switch name {
            case ":method": method = value
            case ":path": path = value
            case "content-length": contentLength = Int(value)
            case _ where apnsHeaders.contains(name):
                if seen[name] != nil {
                    return .failure(APNsRejection("DuplicateHeaders", "\(name) is given more than once"))
                }
                seen[name] = value
            default: break
            }
        }
        guard method == "POST" else {
            return .failure(APNsRejection("MethodNotAllowed", status: 405, "the method must be POST, not \(method ?? "none")"))
        }
        let prefix = "/3/device/"
        guard let path, path.hasPrefix(prefix) else {
            return .failure(APNsRejection("BadPath", status: 404, "the path must be /3/device/<device token>, not \(path ?? "none")"))
        }
        let token = String(path.dropFirst(prefix.count))
        guard !token.isEmpty else {
            return .failure(APNsRejection("MissingDeviceToken", "the path has no device token: /3/device/<device token>"))
        }
        guard !token.contains("/"), !token.contains("?") else {
            return .failure(APNsRejection("BadPath", status: 404, "the path must be /3/device/<device token>, not \(path)"))
        }
        var priority: Int?
        if let text = seen["apns-priority"] {
            guard let p = Int(text) else {
                return .failure(APNsRejection("BadPriority", "apns-priority must be an integer (10, 5 or 1), not \"\(text)\""))
            }
            priority = p
        }
        var expiration: Int?
        if let text = seen["apns-expiration"] {
            guard let e = Int(text) else {
                return .failure(APNsRejection("BadExpirationDate", "apns-expiration must be an integer (UNIX seconds or 0), not \"\(text)\""))
            }
            expiration = e
        }
        if let contentLength, contentLength > maximumBody {
            return .failure(tooLarge(contentLength, exact: true))
        }
        let request = PushGatewayRequest(
            token: token, topic: seen["apns-topic"], pushType: seen["apns-push-type"], priority: priority,
            expiration: expiration, collapseID: seen["apns-collapse-id"], apnsID: seen["apns-id"], payload: Data())
        return .success(Head(request: request, contentLength: contentLength))
    }

    /// 413; `exact`: `size` is the whole body's (content-length), else only what was read so far.
    static func tooLarge(_ size: Int, exact: Bool) -> APNsRejection {
        APNsRejection("PayloadTooLarge", status: 413,
                      "the payload is \(exact ? "" : "over ")\(exact ? size : maximumBody) bytes; a push carries at most 4096 (5120 for VoIP)")
    }

    /// An answer: `:status`, headers, and the body (nil: none).
    struct Response: Equatable {
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]?

        static func == (a: Response, b: Response) -> Bool {
            a.status == b.status && a.body == b.body && a.headers.map { $0.0 + ":" + $0.1 } == b.headers.map { $0.0 + ":" + $0.1 }
        }
    }

    /// 200 with `apns-id` and no body; or the rejection's status with `apns-id` and
    /// `{"reason": ...}` (410 adds `"timestamp"`, milliseconds since 1970, as APNs does).
    /// `requestAPNsID` is echoed on errors; without one a new UUID is made up.
    static func response(_ result: Result<String, APNsRejection>, requestAPNsID: String?, now: Date) -> Response {
        switch result {
        case .success(let id):
            return Response(status: 200, headers: [("apns-id", id)], body: nil)
        case .failure(let rejection):
            var body = "{\"reason\":\"\(jsonEscaped(rejection.reason))\""
            if rejection.status == 410 {
                body += ",\"timestamp\":\(Int64((now.timeIntervalSince1970 * 1000).rounded(.down)))"
            }
            body += "}"
            let bytes = Array(body.utf8)
            return Response(status: rejection.status,
                            headers: [("apns-id", requestAPNsID ?? UUID().uuidString),
                                      ("content-type", "application/json"),
                                      ("content-length", String(bytes.count)),
                                      // Not APNs': the sentence for people (APNs clients ignore it).
                                      ("apphost-message", headerSafe(rejection.message))],
                            body: bytes)
        }
    }

    static func jsonEscaped(_ s: String) -> String {
        var out = ""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// A header value has no control characters.
    static func headerSafe(_ s: String) -> String {
        String(String.UnicodeScalarView(s.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7f ? " " : $0 }))
    }
}

/// Turns the frames of one HTTP/2 stream into one push request, or a rejection as
/// soon as one is certain (a bad head, a body over the limit).
struct APNsRequestAssembler {
    enum Step: Equatable {
        /// Keep reading.
        case more
        /// The request is complete.
        case complete(PushGatewayRequest)
        /// Refuse now (`apnsID`: the request's, to echo).
        case reject(APNsRejection, apnsID: String?)
    }

    private var head: APNsWire.Head?
    private var body: [UInt8] = []
    private var rejected = false
    /// The client has ended its side of the stream (END_STREAM seen).
    private(set) var clientFinished = false

    /// Feeds a HEADERS frame's fields.
    mutating func headers(_ fields: [(String, String)], endStream: Bool) -> Step {
        clientFinished = clientFinished || endStream
        guard !rejected else { return .more }
        if head == nil {
            switch APNsWire.parseHead(fields) {
            case .success(let h): head = h
            case .failure(let r):
                rejected = true
                return .reject(r, apnsID: APNsWire.apnsID(in: fields))
            }
        }
        // A second HEADERS frame is a trailer block: nothing in it matters here.
        return endStream ? complete() : .more
    }

    /// Feeds a DATA frame's bytes.
    mutating func data(_ bytes: some Collection<UInt8>, endStream: Bool) -> Step {
        clientFinished = clientFinished || endStream
        guard !rejected, head != nil else { return .more }
        if body.count + bytes.count > APNsWire.maximumBody {
            rejected = true
            return .reject(APNsWire.tooLarge(body.count + bytes.count, exact: false), apnsID: head?.request.apnsID)
        }
        body.append(contentsOf: bytes)
        return endStream ? complete() : .more
    }

    private mutating func complete() -> Step {
        guard var request = head?.request else { return .more }
        request.payload = Data(body)
        return .complete(request)
    }
}

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
    private let logger: Logger
    private struct State {
        var connections: [ObjectIdentifier: any Channel] = [:]
        var closing = false
        var statistics = Statistics()
    }
    private let state = Mutex(State())

    /// What the gateway has served so far.
    public struct Statistics: Sendable, Equatable {
        /// Connections accepted.
        public var connections = 0
        /// Streams (requests) opened on them.
        public var streams = 0
        /// Connections that a close() had to cut after ``shutdownGrace`` (a client that
        /// did not answer the GOAWAY's PING or kept streams open).
        public var cutAfterGrace = 0

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
                 logger: Logger) {
        self.settings = settings
        self.server = server
        self.responder = responder
        self.logger = logger
        let local = server.channel.localAddress
        host = local?.ipAddress ?? settings.host
        port = local?.port ?? settings.port
    }

    /// Binds a gateway whose pushes go to `supervisor` (``Supervisor/apnsPush(_:)``).
    public static func bind(settings: PushGatewaySettings, group: any EventLoopGroup, supervisor: Supervisor,
                            logger: Logger) async throws -> PushGateway {
        try await bind(settings: settings, group: group, logger: logger) { request in
            await supervisor.apnsPush(request)
        }
    }

    /// Binds a gateway answering with `responder` (tests and benchmarks pass their own).
    /// Throws ``PushGatewayError`` when the address or the certificate is unusable.
    public static func bind(settings: PushGatewaySettings, group: any EventLoopGroup, logger: Logger,
                            responder: @escaping PushResponder) async throws -> PushGateway {
        let tls = try settings.tls.map(makeTLSContext)
        let http2 = {
            var c = NIOHTTP2Handler.Configuration()
            c.connection.initialSettings = [
                HTTP2Setting(parameter: .maxConcurrentStreams, value: maximumConcurrentStreams),
                HTTP2Setting(parameter: .maxHeaderListSize, value: HPACKDecoder.defaultMaxHeaderListSize),
            ]
            return c
        }()
        // Idle connections stay open (providers keep theirs), and no keep-alive
        // timer wakes an idle host; only close() ends them, with a bounded grace.
        let management = NIOHTTP2ServerConnectionManagementHandler.Configuration(
            maxIdleTime: nil, maxAge: nil, maxGraceTime: shutdownGrace, keepalive: nil)
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
                        let multiplexer = try sync.configureAsyncHTTP2Pipeline(
                            mode: .server, connectionManagerConfiguration: management, http2HandlerConfiguration: http2
                        ) { stream in
                            stream.eventLoop.makeCompletedFuture { try StreamChannel(wrappingChannelSynchronously: stream) }
                        }
                        return Connection(channel: channel, multiplexer: multiplexer)
                    }
                }
        } catch {
            throw PushGatewayError("cannot listen for the push gateway on \(settings): \(error); choose another address or port (--push-gateway HOST:PORT, port 0 for any free one)")
        }
        return PushGateway(settings: settings, server: server, responder: responder, logger: logger)
    }

    private static func makeTLSContext(_ tls: PushGatewaySettings.TLS) throws -> NIOSSLContext {
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

    private func serve(_ connection: Connection) async {
        let key = ObjectIdentifier(connection.channel)
        let closing = state.withLock { s -> Bool in
            s.statistics.connections += 1
            if !s.closing { s.connections[key] = connection.channel }
            return s.closing
        }
        if closing { quiesce(connection.channel) }
        defer { _ = state.withLock { $0.connections.removeValue(forKey: key) } }
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
        do {
            try await stream.executeThenClose { inbound, outbound in
                var frames = inbound.makeAsyncIterator()
                var assembler = APNsRequestAssembler()
                var answer: APNsWire.Response?
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

// MARK: - A client

/// A small HTTP/2 client of the gateway (cleartext, prior knowledge): one connection,
/// any number of concurrent requests, each on its own stream. For tests and benchmarks.
public final class PushGatewayClient: Sendable {
    /// An answer.
    public struct Response: Sendable, Equatable {
        /// The HTTP status.
        public var status: Int
        /// The `apns-id` header.
        public var apnsID: String?
        /// The body (empty for 200).
        public var body: Data
        /// Every response header but `:status`, in order.
        public var headers: [String]

        /// The JSON body's `reason`, if any.
        public var reason: String? { json?["reason"] as? String }
        /// The JSON body's `timestamp`, if any (410).
        public var timestamp: Int64? { (json?["timestamp"] as? NSNumber)?.int64Value }

        private var json: [String: Any]? {
            body.isEmpty ? nil : (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        }
    }

    private struct Connection: Sendable {
        let channel: any Channel
        let multiplexer: NIOHTTP2Handler.AsyncStreamMultiplexer<Void>
    }
    private typealias StreamChannel = NIOAsyncChannel<HTTP2Frame.FramePayload, HTTP2Frame.FramePayload>

    private let connection: Connection
    private let authority: String

    private init(connection: Connection, authority: String) {
        self.connection = connection
        self.authority = authority
    }

    /// Connects to `host:port` and exchanges the HTTP/2 preface.
    public static func connect(host: String, port: Int, group: any EventLoopGroup) async throws -> PushGatewayClient {
        let connection = try await ClientBootstrap(group: group)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let multiplexer = try channel.pipeline.syncOperations.configureAsyncHTTP2Pipeline(mode: .client) { stream in
                        // The server opens no streams (no server push).
                        stream.eventLoop.makeSucceededVoidFuture()
                    }
                    return Connection(channel: channel, multiplexer: multiplexer)
                }
            }
        return PushGatewayClient(connection: connection, authority: PushGateway.hostPort(host, port))
    }

    /// Sends one request on a new stream and reads the whole answer.
    public func send(method: String = "POST", path: String, headers: [(String, String)] = [], body: Data = Data()) async throws -> Response {
        let stream = try await connection.multiplexer.openStream { channel in
            channel.eventLoop.makeCompletedFuture { try StreamChannel(wrappingChannelSynchronously: channel) }
        }
        let authority = self.authority
        return try await stream.executeThenClose { inbound, outbound in
            var head = HPACKHeaders([(":method", method), (":scheme", "http"), (":authority", authority), (":path", path)])
            for (name, value) in headers { head.add(name: name, value: value) }
            if body.isEmpty {
                try await outbound.write(.headers(.init(headers: head, endStream: true)))
            } else {
                try await outbound.write(contentsOf: [
                    .headers(.init(headers: head)),
                    .data(.init(data: .byteBuffer(ByteBuffer(bytes: body)), endStream: true)),
                ])
            }
            var response = Response(status: 0, apnsID: nil, body: Data(), headers: [])
            loop: for try await frame in inbound {
                switch frame {
                case .headers(let h):
                    for field in h.headers {
                        if field.name == ":status" {
                            response.status = Int(field.value) ?? 0
                        } else {
                            response.headers.append("\(field.name): \(field.value)")
                            if field.name == "apns-id" { response.apnsID = field.value }
                        }
                    }
                    if h.endStream { break loop }
                case .data(let d):
                    if case .byteBuffer(let buffer) = d.data { response.body.append(contentsOf: buffer.readableBytesView) }
                    if d.endStream { break loop }
                default:
                    continue
                }
            }
            guard response.status != 0 else {
                throw PushGatewayError("the stream ended without an answer (connection closed or stream reset)")
            }
            return response
        }
    }

    /// Sends a push: `POST /3/device/<token>` with `apns-*` headers.
    public func push(token: String, topic: String?, pushType: String? = nil, priority: Int? = nil,
                     apnsID: String? = nil, extraHeaders: [(String, String)] = [], payload: Data) async throws -> Response {
        var headers: [(String, String)] = []
        if let topic { headers.append(("apns-topic", topic)) }
        if let pushType { headers.append(("apns-push-type", pushType)) }
        if let priority { headers.append(("apns-priority", String(priority))) }
        if let apnsID { headers.append(("apns-id", apnsID)) }
        return try await send(path: "/3/device/" + token, headers: headers + extraHeaders, body: payload)
    }

    /// Closes the connection.
    public func close() async {
        try? await connection.channel.close()
    }
}
