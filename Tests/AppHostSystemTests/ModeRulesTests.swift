import AppHostSystem
import Foundation
import SystemPackage
import TestSupport
import Testing

/// The seccomp rules behind background modes and the app sandbox: socket
/// families denied by argument, Unix sockets limited to connected pairs. Each
/// test spawns `aph-sandbox-check` with check options and reads its one-line
/// verdicts. (The Landlock side is in `LandlockTests`.)
@Suite("ModeRules", .tags(.process), .timeLimit(.minutes(3)))
struct ModeRulesTests {
    /// AF_BLUETOOTH.
    static let bluetooth: Int32 = 31

    // MARK: - Socket families (seccomp)

    @Test func bluetoothSocketsAreDeniedOnlyWhenTheFamilyIs() async throws {
        let arguments = [
            "--socket", "bluetooth", "--socketpair", "bluetooth", "--socket-high", "bluetooth",
            "--socket", "unix", "--socketpair", "unix", "--socket-high", "unix",
        ]
        let open = try await sandboxCheck(arguments, seccomp: .baseline)
        // Not EPERM: the filter let it through. Without a bluetooth stack the
        // kernel answers EAFNOSUPPORT; with one the socket would be made.
        for label in ["socket bluetooth", "socketpair bluetooth", "socket-high bluetooth"] {
            #expect(open[label] != nil && open[label] != "EPERM", "\(label): \(open[label] ?? "missing")")
        }
        #expect(open["socket unix"] == "ok")
        #expect(open["socketpair unix"] == "ok")
        #expect(open["socket-high unix"] == "ok", "the kernel reads the family as an int")

        var policy = SeccompPolicy.baseline
        policy.deniedSocketFamilies = [Self.bluetooth]
        let denied = try await sandboxCheck(arguments, seccomp: policy)
        #expect(denied["socket bluetooth"] == "EPERM")
        #expect(denied["socketpair bluetooth"] == "EPERM")
        // Garbage in the upper half of the register does not get around it.
        #expect(denied["socket-high bluetooth"] == "EPERM")
        #expect(denied["socket unix"] == "ok")
        #expect(denied["socketpair unix"] == "ok")
        #expect(denied["socket-high unix"] == "ok")
    }

    @Test func deniedFamiliesAlsoDenyIOURing() async throws {
        // io_uring's IORING_OP_SOCKET would make the socket without the syscall.
        var policy = SeccompPolicy.baseline
        policy.deniedSocketFamilies = [Self.bluetooth]
        let denied = try await sandboxSyscallProbes(seccomp: policy)
        #expect(denied["io_uring_setup"] == "1 EPERM")
        let allowed = try await sandboxSyscallProbes(seccomp: .baseline)
        #expect(allowed["io_uring_setup"] == "14 EFAULT", "NULL params, past the filter")
    }

    @Test func negativeFamilyIsRefused() throws {
        #expect {
            _ = try SeccompProgram.compile(SeccompPolicy(deniedSocketFamilies: [-1]))
        } throws: { error in
            (error as? SpawnError)?.code == .seccompCompile
        }
        let plain = try #require(try SeccompProgram.compile(.baseline))
        let more = try #require(try SeccompProgram.compile(SeccompPolicy(deniedSocketFamilies: [Self.bluetooth])))
        #expect(more.instructionCount > plain.instructionCount)
    }

    @Test func unixSocketsArePairsOnlyWhenDenied() async throws {
        let arguments = ["--socket", "unix", "--socketpair", "unix", "--socketpair", "unix-dgram",
                         "--socket", "inet", "--socket-high", "unix"]
        let open = try await sandboxCheck(arguments, seccomp: .baseline)
        #expect(open.values.allSatisfy { $0 == "ok" }, "\(open)")

        var policy = SeccompPolicy.baseline
        policy.deniesUnixSocketCreation = true
        let denied = try await sandboxCheck(arguments, seccomp: policy)
        // No socket to connect with: the control socket cannot be reached by its path.
        #expect(denied["socket unix"] == "EPERM")
        #expect(denied["socket-high unix"] == "EPERM")
        // A connected stream pair stays (libcurl and others wake themselves with one);
        // a datagram pair could sendto any path, so it goes too.
        #expect(denied["socketpair unix"] == "ok")
        #expect(denied["socketpair unix-dgram"] == "EPERM")
        #expect(denied["socket inet"] == "ok")
        let probes = try await sandboxSyscallProbes(seccomp: policy)
        #expect(probes["io_uring_setup"] == "1 EPERM")
    }
}
