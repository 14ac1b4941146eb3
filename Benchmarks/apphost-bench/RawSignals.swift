import AppHostProtocol
import AppHostSystem
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What the raw-signal helper measured, in nanoseconds.
struct RawSignalSamples: Codable, Sendable {
    /// SIGSTOP + waitid(WSTOPPED) on the app binary (bare, handshaken, active, idle).
    var stopApp = Samples()
    /// SIGCONT + waitid(WCONTINUED) on the app binary.
    var continueApp = Samples()
    /// Bare protocol suspend: willResignActive + didEnterBackground sent, both returns read, then SIGSTOP + waitid.
    var protocolSuspend = Samples()
    /// Bare protocol resume: SIGCONT, willEnterForeground + didBecomeActive sent, both returns read.
    var protocolResume = Samples()
    /// SIGSTOP + waitid(WSTOPPED) on /bin/sleep (one thread).
    var stopSleep = Samples()
    /// SIGCONT + waitid(WCONTINUED) on /bin/sleep.
    var continueSleep = Samples()
    /// Threads of the app process while measured.
    var appThreads = 0

    /// Adds another run's samples.
    mutating func append(_ other: RawSignalSamples) {
        stopApp.values += other.stopApp.values
        continueApp.values += other.continueApp.values
        protocolSuspend.values += other.protocolSuspend.values
        protocolResume.values += other.protocolResume.values
        stopSleep.values += other.stopSleep.values
        continueSleep.values += other.continueSleep.values
        appThreads = other.appThreads
    }
}

/// The raw baselines, run in a process of their own.
///
/// They must not run in the bench process once a host has run there: the host's
/// `ProcessReaper` keeps a thread in `waitid(P_ALL, WSTOPPED|WCONTINUED)`, which
/// would consume (steal) the stop and continue reports of our bare children.
enum RawSignals {
    /// Runs in the helper process (`apphost-bench raw-signals`).
    static func measure(iterations: Int, warmup: Int, executable: String) throws -> RawSignalSamples {
        var out = RawSignalSamples()
        let clock = ContinuousClock()
        let home = try TempDir("raw")
        defer { home.remove() }
        let path = productsDirectory + "/" + executable
        let id = "com.bench.raw"
        var app = try BareApp.spawnToHello(path: path, argv: CStringList([path]),
                                           envp: CStringList(appEnvironment(home: home.path, bundleIdentifier: id)))
        defer { app.kill() }
        try app.launchActive(id)
        try app.awaitReturn(app.seq)
        out.appThreads = (try? ProcStat.read(pid: app.pid).threadCount) ?? 0

        let sleeper = try posixSpawn(path: "/bin/sleep", argv: CStringList(["sleep", "1000"]), envp: CStringList([]))
        defer { killAndReap(sleeper) }

        for i in 0..<(warmup + iterations) {
            let measured = i >= warmup
            for (pid, stop, cont) in [(app.pid, \RawSignalSamples.stopApp, \RawSignalSamples.continueApp),
                                      (sleeper, \RawSignalSamples.stopSleep, \RawSignalSamples.continueSleep)] {
                let t0 = clock.now
                try signalAndWait(pid, SIGSTOP, WSTOPPED)
                let t1 = clock.now
                guard (try? ProcStat.read(pid: pid).state) == "T" else { throw BenchError("pid \(pid) not in state T after SIGSTOP") }
                let t2 = clock.now
                try signalAndWait(pid, SIGCONT, WCONTINUED)
                let t3 = clock.now
                if measured {
                    out[keyPath: stop].add(t1 - t0)
                    out[keyPath: cont].add(t3 - t2)
                }
            }

            // The same work as the host's home button and foreground, with no host.
            let t0 = clock.now
            let resign = try app.send(.willResignActive, state: .inactive)
            let background = try app.send(.didEnterBackground, state: .background)
            try app.awaitReturn(resign)
            try app.awaitReturn(background)
            try signalAndWait(app.pid, SIGSTOP, WSTOPPED)
            let t1 = clock.now
            let t2 = clock.now
            _ = kill(app.pid, SIGCONT)
            let foreground = try app.send(.willEnterForeground, state: .inactive)
            let active = try app.send(.didBecomeActive, state: .active)
            try app.awaitReturn(foreground)
            try app.awaitReturn(active)
            let t3 = clock.now
            // Consume the continue report (untimed), so the next stop's wait sees only its own.
            try waitFor(app.pid, WCONTINUED)
            if measured {
                out.protocolSuspend.add(t1 - t0)
                out.protocolResume.add(t3 - t2)
            }
        }
        return out
    }

    /// kill(sig) then waitid(P_PID, pid, flag) until the matching report.
    static func signalAndWait(_ pid: pid_t, _ sig: Int32, _ flag: Int32) throws {
        guard kill(pid, sig) == 0 else { throw BenchError("kill(\(pid), \(sig)): \(String(cString: strerror(errno)))") }
        try waitFor(pid, flag)
    }

    static func waitFor(_ pid: pid_t, _ flag: Int32) throws {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, flag) != 0 {
            if errno != EINTR { throw BenchError("waitid(\(pid)): \(String(cString: strerror(errno)))") }
        }
    }

    /// Runs the helper process and decodes what it prints.
    static func runHelper(iterations: Int, warmup: Int, executable: String) async throws -> RawSignalSamples {
        try await onThread("raw-helper") {
            let pipe = try makePipe()
            let fds: [Int32] = [pipe.read.rawValue, pipe.write.rawValue]
            let argv = CStringList([selfExecutable, "raw-signals", "--iterations", String(iterations),
                                    "--warmup", String(warmup), "--app", executable])
            let pid: pid_t
            do {
                // stdout and stderr both into the pipe; the JSON is the last line.
                pid = try posixSpawn(path: selfExecutable, argv: argv, envp: nil, output: fds[1])
            } catch {
                _ = close(fds[0]); _ = close(fds[1])
                throw error
            }
            _ = close(fds[1])
            var data = Data()
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                data.append(contentsOf: chunk[0..<n])
            }
            _ = close(fds[0])
            let status = reap(pid)
            let text = String(decoding: data, as: UTF8.self)
            guard status == 0, let last = text.split(separator: "\n").last,
                  let samples = try? JSONDecoder().decode(RawSignalSamples.self, from: Data(last.utf8)) else {
                throw BenchError("raw-signals helper failed (status \(status)):\n\(text)")
            }
            return samples
        }
    }
}
