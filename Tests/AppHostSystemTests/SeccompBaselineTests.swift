import AppHostSystem
import Foundation
import TestSupport
import Testing

/// The baseline's rules on other processes' limits and nice values, and on
/// userfaultfd: `aph-sandbox-check`'s syscall probes under the baseline, and
/// without a filter (where the same probes must reach the kernel and fail
/// there, harmlessly, so a pass under the filter means the filter refused).
@Suite("Seccomp baseline: other processes, userfaultfd", .tags(.process), .timeLimit(.minutes(3)))
struct SeccompBaselineTests {
    @Test func otherProcessesLimitsAndNiceValuesAndUserfaultfdAreDenied() async throws {
        guard sandboxCheckPath() != nil else { return }
        let probes = try await sandboxSyscallProbes(seccomp: .baseline)
        for name in ["userfaultfd", "prlimit64-other", "setpriority-other", "setpriority-which"] {
            #expect(probes[name] == "1 EPERM", "\(name): \(probes[name] ?? "missing")")
        }
        // Its own limits and nice value stay its own (glibc's getrlimit and
        // setrlimit, libdispatch's worker threads).
        #expect(probes["prlimit64-self"] == "0 OK")
        #expect(probes["setpriority-self"] == "0 OK")
        #expect(SeccompPolicy.baselineDeniedSyscalls.contains("userfaultfd"))
    }

    @Test func withoutAFilterTheProbesFailInTheKernel() async throws {
        guard sandboxCheckPath() != nil else { return }
        let probes = try await sandboxSyscallProbes(seccomp: .none)
        #expect(probes["userfaultfd"] == "\(EINVAL) EINVAL", "an unknown flag, no descriptor")
        #expect(probes["prlimit64-other"] == "\(ESRCH) ESRCH", "no such pid")
        #expect(probes["setpriority-other"] == "\(ESRCH) ESRCH", "no such pid")
        #expect(probes["setpriority-which"] == "\(EINVAL) EINVAL", "no such which")
        #expect(probes["prlimit64-self"] == "0 OK")
        #expect(probes["setpriority-self"] == "0 OK")
    }

    @Test func extraDeniedRulesOnTheSameSyscallsStillCompile() throws {
        // An unconditional rule beside the baseline's argument rules.
        let program = try SeccompProgram.compile(.baseline(extraDenied: ["prlimit64", "setpriority"]))
        #expect(program != nil)
    }
}
