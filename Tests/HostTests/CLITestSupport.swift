import AppHostSystem
import Dispatch
import Foundation
import TestSupport
import HTTPTestServer
import Synchronization
import SystemPackage
import Testing

#if canImport(Glibc)
import Glibc
#endif

// Helpers for driving the `apphost` binary as a user does: real processes, real
// pipes, real signals. Nothing here sleeps: waits are on pipe lines (read by
// dedicated threads) and on process exits (the project's own ProcessReaper, a
// pidfd per child), bridged to async code with continuations. Not Foundation's
// Process: its run() on Linux crashes now and then (see HTTPTestServer's Tool).

/// The CLI under test, built beside the test bundle.
let apphostPath = productsDirectory + "/apphost"

/// Whether the CLI and the probe app are built (both are needed by `CLITests`).
let cliBuilt = productBuilt("apphost") && probeBuilt

/// How a process ended.
struct CLIExit: Sendable, Equatable, CustomStringConvertible {
    var status: Int32
    /// True when `status` is the number of the signal that killed it.
    var signaled: Bool
    var description: String { signaled ? "killed by signal \(status)" : "exit status \(status)" }
    static func exited(_ status: Int32) -> CLIExit { CLIExit(status: status, signaled: false) }
}

/// The shared, locked state of one `CLIProcess` (what its reader threads and its
/// termination handler fill in, and who waits for what).
private final class CLIProcessState: Sendable {
    struct LineWaiter {
        var from: Int
        var predicate: @Sendable (String) -> Bool
        var continuation: CheckedContinuation<(index: Int, line: String)?, Never>
    }

    struct State {
        var lines: [String] = []
        var partial: [UInt8] = []
        var stdout: [UInt8] = []
        var stderr: [UInt8] = []
        var stdoutEOF = false
        var stderrEOF = false
        var exit: CLIExit?
        var lineWaiters: [UInt64: LineWaiter] = [:]
        var doneWaiters: [CheckedContinuation<CLIExit, Never>] = []
        var nextWaiter: UInt64 = 0
        var cancelledWaiters: Set<UInt64> = []

        var done: Bool { stdoutEOF && stderrEOF && exit != nil }

        /// Removes and returns the resumptions due now (run them outside the lock).
        mutating func due() -> [() -> Void] {
            var out: [() -> Void] = []
            for (id, waiter) in lineWaiters {
                if let hit = firstLine(from: waiter.from, waiter.predicate) {
                    lineWaiters[id] = nil
                    out.append { waiter.continuation.resume(returning: hit) }
                } else if stdoutEOF {
                    lineWaiters[id] = nil
                    out.append { waiter.continuation.resume(returning: nil) }
                }
            }
            if done, let exit {
                let waiters = doneWaiters
                doneWaiters = []
                out += waiters.map { c in { c.resume(returning: exit) } }
            }
            return out
        }

        func firstLine(from: Int, _ predicate: (String) -> Bool) -> (index: Int, line: String)? {
            guard from < lines.count else { return nil }
            for i in from..<lines.count where predicate(lines[i]) { return (i, lines[i]) }
            return nil
        }
    }

    let state = Mutex(State())

    func update(_ body: (inout State) -> Void) {
        let resumptions = state.withLock { s -> [() -> Void] in
            body(&s)
            return s.due()
        }
        for r in resumptions { r() }
    }

    func received(_ bytes: ArraySlice<UInt8>, stdout: Bool) {
        update { s in
            guard stdout else { s.stderr += bytes; return }
            s.stdout += bytes
            s.partial += bytes
            while let newline = s.partial.firstIndex(of: 0x0a) {
                s.lines.append(String(decoding: s.partial[..<newline], as: UTF8.self))
                s.partial.removeSubrange(...newline)
            }
        }
    }

    func endOfFile(stdout: Bool) {
        update { s in
            if stdout {
                if !s.partial.isEmpty {
                    s.lines.append(String(decoding: s.partial, as: UTF8.self))
                    s.partial = []
                }
                s.stdoutEOF = true
            } else {
                s.stderrEOF = true
            }
        }
    }
}

/// One run of the `apphost` binary with its stdout and stderr read as they come.
/// Stdout is split into lines that tests can wait for; the exit is awaited
/// without blocking Swift's cooperative pool.
final class CLIProcess: Sendable {
    let arguments: [String]
    let pid: Int32
    private let child: ChildProcess
    private let shared: CLIProcessState

    /// Starts `apphost arguments...` (stdin is /dev/null; `APPHOST_STATE_DIR`,
    /// `XDG_STATE_HOME` and `APPHOST_PRODUCTS_DIR` are removed from its environment
    /// so that only the command line decides, unless `environment` sets them).
    /// `umask` is the process's umask (nil: the test runner's).
    init(_ arguments: [String], environment overrides: [String: String] = [:], umask: mode_t? = nil,
         identity: ProcessIdentity? = nil) throws {
        self.arguments = arguments
        let shared = CLIProcessState()
        var environment = ProcessInfo.processInfo.environment
        environment["APPHOST_STATE_DIR"] = nil
        environment["XDG_STATE_HOME"] = nil
        environment["APPHOST_PRODUCTS_DIR"] = nil
        environment.merge(overrides) { $1 }
        let out = try makePipe(), err = try makePipe()
        let settings = SpawnSettings(
            executablePath: apphostPath, arguments: [apphostPath] + arguments, environment: environment,
            standardOutput: out.write, standardError: err.write, seccomp: .none, dropsCapabilities: identity != nil,
            identity: identity, umask: umask)
        let started = SpawnWait()
        ProcessReaper.shared.spawn(settings, onEvent: { event in
            guard case .exited(let status) = event else { return }
            let exit: CLIExit
            switch status {
            case .exited(let code): exit = CLIExit(status: code, signaled: false)
            case .signaled(let signal, _): exit = CLIExit(status: signal, signaled: true)
            }
            shared.update { $0.exit = exit }
        }, completion: { started.finish($0) })
        let result = started.wait()
        try? out.write.close()
        try? err.write.close()
        let child: ChildProcess
        switch result {
        case .success(let c):
            child = c
        case .failure(let error):
            try? out.read.close()
            try? err.read.close()
            throw error
        }
        self.child = child
        self.shared = shared
        self.pid = child.pid
        Self.pump(out.read, stdout: true, into: shared)
        Self.pump(err.read, stdout: false, into: shared)
    }

    /// Reads a pipe to its end on a thread of its own (blocking reads stay off
    /// the cooperative pool).
    private static func pump(_ fd: FileDescriptor, stdout: Bool, into shared: CLIProcessState) {
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd.rawValue, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                shared.received(buffer[0..<n], stdout: stdout)
            }
            shared.endOfFile(stdout: stdout)
            try? fd.close()
        }
        thread.name = "cli-pipe-\(stdout ? "out" : "err")"
        thread.start()
    }

    /// Stdout so far.
    var stdout: String { shared.state.withLock { String(decoding: $0.stdout, as: UTF8.self) } }
    /// Stderr so far.
    var stderr: String { shared.state.withLock { String(decoding: $0.stderr, as: UTF8.self) } }
    /// Complete stdout lines so far.
    var lines: [String] { shared.state.withLock { $0.lines } }
    /// How it ended, if it has (and its pipes are drained).
    var exit: CLIExit? { shared.state.withLock { $0.done ? $0.exit : nil } }

    /// The first stdout line at index `from` or later that matches, waiting for it
    /// if needed; nil if stdout ends (or the task is cancelled) first.
    func line(from: Int = 0, where predicate: @escaping @Sendable (String) -> Bool) async -> (index: Int, line: String)? {
        let id = shared.state.withLock { s -> UInt64 in s.nextWaiter += 1; return s.nextWaiter }
        let shared = self.shared
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<(index: Int, line: String)?, Never>) in
                shared.update { s in
                    if Task.isCancelled || s.cancelledWaiters.contains(id) {
                        c.resume(returning: nil)
                    } else {
                        s.lineWaiters[id] = .init(from: from, predicate: predicate, continuation: c)
                    }
                }
            }
        } onCancel: {
            let waiter = shared.state.withLock { s in
                s.cancelledWaiters.insert(id)
                return s.lineWaiters.removeValue(forKey: id)
            }
            waiter?.continuation.resume(returning: nil)
        }
    }

    /// The first stdout line containing `text` (from index `from` on).
    func line(containing text: String, from: Int = 0) async -> (index: Int, line: String)? {
        await line(from: from) { $0.contains(text) }
    }

    /// Waits until the process has exited and both pipes reached end of file.
    /// Not cancellable on purpose: cleanup must reap.
    @discardableResult
    func waitForExit() async -> CLIExit {
        await withCheckedContinuation { (c: CheckedContinuation<CLIExit, Never>) in
            shared.update { $0.doneWaiters.append(c) }
        }
    }

    /// Sends `signal` through the child's pidfd (never to a reused pid once it is reaped).
    func send(_ signal: Int32) {
        try? child.signal(signal)
    }

    /// SIGTERM (SIGKILL if the test was cancelled, e.g. by its time limit), then waits.
    @discardableResult
    func stop() async -> CLIExit {
        send(Task.isCancelled ? SIGKILL : SIGTERM)
        return await waitForExit()
    }
}

/// Runs `apphost args...` to completion: exit status, stdout, stderr. A process
/// killed by a signal reports 128 + the signal number, as a shell would.
func apphost(_ args: [String], environment: [String: String] = [:]) async -> (status: Int32, stdout: String, stderr: String) {
    let process: CLIProcess
    do {
        process = try CLIProcess(args, environment: environment)
    } catch {
        Issue.record("could not start \(apphostPath): \(error)")
        return (-1, "", "")
    }
    let exit = await process.waitForExit()
    return (exit.signaled ? 128 + exit.status : exit.status, process.stdout, process.stderr)
}

/// A test's state directory plus every process the test started through it;
/// `close()` reaps them all and removes the directory.
final class CLISession: Sendable {
    let dir: TempDir
    var stateDir: String { dir.path }
    private let processes = Mutex<[CLIProcess]>([])

    init(_ label: String) throws {
        dir = try TempDir(label)
    }

    /// `args` with `--state-dir DIR` after the verb, or the subcommand of a verb group
    /// such as `ble add` (so before any `--`).
    func withStateDir(_ args: [String]) -> [String] {
        guard let verb = args.first else { return ["--state-dir", stateDir] }
        let groups: Set<String> = ["clock", "profile", "manifest", "location", "ble", "accessory", "settings", "device", "bgtask"]
        let head = groups.contains(verb) && args.count > 1 && !args[1].hasPrefix("-") ? 2 : 1
        return Array(args.prefix(head)) + ["--state-dir", stateDir] + args.dropFirst(head)
    }

    /// Starts `apphost args...` (with this session's state dir) and tracks it.
    func start(_ args: [String], umask: mode_t? = nil, identity: ProcessIdentity? = nil) throws -> CLIProcess {
        let p = try CLIProcess(withStateDir(args), umask: umask, identity: identity)
        processes.withLock { $0.append(p) }
        return p
    }

    /// Runs `apphost args...` with this session's state dir to completion.
    func run(_ args: String...) async -> (status: Int32, stdout: String, stderr: String) {
        await apphost(withStateDir(args))
    }

    /// Starts `apphost daemon` on this state dir and waits for its ready line. A real-clock
    /// daemon of a test that names no profile or config gets the watchdogs a loaded machine
    /// can trip on a healthy app (launch, didEnterBackground, the foreground hang, a wake's
    /// handler) at 10 minutes, as a test host does (``BudgetProfile/patient``).
    func startDaemon(_ extra: [String] = [], umask: mode_t? = nil, identity: ProcessIdentity? = nil) async throws -> CLIProcess {
        var extra = extra
        if !extra.contains("--config"), !extra.contains("--profile"), !extra.contains("virtual") {
            let config = dir.path + "/patient-budgets.json"
            let budgets = #"{"budgets": {"launch": "600s", "didEnterBackground": "600s", "foregroundHang": "600s", "wake": "600s"}}"#
            try Data(budgets.utf8).write(to: URL(fileURLWithPath: config))
            extra += ["--config", config]
        }
        let daemon = try start(["daemon"] + extra, umask: umask, identity: identity)
        guard let ready = await daemon.line(where: { $0.hasPrefix("apphost: daemon ready on") }) else {
            let exit = await daemon.waitForExit()
            throw CLITestFailure("the daemon never said it was ready (\(exit)); stderr:\n\(daemon.stderr)")
        }
        #expect(ready.line.contains(stateDir + "/control.sock"), "ready line: \(ready.line)")
        return daemon
    }

    /// Stops every process still running (in start order: daemons first, so
    /// followers see their streams end), waits for all of them, removes the dir.
    func close() async {
        let all = processes.withLock { $0 }
        for p in all { await p.stop() }
        dir.remove()
    }
}

/// Runs `body` with a fresh session, always reaping its processes and removing
/// its directory.
func withCLISession(_ label: String, _ body: (CLISession) async throws -> Void) async throws {
    let session = try CLISession(label)
    do {
        try await body(session)
    } catch {
        await session.close()
        throw error
    }
    await session.close()
}

/// A failure with a readable message.
struct CLITestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Parses JSON text (an array or object) for assertions.
func parseJSON(_ text: String) throws -> Any {
    try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
}

/// The payload of a `--json` output after checking its envelope (`version` 1, `kind`):
/// `{"version": 1, "kind": "status", "apps": [...]}` gives the array (docs/json.md).
func jsonPayload(_ text: String, _ kind: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Any {
    let keys = ["status": "apps", "list": "apps", "switcher": "apps", "install": "app", "reports": "reports", "event": "event",
                "clock": "clock", "profile": "profiles", "fetchSchedule": "schedule", "bgtaskList": "tasks",
                "settings": "settings", "device": "device", "snapshot": "snapshot", "manifest": "manifest",
                "listDevices": "devices", "listapps": "apps", "bleList": "world", "accessoryList": "accessories"]
    let envelope = try #require(try parseJSON(text) as? [String: Any], "not a JSON object: \(text)", sourceLocation: sourceLocation)
    #expect(envelope["version"] as? Int == 1, "version: \(text)", sourceLocation: sourceLocation)
    #expect(envelope["kind"] as? String == kind, "kind: \(text)", sourceLocation: sourceLocation)
    let key = try #require(keys[kind], "unknown kind \(kind)", sourceLocation: sourceLocation)
    return try #require(envelope[key], "no \"\(key)\" in \(text)", sourceLocation: sourceLocation)
}

/// The events of `events --json` output (one envelope per line).
func jsonEvents(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [[String: Any]] {
    try text.split(separator: "\n").map { line in
        try #require(try jsonPayload(String(line), "event", sourceLocation: sourceLocation) as? [String: Any], sourceLocation: sourceLocation)
    }
}

/// The pid in `launch`'s `id: pid` line.
func launchedPID(_ stdout: String, id: String) -> Int32? {
    let line = stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    guard line.hasPrefix(id + ": ") else { return nil }
    return Int32(line.dropFirst(id.count + 2))
}

/// The pid in an event line, `…  com.example.app[1234]  …`.
func eventPID(_ line: String, id: String) -> Int32? {
    guard let start = line.range(of: id + "[") else { return nil }
    let digits = line[start.upperBound...].prefix { $0.isNumber }
    return Int32(digits)
}

/// A spawn's completion, waited for by a synchronous caller (the reaper thread completes it).
private final class SpawnWait: Sendable {
    private let result = Mutex<Result<ChildProcess, SpawnError>?>(nil)
    private let signal = DispatchSemaphore(value: 0)

    func finish(_ r: Result<ChildProcess, SpawnError>) {
        result.withLock { $0 = r }
        signal.signal()
    }

    func wait() -> Result<ChildProcess, SpawnError> {
        signal.wait()
        return result.withLock { $0! }
    }
}
