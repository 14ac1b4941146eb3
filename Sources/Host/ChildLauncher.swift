import AppHostSystem
import NIOCore
import NIOPosix
import SystemPackage

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
    static func launch(
        _ settings: SpawnSettings, logPath: String, group: any EventLoopGroup, autoRead: Bool = true,
        writeBufferWaterMark: ChannelOptions.Types.WriteBufferWaterMark? = nil,
        makeHandler: @escaping @Sendable () -> any ChannelHandler,
        onEvent: @escaping @Sendable (ChildEvent) -> Void,
        spawned: (ChildProcess) -> Void = { _ in }
    ) async throws(Failure) -> (child: ChildProcess, channel: any Channel) {
        let hostEnd: SystemPackage.FileDescriptor
        let child: ChildProcess
        do throws(any Error) {
            let (host, childEnd) = try makeSocketPair()
            hostEnd = host
            let log: SystemPackage.FileDescriptor
            do {
                log = try SystemPackage.FileDescriptor.open(FilePath(logPath), .writeOnly, options: [.append, .create, .closeOnExec],
                                              permissions: [.ownerReadWrite])
            } catch {
                try? childEnd.close()
                try? host.close()
                throw error
            }
            var settings = settings
            settings.ipcDescriptor = childEnd
            settings.standardOutput = log
            settings.standardError = log
            defer {
                try? childEnd.close()
                try? log.close()
            }
            do {
                child = try await ProcessReaper.shared.spawn(settings, onEvent: onEvent)
            } catch {
                try? host.close()
                throw error
            }
        } catch {
            throw .spawn(error)
        }
        spawned(child)
        do {
            var bootstrap = ClientBootstrap(group: group).channelOption(.autoRead, value: autoRead)
            if let mark = writeBufferWaterMark {
                bootstrap = bootstrap.channelOption(.writeBufferWaterMark, value: mark)
            }
            let channel = try await bootstrap
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(makeHandler())
                    }
                }
                .withConnectedSocket(hostEnd.rawValue)
                .get()
            return (child, channel)
        } catch {
            // NIO took the descriptor only if the channel was made; it was not.
            try? hostEnd.close()
            throw .attach(child, error)
        }
    }
}
