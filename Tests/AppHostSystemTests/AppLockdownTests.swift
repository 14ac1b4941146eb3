import AppHostSystem
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `SpawnSettings.appLockdown`, the filter apps run under besides their seccomp policy:
/// after the launch's own `execve` no exec at all (iOS code signing: no code the app
/// wrote or fetched), and the scheduling calls and `pidfd_open` reach only the process
/// itself. Each test spawns `aph-sandbox-check` with the same seccomp policy with and
/// without the lockdown, so what changes is the lockdown's doing.
@Suite("SpawnSettings app lockdown", .tags(.process), .timeLimit(.minutes(3)))
struct AppLockdownTests {
    /// The host's pid stands for "another process": the test runner, this process.
    static var arguments: [String] {
        let other = String(getpid())
        return ["--execve-missing", "-", "--execveat-memfd", "-",
                "--setaffinity", other, "--setaffinity", "self",
                "--pidfd-open", other, "--pidfd-open", "self",
                "--thread", "-", "--dispatch", "-"]
    }

    @Test func afterItsLaunchAnAppExecsNothingAndSchedulesOnlyItself() async throws {
        let other = String(getpid())
        let verdicts = try await sandboxCheck(Self.arguments, seccomp: .baseline, appLockdown: true)
        // It was launched (an execve), and it runs: the launch's own exec was let through.
        #expect(verdicts["execve-missing -"] == "EPERM", "\(verdicts)")
        #expect(verdicts["execveat-memfd -"] == "EPERM", "\(verdicts)")
        #expect(verdicts["setaffinity \(other)"] == "EPERM", "\(verdicts)")
        #expect(verdicts["pidfd-open \(other)"] == "EPERM", "\(verdicts)")
        #expect(verdicts["setaffinity self"] == "ok", "its own pid: \(verdicts)")
        #expect(verdicts["pidfd-open self"] == "ok", "its own pid: \(verdicts)")
        #expect(verdicts["thread -"] == "ok")
        #expect(verdicts["dispatch -"] == "ok")
    }

    @Test func withoutItTheSameCallsGetThrough() async throws {
        let other = String(getpid())
        let verdicts = try await sandboxCheck(Self.arguments, seccomp: .baseline, appLockdown: false)
        #expect(verdicts["execve-missing -"] == "ENOENT", "the path walk: \(verdicts)")
        #expect(verdicts["execveat-memfd -"] == "ENOEXEC", "the loader: \(verdicts)")
        #expect(verdicts["pidfd-open \(other)"] == "ok", "\(verdicts)")
        // (Another process's CPUs stay refused here without the lockdown: the kernel's
        // cap_safe_nice refuses a caller without CAP_SYS_NICE a target holding capabilities
        // it lacks, and the test runner holds what the child dropped. The escape suite
        // shows the app's case, a host of its own uid.)
        #expect(verdicts["setaffinity self"] == "ok", "\(verdicts)")
    }

    @Test func withoutASeccompPolicyThereIsNoLockdown() async throws {
        // The lockdown is a seccomp filter: a host with seccomp off says so at startup.
        let verdicts = try await sandboxCheck(["--execve-missing", "-"], seccomp: .none, appLockdown: true)
        #expect(verdicts["execve-missing -"] == "ENOENT", "\(verdicts)")
    }
}
