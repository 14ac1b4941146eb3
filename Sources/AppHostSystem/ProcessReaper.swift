import CAppHostSys
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Spawns sandboxed children and reports their stops, continues and exits.
///
/// There is exactly one (`shared`) per process, because what it watches is
/// process-wide: a stop or continue of *any* child is reported to the whole
/// process through `waitid`, and whoever waits first consumes the report. Two
/// reapers would steal each other's reports.
///
/// Design (event-driven, nothing polls):
///
/// - **Reaper thread** (`aph-reaper`), a long-lived OS thread blocked in
///   `epoll_wait` on an eventfd (work requests) and on every child's pidfd.
///   Spawns run *on this thread*: `PR_SET_PDEATHSIG` fires when the thread
///   that forked the child exits, and Swift's cooperative threads come and go;
///   this one lives as long as the process. A pidfd becomes readable when its
///   child exits: the thread reaps it with `waitid(P_PIDFD, WEXITED|WNOHANG)`,
///   closes the pidfd and delivers `.exited`.
/// - **Stop watcher thread** (`aph-stopwatch`), blocked in
///   `waitid(P_ALL, WSTOPPED|WCONTINUED)`. Without `WEXITED` it consumes only
///   stop/continue reports (a pidfd does not wake on a stop) and leaves exits to
///   the pidfd path. It maps the reported pid to a tracked child and delivers
///   `.stopped`/`.continued`. When the process has no waitable child
///   (`ECHILD`) it blocks reading an eventfd that the reaper signals after each
///   spawn, instead of spinning.
///
/// Ordering: each child's events are delivered under that child's delivery
/// lock; stops and continues come from one thread in kernel order, and
/// `.exited` is last (a stop/continue report still in flight when the exit is
/// delivered is dropped; the kernel itself no longer reports them for a zombie). The pid→child table is locked across each spawn, so a child
/// that stops right after execve is already in the table when its report is
/// looked up.
///
/// Callbacks run on these two threads: forward the event (into an
/// `AsyncStream`, an actor) and return; do not block in them.
///
/// Caveats: the process must not set SIGCHLD to `SIG_IGN` (children would be
/// auto-reaped). Stop/continue reports of children started by other code in
/// this process are consumed (and ignored) by the stop watcher. If other code
/// calls `waitpid(-1)` and reaps our child first, `.exited(.unavailable)` is
/// delivered. In theory, a stop report read just before its child is killed,
/// reaped and its pid reused by a new spawn of ours (a full pid-space wrap
/// within microseconds) could be attributed to the new child.
public final class ProcessReaper: Sendable {
    /// The one reaper of this process (see the type's documentation for why).
    public static let shared = ProcessReaper()

    private struct Startup {
        var core: ReaperCore?
        var reaperThreadRunning = false
        var stopWatcherRunning = false
    }

    private let startup = Mutex(Startup())

    private init() {}

    /// Spawns a child on the reaper thread and returns once it has exec'ed
    /// (or throws which step failed). `onEvent` receives the child's events,
    /// `.exited` last, on the reaper's threads; it may be called before this
    /// function returns.
    public func spawn(
        _ settings: SpawnSettings,
        onEvent: @escaping @Sendable (ChildEvent) -> Void
    ) async throws(SpawnError) -> ChildProcess {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<ChildProcess, SpawnError>, Never>) in
            spawn(settings, onEvent: onEvent) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Spawns a child and returns it with a stream of its events that
    /// finishes after `.exited`.
    public func spawn(
        _ settings: SpawnSettings
    ) async throws(SpawnError) -> (process: ChildProcess, events: AsyncStream<ChildEvent>) {
        let (events, continuation) = AsyncStream<ChildEvent>.makeStream()
        let process: ChildProcess
        do {
            process = try await spawn(settings) { event in
                continuation.yield(event)
                if case .exited = event { continuation.finish() }
            }
        } catch {
            continuation.finish()
            throw error
        }
        return (process, events)
    }

    /// Callback form of `spawn`: `completion` runs on the reaper thread with
    /// the child or the error.
    public func spawn(
        _ settings: SpawnSettings,
        onEvent: @escaping @Sendable (ChildEvent) -> Void,
        completion: @escaping @Sendable (Result<ChildProcess, SpawnError>) -> Void
    ) {
        let core: ReaperCore
        do {
            core = try started()
        } catch {
            completion(.failure(error))
            return
        }
        core.submit(SpawnRequest(settings: settings, onEvent: onEvent, completion: completion))
        // The reaper thread, just woken, is often queued on this CPU (on the
        // project's 2-vCPU VM the other one, halted, looks preempted to the
        // scheduler) and waits until this thread blocks: a launch's actor step
        // went on for 60-130 µs after the submit. Yielding once lets the spawn
        // start now; submit → aph_spawn went from 155-200 µs to 43-51 µs.
        sched_yield()
    }

    /// Creates the descriptors and starts both threads on first use; retries a
    /// part that failed on a later call.
    private func started() throws(SpawnError) -> ReaperCore {
        try startup.withLock { (state: inout Startup) throws(SpawnError) -> ReaperCore in
            let core: ReaperCore
            if let existing = state.core {
                core = existing
            } else {
                do throws(Errno) {
                    core = try ReaperCore()
                } catch {
                    throw SpawnError(code: .reaperUnavailable, errno: error, detail: "epoll/eventfd")
                }
                state.core = core
            }
            if !state.reaperThreadRunning {
                do throws(Errno) {
                    try startDetachedThread(name: "aph-reaper") { ReaperLoop(core: core).run() }
                } catch {
                    throw SpawnError(code: .reaperUnavailable, errno: error, detail: "reaper thread")
                }
                state.reaperThreadRunning = true
            }
            if !state.stopWatcherRunning {
                do throws(Errno) {
                    try startDetachedThread(name: "aph-stopwatch") { core.runStopWatcher() }
                } catch {
                    throw SpawnError(code: .reaperUnavailable, errno: error, detail: "stop watcher thread")
                }
                state.stopWatcherRunning = true
            }
            return core
        }
    }
}

struct SpawnRequest: Sendable {
    var settings: SpawnSettings
    var onEvent: @Sendable (ChildEvent) -> Void
    var completion: @Sendable (Result<ChildProcess, SpawnError>) -> Void
}

/// What the two threads share: descriptors, the work queue and the pid table.
final class ReaperCore: Sendable {
    /// epoll instance of the reaper thread.
    let epollFD: Int32
    /// Nonblocking eventfd: "work is queued" (epoll key 0).
    let workFD: Int32
    /// Blocking eventfd: "a child was spawned" for the stop watcher.
    let spawnedFD: Int32
    let queue = Mutex<[SpawnRequest]>([])
    /// Live tracked children by pid. Locked across each spawn (see ProcessReaper).
    let children = Mutex<[Int32: ChildProcess]>([:])

    init() throws(Errno) {
        var epoll: Int32 = -1, work: Int32 = -1, spawned: Int32 = -1
        var rc = aph_epoll_create(&epoll)
        if rc == 0 { rc = aph_eventfd_create(1, &work) }
        if rc == 0 { rc = aph_eventfd_create(0, &spawned) }
        if rc == 0 { rc = aph_epoll_add(epoll, work, 0) }
        guard rc == 0 else {
            for fd in [epoll, work, spawned] where fd >= 0 { _ = Glibc.close(fd) }
            throw Errno(rawValue: rc)
        }
        epollFD = epoll
        workFD = work
        spawnedFD = spawned
    }

    func submit(_ request: SpawnRequest) {
        queue.withLock { $0.append(request) }
        let rc = aph_eventfd_signal(workFD)
        // Only EBADF/EINVAL (a bug) or counter overflow (2^64 wakeups) can fail.
        precondition(rc == 0, "eventfd write failed: \(rc)")
    }

    /// The stop watcher thread's loop.
    func runStopWatcher() {
        while true {
            var report = aph_wait_result()
            let rc = aph_waitid_all(APH_WSTOPPED | APH_WCONTINUED, &report)
            if rc == ECHILD {
                // No child can report anything until the next spawn.
                _ = aph_eventfd_drain(spawnedFD)
                continue
            }
            precondition(rc == 0, "waitid(P_ALL) failed: \(rc)")
            guard report.pid > 0, let child = children.withLock({ $0[report.pid] }) else { continue }
            switch report.code {
            case APH_CLD_STOPPED, APH_CLD_TRAPPED: child.deliver(.stopped(signal: report.status))
            case APH_CLD_CONTINUED: child.deliver(.continued)
            default: break
            }
        }
    }
}

/// The reaper thread's state; created on that thread and never leaves it.
private final class ReaperLoop {
    let core: ReaperCore
    /// epoll key → child (key 0 is the work eventfd).
    var watched: [UInt64: ChildProcess] = [:]
    var nextKey: UInt64 = 1
    var programs: [SeccompPolicy: SeccompProgram] = [:]
    var rulesets = LandlockRulesetCache()

    init(core: ReaperCore) { self.core = core }

    func run() -> Never {
        var keys = [UInt64](repeating: 0, count: 64)
        while true {
            var count: Int32 = 0
            let rc = keys.withUnsafeMutableBufferPointer {
                aph_epoll_wait(core.epollFD, $0.baseAddress, Int32($0.count), &count)
            }
            precondition(rc == 0, "epoll_wait failed: \(rc)")
            for key in keys[0..<Int(count)] {
                if key == 0 {
                    // Drain before taking the queue so no wakeup is lost.
                    _ = aph_eventfd_drain(core.workFD)
                    let requests = core.queue.withLock { queue in
                        let taken = queue
                        queue.removeAll()
                        return taken
                    }
                    for request in requests { perform(request) }
                } else if let child = watched[key] {
                    reap(child, key: key)
                }
            }
        }
    }

    private func reap(_ child: ChildProcess, key: UInt64) {
        let pidfd = child.pidfdForReaper
        var report = aph_wait_result()
        var rc = aph_waitid_pidfd(pidfd, APH_WEXITED | APH_WNOHANG, &report)
        if rc == 0 && report.pid == 0 {
            // A readable pidfd means the child has exited, so this returns at once.
            rc = aph_waitid_pidfd(pidfd, APH_WEXITED, &report)
        }
        let status: ExitStatus
        if rc == 0, let reported = ExitStatus(waitCode: report.code, status: report.status) {
            status = reported
        } else {
            status = .unavailable // ECHILD: another waiter in this process reaped it
        }
        _ = aph_epoll_remove(core.epollFD, pidfd)
        watched[key] = nil
        child.markReaped(status)
        core.children.withLock { table in
            if table[child.pid] === child { table[child.pid] = nil }
        }
        child.deliver(.exited(status))
    }

    private func perform(_ request: SpawnRequest) {
        let result: Result<ChildProcess, SpawnError>
        do {
            result = .success(try spawn(request))
        } catch {
            result = .failure(error)
        }
        request.completion(result)
    }

    private func spawn(_ request: SpawnRequest) throws(SpawnError) -> ChildProcess {
        let settings = request.settings
        try validate(settings)

        var program: SeccompProgram?
        if settings.seccomp.isEnabled {
            if let cached = programs[settings.seccomp] {
                program = cached
            } else {
                program = try SeccompProgram.compile(settings.seccomp)
                programs[settings.seccomp] = program
            }
        }

        // nil without a policy or without Landlock in this kernel (the caller
        // warns through `Landlock.abiVersion`). Held until aph_spawn returns.
        var ruleset: LandlockRuleset?
        if let policy = settings.landlock {
            if let abi = Landlock.abiVersion {
                ruleset = try rulesets.ruleset(policy, kernelABI: abi, now: monotonicNanoseconds())
            } else {
                // Bad paths are refused on every kernel, not only where they matter.
                try LandlockRuleset.validate(policy)
            }
        }

        let argv = CStringArray(settings.arguments)
        let envp = CStringArray(settings.environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })
        let cgroupFiles = CStringArray(settings.cgroupProcsFiles)
        guard argv.isComplete, envp.isComplete, cgroupFiles.isComplete else {
            throw SpawnError(code: .invalidSettings, errno: .noMemory, path: settings.executablePath)
        }
        let limits = settings.resourceLimits.map {
            aph_rlimit(resource: $0.resource.rawValue, soft: $0.soft, hard: $0.hard)
        }
        let seccompBytes = program?.bytes ?? []
        let groups: [UInt32] = settings.identity?.groups ?? []
        guard groups.count <= 65536, settings.keptCapabilities.allSatisfy({ (0..<64).contains($0.rawValue) }) else {
            throw SpawnError(code: .invalidSettings, errno: .invalidArgument, path: settings.executablePath,
                             detail: "over 65536 supplementary groups, or a capability number outside 0...63")
        }
        let kept = settings.keptCapabilities.reduce(UInt64(0)) { $0 | (1 << UInt64($1.rawValue)) }
        let namespaceDirectories = settings.namespaces.map { $0.directories }
        if let namespaces = settings.namespaces, namespaceDirectories ?? nil == nil || (settings.identity != nil && namespaces.isolatesUser) {
            throw SpawnError(code: .invalidSettings, errno: .invalidArgument, path: settings.executablePath,
                             detail: "namespaces with an identity, over \(AppNamespaces.maximumWritable) writable folders, or one not beneath \(namespaces.hidden)")
        }
        let nsWritable = CStringArray(settings.namespaces?.writable ?? [])
        let nsDirectories = CStringArray((namespaceDirectories ?? nil) ?? [])
        let nsCovered = CStringArray(settings.namespaces?.covered ?? [])
        if let namespaces = settings.namespaces, namespaces.covered.count > AppNamespaces.maximumCovered {
            throw SpawnError(code: .invalidSettings, errno: .argListTooLong, path: settings.executablePath,
                             detail: "over \(AppNamespaces.maximumCovered) protected files to cover")
        }
        guard nsWritable.isComplete, nsDirectories.isComplete, nsCovered.isComplete else {
            throw SpawnError(code: .invalidSettings, errno: .noMemory, path: settings.executablePath)
        }

        var result = aph_spawn_result()
        let core = self.core
        let onEvent = request.onEvent
        let (rc, child): (Int32, ChildProcess?) = settings.executablePath.withCString { path in
            withOptionalCString(settings.workingDirectory) { workingDirectory in
                limits.withUnsafeBufferPointer { limitBuffer in
                  groups.withUnsafeBufferPointer { groupBuffer in
                    seccompBytes.withUnsafeBytes { seccompRaw in
                        var bpf = aph_bpf_program(
                            instructions: UnsafeMutableRawPointer(mutating: seccompRaw.baseAddress),
                            length: UInt16(seccompRaw.count / 8))
                        return withOptionalCString(settings.namespaces?.hidden) { hiddenPointer in
                        var namespaces = aph_namespaces(
                            isolate_user: (settings.namespaces?.isolatesUser ?? true) ? 1 : 0, uid: settings.namespaces?.uid ?? 0, gid: settings.namespaces?.gid ?? 0, hidden: hiddenPointer,
                            writable: UnsafeRawPointer(nsWritable.pointer).assumingMemoryBound(to: UnsafePointer<CChar>?.self),
                            writable_count: nsWritable.count,
                            directories: UnsafeRawPointer(nsDirectories.pointer).assumingMemoryBound(to: UnsafePointer<CChar>?.self),
                            directory_count: nsDirectories.count,
                            covered: UnsafeRawPointer(nsCovered.pointer).assumingMemoryBound(to: UnsafePointer<CChar>?.self),
                            covered_count: nsCovered.count)
                        return withUnsafePointer(to: &namespaces) { namespacesPointer in
                        withUnsafePointer(to: &bpf) { bpfPointer in
                            var spawnSettings = aph_spawn_settings(
                                path: path,
                                argv: UnsafePointer(argv.pointer),
                                envp: UnsafePointer(envp.pointer),
                                working_directory: workingDirectory,
                                stdin_fd: settings.standardInput?.rawValue ?? -1,
                                stdout_fd: settings.standardOutput?.rawValue ?? -1,
                                stderr_fd: settings.standardError?.rawValue ?? -1,
                                ipc_fd: settings.ipcDescriptor?.rawValue ?? -1,
                                stamp_fd: settings.stampDescriptor?.rawValue ?? -1,
                                rlimits: limitBuffer.baseAddress,
                                rlimit_count: limitBuffer.count,
                                seccomp: program == nil ? nil : bpfPointer,
                                landlock_ruleset_fd: ruleset?.descriptor ?? -1,
                                death_signal: settings.deathSignal ?? 0,
                                drop_capabilities: settings.dropsCapabilities ? 1 : 0,
                                cgroup_procs_files: UnsafeRawPointer(cgroupFiles.pointer)
                                    .assumingMemoryBound(to: UnsafePointer<CChar>?.self),
                                cgroup_procs_file_count: cgroupFiles.count,
                                set_identity: settings.identity == nil ? 0 : 1,
                                uid: settings.identity?.uid ?? 0,
                                gid: settings.identity?.gid ?? 0,
                                groups: groupBuffer.baseAddress,
                                group_count: groupBuffer.count,
                                set_umask: settings.umask == nil ? 0 : 1,
                                umask: UInt32(settings.umask ?? 0),
                                kept_capabilities: kept,
                                app_lockdown: settings.appLockdown && program != nil ? 1 : 0,
                                namespaces: settings.namespaces == nil ? nil : namespacesPointer)
                            // Locked across the spawn: the stop watcher must find
                            // the child if it stops right after execve.
                            return core.children.withLock { table -> (Int32, ChildProcess?) in
                                let rc = aph_spawn(&spawnSettings, &result)
                                guard rc == 0 else { return (rc, nil) }
                                let child = ChildProcess(pid: result.pid, pidfd: result.pidfd, onEvent: onEvent)
                                table[result.pid] = child
                                return (0, child)
                            }
                        }
                        }
                        }
                    }
                  }
                }
            }
        }
        withExtendedLifetime(ruleset) {}
        guard let child else {
            throw spawnError(rc: rc, result: result, settings: settings)
        }

        let key = nextKey
        nextKey += 1
        let watchRC = aph_epoll_add(core.epollFD, result.pidfd, key)
        guard watchRC == 0 else {
            // Untrackable: kill it and reap it here.
            _ = aph_pidfd_send_signal(result.pidfd, SIGKILL)
            var report = aph_wait_result()
            _ = aph_waitid_pidfd(result.pidfd, APH_WEXITED, &report)
            child.markReaped(ExitStatus(waitCode: report.code, status: report.status) ?? .unavailable)
            core.children.withLock { table in
                if table[child.pid] === child { table[child.pid] = nil }
            }
            throw SpawnError(code: .watchChild, errno: Errno(rawValue: watchRC), path: settings.executablePath)
        }
        watched[key] = child
        // Wake the stop watcher if it is waiting for a first child.
        _ = aph_eventfd_signal(core.spawnedFD)
        return child
    }

    private func validate(_ settings: SpawnSettings) throws(SpawnError) {
        func invalid(_ detail: String) -> SpawnError {
            SpawnError(code: .invalidSettings, path: settings.executablePath, detail: detail)
        }
        if settings.executablePath.isEmpty { throw invalid("empty executable path") }
        if settings.executablePath.utf8.contains(0) { throw invalid("NUL byte in the executable path") }
        if settings.arguments.contains(where: { $0.utf8.contains(0) }) { throw invalid("NUL byte in an argument") }
        if let directory = settings.workingDirectory, directory.isEmpty || directory.utf8.contains(0) {
            throw invalid("bad working directory \"\(directory)\"")
        }
        for (name, value) in settings.environment {
            if name.isEmpty || name.contains("=") || name.utf8.contains(0) {
                throw invalid("bad environment variable name \"\(name)\"")
            }
            if value.utf8.contains(0) { throw invalid("NUL byte in environment variable \(name)") }
        }
        for limit in settings.resourceLimits where limit.soft > limit.hard {
            throw invalid("\(limit): soft limit above hard limit")
        }
        for file in settings.cgroupProcsFiles where file.isEmpty || file.utf8.contains(0) {
            throw invalid("bad cgroup.procs path \"\(file)\"")
        }
        if let sig = settings.deathSignal, sig <= 0 || sig >= 65 {
            throw invalid("bad death signal \(sig)")
        }
        for descriptor in [settings.standardInput, settings.standardOutput, settings.standardError, settings.ipcDescriptor, settings.stampDescriptor] {
            if let descriptor, descriptor.rawValue < 0 { throw invalid("negative descriptor \(descriptor.rawValue)") }
        }
    }

    private func spawnError(rc: Int32, result: aph_spawn_result, settings: SpawnSettings) -> SpawnError {
        let code = SpawnError.Code(rawValue: result.step)
        var error = SpawnError(code: code, errno: Errno(rawValue: rc), path: settings.executablePath)
        switch code {
        case .chdir:
            error.path = settings.workingDirectory
        case .setrlimit:
            let index = Int(result.detail)
            if settings.resourceLimits.indices.contains(index) {
                error.detail = settings.resourceLimits[index].description
            }
        case .installDescriptor, .openDevNull:
            let names = ["stdin", "stdout", "stderr", "the IPC descriptor"]
            let index = Int(result.detail)
            if names.indices.contains(index) { error.detail = "fd \(index) (\(names[index]))" }
        case .joinCgroup:
            let index = Int(result.detail)
            error.path = settings.cgroupProcsFiles.indices.contains(index) ? settings.cgroupProcsFiles[index] : nil
        case .dropCapabilities:
            let stages = ["PR_SET_SECUREBITS", "PR_CAPBSET_DROP", "PR_CAP_AMBIENT", "capset"]
            let index = Int(result.detail)
            if stages.indices.contains(index) { error.detail = stages[index] }
        case .namespaces:
            error.detail = AppNamespaces.stageName(result.detail)
        case .takeIdentity:
            let stages = ["setgroups", "setresgid", "setresuid"]
            let index = Int(result.detail)
            if stages.indices.contains(index) { error.detail = "\(stages[index]) to \(settings.identity?.description ?? "?")" }
        default:
            break
        }
        return error
    }
}

/// A NULL-terminated `char *[]` owned by Swift (strdup'ed, freed on deinit).
struct CStringArray: ~Copyable {
    let pointer: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
    let count: Int
    let isComplete: Bool

    init(_ strings: [String]) {
        count = strings.count
        pointer = .allocate(capacity: strings.count + 1)
        var complete = true
        for (index, string) in strings.enumerated() {
            pointer[index] = strdup(string)
            if pointer[index] == nil { complete = false }
        }
        pointer[strings.count] = nil
        isComplete = complete
    }

    deinit {
        for index in 0..<count { free(pointer[index]) }
        pointer.deallocate()
    }
}

private func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}

/// CLOCK_MONOTONIC in nanoseconds.
func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}
