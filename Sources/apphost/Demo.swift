import AppHostProtocol
import AppHostSystem
import ArgumentParser
import Foundation
import Host
import HostConfig
import Scenarios

extension AppHostCommand {
    struct Demo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a host at work: the lifecycle with SIGSTOP, a watchdog and background modes on the virtual clock, a background download, app-switcher snapshots.",
            discussion: """
                Act 1 starts a host on a fresh state directory, installs manifests/Plain.app and manifests/TaskHolder.app, and walks through the lifecycle while every event streams to the terminal.

                Act 2 starts a host on the virtual clock, lets the probe hold a background task past its 30 s budget, advances the clock and prints the 0x8badf00d report.

                Act 3, on the virtual clock too, shows background modes: manifests/Radio.app (audio) keeps playing at home while the same executable without the mode (a Mute.app made on the fly) is interrupted and suspended, and Radio is suspended once audioIdle has passed after its sound; manifests/Tracker.app (location, always-authorized) gets a fix at home; a VoIP push launches manifests/Phone.app (voip) in the background and the call it reports keeps it running.

                Act 4, on the real clock, downloads 8 MiB from an HTTP server on loopback through apphost-transferd while manifests/Probe.app is suspended: the server cuts the connection after 3 MiB and the daemon resumes with Range/If-Range; the app is killed with SIGKILL and launched in the background to collect the file.

                Act 5 shows the redacted snapshot of manifests/Bank.app and runs the privacy check on Bank, BankLeaky (fails, naming the balance) and BankCover.

                Act 6 runs the shipped policy scenarios about background budgets and about jetsam (memory pressure killing suspended apps least recently used first, the switcher's cold launch) with apphost test, each on a private host with a virtual clock.

                Each step prints the CLI verb that does the same against a daemon. Every wait is on a real event, never a fixed delay.
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

            var modesConfiguration = host.configuration(stateDirectory: dir + "-modes")
            modesConfiguration.clock = .virtual
            let modes = HostService(configuration: modesConfiguration, logger: logger) { s in
                await ModesDemo(supervisor: s, manifests: manifestsDir, stateDirectory: dir + "-modes").run()
            }
            try await runHost(modes, logger: logger)

            // Act 4 runs on the real clock: the download is paced by a real server.
            let transfers = HostService(configuration: host.configuration(stateDirectory: dir + "-transfers"), logger: logger) { s in
                await TransfersDemo(supervisor: s, manifests: manifestsDir, stateDirectory: dir + "-transfers").run()
            }
            try await runHost(transfers, logger: logger)

            var snapshotsConfiguration = host.configuration(stateDirectory: dir + "-snapshots")
            snapshotsConfiguration.clock = .virtual
            snapshotsConfiguration.transferDaemon = false
            let snapshots = HostService(configuration: snapshotsConfiguration, logger: logger) { s in
                await SnapshotsDemo(supervisor: s, manifests: manifestsDir, stateDirectory: dir + "-snapshots").run()
            }
            try await runHost(snapshots, logger: logger)
            await policyFiles(root: (manifestsDir as NSString).deletingLastPathComponent, template: host.configuration(stateDirectory: dir))
            print("\nstate directories kept for a look: \(dir), \(dir)-virtual, \(dir)-modes, \(dir)-transfers, \(dir)-snapshots (events.jsonl, apphost.sqlite, reports/, logs/, snapshots/)")
        }
    }
}

extension AppHostCommand.Demo {
    /// Act 6: policy tests as files, each on a private host of its own.
    func policyFiles(root: String, template: HostConfiguration) async {
        let bold = isatty(1) == 1
        func say(_ text: String) { print(bold ? "\n\u{1B}[1m== \(text)\u{1B}[0m" : "\n== \(text)"); fflush(nil) }
        say("act 6: policy tests as files (a private host each, virtual clock)")
        say("$ apphost test scenarios/examples scenarios/ios --filter budget --jobs 2; and --filter jetsam (memory pressure)")
        let paths = [root + "/scenarios/examples", root + "/scenarios/ios"].filter { FileManager.default.fileExists(atPath: $0) }
        guard let all = try? ScenarioSuite.discover(paths) else {
            print("   no scenarios found under \(root)/scenarios")
            return
        }
        // The background budgets, then memory: warnings, jetsam by band and recency, the cold launch.
        var suite = all.filtered("budget")
        suite.files += all.filtered("jetsam").files
        guard !suite.files.isEmpty else {
            print("   no scenarios found under \(root)/scenarios")
            return
        }
        let runner = ScenarioRunner(template: template)
        let clock = ContinuousClock()
        let start = clock.now
        let results = await suite.run(with: runner, jobs: 2) { r in
            var text = "   " + ScenarioReports.line(r).replacingOccurrences(of: root + "/", with: "")
            if let details = ScenarioReports.details(r) { text += "\n" + details }
            print(text)
            fflush(nil)
        }
        let elapsed = clock.now - start
        print("   " + ScenarioReports.summary(results, seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18))
        print("   (every iOS rule AppHost enforces: apphost test --list scenarios/ios; the format: docs/scenarios.md)")
    }
}

/// The demo's steps.
struct DemoScript {
    let supervisor: Supervisor
    let manifests: String
    let stateDirectory: String
    let hold: Int
    let plain = BundleID.sample("com.example.plain")
    let holder = BundleID.sample("com.example.taskholder")

    func say(_ text: String) {
        line(isatty(1) == 1 ? "\n\u{1B}[1m== \(text)\u{1B}[0m" : "\n== \(text)")
    }

    /// Prints and flushes (the demo is often piped).
    func line(_ text: String) {
        print(text)
        fflush(nil)
    }

    func procState(_ id: BundleID) async -> String {
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
                line("   \(s.bundleIdentifier.rawValue.padding(toLength: 24, withPad: " ", startingAt: 0)) \(s.state.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0)) pid \(s.pid.map(String.init) ?? "-")")
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
    let probe = BundleID.sample("com.example.probe")

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

/// Act 3: background modes (audio, location, VoIP) on the virtual clock.
struct ModesDemo: DemoNarrator {
    let supervisor: Supervisor
    let manifests: String
    let stateDirectory: String
    let radio = BundleID.sample("com.example.radio")
    let mute = BundleID.sample("com.example.mute")
    let tracker = BundleID.sample("com.example.tracker")
    let phone = BundleID.sample("com.example.phone")
    /// Seconds of sound Radio and Mute play.
    let playSeconds = 2
    /// How far the event printer has got, so the script's own lines follow the events they report on.
    let cursor = EventCursor()

    /// Writes `bundles/Mute.app/Info.plist`: RadioApp's executable without UIBackgroundModes.
    func makeMuteBundle() throws -> String {
        let bundle = stateDirectory + "/bundles/Mute.app"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let plist: [String: Any] = [
            "CFBundleIdentifier": mute.rawValue,
            "CFBundleExecutable": "RadioApp",
            "CFBundleName": "Mute",
            "CFBundleDisplayName": "Mute",
        ]
        let data = try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0)
        try data.write(to: URL(fileURLWithPath: bundle + "/Info.plist"))
        return bundle
    }

    func run() async {
        let wall = ContinuousClock()
        let start = wall.now
        await narrate {
            await say("act 3: background modes, on the virtual clock again (apphost daemon --clock virtual)")

            // Audio: the same executable with and without the mode.
            let muteBundle = try makeMuteBundle()
            await say("$ apphost install manifests/Radio.app; apphost install \(muteBundle)")
            await show("   (Mute.app runs RadioApp too, but its Info.plist has no UIBackgroundModes)")
            _ = try await supervisor.install(path: manifests + "/Radio.app", settings: [:])
            _ = try await supervisor.install(path: muteBundle, settings: [:])

            await say("$ apphost launch \(radio) -- --seconds \(playSeconds)   (activates an audio session and plays a tune)")
            let radioPid = try await supervisor.launch(radio, background: false, arguments: ["--seconds", String(playSeconds)])
            await supervisor.waitUntil(radio, is: .active)
            await show("   \(radio): \(radioPid)")
            await say("$ apphost background \(radio)   (\"audio\" in UIBackgroundModes: playing keeps it running)")
            try await expectCallback(radio, "didEnterBackground") { try await supervisor.background(radio) }
            await show(await status(radio))

            await say("$ apphost launch \(mute) -- --seconds \(playSeconds); apphost background \(mute)   (no audio mode)")
            let mutePid = try await supervisor.launch(mute, background: false, arguments: ["--seconds", String(playSeconds)])
            await supervisor.waitUntil(mute, is: .active)
            await show("   \(mute): \(mutePid)")
            try await supervisor.background(mute)
            await supervisor.waitUntil(mute, is: .suspended)
            for text in logLines(mute, containing: "interruption") { await show("   logs/\(mute).log: \(text)") }

            await say("$ apphost status   (Radio still plays at home; Mute was interrupted and is stopped)")
            await show(await status(radio))
            await show(await status(mute))

            let idle = await supervisor.configuration.profile.audioIdle
            let advance = playSeconds + Int(idle.rounded(.up)) + 1
            await say("$ apphost clock advance \(advance)s   (\(playSeconds) s of sound, then \(DurationText.format(idle)) audioIdle with nothing playing)")
            _ = try await supervisor.advanceClock(by: .seconds(advance))
            await supervisor.waitUntil(radio, is: .suspended)
            await show(await status(radio))

            // Location: a fix reaches a backgrounded, always-authorized app.
            await say("$ apphost install manifests/Tracker.app; apphost privacy grant location-always \(tracker)")
            _ = try await supervisor.install(path: manifests + "/Tracker.app", settings: [:])
            await show("   " + (try await supervisor.modeCommand(.privacy(action: .grant, service: .service(.locationAlways), bundleIdentifier: tracker))))
            await say("$ apphost launch \(tracker)   (starts updates with allowsBackgroundLocationUpdates = true)")
            let trackerPid = try await supervisor.launch(tracker, background: false, arguments: [])
            await supervisor.waitUntil(tracker, is: .active)
            await show("   \(tracker): \(trackerPid)")
            await say("$ apphost background \(tracker)   (\"location\" mode and always-authorized: updates keep it running)")
            try await expectCallback(tracker, "didEnterBackground") { try await supervisor.background(tracker) }
            await show(await status(tracker))
            await say("$ apphost location set 59.3293,18.0686   (Stockholm)")
            try await expectCallback(tracker, "didUpdateLocations(1)") {
                await show("   " + (try await supervisor.modeCommand(.locationSet(LocationFix(latitude: 59.3293, longitude: 18.0686)))))
            }
            for text in logLines(tracker, containing: "fix ") { await show("   logs/\(tracker).log: \(text)") }

            // VoIP: a push launches the app in the background; the call keeps it running.
            await say("$ apphost install manifests/Phone.app")
            _ = try await supervisor.install(path: manifests + "/Phone.app", settings: [:])
            await say("$ echo '{\"caller\": \"Ada\"}' | apphost push --type voip \(phone) -   (Phone is not running)")
            try await expectCallback(phone, "didReceiveIncomingPush(voIP)") {
                await show("   " + (try await supervisor.modeCommand(.voipPush(bundleIdentifier: phone, payload: #"{"caller": "Ada"}"#))))
            }
            for text in logLines(phone, containing: "incoming call") { await show("   logs/\(phone).log: \(text)") }
            await show(await status(phone))

            let took = start.duration(to: wall.now)
            line("\n   act 3 took \(took.formatted(.units(allowed: [.milliseconds], width: .abbreviated))) of wall time")
        }
    }
}

/// How far a printer of host events has got (the highest sequence number seen), and
/// waiting until it has got somewhere.
actor EventCursor {
    /// While true, the printer does not print (a step that reports on its own).
    private(set) var quiet = false
    private var seen: UInt64 = 0

    func setQuiet(_ value: Bool) { quiet = value }

    private var waiters: [(seq: UInt64, continuation: CheckedContinuation<Void, Never>)] = []

    func saw(_ seq: UInt64) {
        seen = max(seen, seq)
        let ready = waiters.filter { $0.seq <= seen }
        waiters.removeAll { $0.seq <= seen }
        for w in ready { w.continuation.resume() }
    }

    func wait(for seq: UInt64) async {
        guard seen < seq else { return }
        await withCheckedContinuation { waiters.append((seq, $0)) }
    }
}

extension BundleID {
    /// A sample app's identifier as its manifest in `manifests/` writes it: a literal of
    /// the demo's source, well formed by construction (the demo's tests install and run
    /// each sample), so a malformed one is a bug in this file, not input.
    static func sample(_ literal: StaticString) -> BundleID {
        guard let id = BundleID("\(literal)") else { preconditionFailure("the demo's sample id \"\(literal)\" is not a bundle identifier") }
        return id
    }
}
