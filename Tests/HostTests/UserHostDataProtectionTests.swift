import AppHostSystem
import Foundation
import TestSupport
import Testing

/// Data protection on a host run by a user (issue 33, point 13; decision 0050): the
/// shipped data-protection scenarios, which a root host passes by per-app uids, run by
/// `apphost test` as uid 65534, whose apps share its uid and have their protected files
/// covered in their own mount namespaces.
@Suite("Data protection on a user's host")
struct UserHostDataProtectionTests {
    @Test(.enabled(if: getuid() == 0, "needs root to run apphost as another user (run as a user, `apphost test scenarios/ios` is that host)"))
    func theDataProtectionScenariosPassOnAHostRunByAUser() async throws {
        let user = ProcessIdentity(uid: 65534, gid: 65534)
        let dir = try TempDir("dpu")
        defer { dir.remove() }
        #expect(chown(dir.path, user.uid, user.gid) == 0)
        let files = try FileManager.default.contentsOfDirectory(atPath: packageRoot + "/scenarios/ios")
            .filter { $0.hasPrefix("data-protection-") && $0.hasSuffix(".yaml") }.sorted()
        #expect(files.count == 4, "\(files)")
        let process = try CLIProcess(["test", "--jobs", "1"] + files.map { packageRoot + "/scenarios/ios/" + $0 },
                                     environment: ["TMPDIR": dir.path + "/", "HOME": dir.path], identity: user)
        let exit = await process.waitForExit()
        let output = process.stdout + process.stderr
        if output.contains("needs data protection: its apps share its uid and this machine refused them user namespaces") {
            withKnownIssue("this machine refuses unprivileged user namespaces") { Issue.record("\(output)") }
            return
        }
        #expect(exit == .exited(0), "apphost test as uid 65534: \(exit)\n\(output)")
        #expect(output.contains("\(files.count) scenario(s): \(files.count) passed, 0 failed, 0 could not run"), "\(output)")
        #expect(!output.contains("SKIP"), "\(output)")
    }
}
