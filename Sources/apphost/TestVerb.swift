import ArgumentParser
import Foundation
import Host
import Logging
import Scenarios

extension AppHostCommand {
    struct Test: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "test",
            abstract: "Run policy tests written as scenario files (YAML or JSON), each on a private host with a virtual clock.",
            discussion: """
                A scenario names its apps and steps through what the host must do to them, with \
                the CLI's verbs as data, and expectations checked at that point of the host's \
                time:

                  name: An upload held past the background budget ends in 0x8badf00d
                  apps:
                    probe:
                      bundle: ../manifests/Probe.app     # relative to this file
                      args: [--ignore-expiration, --on, background, "begin-task:upload"]
                  steps:
                    - launch: probe
                    - background: probe
                    - advance: 29s
                    - expect: { probe: { state: background, process: running } }
                    - advance: 2s
                    - expect:
                        probe: { state: notRunning, process: gone }
                        report: { app: probe, code: "0x8badf00d", reason: { contains: upload } }

                Steps: install, uninstall, launch (app, or {app, background, args}), foreground, \
                background (or home), terminate (the user's swipe), kill (SIGKILL from outside), \
                advance, push ({app, payload | file, type, priority}), fetch, bgtask ({app, run | \
                expire}), location ({set: [lat, lon]}, {route: f.gpx}, clear), privacy ({grant | \
                revoke | reset: service, app}), settings ({backgroundRefresh: off, app}, {lowPower: \
                on}), device ({power: plugged}, {network: none}), ble, accessory, snapshot, expect. \
                docs/scenarios.md is the reference.

                Every scenario runs on a host of its own (its own state directory, the virtual \
                clock starting at a fixed epoch), so the same file gives the same events every run, \
                however loaded the machine: host time moves only once every app has answered what \
                it was given or is blocked (asleep, as the kernel tells), and what is random comes \
                from one seed (--seed, printed with every failure). --repeat N runs each scenario \
                N times and fails it if two runs' events differ (pids, the state directory and \
                memory footprints aside). Real time decides nothing: it is only a safety net \
                (a scenario's `settle:`, 60 s), and a scenario that reaches it fails saying so.

                Exit status: 0 all passed (or were skipped: a `requires:` the machine does not meet), \
                1 a scenario failed, 2 a scenario could not run (a bad file, an app that cannot be \
                installed) or a report could not be written.

                Examples:
                  apphost test scenarios/
                  apphost test scenarios/ --junit out.xml --jobs 2
                  apphost test scenarios/ --shard 2/4        # the second of four disjoint parts
                  apphost test scenarios/ --filter upload    # by name or path
                  apphost test --list scenarios/ios          # the iOS rules AppHost enforces
                  apphost test scenarios/ios --repeat 20 --jobs 4   # the same events every time
                  apphost test scenarios/ios/fetch-minimum-interval.yaml --seed 7
                """)

        @Argument(help: ArgumentHelp("Scenario files, or directories to search for *.yaml, *.yml and *.json.", valueName: "path"))
        var paths: [String]

        @Flag(name: .long, help: "List the scenarios (name, file, the iOS rule each checks and its source); run nothing.")
        var list = false

        @Option(name: .long, help: ArgumentHelp("Only scenarios whose name or path contains this text (case-insensitive).", valueName: "text"))
        var filter: String?

        @Option(name: .long, help: ArgumentHelp("Run part i of n (e.g. 2/4): the suite dealt in path order; the n parts are disjoint and cover it.", valueName: "i/n"))
        var shard: String?

        @Option(name: .long, help: ArgumentHelp("Scenarios run at once (each has its own host).", valueName: "n"))
        var jobs: Int = 1

        @Option(name: .long, help: ArgumentHelp("Run each scenario N times and fail it if two runs' events differ (1-1000).", valueName: "n"))
        var `repeat`: Int = 1

        @Option(name: .long, help: ArgumentHelp("The seed of everything random in a run (device tokens, apns-ids); a failure prints it, and the same seed replays it exactly. Default \(ScenarioDefaults.seed).", valueName: "n"))
        var seed: UInt64 = ScenarioDefaults.seed

        @Option(name: .long, help: ArgumentHelp("Write a JUnit XML report (one testcase per scenario).", valueName: "file.xml"))
        var junit: String?

        @Flag(name: .long, help: "Print the results as JSON (with each scenario's events) instead of text.")
        var json = false

        @Option(name: .long, help: ArgumentHelp("Write an HTML report (a page per scenario with its timeline) into this directory.", valueName: "dir"))
        var html: String?

        @Flag(name: .long, help: "Keep each scenario's state directory (events.jsonl, logs, snapshots) and say where.")
        var keep = false

        @Option(name: .long, help: ArgumentHelp(
            #"Host config file, as for `apphost daemon` (limits, identities, snapshots...). The clock, profile and settle time are each scenario's."#,
            valueName: "file"))
        var config: String?

        @Option(name: .long, help: ArgumentHelp("Extra directory to search for app executables (repeatable; also $APPHOST_PRODUCTS_DIR).", valueName: "dir"))
        var productsDir: [String] = []

        @Option(name: .long, help: "How much the private hosts log to stderr.")
        var logLevel: Logger.Level = .critical

        func validate() throws {
            guard !paths.isEmpty else { throw ValidationError("name scenario files or a directory of them: apphost test scenarios/") }
            guard (1...64).contains(jobs) else { throw ValidationError("--jobs: from 1 to 64, got \(jobs)") }
            guard (1...1000).contains(`repeat`) else { throw ValidationError("--repeat: from 1 to 1000, got \(`repeat`)") }
            if let shard, ScenarioSuite.parseShard(shard) == nil {
                throw ValidationError("--shard: i/n with 1 ≤ i ≤ n ≤ 1000 (e.g. 2/4), got \"\(shard)\"")
            }
            if let junit {
                do throws(OutputFile.Failure) { try OutputFile(junit, example: "results.xml").check() } catch { throw ValidationError(error.description) }
            }
            if let html {
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: html, isDirectory: &isDirectory), !isDirectory.boolValue {
                    throw ValidationError("--html \(html): is a file; name a directory (it is made if missing)")
                }
            }
            _ = try hostOptions()
        }

        private func hostOptions() throws -> HostOptions {
            try HostOptions.privateHost(logLevel: logLevel, config: config, productsDirectories: productsDir)
        }

        func run() async throws {
            var suite: ScenarioSuite
            do throws(ScenarioError) {
                suite = try ScenarioSuite.discover(paths)
            } catch {
                FileHandle.standardError.write(Data("apphost: \(error.description)\n".utf8))
                throw ExitCode(2)
            }
            if let filter { suite = suite.filtered(filter) }
            if let shard, let (i, n) = ScenarioSuite.parseShard(shard) { suite = suite.shard(i, of: n) }
            if list {
                let (text, bad) = ScenarioReports.list(suite)
                print(text)
                if bad > 0 { throw ExitCode(2) }
                return
            }
            guard !suite.files.isEmpty else {
                FileHandle.standardError.write(Data("apphost: no scenario files (*.yaml, *.yml, *.json) in \(paths.joined(separator: " "))\(filter.map { " matching \"\($0)\"" } ?? "")\(shard.map { " in shard \($0)" } ?? "")\n".utf8))
                throw ExitCode(2)
            }
            let host = try hostOptions()
            let template = host.configuration(stateDirectory: "/nonexistent")
            var runner = ScenarioRunner(template: template, logLevel: logLevel, keepStateDirectories: keep)
            runner.seed = seed
            let clock = ContinuousClock()
            let start = clock.now
            let quiet = json
            let results = await suite.run(with: runner, jobs: jobs, repeat: `repeat`) { r in
                guard !quiet else { return }
                var text = ScenarioReports.line(r)
                if let details = ScenarioReports.details(r) { text += "\n" + details }
                FileHandle.standardOutput.write(Data((text + "\n").utf8))
            }
            let seconds = (clock.now - start).components
            let elapsed = Double(seconds.seconds) + Double(seconds.attoseconds) / 1e18
            var status = ScenarioReports.exitStatus(results)
            if json {
                do {
                    FileHandle.standardOutput.write(try ScenarioReports.json(results, events: true))
                    print()
                } catch {
                    FileHandle.standardError.write(Data("apphost: cannot write JSON: \(error)\n".utf8))
                    status = 2
                }
            } else {
                print(ScenarioReports.summary(results, seconds: elapsed))
            }
            if let junit {
                do throws(OutputFile.Failure) {
                    try OutputFile(junit, example: "results.xml").write(Array(ScenarioReports.junit(results).utf8))
                } catch {
                    FileHandle.standardError.write(Data("apphost: \(error.description)\n".utf8))
                    status = 2
                }
            }
            if let html {
                do {
                    try HTMLReport.write(results, to: html)
                    if !json { print("HTML report: \(html)/index.html") }
                } catch {
                    FileHandle.standardError.write(Data("apphost: cannot write the HTML report in \(html): \(error)\n".utf8))
                    status = 2
                }
            }
            if status != 0 { throw ExitCode(status) }
        }
    }
}

extension HostOptions {
    /// The options of a private host on the virtual clock (`test`, `privacy-check`),
    /// parsed as `apphost daemon` parses its own, so `--config` is read and checked alike.
    static func privateHost(logLevel: Logger.Level, config: String?, productsDirectories: [String]) throws -> HostOptions {
        var options = ["--clock", "virtual", "--log-level", logLevel.rawValue]
        if let config { options += ["--config", config] }
        for dir in productsDirectories { options += ["--products-dir", dir] }
        do {
            return try HostOptions.parse(options)
        } catch {
            throw ValidationError(HostOptions.message(for: error))
        }
    }
}
