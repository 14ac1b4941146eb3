import AppHostSystem
import Foundation
import SystemPackage
import TestSupport
import Testing

@Suite("ProcessReaper", .tags(.process), .timeLimit(.minutes(3)))
struct ProcessReaperTests {
    @Test func sandboxCheckSeesTheBaselineSandbox() async throws {
        guard let checker = sandboxCheckPath() else { return }
        let dir = try TemporaryDirectory()
        let (ours, theirs) = try makeSocketPair()
        defer { try? ours.close() }
        let settings = SpawnSettings(
            executablePath: checker,
            arguments: ["aph-sandbox-check"],
            environment: ["PATH": "/usr/bin:/bin"],
            workingDirectory: dir.path,
            ipcDescriptor: theirs,
            seccomp: .baseline)
        let result: (events: [ChildEvent], stdout: String)
        do {
            result = try await runToExit(settings)
        } catch {
            try? theirs.close()
            throw error
        }
        try theirs.close()
        #expect(result.events == [.exited(.exited(code: 0))], "stdout:\n\(result.stdout)")

        var facts: [String: String] = [:]
        for line in result.stdout.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1)
            if parts.count == 2 { facts[String(parts[0])] = String(parts[1]) }
        }
        var syscalls: [String: String] = [:]
        for line in result.stdout.split(separator: "\n") where line.hasPrefix("syscall ") {
            let parts = line.split(separator: " ", maxSplits: 2)
            syscalls[String(parts[1])] = String(parts[2])
        }
        #expect(result.stdout.hasSuffix("done\n"), "stdout:\n\(result.stdout)")
        #expect(facts["sid"] != nil && facts["sid"] == facts["pid"], "new session")
        #expect(facts["cwd"] == dir.path)
        #expect(facts["fds"] == "0 1 2 3")
        #expect(facts["fd3"] == "socket")
        #expect(facts["nonewprivs"] == "1")
        #expect(facts["seccomp"] == "2")
        #expect(facts["sigblk"] == "0000000000000000")
        #expect(facts["sigign"] == "0000000000000000")
        #expect(facts["thread"] == "ok")

        let denied = [
            "ptrace", "mount", "umount2", "unshare", "setns", "bpf", "perf_event_open",
            "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
            "reboot", "keyctl", "add_key", "request_key", "process_vm_readv",
            "process_vm_writev", "pivot_root", "swapon", "swapoff", "clone-newuser",
        ]
        for name in denied {
            #expect(syscalls[name] == "1 EPERM", "\(name): \(syscalls[name] ?? "missing")")
        }
        #expect(syscalls["clone3"] == "38 ENOSYS")
    }

    @Test func stopContinueAndKillAreReportedInOrder() async throws {
        let (child, events) = try await ProcessReaper.shared.spawn(
            SpawnSettings(executablePath: "/bin/sleep", arguments: ["sleep", "1000"], seccomp: .none))
        defer { try? child.signal(SIGKILL) }
        var iterator = events.makeAsyncIterator()
        let started = try ProcStat.read(pid: child.pid)
        #expect(started.session == child.pid)

        try child.signal(SIGSTOP)
        #expect(await iterator.next() == .stopped(signal: SIGSTOP))
        #expect(try ProcStat.read(pid: child.pid).state == "T")

        try child.signal(SIGCONT)
        #expect(await iterator.next() == .continued)
        #expect(try ProcStat.read(pid: child.pid).state != "T")

        try child.signal(SIGKILL)
        #expect(await iterator.next() == .exited(.signaled(signal: SIGKILL, coreDumped: false)))
        #expect(await iterator.next() == nil)
        #expect(child.exitStatus == .signaled(signal: SIGKILL, coreDumped: false))

        // Reaped: the pid is gone (or, if already reused, by another process).
        do {
            let now = try ProcStat.read(pid: child.pid)
            #expect(now.startTicks != started.startTicks)
        } catch {
            #expect(error.processIsGone, "\(error)")
        }
        #expect(throws: Errno.noSuchProcess) { try child.signal(SIGTERM) }
    }

    @Test func exitCodeIsReported() async throws {
        let result = try await runToExit(
            SpawnSettings(executablePath: "/bin/sh", arguments: ["sh", "-c", "exit 3"]))
        #expect(result.events == [.exited(.exited(code: 3))])
    }

    @Test func forkArgumentsAndEnvironmentWorkUnderTheBaselineFilter() async throws {
        let result = try await runToExit(SpawnSettings(
            executablePath: "/bin/sh",
            arguments: ["sh", "-c", "/bin/echo \"$1:$GREETING\"; exit 4", "sh", "one two"],
            environment: ["GREETING": "hello world", "PATH": "/usr/bin:/bin"],
            seccomp: .baseline))
        #expect(result.stdout == "one two:hello world\n")
        #expect(result.events == [.exited(.exited(code: 4))])
    }

    @Test func resourceLimitsAreApplied() async throws {
        let result = try await runToExit(SpawnSettings(
            executablePath: "/bin/sh",
            arguments: ["sh", "-c", "ulimit -n"],
            resourceLimits: [ResourceLimit(.openFiles, soft: 64, hard: 128)]))
        #expect(result.stdout == "64\n")
        #expect(result.events == [.exited(.exited(code: 0))])
    }

    @Test func extraDeniedSyscallsAreDenied() async throws {
        // `uname` fails under the filter: the sh builtin-free `uname` binary exits non-zero.
        let result = try await runToExit(SpawnSettings(
            executablePath: "/bin/uname",
            arguments: ["uname"],
            seccomp: .baseline(extraDenied: ["uname"])))
        #expect(result.stdout == "")
        #expect(result.events != [.exited(.exited(code: 0))])
    }

    @Test func execFailureNamesExecveAndThePath() async throws {
        let path = "/nonexistent/aph-no-such-binary"
        let error = await #expect(throws: SpawnError.self) {
            _ = try await ProcessReaper.shared.spawn(SpawnSettings(executablePath: path))
        }
        #expect(error?.code == .execve)
        #expect(error?.errno == .noSuchFileOrDirectory)
        #expect(error?.path == path)
        #expect(error?.description == "execve \(path) failed: No such file or directory (ENOENT)")
    }

    @Test func chdirFailureNamesChdir() async throws {
        let dir = try TemporaryDirectory()
        let missing = dir.path + "/missing"
        let error = await #expect(throws: SpawnError.self) {
            _ = try await ProcessReaper.shared.spawn(
                SpawnSettings(executablePath: "/bin/true", workingDirectory: missing))
        }
        #expect(error?.code == .chdir)
        #expect(error?.errno == .noSuchFileOrDirectory)
        #expect(error?.description == "chdir to \(missing) failed: No such file or directory (ENOENT)")
    }

    @Test func setrlimitFailureNamesTheLimit() async throws {
        // Above fs.nr_open: refused even for root.
        let error = await #expect(throws: SpawnError.self) {
            _ = try await ProcessReaper.shared.spawn(SpawnSettings(
                executablePath: "/bin/true",
                resourceLimits: [ResourceLimit(.openFiles, soft: 1 << 40)]))
        }
        #expect(error?.code == .setrlimit)
        #expect(error?.detail?.hasPrefix("RLIMIT_NOFILE=") == true)
    }

    @Test func invalidSettingsAreRefusedBeforeSpawning() async throws {
        let error = await #expect(throws: SpawnError.self) {
            _ = try await ProcessReaper.shared.spawn(
                SpawnSettings(executablePath: "/bin/true", environment: ["A=B": "c"]))
        }
        #expect(error?.code == .invalidSettings)
    }

    @Test func unknownSyscallNameIsRefused() async throws {
        let error = await #expect(throws: SpawnError.self) {
            _ = try await ProcessReaper.shared.spawn(SpawnSettings(
                executablePath: "/bin/true", seccomp: .baseline(extraDenied: ["no_such_syscall"])))
        }
        #expect(error?.code == .seccompCompile)
        #expect(error?.description.contains("no_such_syscall") == true)
    }

    @Test func manyChildrenInParallelAreAllReaped() async throws {
        try await withThrowingTaskGroup(of: [ChildEvent].self) { group in
            for code in 0..<16 {
                group.addTask {
                    try await runToExit(SpawnSettings(
                        executablePath: "/bin/sh", arguments: ["sh", "-c", "exit \(code)"])).events
                }
            }
            var codes: [Int32] = []
            for try await events in group {
                guard case .exited(.exited(let code))? = events.last, events.count == 1 else {
                    Issue.record("unexpected events \(events)")
                    continue
                }
                codes.append(code)
            }
            #expect(codes.sorted() == Array(0..<16))
        }
    }
}

@Suite("aph_spawn death signal", .tags(.process), .timeLimit(.minutes(3)))
struct DeathSignalTests {
    /// The sandbox checker spawns a grandchild from a thread that then exits;
    /// PR_SET_PDEATHSIG must kill the grandchild. Inside the baseline filter
    /// (aph_spawn clones with CLONE_VM|CLONE_VFORK|CLONE_PIDFD through glibc's
    /// clone(), which the filter allows; its clone + pidfd_open fallback, for
    /// kernels or filters that refuse CLONE_PIDFD, is not exercised here.)
    @Test func grandchildDiesWithTheSpawningThread() async throws {
        guard let checker = sandboxCheckPath() else { return }
        let result = try await runToExit(SpawnSettings(
            executablePath: checker, arguments: ["aph-sandbox-check", "--pdeathsig"], seccomp: .baseline))
        #expect(result.events == [.exited(.exited(code: 0))], "stdout: \(result.stdout)")
        let words = result.stdout.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        #expect(words.count == 4 && words[0] == "pdeathsig" && words[2] == "signaled" && words[3] == "\(SIGKILL)",
                "stdout: \(result.stdout)")
    }
}
