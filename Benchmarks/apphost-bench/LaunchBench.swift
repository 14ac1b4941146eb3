import AppHostProtocol
import AppHostSystem
import Foundation
import Host
import Plugins
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A titled group of rows, as printed and as written with `--json`.
struct Section: Codable, Sendable {
    var title: String
    var rows: [Row]
    var notes: [String] = []
}

/// Benchmark 1: launch to `didFinishLaunching` returned, against a bare spawn of the same binary.
struct LaunchBench {
    let iterations: Int
    let warmup: Int
    let executable: String
    /// Per-app uids (a root host's default); false runs the app as the host's uid.
    var identities = true
    /// Namespaces of its own (the default); false launches it in the host's.
    var namespaces = true

    func run() async throws -> [Section] {
        let path = productsDirectory + "/" + executable
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw BenchError("\(path) is missing: build the package first (swift build --scratch-path .build-bench)")
        }
        let clock = ContinuousClock()
        let home = try TempDir("bare")
        defer { home.remove() }
        let bareID = "com.bench.bare"
        let argv = CStringList([path])
        let envp = CStringList(appEnvironment(home: home.path, bundleIdentifier: bareID))
        var environment: [String: String] = [:]
        for kv in appEnvironment(home: home.path, bundleIdentifier: bareID) {
            let parts = kv.split(separator: "=", maxSplits: 1)
            environment[String(parts[0])] = String(parts[1])
        }

        let host = try InProcessHost(label: "launch") {
            if !identities { $0.identities = nil }
            if !namespaces { $0.namespaces = false }
        }
        let id = "com.bench.launch"
        // Row (c'): the confinement an installed app gets, around a state directory of its own.
        let stateForRules = try TempDir("rules")
        defer { stateForRules.remove() }
        let confinedApp = InstalledApp(
            bundleIdentifier: try BundleID(validating: bareID), name: executable, bundlePath: home.path, executablePath: path, backgroundModes: [],
            installedAt: Date(), manifest: Manifest(bundleIdentifier: bareID, executable: executable, name: executable,
                                                  sourcePath: home.path + "/Info.plist"))
        var failure: (any Error)?
        var bare = Samples(), bareLaunched = Samples(), bareTerminate = Samples()
        var reaperNone = Samples(), reaperSeccomp = Samples(), reaperModeRules = Samples()
        var reaperLaunched = Samples(), reaperTerminate = Samples()
        var hostLaunch = Samples(), hostTerminate = Samples()
        var launchCalls: [Date] = []
        var launchReturns: [Date] = []
        var events: [HostEvent] = []
        do {
            try await host.install(id: id, executable: executable)
            let recorder = await EventRecorder.start(host.supervisor, app: id)
            for i in 0..<(warmup + iterations) {
                let measured = i >= warmup

                // (a) bare posix_spawn + exec → hello.
                do {
                    let t0 = clock.now
                    let app = try BareApp.spawnToHello(path: path, argv: argv, envp: envp)
                    let t1 = clock.now
                    app.kill()
                    if measured { bare.add(t1 - t0) }
                }

                // (b) bare posix_spawn → hello → welcome → didFinishLaunching returned,
                //     the protocol work `launch` waits for, with no host; then willTerminate → reaped.
                do {
                    let t0 = clock.now
                    var app = try BareApp.spawnToHello(path: path, argv: argv, envp: envp)
                    do {
                        try app.launchActive(bareID)
                        let t1 = clock.now
                        try app.awaitReturn(app.seq) // didBecomeActive returned: the app is idle, as after host launch
                        let t2 = clock.now
                        try app.send(.willTerminate, state: .active)
                        reap(app.pid)
                        let t3 = clock.now
                        _ = close(app.socket)
                        if measured {
                            bareLaunched.add(t1 - t0)
                            bareTerminate.add(t3 - t2)
                        }
                    } catch {
                        app.kill()
                        throw error
                    }
                }

                // (c, d) the host's spawn mechanism alone: ProcessReaper (vfork-style clone, pidfd, close_range,
                //        rlimits, optional seccomp) → hello. No container, no log file, no IPC handshake.
                for policy in [SeccompPolicy.none, .baseline] {
                    let r = try await reaperRun(path: path, environment: environment, home: home.path,
                                                policy: policy, withProtocol: false, id: bareID)
                    if measured {
                        if policy.isEnabled { reaperSeccomp.add(r.hello) } else { reaperNone.add(r.hello) }
                    }
                }
                // (c') plus the confinement of an app that declares no background mode: seccomp
                //      (AF_BLUETOOTH and AF_UNIX argument filters, listen) and the Landlock
                //      allow-list (the reaper keeps it and checks its paths at each spawn).
                do {
                    let policy = AppConfinement.seccomp(.baseline, deniedSocketFamilies: ModeRegistry.denials(for: []).socketFamilies)
                    let landlock = Landlock.abiVersion == nil ? nil : AppConfinement.landlockPolicy(
                        app: confinedApp, container: home.path, groupContainers: [],
                        devices: AppConfinement.devices(for: [], modeRules: true),
                        stateDirectory: stateForRules.path, abiLimit: nil)
                    let r = try await reaperRun(path: path, environment: environment, home: home.path,
                                                policy: policy, landlock: landlock, withProtocol: false, id: bareID)
                    if measured { reaperModeRules.add(r.hello) }
                }

                // (f) the host's spawn mechanism and the protocol, without the host: ProcessReaper
                //     (seccomp .baseline) → hello → welcome → didFinishLaunching returned; then
                //     willTerminate → exited (the reaper reaps it).
                do {
                    let r = try await reaperRun(path: path, environment: environment, home: home.path,
                                                policy: .baseline, withProtocol: true, id: bareID)
                    if measured, let launched = r.launched, let terminate = r.terminate {
                        reaperLaunched.add(launched)
                        reaperTerminate.add(terminate)
                    }
                }

                // (e) the host: launch (returns after didFinishLaunching returned), then terminate.
                do {
                    let t0 = clock.now
                    _ = try await host.supervisor.launch(try BundleID(validating: id), background: false, arguments: [])
                    let t1 = clock.now
                    // In the host's clock, as its events are stamped (outside the timed interval).
                    let (called, returned) = (await host.supervisor.hostDate(at: t0), await host.supervisor.hostDate(at: t1))
                    try await host.supervisor.terminate(try BundleID(validating: id))
                    let t2 = clock.now
                    if measured {
                        hostLaunch.add(t1 - t0)
                        hostTerminate.add(t2 - t1)
                    }
                    launchCalls.append(called)
                    launchReturns.append(returned)
                }
            }
            events = await recorder.finish(host.supervisor)
        } catch {
            failure = error
        }
        await host.stop()
        if let failure { throw failure }

        // Store cost: one state transition is one GRDB write transaction, made on the actor.
        let storeSamples = try measureStoreWrites(count: max(iterations, 50))

        // Where the host's time goes, from its own event timestamps (Date, full precision in memory).
        var accepted = Samples(), toSpawned = Samples(), toReturned = Samples(), toCaller = Samples()
        var k = 0
        var idx = 0
        while k < launchCalls.count, idx < events.count {
            guard let start = events[idx...].firstIndex(where: { $0.isTransition(to: .inactive) && $0.from == .notRunning }),
                  let spawned = events[start...].firstIndex(where: { $0.kind == .spawned }),
                  let ret = events[spawned...].firstIndex(where: { $0.isReturn(of: "didFinishLaunching") }),
                  let end = events[ret...].firstIndex(where: { $0.isTransition(to: .notRunning) })
            else { break }
            if k >= warmup {
                accepted.add(nanoseconds(from: launchCalls[k], to: events[start].time))
                toSpawned.add(nanoseconds(from: events[start].time, to: events[spawned].time))
                toReturned.add(nanoseconds(from: events[spawned].time, to: events[ret].time))
                toCaller.add(nanoseconds(from: events[ret].time, to: launchReturns[k]))
            }
            k += 1
            idx = end + 1
        }

        let base = Row("bare posix_spawn+exec → hello read", bare)
        let hostRow = Row("host launch() → didFinishLaunching returned", hostLaunch, against: base, target: 1.25)
        let protoBase = Row("bare spawn → hello → didFinishLaunching returned", bareLaunched, against: base,
                            note: "same frames as the host (welcome, didFinishLaunching), no host")
        let reaperProto = Row("ProcessReaper.spawn → … → didFinishLaunching returned", reaperLaunched, against: protoBase,
                              note: "the host's spawn (seccomp .baseline) + the same frames, no host")
        let hostVsReaper = Row("host launch() (vs the row above)", hostLaunch, against: reaperProto,
                               note: "what the host machinery adds: actor, NIO, store, event log, container, log file")
        func ms(_ ns: Double) -> String { String(format: "%+.2f ms", ns / 1e6) }
        let decomposition = "differences of medians: protocol \(ms(bareLaunched.median - bare.median)), "
            + "spawn mechanism \(ms(reaperLaunched.median - bareLaunched.median)), "
            + "host machinery \(ms(hostLaunch.median - reaperLaunched.median)); total \(ms(hostLaunch.median - bare.median))"
        let main = Section(
            title: "Launch (\(executable), \(iterations) iterations after \(warmup) warm-up, interleaved, \(buildConfiguration) build)",
            rows: [
                base,
                protoBase,
                Row("ProcessReaper.spawn, seccomp .none → hello", reaperNone, against: base,
                    note: "the host's spawn mechanism alone (CLONE_VM|CLONE_VFORK clone + pidfd)"),
                Row("ProcessReaper.spawn, seccomp .baseline → hello", reaperSeccomp, against: base,
                    note: "as above plus the host's default seccomp filter"),
                Row("ProcessReaper.spawn, + app confinement → hello", reaperModeRules, against: base,
                    note: Landlock.abiVersion == nil ? "socket-family filters only (no Landlock on this kernel)"
                        : "as above plus an app's confinement: AF_BLUETOOTH/AF_UNIX filters, no listen, Landlock allow-list (kept per policy; its own paths checked by a stat each spawn, system paths at most once a second; the host's default)"),
                reaperProto,
                hostRow,
                hostVsReaper,
            ],
            notes: [
                decomposition,
                "bare = glibc posix_spawn (CLONE_VM|CLONE_VFORK) with dup2 file actions, socketpair end as fd 3, stdout/stderr /dev/null, no sandbox;",
                "it is timed until the app's first frame (hello) is read, then SIGKILLed and reaped (untimed).",
                "host = Supervisor in this process (one NIO loop thread, GRDB store and events.jsonl in /tmp), the same \(executable) binary.",
            ])

        let hostMedian = hostLaunch.median
        func share(_ s: Samples) -> String { String(format: "%.0f %% of the host median", 100 * s.median / hostMedian) }
        let breakdown = Section(
            title: "Launch breakdown (host event timestamps; each row is a slice of the host launch)",
            rows: [
                Row("launch() called → notRunning→inactive recorded", accepted, note: share(accepted), slice: true),
                Row("→ spawned (container dirs, socketpair, log, fork+exec)", toSpawned, note: share(toSpawned), slice: true),
                Row("→ didFinishLaunching returned (attach, hello, welcome, callback)", toReturned, note: share(toReturned), slice: true),
                Row("→ launch() returns to the caller", toCaller,
                    note: share(toCaller) + " (transition to active recorded, didBecomeActive sent, continuation resumed)", slice: true),
                Row("one Store.recordTransitions + flush (GRDB write, separate db)", storeSamples,
                    note: "a launch records 2 transitions, a terminate 1, on GRDB's writer queue; launch() does not wait for them", slice: true),
            ])

        let termBase = Row("bare: willTerminate sent → exited and reaped", bareTerminate)
        let term = Section(
            title: "Terminate (context: the teardown between launches)",
            rows: [termBase,
                   Row("ProcessReaper child: willTerminate → .exited", reaperTerminate, against: termBase),
                   Row("host terminate() → app reaped, notRunning", hostTerminate, against: termBase)])
        return [main, breakdown, term]
    }

    /// One ProcessReaper spawn of the app, timed to its hello; with `withProtocol`, also to
    /// didFinishLaunching returned (from the spawn) and willTerminate → exited. The child is
    /// always killed or terminated and reaped by the reaper, also when a step fails.
    private func reaperRun(path: String, environment: [String: String], home: String, policy: SeccompPolicy,
                           landlock: LandlockPolicy? = nil, withProtocol: Bool, id: String) async throws -> (hello: Duration, launched: Duration?, terminate: Duration?) {
        let clock = ContinuousClock()
        let (h, a) = try benchSocketPair()
        defer { _ = close(h) }
        let settings = SpawnSettings(
            executablePath: path, arguments: [path], environment: environment,
            workingDirectory: home, ipcDescriptor: FileDescriptor(rawValue: a), seccomp: policy, landlock: landlock)
        let t0 = clock.now
        let child: ChildProcess
        let events: AsyncStream<ChildEvent>
        do {
            (child, events) = try await ProcessReaper.shared.spawn(settings)
        } catch {
            _ = close(a)
            throw error
        }
        _ = close(a)
        func exited() async {
            for await e in events { if case .exited = e { return } }
        }
        do {
            var reader = FrameReader(fd: h)
            guard case .hello? = try reader.next(AppMessage.self) else { throw BenchError("\(path) did not say hello") }
            let t1 = clock.now
            guard withProtocol else {
                try? child.signal(SIGKILL)
                await exited()
                return (t1 - t0, nil, nil)
            }
            var app = BareApp(pid: child.pid, socket: h, reader: reader)
            try app.launchActive(id)
            let t2 = clock.now
            try app.awaitReturn(app.seq)
            let t3 = clock.now
            try app.send(.willTerminate, state: .active)
            await exited()
            return (t1 - t0, t2 - t0, clock.now - t3)
        } catch {
            try? child.signal(SIGKILL)
            await exited()
            throw error
        }
    }

    /// Times `count` committed transition writes to a fresh store (the supervisor's
    /// path, which runs on GRDB's writer queue, off the actor; flushed here to time the commit).
    private func measureStoreWrites(count: Int) throws -> Samples {
        let dir = try TempDir("store")
        defer { dir.remove() }
        let store = try Store(path: dir.path + "/apphost.sqlite")
        let clock = ContinuousClock()
        var s = Samples()
        for i in 0..<(count + warmup) {
            let t0 = clock.now
            store.recordTransitions([Store.TransitionRow(bundleIdentifier: try BundleID(validating: "com.bench.store"), pid: 1, from: .active,
                                                         to: .inactive, cause: "bench", time: Date())]) { _ in }
            try store.flush()
            let t1 = clock.now
            if i >= warmup { s.add(t1 - t0) }
        }
        return s
    }
}
