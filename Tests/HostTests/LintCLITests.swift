import AppHostProtocol
import Foundation
import TestSupport
import Testing

/// `apphost lint` as a user runs it: the built binary, no daemon, exit statuses and
/// compiler-style output.
@Suite("CLI lint", .tags(.process), .timeLimit(.minutes(3)),
       .enabled(if: productBuilt("apphost"), "apphost not built: run `swift build` first"))
struct LintCLITests {
    /// Writes `dir/Name.app/Info.plist` with `body` as its dictionary; returns the bundle.
    private func bundle(_ name: String, in dir: TempDir, _ body: String) throws -> String {
        let bundle = dir.path + "/\(name).app"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let text = """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0">
            <dict>
            <key>CFBundleIdentifier</key><string>com.example.\(name.lowercased())</string>
            <key>CFBundleExecutable</key><string>\(name)</string>
            \(body)
            </dict>
            </plist>
            """
        try Data(text.utf8).write(to: URL(fileURLWithPath: bundle + "/Info.plist"))
        return bundle
    }

    @Test func errorsExitOneWithCompilerStyleLinesAndASummary() async throws {
        let dir = try TempDir("lint")
        defer { dir.remove() }
        let bad = try bundle("Bad", in: dir, "<key>UIBackgroundModes</key><array><string>audoi</string><string>processing</string></array>")
        let clean = try bundle("Clean", in: dir, "<key>UIBackgroundModes</key><array><string>audio</string></array>")
        let r = await apphost(["lint", bad, clean])
        #expect(r.status == 1, "stdout:\n\(r.stdout)\nstderr:\n\(r.stderr)")
        #expect(r.stderr.isEmpty, "stderr: \(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        let plist = bad + "/Info.plist"
        #expect(lines.contains("\(plist): error: UIBackgroundModes[0]: unknown mode \"audoi\" (did you mean \"audio\"?)"), "\(r.stdout)")
        #expect(lines.contains { $0.hasPrefix("\(plist): error: background mode \"processing\" needs BGTaskSchedulerPermittedIdentifiers") }, "\(r.stdout)")
        // Every line but the summary is `file: severity: message`.
        for line in lines.dropLast() {
            #expect([": error: ", ": warning: ", ": note: "].contains { line.contains($0) } && line.hasPrefix(dir.path), "\(line)")
        }
        #expect(lines.last == "2 error(s), 0 warning(s)", "\(r.stdout)")

        // The clean bundle alone passes.
        let ok = await apphost(["lint", clean])
        #expect(ok.status == 0, "stdout:\n\(ok.stdout)\nstderr:\n\(ok.stderr)")
        #expect(ok.stdout.hasSuffix("0 error(s), 0 warning(s)\n"), "\(ok.stdout)")
    }

    @Test func jsonPrintsOneReportPerBundle() async throws {
        let dir = try TempDir("lintj")
        defer { dir.remove() }
        let bad = try bundle("Acc", in: dir, "<key>UIBackgroundModes</key><array><string>external-accessory</string><string>push-to-talk</string></array>")
        let r = await apphost(["lint", "--json", bad])
        #expect(r.status == 1, "stdout:\n\(r.stdout)\nstderr:\n\(r.stderr)")
        let reports = try #require(try parseJSON(r.stdout) as? [[String: Any]], "\(r.stdout)")
        #expect(reports.count == 1)
        let report = try #require(reports.first)
        #expect(report["bundle"] as? String == bad)
        #expect(report["bundleIdentifier"] as? String == "com.example.acc")
        #expect(report["hasErrors"] as? Bool == true)
        #expect(report["errors"] as? Int == 1)
        #expect(report["warnings"] as? Int == 1)
        let findings = try #require(report["findings"] as? [[String: Any]])
        let error = try #require(findings.first { $0["severity"] as? String == "error" })
        #expect(error["file"] as? String == bad + "/Info.plist")
        #expect(error["key"] as? String == "UISupportedExternalAccessoryProtocols")
        #expect(error["mode"] as? String == "external-accessory")
    }

    @Test func traceFindingsAndAnUnreadableTrace() async throws {
        let dir = try TempDir("lintt")
        defer { dir.remove() }
        let app = try bundle("Player", in: dir, "<key>UIBackgroundModes</key><array><string>audio</string></array>")
        let encoder = WireJSON.encoder()
        let time = Date(timeIntervalSince1970: 1_800_000_000)
        let events = [
            HostEvent(seq: 1, time: time, kind: .installed, bundleIdentifier: "com.example.player", cause: "installed"),
            HostEvent(seq: 2, time: time, kind: .modeRefused, bundleIdentifier: "com.example.player",
                      cause: "startUpdatingLocation in the background: needs \"location\" in UIBackgroundModes", mode: .location),
        ]
        let trace = dir.path + "/events.jsonl"
        let text = try events.map { String(decoding: try encoder.encode($0), as: UTF8.self) + "\n" }.joined()
        try Data(text.utf8).write(to: URL(fileURLWithPath: trace))

        let r = await apphost(["lint", "--trace", trace, app])
        #expect(r.status == 0, "warnings do not fail; stdout:\n\(r.stdout)\nstderr:\n\(r.stderr)")
        let plist = app + "/Info.plist"
        #expect(r.stdout.contains("\(plist): warning: background mode \"audio\" is declared but never used in the trace (App Review rejects unused modes)\n"), "\(r.stdout)")
        #expect(r.stdout.contains("\(plist): warning: refused once in the trace: startUpdatingLocation in the background (declare \"location\" in UIBackgroundModes)\n"), "\(r.stdout)")
        #expect(r.stdout.hasSuffix("0 error(s), 2 warning(s)\n"), "\(r.stdout)")

        try Data((text + "{\"seq\": 3}\n").utf8).write(to: URL(fileURLWithPath: trace))
        let bad = await apphost(["lint", "--trace", trace, app])
        #expect(bad.status == 65, "stdout:\n\(bad.stdout)\nstderr:\n\(bad.stderr)")
        #expect(bad.stderr.hasPrefix("apphost: \(trace):3: not a host event: "), "\(bad.stderr)")
        #expect(bad.stdout.isEmpty)
    }
}
