import AppHostProtocol
import AppHostSystem
import ArgumentParser
import Foundation
import Host

extension AppHostCommand {
    struct Demo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a host at work: two sample apps, foreground, home button, SIGSTOP, resume; then a watchdog on the virtual clock.",
            discussion: """
                Act 1 starts a host on a fresh state directory, installs manifests/Plain.app and
                manifests/TaskHolder.app, and walks through the lifecycle while every event
                streams to the terminal. Act 2 starts a host on the virtual clock, lets the probe
                hold a background task past its 30 s budget, advances the clock and prints the
                0x8badf00d report. Each step prints the CLI verb that does the same against a
                daemon. Every wait is on a real event, never a fixed delay.
                """)

        @Option(name: .long, help: ArgumentHelp("Folder holding the sample manifests.", valueName: "dir"))
        var manifests: String = "manifests"

        @Option(name: .long, help: ArgumentHelp("Seconds TaskHolder holds its background task.", valueName: "seconds"))
        var hold: Int = 3

        @OptionGroup var state: StateOptions
        @OptionGroup var host: HostOptions

        func run() async throws {
            let dir = state.stateDir.map(absolute)
                ?? (NSTemporaryDirectory() + "apphost-demo-\(getpid())")
            let manifestsDir = absolute(manifests)
            guard FileManager.default.fileExists(atPath: manifestsDir + "/Plain.app/Info.plist") else {
                throw ValidationError("no sample manifests at \(manifestsDir); run from the repository root or pass --manifests")
            }
            let logger = host.logger("apphost.demo")
            let hold = self.hold
            let service = HostService(configuration: host.configuration(stateDirectory: dir), logger: logger) { s in
                await DemoScript(supervisor: s, manifests: manifestsDir, stateDirectory: dir, hold: hold).run()
            }
            try await runHost(service, logger: logger)

            var virtual = host.configuration(stateDirectory: dir + "-virtual")
            virtual.clock = .virtual
            let policy = HostService(configuration: virtual, logger: logger) { s in
                await PolicyDemo(supervisor: s, manifests: manifestsDir).run()
            }
            try await runHost(policy, logger: logger)
            print("\nstate directories kept for a look: \(dir), \(dir)-virtual (events.jsonl, apphost.sqlite, reports/, logs/)")
        }
    }
}

/// The demo's steps.
struct DemoScript {
    let supervisor: Supervisor
    let manifests: String
    let stateDirectory: String
    let hold: Int
    let plain = "com.example.plain"
    let holder = "com.example.taskholder"

    func say(_ text: String) {
        line(isatty(1) == 1 ? "\n\u{1B}[1m== \(text)\u{1B}[0m" : "\n== \(text)")
    }

    /// Prints and flushes (the demo is often piped).
    func line(_ text: String) {
        print(text)
        fflush(nil)
    }

    func procState(_ id: String) async -> String {
        guard let pid = await supervisor.pid(of: id), let stat = try? ProcStat.read(pid: pid) else { return "-" }
        return "/proc/\(pid)/stat state \(stat.state)"
    }

    func run() async {
        let (_, live, _) = await supervisor.subscribe(bundleIdentifier: nil)
        let printer = Task {
            for await event in live where event.kind != .callback {
                line("   " + EventFormatter.line(event))
            }
        }
        do {
            say("host started on \(stateDirectory)")
            say("$ apphost install manifests/Plain.app; apphost install manifests/TaskHolder.app")
            _ = try await supervisor.install(path: manifests + "/Plain.app", settings: [:])
            _ = try await supervisor.install(path: manifests + "/TaskHolder.app", settings: [:])

            say("$ apphost launch \(plain)")
            let p1 = try await supervisor.launch(plain, background: false, arguments: [])
            await supervisor.waitUntil(plain, is: .active)
            line("   \(plain): \(p1)")

            say("$ apphost launch \(holder) -- --hold \(hold)   (Plain goes home: it holds no task, so it is suspended)")
            let p2 = try await supervisor.launch(holder, background: false, arguments: ["--hold", String(hold)])
            line("   \(holder): \(p2)")
            await supervisor.waitUntil(plain, is: .suspended)
            line("   \(plain): \(await procState(plain))   (T = stopped by SIGSTOP)")

            say("$ apphost foreground \(plain)   (TaskHolder goes home holding an \"upload\" task for \(hold)s)")
            try await supervisor.foreground(plain)
            await supervisor.waitUntil(plain, is: .active)
            line("   \(plain): \(await procState(plain))")
            await supervisor.waitUntil(holder, is: .background)
            line("   \(holder): \(await procState(holder))   (still running: it holds a background task)")
            await supervisor.waitUntil(holder, is: .suspended)
            line("   \(holder): \(await procState(holder))   (task ended, nothing left to do: suspended)")

            say("$ apphost status")
            for s in (try? await supervisor.status(nil)) ?? [] {
                line("   \(s.bundleIdentifier.padding(toLength: 24, withPad: " ", startingAt: 0)) \(s.state.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0)) pid \(s.pid.map(String.init) ?? "-")")
            }

            say("$ apphost foreground \(holder)   (SIGCONT, willEnterForeground, didBecomeActive)")
            try await supervisor.foreground(holder)
            await supervisor.waitUntil(holder, is: .active)
            await supervisor.waitUntil(plain, is: .suspended)

            say("$ apphost shutdown   (every app gets willTerminate, then the host exits)")
        } catch {
            line("demo failed: \(error)")
        }
        await supervisor.requestShutdown()
        await printer.value
    }
}

/// Act 2: a 30-second rule checked in milliseconds on the virtual clock.
struct PolicyDemo {
    let supervisor: Supervisor
    let manifests: String
    let probe = "com.example.probe"

    func line(_ text: String) {
        print(text)
        fflush(nil)
    }

    func say(_ text: String) {
        line(isatty(1) == 1 ? "\n\u{1B}[1m== \(text)\u{1B}[0m" : "\n== \(text)")
    }

    func run() async {
        let (_, live, _) = await supervisor.subscribe(bundleIdentifier: nil)
        let printer = Task {
            for await event in live where event.kind != .callback && event.kind != .installed {
                line("   " + EventFormatter.line(event))
            }
        }
        do {
            say("act 2: a host on the virtual clock (apphost daemon --clock virtual)")
            _ = try await supervisor.install(path: manifests + "/Probe.app", settings: [:])
            say("$ apphost launch \(probe) -- --ignore-expiration --on background begin-task:upload")
            _ = try await supervisor.launch(probe, background: false, arguments: ["--ignore-expiration", "--on", "background", "begin-task:upload"])
            say("$ apphost background \(probe)   (it begins \"upload\" and will ignore its expiration handler)")
            try await supervisor.background(probe)
            await supervisor.waitUntil(probe, is: .background)
            let wall = ContinuousClock()
            let start = wall.now
            say("$ apphost clock advance 31s   (the iOS 13 budget is 30 s; handlers run at 25 s)")
            _ = try await supervisor.advanceClock(by: .seconds(31))
            let took = start.duration(to: wall.now)
            line("   31 s of host time took \(took.formatted(.units(allowed: [.milliseconds], width: .abbreviated))) of wall time")
            say("$ apphost reports \(probe)")
            if let report = try await supervisor.reports(probe).last {
                line(ReportFormatter.text(report).split(separator: "\n").map { "   " + $0 }.joined(separator: "\n"))
            }
        } catch {
            line("demo failed: \(error)")
        }
        await supervisor.requestShutdown()
        await printer.value
    }
}
