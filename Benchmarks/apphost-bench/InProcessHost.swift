import AppHostProtocol
import AppHostSystem
import Foundation
import Host
import Logging
import NIOPosix

/// A host in this process, as the tests create one: its own state directory, one
/// NIO event loop thread, a ``Supervisor`` and its input loop. Always `stop()` it.
final class InProcessHost: Sendable {
    let dir: TempDir
    let supervisor: Supervisor
    let group: MultiThreadedEventLoopGroup
    let loop: Task<Void, Never>

    /// `configure` adjusts the configuration (clock, profile) before the host starts.
    init(label: String, configure: (inout HostConfiguration) -> Void = { _ in }) throws {
        dir = try TempDir(label)
        var config = HostConfiguration(stateDirectory: dir.path)
        config.productDirectories = [productsDirectory]
        configure(&config)
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var logger = Logger(label: "apphost-bench")
        logger.logLevel = .warning
        do {
            supervisor = try Supervisor(configuration: config, group: group, logger: logger)
        } catch {
            try? group.syncShutdownGracefully()
            dir.remove()
            throw error
        }
        let s = supervisor
        loop = Task { await s.run() }
    }

    /// Installs `executable` under bundle identifier `id`.
    func install(id: String, executable: String) async throws {
        let path = try makeBundle(in: dir.path, name: id, id: id, executable: executable)
        _ = try await supervisor.install(path: path, settings: [:])
    }

    /// Terminates every app (waiting until each is reaped) and tears the host down.
    /// Snapshots still being drawn are waited for: the supervisor runs on the group's
    /// event loop, so nothing may come back to it once the group is shut down.
    func stop() async {
        await supervisor.shutdown()
        await supervisor.finish()
        await loop.value
        await supervisor.waitForSnapshots()
        try? await group.shutdownGracefully()
        dir.remove()
    }
}

/// Collects a subscription's live events until it is ended.
struct EventRecorder {
    let subscription: UInt64
    let task: Task<[HostEvent], Never>

    static func start(_ supervisor: Supervisor, app: String?) async -> EventRecorder {
        let (_, live, id) = await supervisor.subscribe(bundleIdentifier: app.flatMap(BundleID.init))
        let task = Task {
            var out: [HostEvent] = []
            for await e in live { out.append(e) }
            return out
        }
        return EventRecorder(subscription: id, task: task)
    }

    /// Ends the subscription and returns every event it saw, in order.
    func finish(_ supervisor: Supervisor) async -> [HostEvent] {
        await supervisor.unsubscribe(subscription)
        return await task.value
    }
}

extension HostEvent {
    /// `callback` event of a delegate method that returned.
    func isReturn(of name: String) -> Bool { callback == name }
    func isTransition(to state: AppState) -> Bool { kind == .transition && to == state }
}
