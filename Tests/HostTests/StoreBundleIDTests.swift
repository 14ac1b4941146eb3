import AppHostProtocol
import Foundation
import GRDB
import TestSupport
import Testing
@testable import Host

/// Bundle identifiers read back from `apphost.sqlite` are checked there, once: a row an
/// older host wrote under an identifier the rule now refuses is skipped and said, and
/// never stops a host from starting.
@Suite("Store: bundle identifiers read back", .enabled(if: probeBuilt, "sample apps not built: run `swift build` first"))
struct StoreBundleIDTests {
    @Test func anAppRowThatNamesNoBundleIDIsSkippedAndSaidAtStart() async throws {
        let first = try TestHost(label: "oldrows")
        try await first.installProbe("com.example.kept")
        await first.stop(removing: false)
        defer { first.dir.remove() }
        let path = first.dir.path + "/apphost.sqlite"
        // As a host from before the rule could have written them.
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: """
                INSERT INTO app (bundleIdentifier, bundlePath, executablePath, settings, manifest, installedAt)
                SELECT 'com.example.my_app', bundlePath, executablePath, settings, manifest, installedAt FROM app
                """)
            try db.execute(sql: "INSERT INTO privacy (bundleIdentifier, service, value) VALUES ('com.example.my_app', 'camera', 'granted')")
        }
        var skipped: [Store.SkippedRow] = []
        let rows = try Store(path: path).apps { skipped.append($0) }
        #expect(rows.map(\.app.bundleIdentifier) == ["com.example.kept"])
        #expect(skipped.map(\.key) == ["com.example.my_app"])
        #expect(skipped.first?.description.contains("not a bundle identifier") == true, "\(skipped)")
        #expect(try Store(path: path).privacy().isEmpty, "a privacy row of no valid app is skipped too")

        try await withHost(reopening: first.dir) { host in
            let listed = try await host.supervisor.status(nil).map(\.bundleIdentifier)
            #expect(listed == ["com.example.kept"])
            let warning = await host.supervisor.subscribe(bundleIdentifier: nil).past.first { $0.kind == .warning }
            #expect(warning?.cause.contains(#"table app, row "com.example.my_app": not a bundle identifier"#) == true,
                    "\(String(describing: warning))")
        }
    }
}

/// `reports` of every app lists them by time, and reports of one instant in the order
/// they were written (jetsam's kills at one virtual time), never by their ids.
@Suite("Store: report order")
struct StoreReportOrderTests {
    @Test func reportsOfOneInstantComeInTheOrderTheyWereWritten() throws {
        let dir = try TempDir("reportorder")
        defer { dir.remove() }
        let store = try Store(path: dir.path + "/apphost.sqlite")
        let instant = Date(timeIntervalSince1970: 1_735_689_602)
        func report(_ app: String, _ time: Date) -> TerminationReport {
            TerminationReport(id: "\(app)-\(Int(time.timeIntervalSince1970 * 1000))-1", bundleIdentifier: BundleID(stringLiteral: app), pid: 1,
                              time: time, exceptionType: "EXC_RESOURCE", exitStatus: nil, signal: 9, signalName: "SIGKILL",
                              terminationNamespace: "JETSAM", terminationCode: nil, reason: "jetsam", backgroundTasks: [], lastStates: [])
        }
        // Killed in this order at one instant; the ids sort the other way.
        for app in ["com.z.news", "com.m.maps", "com.a.mail"] { try store.saveReport(report(app, instant)) }
        try store.saveReport(report("com.a.first", instant.addingTimeInterval(-1)))
        #expect(try store.reports(bundleIdentifier: nil).map(\.bundleIdentifier.rawValue) == ["com.a.first", "com.z.news", "com.m.maps", "com.a.mail"])
    }
}
