import AppHostSystem
import Foundation
import TestSupport
import Testing

/// The shipped suite on a host run by a user: `apphost test scenarios/ios` as uid 65534,
/// whose apps share its uid and run in namespaces of their own. What a root host does by
/// per-app uids (data protection, decision 0050) and what a pid namespace changes (an
/// abort, decision 0051) must give the same outcomes.
@Suite("The shipped suite on a user's host")
struct UserHostSuiteTests {
    @Test(.tags(.slow), .enabled(if: getuid() == 0, "needs root to run apphost as another user (run as a user, `apphost test scenarios/ios` is that host)"))
    func theShippedSuitePassesOnAHostRunByAUser() async throws {
        let user = ProcessIdentity(uid: 65534, gid: 65534)
        let dir = try TempDir("usr")
        defer { dir.remove() }
        #expect(chown(dir.path, user.uid, user.gid) == 0)
        let files = try FileManager.default.contentsOfDirectory(atPath: packageRoot + "/scenarios/ios").filter { $0.hasSuffix(".yaml") }
        let process = try CLIProcess(["test", "--jobs", "2", packageRoot + "/scenarios/ios"],
                                     environment: ["TMPDIR": dir.path + "/", "HOME": dir.path], identity: user)
        let exit = await process.waitForExit()
        let output = process.stdout + process.stderr
        if output.contains("this machine refused them user namespaces") {
            withKnownIssue("this machine refuses unprivileged user namespaces") { Issue.record("\(output)") }
            return
        }
        let failures = output.split(separator: "\n").filter { $0.hasPrefix("FAIL") || $0.hasPrefix("ERROR") || $0.hasPrefix("SKIP") }
        #expect(exit == .exited(0), "apphost test as uid 65534: \(exit)\n\(failures.joined(separator: "\n"))\n\(output.suffix(4000))")
        #expect(output.contains("\(files.count) scenario(s): \(files.count) passed, 0 failed, 0 could not run"), "\(output.suffix(4000))")
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        // The data-protection scenarios ran (a user's host covers the files), not skipped.
        #expect(output.contains("PASS  An app launched while the device is locked finds its protected files closed from its first line"))
    }
}
