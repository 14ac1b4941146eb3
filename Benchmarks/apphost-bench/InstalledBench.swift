import AppHostProtocol
import AppHostSystem
import Foundation

/// Benchmark: a daemon with many apps installed (not launched): does an install cost more
/// as the count grows, and how long does `status` of every app take? Baselines from the
/// same run: the first tenth of the installs (against the last tenth), and `status` with
/// one app installed (against `status` with all) and `ping`.
struct InstalledBench {
    let apps: Int
    let executable: String
    var groups = 10

    func run() async throws -> Section {
        try await onThread("installed-bench") { try runBlocking() }
    }

    private func runBlocking() throws -> Section {
        let apphost = productsDirectory + "/apphost"
        guard FileManager.default.isExecutableFile(atPath: apphost) else { throw BenchError("\(apphost) is missing") }
        let state = try TempDir("in")
        let bundles = try TempDir("ib")
        defer {
            state.remove()
            bundles.remove()
        }
        let socketPath = state.path + "/" + ControlSocket.fileName
        let daemon = try Daemon.start(apphost: apphost, stateDirectory: state.path)
        var reaped = false
        defer {
            if !reaped {
                _ = kill(daemon.pid, SIGTERM)
                reap(daemon.pid)
            }
        }
        let clock = ContinuousClock()
        // The bundles first, so an install times the host's work, not the benchmark's.
        progress("installed: writing \(apps) bundles")
        let paths = try (0..<apps).map { n in
            try makeBundle(in: bundles.path, name: "app-\(n + 1)", id: "com.bench.installed.\(n + 1)", executable: executable)
        }
        func timeStatus() throws -> Samples {
            var s = Samples()
            for i in 0..<12 {
                let t0 = clock.now
                var c = try ControlConnection(socketPath: socketPath)
                try c.send(.status(bundleIdentifier: nil))
                _ = try c.reader.drainToEnd(ControlResponse.self)
                c.close()
                if i >= 2 { s.add(clock.now - t0) }
            }
            return s
        }
        var ping = Samples()
        for i in 0..<12 {
            let t0 = clock.now
            _ = try controlRequest(socketPath, .ping(version: ControlSocket.version))
            if i >= 2 { ping.add(clock.now - t0) }
        }
        var installs: [Samples] = Array(repeating: Samples(), count: groups)
        let perGroup = max(1, apps / groups)
        var statusOne = Samples()
        progress("installed: installing \(apps) apps")
        for (n, path) in paths.enumerated() {
            let t0 = clock.now
            guard case .installed = try controlRequest(socketPath, .install(path: path, settings: [:])) else {
                throw BenchError("install \(path): unexpected answer")
            }
            installs[min(groups - 1, n / perGroup)].add(clock.now - t0)
            if n == 0 { statusOne = try timeStatus() }
        }
        progress("installed: status of all \(apps)")
        let statusAll = try timeStatus()
        _ = try controlRequest(socketPath, .shutdown)
        reap(daemon.pid)
        reaped = true
        daemon.join()

        let pingRow = Row("ping", ping)
        let oneRow = Row("status, 1 app installed", statusOne, against: pingRow)
        let first = Row("install, apps 1-\(perGroup)", installs[0])
        var rows = [pingRow, oneRow, Row("status, \(apps) apps installed", statusAll, against: oneRow, target: nil,
                                         note: "target ≤ 50 ms at 10,000 apps")]
        rows.append(first)
        for g in 1..<groups where installs[g].count > 0 {
            let from = g * perGroup + 1
            rows.append(Row("install, apps \(from)-\(min(apps, from + perGroup - 1))", installs[g], against: first))
        }
        return Section(title: "Installed apps (apphost daemon, separate process; \(apps) apps installed, none launched)", rows: rows,
                       notes: ["An install must not grow with the count (ratio against the first tenth).",
                               "status of every app streams one frame per app (control version 2)."])
    }
}
