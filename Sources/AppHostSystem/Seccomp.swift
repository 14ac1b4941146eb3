import CAppHostSys
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Which syscalls the child's seccomp filter denies. The filter allows
/// everything else; denied calls fail with EPERM (clone3 with ENOSYS, so
/// glibc falls back to clone, whose flags are then filtered).
/// Socket families are denied by argument: `socket(AF_BLUETOOTH, ...)`
/// fails, `socket(AF_UNIX, ...)` works.
public struct SeccompPolicy: Sendable, Hashable {
    /// Whether a filter is loaded at all.
    public var isEnabled: Bool
    /// Deny `SeccompPolicy.baselineDeniedSyscalls`, and by argument another
    /// process's limits and nice value: `prlimit64` with a pid other than 0,
    /// `setpriority` with a `who` other than 0 or a `which` other than
    /// `PRIO_PROCESS` (glibc's `getrlimit`/`setrlimit` pass pid 0, libdispatch
    /// sets its workers' nice value with `setpriority(PRIO_PROCESS, 0, n)`).
    public var deniesBaseline: Bool
    /// Deny creating namespaces through clone/clone3 (unshare and setns are
    /// in the baseline).
    public var deniesNamespaceCreation: Bool
    /// More syscalls to deny, by name (e.g. a plugin's rules).
    public var extraDenied: [String]
    /// Address families (`AF_*`, e.g. 31 for AF_BLUETOOTH) whose `socket`
    /// and `socketpair` fail with EPERM. Any family here also denies
    /// `io_uring_setup`, whose IORING_OP_SOCKET would make the socket
    /// without the syscall.
    public var deniedSocketFamilies: [Int32]
    /// Deny `socket(AF_UNIX, ...)`, so no Unix socket can be connected to by
    /// path or abstract name (Landlock does not check `connect(2)`), and
    /// `socketpair(AF_UNIX, ...)` of datagram kinds (a datagram end could
    /// `sendto` any path). Stream and seqpacket pairs stay allowed: they are
    /// connected to each other only. Denies `io_uring_setup` too.
    public var deniesUnixSocketCreation: Bool
    /// Deny making processes, as iOS's sandbox does: `fork`, `vfork` and
    /// `clone` without `CLONE_THREAD` fail with EPERM (so do `posix_spawn`
    /// and `system`), `clone3` with ENOSYS. Threads are made as before.
    public var deniesProcessCreation: Bool

    /// Creates a policy.
    public init(isEnabled: Bool = true, deniesBaseline: Bool = true,
                deniesNamespaceCreation: Bool = true, extraDenied: [String] = [],
                deniedSocketFamilies: [Int32] = [], deniesUnixSocketCreation: Bool = false,
                deniesProcessCreation: Bool = false) {
        self.isEnabled = isEnabled
        self.deniesBaseline = deniesBaseline
        self.deniesNamespaceCreation = deniesNamespaceCreation
        self.extraDenied = extraDenied
        self.deniedSocketFamilies = deniedSocketFamilies
        self.deniesUnixSocketCreation = deniesUnixSocketCreation
        self.deniesProcessCreation = deniesProcessCreation
    }

    /// No filter.
    public static let none = SeccompPolicy(isEnabled: false, deniesBaseline: false,
                                           deniesNamespaceCreation: false)
    /// The baseline filter.
    public static let baseline = SeccompPolicy()

    /// The baseline filter plus more denied syscalls (by name).
    public static func baseline(extraDenied: [String]) -> SeccompPolicy {
        SeccompPolicy(extraDenied: extraDenied)
    }

    /// The syscalls the baseline denies with EPERM whatever their arguments
    /// (`prlimit64` and `setpriority` are denied by argument, not listed).
    public static var baselineDeniedSyscalls: [String] {
        var count = 0
        guard let names = aph_seccomp_baseline_names(&count) else { return [] }
        return (0..<count).compactMap { names[$0].map { String(cString: $0) } }
    }
}

/// A seccomp policy compiled to classic BPF in the host, ready for a child to
/// load with one prctl (no libseccomp, no allocation after fork).
public struct SeccompProgram: Sendable, Hashable {
    /// The raw `struct sock_filter` array (8 bytes per instruction).
    public let bytes: [UInt8]

    /// The number of BPF instructions.
    public var instructionCount: Int { bytes.count / 8 }

    /// Compiles `policy`; nil when the policy is `.none` (disabled).
    public static func compile(_ policy: SeccompPolicy) throws(SpawnError) -> SeccompProgram? {
        guard policy.isEnabled else { return nil }
        var numbers: [Int32] = []
        for name in policy.extraDenied {
            var number: Int32 = 0
            let rc = aph_seccomp_resolve(name, &number)
            guard rc == 0 else {
                throw SpawnError(code: .seccompCompile,
                                 detail: "unknown syscall \"\(name)\" in extraDenied")
            }
            numbers.append(number)
        }
        for family in policy.deniedSocketFamilies where family < 0 {
            throw SpawnError(code: .seccompCompile,
                             detail: "negative address family \(family) in deniedSocketFamilies")
        }
        let families = Array(Set(policy.deniedSocketFamilies)).sorted()
        var program = aph_bpf_program()
        let rc = numbers.withUnsafeBufferPointer { buffer in
            families.withUnsafeBufferPointer { familyBuffer in
                var settings = aph_seccomp_settings(
                    include_baseline: policy.deniesBaseline ? 1 : 0,
                    deny_namespace_clone: policy.deniesNamespaceCreation ? 1 : 0,
                    extra_denied: buffer.baseAddress,
                    extra_denied_count: buffer.count,
                    denied_socket_families: familyBuffer.baseAddress,
                    denied_socket_family_count: familyBuffer.count,
                    deny_errno: EPERM,
                    deny_unix_socket_creation: policy.deniesUnixSocketCreation ? 1 : 0,
                    deny_process_creation: policy.deniesProcessCreation ? 1 : 0)
                return aph_seccomp_compile(&settings, &program)
            }
        }
        guard rc == 0 else {
            throw SpawnError(code: .seccompCompile, errno: Errno(rawValue: rc))
        }
        defer { aph_bpf_program_free(&program) }
        let count = Int(program.length) * 8
        guard let instructions = program.instructions else {
            throw SpawnError(code: .seccompCompile, errno: .invalidArgument, detail: "empty program")
        }
        let bytes = Array(UnsafeRawBufferPointer(start: instructions, count: count))
        return SeccompProgram(bytes: bytes)
    }
}
