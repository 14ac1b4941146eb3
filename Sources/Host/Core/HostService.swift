import AppHostProtocol
import AppHostSystem
import Foundation
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

/// Why a host could not start.
public struct HostStartError: Error, CustomStringConvertible {
    public var description: String
}

/// Where a host process runs its Swift Concurrency jobs.
public enum HostConcurrency {
    /// Runs every Swift Concurrency job of this process on SwiftNIO event loops
    /// instead of libdispatch's global queues. Call it first thing in a host process
    /// (`apphost daemon`, `apphost run`), before any task starts; true if it took effect
    /// (false when another hook is installed already, or the runtime has none).
    ///
    /// Why: the first job libdispatch runs on a global (non-overcommit) queue registers a
    /// worker with its pool monitor (`_dispatch_workq_worker_register` in libdispatch's
    /// `src/event/workqueue.c`), which arms a 1 s timer on the manager queue for the life
    /// of the process (`_dispatch_workq_init_once` → `_dispatch_workq_monitor_pools`): an
    /// idle host then woke once a second with nothing to do. Event loops sleep in
    /// `epoll_wait` until there is work. The host never uses `Task.sleep` (its timers are
    /// event-loop timers), whose delayed jobs would still go through a dispatch queue.
    ///
    /// Jobs of utility priority and below (the snapshot renders: tens of milliseconds of
    /// CPU each) run on a loop of their own, so that they never queue in front of the
    /// supervisor's jobs; the others on NIO's singleton loops (one per core).
    public static func runOnEventLoops() -> Bool {
        typealias EnqueueGlobalHook = @convention(thin) (UnownedJob, @convention(thin) (UnownedJob) -> Void) -> Void
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "swift_task_enqueueGlobal_hook") else { return false }
        let slot = symbol.assumingMemoryBound(to: UnsafeRawPointer?.self)
        guard slot.pointee == nil else { return false }
        // Start both groups before any job needs them.
        _ = loops
        _ = backgroundLoops
        return withUnsafeTemporaryAllocation(of: EnqueueGlobalHook.self, capacity: 1) { hook in
            hook.baseAddress!.initialize(to: { job, _ in HostConcurrency.enqueue(job) })
            return hook.baseAddress!.withMemoryRebound(to: UnsafeRawPointer.self, capacity: 1) { function in
                // Before any task, on one thread: nothing reads the slot concurrently yet.
                slot.pointee = function.pointee
                return true
            }
        }
    }

    /// NIO's singleton loops, for all but background work.
    private static let loops: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    /// One loop for jobs of utility priority and below.
    private static let backgroundLoops: any EventLoopGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    private static func enqueue(_ job: UnownedJob) {
        let priority = job.priority.rawValue
        // 0 is "unspecified" (runs as default); utility is 0x11, background 0x09.
        let background = priority != 0 && priority <= TaskPriority.utility.rawValue
        // `any()` stays on the current loop when it belongs to the group (no thread switch).
        let loop = (background ? backgroundLoops : loops).any()
        loop.execute { job.runSynchronously(on: loop.executor.asUnownedSerialExecutor()) }
    }
}

/// The host daemon as a service: takes the state directory's lock, opens the
/// database, serves the control socket, runs the supervisor, and on graceful
/// shutdown (SIGTERM, SIGINT, or a control `shutdown`) terminates every app
/// before it returns.
public struct HostService: Service {
    public let configuration: HostConfiguration
    private let logger: Logger
    private let onStart: @Sendable (Supervisor) async -> Void

    /// `onStart` runs once the control socket is up (e.g. `apphost run` installs and launches its apps).
    public init(configuration: HostConfiguration, logger: Logger,
                onStart: @escaping @Sendable (Supervisor) async -> Void = { _ in }) {
        self.configuration = configuration
        self.logger = logger
        self.onStart = onStart
    }

    public func run() async throws {
        try FileManager.default.createDirectory(atPath: configuration.stateDirectory, withIntermediateDirectories: true)
        let lock: FileLock
        let dir = configuration.stateDirectory
        do {
            lock = try FileLock.acquire(path: configuration.lockPath)
        } catch .held(_, let pid) {
            let who = pid.map { "(pid \($0)) " } ?? ""
            throw HostStartError(description: "another host \(who)is already running on \(dir); stop it with `apphost shutdown --state-dir \(dir)` or use another --state-dir")
        } catch {
            throw HostStartError(description: "cannot lock the state directory: \(error)")
        }
        // The device this state directory stands for (`apphost list-devices`), made once.
        do {
            let device = try DeviceIdentity.loadOrCreate(stateDirectory: dir)
            logger.info("device \"\(device.name)\" (\(device.udid))")
        } catch {
            logger.warning("\(error); `booted` still names this host")
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            let supervisor = try Supervisor(configuration: configuration, group: group, logger: logger)
            await supervisor.publishLogClock()
            let server = try await ControlServer.bind(path: configuration.controlSocketPath, group: group,
                                                      supervisor: supervisor, logger: logger)
            logger.info("host listening on \(configuration.controlSocketPath)")
            let gateway: PushGateway?
            do {
                gateway = try await startPushGateway(group: group, supervisor: supervisor)
            } catch {
                server.close()
                await supervisor.finish()
                throw HostStartError(description: "\(error)")
            }
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { await supervisor.run() }
                tasks.addTask { try await server.serve() }
                if let gateway {
                    tasks.addTask { try await gateway.serve() }
                }
                tasks.addTask { await onStart(supervisor) }
                await withTaskGroup(of: Void.self) { waiters in
                    waiters.addTask { try? await gracefulShutdown() }
                    waiters.addTask {
                        await withTaskCancellationHandler {
                            await supervisor.waitForShutdownRequest()
                        } onCancel: {
                            Task { await supervisor.requestShutdown() }
                        }
                    }
                    await waiters.next()
                    waiters.cancelAll()
                }
                logger.info("shutting down")
                // No new pushes while apps terminate; pushes in flight are answered.
                gateway?.close()
                await supervisor.shutdown()
                server.close()
                await supervisor.finish()
                // Release the state directory before answering a waiting `apphost shutdown`.
                unlink(configuration.controlSocketPath)
                unlink(PushGateway.addressFilePath(stateDirectory: dir))
                lock.release()
                await supervisor.markStopped()
                try await tasks.waitForAll()
            }
        } catch {
            try? await group.shutdownGracefully()
            unlink(configuration.controlSocketPath)
            unlink(PushGateway.addressFilePath(stateDirectory: dir))
            withExtendedLifetime(lock) {}
            throw error
        }
        try? await group.shutdownGracefully()
        unlink(configuration.controlSocketPath)
        withExtendedLifetime(lock) {}
    }

    /// Binds the push gateway when configured, writes its address to
    /// `push-gateway.address` and records where it listens.
    private func startPushGateway(group: any EventLoopGroup, supervisor: Supervisor) async throws -> PushGateway? {
        let addressFile = PushGateway.addressFilePath(stateDirectory: configuration.stateDirectory)
        unlink(addressFile)
        guard let settings = configuration.pushGateway else { return nil }
        let gateway = try await PushGateway.bind(settings: settings, group: group, supervisor: supervisor, logger: logger)
        do {
            try Data((gateway.address + "\n").utf8).write(to: URL(fileURLWithPath: addressFile), options: .atomic)
        } catch {
            gateway.close()
            throw PushGatewayError("cannot write \(addressFile): \(error)")
        }
        logger.info("push gateway on \(gateway.url) (\(gateway.protocolName))")
        await supervisor.recordServiceEvent(
            "push gateway listening on \(gateway.url) (\(gateway.protocolName); APNs provider API: POST /3/device/<token>; provider authentication: \(settings.authentication.summary))")
        return gateway
    }
}
