import AppHostProtocol
import AppHostSystem
import Foundation
import TestSupport
import Logging
import NIOPosix
import Synchronization
import Testing
@testable import Host


/// The repository's root (for manifests/).
let packageRoot: String = {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
}()

/// Whether this is a CI run (`CI=true` in the environment). A sample product missing
/// then fails the run instead of skipping the suites that need it.
let runningInCI = ProcessInfo.processInfo.environment["CI"] == "true"

/// The products the suites here launch, built beside the test bundle by `swift build`.
let sampleProducts = ["ProbeApp", "PlainApp", "TaskHolderApp", "BankApp", "HostileApp", "apphost", "apphost-transferd"]

/// Whether product `name` is built. A suite that needs it is skipped when it is not,
/// except on CI, where it runs (and fails) and `SampleProductTests` names what is missing.
func productBuilt(_ name: String) -> Bool {
    FileManager.default.isExecutableFile(atPath: productsDirectory + "/" + name) || runningInCI
}

let probeBuilt = productBuilt("ProbeApp")


/// Writes `Name.app/Info.plist` for the probe app with the given identity and keys, and
/// `Name.app/Name.entitlements` when `entitlements` are given.
func makeProbeBundle(in dir: String, id: String, executable: String = "ProbeApp", extra: [String: Any] = [:],
                     entitlements: [String: Any]? = nil) throws -> String {
    let bundle = dir + "/\(id).app"
    try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
    var plist: [String: Any] = [
        "CFBundleIdentifier": id,
        "CFBundleExecutable": executable,
        "CFBundleName": "Probe",
    ]
    plist.merge(extra) { $1 }
    let data = try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0)
    try data.write(to: URL(fileURLWithPath: bundle + "/Info.plist"))
    if let entitlements {
        let data = try PropertyListSerialization.data(fromPropertyList: entitlements, format: .xml, options: 0)
        try data.write(to: URL(fileURLWithPath: bundle + "/\(id).entitlements"))
    }
    return bundle
}

/// A host of a test's own: its state dir, event loop and supervisor loop. Made and
/// stopped by `withHost`, which stops it however the test ends.
final class TestHost: Sendable {
    let dir: TempDir
    let supervisor: Supervisor
    let group: MultiThreadedEventLoopGroup
    let loop: Task<Void, Never>

    /// `configure` changes anything else of the configuration (e.g. `transferSettings`) last.
    /// `directory` is a state directory to use instead of a new one labelled `label`.
    init(label: String = "h", directory: TempDir? = nil, grace: Duration = .seconds(5), clock: ClockMode = .real,
         profile: BudgetProfile? = nil, settle: Duration = .seconds(60), audioSink: AudioSinkKind = .wav,
         configure: (inout HostConfiguration) -> Void = { _ in }) throws {
        dir = try directory ?? TempDir(label)
        var config = HostConfiguration(stateDirectory: dir.path)
        config.productDirectories = [productsDirectory]
        config.terminationGracePeriod = grace
        config.clock = clock
        config.profile = profile ?? (clock == .real ? .patient : .default)
        config.settleTimeout = settle
        config.audioSink = audioSink
        configure(&config)
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        supervisor = try Supervisor(configuration: config, group: group, logger: logger)
        let s = supervisor
        loop = Task { await s.run() }
    }

    /// Re-opens a host on an existing state directory.
    init(reopening other: TempDir, configure: (inout HostConfiguration) -> Void = { _ in }) throws {
        dir = other
        var config = HostConfiguration(stateDirectory: other.path)
        config.productDirectories = [productsDirectory]
        config.profile = .patient
        configure(&config)
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        supervisor = try Supervisor(configuration: config, group: group, logger: Logger(label: "test"))
        let s = supervisor
        loop = Task { await s.run() }
    }

    /// Terminates every app (waiting for each to be reaped) and tears the host down.
    /// Snapshots still being drawn are waited for: written after the removal, they
    /// would leave the state directory behind.
    func stop(removing: Bool = true) async {
        await supervisor.shutdown()
        await supervisor.finish()
        await loop.value
        await supervisor.waitForSnapshots()
        try? await group.shutdownGracefully()
        if removing { dir.remove() }
    }

    /// Installs a probe bundle with `id`, returns its bundle id.
    @discardableResult
    func installProbe(_ id: BundleID, extra: [String: Any] = [:], entitlements: [String: Any]? = nil) async throws -> BundleID {
        let path = try makeProbeBundle(in: dir.path, id: id.rawValue, extra: extra, entitlements: entitlements)
        return try await supervisor.install(path: path, settings: [:]).bundleIdentifier
    }

    /// The callbacks that returned, in order, from the event log.
    func callbacks(_ id: BundleID) async -> [String] {
        let (past, _, sub) = await supervisor.subscribe(bundleIdentifier: id)
        await supervisor.unsubscribe(sub)
        return past.compactMap(\.callback)
    }

    /// Events of one app so far.
    func events(_ id: BundleID) async -> [HostEvent] {
        let (past, _, sub) = await supervisor.subscribe(bundleIdentifier: id)
        await supervisor.unsubscribe(sub)
        return Array(past)
    }

    /// Waits for the first event of `id` (past or future) matching `predicate`, for at
    /// most `timeout` of real time; then records an issue saying what the host saw
    /// (the app's state, its last events) and returns nil, as it does when the log ends.
    func waitForEvent(_ id: BundleID, timeout: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation,
                      _ predicate: @escaping @Sendable (HostEvent) -> Bool) async -> HostEvent? {
        let (past, live, sub) = await supervisor.subscribe(bundleIdentifier: id)
        defer { Task { await supervisor.unsubscribe(sub) } }
        if let e = past.first(where: predicate) { return e }
        enum Outcome: Sendable { case event(HostEvent), ended, timedOut }
        let outcome = await withTaskGroup(of: Outcome.self) { group in
            group.addTask {
                for await e in live where predicate(e) { return .event(e) }
                return .ended
            }
            group.addTask {
                do {
                    try await Task.sleep(for: timeout)
                    return .timedOut
                } catch {
                    return .ended // cancelled: the test is being torn down
                }
            }
            let first = await group.next() ?? .ended
            group.cancelAll()
            return first
        }
        switch outcome {
        case .event(let e): return e
        case .ended: return nil
        case .timedOut:
            Issue.record("no event of \(id) matched within \(timeout); the host saw \(await sawOf(id))", sourceLocation: sourceLocation)
            return nil
        }
    }
}

/// A launch watchdog of 10 minutes instead of iOS's 20 s (see ``BudgetProfile/patient``),
/// for a host whose profile is set otherwise.
func patientLaunch(_ configuration: inout HostConfiguration) {
    configuration.profile.launch = 600
}

extension BudgetProfile {
    /// The default (iOS 13) profile with every watchdog that a loaded machine can trip on
    /// the real clock when the app is healthy — the launch, didEnterBackground, the
    /// foreground hang, a woken app's handler — at 10 minutes: what a real-clock host of
    /// a test uses unless the test names a profile (a test of one of those watchdogs does).
    /// In a loaded full run a launch took over 20 s now and then, and the watchdog, not what
    /// the test checks, decided its outcome; real time must not.
    static var patient: BudgetProfile {
        var p = BudgetProfile.default
        p.launch = 600
        p.didEnterBackground = 600
        p.foregroundHang = 600
        p.wake = 600
        return p
    }
}

/// Runs `body` with a host of its own (the arguments are `TestHost`'s), then stops it
/// (its apps terminated and reaped) and removes its state directory, also when `body`
/// throws or a `#require` fails. With `directory`, the host runs on that state
/// directory and leaves it for its owner (`withStateDirectory`) to remove.
@discardableResult
func withHost<T>(label: String = "h", directory: TempDir? = nil, grace: Duration = .seconds(5), clock: ClockMode = .real,
                 profile: BudgetProfile? = nil, settle: Duration = .seconds(60), audioSink: AudioSinkKind = .wav,
                 configure: (inout HostConfiguration) -> Void = { _ in },
                 isolation: isolated (any Actor)? = #isolation,
                 _ body: (TestHost) async throws -> T) async throws -> T {
    let host = try TestHost(label: label, directory: directory, grace: grace, clock: clock, profile: profile,
                            settle: settle, audioSink: audioSink, configure: configure)
    return try await stopping(host, removing: directory == nil, body)
}

/// Runs `body` with a host re-opened on `directory` (a state directory an earlier host
/// left), then stops it as `withHost` does; `directory` is left for its owner to remove.
@discardableResult
func withHost<T>(reopening directory: TempDir, configure: (inout HostConfiguration) -> Void = { _ in },
                 isolation: isolated (any Actor)? = #isolation,
                 _ body: (TestHost) async throws -> T) async throws -> T {
    let host = try TestHost(reopening: directory, configure: configure)
    return try await stopping(host, removing: false, body)
}

/// Runs `body` with a state directory of its own that outlives one host (a restart
/// test's), removed however `body` ends.
@discardableResult
func withStateDirectory<T>(_ label: String, isolation: isolated (any Actor)? = #isolation,
                           _ body: (TempDir) async throws -> T) async throws -> T {
    let dir = try TempDir(label)
    defer { dir.remove() }
    return try await body(dir)
}

/// Runs `body` with `host`, then stops it however `body` ended. The stop runs in a task
/// of its own, so that a test cancelled (by its time limit) still reaps its apps.
private func stopping<T>(_ host: TestHost, removing: Bool, isolation: isolated (any Actor)? = #isolation,
                         _ body: (TestHost) async throws -> T) async throws -> T {
    let result: T
    do {
        result = try await body(host)
    } catch {
        await Task { await host.stop(removing: removing) }.value
        throw error
    }
    await Task { await host.stop(removing: removing) }.value
    // Virtual clock: a wait the safety net ended means the test's outcome depended on the
    // machine's speed, not on the apps: the test fails saying so.
    for failure in await host.supervisor.takeSafetyNetFailures() {
        Issue.record(Comment(rawValue: failure))
    }
    return result
}

extension TestHost {
    /// Waits until `id` is in `state`, for at most `timeout` of real time; then fails
    /// (and throws) saying what the host saw: the app's state and its last events.
    func waitUntil(_ id: BundleID, is state: AppState, timeout: Duration = .seconds(60),
                   sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let supervisor = self.supervisor
        let reached = await finishes(within: timeout) { await supervisor.waitUntil(id, is: state) }
        if reached { return }
        let saw = await sawOf(id)
        try #require(reached, "\(id) not \(state.rawValue) after \(timeout); the host saw \(saw)", sourceLocation: sourceLocation)
    }

    /// What the host says of `id` now: its status and its last events, one a line.
    func sawOf(_ id: BundleID, events count: Int = 12) async -> String {
        let status: String
        do {
            if let s = try await supervisor.status(id).first {
                status = "\(s.state.rawValue), pid \(s.pid.map(String.init) ?? "none"), tasks \(s.backgroundTasks), activities \(s.activities)"
            } else {
                status = "no status"
            }
        } catch {
            status = "no status (\(error))"
        }
        let recent = await events(id).suffix(count).map { e in
            var line = "  #\(e.seq) \(e.kind.rawValue)"
            if let from = e.from, let to = e.to { line += " \(from.rawValue)→\(to.rawValue)" } else if let to = e.to { line += " →\(to.rawValue)" }
            if let pid = e.pid { line += " pid \(pid)" }
            return line + ": \(e.cause)"
        }
        return "it \(status); its last \(recent.count) events:\n" + recent.joined(separator: "\n")
    }
}

/// Whether `operation` ends within `timeout` of real time. An operation that does not
/// (it cannot be cancelled) is left waiting: the test fails then anyway.
func finishes(within timeout: Duration, _ operation: @escaping @Sendable () async -> Void) async -> Bool {
    let first = FirstResult()
    let timer = Task {
        try? await Task.sleep(for: timeout)
        first.settle(false)
    }
    defer { timer.cancel() }
    return await withCheckedContinuation { c in
        first.waiter(c)
        Task {
            await operation()
            first.settle(true)
        }
    }
}

/// The first of several answers, given to the one waiter whenever it asks.
private final class FirstResult: Sendable {
    private let state = Mutex<(result: Bool?, waiter: CheckedContinuation<Bool, Never>?)>((nil, nil))

    func settle(_ value: Bool) {
        let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            guard s.result == nil else { return nil }
            s.result = value
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: value)
    }

    func waiter(_ c: CheckedContinuation<Bool, Never>) {
        let done = state.withLock { s -> Bool? in
            if s.result == nil { s.waiter = c }
            return s.result
        }
        if let done { c.resume(returning: done) }
    }
}

/// The kernel's view of a process state (`T` when stopped).
func kernelState(_ pid: Int32) -> Character? {
    (try? ProcStat.read(pid: pid))?.state
}

/// Whether a pid still exists (a reaped child does not).
func processExists(_ pid: Int32) -> Bool {
    kill(pid, 0) == 0 || errno == EPERM
}

/// A thread-safe counter for predicates that count events.
final class Counter: Sendable {
    private let value = Mutex(0)
    /// Adds one and returns the new value.
    func increment() -> Int { value.withLock { $0 += 1; return $0 } }
}

/// Makes a FIFO called `name` in the `tmp` folder of `id`'s container (made if missing),
/// for the probe's `wait-fifo` and `hang-fifo`; returns its path.
func makeContainerFIFO(_ host: TestHost, _ id: BundleID, _ name: String) throws -> String {
    let dir = host.dir.path + "/containers/\(id)/tmp"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let fifo = dir + "/" + name
    guard mkfifo(fifo, 0o600) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    return fifo
}

/// Opens the FIFO at `path` for writing on a thread of its own: returns once a reader
/// has opened it (the probe's `hang-fifo`, from its blocked main thread), so the caller
/// knows the main thread is blocked without sleeping. -1 if it cannot be opened.
func openFIFOForWriting(_ path: String) async -> Int32 {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: open(path, O_WRONLY | O_CLOEXEC)) }
    }
}
