import ArgumentParser
import Host
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `apphost-bench` (see BENCHMARKS.md): measured figures, each with a baseline from the same run and the ratio.
@main
struct AppHostBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apphost-bench",
        abstract: "Benchmarks of AppHost, each against a baseline measured in the same run.",
        discussion: """
            launch: host launch vs a bare posix_spawn of the same binary. \
            suspend: home button → state T and foreground → active, vs raw SIGSTOP/SIGCONT + waitid. \
            idle: an `apphost daemon` with N suspended apps vs the same daemon with none. \
            deadlines: how late the host acts after real-clock deadlines vs plain sleeps. \
            virtual: N apps cycling through 24 simulated hours on the virtual clock vs the rules alone. \
            all: all five in one run (the default). push, fetch-week and transfers (10,000 small \
            background downloads vs AsyncHTTPClient and curl) run on their own, as does snapshot \
            (render + redact + PNG encode of a full-screen app-switcher snapshot), and density \
            (1,000 apps launched and suspended: launch, requests and state changes as the count grows), \
            and installed (10,000 apps installed: an install and status as the count grows). \
            Build with -c release for representative figures.
            """,
        subcommands: [All.self, LaunchCommand.self, SuspendCommand.self, IdleCommand.self, DeadlinesCommand.self,
                      VirtualCommand.self, RawSignalsCommand.self, PushCommand.self, FetchWeekCommand.self,
                      TransfersCommand.self, TransferServerCommand.self, SnapshotCommand.self, ScenariosCommand.self,
                      DensityCommand.self, InstalledCommand.self],
        defaultSubcommand: All.self)
}

struct CommonOptions: ParsableArguments {
    @Option(help: "Measured iterations of launch and suspend/resume.")
    var iterations = 50

    @Option(help: "Iterations run first and discarded.")
    var warmup = 3

    @Option(help: "Sample app binary in the products folder.")
    var app = "PlainApp"

    @Flag(help: "Print JSON instead of tables.")
    var json = false

    @Flag(help: "Run Swift Concurrency on NIO's event loops (HostConcurrency.runOnEventLoops): launch and suspend in this process, idle in the daemon (`apphost daemon --event-loop-executor`).")
    var nioExecutor = false

    /// Applies `--nio-executor`; call first in `run()`.
    func applyExecutor() {
        if nioExecutor, !HostConcurrency.runOnEventLoops() {
            progress("--nio-executor: could not install NIO's event loops as the global executor")
        }
    }

    func validate() throws {
        guard iterations > 0 else { throw ValidationError("--iterations must be positive") }
        guard warmup >= 0 else { throw ValidationError("--warmup must not be negative") }
    }
}

struct IdleOptions: ParsableArguments {
    @Option(help: "Apps launched and suspended for the idle benchmark.")
    var apps = 200

    @Option(help: "Seconds of each idle window (with no app, then with all apps suspended).")
    var idleSeconds = 10.0

    @Flag(inversion: .prefixedNo, help: "Each app is a ProbeApp showing a window of its own (window:App N), so every snapshot is drawn apart, as real apps' are. --no-distinct-windows: the --app executable with no window (every app shares one picture).")
    var distinctWindows = true

    @Option(help: "Fail (exit status 1) when the daemon's anonymous memory (RssAnon) with the apps suspended exceeds that with no app by more than this many KiB per app. For CI.")
    var maxAnonKibPerApp: Double?

    func validate() throws {
        guard apps > 0 else { throw ValidationError("--apps must be positive") }
        guard idleSeconds >= 2 else { throw ValidationError("--idle-seconds must be at least 2") }
        guard apps >= 2 || maxAnonKibPerApp == nil else { throw ValidationError("--max-anon-kib-per-app needs at least 2 apps") }
        if let m = maxAnonKibPerApp, !(m.isFinite && m > 0) { throw ValidationError("--max-anon-kib-per-app must be a positive number") }
    }
}

struct DeadlineOptions: ParsableArguments {
    @Option(help: "Deadlines measured for the host and for each baseline (deadlines).")
    var deadlines = 1000

    @Option(help: "Seconds between deadlines: the host's foregroundHang (its hang check of the waiting active app re-arms every interval) and each baseline sleep (whole milliseconds).")
    var deadlineInterval = 0.005

    @Option(help: "Host and baselines alternate in this many chunks (deadlines).")
    var deadlineChunks = 4

    func validate() throws {
        guard deadlines > 0 else { throw ValidationError("--deadlines must be positive") }
        guard deadlineInterval >= 0.001, (deadlineInterval * 1000).rounded() == deadlineInterval * 1000 else {
            throw ValidationError("--deadline-interval must be a whole number of milliseconds, at least 0.001 (the host rounds budgets to ms)")
        }
        guard deadlineChunks > 0, deadlineChunks <= deadlines else { throw ValidationError("--deadline-chunks must be 1...deadlines") }
    }
}

struct VirtualOptions: ParsableArguments {
    @Option(help: "Apps taking turns in the foreground (virtual).")
    var virtualApps = 100

    @Option(help: "Simulated hours (virtual).")
    var virtualHours = 24.0

    @Option(help: "Virtual seconds per turn (virtual).")
    var virtualStep = 36

    @Flag(help: "Skip the second host run with hang checks beyond the turn (virtual).")
    var skipHangCheckVariant = false

    func validate() throws {
        guard virtualApps >= 2 else { throw ValidationError("--virtual-apps must be at least 2") }
        guard virtualHours > 0 else { throw ValidationError("--virtual-hours must be positive") }
        guard virtualStep > 30 else { throw ValidationError("--virtual-step must exceed the ios13 background budget (30 s)") }
    }

    func bench() -> VirtualBench {
        VirtualBench(apps: virtualApps, hours: virtualHours, stepSeconds: virtualStep,
                     hangCheckVariant: !skipHangCheckVariant)
    }
}

/// The machine the figures come from.
struct Machine: Codable, Sendable {
    var cpus: Int
    var kernel: String
    var cpuModel: String
    var memoryMiB: Int

    static func current() -> Machine {
        var u = utsname()
        uname(&u)
        let release = withUnsafeBytes(of: &u.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let cpuinfo = readProcText("/proc/cpuinfo") ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "?" } ?? "?"
        let mem = (readProcText("/proc/meminfo") ?? "").split(separator: "\n").first { $0.hasPrefix("MemTotal") }
            .flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        return Machine(cpus: Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), kernel: release, cpuModel: model, memoryMiB: mem / 1024)
    }
}

/// Everything one run measured.
struct Report: Codable, Sendable {
    var machine = Machine.current()
    var build = buildConfiguration
    var command = CommandLine.arguments.joined(separator: " ")
    var sections: [Section] = []
    var idle: IdleReport?
    var density: DensityReport?
    var deadlines: DeadlineReport?
    var virtual: VirtualReport?
    var transfers: TransfersReport?

    func emit(json: Bool) throws {
        if json {
            let e = JSONEncoder()
            e.outputFormatting = [.prettyPrinted, .sortedKeys]
            e.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
            print(String(decoding: try e.encode(self), as: UTF8.self))
            return
        }
        print("apphost-bench (\(build) build): \(machine.cpus) CPUs (\(machine.cpuModel)), \(machine.memoryMiB) MiB, kernel \(machine.kernel)")
        for s in sections { printTable(title: s.title, rows: s.rows, notes: s.notes) }
        if let idle { printIdle(idle) }
        if let density { printDensity(density) }
        if let deadlines { printDeadlines(deadlines) }
        if let virtual { printVirtual(virtual) }
        if let transfers { printTransfers(transfers) }
    }
}

func printIdle(_ r: IdleReport) {
    func mib(_ kib: Int) -> String { String(format: "%.1f MiB", Double(kib) / 1024) }
    func window(_ w: IdleWindow) -> String {
        String(format: "RSS %@, CPU %.0f ms, wake-ups %llu (after the first second: %llu, %.2f/s), %d threads",
               mib(w.rssKiB), w.cpuMilliseconds, w.wakeups, w.wakeupsAfterFirstSecond,
               Double(w.wakeupsAfterFirstSecond) / Swift.max(0.001, w.seconds - 1), w.threads)
    }
    print("")
    print("Idle (apphost daemon, separate process; \(r.loaded.apps) × \(r.executable) launched and sent home; \(String(format: "%.1f", r.loaded.seconds)) s windows)")
    print("  baseline, same daemon, no app:     " + window(r.baseline))
    print("  \(r.loaded.apps) apps suspended:              " + window(r.loaded))
    print("  RSS ratio \(formatRatio(r.rssRatio)) of the no-app baseline; +\(mib(r.loaded.rssKiB - r.baseline.rssKiB)) for \(r.loaded.apps) apps"
          + String(format: " (%.1f KiB per app)", Double(r.loaded.rssKiB - r.baseline.rssKiB) / Double(r.loaded.apps)))
    print("  target RSS ≤ 64 MiB: \(r.rssTargetMet ? "met" : "NOT met") (\(mib(r.loaded.rssKiB)))")
    print("  anonymous memory (RssAnon): \(mib(r.baseline.rssAnonKiB)) with no app, \(mib(r.halfwayAnonKiB)) at \(r.halfwayApps) apps, \(mib(r.loaded.rssAnonKiB)) at \(r.loaded.apps)"
          + String(format: "; %.1f KiB per app over no app, %.1f KiB per app from %d to %d apps", r.anonKiBPerAppFromNone, r.anonKiBPerAppMarginal, r.halfwayApps, r.loaded.apps))
    print("  target ≤ 64 KiB more per suspended app: \(r.anonKiBPerAppFromNone <= 64 ? "met" : "NOT met") (over no app)")
    print("  target no periodic wake-ups: \(r.wakeupTargetMet ? "met" : "NOT met") (\(r.loaded.wakeupsAfterFirstSecond) context switches after the first second)")
    if !r.loaded.threadsThatWoke.isEmpty {
        print("  threads that woke with apps: " + r.loaded.threadsThatWoke.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
    }
    if !r.baseline.threadsThatWoke.isEmpty {
        print("  threads that woke without apps: " + r.baseline.threadsThatWoke.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
    }
    print("  apps suspended per status: \(r.appsSuspendedPerStatus)/\(r.loaded.apps); in state T before the window \(r.appsInStateTBefore), after \(r.appsInStateTAfter)")
    print("  apps' own context switches during the window: \(r.appWakeupsDuringWindow); host events during the window: \(r.eventsDuringWindow)")
    print("  context: apps' total RSS \(mib(r.appsTotalRSSKiB)) (\(String(format: "%.1f", Double(r.appsTotalRSSKiB) / 1024 / Double(r.loaded.apps))) MiB each, shared pages counted in each); "
          + "total PSS \(mib(r.appsTotalPSSKiB)) (\(String(format: "%.1f", Double(r.appsTotalPSSKiB) / 1024 / Double(r.loaded.apps))) MiB each)")
    print(String(format: "  context: install+launch+home of all apps %.1f s; shutdown (willTerminate to all) %.2f s, daemon exit status %d, app processes left %d",
                 r.setupSeconds, r.shutdownSeconds, r.daemonExitStatus, r.appsLeftAfterShutdown))
    print("  CPU time has clock-tick resolution (\(r.clockTicksPerSecond) Hz: \(1000 / max(1, r.clockTicksPerSecond)) ms).")
    printTable(title: r.requests.title, rows: r.requests.rows, notes: r.requests.notes)
}

extension AppHostBench {
    struct All: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "all", abstract: "launch, suspend, idle, deadlines and virtual in one run.")
        @OptionGroup var common: CommonOptions
        @OptionGroup var idle: IdleOptions
        @OptionGroup var deadline: DeadlineOptions
        @OptionGroup var virtual: VirtualOptions

        func run() async throws {
            var report = Report()
            progress("launch: \(common.iterations) iterations")
            report.sections += try await LaunchBench(iterations: common.iterations, warmup: common.warmup, executable: common.app).run()
            report.sections.append(try MicroCosts(iterations: common.iterations).run())
            report.sections += try await SuspendBench(iterations: common.iterations, warmup: common.warmup, executable: common.app).run()
            report.idle = try await IdleBench(apps: idle.apps, idleSeconds: idle.idleSeconds, executable: common.app,
                                              eventLoopExecutor: common.nioExecutor, distinctWindows: idle.distinctWindows).run()
            report.deadlines = try await DeadlineBench(deadlines: deadline.deadlines, interval: deadline.deadlineInterval,
                                                       chunks: deadline.deadlineChunks, executable: "ProbeApp").run()
            report.virtual = try await virtual.bench().run()
            try report.emit(json: common.json)
        }
    }

    struct DeadlinesCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "deadlines", abstract: "Real-clock deadline lateness vs plain sleeps.")
        @OptionGroup var common: CommonOptions
        @OptionGroup var deadline: DeadlineOptions

        func run() async throws {
            var report = Report()
            report.deadlines = try await DeadlineBench(deadlines: deadline.deadlines, interval: deadline.deadlineInterval,
                                                       chunks: deadline.deadlineChunks, executable: "ProbeApp").run()
            try report.emit(json: common.json)
        }
    }

    struct VirtualCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "virtual", abstract: "N apps through 24 simulated hours on the virtual clock.")
        @OptionGroup var common: CommonOptions
        @OptionGroup var virtual: VirtualOptions

        func run() async throws {
            var report = Report()
            report.virtual = try await virtual.bench().run()
            try report.emit(json: common.json)
        }
    }

    struct LaunchCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "launch", abstract: "Launch vs bare posix_spawn → hello.")
        @OptionGroup var common: CommonOptions
        @Flag(help: "Run the app as the host's uid (no per-app uid), to measure what the uid costs a launch.")
        var noIdentities = false
        @Flag(help: "Launch the app in the host's namespaces (\"namespaces\": false), to measure what its own mount (and, without per-app uids, user and pid) namespaces cost a launch.")
        var noNamespaces = false

        func run() async throws {
            common.applyExecutor()
            var report = Report()
            report.sections = try await LaunchBench(iterations: common.iterations, warmup: common.warmup, executable: common.app,
                                                    identities: !noIdentities, namespaces: !noNamespaces).run()
            try report.emit(json: common.json)
        }
    }

    struct SuspendCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "suspend", abstract: "Suspend/resume vs raw SIGSTOP/SIGCONT + waitid.")
        @OptionGroup var common: CommonOptions

        func run() async throws {
            common.applyExecutor()
            var report = Report()
            report.sections = try await SuspendBench(iterations: common.iterations, warmup: common.warmup, executable: common.app).run()
            report.sections.append(try MicroCosts(iterations: common.iterations).run())
            try report.emit(json: common.json)
        }
    }

    struct IdleCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "idle", abstract: "A daemon with N suspended apps, idle.")
        @OptionGroup var common: CommonOptions
        @OptionGroup var idle: IdleOptions

        func run() async throws {
            var report = Report()
            report.idle = try await IdleBench(apps: idle.apps, idleSeconds: idle.idleSeconds, executable: common.app,
                                              eventLoopExecutor: common.nioExecutor, distinctWindows: idle.distinctWindows).run()
            try report.emit(json: common.json)
            if let budget = idle.maxAnonKibPerApp, let r = report.idle, r.anonKiBPerAppFromNone > budget {
                FileHandle.standardError.write(Data(String(format: "apphost-bench: idle: the daemon's anonymous memory grew %.1f KiB per suspended app over no app, over the budget of %.1f KiB\n",
                                                           r.anonKiBPerAppFromNone, budget).utf8))
                throw ExitCode(1)
            }
        }
    }

    struct DensityCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "density",
            abstract: "1,000 apps installed, launched and suspended: whether launches, requests and state changes grow with the count.",
            discussion: "Launch round trips per tenth of the apps (the last tenth against the first), the daemon idle with 1 app and with all (RSS, CPU, wake-ups), status, events and foreground() with 1 app and with all.")
        @OptionGroup var common: CommonOptions
        @Option(help: "Apps launched and suspended.")
        var apps = 1000
        @Option(help: "Seconds of each idle window.")
        var idleSeconds = 5.0
        @Flag(inversion: .prefixedNo, help: "Each app a ProbeApp with a window of its own (see idle).")
        var distinctWindows = true

        func validate() throws {
            guard apps >= 2 else { throw ValidationError("--apps must be at least 2") }
            guard idleSeconds >= 2 else { throw ValidationError("--idle-seconds must be at least 2") }
        }

        func run() async throws {
            var report = Report()
            report.density = try await DensityBench(apps: apps, idleSeconds: idleSeconds, executable: common.app,
                                                    distinctWindows: distinctWindows).run()
            try report.emit(json: common.json)
        }
    }

    struct InstalledCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "installed",
            abstract: "10,000 apps installed, none launched: whether an install grows with the count, and status of all apps.")
        @OptionGroup var common: CommonOptions
        @Option(help: "Apps installed.")
        var apps = 10_000

        func validate() throws {
            guard (10...100_000).contains(apps) else { throw ValidationError("--apps: from 10 to 100000") }
        }

        func run() async throws {
            var report = Report()
            report.sections.append(try await InstalledBench(apps: apps, executable: common.app).run())
            try report.emit(json: common.json)
        }
    }

    /// The raw baselines of `suspend`, in a process with no reaper thread; prints JSON.
    struct RawSignalsCommand: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "raw-signals", shouldDisplay: false)
        @OptionGroup var common: CommonOptions

        func run() throws {
            let samples = try RawSignals.measure(iterations: common.iterations, warmup: common.warmup, executable: common.app)
            print(String(decoding: try JSONEncoder().encode(samples), as: UTF8.self))
        }
    }
}
