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
}
