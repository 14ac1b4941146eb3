import CAppHostSys
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Everything needed to start one sandboxed child.
///
/// Descriptors are borrowed: the spawn duplicates them into the child and the
/// caller keeps (and later closes) its own copies.
public struct SpawnSettings: Sendable {
    /// Absolute path of the executable (no PATH search).
    public var executablePath: String
    /// The child's argv, argv[0] included.
    public var arguments: [String]
    /// The child's complete environment (nothing is inherited).
    public var environment: [String: String]
    /// Directory the child starts in; nil keeps the host's.
    public var workingDirectory: String?
    /// The child's stdin; nil means /dev/null.
    public var standardInput: FileDescriptor?
    /// The child's stdout; nil means /dev/null.
    public var standardOutput: FileDescriptor?
    /// The child's stderr; nil means /dev/null.
    public var standardError: FileDescriptor?
    /// Installed as descriptor 3 in the child (e.g. one end of `makeSocketPair()`); nil leaves 3 closed.
    public var ipcDescriptor: FileDescriptor?
    /// Installed as descriptor 4 in the child (an app's run-loop stamp page, see
    /// ``RunLoopStampPage``); nil leaves 4 closed.
    public var stampDescriptor: FileDescriptor?
    /// Resource limits applied in the child before execve.
    public var resourceLimits: [ResourceLimit]
    /// The seccomp filter loaded last before execve.
    public var seccomp: SeccompPolicy
    /// What the child may reach (Landlock), enforced right after
    /// PR_SET_NO_NEW_PRIVS; nil for no Landlock at all. Where the kernel has
    /// no Landlock (`Landlock.abiVersion == nil`) the child starts without
    /// it: check `Landlock.abiVersion` to warn about it.
    public var landlock: LandlockPolicy?
    /// Drop every capability in the child before execve (bounding, ambient,
    /// inheritable, permitted and effective sets; with CAP_SETPCAP also the
    /// securebits that would give uid 0 capabilities again on exec). A host
    /// running as root then starts children with no more power than a host
    /// running as that user would.
    public var dropsCapabilities: Bool
    /// Signal the child gets when the spawning thread (the reaper's, which
    /// lives as long as the host) dies; nil for none. Default SIGKILL.
    public var deathSignal: Int32?
    /// `cgroup.procs` files (one per cgroup hierarchy) the child writes its own
    /// pid to before it does anything else of its own: it, and everything it
    /// ever forks, starts inside those cgroups. A write that fails fails the
    /// spawn (`SpawnError.Code.joinCgroup`), so no child runs outside its limits.
    public var cgroupProcsFiles: [String]
    /// The uid, gid and supplementary groups the child runs as (set after the
    /// rlimits, with the capability drop); nil keeps the caller's. Needs a host
    /// running as root (CAP_SETUID, CAP_SETGID).
    public var identity: ProcessIdentity?
    /// The child's umask; nil keeps the caller's.
    public var umask: mode_t?
    /// With `dropsCapabilities`: capabilities kept through execve (as ambient
    /// ones), for a trusted helper; empty for none.
    public var keptCapabilities: Set<Capability>
    /// An app's lockdown (with a seccomp policy; ignored without one): after its launch
    /// it can exec nothing (`execve` only with the launch's own path and argv pointers,
    /// kept at random addresses; `execveat` never), and the scheduling calls
    /// (`sched_setscheduler`, `sched_setparam`, `sched_setaffinity`, `sched_setattr`,
    /// `ioprio_set`) and `pidfd_open` reach only itself. See `aph_spawn_settings`.
    public var appLockdown: Bool
    /// New user, mount, pid and IPC namespaces for the child (an app of an unprivileged
    /// host, see ``AppNamespaces``); nil for none. With `identity` only when it does not
    /// isolate the user (a root host: mount and IPC namespaces).
    public var namespaces: AppNamespaces?

    /// The descriptor number the IPC descriptor gets in the child.
    public static let childIPCDescriptor: Int32 = APH_IPC_FD
    /// The descriptor number the stamp page gets in the child.
    public static let childStampDescriptor: Int32 = APH_STAMP_FD

    /// Creates settings; `arguments` defaults to `[executablePath]`.
    public init(
        executablePath: String,
        arguments: [String]? = nil,
        environment: [String: String] = [:],
        workingDirectory: String? = nil,
        ipcDescriptor: FileDescriptor? = nil,
        standardInput: FileDescriptor? = nil,
        standardOutput: FileDescriptor? = nil,
        standardError: FileDescriptor? = nil,
        resourceLimits: [ResourceLimit] = [],
        seccomp: SeccompPolicy = .baseline,
        landlock: LandlockPolicy? = nil,
        dropsCapabilities: Bool = true,
        deathSignal: Int32? = SIGKILL,
        cgroupProcsFiles: [String] = [],
        identity: ProcessIdentity? = nil,
        umask: mode_t? = nil,
        keptCapabilities: Set<Capability> = [],
        appLockdown: Bool = false,
        namespaces: AppNamespaces? = nil
    ) {
        self.executablePath = executablePath
        self.arguments = arguments ?? [executablePath]
        self.environment = environment
        self.workingDirectory = workingDirectory
        self.standardInput = standardInput
        self.standardOutput = standardOutput
        self.standardError = standardError
        self.ipcDescriptor = ipcDescriptor
        self.resourceLimits = resourceLimits
        self.seccomp = seccomp
        self.landlock = landlock
        self.dropsCapabilities = dropsCapabilities
        self.deathSignal = deathSignal
        self.cgroupProcsFiles = cgroupProcsFiles
        self.identity = identity
        self.umask = umask
        self.keptCapabilities = keptCapabilities
        self.appLockdown = appLockdown
        self.namespaces = namespaces
    }
}

/// Who a child runs as: its uid, its primary gid and its supplementary groups.
public struct ProcessIdentity: Sendable, Hashable, CustomStringConvertible {
    /// The real, effective and saved uid.
    public var uid: uid_t
    /// The real, effective and saved gid.
    public var gid: gid_t
    /// The supplementary groups (replacing the caller's; empty for none).
    public var groups: [gid_t]

    /// Creates an identity.
    public init(uid: uid_t, gid: gid_t, groups: [gid_t] = []) {
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }

    /// "uid 200001 gid 200001 groups 200005".
    public var description: String {
        "uid \(uid) gid \(gid)" + (groups.isEmpty ? "" : " groups " + groups.map(String.init).joined(separator: ","))
    }
}

/// A Linux capability (`CAP_*`), by number.
public struct Capability: Sendable, Hashable, CustomStringConvertible {
    /// The `CAP_*` number (0...63).
    public let rawValue: Int32
    /// Creates a capability from its number.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// CAP_CHOWN: change any file's owner.
    public static let chown = Capability(rawValue: 0)
    /// CAP_DAC_OVERRIDE: read, write and search any file regardless of its mode.
    public static let dacOverride = Capability(rawValue: 1)
    /// CAP_FOWNER: act as the owner of any file.
    public static let fowner = Capability(rawValue: 3)

    /// The `CAP_*` name.
    public var description: String {
        switch self {
        case .chown: "CAP_CHOWN"
        case .dacOverride: "CAP_DAC_OVERRIDE"
        case .fowner: "CAP_FOWNER"
        default: "CAP(\(rawValue))"
        }
    }
}

/// One `setrlimit` applied in the child.
public struct ResourceLimit: Sendable, Hashable, CustomStringConvertible {
    /// Which resource (`RLIMIT_*`).
    public struct Resource: Sendable, Hashable, CustomStringConvertible {
        /// The `RLIMIT_*` number.
        public let rawValue: Int32
        /// Creates a resource from its `RLIMIT_*` number.
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// RLIMIT_CPU: CPU seconds.
        public static let cpuTime = Resource(rawValue: Int32(RLIMIT_CPU.rawValue))
        /// RLIMIT_FSIZE: largest file the process may write, in bytes.
        public static let fileSize = Resource(rawValue: Int32(RLIMIT_FSIZE.rawValue))
        /// RLIMIT_DATA: data segment size in bytes.
        public static let dataSize = Resource(rawValue: Int32(RLIMIT_DATA.rawValue))
        /// RLIMIT_STACK: main thread stack in bytes.
        public static let stackSize = Resource(rawValue: Int32(RLIMIT_STACK.rawValue))
        /// RLIMIT_CORE: core file size in bytes (0 disables core dumps).
        public static let coreFileSize = Resource(rawValue: Int32(RLIMIT_CORE.rawValue))
        /// RLIMIT_NPROC: processes/threads of the real user.
        public static let processes = Resource(rawValue: Int32(__RLIMIT_NPROC.rawValue))
        /// RLIMIT_NOFILE: one more than the highest descriptor number.
        public static let openFiles = Resource(rawValue: Int32(RLIMIT_NOFILE.rawValue))
        /// RLIMIT_MEMLOCK: locked memory in bytes.
        public static let lockedMemory = Resource(rawValue: Int32(__RLIMIT_MEMLOCK.rawValue))
        /// RLIMIT_AS: address space in bytes.
        public static let addressSpace = Resource(rawValue: Int32(RLIMIT_AS.rawValue))

        /// The `RLIMIT_*` name.
        public var description: String {
            switch self {
            case .cpuTime: "RLIMIT_CPU"
            case .fileSize: "RLIMIT_FSIZE"
            case .dataSize: "RLIMIT_DATA"
            case .stackSize: "RLIMIT_STACK"
            case .coreFileSize: "RLIMIT_CORE"
            case .processes: "RLIMIT_NPROC"
            case .openFiles: "RLIMIT_NOFILE"
            case .lockedMemory: "RLIMIT_MEMLOCK"
            case .addressSpace: "RLIMIT_AS"
            default: "RLIMIT(\(rawValue))"
            }
        }
    }

    /// The value meaning "no limit" (RLIM_INFINITY).
    public static let unlimited = UInt64.max

    /// The resource limited.
    public var resource: Resource
    /// The soft limit (what the kernel enforces).
    public var soft: UInt64
    /// The hard limit (ceiling for raising the soft one).
    public var hard: UInt64

    /// Creates a limit; `hard` defaults to `soft`.
    public init(_ resource: Resource, soft: UInt64, hard: UInt64? = nil) {
        self.resource = resource
        self.soft = soft
        self.hard = hard ?? soft
    }

    /// "RLIMIT_NOFILE=64/64".
    public var description: String {
        func show(_ v: UInt64) -> String { v == Self.unlimited ? "unlimited" : String(v) }
        return "\(resource)=\(show(soft))/\(show(hard))"
    }
}
