import AppHostProtocol
import AppHostSystem
import Foundation
import Host
import HostConfig
import Plugins
import ArgumentParser

/// Benchmark: background fetch on the virtual clock. N ProbeApps declare `fetch`, set
/// the minimum interval and are suspended; the host's clock is then advanced by a
/// simulated week in one `advanceClock`, so the fetch scheduler wakes every app for
/// every fetch (coalesced ticks), each a real SIGCONT, performFetch callback,
/// completion request and SIGSTOP.
///
/// Baseline in the same run: the same week driven through the plugins alone (the
/// `ModeHub`, no processes, completions answered at once), which is also the check
/// that the host ran exactly the fetches the scheduler planned.
struct FetchWeekBench {
    let apps: Int
    let days: Double
    let executable = "ProbeApp"

    func ids() -> [String] { (0..<apps).map { String(format: "com.bench.fetch.%03d", $0) } }

    func run() async throws -> [Section] {
        progress("fetch-week: plugins alone, \(apps) apps, \(days) days")
        let clock = ContinuousClock()
        let m0 = clock.now
        let modelFetches = runModel()
        let modelTime = clock.now - m0

        progress("fetch-week: host, \(apps) apps")
        let host = try InProcessHost(label: "fweek") { config in
            config.clock = .virtual
        }
        let supervisor = host.supervisor
        var hostFetches = 0
        var setup = Duration.zero
        var week = Duration.zero
        var failure: (any Error)?
        do {
            let s0 = clock.now
            for id in ids() {
                let bundle = host.dir.path + "/\(id).app"
                try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
                let plist: [String: Any] = ["CFBundleIdentifier": id, "CFBundleExecutable": executable,
                                            "CFBundleName": id, "UIBackgroundModes": ["fetch"]]
                try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0)
                    .write(to: URL(fileURLWithPath: bundle + "/Info.plist"))
                _ = try await supervisor.install(path: bundle, settings: [:])
                _ = try await supervisor.launch(try BundleID(validating: id), background: true, arguments: ["--on", "launch", "fetch-interval:minimum"])
                await supervisor.waitUntil(try BundleID(validating: id), is: .suspended)
            }
            setup = clock.now - s0
            let (_, live, subscription) = await supervisor.subscribe(bundleIdentifier: nil)
            let counter = Task {
                var n = 0
                for await e in live where e.callback == "performFetch" { n += 1 }
                return n
            }
            let w0 = clock.now
            _ = try await supervisor.advanceClock(by: .seconds(Int64(days * 86400)))
            week = clock.now - w0
            await supervisor.unsubscribe(subscription)
            hostFetches = await counter.value
        } catch {
            failure = error
        }
        await host.stop()
        if let failure { throw failure }

        var modelSamples = Samples()
        modelSamples.add(modelTime)
        var hostSamples = Samples()
        hostSamples.add(week)
        let base = Row("plugins alone: the week's fetch schedule", modelSamples,
                       note: "\(modelFetches) fetches planned and answered at once, no processes")
        let hostRow = Row("host: \(apps) apps through \(days == 7 ? "a week" : "\(days) days") of fetches", hostSamples, against: base,
                          note: "\(hostFetches) fetches run by real processes (SIGCONT, performFetch, completion, SIGSTOP)"
                            + (hostFetches == modelFetches ? "; the same count as planned" : "; planned \(modelFetches): MISMATCH"))
        return [Section(title: "Background fetch on the virtual clock (\(apps) apps, \(days) days, interval minimum \(DurationText.format(BudgetProfile.default.fetchMinimum)), \(buildConfiguration) build)",
                        rows: [base, hostRow],
                        notes: ["setup (install, background launch, suspension of \(apps) apps): \(formatDuration(Double(setup.nanoseconds)))",
                                "wall time per simulated day: \(formatDuration(Double(week.nanoseconds) / days)); per fetch: \(formatDuration(Double(week.nanoseconds) / Double(max(hostFetches, 1))))"])]
    }

    /// The same week through the hub: timers kept in a dictionary, completions at once.
    func runModel() -> Int {
        let hub = ModeHub(profile: .default)
        struct Key: Hashable {
            var app: BundleID?
            var timer: PluginTimer
        }
        var deadlines: [Key: Duration] = [:]
        var fetches = 0
        func apply(_ effects: [ModeEffect], _ now: Duration) {
            var pending = effects
            while !pending.isEmpty {
                let effect = pending.removeFirst()
                switch effect {
                case .startTimer(let app, let timer, let after): deadlines[Key(app: app, timer: timer)] = now + after
                case .cancelTimer(let app, let timer): deadlines.removeValue(forKey: Key(app: app, timer: timer))
                case .deliver(let app, .performFetch(let id), _, _):
                    fetches += 1
                    pending += hub.request(.fetchCompleted(id: id, result: .newData), from: app, at: now).1
                default: break
                }
            }
        }
        for id in ids() {
            // The ids are made above, in the bundle identifier's characters.
            guard let bundle = BundleID(id) else { continue }
            var manifest = Manifest(bundleIdentifier: id, executable: executable, name: id, sourcePath: "")
            manifest.backgroundModes = [.fetch]
            apply(hub.install(ModeApp(bundleIdentifier: bundle, manifest: manifest, entitlements: [], container: "")), .zero)
            apply(hub.appMoved(bundle, from: .notRunning, to: .background, runningCode: true, at: .zero), .zero)
            apply(hub.request(.fetchSetMinimumInterval(.minimum), from: bundle, at: .zero).1, .zero)
            apply(hub.appMoved(bundle, from: .background, to: .suspended, runningCode: false, at: .zero), .zero)
        }
        let end = Duration.seconds(Int64(days * 86400))
        while let (key, due) = deadlines.min(by: { $0.value < $1.value }), due <= end {
            deadlines.removeValue(forKey: key)
            apply(hub.timerFired(key.timer, app: key.app, at: due), due)
        }
        return fetches
    }
}

extension AppHostBench {
    struct FetchWeekCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "fetch-week",
            abstract: "N apps with background fetch through a simulated week on the virtual clock, vs the plugins' schedule alone.")
        @OptionGroup var common: CommonOptions

        @Option(help: "Apps that fetch.")
        var fetchApps = 100

        @Option(help: "Simulated days.")
        var days: Double = 7

        func validate() throws {
            guard fetchApps > 0, days > 0 else { throw ValidationError("--fetch-apps and --days must be positive") }
        }

        func run() async throws {
            var report = Report()
            report.sections = try await FetchWeekBench(apps: fetchApps, days: days).run()
            try report.emit(json: common.json)
        }
    }
}
