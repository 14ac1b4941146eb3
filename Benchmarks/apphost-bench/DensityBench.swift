import AppHostProtocol
import AppHostSystem
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What the density benchmark found.
struct DensityReport: Codable, Sendable {
    var apps: Int
    var executable: String
    /// Launch round trips (`launch` request → its answer: didFinishLaunching returned),
    /// per group of apps in launch order.
    var launchGroups: [Row]
    /// The last group's median over the first's: whether a launch grows with the count.
    var launchGrowth: Double
    var setupSeconds: Double
    var idleWithOne: IdleWindow
    var idleWithAll: IdleWindow
    /// status, events, a state change: with one app, then with all.
    var requests: [Row]
    /// `device memory critical` sent → the first jetsam kill in the event stream (nil
    /// where the host has no jetsam).
    var criticalToFirstKill: Row?
    var jetsamKills: Int?
}

/// Benchmark: a daemon with 1,000 apps launched and suspended: does a launch, a
/// request or a state change cost more as the count grows, what the daemon holds
/// idle, and how soon critical memory pressure gets its first jetsam kill.
struct DensityBench {
    let apps: Int
    let idleSeconds: Double
    let executable: String
    var distinctWindows = true
    var groups = 10
    var jetsamRounds = 20

    func run() async throws -> DensityReport {
        try await onThread("density-bench") { try runBlocking() }
    }

    private func runBlocking() throws -> DensityReport {
        let apphost = productsDirectory + "/apphost"
        guard FileManager.default.isExecutableFile(atPath: apphost) else { throw BenchError("\(apphost) is missing") }
        let state = try TempDir("dn")
        let bundles = try TempDir("db")
        defer {
            state.remove()
            bundles.remove()
        }
        let socketPath = state.path + "/" + ControlSocket.fileName
        let ticksPerSecond = Int(sysconf(Int32(_SC_CLK_TCK)))
        let daemon = try Daemon.start(apphost: apphost, stateDirectory: state.path)
        var daemonReaped = false
        defer {
            if !daemonReaped {
                _ = kill(daemon.pid, SIGTERM)
                reap(daemon.pid)
            }
        }
        let ids = (1...apps).map { "com.bench.density.\($0)" }
        let follower = try EventFollower(socketPath: socketPath, expecting: Set(ids))
        let executable = distinctWindows ? "ProbeApp" : self.executable
        let idle = IdleBench(apps: apps, idleSeconds: idleSeconds, executable: executable)
        let clock = ContinuousClock()

        func bring(_ n: Int) throws -> Duration {
            let id = ids[n]
            let path = try makeBundle(in: bundles.path, name: "app-\(n + 1)", id: id, executable: executable)
            _ = try controlRequest(socketPath, .install(path: path, settings: [:]))
            let arguments = distinctWindows ? ["--on", "launch", "window:App \(n + 1)"] : []
            let t0 = clock.now
            guard case .launched = try controlRequest(socketPath, .launch(bundleIdentifier: try BundleID(validating: id), background: false, arguments: arguments)) else {
                throw BenchError("launch \(id): unexpected answer")
            }
            let took = clock.now - t0
            _ = try controlRequest(socketPath, .background(bundleIdentifier: try BundleID(validating: id)))
            return took
        }

        /// Times a state change: `foreground` of a suspended app (SIGCONT, willEnterForeground,
        /// didBecomeActive), then sends it home and waits until it is suspended again.
        func stateChanges(apps pick: [String]) throws -> Samples {
            var s = Samples()
            for id in pick {
                let bundle = try BundleID(validating: id)
                let before = follower.suspensions(of: id)
                let t0 = clock.now
                _ = try controlRequest(socketPath, .foreground(bundleIdentifier: bundle))
                s.add(clock.now - t0)
                _ = try controlRequest(socketPath, .background(bundleIdentifier: bundle))
                guard follower.waitSuspensions(of: id, before + 1, timeout: 60) else { throw BenchError("\(id) was not suspended again within 60 s") }
            }
            return s
        }

        progress("density: one app, then \(apps)")
        let setupStart = clock.now
        _ = try bring(0)
        guard follower.waitSuspendedAndPictured(1, timeout: 60) else { throw BenchError("the first app was not suspended within 60 s") }
        let idleOne = try idle.measureWindow(daemon.pid, apps: 1, ticksPerSecond: ticksPerSecond)
        let requestsOne = try idle.timeRequests(socketPath, app: ids[0])
        let changesOne = try stateChanges(apps: Array(repeating: ids[0], count: 20))

        let perGroup = max(1, apps / groups)
        var launches: [Samples] = []
        var current = Samples()
        for n in 1..<apps {
            current.add(try bring(n))
            if (n + 1) % perGroup == 0 || n + 1 == apps {
                launches.append(current)
                current = Samples()
                progress("density: \(n + 1) apps")
            }
        }
        guard follower.waitSuspendedAndPictured(apps, timeout: 600) else {
            throw BenchError("not all \(apps) apps were suspended within 600 s (\(follower.suspendedCount) were)")
        }
        let setupSeconds = Double((clock.now - setupStart).nanoseconds) / 1e9
        let idleAll = try idle.measureWindow(daemon.pid, apps: apps, ticksPerSecond: ticksPerSecond)
        let requestsAll = try idle.timeRequests(socketPath, app: ids[apps / 2])
        let changesAll = try stateChanges(apps: (0..<20).map { ids[($0 * 37 + 11) % apps] })

        var requestRows: [Row] = []
        for (name, one) in requestsOne {
            let base = Row("\(name), 1 app", one)
            requestRows.append(base)
            if let all = requestsAll.first(where: { $0.0 == name })?.1 {
                requestRows.append(Row("\(name), \(apps) apps", all, against: base))
            }
        }
        let changeBase = Row("foreground() of a suspended app, 1 app", changesOne)
        requestRows += [changeBase, Row("foreground() of a suspended app, \(apps) apps", changesAll, against: changeBase)]

        // Critical pressure, forced: each `device memory critical` has jetsam kill one app
        // (the least recently used suspended one); `normal` ends it. Timed from sending the
        // request to the event stream's SIGKILL (the stream's delivery included).
        progress("density: critical memory pressure, \(jetsamRounds) times")
        var toKill = Samples()
        for _ in 0..<jetsamRounds {
            let before = follower.kills
            let t0 = clock.now
            _ = try controlRequest(socketPath, .mode(.deviceMemory(.critical)))
            guard follower.waitKills(before + 1, timeout: 30) else { throw BenchError("no jetsam kill within 30 s of critical pressure") }
            toKill.add(clock.now - t0)
            _ = try controlRequest(socketPath, .mode(.deviceMemory(.normal)))
        }
        let killRow = Row("device memory critical sent → first SIGKILL seen, \(apps) apps", toKill,
                          note: "target ≤ 10 ms: \(toKill.median <= 10e6 ? "met" : "NOT met")")

        var groupRows: [Row] = []
        var from = 2
        for (i, s) in launches.enumerated() {
            let to = from + s.count - 1
            groupRows.append(Row("launch, apps \(from)–\(to)", s, against: i == 0 ? nil : groupRows.first))
            from = to + 1
        }
        let growth = (launches.last?.median ?? .nan) / (launches.first?.median ?? .nan)

        progress("density: shutting the daemon down")
        _ = try controlRequest(socketPath, .shutdown)
        reap(daemon.pid)
        daemonReaped = true
        follower.join()
        daemon.join()

        return DensityReport(apps: apps, executable: distinctWindows ? "ProbeApp (a window each)" : executable,
                             launchGroups: groupRows, launchGrowth: growth, setupSeconds: setupSeconds,
                             idleWithOne: idleOne, idleWithAll: idleAll, requests: requestRows,
                             criticalToFirstKill: killRow, jetsamKills: toKill.count)
    }
}

func printDensity(_ r: DensityReport) {
    func mib(_ kib: Int) -> String { String(format: "%.1f MiB", Double(kib) / 1024) }
    print("")
    print("Density (apphost daemon, separate process; \(r.apps) × \(r.executable) installed, launched and sent home)")
    print(String(format: "  setup %.1f s; launch median of the last group / the first: %@ (a launch must not grow with the count)",
                 r.setupSeconds, formatRatio(r.launchGrowth)))
    for (label, w) in [("1 app", r.idleWithOne), ("\(r.apps) apps", r.idleWithAll)] {
        print(String(format: "  idle with %@: RSS %@ (anonymous %@), CPU %.0f ms in %.1f s, %llu wake-ups after the first second, %d threads",
                     label, mib(w.rssKiB), mib(w.rssAnonKiB), w.cpuMilliseconds, w.seconds, w.wakeupsAfterFirstSecond, w.threads))
    }
    print(String(format: "  anonymous memory per app: %.1f KiB", Double(r.idleWithAll.rssAnonKiB - r.idleWithOne.rssAnonKiB) / Double(max(1, r.apps - 1))))
    printTable(title: "Launch round trips as the count grows (ratio: against the first group)", rows: r.launchGroups)
    printTable(title: "Requests and state changes with 1 app and with \(r.apps)", rows: r.requests)
    if let row = r.criticalToFirstKill {
        printTable(title: "Critical memory pressure → first jetsam kill (\(r.jetsamKills ?? 0) kills)", rows: [row])
    }
}
