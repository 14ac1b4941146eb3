import AppHostSystem
import Foundation
import TestSupport
import Testing

/// The shipped scenarios that a host run by a user does differently from a root host,
/// run by `apphost test` as uid 65534, whose apps share its uid and run in namespaces of
/// their own: data protection (covers in the app's mount namespace, decision 0050), an
/// abort and an exit of a pid namespace's init (decision 0051). They must give the same
/// outcomes as on a root host. (The whole suite passes as a user too, 100 of 100 on
/// 2026-11-30; run here, it doubled the suite's load.)
@Suite("The shipped suite on a user's host")
struct UserHostSuiteTests {
    static let scenarios = [
        "data-protection-app-group", "data-protection-launch-while-locked", "data-protection-locked-device",
        "data-protection-unless-open",
        "bgtask-launch-without-handler", "data-task-background-session-sigabrt", "location-background-without-mode",
        "voip-delegate-returns-without-call-aborts", "voip-unreported-pushes-stop-delivery",
        "update-terminates-running-app", "suspended-app-terminated-without-callback", "user-terminate-unresponsive",
    ]

    @Test(.enabled(if: getuid() == 0, "needs root to run apphost as another user (run as a user, `apphost test scenarios/ios` is that host)"))
    func whatAUsersHostDoesDifferentlyGivesTheSameOutcomes() async throws {
        let user = ProcessIdentity(uid: 65534, gid: 65534)
        let dir = try TempDir("usr")
        defer { dir.remove() }
        #expect(chown(dir.path, user.uid, user.gid) == 0)
        let files = Self.scenarios.map { packageRoot + "/scenarios/ios/\($0).yaml" }
        for file in files { #expect(FileManager.default.fileExists(atPath: file), "\(file)") }
        let process = try CLIProcess(["test", "--jobs", "1"] + files,
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
    }
}
