import AppHostSystem
import Foundation
import SystemPackage
import Testing

@Suite("Descriptions")
struct DescriptionTests {
    @Test func signalNames() {
        #expect(signalName(SIGKILL) == "SIGKILL")
        #expect(signalName(SIGSTOP) == "SIGSTOP")
        #expect(signalName(SIGTERM) == "SIGTERM")
        #expect(signalName(35) == "SIGRTMIN+1")
        #expect(signalName(99) == "SIG99")
    }

    @Test func exitStatuses() throws {
        #expect(ExitStatus.exited(code: 3).description == "exit 3")
        #expect(ExitStatus.signaled(signal: SIGKILL, coreDumped: false).description == "SIGKILL")
        #expect(ExitStatus.signaled(signal: SIGSEGV, coreDumped: true).description == "SIGSEGV (core dumped)")
        let data = try JSONEncoder().encode(ExitStatus.signaled(signal: 9, coreDumped: false))
        #expect(try JSONDecoder().decode(ExitStatus.self, from: data) == .signaled(signal: 9, coreDumped: false))
    }

    @Test func spawnErrors() {
        #expect(SpawnError(code: .chdir, errno: .noSuchFileOrDirectory, path: "/x").description
            == "chdir to /x failed: No such file or directory (ENOENT)")
        #expect(SpawnError(code: .execve, errno: .permissionDenied, path: "/bin/x").description
            == "execve /bin/x failed: Permission denied (EACCES)")
        #expect(SpawnError(code: .invalidSettings, detail: "empty executable path").description
            == "invalid spawn settings: empty executable path")
    }

    @Test func baselineListCoversTheRequiredSyscalls() throws {
        let names = Set(SeccompPolicy.baselineDeniedSyscalls)
        for name in ["ptrace", "mount", "umount2", "unshare", "setns", "bpf", "perf_event_open",
                     "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
                     "reboot", "keyctl", "add_key", "request_key", "process_vm_readv",
                     "process_vm_writev", "pivot_root", "swapon", "swapoff"] {
            #expect(names.contains(name), "\(name)")
        }
        let program = try #require(try SeccompProgram.compile(.baseline))
        #expect(program.instructionCount > names.count)
        #expect(try SeccompProgram.compile(.none) == nil)
    }

    @Test func socketPairIsConnected() throws {
        let (a, b) = try makeSocketPair()
        defer { try? a.close(); try? b.close() }
        _ = try a.writeAll("ping".utf8)
        var buffer = [UInt8](repeating: 0, count: 4)
        let n = try buffer.withUnsafeMutableBytes { try b.read(into: $0) }
        #expect(String(decoding: buffer[0..<n], as: UTF8.self) == "ping")
        #expect(fcntl(a.rawValue, F_GETFD) & FD_CLOEXEC != 0)
    }
}
