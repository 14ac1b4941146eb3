import Foundation
import TestSupport
import Testing

/// `apphost privacy-check` runs that once went wrong: a bundle checked twice, a report
/// path that cannot be written, an app that errors after its snapshots.
extension PrivacyCheckCLITests {
    @Test func theSameBundleTwiceReportsOnlyEachRunsOwnSnapshots() async throws {
        let bank = packageRoot + "/manifests/Bank.app"
        let r = await apphost(["privacy-check", bank, bank])
        #expect(r.status == 0, "stdout: \(r.stdout)\nstderr: \(r.stderr)")
        let runs = r.stdout.components(separatedBy: "PASS com.example.bank (").dropFirst()
        #expect(runs.count == 2, "\(r.stdout)")
        for run in runs {
            #expect(run.components(separatedBy: "  ok    snapshot ").count == 2, "one snapshot per run: \(r.stdout)")
        }
        #expect(r.stdout.contains("2 app(s), 2 snapshot(s)"), "\(r.stdout)")
    }

    @Test func aJUnitPathThatCannotBeWrittenIsRefusedBeforeAnyCheck() async throws {
        let dir = try TempDir("pjunit")
        defer { dir.remove() }
        for path in [dir.path, dir.path + "/missing/report.xml"] {
            let r = await apphost(["privacy-check", packageRoot + "/manifests/Bank.app", "--junit", path])
            #expect(r.status == 64, "--junit \(path): stdout: \(r.stdout)\nstderr: \(r.stderr)")
            #expect(r.stderr.contains("cannot write \(path)"), "\(r.stderr)")
            #expect(r.stdout.isEmpty, "nothing checked: \(r.stdout)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }

    /// An app that leaks and then cannot be checked to the end (a silent push that is not
    /// delivered: Background App Refresh restricted by the config) has its error and its
    /// snapshots counted in the JUnit totals, and its leaks in the report.
    @Test func anAppThatErrorsAfterItsSnapshotsCountsTheErrorInTheJUnitTotals() async throws {
        let dir = try TempDir("perr")
        defer { dir.remove() }
        let bundle = dir.path + "/Pushy.app"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let leaky = packageRoot + "/manifests/BankLeaky.app"
        let data = try Data(contentsOf: URL(fileURLWithPath: leaky + "/Info.plist"))
        var plist = try #require(try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any])
        plist["UIBackgroundModes"] = ["fetch", "remote-notification"]
        try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0).write(to: URL(fileURLWithPath: bundle + "/Info.plist"))
        try FileManager.default.copyItem(atPath: leaky + "/logo.png", toPath: bundle + "/logo.png")
        let config = dir.path + "/host.json"
        try Data(#"{"backgroundRefresh": "restricted"}"#.utf8).write(to: URL(fileURLWithPath: config))
        let junit = dir.path + "/report.xml"

        let r = await apphost(["privacy-check", bundle, "--config", config, "--junit", junit])
        #expect(r.status == 2, "stdout: \(r.stdout)\nstderr: \(r.stderr)")
        #expect(r.stdout.contains("ERROR com.example.bank.leaky (\(bundle)): no snapshot after a silent push: the app was not woken for it"),
                "\(r.stdout)")
        #expect(r.stdout.contains("  LEAK  snapshot 1 after didEnterBackground"), "the leaks before the error are shown: \(r.stdout)")
        let xml = try String(contentsOfFile: junit, encoding: .utf8)
        #expect(xml.contains(#"<testsuites name="apphost privacy-check" tests="3" failures="2" errors="1">"#), "\(xml)")
        #expect(xml.contains(#"<testsuite name="com.example.bank.leaky" tests="3" failures="2" errors="1">"#), "\(xml)")
        #expect(xml.components(separatedBy: "<testcase ").count - 1 == 3, "\(xml)")
    }

    /// An app that never calls its fetch completion cannot hang the check: after
    /// --wait-for-app of real time the virtual clock moves past the budgets, the
    /// watchdog ends the app, and the check says so.
    @Test func anAppThatNeverCompletesItsFetchEndsTheCheckWithAnError() async throws {
        let dir = try TempDir("pslow")
        defer { dir.remove() }
        let bundle = dir.path + "/Slow.app"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let plist: [String: Any] = ["CFBundleIdentifier": "com.pc.slow", "CFBundleExecutable": "ProbeApp", "UIBackgroundModes": ["fetch"]]
        try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0).write(to: URL(fileURLWithPath: bundle + "/Info.plist"))
        // ProbeApp reads these from its bundle: privacy-check launches it with no arguments.
        try Data("--fetch-result\nnever\n--on\nlaunch\nwindow:Hello\n".utf8).write(to: URL(fileURLWithPath: bundle + "/ProbeApp.args"))

        let r = await apphost(["privacy-check", bundle, "--wait-for-app", "0.2"])
        #expect(r.status == 2, "stdout: \(r.stdout)\nstderr: \(r.stderr)")
        #expect(r.stdout.contains("ERROR com.pc.slow"), "\(r.stdout)")
        #expect(r.stdout.contains("no snapshot after a background fetch: the app did not complete it within 31s and was ended"), "\(r.stdout)")
        #expect(r.stdout.contains("did not call its completion handler within the fetch budget"), "the fetch watchdog ended it: \(r.stdout)")
    }
}
