import AppHostProtocol
import AppHostSystem
import Foundation
import Host

#if canImport(Glibc)
import Glibc
import HostConfig
#endif

/// Benchmark 5: virtual-clock throughput. N ProbeApps take turns in the foreground
/// of an in-process host on the virtual clock; each turn moves virtual time by a
/// fixed step. `foreground(next)` sends the previous app home, where it begins a
/// background task; its expiration handler ends the task at budget − warning and
/// the host suspends it. Every app is a real process answering real callbacks.
///
/// Baselines in the same run: the same turns driven through `Lifecycle` values alone
/// (the host's rules, no processes, replies simulated instantly), which is also where
/// the deadline count comes from (hang checks leave no host event); and the same host
/// run with `foregroundHang` pushed beyond a turn, which prices the active app's hang
/// checks (each a deadline and a read of the app's run-loop stamp page; nothing is sent).
struct VirtualBench {
    let apps: Int
    let hours: Double
    let stepSeconds: Int
    /// Also run the host with hang checks beyond the turn (prices the hang checks).
    let hangCheckVariant: Bool
    let executable = "ProbeApp"

    static let arguments = ["--on", "background", "begin-task:work"]

    var turns: Int { Int((hours * 3600 / Double(stepSeconds)).rounded()) }

    func ids() -> [String] { (0..<apps).map { String(format: "com.bench.virtual.%03d", $0) } }

    func run() async throws -> VirtualReport {
        var report = VirtualReport(apps: apps, hours: hours, stepSeconds: stepSeconds, turns: turns,
                                   profile: BudgetProfile.ios13)
        progress("virtual: Lifecycle model alone, \(turns) turns")
        report.model = runModel(profile: .ios13)
        progress("virtual: host, \(apps) apps, \(turns) turns of \(stepSeconds) s")
        report.host = try await runHost(profile: .ios13, label: "virtual")
        if hangCheckVariant {
            var quiet = BudgetProfile.ios13
            quiet.name = "ios13, foregroundHang 3600 s"
            quiet.foregroundHang = 3600
            progress("virtual: host again, hang checks beyond the turn")
            report.hostWithoutHangChecks = try await runHost(profile: quiet, label: "virtual-nohc")
            report.modelWithoutHangChecks = runModel(profile: quiet)
        }
        return report
    }

    // MARK: - The host

    func runHost(profile: BudgetProfile, label: String) async throws -> VirtualHostRun {
        let host = try InProcessHost(label: label) { config in
            config.clock = .virtual
            config.profile = profile
        }
        let supervisor = host.supervisor
        let ids = ids()
        var run = VirtualHostRun(profile: profile.name)
        var failure: (any Error)?
        let clock = ContinuousClock()
        do {
            // Setup: install, launch in the background (didFinishLaunching, then suspended), at virtual time 0.
            let s0 = clock.now
            for id in ids { try await host.install(id: id, executable: executable) }
            var pids: [String: Int32] = [:]
            for id in ids {
                pids[id] = try await supervisor.launch(try BundleID(validating: id), background: true, arguments: Self.arguments)
                await supervisor.waitUntil(try BundleID(validating: id), is: .suspended)
            }
            run.setupSeconds = seconds(clock.now - s0)

            // Every host event of the turns, tallied as it comes (the stream keeps only the newest 10,000).
            let (_, live, subscription) = await supervisor.subscribe(bundleIdentifier: nil)
            let consumer = Task {
                var tally = EventTally()
                for await e in live { tally.add(e) }
                return tally
            }

            let step = Duration.seconds(stepSeconds)
            var foregroundCall = Samples(), advance = Samples()
            let cpu0 = processCPUSeconds(), apps0 = appsCPUTicks(Array(pids.values))
            let w0 = clock.now
            var previous: String?
            for turn in 0..<turns {
                let app = ids[turn % ids.count]
                let t0 = clock.now
                do {
                    try await supervisor.foreground(try BundleID(validating: app))  // sends `previous` home
                } catch {
                    run.foregroundErrors += 1
                }
                let t1 = clock.now
                // The host first waits (in real time) for the callbacks foreground() sent,
                // then fires every deadline of the step in order, settling after each.
                _ = try await supervisor.advanceClock(by: step)
                let t2 = clock.now
                foregroundCall.add(t1 - t0)
                advance.add(t2 - t1)
                previous = app
            }
            // Close: the last app goes home and completes its cycle.
            let c0 = clock.now
            if let last = previous {
                try await supervisor.background(try BundleID(validating: last))
                _ = try await supervisor.advanceClock(by: step)
            }
            let w1 = clock.now
            run.closingSeconds = seconds(w1 - c0)
            run.wallSeconds = seconds(w1 - w0)
            run.hostProcessCPUSeconds = processCPUSeconds() - cpu0
            run.appsCPUSeconds = Double(appsCPUTicks(Array(pids.values)) - apps0) / Double(sysconf(Int32(_SC_CLK_TCK)))
            run.simulatedSeconds = seconds(await supervisor.hostNow())

            // Everything the run produced, then the checks.
            await supervisor.unsubscribe(subscription)
            let tally = await consumer.value
            run.counts = tally.counts
            run.eventsSeen = tally.events
            run.cycles = tally.cycles
            run.returnsAfterSuspension = tally.returnsAfterSuspension
            run.returnsStuckInStoppedApp = tally.returnsStuckInStoppedApp
            let timeout = seconds(await supervisor.configuration.settleTimeout)
            run.settleTimeoutSeconds = timeout
            let stalled = advance.values.filter { Double($0) / 1e9 >= timeout }
            run.advancesWithSettleTimeout = stalled.count
            run.advanceSecondsWithSettleTimeout = Double(stalled.reduce(0, +)) / 1e9
            run.foregroundSeconds = Double(foregroundCall.values.reduce(0, +)) / 1e9
            run.advanceSeconds = Double(advance.values.reduce(0, +)) / 1e9
            run.foregroundRow = Row("foreground(next): previous app home, SIGCONT, 4 callbacks sent", foregroundCall, slice: true)
            run.advanceRow = Row("advanceClock(by: \(stepSeconds) s): waits, deadlines, settles", advance, slice: true)
            run.cyclesPerAppMin = ids.map { tally.cyclesByApp[$0, default: 0] }.min() ?? 0
            run.cyclesPerAppMax = ids.map { tally.cyclesByApp[$0, default: 0] }.max() ?? 0
            run.homeToSuspendedMin = tally.homeToSuspended.min() ?? .nan
            run.homeToSuspendedMax = tally.homeToSuspended.max() ?? .nan
            let status = try await supervisor.status(nil)
            run.suspendedAtEnd = status.filter { $0.state == .suspended }.count
            run.inStateT = pids.values.filter { (try? ProcStat.read(pid: $0).state) == "T" }.count
            run.samePids = status.filter { $0.pid != nil && pids[$0.bundleIdentifier.rawValue] == $0.pid }.count
            let reports = try await supervisor.reports(nil)
            run.reports = reports.count
            for r in reports { run.reportReasons[r.reason, default: 0] += 1 }
        } catch {
            failure = error
        }
        await host.stop()
        if let failure { throw failure }
        return run
    }

    // MARK: - The rules alone

    func runModel(profile: BudgetProfile) -> VirtualModelRun {
        let clock = ContinuousClock()
        let ids = ids()
        let t0 = clock.now
        var model = LifecycleModel(ids: ids, profile: profile)
        for i in ids.indices { model.feed(i, .launch(LaunchOptions(reason: .background, arguments: Self.arguments), placement: .background)) }
        model.counts = VirtualCounts()  // count the turns only, as the host run does
        model.fired = [:]
        let t1 = clock.now
        let step = Duration.seconds(stepSeconds)
        var previous: Int?
        for turn in 0..<turns {
            let i = turn % ids.count
            model.foreground(i)
            model.advance(by: step)
            previous = i
        }
        if let last = previous {
            model.feed(last, .home)
            model.advance(by: step)
        }
        let t2 = clock.now
        var run = VirtualModelRun(profile: profile.name)
        run.setupSeconds = seconds(t1 - t0)
        run.wallSeconds = seconds(t2 - t1)
        run.simulatedSeconds = seconds(model.now)
        run.counts = model.counts
        run.deadlinesFired = model.fired
        run.suspendedAtEnd = model.machines.filter { $0.state == .suspended }.count
        return run
    }
}

func seconds(_ d: Duration) -> Double {
    Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}

/// user + system CPU of this process (the bench and the in-process host), in seconds.
func processCPUSeconds() -> Double {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return Double(u.ru_utime.tv_sec) + Double(u.ru_utime.tv_usec) / 1e6 + Double(u.ru_stime.tv_sec) + Double(u.ru_stime.tv_usec) / 1e6
}

/// utime + stime of the given processes, in clock ticks.
func appsCPUTicks(_ pids: [Int32]) -> UInt64 {
    pids.reduce(0) { sum, pid in
        guard let s = try? ProcStat.read(pid: pid) else { return sum }
        return sum + s.userTicks + s.systemTicks
    }
}

/// Counts of what a run did, by kind.
struct VirtualCounts: Codable, Sendable, Equatable {
    /// Callbacks by delegate method ("expirationHandler" for all tasks); the host
    /// counts returns (events), the model counts sends (every one is answered).
    var callbacks: [String: Int] = [:]
    var transitions = 0
    var transitionsTo: [String: Int] = [:]
    /// SIGSTOP / SIGCONT / SIGKILL sent.
    var signals: [String: Int] = [:]
    var tasksBegun = 0
    var tasksEnded = 0
    var reports = 0
    var warnings = 0
    var exits = 0

    mutating func callback(_ name: String) {
        let key = name.hasPrefix("expirationHandler") ? "expirationHandler" : name
        callbacks[key, default: 0] += 1
    }

    var allCallbacks: Int { callbacks.values.reduce(0, +) }
}

/// Tallies host events; follows each app's cycle (home → task ended → suspended).
struct EventTally {
    var counts = VirtualCounts()
    var events = 0
    var cycles = 0
    var cyclesByApp: [String: Int] = [:]
    /// Virtual seconds from didEnterBackground returned to suspended, per cycle.
    var homeToSuspended: [Double] = []
    /// Expiration handlers whose return the host read after it had already stopped the
    /// app (it suspends on endBackgroundTask, which the handler sends before returning).
    var returnsAfterSuspension = 0
    /// Of those, returns read only at a later virtual time: the app was stopped before it
    /// could send the return, which it did only when resumed for its next turn.
    var returnsStuckInStoppedApp = 0
    private var suspendedAt: [String: Date] = [:]
    private var endedAt: [String: Date] = [:]
    /// Apps that went home (didEnterBackground returned) and had not been suspended since.
    private var homeAt: [String: Date] = [:]
    private var ended: Set<String> = []
    private var state: [String: AppState] = [:]

    mutating func add(_ e: HostEvent) {
        events += 1
        let app = e.bundleIdentifier?.rawValue ?? ""
        switch e.kind {
        case .transition:
            counts.transitions += 1
            counts.transitionsTo[e.to?.rawValue ?? "?", default: 0] += 1
            if let to = e.to { state[app] = to }
            if e.to == .suspended { suspendedAt[app] = e.time }
            if e.to == .suspended, ended.remove(app) != nil {
                cycles += 1
                cyclesByApp[app, default: 0] += 1
                if let home = homeAt.removeValue(forKey: app) {
                    homeToSuspended.append(e.time.timeIntervalSince(home))
                }
            }
        case .callback:
            guard let name = e.callback else { break }
            counts.callback(name)
            if name == "didEnterBackground" { homeAt[app] = e.time }
            if name.hasPrefix("expirationHandler") {
                if state[app] == .suspended || (suspendedAt[app].map { $0 >= (endedAt[app] ?? .distantPast) } ?? false) {
                    returnsAfterSuspension += 1
                }
                // The handler sent endBackgroundTask just before returning: a return read at a
                // later virtual time was held up in the stopped app until it was resumed.
                if let ended = endedAt[app], e.time > ended { returnsStuckInStoppedApp += 1 }
            }
        case .signal:
            if let s = e.signal, e.confirmed == nil { counts.signals[s.rawValue, default: 0] += 1 }
        case .backgroundTask:
            if e.began == true { counts.tasksBegun += 1 }
            if e.began == false {
                counts.tasksEnded += 1
                endedAt[app] = e.time
                if homeAt[app] != nil { ended.insert(app) }
            }
        case .report: counts.reports += 1
        case .warning: counts.warnings += 1
        case .exited: counts.exits += 1
        default: break
        }
    }
}

/// The host's deadline table and settle rules over `Lifecycle` values, with apps that
/// answer at once (as ProbeApp `--on background begin-task:work` does, at the same
/// virtual time): no processes, no IPC, no store, no event log.
struct LifecycleModel {
    struct Key: Hashable {
        var app: Int
        var timer: Lifecycle.Timer
    }
    let ids: [String]
    var machines: [Lifecycle]
    var deadlines: [Key: Duration] = [:]
    var now: Duration = .zero
    var counts = VirtualCounts()
    var fired: [String: Int] = [:]
    private var lastTask: [Int]
    private var openTasks: [Set<Int>]

    init(ids: [String], profile: BudgetProfile) {
        self.ids = ids
        machines = ids.map { _ in Lifecycle(profile: profile, grace: .seconds(5)) }
        lastTask = ids.map { _ in 0 }
        openTasks = ids.map { _ in [] }
    }

    mutating func foreground(_ i: Int) {
        for (j, m) in machines.enumerated() where j != i && m.isRunning && m.placement == .foreground {
            feed(j, .home)
        }
        feed(i, .foreground)
    }

    mutating func advance(by d: Duration) {
        let target = now + d
        while let (key, due) = earliest(), due <= target {
            now = Swift.max(now, due)
            deadlines.removeValue(forKey: key)
            fired[key.timer.rawValue, default: 0] += 1
            // The host reads the app's stamp page at a hang check: a ProbeApp between
            // callbacks is waiting for work.
            feed(key.app, key.timer == .hangCheck ? .hangCheck(.idle) : .timerFired(key.timer))
        }
        now = target
    }

    private func earliest() -> (Key, Duration)? {
        var best: (Key, Duration)?
        for (k, v) in deadlines where best == nil || v < best!.1 || (v == best!.1 && ids[k.app] < ids[best!.0.app]) {
            best = (k, v)
        }
        return best
    }

    /// Feeds one event and everything the app and the kernel answer, in order.
    mutating func feed(_ i: Int, _ event: Lifecycle.Event) {
        var queue: [Lifecycle.Event] = [event]
        var head = 0
        while head < queue.count {
            let e = queue[head]
            head += 1
            for effect in machines[i].handle(e, at: now) {
                switch effect {
                case .spawn:
                    queue.append(.spawned(pid: Int32(100_000 + i)))
                    queue.append(.handshake)
                case .send(let callback, _):
                    counts.callback(callback.name)
                    switch callback {
                    case .didEnterBackground:
                        lastTask[i] += 1
                        openTasks[i].insert(lastTask[i])
                        counts.tasksBegun += 1
                        queue.append(.taskBegan(id: BackgroundTaskID(lastTask[i]), name: "work"))
                    case .backgroundTaskExpiration(let id):
                        if openTasks[i].remove(id.rawValue) != nil {
                            counts.tasksEnded += 1
                            queue.append(.taskEnded(id: id))
                        }
                    default: break
                    }
                    queue.append(.callbackReturned(callback))
                case .signal(let signal, _):
                    counts.signals[signal.rawValue, default: 0] += 1
                    if signal == .stop { queue.append(.stopConfirmed) }
                    if signal == .cont { queue.append(.continueConfirmed) }
                case .transition(_, let to, _):
                    counts.transitions += 1
                    counts.transitionsTo[to.rawValue, default: 0] += 1
                case .startTimer(let timer, let after):
                    deadlines[Key(app: i, timer: timer)] = now + after
                case .cancelTimer(let timer):
                    deadlines.removeValue(forKey: Key(app: i, timer: timer))
                case .report:
                    counts.reports += 1
                case .log:
                    counts.warnings += 1
                }
            }
        }
    }
}

/// One host run on the virtual clock.
struct VirtualHostRun: Codable, Sendable {
    var profile: String
    var setupSeconds = 0.0
    var wallSeconds = 0.0
    var closingSeconds = 0.0
    var simulatedSeconds = 0.0
    var hostProcessCPUSeconds = 0.0
    var appsCPUSeconds = 0.0
    var foregroundRow = Row("", Samples(), slice: true)
    var advanceRow = Row("", Samples(), slice: true)
    var foregroundSeconds = 0.0
    var advanceSeconds = 0.0
    var counts = VirtualCounts()
    var eventsSeen = 0
    var cycles = 0
    var cyclesPerAppMin = 0
    var cyclesPerAppMax = 0
    var homeToSuspendedMin = Double.nan
    var homeToSuspendedMax = Double.nan
    var suspendedAtEnd = 0
    var inStateT = 0
    var samePids = 0
    var reports = 0
    var foregroundErrors = 0
    var returnsAfterSuspension = 0
    var returnsStuckInStoppedApp = 0
    var reportReasons: [String: Int] = [:]
    var settleTimeoutSeconds = 0.0
    var advancesWithSettleTimeout = 0
    var advanceSecondsWithSettleTimeout = 0.0
}

/// The same turns over `Lifecycle` values alone.
struct VirtualModelRun: Codable, Sendable {
    var profile: String
    var setupSeconds = 0.0
    var wallSeconds = 0.0
    var simulatedSeconds = 0.0
    var counts = VirtualCounts()
    var deadlinesFired: [String: Int] = [:]
    var suspendedAtEnd = 0
    var allDeadlines: Int { deadlinesFired.values.reduce(0, +) }
}

/// What `virtual` measured.
struct VirtualReport: Codable, Sendable {
    var apps: Int
    var hours: Double
    var stepSeconds: Int
    var turns: Int
    var profile: BudgetProfile
    var host = VirtualHostRun(profile: "")
    var model = VirtualModelRun(profile: "")
    var hostWithoutHangChecks: VirtualHostRun?
    var modelWithoutHangChecks: VirtualModelRun?

    var targetSeconds: Double { 5 }
    var honest: Bool {
        host.suspendedAtEnd == apps && host.inStateT == apps && host.reports == 0 && host.counts.signals["SIGKILL", default: 0] == 0
            && host.cycles == turns && host.foregroundErrors == 0
    }
    var targetMet: Bool { honest && host.wallSeconds <= targetSeconds }
}

func printVirtual(_ r: VirtualReport) {
    let h = r.host, m = r.model
    func fmtCounts(_ d: [String: Int]) -> String {
        d.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }
    func perTurn(_ n: Int) -> String { String(format: "%.2f", Double(n) / Double(r.turns)) }
    let clean = r.honest
    print("")
    print("Virtual clock (\(r.apps) × ProbeApp \(VirtualBench.arguments.joined(separator: " ")), profile \(r.profile.name): "
          + "backgroundTask \(DurationText.format(r.profile.backgroundTask)), expirationWarning \(DurationText.format(r.profile.expirationWarning)), "
          + "hang check every \(DurationText.format(r.profile.foregroundHang)) while active; \(r.turns) turns of \(r.stepSeconds) s + 1 closing step; \(buildConfiguration) build)")
    print(String(format: "  host: %.0f simulated s (%.2f h) in %.3f s wall: %.0f× real time   [target ≤ %.0f s: %@]",
                 h.simulatedSeconds, h.simulatedSeconds / 3600, h.wallSeconds, h.simulatedSeconds / h.wallSeconds, r.targetSeconds,
                 r.targetMet ? "met" : (clean ? String(format: "NOT met, %.2f× the target", h.wallSeconds / r.targetSeconds) : "NOT met: the run is not clean")))
    print(String(format: "  baseline, the same turns over Lifecycle values alone (no processes, no IPC, store or events): %.3f s, %.0f× real time; host / model %.0f×",
                 m.wallSeconds, m.simulatedSeconds / m.wallSeconds, h.wallSeconds / m.wallSeconds))
    print(String(format: "  of the host's wall time: %d advance(s) waited out the %.0f s settle timeout: %.2f s; the rest %.3f s (%.0f× real time, %.2f× the target)",
                 h.advancesWithSettleTimeout, h.settleTimeoutSeconds, h.advanceSecondsWithSettleTimeout,
                 h.wallSeconds - h.advanceSecondsWithSettleTimeout, h.simulatedSeconds / (h.wallSeconds - h.advanceSecondsWithSettleTimeout),
                 (h.wallSeconds - h.advanceSecondsWithSettleTimeout) / r.targetSeconds))
    print("  expiration-handler returns read after the host had stopped the app: \(h.returnsAfterSuspension); "
          + "caught in the stopped app until it was next resumed: \(h.returnsStuckInStoppedApp) (each costs its step one settle timeout)")
    print(String(format: "  setup, not in the wall time: install, launch in the background, suspended: %.2f s; the closing step: %.1f ms",
                 h.setupSeconds, h.closingSeconds * 1000))
    print("  cycles completed (home → task begun → expiration handler ended it → suspended): \(h.cycles) of \(r.turns); per app \(h.cyclesPerAppMin)–\(h.cyclesPerAppMax)"
          + String(format: "; home → suspended %.3f–%.3f virtual s (budget − warning: %.0f s)", h.homeToSuspendedMin, h.homeToSuspendedMax,
                   r.profile.backgroundTask - r.profile.expirationWarning))
    print("  at the end: \(h.suspendedAtEnd)/\(r.apps) suspended (status), \(h.inStateT)/\(r.apps) in state T, \(h.samePids)/\(r.apps) still their first process, "
          + "\(h.reports) termination reports, \(h.counts.signals["SIGKILL", default: 0]) SIGKILL, \(h.foregroundErrors) foreground errors: \(clean ? "clean" : "NOT CLEAN")")
    for (reason, n) in h.reportReasons.sorted(by: { $0.value > $1.value }) { print("    report ×\(n): \(reason)") }
    print("  host events during the turns: \(h.eventsSeen) (\(perTurn(h.eventsSeen)) a turn); callbacks returned \(h.counts.allCallbacks) (\(fmtCounts(h.counts.callbacks)))")
    print("    transitions \(h.counts.transitions) (\(fmtCounts(h.counts.transitionsTo))); signals \(fmtCounts(h.counts.signals)); "
          + "tasks begun \(h.counts.tasksBegun), ended \(h.counts.tasksEnded); warnings \(h.counts.warnings)")
    print("  model, same turns: deadlines fired \(m.allDeadlines) (\(fmtCounts(m.deadlinesFired))); callbacks \(m.counts.allCallbacks) (\(fmtCounts(m.counts.callbacks)))")
    print("    transitions \(m.counts.transitions); signals \(fmtCounts(m.counts.signals)); tasks begun \(m.counts.tasksBegun), ended \(m.counts.tasksEnded)")
    let match = h.counts == m.counts
    print("  host counts = model counts for all the host's events show (callbacks, transitions, signals, tasks): \(match ? "yes" : "NO")")
    let checks = m.deadlinesFired[Lifecycle.Timer.hangCheck.rawValue, default: 0]
    if match {
        print("    so the host fired the model's \(m.allDeadlines) deadlines, \(checks) of them hang checks "
              + "(a hang check of a waiting run loop leaves no host event and sends nothing; counted in the model)")
    }
    print("  per turn: \(perTurn(m.counts.allCallbacks)) callback round trips (4 from foreground(), 1 expiration handler; no heartbeat), "
          + "\(perTurn(m.allDeadlines)) deadlines fired (\(perTurn(checks)) hang checks), 1 SIGCONT, 1 SIGSTOP, \(perTurn(h.counts.transitions)) transitions, \(perTurn(h.eventsSeen)) events")
    print(String(format: "  CPU during the turns: this process (host + bench) %.2f s, the %d apps %.2f s (clock ticks); %d CPUs",
                 h.hostProcessCPUSeconds, r.apps, h.appsCPUSeconds, Machine.current().cpus))
    printTable(title: "  Where the wall time goes, per turn (caller side)", rows: [h.foregroundRow, h.advanceRow],
               notes: [String(format: "sums over %d turns: foreground() %.3f s, advanceClock %.3f s (of which settle timeouts %.2f s)",
                              r.turns, h.foregroundSeconds, h.advanceSeconds, h.advanceSecondsWithSettleTimeout)])
    if let q = r.hostWithoutHangChecks, let qm = r.modelWithoutHangChecks {
        let qClean = q.suspendedAtEnd == r.apps && q.reports == 0 && q.cycles == r.turns
        print("")
        print(String(format: "  same bench, foregroundHang 3600 s (no hang check falls inside a turn; model hang checks %d): %.3f s wall, %.0f× real time; clean: %@",
                     qm.deadlinesFired[Lifecycle.Timer.hangCheck.rawValue, default: 0], q.wallSeconds, q.simulatedSeconds / q.wallSeconds, qClean ? "yes" : "NO"))
        print(String(format: "    %d advance(s) waited out the settle timeout (%.2f s; %d returns caught in a stopped app); the rest %.3f s",
                     q.advancesWithSettleTimeout, q.advanceSecondsWithSettleTimeout, q.returnsStuckInStoppedApp,
                     q.wallSeconds - q.advanceSecondsWithSettleTimeout))
        let diff = h.advanceRow.medianNanoseconds - q.advanceRow.medianNanoseconds
        let a = Double(checks - qm.deadlinesFired[Lifecycle.Timer.hangCheck.rawValue, default: 0]) / Double(r.turns)
        print(String(format: "    advanceClock per turn: median %@ without hang checks, %@ with: %.1f hang checks a turn cost %@, %@ each (≈ %.2f s over the run)",
                     formatDuration(q.advanceRow.medianNanoseconds), formatDuration(h.advanceRow.medianNanoseconds), a,
                     formatDuration(diff), formatDuration(diff / a), diff * Double(r.turns) / 1e9))
    }
}

extension Int64 {
    var double: Double { Double(self) }
}
