import AppHostProtocol
import AppHostSystem
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One idle window of the daemon.
struct IdleWindow: Codable, Sendable {
    var apps: Int
    var seconds: Double
    /// VmRSS at the end of the window.
    var rssKiB: Int
    /// RssAnon at the end of the window (the heap: what grows with apps; the rest is
    /// the executable's and libraries' pages).
    var rssAnonKiB: Int
    /// utime+stime over the window (clock-tick resolution).
    var cpuMilliseconds: Double
    /// Voluntary + nonvoluntary context switches of all threads over the window.
    var wakeups: UInt64
    /// Those after the first second (what is left is periodic).
    var wakeupsAfterFirstSecond: UInt64
    var threads: Int
    /// Threads that woke, as "name[tid]" → switches.
    var threadsThatWoke: [String: UInt64]
    /// Threads that ended during the window (their switches are lost).
    var threadsEnded: Int
}

/// Everything the idle benchmark found.
struct IdleReport: Codable, Sendable {
    var executable: String
    var clockTicksPerSecond: Int
    var baseline: IdleWindow
    var loaded: IdleWindow
    var rssRatio: Double
    var rssTargetMiB = 64.0
    var rssTargetMet: Bool
    var wakeupTargetMet: Bool
    var setupSeconds: Double
    var appsSuspendedPerStatus: Int
    var appsInStateTBefore: Int
    var appsInStateTAfter: Int
    var appsTotalRSSKiB: Int
    /// Proportional set size (shared pages divided among their users), from smaps_rollup.
    var appsTotalPSSKiB: Int
    var appWakeupsDuringWindow: UInt64
    var eventsDuringWindow: Int
    var shutdownSeconds: Double
    var daemonExitStatus: Int32
    var appsLeftAfterShutdown: Int
    /// Control request round trips, with no app (baseline) and with all apps.
    var requests: Section
    /// Each app showed a window of its own (so each snapshot was drawn apart).
    var distinctWindows: Bool
    /// RssAnon once the first half of the apps were suspended with their snapshots
    /// drawn: the second half's growth over their count is the cost of one more app,
    /// without what the first apps' code paths cost once.
    var halfwayApps: Int
    var halfwayAnonKiB: Int
    var anonKiBPerAppMarginal: Double {
        Double(loaded.rssAnonKiB - halfwayAnonKiB) / Double(max(1, loaded.apps - halfwayApps))
    }
    var anonKiBPerAppFromNone: Double {
        Double(loaded.rssAnonKiB - baseline.rssAnonKiB) / Double(max(1, loaded.apps))
    }
}

/// Benchmark 3: a daemon (a separate `apphost daemon` process) with many suspended apps, idle.
struct IdleBench {
    let apps: Int
    let idleSeconds: Double
    let executable: String
    /// Start the daemon with `--event-loop-executor`.
    var eventLoopExecutor = false
    /// Each app (ProbeApp) shows a window of its own, `window:App N`: every snapshot is
    /// drawn apart, as real apps' are. Otherwise `executable` with no window, whose
    /// apps all share one picture.
    var distinctWindows = true

    func run() async throws -> IdleReport {
        try await onThread("idle-bench") { try runBlocking() }
    }

    private func runBlocking() throws -> IdleReport {
        let apphost = productsDirectory + "/apphost"
        guard FileManager.default.isExecutableFile(atPath: apphost) else { throw BenchError("\(apphost) is missing") }
        let state = try TempDir("st")
        let bundles = try TempDir("bn")
        defer {
            state.remove()
            bundles.remove()
        }
        let socketPath = state.path + "/" + ControlSocket.fileName
        let ticksPerSecond = Int(sysconf(Int32(_SC_CLK_TCK)))

        let daemon = try Daemon.start(apphost: apphost, stateDirectory: state.path,
                                      extraArguments: eventLoopExecutor ? ["--event-loop-executor"] : [])
        var daemonReaped = false
        var appPIDs: [(id: String, pid: Int32, start: UInt64)] = []
        defer {
            // On any failure: stop the daemon (its apps die with it: PR_SET_PDEATHSIG), then reap it.
            if !daemonReaped {
                _ = kill(daemon.pid, SIGTERM)
                reap(daemon.pid)
            }
            for app in appPIDs where (try? ProcStat.read(pid: app.pid).startTicks) == app.start {
                _ = kill(app.pid, SIGKILL)
            }
        }
        progress("idle: daemon pid \(daemon.pid) ready; \(idleSeconds) s idle with no app (baseline)")

        // Baseline: the same daemon with no app.
        _ = try controlRequest(socketPath, .ping(version: ControlSocket.version))
        let baseline = try measureWindow(daemon.pid, apps: 0, ticksPerSecond: ticksPerSecond)
        let ids = (1...apps).map { "com.bench.idle.\($0)" }
        let requestsBefore = try timeRequests(socketPath, app: ids[0])

        // Follow the event stream from the start, counting apps that reach suspended.
        let follower = try EventFollower(socketPath: socketPath, expecting: Set(ids))
        let executable = distinctWindows ? "ProbeApp" : self.executable
        let half = max(1, apps / 2)
        var halfwayAnon = 0

        progress("idle: installing, launching and sending home \(apps) apps")
        let clock = ContinuousClock()
        let setupStart = clock.now
        for (n, id) in ids.enumerated() {
            let path = try makeBundle(in: bundles.path, name: "app-\(n + 1)", id: id, executable: executable)
            _ = try controlRequest(socketPath, .install(path: path, settings: [:]))
            let arguments = distinctWindows ? ["--on", "launch", "window:App \(n + 1)"] : []
            guard case .launched(_, let pid, _) = try controlRequest(socketPath, .launch(bundleIdentifier: try BundleID(validating: id), background: false, arguments: arguments)) else {
                throw BenchError("launch \(id): unexpected answer")
            }
            appPIDs.append((id, pid, (try? ProcStat.read(pid: pid).startTicks) ?? 0))
            _ = try controlRequest(socketPath, .background(bundleIdentifier: try BundleID(validating: id)))
            if n + 1 == half {
                guard follower.waitSuspendedAndPictured(half, timeout: 300) else {
                    throw BenchError("the first \(half) apps were not suspended with their snapshots drawn within 300 s")
                }
                halfwayAnon = rssAnonKiB(daemon.pid) ?? 0
            }
        }
        guard follower.waitAllSuspended(timeout: 300), follower.waitSuspendedAndPictured(apps, timeout: 300) else {
            throw BenchError("not all \(apps) apps reached suspended within 300 s (\(follower.suspendedCount) did)")
        }
        let setupSeconds = Double((clock.now - setupStart).nanoseconds) / 1e9
        progress(String(format: "idle: all %d suspended after %.1f s; %.0f s idle (measured)", apps, setupSeconds, idleSeconds))

        // Final check through status (after the event stream said so), and the kernel's view.
        let statuses = try controlStream(socketPath, .status(bundleIdentifier: nil)).compactMap { r -> AppStatus? in
            if case .appStatus(let s) = r { return s }
            return nil
        }
        let suspendedPerStatus = statuses.filter { ids.contains($0.bundleIdentifier.rawValue) && $0.state == .suspended }.count
        // `status` must agree with the kernel, app by app: listed as suspended exactly when
        // its process is stopped (state T in /proc).
        let disagreements = statuses.filter { ids.contains($0.bundleIdentifier.rawValue) }.compactMap { s -> String? in
            let kernel = s.pid.flatMap { try? ProcStat.read(pid: $0).state }
            guard (s.state == .suspended) != (kernel == "T") else { return nil }
            return "\(s.bundleIdentifier) is \(s.state.rawValue) per status, \(kernel.map { "state \($0)" } ?? "no process") per the kernel"
        }
        // And every app the bench launched is there, with the process the bench saw.
        let listed = Dictionary(statuses.map { ($0.bundleIdentifier.rawValue, $0) }, uniquingKeysWith: { a, _ in a })
        let missing = appPIDs.compactMap { app -> String? in
            guard let s = listed[app.id] else { return "\(app.id) is not listed by status" }
            guard s.pid == app.pid else {
                return "\(app.id) is \(s.state.rawValue) with pid \(s.pid.map(String.init) ?? "none") per status, pid \(app.pid) per the events"
            }
            return nil
        }
        guard missing.isEmpty else {
            throw BenchError("status lost \(missing.count) app(s): " + missing.prefix(10).joined(separator: "; "))
        }
        guard disagreements.isEmpty else {
            throw BenchError("status disagrees with the kernel for \(disagreements.count) app(s): " + disagreements.prefix(10).joined(separator: "; "))
        }
        let inTBefore = appPIDs.filter { (try? ProcStat.read(pid: $0.pid).state) == "T" }.count
        let appSwitchesBefore = appPIDs.map { threadSwitches($0.pid).values.reduce(0) { $0 + $1.switches } }.reduce(0, +)

        follower.startCounting()
        let loaded = try measureWindow(daemon.pid, apps: apps, ticksPerSecond: ticksPerSecond)
        let eventsDuringWindow = follower.stopCounting()

        let inTAfter = appPIDs.filter { (try? ProcStat.read(pid: $0.pid).state) == "T" }.count
        let appSwitchesAfter = appPIDs.map { threadSwitches($0.pid).values.reduce(0) { $0 + $1.switches } }.reduce(0, +)
        let appsRSS = appPIDs.map { rssKiB($0.pid) ?? 0 }.reduce(0, +)
        let appsPSS = appPIDs.map { pssKiB($0.pid) ?? 0 }.reduce(0, +)
        let requestsAfter = try timeRequests(socketPath, app: ids[0])
        var requestRows: [Row] = []
        for (name, before) in requestsBefore {
            let base = Row("\(name), no app", before)
            requestRows.append(base)
            requestRows.append(Row("\(name), \(apps) apps", requestsAfter.first { $0.0 == name }!.1, against: base))
        }

        // Shut down: every app gets willTerminate (a suspended one is continued first).
        progress("idle: shutting the daemon down")
        let shutdownStart = clock.now
        _ = try controlRequest(socketPath, .shutdown)
        let status = reap(daemon.pid)
        daemonReaped = true
        let shutdownSeconds = Double((clock.now - shutdownStart).nanoseconds) / 1e9
        follower.join()
        daemon.join()
        let left = appPIDs.filter { app in
            guard let info = try? ProcStat.read(pid: app.pid) else { return false }
            return info.startTicks == app.start
        }.count

        return IdleReport(
            executable: distinctWindows ? "ProbeApp (a window each)" : executable, clockTicksPerSecond: ticksPerSecond,
            baseline: baseline, loaded: loaded,
            rssRatio: Double(loaded.rssKiB) / Double(baseline.rssKiB),
            rssTargetMet: Double(loaded.rssKiB) / 1024 <= 64,
            wakeupTargetMet: loaded.wakeupsAfterFirstSecond == 0,
            setupSeconds: setupSeconds,
            appsSuspendedPerStatus: suspendedPerStatus,
            appsInStateTBefore: inTBefore, appsInStateTAfter: inTAfter,
            appsTotalRSSKiB: appsRSS,
            appsTotalPSSKiB: appsPSS,
            appWakeupsDuringWindow: appSwitchesAfter &- appSwitchesBefore,
            eventsDuringWindow: eventsDuringWindow,
            shutdownSeconds: shutdownSeconds,
            daemonExitStatus: status,
            appsLeftAfterShutdown: left,
            requests: Section(
                title: "Control requests to the daemon (round trip until it closed the connection; outside the idle windows)",
                rows: requestRows,
                notes: ["events are served from the daemon's in-memory cache (EventLog keeps the newest 20,000); status walks every installed app."]),
            distinctWindows: distinctWindows, halfwayApps: half, halfwayAnonKiB: halfwayAnon)
    }

    /// Times ping, status and a one-app events listing (non-following), 20 of each.
    func timeRequests(_ socketPath: String, app: String) throws -> [(String, Samples)] {
        let clock = ContinuousClock()
        let requests: [(String, ControlRequest)] = [
            ("ping", .ping(version: ControlSocket.version)),
            ("status (all apps)", .status(bundleIdentifier: nil)),
            ("events of one app (not following)", .events(follow: false, bundleIdentifier: try BundleID(validating: app))),
        ]
        var out: [(String, Samples)] = []
        for (name, request) in requests {
            var s = Samples()
            for i in 0..<22 {
                let t0 = clock.now
                var c = try ControlConnection(socketPath: socketPath)
                try c.send(request)
                _ = try c.reader.drainToEnd(ControlResponse.self)
                c.close()
                if i >= 2 { s.add(clock.now - t0) }
            }
            out.append((name, s))
        }
        return out
    }

    /// Samples the daemon at the start, after one second and at the end of the window.
    /// Waiting here is the measurement itself, not a stand-in for synchronisation.
    func measureWindow(_ pid: pid_t, apps: Int, ticksPerSecond: Int) throws -> IdleWindow {
        let clock = ContinuousClock()
        let start = clock.now
        let t0 = threadSwitches(pid)
        let cpu0 = try ProcStat.read(pid: pid)
        Thread.sleep(until: start + .seconds(1))
        let t1 = threadSwitches(pid)
        Thread.sleep(until: start + .milliseconds(Int64(idleSeconds * 1000)))
        let t2 = threadSwitches(pid)
        let cpu1 = try ProcStat.read(pid: pid)
        let elapsed = Double((clock.now - start).nanoseconds) / 1e9

        func delta(_ a: [Int32: ThreadSwitches], _ b: [Int32: ThreadSwitches]) -> (UInt64, [String: UInt64]) {
            var total: UInt64 = 0
            var woke: [String: UInt64] = [:]
            for (tid, after) in b {
                let d = after.switches &- (a[tid]?.switches ?? 0)
                if d > 0 {
                    total += d
                    woke["\(after.name)[\(tid)]"] = d
                }
            }
            return (total, woke)
        }
        let (all, woke) = delta(t0, t2)
        let (late, _) = delta(t1, t2)
        let ticks = (cpu1.userTicks + cpu1.systemTicks) &- (cpu0.userTicks + cpu0.systemTicks)
        return IdleWindow(
            apps: apps, seconds: elapsed, rssKiB: rssKiB(pid) ?? 0, rssAnonKiB: rssAnonKiB(pid) ?? 0,
            cpuMilliseconds: Double(ticks) * 1000 / Double(ticksPerSecond),
            wakeups: all, wakeupsAfterFirstSecond: late, threads: t2.count, threadsThatWoke: woke,
            threadsEnded: t0.keys.filter { t2[$0] == nil }.count)
    }
}

extension Thread {
    /// Sleeps until `deadline` on the continuous clock.
    static func sleep(until deadline: ContinuousClock.Instant) {
        let left = deadline - ContinuousClock.now
        if left > .zero { Thread.sleep(forTimeInterval: Double(left.nanoseconds) / 1e9) }
    }
}

// MARK: - /proc

struct ThreadSwitches {
    var name: String
    var switches: UInt64
}

/// Reads a small /proc file (their size is reported as 0, so read to the end).
func readProcText(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { _ = close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { break }
        bytes.append(contentsOf: chunk[0..<n])
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// voluntary + nonvoluntary context switches of every thread of `pid`, by tid.
func threadSwitches(_ pid: pid_t) -> [Int32: ThreadSwitches] {
    var out: [Int32: ThreadSwitches] = [:]
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    for name in tasks {
        guard let tid = Int32(name), let text = readProcText("/proc/\(pid)/task/\(tid)/status") else { continue }
        let info = ProcStatus.parse(text)
        let v = UInt64(info["voluntary_ctxt_switches"] ?? "") ?? 0
        let nv = UInt64(info["nonvoluntary_ctxt_switches"] ?? "") ?? 0
        out[tid] = ThreadSwitches(name: info["Name"] ?? "?", switches: v + nv)
    }
    return out
}

/// RssAnon in KiB.
func rssAnonKiB(_ pid: pid_t) -> Int? {
    guard let text = readProcText("/proc/\(pid)/status") else { return nil }
    return Int((ProcStatus.parse(text)["RssAnon"] ?? "").split(separator: " ").first ?? "")
}

/// VmRSS in KiB.
func rssKiB(_ pid: pid_t) -> Int? {
    guard let text = readProcText("/proc/\(pid)/status") else { return nil }
    let value = ProcStatus.parse(text)["VmRSS"] ?? ""
    return Int(value.split(separator: " ").first ?? "")
}

/// Pss in KiB, from /proc/PID/smaps_rollup.
func pssKiB(_ pid: pid_t) -> Int? {
    guard let text = readProcText("/proc/\(pid)/smaps_rollup") else { return nil }
    guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Pss:") }) else { return nil }
    return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
}

// MARK: - The daemon process

/// `apphost daemon --state-dir DIR`, its stdout and stderr read by a thread of ours.
final class Daemon: Sendable {
    let pid: pid_t
    private let output = Mutex<String>("")
    private let done = DispatchSemaphore(value: 0)

    private init(pid: pid_t) { self.pid = pid }

    /// Starts the daemon and returns once it printed "apphost: daemon ready".
    static func start(apphost: String, stateDirectory: String, extraArguments: [String] = []) throws -> Daemon {
        let pipe = try makePipe()
        let fds: [Int32] = [pipe.read.rawValue, pipe.write.rawValue]
        let pid: pid_t
        do {
            pid = try posixSpawn(path: apphost, argv: CStringList([apphost, "daemon", "--state-dir", stateDirectory] + extraArguments),
                                 envp: nil, output: fds[1])
        } catch {
            _ = close(fds[0]); _ = close(fds[1])
            throw error
        }
        _ = close(fds[1])
        let daemon = Daemon(pid: pid)
        let ready = DispatchSemaphore(value: 0)
        let readFD = fds[0]
        let thread = Thread {
            var pending = ""
            var signalled = false
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(readFD, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                let text = String(decoding: chunk[0..<n], as: UTF8.self)
                daemon.output.withLock { $0 += text }
                pending += text
                while let nl = pending.firstIndex(of: "\n") {
                    let line = pending[..<nl]
                    if !signalled && line.hasPrefix("apphost: daemon ready") {
                        signalled = true
                        ready.signal()
                    }
                    pending = String(pending[pending.index(after: nl)...])
                }
            }
            _ = close(readFD)
            if !signalled { ready.signal() } // ended without the line: start() reports it
            daemon.done.signal()
        }
        thread.name = "daemon-output"
        thread.start()
        ready.wait()
        guard daemon.output.withLock({ $0.contains("apphost: daemon ready") }) else {
            reap(pid)
            throw BenchError("apphost daemon exited before it was ready:\n\(daemon.output.withLock { $0 })")
        }
        return daemon
    }

    /// Waits until its output pipe closed.
    func join() { done.wait() }
}

// MARK: - Event stream

/// Follows the daemon's events (`events --follow`) on a thread, tracking each app's last state.
final class EventFollower: Sendable {
    private struct State {
        var states: [String: AppState] = [:]
        var suspended = 0
        var signalled = false
        var counting = false
        var counted = 0
        /// Apps with a snapshot written (kind `snapshot`), in this run.
        var pictured: Set<String> = []
        /// How many times each app reached suspended.
        var suspensions: [String: Int] = [:]
        /// SIGKILLs the host said it sent (any app).
        var kills = 0
        /// Waits for a condition on this state.
        var waiters: [(condition: @Sendable (State) -> Bool, reached: DispatchSemaphore)] = []
    }
    private let expected: Set<String>
    private let state = Mutex(State())
    private let allSuspended = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    init(socketPath: String, expecting ids: Set<String>) throws {
        expected = ids
        let opened = try ControlConnection(socketPath: socketPath)
        try opened.send(.events(follow: true, bundleIdentifier: nil))
        let thread = Thread { [self] in
            var connection = opened
            while let response = try? connection.next() {
                guard case .event(let e) = response else { break }
                record(e)
            }
            connection.close()
            finished.signal()
        }
        thread.name = "event-follower"
        thread.start()
    }

    private func record(_ e: HostEvent) {
        let (signal, reached) = state.withLock { s -> (Bool, [DispatchSemaphore]) in
            if s.counting { s.counted += 1 }
            if e.kind == .snapshot, let id = e.bundleIdentifier?.rawValue, expected.contains(id) { s.pictured.insert(id) }
            if e.kind == .signal, e.signal == .kill { s.kills += 1 }
            var signal = false
            if e.kind == .transition, let id = e.bundleIdentifier?.rawValue, expected.contains(id), let to = e.to {
                let before = s.states[id]
                s.states[id] = to
                if before == .suspended && to != .suspended { s.suspended -= 1 }
                if before != .suspended && to == .suspended {
                    s.suspended += 1
                    s.suspensions[id, default: 0] += 1
                }
                if s.suspended == expected.count && !s.signalled {
                    s.signalled = true
                    signal = true
                }
            }
            let now = s
            let reached = s.waiters.filter { $0.condition(now) }.map(\.reached)
            s.waiters.removeAll { $0.condition(now) }
            return (signal, reached)
        }
        if signal { allSuspended.signal() }
        for r in reached { r.signal() }
    }

    var suspendedCount: Int { state.withLock { $0.suspended } }

    /// Waits until every expected app's last transition was to suspended.
    func waitAllSuspended(timeout seconds: Double) -> Bool {
        allSuspended.wait(timeout: .now() + seconds) == .success
    }

    /// Waits until `count` of the expected apps are suspended and have a snapshot.
    func waitSuspendedAndPictured(_ count: Int, timeout seconds: Double) -> Bool {
        wait(timeout: seconds) { $0.suspended >= count && $0.pictured.count >= count }
    }

    /// SIGKILLs the host has said it sent so far.
    var kills: Int { state.withLock { $0.kills } }

    /// Waits until the host has said it sent `count` SIGKILLs.
    func waitKills(_ count: Int, timeout seconds: Double) -> Bool {
        wait(timeout: seconds) { $0.kills >= count }
    }

    /// How many times `id` reached suspended so far.
    func suspensions(of id: String) -> Int { state.withLock { $0.suspensions[id] ?? 0 } }

    /// Waits until `id` has reached suspended `count` times.
    func waitSuspensions(of id: String, _ count: Int, timeout seconds: Double) -> Bool {
        wait(timeout: seconds) { ($0.suspensions[id] ?? 0) >= count }
    }

    private func wait(timeout seconds: Double, until condition: @escaping @Sendable (State) -> Bool) -> Bool {
        let reached = DispatchSemaphore(value: 0)
        let already = state.withLock { s -> Bool in
            if condition(s) { return true }
            s.waiters.append((condition, reached))
            return false
        }
        return already || reached.wait(timeout: .now() + seconds) == .success
    }

    func startCounting() { state.withLock { $0.counting = true; $0.counted = 0 } }
    func stopCounting() -> Int { state.withLock { $0.counting = false; return $0.counted } }

    /// Waits until the daemon ended the stream (it does when it stops).
    func join() { finished.wait() }
}
