import AppHostProtocol
import AppHostSystem
import ArgumentParser
import AsyncHTTPClient
import Foundation
import LoopbackHTTP
import Host
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Benchmark: N small background downloads (10,000 of 1–4 KiB by default), each its
/// own path on a loopback HTTP server, from the first enqueue to the last
/// `didCompleteWithError` returned in the app.
///
/// - The server is `HTTPTestServer` (the tests' SwiftNIO server) in a helper process
///   of this binary (`transfer-server`), so its CPU is counted apart from the host's
///   and every phase fetches from the very same server. Resource n is
///   `.generated(size: s(n), seed: n)`: distinct bytes the bench recomputes to check
///   every file.
/// - Measured: an in-process host (``Supervisor`` with the real `apphost-transferd`
///   found beside this binary) and a ProbeApp launched with
///   `--on launch url-session:s --on launch downloads:s:N:URL/f/{n}`. The window is
///   read from the host's own events: the first "download task 1 of s queued" to the
///   N-th "didCompleteWithError(task K, nil) returned". Variant "background": the same
///   app launched in the background (`--events-completion finish`), where iOS would
///   suspend it and wake it once for the session's events; the bench counts what the
///   host does instead (wakes, handleEvents calls, SIGSTOPs before the last delivery).
/// - Baselines, same run, before and after the host: the same N GETs with
///   AsyncHTTPClient in this process (the daemon's client configuration: 4 connections
///   per host, 4 requests at once, as the daemon's per-host limit allows), each body
///   written to its own file; and `curl --parallel --parallel-max 4` with a config
///   file of the N URLs and outputs.
struct TransferBench {
    let resources: SmallResources
    let backgroundVariant: Bool
    let timeout: Duration

    static let executable = "ProbeApp"
    static let session = "s"

    func run() async throws -> TransfersReport {
        var report = TransfersReport(resources: resources)
        let root = try TempDir("xfer")
        defer {
            root.remove()
            if FileManager.default.fileExists(atPath: root.path) {
                progress("transfers: could not remove all of \(root.path); remove it by hand")
            }
        }
        progress("transfers: starting the server process with \(resources.count) resources (\(resources.sizeText))")
        let server = try await ServerProcess.start(resources: resources)
        report.serverPID = server.pid
        var failure: (any Error)?
        do {
            report.curlVersion = try await curlVersion()
            report.createMicroseconds = try await createCost(dir: root.path + "/create")
            // Warm the server (first connections, code paths) with one small AHC round, not measured.
            _ = try await ahcPhase(server: server, dir: root.path + "/warm", label: "warm-up", only: min(500, resources.count))
            report.baselines.append(try await ahcPhase(server: server, dir: root.path + "/ahc1", label: "AsyncHTTPClient, before the host"))
            if report.curlVersion != nil {
                report.baselines.append(try await curlPhase(server: server, dir: root.path + "/curl1", label: "curl --parallel, before the host"))
            }
            report.host.append(try await hostPhase(server: server, background: false, keep: root.path + "/host-foreground"))
            if backgroundVariant {
                report.host.append(try await hostPhase(server: server, background: true, keep: root.path + "/host-background"))
            }
            report.baselines.append(try await ahcPhase(server: server, dir: root.path + "/ahc2", label: "AsyncHTTPClient, after the host"))
            if report.curlVersion != nil {
                report.baselines.append(try await curlPhase(server: server, dir: root.path + "/curl2", label: "curl --parallel, after the host"))
            }
            // Last, so its 10,000 fsyncs leave nothing behind for a measured phase.
            progress("transfers: context: \(resources.count) × (write, fsync, close, rename)")
            report.fsyncContext = try await fsyncContext(dir: root.path + "/fsync")
        } catch {
            failure = error
        }
        report.serverExitStatus = await server.stop()
        if let failure { throw failure }
        return report
    }

    // MARK: Baselines

    /// The N GETs with AsyncHTTPClient configured as `apphost-transferd` configures it,
    /// 4 at a time (the daemon's per-host limit), each body written to a file.
    private func ahcPhase(server: ServerProcess, dir: String, label: String, only: Int? = nil) async throws -> PhaseFigures {
        let count = only ?? resources.count
        if only == nil { progress("transfers: \(label): \(count) GETs, 4 at a time") }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var config = HTTPClient.Configuration(
            redirectConfiguration: .follow(max: 10, allowCycles: false),
            timeout: .init(connect: .seconds(30), read: .seconds(60)))
        config.connectionPool = .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: 4)
        config.decompression = .disabled
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: config)
        let before = try await server.stats()
        let server0 = server.cpu()
        let cpu0 = CPU.ofSelf()
        let next = Counter()
        let base = "http://127.0.0.1:\(server.port)"
        let clock = ContinuousClock()
        let start = clock.now
        let errors: [String]
        do {
            errors = try await withThrowingTaskGroup(of: [String].self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        var errors: [String] = []
                        while true {
                            let n = next.take()
                            guard n <= count else { return errors }
                            let request = HTTPClientRequest(url: base + resources.path(n))
                            let response = try await client.execute(request, timeout: .seconds(60))
                            guard response.status == .ok else {
                                errors.append("\(resources.path(n)): HTTP \(response.status.code)")
                                for try await _ in response.body {}
                                continue
                            }
                            let fd = open(dir + "/\(n)", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                            guard fd >= 0 else { throw BenchError("open \(dir)/\(n): \(String(cString: strerror(errno)))") }
                            defer { close(fd) }
                            for try await buffer in response.body {
                                try writeAll(fd, buffer)
                            }
                        }
                    }
                }
                var all: [String] = []
                for try await e in group { all += e }
                return all
            }
        } catch {
            try? await client.shutdown()
            throw error
        }
        let elapsed = clock.now - start
        let cpu = CPU.ofSelf() - cpu0
        let serverCPU = server.cpu() - server0
        try await client.shutdown()
        let after = try await server.stats()
        var figures = PhaseFigures(label: label, seconds: seconds(elapsed), transfers: count)
        figures.cpu = ["client (this process)": cpu, "server": serverCPU]
        figures.serverRequests = after.requests - before.requests
        figures.serverOK = after.ok - before.ok
        figures.problems = Array(errors.prefix(5))
        let check = resources.verify(directory: dir, count: count) { "\($0)" }
        figures.verified = check.verified
        figures.bytes = check.bytes
        figures.problems += check.problems
        // The files stay until the run ends: mass deletions slow ext4's inode allocation
        // for minutes (recently_deleted), which would tax whichever phase came next.
        return figures
    }

    /// `curl --version`'s version if it is 7.66 or later (the first with `--parallel`), else nil.
    private func curlVersion() async throws -> String? {
        guard let curl = Self.curlPath else { return nil }
        let out = try await runCapturing([curl, "--version"])
        guard out.status == 0, let first = out.text.split(separator: "\n").first else { return nil }
        let words = first.split(separator: " ")
        guard words.count >= 2 else { return nil }
        let parts = words[1].split(separator: ".").compactMap { Int($0) }
        guard parts.count >= 2, parts[0] > 7 || (parts[0] == 7 && parts[1] >= 66) else {
            progress("transfers: \(first): no --parallel (needs 7.66); the curl baseline is skipped")
            return nil
        }
        return String(first)
    }

    static let curlPath: String? = ["/usr/bin/curl", "/usr/local/bin/curl", "/bin/curl"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// `curl --parallel --parallel-max 4 --config FILE` of the N URLs, each with its own output file.
    private func curlPhase(server: ServerProcess, dir: String, label: String) async throws -> PhaseFigures {
        progress("transfers: \(label): \(resources.count) URLs, --parallel-max 4")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var config = ""
        config.reserveCapacity(resources.count * 80)
        for n in 1...resources.count {
            config += "url = \"http://127.0.0.1:\(server.port)\(resources.path(n))\"\noutput = \"\(dir)/\(n)\"\n"
        }
        let configPath = dir + ".conf"
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        defer { unlink(configPath) }
        let before = try await server.stats()
        let server0 = server.cpu()
        let argv = [Self.curlPath!, "--parallel", "--parallel-max", "4", "--silent", "--show-error", "--fail", "--config", configPath]
        let run = try await runCapturing(argv)
        let serverCPU = server.cpu() - server0
        let after = try await server.stats()
        guard run.status == 0 else { throw BenchError("\(argv.joined(separator: " ")) exited with status \(run.status):\n\(run.text.prefix(2000))") }
        var figures = PhaseFigures(label: label, seconds: run.seconds, transfers: resources.count)
        figures.cpu = ["curl": run.cpu, "server": serverCPU]
        figures.serverRequests = after.requests - before.requests
        figures.serverOK = after.ok - before.ok
        let check = resources.verify(directory: dir, count: resources.count) { "\($0)" }
        figures.verified = check.verified
        figures.bytes = check.bytes
        figures.problems = check.problems
        figures.command = argv.joined(separator: " ").replacingOccurrences(of: configPath, with: "FILE")
        return figures
    }

    /// Microseconds to create (open O_CREAT, close) one empty file, over 1,000 in a fresh
    /// directory: ext4 slows down for minutes after a mass deletion (its inode allocator
    /// skips recently deleted inodes one by one), which would skew every phase.
    private func createCost(dir: String) async throws -> Double {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return try await onThread("create-cost") {
            let clock = ContinuousClock()
            let start = clock.now
            for n in 1...1000 {
                let fd = open(dir + "/\(n)", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
                guard fd >= 0 else { throw BenchError("open \(dir)/\(n): \(String(cString: strerror(errno)))") }
                close(fd)
            }
            return seconds(clock.now - start) * 1e6 / 1000
        }
    }

    /// Context for the daemon's per-file durability: N × (write the body to NAME.part,
    /// fsync, close, rename), one at a time, in a directory on the same file system.
    private func fsyncContext(dir: String) async throws -> Double {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let resources = self.resources
        return try await onThread("fsync-context") {
            let clock = ContinuousClock()
            let start = clock.now
            for n in 1...resources.count {
                let bytes = [UInt8](repeating: UInt8(truncatingIfNeeded: n), count: resources.size(n))
                let part = dir + "/\(n).part"
                let fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                guard fd >= 0 else { throw BenchError("open \(part): \(String(cString: strerror(errno)))") }
                _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                fsync(fd)
                close(fd)
                rename(part, dir + "/\(n)")
            }
            return seconds(clock.now - start)
        }
    }

    // MARK: The host

    private func hostPhase(server: ServerProcess, background: Bool, keep: String) async throws -> HostPhase {
        let variant = background ? "background" : "foreground"
        progress("transfers: host (\(variant)): ProbeApp enqueues \(resources.count) downloads through apphost-transferd")
        let host = try InProcessHost(label: "xfer")
        let id = "com.bench.transfers.\(variant)"
        var phase = HostPhase(variant: variant)
        let (past, live, subscription) = await host.supervisor.subscribe(bundleIdentifier: nil)
        let marks = Marks()
        let count = resources.count
        let reader = Task { () -> TransferTally in
            var tally = TransferTally(app: id, count: count, lastSeq: past.first.map { $0.seq - 1 } ?? 0)
            for e in past { tally.add(e) }
            var doneSignalled = false
            if tally.daemonReady != nil { await marks.reach(.daemonReady) }
            for await e in live {
                let wasReady = tally.daemonReady != nil
                tally.add(e)
                if !wasReady, tally.daemonReady != nil { await marks.reach(.daemonReady) }
                // A daemon that cannot start (or exits) is restarted with backoff: fail now, not at the timeout.
                if e.kind == .warning, e.bundleIdentifier == nil, e.cause.contains("transfer daemon") { await marks.fail() }
                if tally.isDone, !doneSignalled {
                    // Keep reading what follows (suspension) until the subscription ends.
                    doneSignalled = true
                    if tally.appExited == nil { await marks.reach(.done) } else { await marks.fail() }
                }
            }
            return tally
        }
        let guardTask = Task { [timeout] in
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { await marks.fail() }
        }
        do {
            guard await marks.wait(.daemonReady) else {
                let log = (try? String(contentsOfFile: host.dir.path + "/logs/apphost-transferd.log", encoding: .utf8)) ?? ""
                let warnings = await host.supervisor.subscribe(bundleIdentifier: nil).past.filter { $0.kind == .warning }.map(\.cause)
                throw BenchError("the transfer daemon did not become ready (is apphost-transferd beside \(selfExecutable), "
                                 + "built from the same commit?): \(warnings.joined(separator: " | "))\ndaemon log:\n\(log.suffix(2000))")
            }
            guard let daemonPID = await host.supervisor.transferDaemonPID() else { throw BenchError("no transfer daemon pid") }
            phase.daemonPID = daemonPID
            try await host.install(id: id, executable: Self.executable)
            let daemon0 = CPU.of(daemonPID)
            let server0 = server.cpu()
            let before = try await server.stats()
            let cpu0 = CPU.ofSelf()
            let url = "http://127.0.0.1:\(server.port)/f/{n}"
            var arguments = ["--on", "launch", "url-session:\(Self.session)",
                             "--on", "launch", "downloads:\(Self.session):\(count):\(url)"]
            // The iOS pattern for a woken app: call the completion in urlSessionDidFinishEvents.
            if background { arguments += ["--events-completion", "finish"] }
            phase.arguments = arguments
            let launchCallInstant = ContinuousClock.now
            let pid = try await host.supervisor.launch(try BundleID(validating: id), background: background, arguments: arguments)
            let launchReturnedInstant = ContinuousClock.now
            // In the host's clock, as its events are stamped.
            let (launchCall, launchReturned) = (await host.supervisor.hostDate(at: launchCallInstant),
                                                await host.supervisor.hostDate(at: launchReturnedInstant))
            phase.appPID = pid
            let complete = await marks.wait(.done)
            let cpu1 = CPU.ofSelf()
            let daemon1 = CPU.of(daemonPID)
            let server1 = server.cpu()
            guard complete else {
                throw BenchError("\(count) didCompleteWithError did not all return (app killed, or not within \(timeout))")
            }
            phase.daemonPeakRSSKiB = procStatusKiB(daemonPID, "VmHWM") ?? 0
            phase.daemonRSSKiB = procStatusKiB(daemonPID, "VmRSS") ?? 0
            phase.launchCall = launchCall
            phase.launchReturned = launchReturned
            if background {
                // The app is suspended again once it has handled the last events (bounded, so a
                // failure is reported rather than waited on forever).
                let bundle = try BundleID(validating: id)
                let suspendedAgain = await withTaskGroup(of: Bool.self) { group in
                    group.addTask { await host.supervisor.waitUntil(bundle, is: .suspended); return true }
                    group.addTask { try? await Task.sleep(for: .seconds(60)); return false }
                    let first = await group.next() ?? false
                    group.cancelAll()
                    return first
                }
                if !suspendedAgain { phase.notes.append("the app was not suspended again within 60 s of its last event") }
            }
            phase.appCPU = CPU.of(pid)
            phase.appPeakRSSKiB = procStatusKiB(pid, "VmHWM") ?? 0
            let after = try await server.stats()
            await host.supervisor.unsubscribe(subscription)
            guardTask.cancel()
            let tally = await reader.value
            phase.tally = tally.summary()
            var figures = PhaseFigures(label: "host (\(variant))", seconds: tally.lastDelivered!.timeIntervalSince(tally.firstQueued!), transfers: count)
            figures.cpu = [
                "daemon": daemon1 - daemon0,
                "host process (host + bench)": cpu1 - cpu0,
                "app (all its life)": phase.appCPU,
                "server": server1 - server0,
            ]
            figures.serverRequests = after.requests - before.requests
            figures.serverOK = after.ok - before.ok
            let container = host.dir.path + "/containers/\(id)"
            let check = resources.verify(directory: container + "/Documents/downloads", count: count) { "\($0)" }
            figures.verified = check.verified
            figures.bytes = check.bytes
            figures.problems = check.problems
            let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: container + "/Library/Caches/com.apphost.transfers")) ?? []
            if !leftovers.isEmpty { figures.problems.append("\(leftovers.count) temporary files left in Library/Caches/com.apphost.transfers") }
            // Kept (moved: a rename, no inode freed) until the run ends, as the baselines' files are.
            rename(container + "/Documents/downloads", keep)
            let log = host.dir.path + "/logs/\(id).log"
            if let data = FileManager.default.contents(atPath: log) {
                phase.appLogBytes = data.count
                phase.appLogLines = data.reduce(0) { $0 + ($1 == 0x0a ? 1 : 0) }
                phase.appSummaryLine = String(decoding: data, as: UTF8.self).split(separator: "\n")
                    .first { $0.hasPrefix("[ProbeApp] downloads started") }.map(String.init)
            }
            phase.figures = figures
        } catch {
            // Reported with what the host saw; the run goes on with the other phases.
            await host.supervisor.unsubscribe(subscription)
            guardTask.cancel()
            let tally = await reader.value
            phase.tally = tally.summary()
            phase.failure = "\(error)"
            progress("transfers: host (\(variant)) FAILED: \(error); \(phase.tally.state)")
            // The undelivered downloads too: removing thousands of files would slow the next phases.
            rename(host.dir.path + "/containers/\(id)/Documents/downloads", keep)
            rename(host.dir.path + "/containers/\(id)/Library/Caches/com.apphost.transfers", keep + "-undelivered")
        }
        await host.stop()
        return phase
    }
}

// MARK: - What one run measured

/// One timed phase: a baseline or the host.
struct PhaseFigures: Codable, Sendable {
    var label: String
    /// The measured window.
    var seconds: Double
    var transfers: Int
    /// Bytes in the files checked.
    var bytes: Int64 = 0
    /// CPU seconds by party during the window.
    var cpu: [String: CPU] = [:]
    /// Files whose bytes are the resource's.
    var verified = 0
    /// Requests the server answered in the window (all, and 200s).
    var serverRequests = 0
    var serverOK = 0
    /// The first problems found (wrong bytes, missing files, HTTP errors).
    var problems: [String] = []
    /// The command run, for curl.
    var command: String?

    var perTransfer: Double { seconds / Double(transfers) }
    var rate: Double { Double(transfers) / seconds }
    var clean: Bool { verified == transfers && problems.isEmpty && serverOK == transfers }
}

/// One host run: the window and where its time went.
struct HostPhase: Codable, Sendable {
    var variant: String
    var figures = PhaseFigures(label: "", seconds: .nan, transfers: 0)
    var arguments: [String] = []
    var daemonPID: Int32 = 0
    var appPID: Int32 = 0
    var daemonPeakRSSKiB = 0
    var daemonRSSKiB = 0
    var appPeakRSSKiB = 0
    var appCPU = CPU()
    var appLogBytes = 0
    var appLogLines = 0
    var appSummaryLine: String?
    var launchCall: Date?
    var launchReturned: Date?
    var tally = TallySummary()
    var notes: [String] = []
    /// Why the run did not complete (the figures are then not a measurement).
    var failure: String?
}

struct TransfersReport: Codable, Sendable {
    var resources: SmallResources
    var serverPID: Int32 = 0
    var serverExitStatus: Int32 = 0
    var curlVersion: String?
    var baselines: [PhaseFigures] = []
    var host: [HostPhase] = []
    /// Seconds for N × (write, fsync, close, rename) one at a time.
    var fsyncContext: Double?
    /// Microseconds to create one empty file, at the start of the run.
    var createMicroseconds: Double?
}

// MARK: - The resources

/// N resources `/f/1` ... `/f/N`, sizes spread over min...max bytes, bytes from seed n.
struct SmallResources: Codable, Sendable {
    var count: Int
    var minSize: Int
    var maxSize: Int

    /// `--small-size`: "SIZE" or "MIN-MAX" (bytes; a K suffix means KiB).
    init(count: Int, spec: String) throws {
        func bytes(_ s: Substring) -> Int? {
            let t = s.trimmingCharacters(in: .whitespaces)
            if t.hasSuffix("K") || t.hasSuffix("k") { return Int(t.dropLast()).map { $0 * 1024 } }
            return Int(t)
        }
        let parts = spec.split(separator: "-", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let lo = bytes(parts[0]), let hi = bytes(parts.last!), lo >= 1, lo <= hi else {
            throw ValidationError("--small-size needs SIZE or MIN-MAX in bytes (K for KiB), e.g. 1K-4K; got \"\(spec)\"")
        }
        self.count = count
        minSize = lo
        maxSize = hi
    }

    /// The size of resource n: deterministic, spread over minSize...maxSize.
    func size(_ n: Int) -> Int {
        guard maxSize > minSize else { return minSize }
        return minSize + Int((UInt64(n) &* 2_654_435_761) % UInt64(maxSize - minSize + 1))
    }

    func resource(_ n: Int) -> Resource { .generated(size: Int64(size(n)), seed: UInt64(n)) }
    func path(_ n: Int) -> String { "/f/\(n)" }

    var totalBytes: Int64 { (1...count).reduce(0) { $0 + Int64(size($1)) } }
    var sizeText: String { minSize == maxSize ? "\(minSize) B each" : "\(minSize)–\(maxSize) B, \(formatBytes(totalBytes)) in all" }

    /// Checks that `directory/name(n)` holds resource n's bytes for every n.
    func verify(directory: String, count: Int, name: (Int) -> String) -> (verified: Int, bytes: Int64, problems: [String]) {
        var verified = 0
        var total: Int64 = 0
        var problems: [String] = []
        var wrong = 0
        for n in 1...count {
            let path = directory + "/" + name(n)
            guard let data = FileManager.default.contents(atPath: path) else {
                wrong += 1
                if problems.count < 5 { problems.append("\(path): missing") }
                continue
            }
            total += Int64(data.count)
            let expected = resource(n).bytes(in: 0..<Int64(size(n)))
            if data == expected {
                verified += 1
            } else {
                wrong += 1
                if problems.count < 5 { problems.append("\(path): \(data.count) bytes, not the \(expected.count) of \(self.path(n))") }
            }
        }
        if wrong > problems.count { problems.append("... \(wrong) files wrong or missing in all") }
        return (verified, total, problems)
    }
}

func formatBytes(_ n: Int64) -> String {
    if n >= 1 << 20 { return String(format: "%.1f MiB", Double(n) / 1048576) }
    if n >= 1 << 10 { return String(format: "%.1f KiB", Double(n) / 1024) }
    return "\(n) B"
}

// MARK: - Reading the host's events

/// Waypoints the bench waits on; `fail` releases every waiter with false.
actor Marks {
    enum Mark: Hashable { case daemonReady, done }
    private var reached: Set<Mark> = []
    private var failed = false
    private var waiters: [Mark: [CheckedContinuation<Bool, Never>]] = [:]

    func reach(_ mark: Mark) {
        reached.insert(mark)
        for w in waiters.removeValue(forKey: mark) ?? [] { w.resume(returning: true) }
    }

    func fail() {
        failed = true
        for (_, list) in waiters { for w in list { w.resume(returning: false) } }
        waiters.removeAll()
    }

    func wait(_ mark: Mark) async -> Bool {
        if reached.contains(mark) { return true }
        if failed { return false }
        return await withCheckedContinuation { waiters[mark, default: []].append($0) }
    }
}

/// Counts and times from the host's events: the app's enqueues ("download task K of s
/// queued"), the daemon's ends ("transfer ID (task K of s) finished"), the callbacks
/// that returned, signals and states.
struct TransferTally {
    let app: String
    let count: Int
    var lastSeq: UInt64
    var missedEvents: UInt64 = 0
    var daemonReady: Date?
    var queued = 0
    var firstQueued: Date?
    var lastQueued: Date?
    var finished = 0
    var finishedFailed = 0
    var lastFinished: Date?
    var delivered = 0
    var deliveredWithError = 0
    var lastDelivered: Date?
    var deliveredAtLastQueued = 0
    var finishedAtLastQueued = 0
    var callbacks: [String: Int] = [:]
    var signals: [String: Int] = [:]
    var transitions: [String: Int] = [:]
    var warnings: [String] = []
    var appExited: String?
    var firstError: String?
    /// SIGSTOPs sent to the app before its last didCompleteWithError returned.
    var stopsBeforeDone = 0
    var queuedAt: [Double]
    var finishedAt: [Double]
    var deliveredAt: [Double]

    init(app: String, count: Int, lastSeq: UInt64) {
        self.app = app
        self.count = count
        self.lastSeq = lastSeq
        queuedAt = Array(repeating: .nan, count: count + 1)
        finishedAt = Array(repeating: .nan, count: count + 1)
        deliveredAt = Array(repeating: .nan, count: count + 1)
    }

    var isDone: Bool { delivered + deliveredWithError >= count || appExited != nil }

    mutating func add(_ e: HostEvent) {
        if e.seq > lastSeq + 1 { missedEvents += e.seq - lastSeq - 1 }
        lastSeq = max(lastSeq, e.seq)
        if e.bundleIdentifier == nil {
            if e.kind == .service, e.cause.hasPrefix("transfer daemon ready") { daemonReady = daemonReady ?? e.time }
            if e.kind == .warning { warnings.append(e.cause) }
            return
        }
        guard e.bundleIdentifier?.rawValue == app else { return }
        let t = e.time.timeIntervalSince1970
        switch e.kind {
        // The typed fields, not the cause text: the event's transfer note, session task
        // and success.
        case .service:
            switch e.transfer {
            case .queued?:
                queued += 1
                firstQueued = firstQueued ?? e.time
                lastQueued = e.time
                if let k = e.transferTask?.rawValue, k >= 1, k <= count { queuedAt[k] = t }
                if queued == count {
                    deliveredAtLastQueued = delivered
                    finishedAtLastQueued = finished
                }
            case .finished?:
                finished += 1
                lastFinished = e.time
                if e.success != true {
                    finishedFailed += 1
                    firstError = firstError ?? e.cause
                }
                if let k = e.transferTask?.rawValue, k >= 1, k <= count { finishedAt[k] = t }
            default:
                break
            }
        case .callback:
            guard let task = e.transferTask?.rawValue else {
                let name = e.cause.hasSuffix(" returned") ? String(e.cause.dropLast(" returned".count)) : e.cause
                callbacks[name, default: 0] += 1
                break
            }
            if let success = e.success {
                callbacks["didCompleteWithError", default: 0] += 1
                if success {
                    delivered += 1
                } else {
                    deliveredWithError += 1
                    firstError = firstError ?? e.cause
                }
                lastDelivered = e.time
                if task >= 1, task <= count { deliveredAt[task] = t }
            } else {
                let name = e.callback?.prefix { $0 != "(" } ?? "urlSession"
                callbacks[String(name), default: 0] += 1
            }
        case .signal:
            // "SIGSTOP: ...", "SIGCONT: ..."; "running again (kernel confirmed SIGCONT)" is the kernel's confirmation.
            let sig = e.cause.hasPrefix("SIG") ? String(e.cause.prefix { $0 != ":" && $0 != " " }) : "continue confirmed"
            signals[sig, default: 0] += 1
            if sig == "SIGSTOP", !isDone { stopsBeforeDone += 1 }
        case .transition:
            if let to = e.to { transitions[to.rawValue, default: 0] += 1 }
        case .exited:
            appExited = e.cause
        case .warning, .report:
            warnings.append(e.cause)
        default:
            break
        }
    }

    func summary() -> TallySummary {
        var s = TallySummary()
        s.queued = queued
        s.finished = finished
        s.finishedFailed = finishedFailed
        s.delivered = delivered
        s.deliveredWithError = deliveredWithError
        s.missedEvents = missedEvents
        s.firstQueued = firstQueued
        s.lastQueued = lastQueued
        s.lastFinished = lastFinished
        s.lastDelivered = lastDelivered
        s.deliveredAtLastQueued = deliveredAtLastQueued
        s.finishedAtLastQueued = finishedAtLastQueued
        s.callbacks = callbacks
        s.signals = signals
        s.transitions = transitions
        s.warnings = Array(warnings.prefix(10))
        s.appExited = appExited
        s.firstError = firstError
        s.stopsBeforeDone = stopsBeforeDone
        var daemon = Samples(), delivery = Samples(), whole = Samples()
        for k in 1...count {
            let q = queuedAt[k], f = finishedAt[k], d = deliveredAt[k]
            if q.isFinite, f.isFinite { daemon.add(Int64((f - q) * 1e9)) }
            if f.isFinite, d.isFinite { delivery.add(Int64((d - f) * 1e9)) }
            if q.isFinite, d.isFinite { whole.add(Int64((d - q) * 1e9)) }
        }
        s.queuedToFinished = Spread(daemon)
        s.finishedToDelivered = Spread(delivery)
        s.queuedToDelivered = Spread(whole)
        return s
    }
}

/// Median, p90 and max of samples, in nanoseconds.
struct Spread: Codable, Sendable {
    var count = 0
    var median = Double.nan
    var p90 = Double.nan
    var max = Double.nan
    init() {}
    init(_ s: Samples) {
        count = s.count
        median = s.median
        p90 = s.p90
        max = s.max
    }
}

/// A counter shared by the baseline's workers.
final class Counter: Sendable {
    private let value = Mutex(1)
    /// The next number (1, 2, ...).
    func take() -> Int {
        value.withLock { v in
            defer { v += 1 }
            return v
        }
    }
}

struct TallySummary: Codable, Sendable {
    var queued = 0
    var finished = 0
    var finishedFailed = 0
    var delivered = 0
    var deliveredWithError = 0
    var missedEvents: UInt64 = 0
    var firstQueued: Date?
    var lastQueued: Date?
    var lastFinished: Date?
    var lastDelivered: Date?
    var deliveredAtLastQueued = 0
    var finishedAtLastQueued = 0
    var callbacks: [String: Int] = [:]
    var signals: [String: Int] = [:]
    var transitions: [String: Int] = [:]
    var warnings: [String] = []
    var appExited: String?
    var firstError: String?
    var stopsBeforeDone = 0
    var queuedToFinished = Spread()
    var finishedToDelivered = Spread()
    var queuedToDelivered = Spread()

    var state: String {
        "first enqueue → last delivery \(firstQueued.flatMap { q in lastDelivered.map { formatDuration($0.timeIntervalSince(q) * 1e9) } } ?? "—"); queued \(queued), finished in the daemon \(finished) (\(finishedFailed) failed), didCompleteWithError returned \(delivered) (+\(deliveredWithError) with an error)"
            + (appExited.map { "; the app exited: \($0)" } ?? "") + (firstError.map { "; first error: \($0)" } ?? "")
            + (warnings.isEmpty ? "" : "; warnings: " + warnings.prefix(3).joined(separator: " | "))
    }
}

// MARK: - The server process

/// `apphost-bench transfer-server` as a child: started with its stdin and stdout on
/// pipes; answers "stats" lines; exits when its stdin closes.
final class ServerProcess: @unchecked Sendable {
    let pid: pid_t
    let port: Int
    private let toChild: Int32
    private let fromChild: Int32
    private var buffered: [UInt8] = []
    private let lock = NSLock()

    private init(pid: pid_t, port: Int, toChild: Int32, fromChild: Int32, buffered: [UInt8]) {
        self.pid = pid
        self.port = port
        self.toChild = toChild
        self.fromChild = fromChild
        self.buffered = buffered
    }

    static func start(resources: SmallResources) async throws -> ServerProcess {
        try await onThread("server-start") {
            // Both close-on-exec: only the helper gets them, as its stdin and stdout.
            let inputPipe = try makePipe()
            guard let outputPipe = try? makePipe() else {
                _ = close(inputPipe.read.rawValue); _ = close(inputPipe.write.rawValue)
                throw BenchError("pipe: \(String(cString: strerror(errno)))")
            }
            let input = [inputPipe.read.rawValue, inputPipe.write.rawValue]
            let output = [outputPipe.read.rawValue, outputPipe.write.rawValue]
            let argv = [selfExecutable, "transfer-server", "--small-count", String(resources.count),
                        "--small-size", "\(resources.minSize)-\(resources.maxSize)"]
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_adddup2(&actions, input[0], 0)
            posix_spawn_file_actions_adddup2(&actions, output[1], 1)
            let list = CStringList(argv)
            var pid: pid_t = 0
            let rc = posix_spawn(&pid, selfExecutable, &actions, nil, list.pointer, environ)
            close(input[0])
            close(output[1])
            guard rc == 0 else {
                close(input[1]); close(output[0])
                throw BenchError("posix_spawn \(selfExecutable) transfer-server: \(String(cString: strerror(rc)))")
            }
            var pending: [UInt8] = []
            guard let line = ServerProcess.readLine(output[0], &pending), line.hasPrefix("ready "), let port = Int(line.dropFirst("ready ".count)) else {
                close(input[1]); close(output[0])
                _ = reap(pid)
                throw BenchError("the transfer-server helper did not say ready")
            }
            return ServerProcess(pid: pid, port: port, toChild: input[1], fromChild: output[0], buffered: pending)
        }
    }

    /// Requests answered so far: all, 200s, and body bytes sent.
    func stats() async throws -> (requests: Int, ok: Int, bytes: Int64) {
        try await onThread("server-stats") { [self] in
            try lock.withLock {
                let command = Array("stats\n".utf8)
                guard command.withUnsafeBytes({ write(toChild, $0.baseAddress, $0.count) }) == command.count else {
                    throw BenchError("the transfer-server helper is gone")
                }
                guard let line = ServerProcess.readLine(fromChild, &buffered) else { throw BenchError("the transfer-server helper is gone") }
                let words = line.split(separator: " ")
                guard words.count == 4, words[0] == "stats", let r = Int(words[1]), let ok = Int(words[2]), let b = Int64(words[3]) else {
                    throw BenchError("the transfer-server helper said \"\(line)\"")
                }
                return (r, ok, b)
            }
        }
    }

    func cpu() -> CPU { CPU.of(pid) }

    /// Closes its stdin (it stops its server and exits) and reaps it; its exit status.
    func stop() async -> Int32 {
        close(toChild)
        let pid = self.pid, fd = fromChild
        return (try? await onThread("server-stop") {
            var rest: [UInt8] = []
            while ServerProcess.readLine(fd, &rest) != nil {}
            close(fd)
            return reap(pid)
        }) ?? -1
    }

    /// One line from `fd` (without the newline), `pending` holding what was read past it; nil at EOF.
    static func readLine(_ fd: Int32, _ pending: inout [UInt8]) -> String? {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let nl = pending.firstIndex(of: 0x0a) {
                let line = String(decoding: pending[..<nl], as: UTF8.self)
                pending.removeFirst(nl + 1)
                return line
            }
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            pending += chunk[0..<n]
        }
    }
}

// MARK: - Processes

/// User and system CPU seconds.
struct CPU: Codable, Sendable {
    var user = 0.0
    var system = 0.0
    var total: Double { user + system }
    static func - (a: CPU, b: CPU) -> CPU { CPU(user: a.user - b.user, system: a.system - b.system) }

    /// A process's, from /proc/PID/stat (clock ticks; zero once it is gone).
    static func of(_ pid: Int32) -> CPU {
        guard let s = try? ProcStat.read(pid: pid) else { return CPU() }
        return CPU(user: ticksToSeconds(s.userTicks), system: ticksToSeconds(s.systemTicks))
    }

    /// This process's (the bench, and the host when one runs in it).
    static func ofSelf() -> CPU {
        var u = rusage()
        getrusage(RUSAGE_SELF.rawValue, &u)
        return CPU(usage: u)
    }

    init(user: Double = 0, system: Double = 0) {
        self.user = user
        self.system = system
    }

    init(usage u: rusage) {
        user = Double(u.ru_utime.tv_sec) + Double(u.ru_utime.tv_usec) / 1e6
        system = Double(u.ru_stime.tv_sec) + Double(u.ru_stime.tv_usec) / 1e6
    }
}

let clockTicksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

func ticksToSeconds(_ ticks: UInt64) -> Double { Double(ticks) / clockTicksPerSecond }

/// A "Key: N kB" field of /proc/PID/status, in KiB.
func procStatusKiB(_ pid: Int32, _ key: String) -> Int? {
    guard let text = readProcText("/proc/\(pid)/status") else { return nil }
    return Int(ProcStatus.parse(text)[key]?.split(separator: " ").first ?? "")
}

/// Runs `argv` with stdout and stderr into a pipe; its output, exit status, wall time and CPU (wait4).
func runCapturing(_ argv: [String]) async throws -> (status: Int32, text: String, seconds: Double, cpu: CPU) {
    try await onThread("run-\((argv[0] as NSString).lastPathComponent)") {
        let pipe = try makePipe()
        let list = CStringList(argv)
        let clock = ContinuousClock()
        let start = clock.now
        let pid: pid_t
        do {
            pid = try posixSpawn(path: argv[0], argv: list, envp: nil, output: pipe.write.rawValue)
        } catch {
            _ = close(pipe.read.rawValue); _ = close(pipe.write.rawValue)
            throw error
        }
        _ = close(pipe.write.rawValue)
        var data = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(pipe.read.rawValue, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            data += chunk[0..<n]
        }
        _ = close(pipe.read.rawValue)
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 {
            if errno != EINTR { break }
        }
        let elapsed = clock.now - start
        return (status, String(decoding: data, as: UTF8.self), seconds(elapsed), CPU(usage: usage))
    }
}

func writeAll(_ fd: Int32, _ buffer: ByteBuffer) throws {
    try buffer.withUnsafeReadableBytes { raw in
        var off = 0
        while off < raw.count {
            let n = write(fd, raw.baseAddress! + off, raw.count - off)
            if n < 0 {
                if errno == EINTR { continue }
                throw BenchError("write: \(String(cString: strerror(errno)))")
            }
            off += n
        }
    }
}

// MARK: - Printing

func printTransfers(_ r: TransfersReport) {
    print("")
    print("\(r.resources.count) small background downloads (\(r.resources.sizeText); /f/1 ... /f/\(r.resources.count) "
          + "on HTTPTestServer in a helper process, loopback; \(buildConfiguration) build)")
    func secs(_ s: Double) -> String { String(format: "%.2f s", s) }
    func cpu(_ f: PhaseFigures) -> String {
        f.cpu.sorted { $0.key < $1.key }.map { String(format: "%@ %.2f s (sys %.2f)", $0.key, $0.value.total, $0.value.system) }.joined(separator: ", ")
    }
    func line(_ f: PhaseFigures) -> String {
        "\(secs(f.seconds)), \(formatDuration(f.perTransfer * 1e9)) per transfer, \(String(format: "%.0f", f.rate))/s"
    }
    func check(_ f: PhaseFigures) -> String {
        "files right \(f.verified)/\(f.transfers) (\(formatBytes(f.bytes))); server answered \(f.serverRequests) requests, \(f.serverOK) of them 200"
            + (f.problems.isEmpty ? "" : "; PROBLEMS: " + f.problems.joined(separator: "; "))
    }
    print("  baselines (same server, same run)")
    for b in r.baselines {
        print("    \(b.label): \(line(b))")
        print("      CPU: \(cpu(b)); \(check(b))")
        if let c = b.command { print("      \(c)") }
    }
    if let v = r.curlVersion { print("    (\(v))") } else { print("    curl baseline skipped: no curl with --parallel (7.66+)") }
    let ahc = r.baselines.filter { $0.label.hasPrefix("AsyncHTTPClient") }.min { $0.seconds < $1.seconds }
    let curl = r.baselines.filter { $0.label.hasPrefix("curl") }.min { $0.seconds < $1.seconds }
    for h in r.host {
        let f = h.figures
        let t = h.tally
        if let failure = h.failure {
            print("  host (\(h.variant)): FAILED: \(failure)")
            print("    what the host saw: \(t.state)")
            let sig = t.signals.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            print("    callbacks returned: " + t.callbacks.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
                  + "; signals: \(sig.isEmpty ? "none" : sig)")
            if let q0 = t.firstQueued, let q1 = t.lastQueued {
                print("    first → last enqueue \(formatDuration(q1.timeIntervalSince(q0) * 1e9)); last delivery \(t.lastDelivered.map { formatDuration($0.timeIntervalSince(q0) * 1e9) } ?? "none") after the first enqueue")
            }
            print("    app: \(TransferBench.executable) \(h.arguments.joined(separator: " "))")
            continue
        }
        print("  host (\(h.variant)): first enqueue → \(t.delivered)th didCompleteWithError returned: \(line(f))")
        if let ahc { print("    ratio \(formatRatio(f.seconds / ahc.seconds)) of AsyncHTTPClient (faster of its two runs, \(secs(ahc.seconds)))") }
        if let curl { print("    ratio \(formatRatio(f.seconds / curl.seconds)) of curl --parallel (faster of its two runs, \(secs(curl.seconds)))") }
        print("    CPU: \(cpu(f)); daemon peak RSS (VmHWM) \(String(format: "%.1f MiB", Double(h.daemonPeakRSSKiB) / 1024)), "
              + "RSS at the end \(String(format: "%.1f MiB", Double(h.daemonRSSKiB) / 1024)); app peak RSS \(String(format: "%.1f MiB", Double(h.appPeakRSSKiB) / 1024))")
        print("    \(check(f))")
        if let q0 = t.firstQueued, let q1 = t.lastQueued, let d = t.lastDelivered {
            var stages: [String] = []
            if let call = h.launchCall { stages.append("launch() called → first enqueue \(formatDuration(q0.timeIntervalSince(call) * 1e9))") }
            stages.append("first → last enqueue \(formatDuration(q1.timeIntervalSince(q0) * 1e9)) (\(formatDuration(q1.timeIntervalSince(q0) / Double(t.queued) * 1e9)) per resume; by then \(t.finishedAtLastQueued) finished in the daemon, \(t.deliveredAtLastQueued) delivered)")
            if let f = t.lastFinished { stages.append("first enqueue → last finished in the daemon \(formatDuration(f.timeIntervalSince(q0) * 1e9))") }
            stages.append("last enqueue → last delivered \(formatDuration(d.timeIntervalSince(q1) * 1e9))")
            if let ret = h.launchReturned { stages.append("launch() returned (didFinishLaunching, with the enqueues, returned) after \(formatDuration(ret.timeIntervalSince(h.launchCall ?? ret) * 1e9))") }
            print("    stages: " + stages.joined(separator: "; "))
        }
        func lat(_ name: String, _ s: Spread) -> String {
            "\(name) median \(formatDuration(s.median)), p90 \(formatDuration(s.p90)), max \(formatDuration(s.max))"
        }
        print("    per transfer: " + [lat("queued → finished in the daemon", t.queuedToFinished),
                                       lat("finished → didCompleteWithError returned", t.finishedToDelivered)].joined(separator: "; "))
        print("    callbacks returned: " + t.callbacks.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        let sig = t.signals.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        let tr = t.transitions.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        print("    signals: \(sig.isEmpty ? "none" : sig) (SIGSTOP before the last delivery: \(t.stopsBeforeDone)); transitions: \(tr)")
        // iOS wakes (or relaunches) the app once the session's tasks are all complete:
        // one SIGCONT at most and one handleEvents… for a session's batch (decision 0048).
        let wakes = t.signals["SIGCONT"] ?? 0
        let handleEvents = t.callbacks.filter { $0.key.hasPrefix("handleEventsForBackgroundURLSession") }.values.reduce(0, +)
        print("    wakes: \(wakes) SIGCONT, \(handleEvents) handleEventsForBackgroundURLSession (iOS: at most one of each, once the session's tasks are all complete)")
        print("    app log: \(h.appLogLines) lines, \(formatBytes(Int64(h.appLogBytes))); \(h.appSummaryLine ?? "no summary line")")
        if t.missedEvents > 0 { print("    WARNING: \(t.missedEvents) host events were not seen by the bench's subscription (its buffer overflowed)") }
        if !t.warnings.isEmpty { print("    host warnings: " + t.warnings.joined(separator: " | ")) }
        for n in h.notes { print("    note: \(n)") }
        print("    app: \(TransferBench.executable) \(h.arguments.joined(separator: " "))")
    }
    if let c = r.createMicroseconds {
        print(String(format: "  context: creating an empty file at the start of the run: %.0f µs each (over 1,000)", c)
              + (c > 50 ? " — SLOW: a mass deletion in the last minutes makes ext4 skip recently deleted inodes; wait and run again" : ""))
    }
    if let fs = r.fsyncContext {
        print(String(format: "  context: %d × (write the body to NAME.part, fsync, close, rename), one at a time, same file system: %.2f s (%@ each)",
                     r.resources.count, fs, formatDuration(fs / Double(r.resources.count) * 1e9)))
    }
    print("  windows: host from its first \"download task 1 of s queued\" event to its \(r.resources.count)th \"didCompleteWithError(task K, nil) returned\" (host clock);")
    print("  AsyncHTTPClient from the first request to the last file closed; curl from spawn to exit. CPU from /proc (\(Int(clockTicksPerSecond)) Hz ticks) and wait4.")
}

// MARK: - Commands

extension AppHostBench {
    struct TransfersCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "transfers",
            abstract: "N small background downloads through the host and apphost-transferd vs AsyncHTTPClient and curl --parallel.")
        @OptionGroup var common: CommonOptions

        @Option(help: "Downloads (each its own path /f/n).")
        var smallCount = 10_000

        @Option(help: "Size of each resource: SIZE or MIN-MAX in bytes (K = KiB); sizes are spread over the range.")
        var smallSize = "1K-4K"

        @Flag(help: "Skip the variant in which the app is launched in the background (iOS would suspend it and wake it once for the events).")
        var skipBackground = false

        @Option(help: "Give up on a host run after this many seconds.")
        var timeout = 600.0

        func validate() throws {
            guard smallCount > 0, smallCount <= 100_000 else { throw ValidationError("--small-count must be 1...100000") }
            _ = try SmallResources(count: smallCount, spec: smallSize)
        }

        func run() async throws {
            var report = Report()
            report.transfers = try await TransferBench(resources: SmallResources(count: smallCount, spec: smallSize),
                                                       backgroundVariant: !skipBackground,
                                                       timeout: .milliseconds(Int64(timeout * 1000))).run()
            try report.emit(json: common.json)
            if report.transfers?.host.contains(where: { $0.failure != nil }) == true { throw ExitCode(1) }
        }
    }

    /// The loopback server of `transfers`, in a process of its own: prints "ready PORT",
    /// answers "stats" with "stats REQUESTS OK BYTES", stops at EOF on stdin.
    struct TransferServerCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "transfer-server", shouldDisplay: false)

        @Option var smallCount = 10_000
        @Option var smallSize = "1K-4K"

        func run() async throws {
            let resources = try SmallResources(count: smallCount, spec: smallSize)
            let server = try await HTTPTestServer.start()
            for n in 1...resources.count {
                server.serve(resources.path(n), resource: resources.resource(n))
            }
            print("ready \(server.port)")
            fflush(nil)
            try await onThread("transfer-server-stdin") {
                var pending: [UInt8] = []
                while let line = ServerProcess.readLine(0, &pending) {
                    guard line == "stats" else { continue }
                    let all = server.allRequests
                    let ok = all.reduce(0) { $0 + ($1.status == 200 ? 1 : 0) }
                    let bytes = all.reduce(Int64(0)) { $0 + $1.bodyBytesSent }
                    print("stats \(all.count) \(ok) \(bytes)")
                    fflush(nil)
                }
            }
            try await server.stop()
        }
    }
}
