import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A small, real HTTP/1.1 server on SwiftNIO for transfer tests.
///
/// Serves ``Resource``s with `Range` / `If-Range`, redirects, stores uploads
/// (POST/PUT, streamed, only their lengths and first MiB kept), injects
/// ``Fault``s per path, and logs what it sent. Bodies are written in 64 KiB
/// chunks respecting channel writability, so multi-GiB generated resources
/// never sit in memory. Started with ``TLSFiles`` it speaks HTTPS (HTTP/1.1
/// over TLS; ``TestCertificates`` makes a throwaway CA and server certificate).
///
/// ```swift
/// let server = try await HTTPTestServer.start()
/// server.serve("/big", resource: .generated(size: 256 << 20, seed: 7))
/// server.inject("/big", [.dropAfter(bytes: 1 << 20)])
/// // ... fetch server.url("/big") ...
/// try await server.stop()
/// ```
public final class HTTPTestServer: Sendable {
    /// The server's certificate chain and private key, PEM files.
    public struct TLSFiles: Sendable, Equatable {
        /// The certificate chain, leaf first.
        public var certificateChain: String
        /// The leaf's private key.
        public var privateKey: String

        public init(certificateChain: String, privateKey: String) {
            self.certificateChain = certificateChain
            self.privateKey = privateKey
        }
    }

    /// The host the server listens on.
    public let host: String
    /// The port the server listens on (the one picked when started with port 0).
    public let port: Int
    /// `https` when started with TLS, else `http`.
    public let scheme: String
    let state: ServerState
    private let group: MultiThreadedEventLoopGroup
    private let channel: Channel

    private init(host: String, port: Int, scheme: String, state: ServerState, group: MultiThreadedEventLoopGroup, channel: Channel) {
        self.host = host
        self.port = port
        self.scheme = scheme
        self.state = state
        self.group = group
        self.channel = channel
    }

    /// Starts a server on `host`:`port` (0 picks a free port); with `tls`, an HTTPS one.
    public static func start(host: String = "127.0.0.1", port: Int = 0, tls: TLSFiles? = nil) async throws -> HTTPTestServer {
        // Made before any event loop, so a bad certificate or key fails here, plainly.
        let sslContext = try tls.map { files in
            let chain = try NIOSSLCertificate.fromPEMFile(files.certificateChain).map { NIOSSLCertificateSource.certificate($0) }
            let key = try NIOSSLPrivateKey(file: files.privateKey, format: .pem)
            return try NIOSSLContext(configuration: .makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key)))
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let state = ServerState()
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.maxMessagesPerRead, value: 16)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        if let sslContext { try sync.addHandler(NIOSSLServerHandler(context: sslContext)) }
                        try sync.configureHTTPServerPipeline(withErrorHandling: true)
                        try sync.addHandler(HTTPTestHandler(state: state))
                    }
                }
                .bind(host: host, port: port).get()
            guard let bound = channel.localAddress?.port else {
                try? await channel.close()
                throw ChannelError.unknownLocalAddress
            }
            return HTTPTestServer(host: host, port: bound, scheme: tls == nil ? "http" : "https", state: state, group: group, channel: channel)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// Stops listening, closes open connections and shuts the event loops down.
    public func stop() async throws {
        try? await channel.close()
        try await group.shutdownGracefully()
    }

    /// `http://host:port/path` (`https://` with TLS) for `path` (a leading `/` is added when missing).
    public func url(_ path: String) -> String {
        let h = host.contains(":") ? "[\(host)]" : host
        return "\(scheme)://\(h):\(port)\(ServerState.normalize(path))"
    }

    // MARK: Resources

    /// Serves `resource` at `path` (GET and HEAD), replacing what was there.
    public func serve(_ path: String, resource: Resource) {
        state.setResource(ServerState.normalize(path), resource, isReplace: false)
    }

    /// Replaces the resource at `path`. Its ETag changes (a derived ETag gets a
    /// version suffix) and its Last-Modified moves forward by at least a second,
    /// unless `resource` sets them explicitly.
    public func replace(_ path: String, resource: Resource) {
        state.setResource(ServerState.normalize(path), resource, isReplace: true)
    }

    /// Stops serving `path`.
    public func remove(_ path: String) {
        state.lock.withLock { _ = state.resources.removeValue(forKey: ServerState.normalize(path)) }
    }

    /// The ETag currently answered for `path` (quoted), or `nil` if nothing is served there.
    public func etag(_ path: String) -> String? {
        state.lock.withLock { state.resources[ServerState.normalize(path)]?.etag }
    }

    /// The Last-Modified value (HTTP-date) currently answered for `path`.
    public func lastModified(_ path: String) -> String? {
        state.lock.withLock { state.resources[ServerState.normalize(path)]?.lastModifiedString }
    }

    /// Answers requests for `from` with `status` and `Location: to` (`to` may be a
    /// path, made absolute against this server, or a full URL).
    public func redirect(_ from: String, to: String, status: Int = 302) {
        let location = to.contains("://") ? to : url(to)
        state.lock.withLock { state.redirects[ServerState.normalize(from)] = (location, status) }
    }

    // MARK: Faults

    /// Appends `faults` to the queue for `path`; each request to `path` consumes one.
    public func inject(_ path: String, _ faults: [Fault]) {
        state.lock.withLock { state.faults[ServerState.normalize(path), default: []].append(contentsOf: faults) }
    }

    /// Lets every body held by `.holdAfter` on `path` go on (and any later one pass).
    public func release(_ path: String) {
        let waiters = state.lock.withLock { () -> [@Sendable () -> Void] in
            state.released.insert(ServerState.normalize(path))
            return state.holdWaiters.removeValue(forKey: ServerState.normalize(path)) ?? []
        }
        for resume in waiters { resume() }
    }

    /// Returns once a body on `path` has reached its `.holdAfter` point and waits (at once
    /// if one did already): the client is certainly in the middle of that download.
    public func waitUntilHeld(_ path: String) async {
        let p = ServerState.normalize(path)
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.lock.withLock { () -> Bool in
                if state.holdsReached[p, default: 0] > 0 { return true }
                state.heldWatchers[p, default: []].append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    /// Faults still queued for `path`.
    public func pendingFaults(_ path: String) -> [Fault] {
        state.lock.withLock { state.faults[ServerState.normalize(path)] ?? [] }
    }

    // MARK: Log

    /// Total body bytes written to sockets for `path`, across requests.
    public func bytesSent(_ path: String) -> Int64 {
        state.lock.withLock { state.sent[ServerState.normalize(path)] ?? 0 }
    }

    /// The requests answered for `path`, oldest first.
    public func requests(_ path: String) -> [RecordedRequest] {
        let p = ServerState.normalize(path)
        return state.lock.withLock { state.records.filter { $0.path == p } }
    }

    /// Every request answered, oldest first.
    public var allRequests: [RecordedRequest] {
        state.lock.withLock { state.records }
    }

    /// Lengths of the complete uploads (POST/PUT bodies) received at `path`, oldest first.
    public func uploads(_ path: String) -> [Int64] {
        state.lock.withLock { (state.uploads[ServerState.normalize(path)] ?? []).map(\.length) }
    }

    /// The first bytes (up to 1 MiB) of each complete upload received at `path`.
    public func uploadPrefixes(_ path: String) -> [Data] {
        state.lock.withLock { (state.uploads[ServerState.normalize(path)] ?? []).map(\.prefix) }
    }

    /// The most response bodies that were being sent at once: to clients that named
    /// `host` (the request's Host header, e.g. "127.0.0.1:8080"), or to anyone.
    public func peakConcurrentResponses(host: String? = nil) -> Int {
        state.lock.withLock { host.map { state.peakStreaming[$0] ?? 0 } ?? state.peakStreamingTotal }
    }

    /// Forgets the request log, byte counts and uploads (resources, redirects and faults stay).
    public func resetLog() {
        state.lock.withLock {
            state.records.removeAll()
            state.sent.removeAll()
            state.uploads.removeAll()
        }
    }
}

// MARK: - Shared state

struct ServedEntry: Sendable {
    var resource: Resource
    var etag: String
    var lastModified: Date
    var lastModifiedString: String
    var version: Int
}

struct StoredUpload: Sendable {
    var length: Int64
    var prefix: Data
}

/// Everything the handlers and the API share, behind one lock.
final class ServerState: @unchecked Sendable {
    let lock = NSLock()
    var resources: [String: ServedEntry] = [:]
    var redirects: [String: (String, Int)] = [:]
    var faults: [String: [Fault]] = [:]
    var records: [RecordedRequest] = []
    var sent: [String: Int64] = [:]
    var uploads: [String: [StoredUpload]] = [:]
    var streaming: [String: Int] = [:]
    var peakStreaming: [String: Int] = [:]
    var streamingTotal = 0
    var peakStreamingTotal = 0
    /// Paths released by `release(_:)`, and the held bodies waiting for it.
    var released: Set<String> = []
    var holdWaiters: [String: [@Sendable () -> Void]] = [:]
    /// How many bodies reached their hold point on each path, and who waits for the first.
    var holdsReached: [String: Int] = [:]
    var heldWatchers: [String: [CheckedContinuation<Void, Never>]] = [:]

    /// Whether a body held on `path` may go on; if not, `resume` is kept for `release`.
    func mayContinue(_ path: String, orWait resume: @escaping @Sendable () -> Void) -> Bool {
        let (goOn, watchers) = lock.withLock { () -> (Bool, [CheckedContinuation<Void, Never>]) in
            holdsReached[path, default: 0] += 1
            let watchers = heldWatchers.removeValue(forKey: path) ?? []
            if released.contains(path) { return (true, watchers) }
            holdWaiters[path, default: []].append(resume)
            return (false, watchers)
        }
        for w in watchers { w.resume() }
        return goOn
    }

    func streamingBegan(host: String) {
        lock.withLock {
            streaming[host, default: 0] += 1
            peakStreaming[host] = max(peakStreaming[host] ?? 0, streaming[host]!)
            streamingTotal += 1
            peakStreamingTotal = max(peakStreamingTotal, streamingTotal)
        }
    }

    func streamingEnded(host: String) {
        lock.withLock {
            streaming[host, default: 1] -= 1
            streamingTotal -= 1
        }
    }

    static let uploadPrefixLimit = 1 << 20

    static func normalize(_ path: String) -> String {
        var p = path
        if let q = p.firstIndex(where: { $0 == "?" || $0 == "#" }) { p = String(p[..<q]) }
        if !p.hasPrefix("/") { p = "/" + p }
        return p
    }

    static func httpDate(_ date: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return f.string(from: date)
    }

    func setResource(_ path: String, _ resource: Resource, isReplace: Bool) {
        lock.withLock {
            let old = resources[path]
            let version = isReplace ? (old?.version ?? -1) + 1 : 0
            var etag = resource.etag ?? (version > 0 ? "\"\(resource.derivedETagCore)-v\(version)\"" : resource.derivedETag)
            if isReplace, resource.etag == nil, etag == old?.etag { etag = "\"\(resource.derivedETagCore)-v\(version)-r\"" }
            var lm = resource.lastModified ?? Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
            if resource.lastModified == nil, let old, lm <= old.lastModified {
                lm = old.lastModified.addingTimeInterval(1)
            }
            resources[path] = ServedEntry(
                resource: resource, etag: etag, lastModified: lm,
                lastModifiedString: ServerState.httpDate(lm), version: version)
        }
    }

    /// Pops the next fault for `path` (`.none` when none is queued).
    func nextFault(_ path: String) -> Fault {
        lock.withLock {
            guard var q = faults[path], !q.isEmpty else { return .none }
            let f = q.removeFirst()
            faults[path] = q
            return f
        }
    }

    /// Appends a record and returns its index.
    func record(_ r: RecordedRequest) -> Int {
        lock.withLock {
            records.append(r)
            return records.count - 1
        }
    }

    func addSent(path: String, record: Int, bytes: Int64) {
        lock.withLock {
            sent[path, default: 0] += bytes
            if record < records.count, records[record].path == path {
                records[record].bodyBytesSent += bytes
            }
        }
    }
}
