import AppHostProtocol
import AppHostSystem
import Foundation
import Logging
import NIOPosix
import Synchronization
import Testing
@testable import Host

/// Where SwiftPM put the products (the sample apps are built beside the test bundle).
let productsDirectory: String = {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var dir = (exe as NSString).deletingLastPathComponent
    // On Linux the test runner is `<products>/AppHostPackageTests.xctest`.
    if dir.hasSuffix(".xctest") { dir = (dir as NSString).deletingLastPathComponent }
    return dir
}()

/// The repository's root (for manifests/).
let packageRoot: String = {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
}()

let probeBuilt = FileManager.default.isExecutableFile(atPath: productsDirectory + "/ProbeApp")

/// A temporary directory of a test's own; removed by `remove()`.
struct TempDir {
    let path: String
    init(_ label: String = "t") throws {
        // Short: the control socket path must stay under 108 bytes.
        path = NSTemporaryDirectory() + "ah-\(label)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

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

/// A host of a test's own: its state dir, event loop and supervisor loop. Always `stop()` it.
final class TestHost: Sendable {
    let dir: TempDir
    let supervisor: Supervisor
    let group: MultiThreadedEventLoopGroup
    let loop: Task<Void, Never>

    /// `configure` changes anything else of the configuration (e.g. `transferSettings`) last.
    init(label: String = "h", grace: Duration = .seconds(5), clock: ClockMode = .real,
         profile: BudgetProfile = .default, settle: Duration = .seconds(15), audioSink: AudioSinkKind = .wav,
         configure: (inout HostConfiguration) -> Void = { _ in }) throws {
        dir = try TempDir(label)
        var config = HostConfiguration(stateDirectory: dir.path)
        config.productDirectories = [productsDirectory]
        config.terminationGracePeriod = grace
        config.clock = clock
        config.profile = profile
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
        configure(&config)
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        supervisor = try Supervisor(configuration: config, group: group, logger: Logger(label: "test"))
        let s = supervisor
        loop = Task { await s.run() }
    }

    /// Terminates every app (waiting for each to be reaped) and tears the host down.
    func stop(removing: Bool = true) async {
        await supervisor.shutdown()
        await supervisor.finish()
        await loop.value
        try? await group.shutdownGracefully()
        if removing { dir.remove() }
    }

    /// Installs a probe bundle with `id`, returns its bundle id.
    @discardableResult
    func installProbe(_ id: String, extra: [String: Any] = [:], entitlements: [String: Any]? = nil) async throws -> String {
        let path = try makeProbeBundle(in: dir.path, id: id, extra: extra, entitlements: entitlements)
        return try await supervisor.install(path: path, settings: [:]).bundleIdentifier
    }

    /// The callbacks that returned, in order, from the event log.
    func callbacks(_ id: String) async -> [String] {
        let (past, _, sub) = await supervisor.subscribe(bundleIdentifier: id)
        await supervisor.unsubscribe(sub)
        return past.filter { $0.kind == .callback }.map { $0.cause.replacingOccurrences(of: " returned", with: "") }
    }

    /// Events of one app so far.
    func events(_ id: String) async -> [HostEvent] {
        let (past, _, sub) = await supervisor.subscribe(bundleIdentifier: id)
        await supervisor.unsubscribe(sub)
        return Array(past)
    }

    /// Waits for the first event of `id` (past or future) matching `predicate`.
    func waitForEvent(_ id: String, _ predicate: @Sendable (HostEvent) -> Bool) async -> HostEvent? {
        let (past, live, sub) = await supervisor.subscribe(bundleIdentifier: id)
        defer { Task { await supervisor.unsubscribe(sub) } }
        if let e = past.first(where: predicate) { return e }
        for await e in live where predicate(e) { return e }
        return nil
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
