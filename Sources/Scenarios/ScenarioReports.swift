import AppHostProtocol
import Foundation

/// The readable summary, JUnit XML and JSON of a run.
public enum ScenarioReports {
    /// One line per scenario as it finishes: `PASS name (file, 0.21 s)`.
    public static func line(_ r: ScenarioResult) -> String {
        let mark: String
        switch r.status {
        case .passed: mark = "PASS "
        case .failed: mark = "FAIL "
        case .error: mark = "ERROR"
        case .skipped: mark = "SKIP "
        }
        return "\(mark) \(r.name) (\(r.file), \(String(format: "%.2f", r.seconds)) s)"
    }

    /// What went wrong in a failed or errored scenario, indented under its line.
    public static func details(_ r: ScenarioResult) -> String? {
        switch r.status {
        case .passed:
            return nil
        case .skipped:
            return "      skipped: " + (r.error ?? "a requirement is not met")
        case .error:
            return "      " + (r.error ?? "could not run").replacingOccurrences(of: "\n", with: "\n      ")
                + "\n" + replay(r)
        case .failed:
            guard let f = r.failure else { return nil }
            var lines = [
                "      at \(r.file):\(f.line):\(f.column), step \(f.step + 1): \(f.stepText)",
                "      expected: \(f.expected)",
                "      seen:     \(f.seen)",
                replay(r),
            ]
            if let time = f.time { lines.append("      host time: \(offset(time, from: r.start))") }
            if !f.recentEvents.isEmpty {
                lines.append("      last events:")
                lines += f.recentEvents.map { "        \($0)" }
            }
            return lines.joined(separator: "\n")
        }
    }

    /// The seed of a run and the command that replays it exactly.
    static func replay(_ r: ScenarioResult) -> String {
        "      seed: \(r.seed) (replay: apphost test \(r.file) --seed \(r.seed))"
    }

    /// `+29.000s` after the epoch.
    static func offset(_ date: Date, from start: Date) -> String {
        String(format: "+%.3fs", date.timeIntervalSince(start))
    }

    /// `12 scenarios: 11 passed, 1 failed, 0 could not run (3.2 s)`.
    public static func summary(_ results: [ScenarioResult], seconds: Double) -> String {
        let passed = results.filter { $0.status == .passed }.count
        let failed = results.filter { $0.status == .failed }.count
        let errors = results.filter { $0.status == .error }.count
        let skipped = results.filter { $0.status == .skipped }.count
        return "\(results.count) scenario(s): \(passed) passed, \(failed) failed, \(errors) could not run"
            + (skipped > 0 ? ", \(skipped) skipped" : "") + " (\(String(format: "%.1f", seconds)) s)"
    }

    /// 0 all passed, 1 a failure, 2 a scenario could not run.
    public static func exitStatus(_ results: [ScenarioResult]) -> Int32 {
        if results.contains(where: { $0.status == .error }) { return 2 }
        if results.contains(where: { $0.status == .failed }) { return 1 }
        return 0
    }

    static func escape(_ s: String) -> String { Escape.xml(s) }

    /// JUnit XML: one testsuite, one testcase per scenario (classname: the file), a
    /// failure with expected vs seen, an error for a scenario that could not run.
    public static func junit(_ results: [ScenarioResult], name: String = "apphost test") -> String {
        let failures = results.filter { $0.status == .failed }.count
        let errors = results.filter { $0.status == .error }.count
        let skipped = results.filter { $0.status == .skipped }.count
        let total = results.reduce(0) { $0 + $1.seconds }
        var out = #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n"
        out += #"<testsuites name="\#(escape(name))" tests="\#(results.count)" failures="\#(failures)" errors="\#(errors)" skipped="\#(skipped)" time="\#(String(format: "%.3f", total))">"# + "\n"
        out += #"  <testsuite name="\#(escape(name))" tests="\#(results.count)" failures="\#(failures)" errors="\#(errors)" skipped="\#(skipped)" time="\#(String(format: "%.3f", total))">"# + "\n"
        for r in results {
            let open = #"    <testcase classname="\#(escape(r.file))" name="\#(escape(r.name))" time="\#(String(format: "%.3f", r.seconds))""#
            switch r.status {
            case .passed:
                out += open + "/>\n"
            case .skipped:
                out += open + ">\n"
                out += #"      <skipped message="\#(escape(r.error ?? "skipped"))"/>"# + "\n"
                out += "    </testcase>\n"
            case .failed:
                let f = r.failure
                let message = f.map { "expected \($0.expected); seen \($0.seen)" } ?? "failed"
                out += open + ">\n"
                out += #"      <failure message="\#(escape(message))" type="expectation">\#(escape(details(r) ?? ""))</failure>"# + "\n"
                out += "    </testcase>\n"
            case .error:
                out += open + ">\n"
                out += #"      <error message="\#(escape(r.error ?? "could not run"))" type="scenario"/>"# + "\n"
                out += "    </testcase>\n"
            }
        }
        out += "  </testsuite>\n</testsuites>\n"
        return out
    }

    /// The run as JSON: `{"version": 1, "results": [...]}`, each result with its events
    /// (as events.jsonl writes them) unless `events` is false.
    public static func json(_ results: [ScenarioResult], events: Bool) throws -> Data {
        struct Run: Encodable {
            var version = 1
            var passed: Int
            var failed: Int
            var errors: Int
            var skipped: Int
            var results: [ScenarioResult]
        }
        let list = events ? results : results.map { var r = $0; r.events = []; return r }
        let run = Run(passed: results.filter { $0.status == .passed }.count, failed: results.filter { $0.status == .failed }.count,
                      errors: results.filter { $0.status == .error }.count,
                      skipped: results.filter { $0.status == .skipped }.count, results: list)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(run)
    }

    /// `--list`: each scenario's name, file, rule and source (or why it cannot be read).
    public static func list(_ suite: ScenarioSuite) -> (text: String, unreadable: Int) {
        var lines: [String] = []
        var bad = 0
        for f in suite.files {
            do {
                let s = try ScenarioReader.read(path: f.path)
                lines.append("\(s.name)\n    file:   \(f.display)")
                if let rule = s.rule { lines.append("    rule:   \(rule)") }
                if let source = s.source { lines.append("    source: \(source)") }
            } catch {
                bad += 1
                lines.append("(unreadable) \(f.display)\n    \(error.description)")
            }
        }
        lines.append("\(suite.files.count) scenario(s)\(bad > 0 ? ", \(bad) unreadable" : "")")
        return (lines.joined(separator: "\n"), bad)
    }
}
