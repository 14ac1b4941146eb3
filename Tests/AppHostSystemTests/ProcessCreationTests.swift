import AppHostSystem
import Foundation
import SystemPackage
import TestSupport
import Testing

/// `SeccompPolicy.deniesProcessCreation`, the rule apps run under: as on iOS, an
/// app makes threads but no process. Each test spawns `aph-sandbox-check` with
/// check options and reads its one-line verdicts.
@Suite("SeccompPolicy process creation", .tags(.process), .timeLimit(.minutes(3)))
struct ProcessCreationTests {
    /// fork(3), the fork syscall, posix_spawn, then the three ways a Swift app makes threads.
    static let arguments = [
        "--fork", "-", "--fork-syscall", "-", "--exec", "/bin/true",
        "--thread", "-", "--dispatch", "-", "--foundation-thread", "-",
    ]

    static var denying: SeccompPolicy {
        var policy = SeccompPolicy.baseline
        policy.deniesProcessCreation = true
        return policy
    }

    @Test func forkAndSpawnFailWithEPERMWhileThreadsWork() async throws {
        let verdicts = try await sandboxCheck(Self.arguments, seccomp: Self.denying)
        #expect(verdicts["fork -"] == "EPERM", "glibc's fork is a clone without CLONE_THREAD")
        // x86_64 has a fork syscall; aarch64 does not.
        #expect(["EPERM", "none here"].contains(verdicts["fork-syscall -"]), "\(verdicts)")
        // posix_spawn: clone3 fails with ENOSYS, then clone(CLONE_VM|CLONE_VFORK) with EPERM.
        #expect(verdicts["exec /bin/true"] == "EPERM")
        #expect(verdicts["thread -"] == "ok")
        #expect(verdicts["dispatch -"] == "ok")
        #expect(verdicts["foundation-thread -"] == "ok")
    }

    @Test func withoutTheRuleProcessesAreMade() async throws {
        let verdicts = try await sandboxCheck(Self.arguments, seccomp: .baseline)
        #expect(verdicts["fork -"] == "ok")
        #expect(["ok", "none here"].contains(verdicts["fork-syscall -"]), "\(verdicts)")
        #expect(verdicts["exec /bin/true"] == "ok")
        #expect(verdicts["thread -"] == "ok")
    }

    @Test func theRuleStandsWithAndWithoutTheNamespaceRule() async throws {
        // Both add clone3 → ENOSYS: one rule, a valid filter either way.
        var alone = Self.denying
        alone.deniesNamespaceCreation = false
        let both = try #require(try SeccompProgram.compile(Self.denying))
        let plain = try #require(try SeccompProgram.compile(.baseline))
        #expect(both.instructionCount > plain.instructionCount)
        let verdicts = try await sandboxCheck(["--fork", "-", "--thread", "-"], seccomp: alone)
        #expect(verdicts["fork -"] == "EPERM")
        #expect(verdicts["thread -"] == "ok")
        let probes = try await sandboxSyscallProbes(seccomp: alone)
        #expect(probes["clone3"] == "38 ENOSYS")
        // A namespace clone is a clone without CLONE_THREAD: denied by this rule alone.
        #expect(probes["clone-newuser"] == "1 EPERM")
    }
}
