import ArgumentParser
import Foundation
import Host
import Scenarios

/// Benchmark: `apphost test`'s costs.
///
/// - A private host's start + stop for one scenario: a scenario with one app installed
///   and no step, run N times by ``ScenarioRunner`` (the supervisor, its event loop, the
///   transfer daemon started and ready, the app installed, then shutdown and the state
///   directory removed). Baseline in the same run: spawning and reaping `/bin/true`.
/// - A suite (default: `scenarios/ios` of the repository) with `--jobs 2`: wall time, and
///   each scenario's median and slowest.
struct ScenarioBench {
    let iterations: Int
    let suitePath: String?
    let jobs: Int

    struct Figures: Codable {
        var startStopMedianMs: Double
        var startStopP90Ms: Double
        var bareExecMedianMs: Double
        var suiteFiles: Int
        var suiteJobs: Int
        var suiteWallSeconds: Double?
        var scenarioMedianMs: Double?
        var scenarioMaxMs: Double?
        var slowest: String?
        var passed: Int
        var failed: Int
        var errors: Int
    }

    func run() async throws -> Figures {
        let root = try TempDir("scn")
        defer { root.remove() }
        var template = HostConfiguration(stateDirectory: "/nonexistent")
        template.productDirectories = [productsDirectory]
        let runner = ScenarioRunner(template: template)
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let empty = root.path + "/empty.yaml"
        try """
            name: start and stop
            apps:
              plain: \(repo)/manifests/Plain.app
            steps: []
            """.write(toFile: empty, atomically: true, encoding: .utf8)
        progress("scenarios: \(iterations) private hosts started and stopped (one app installed, no step)")
        var hosts: [Double] = []
        for i in 0..<(iterations + 2) {
            let clock = ContinuousClock()
            let start = clock.now
            let r = await runner.run(path: empty, display: "empty.yaml")
            let ms = (clock.now - start).milliseconds
            guard r.status == .passed else { throw BenchError("the empty scenario did not pass: \(r.error ?? "")") }
            if i >= 2 { hosts.append(ms) }
        }
        var bare: [Double] = []
        for _ in 0..<iterations {
            let clock = ContinuousClock()
            let start = clock.now
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/bin/true")
            try p.run()
            p.waitUntilExit()
            bare.append((clock.now - start).milliseconds)
        }
        var figures = Figures(startStopMedianMs: median(hosts), startStopP90Ms: percentile(hosts, 0.9), bareExecMedianMs: median(bare),
                              suiteFiles: 0, suiteJobs: jobs, passed: 0, failed: 0, errors: 0)
        let suiteDir = suitePath ?? repo + "/scenarios/ios"
        if FileManager.default.fileExists(atPath: suiteDir) {
            let suite = try ScenarioSuite.discover([suiteDir])
            progress("scenarios: the suite \(suiteDir): \(suite.files.count) files, --jobs \(jobs)")
            let clock = ContinuousClock()
            let start = clock.now
            let results = await suite.run(with: runner, jobs: jobs)
            figures.suiteWallSeconds = (clock.now - start).milliseconds / 1000
            figures.suiteFiles = suite.files.count
            let each = results.map { $0.seconds * 1000 }
            figures.scenarioMedianMs = median(each)
            figures.scenarioMaxMs = each.max()
            figures.slowest = results.max { $0.seconds < $1.seconds }?.file
            figures.passed = results.filter { $0.status == .passed }.count
            figures.failed = results.filter { $0.status == .failed }.count
            figures.errors = results.filter { $0.status == .error }.count
        }
        return figures
    }

    func median(_ v: [Double]) -> Double { percentile(v, 0.5) }
    func percentile(_ v: [Double], _ p: Double) -> Double {
        guard !v.isEmpty else { return 0 }
        let s = v.sorted()
        return s[min(s.count - 1, Int((Double(s.count - 1) * p).rounded()))]
    }

    static func text(_ f: Figures) -> String {
        var lines = [
            "scenarios (apphost test)",
            String(format: "  private host start + stop (one app installed, no step): median %.1f ms, p90 %.1f ms (target ≤ 150 ms)", f.startStopMedianMs, f.startStopP90Ms),
            String(format: "    baseline: spawn + reap /bin/true: median %.2f ms; ratio %.0f×", f.bareExecMedianMs, f.startStopMedianMs / max(f.bareExecMedianMs, 0.001)),
        ]
        if let wall = f.suiteWallSeconds {
            lines.append(String(format: "  suite: %d scenarios, --jobs %d: %.2f s wall (target ≤ 10 s); per scenario median %.0f ms, slowest %.0f ms (%@)",
                                f.suiteFiles, f.suiteJobs, wall, f.scenarioMedianMs ?? 0, f.scenarioMaxMs ?? 0, f.slowest ?? "-"))
            lines.append("    \(f.passed) passed, \(f.failed) failed, \(f.errors) could not run")
        } else {
            lines.append("  suite: none found")
        }
        return lines.joined(separator: "\n")
    }
}

extension Duration {
    var milliseconds: Double { Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15 }
}

extension AppHostBench {
    struct ScenariosCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "scenarios",
            abstract: "apphost test: a private host's start + stop, and the scenarios/ios suite with --jobs 2.")
        @Option(help: "Private hosts started and stopped.")
        var iterations = 30
        @Option(help: "The suite to time (default: the repository's scenarios/ios).")
        var suite: String?
        @Option(help: "Scenarios run at once for the suite.")
        var jobs = 2
        @Flag(help: "Print JSON instead of text.")
        var json = false

        func run() async throws {
            let f = try await ScenarioBench(iterations: iterations, suitePath: suite, jobs: jobs).run()
            if json {
                let e = JSONEncoder()
                e.outputFormatting = [.prettyPrinted, .sortedKeys]
                print(String(decoding: try e.encode(f), as: UTF8.self))
            } else {
                print(ScenarioBench.text(f))
            }
        }
    }
}
