import Foundation
import Testing

/// `apphost privacy-check` runs that once went wrong.
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
}
