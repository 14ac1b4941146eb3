import AppHostSystem
import NIOCore
import NIOPosix
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Starts one child the host talks to over a socketpair, for apps and `apphost-transferd`
/// alike: a socketpair (the child's end as descriptor 3), its stdout and stderr appended
/// to a log file (0600), the spawn through ``ProcessReaper``, then the host's end attached
/// to a NIO channel. Descriptors are closed on every path.
enum ChildLauncher {
    /// Where a launch failed.
    enum Failure: Error, CustomStringConvertible {
        /// Before or at the spawn: nothing runs.
        case spawn(any Error)
        /// The child runs, but its socket could not be attached.
        case attach(ChildProcess, any Error)

        var description: String {
            switch self {
            case .spawn(let error): "\(error)"
            case .attach(_, let error): "could not attach the IPC socket: \(error)"
            }
        }
    }

    /// Spawns `settings` (its IPC descriptor, stdout and stderr are set here), calls
    /// `spawned` as soon as the child runs (before the channel exists, so that whoever
    /// orders events sees the spawn first), then attaches the channel with the handler
    /// `makeHandler` makes. With `autoRead` false nothing is read until the caller turns
    /// it on. `onEvent` gets the reaper's reports of the child.
    /// With `duplicateForWriting`, also a ``SocketWriter`` on a duplicate of the host's end
    /// of the socket (closed with the channel: it never keeps the socket open after it).
    static func launch(
        _ settings: SpawnSettings, logPath: String, group: any EventLoopGroup, autoRead: Bool = true,
        writeBufferWaterMark: ChannelOptions.Types.WriteBufferWaterMark? = nil,
        makeHandler: @escaping @Sendable () -> any ChannelHandler,
        onEvent: @escaping @Sendable (ChildEvent) -> Void,
        spawned: @escaping @Sendable (ChildProcess) -> Void = { _ in },
        duplicateForWriting: Bool = false
    ) async throws(Failure) -> (child: ChildProcess, channel: any Channel, writer: SocketWriter?) {
        typealias Launched = (child: ChildProcess, channel: any Channel, writer: SocketWriter?)
        let result = await withCheckedContinuation { (c: CheckedContinuation<Result<Launched, Failure>, Never>) in
            start(settings, logPath: logPath, group: group, autoRead: autoRead, writeBufferWaterMark: writeBufferWaterMark,
                  makeHandler: makeHandler, onEvent: onEvent, spawned: spawned, duplicateForWriting: duplicateForWriting) { result in
                c.resume(returning: result.map { launched in
                    let writer = launched.writeDescriptor.map { SocketWriter(descriptor: $0) }
                    if let writer { launched.channel.closeFuture.whenComplete { _ in writer.close() } }
                    return (launched.child, launched.channel, writer)
                })
            }
        }
        return try result.get()
    }

    /// The callback form of ``launch(_:logPath:group:autoRead:writeBufferWaterMark:makeHandler:onEvent:spawned:duplicateForWriting:)``,
    /// with no hop of its own: the socketpair and the log file are made on the caller's
    /// thread, the spawn is handed to the reaper thread (which must fork: see
    /// ``ProcessReaper``), and `spawned` and `completion` run there or on the channel's
    /// event loop. For a launch's critical path (the actor → the reaper thread, one wake).
    static func start(
        _ settings: SpawnSettings, logPath: String, output: Int32? = nil, group: any EventLoopGroup, autoRead: Bool = true,
        writeBufferWaterMark: ChannelOptions.Types.WriteBufferWaterMark? = nil,
        makeHandler: @escaping @Sendable () -> any ChannelHandler,
        onEvent: @escaping @Sendable (ChildEvent) -> Void,
        spawned: @escaping @Sendable (ChildProcess) -> Void,
        duplicateForWriting: Bool = false,
        completion: @escaping @Sendable (Result<(child: ChildProcess, channel: any Channel, writeDescriptor: Int32?), Failure>) -> Void
    ) {
        let hostEnd: SystemPackage.FileDescriptor
        let childEnd: SystemPackage.FileDescriptor
        let log: SystemPackage.FileDescriptor
        do {
            (hostEnd, childEnd) = try makeSocketPair()
            do {
                // The caller's descriptor (an app's log pipe; closed here once the child
                // has its copy), or the log file.
                log = try output.map { SystemPackage.FileDescriptor(rawValue: $0) }
                    ?? SystemPackage.FileDescriptor.open(FilePath(logPath), .writeOnly, options: [.append, .create, .closeOnExec],
                                                         permissions: [.ownerReadWrite])
            } catch {
                try? childEnd.close()
                try? hostEnd.close()
                throw error
            }
        } catch {
            if let output { _ = Glibc.close(output) }
            completion(.failure(.spawn(error)))
            return
        }
        var settings = settings
        settings.ipcDescriptor = childEnd
        settings.standardOutput = log
        settings.standardError = log
        ProcessReaper.shared.spawn(settings, onEvent: onEvent) { result in
            // The child has its copies (or never will).
            try? childEnd.close()
            try? log.close()
            let child: ChildProcess
            switch result {
            case .success(let c):
                child = c
            case .failure(let error):
                try? hostEnd.close()
                completion(.failure(.spawn(error)))
                return
            }
            spawned(child)
            // Before NIO has it: the channel closes its descriptor when it closes.
            let duplicate = duplicateForWriting ? fcntl(hostEnd.rawValue, F_DUPFD_CLOEXEC, 0) : -1
            var bootstrap = ClientBootstrap(group: group).channelOption(.autoRead, value: autoRead)
            if let mark = writeBufferWaterMark {
                bootstrap = bootstrap.channelOption(.writeBufferWaterMark, value: mark)
            }
            bootstrap
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(makeHandler())
                    }
                }
                .withConnectedSocket(hostEnd.rawValue)
                .whenComplete { attached in
                    switch attached {
                    case .success(let channel):
                        completion(.success((child, channel, duplicate >= 0 ? duplicate : nil)))
                    case .failure(let error):
                        // NIO took the descriptor only if the channel was made; it was not.
                        if duplicate >= 0 { _ = Glibc.close(duplicate) }
                        try? hostEnd.close()
                        completion(.failure(.attach(child, error)))
                    }
                }
        }
    }
}
