import AppHostProtocol
import AppHostSystem
import Foundation
import Logging
import NIOCore
import Synchronization
import NIOPosix

/// Splits an inbound byte stream into frame payloads (see ``Frame``). Invalid
/// streams fire an error, which closes the connection.
final class FrameSplitter: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = [UInt8]
    private var decoder = FrameDecoder()

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        decoder.append(buffer.readableBytesView)
        do {
            while let payload = try decoder.next() {
                context.fireChannelRead(wrapInboundOut(payload))
            }
        } catch {
            context.fireErrorCaught(error)
            context.close(promise: nil)
        }
    }
}

/// `struct ucred` (Glibc's module does not export it without _GNU_SOURCE): who is at
/// the other end of a Unix socket, as `SO_PEERCRED` reports it.
struct PeerCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
    /// SO_PEERCRED on Linux (every architecture but a few old ones, which AppHost does not run on).
    static let option: Int32 = 17
}

/// The control connections being served, against their limit.
final class OpenConnections: Sendable {
    private let state = Mutex((open: 0, refusing: false))
    /// The memory a burst of connections took goes back once the last one closes.
    private let trim = BurstTrim()

    /// Takes a place if one is free.
    func enter(limit: Int) -> Bool {
        state.withLock { s in
            guard s.open < limit else { return false }
            s.open += 1
            s.refusing = false
            trim.opened()
            return true
        }
    }

    func leave() {
        state.withLock { $0.open -= 1 }
        trim.closed()
    }

    /// A connection was refused; true for the first of a run of refusals (logged once).
    func noteRefused() -> Bool {
        state.withLock { s in
            defer { s.refusing = true }
            return !s.refusing
        }
    }
}

/// Who may drive a host through its control socket: its own user and root, nobody else
/// (`SO_PEERCRED`, whatever the socket file's mode says).
enum ControlPeerPolicy {
    /// Why `peer` is refused by a host running as `hostUID`, or nil when it is served.
    /// A peer whose credentials cannot be read is refused.
    static func refusal(peer: PeerCredentials?, hostUID: uid_t) -> String? {
        guard let peer else {
            return "the control socket could not read its peer's credentials (SO_PEERCRED), so it serves nobody on this connection"
        }
        guard peer.uid == hostUID || peer.uid == 0 else {
            return "the control socket serves only the host's user (uid \(hostUID)) and root; pid \(peer.pid) runs as uid \(peer.uid)"
        }
        return nil
    }
}

/// The control socket: one request per connection, answered with one response or a
/// stream (events; list and status, one frame per app; reports, one frame each), framed like
/// the app IPC. A connection that has not sent its whole request within
/// ``HostConfiguration/controlRequestTimeout`` is closed.
public struct ControlServer: Sendable {
    private typealias Connection = NIOAsyncChannel<[UInt8], ByteBuffer>
    private let server: NIOAsyncChannel<Connection, Never>
    private let supervisor: Supervisor
    private let logger: Logger

    /// Binds `path` (an existing socket file is replaced: the caller holds the state dir lock).
    public static func bind(path: String, group: any EventLoopGroup, supervisor: Supervisor, logger: Logger) async throws -> ControlServer {
        guard path.utf8.count < 108 else {
            throw ControlError(.badRequest, "control socket path is too long for a Unix socket (\(path.utf8.count) bytes, limit 107): use a shorter --state-dir")
        }
        let server = try await ServerBootstrap(group: group)
            // Room for a burst of clients; what is accepted is bounded by
            // `controlConnectionLimit` (see `serve`).
            .serverChannelOption(.backlog, value: 1024)
            .bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(FrameSplitter())
                    // Outbound half-closure: a connection's end is a shutdown of our side
                    // after every frame written has reached the socket (see `handle`).
                    return try Connection(wrappingChannelSynchronously: channel,
                                          configuration: .init(isOutboundHalfClosureEnabled: true))
                }
            }
        // 0600 whatever the umask: only the host's user (root for a root host) may drive it.
        // (The state directory above it is 0700, or 0711 with per-app uids.)
        guard chmod(path, 0o600) == 0 else {
            let error = errno
            server.channel.close(promise: nil)
            throw ControlError(.internalError, "cannot make the control socket \(path) private (chmod 0600): \(String(cString: strerror(error)))")
        }
        return ControlServer(server: server, supervisor: supervisor, logger: logger)
    }

    /// Serves connections until ``close()``. At most
    /// ``HostConfiguration/controlConnectionLimit`` are served at once: one more is told so
    /// and closed at once, holding no task and no memory.
    public func serve() async throws {
        let open = OpenConnections()
        let limit = max(1, supervisor.configuration.controlConnectionLimit)
        let busy = (try? Frame.encode(ControlResponse.error(ControlError(.refused, "the daemon is serving \(limit) control connections, its limit: try again")))) ?? []
        try await withThrowingDiscardingTaskGroup { group in
            try await server.executeThenClose { inbound in
                for try await connection in inbound {
                    guard open.enter(limit: limit) else {
                        if open.noteRefused() { logger.warning("refusing control connections: \(limit) are open (the limit)") }
                        // In line, with no task of its own: one small frame into the empty
                        // buffer of a new socket, then closed.
                        try? await connection.executeThenClose { _, outbound in
                            try await outbound.write(ByteBuffer(bytes: busy))
                        }
                        continue
                    }
                    group.addTask {
                        defer { open.leave() }
                        do {
                            try await handle(connection)
                        } catch {
                            logger.debug("control connection ended: \(error)")
                        }
                    }
                }
            }
        }
    }

    /// Stops accepting connections; ``serve()`` then returns once open ones end.
    public func close() {
        server.channel.close(promise: nil)
    }

    private func handle(_ connection: Connection) async throws {
        // Who is at the other end, as the kernel saw it at connect(2). Refused: anyone
        // who is not the host's own user or root, whatever the socket's mode (an app of
        // an unprivileged host once made the state dir and the socket 0777, and another
        // local user then terminated its apps); and any app process (or anything it
        // started): the socket lives in the state dir, which an app's Landlock rules do
        // not grant, but Landlock does not check connect(2) on a named Unix socket.
        let cred: PeerCredentials? = if let provider = connection.channel as? SocketOptionProvider {
            try? await provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(PeerCredentials.option)).get()
        } else {
            nil
        }
        if let refusal = ControlPeerPolicy.refusal(peer: cred, hostUID: geteuid()) {
            logger.warning("refused a control connection: \(refusal)")
            try await connection.executeThenClose { _, outbound in
                try await write(.error(ControlError(.refused, refusal)), to: outbound)
            }
            return
        }
        if let cred, let app = await supervisor.appOwning(pid: cred.pid) {
            await supervisor.noteRefusedControlPeer(pid: cred.pid, app: app)
            try await connection.executeThenClose { _, outbound in
                try await write(.error(ControlError(.refused, "the control socket does not serve apps (pid \(cred.pid) belongs to \(app))")), to: outbound)
            }
            return
        }
        let channel = connection.channel
        let timeout = supervisor.configuration.controlRequestTimeout
        let logger = self.logger
        // A client that connects and says nothing (or half a frame) must not hold a task
        // and a descriptor for ever: it is hung up on.
        let idle = channel.eventLoop.scheduleTask(in: .nanoseconds(timeout.clampedNanoseconds)) {
            logger.info("closed a control connection that sent no request within \(timeout)")
            channel.close(promise: nil)
        }
        try await connection.executeThenClose { inbound, outbound in
            try await answer(inbound, outbound)
            // Every frame written must reach the client before the channel closes:
            // `executeThenClose` closes at once, and NIO drops writes still pending then
            // (swift-nio#2795). A `status` of 200 apps lost its last 33 rows that way. So
            // the writer is finished (a half-closure NIO performs once the pending writes
            // are out, swift-nio#3148), and the connection ends when the client, at end of
            // stream, closes its side, or after the request timeout if it never does.
            outbound.finish()
            let linger = channel.eventLoop.scheduleTask(in: .nanoseconds(timeout.clampedNanoseconds)) {
                channel.close(promise: nil)
            }
            try? await channel.closeFuture.get()
            linger.cancel()
        }

        func answer(_ inbound: NIOAsyncChannelInboundStream<[UInt8]>,
                    _ outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws {
            var iterator = inbound.makeAsyncIterator()
            let first = try await iterator.next()
            idle.cancel()
            guard let payload = first else { return }
            let request: ControlRequest
            do {
                request = try Frame.decode(ControlRequest.self, from: payload)
            } catch {
                try await write(.error(ControlError(.badRequest, "unreadable request: \(error)")), to: outbound)
                return
            }
            switch request {
            case .events(let follow, let app):
                try await streamEvents(follow: follow, app: app, channel: connection.channel, outbound: outbound)
                return
            case .status(let app):
                do {
                    var batch = FrameBatch(outbound)
                    for status in try await supervisor.status(app) {
                        try await batch.add(.appStatus(status))
                    }
                    try await batch.add(.end)
                    try await batch.flush()
                } catch let error as ControlError {
                    try await write(.error(error), to: outbound)
                }
                return
            case .list:
                var batch = FrameBatch(outbound)
                for app in await supervisor.list() {
                    try await batch.add(.app(app), orBounded: .app(app.boundedForWire()))
                }
                try await batch.add(.end)
                try await batch.flush()
                return
            case .reports(let app):
                do {
                    var batch = FrameBatch(outbound)
                    for report in try await supervisor.reports(app) {
                        try await batch.add(.report(report), orBounded: .report(report.boundedForWire()))
                    }
                    try await batch.add(.end)
                    try await batch.flush()
                } catch let error as ControlError {
                    try await write(.error(error), to: outbound)
                }
                return
            default:
                break
            }
            let response = await respond(to: request)
            try await write(response, to: outbound)
        }
    }

    /// Frames of a long answer (`status`, `list`, `reports` of every app) gathered into
    /// writes of about ``limit`` bytes: one awaited write per row cost 10,000 trips through
    /// the writer and the event loop for `status` of 10,000 apps. The writer's back-pressure
    /// still holds, per batch; frames stay whole and in order.
    struct FrameBatch {
        static let limit = 64 * 1024
        let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
        var buffer = ByteBuffer()

        init(_ outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) {
            self.outbound = outbound
        }

        mutating func add(_ response: ControlResponse) async throws {
            buffer.writeBytes(try Frame.encode(response))
            if buffer.readableBytes >= Self.limit { try await flush() }
        }

        /// Adds `response`, or `bounded` if `response` does not fit a frame.
        mutating func add(_ response: ControlResponse, orBounded bounded: @autoclosure () -> ControlResponse) async throws {
            do {
                buffer.writeBytes(try Frame.encode(response))
            } catch FrameError.oversized {
                buffer.writeBytes(try Frame.encode(bounded()))
            }
            if buffer.readableBytes >= Self.limit { try await flush() }
        }

        mutating func flush() async throws {
            guard buffer.readableBytes > 0 else { return }
            let out = buffer
            buffer = ByteBuffer()
            try await outbound.write(out)
        }
    }

    private func write(_ response: ControlResponse, to outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws {
        try await outbound.write(ByteBuffer(bytes: try Frame.encode(response)))
    }

    private func streamEvents(follow: Bool, app: BundleID?, channel: any Channel,
                              outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws {
        if let app, !(await supervisor.isKnown(app)) {
            try await write(.error(ControlError(.unknownBundle, "unknown bundle id \"\(app)\" (no such app installed, and no events recorded for it)")), to: outbound)
            return
        }
        // A follower that falls too far behind is dropped: the notice goes after what is
        // already queued for it, its side of the connection is shut once that is written
        // (a client that reads again gets everything, then the notice, then the end), and
        // the connection is closed after the request timeout whatever the client does.
        let backlog = supervisor.configuration.followerBacklog
        let notice = (try? Frame.encode(ControlResponse.error(ControlError(.refused, "dropped: this follower fell more than \(backlog) events behind (it read too slowly); events since then were not sent: follow again, or read `apphost events`")))) ?? []
        let supervisor = self.supervisor
        let linger = supervisor.configuration.controlRequestTimeout
        let (past, live, id) = await supervisor.subscribeFollower(bundleIdentifier: app) {
            channel.eventLoop.execute {
                channel.writeAndFlush(ByteBuffer(bytes: notice), promise: nil)
                channel.close(mode: .output, promise: nil)
                _ = channel.eventLoop.scheduleTask(in: .nanoseconds(linger.clampedNanoseconds)) { channel.close(promise: nil) }
            }
            Task { await supervisor.noteDroppedFollower() }
        }
        defer { Task { await supervisor.unsubscribe(id) } }
        // Read here, off the supervisor's actor, in bounded chunks; each write waits
        // for the client to take it, so a slow reader costs nothing but its socket.
        var count = 0
        for event in past {
            try await write(.event(event), to: outbound)
            count += 1
            if count % 256 == 0 { await Task.yield() }
        }
        guard follow else {
            try await write(.end, to: outbound)
            return
        }
        // Stream until the host stops or the client hangs up (NIO closes the
        // channel when the client's side reaches end of file).
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in live {
                    try await write(.event(event), to: outbound)
                }
                // Dropped: the connection is closing (see above); no `.end`.
                if live.endedBehind { return }
                try await write(.end, to: outbound)
            }
            group.addTask {
                try await channel.closeFuture.get()
            }
            try await group.next()
            group.cancelAll()
        }
    }

    private func clockResponse() async -> ControlResponse {
        let r = await supervisor.clockReading()
        let seconds = Double(r.now.components.seconds) + Double(r.now.components.attoseconds) / 1e18
        return .clock(mode: r.mode.rawValue, seconds: seconds, date: r.date)
    }

    private func respond(to request: ControlRequest) async -> ControlResponse {
        do throws(ControlError) {
            switch request {
            case .ping(let version):
                guard version == ControlSocket.version else {
                    return .error(ControlError(.badRequest, "the daemon speaks control version \(ControlSocket.version), this client \(version): use the apphost binary the daemon was started with"))
                }
                return .pong(pid: getpid(), stateDirectory: supervisor.configuration.stateDirectory)
            case .install(let path, let settings, let entitlements):
                let app = try await supervisor.install(path: path, settings: settings, entitlements: entitlements)
                // An answer that does not fit a frame (a manifest listing thousands of
                // identifiers) is sent cut rather than not at all.
                let full = ControlResponse.installed(app)
                return (try? Frame.encode(full)) != nil ? full : .installed(app.boundedForWire())
            case .uninstall(let id):
                try await supervisor.uninstall(id)
                return .ok(message: "uninstalled \(id)")
            case .launch(let id, let background, let arguments, let terminateRunning):
                let runningPID = await supervisor.pid(of: id)
                let wasRunning = !terminateRunning && runningPID != nil
                let pid = try await supervisor.launch(id, background: background, arguments: arguments,
                                                      terminateRunning: terminateRunning)
                return .launched(bundleIdentifier: id, pid: pid, wasRunning: wasRunning)
            case .foreground(let id):
                switch try await supervisor.foreground(id) {
                case .resumed:
                    return .ok(message: "\(id) is coming to the foreground")
                case .launchedFromSwitcher(let pid):
                    return .ok(message: "\(id) was not running (the system ended it; its card is in the app switcher): "
                               + "launched it cold with the arguments of its last launch, as tapping its card does: \(id): \(pid)")
                }
            case .background(let id):
                try await supervisor.background(id)
                return .ok(message: "\(id) is going home")
            case .terminate(let id):
                try await supervisor.terminate(id)
                return .ok(message: "terminated \(id)")
            case .list, .status, .reports:
                return .error(ControlError(.badRequest, "list, status and reports are streamed"))
            case .shutdown:
                // Answer once the daemon has terminated its apps and released the
                // state directory, so a new daemon can start right after (systemctl stop).
                await supervisor.requestShutdown()
                await supervisor.waitUntilStopped()
                return .ok(message: "stopped the host on \(supervisor.configuration.stateDirectory)")
            case .events:
                return .error(ControlError(.badRequest, "events are streamed"))
            case .clockAdvance(let seconds):
                guard seconds.isFinite, seconds >= 0 else {
                    return .error(ControlError(.badRequest, "time only moves forward"))
                }
                _ = try await supervisor.advanceClock(by: Duration(clampingSeconds: seconds))
                return await clockResponse()
            case .clockNow:
                return await clockResponse()
            case .profile:
                return .profile(supervisor.configuration.profile)
            case .mode(let command):
                return .ok(message: try await supervisor.modeCommand(command))
            case .snapshot(let id):
                return .snapshot(try await supervisor.snapshot(id))
            case .switcher:
                return .switcher(await supervisor.switcher())
            case .modeQuery(let query):
                return .modeAnswer(try await supervisor.modeQuery(query))
            case .screenshot:
                return .screenshot(try await supervisor.screenshot())
            }
        } catch {
            return .error(error)
        }
    }
}
