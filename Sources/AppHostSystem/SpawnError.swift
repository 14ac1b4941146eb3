import CAppHostSys
import SystemPackage

/// Why a spawn failed: the step (`code`), the errno, and the path or detail
/// involved. Its description reads like
/// `chdir to /no/such/dir failed: No such file or directory (ENOENT)`.
public struct SpawnError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The step that failed. A struct rather than an enum so new steps can be
    /// added without breaking callers' switches.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The raw step number (the C shim's `APH_STEP_*`, or 100+ for steps
        /// taken in Swift).
        public let rawValue: Int32

        /// Creates a code from its raw step number.
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// The settings were unusable (empty path, NUL byte in a string, "=" in
        /// an environment name, a bad rlimit).
        public static let invalidSettings = Code(rawValue: APH_STEP_INVALID)
        /// Creating the parent's error-report pipe failed.
        public static let pipe = Code(rawValue: APH_STEP_PIPE)
        /// clone3/clone failed (e.g. EAGAIN: too many processes).
        public static let clone = Code(rawValue: APH_STEP_CLONE)
        /// pidfd_open after the clone fallback failed.
        public static let pidfdOpen = Code(rawValue: APH_STEP_PIDFD_OPEN)
        /// Reading the child's error report failed.
        public static let readReport = Code(rawValue: APH_STEP_REPORT)
        /// Child: resetting the signal mask failed.
        public static let signalMask = Code(rawValue: APH_STEP_SIGNALS)
        /// Child: setsid failed.
        public static let setsid = Code(rawValue: APH_STEP_SETSID)
        /// Child: PR_SET_PDEATHSIG failed.
        public static let deathSignal = Code(rawValue: APH_STEP_DEATH_SIGNAL)
        /// Child: the parent died before the death signal was armed.
        public static let parentExited = Code(rawValue: APH_STEP_PARENT_EXITED)
        /// Child: PR_SET_NO_NEW_PRIVS failed.
        public static let noNewPrivileges = Code(rawValue: APH_STEP_NO_NEW_PRIVS)
        /// Child: opening /dev/null failed.
        public static let openDevNull = Code(rawValue: APH_STEP_DEV_NULL)
        /// Child: installing descriptor 0, 1, 2 or 3 failed (see `detail`).
        public static let installDescriptor = Code(rawValue: APH_STEP_DUP)
        /// Child: closing inherited descriptors failed.
        public static let closeDescriptors = Code(rawValue: APH_STEP_CLOSE_FDS)
        /// Child: chdir to the working directory failed.
        public static let chdir = Code(rawValue: APH_STEP_CHDIR)
        /// Child: setrlimit failed (see `detail`).
        public static let setrlimit = Code(rawValue: APH_STEP_RLIMIT)
        /// Child: loading the seccomp filter failed.
        public static let seccompLoad = Code(rawValue: APH_STEP_SECCOMP)
        /// Child: execve failed.
        public static let execve = Code(rawValue: APH_STEP_EXEC)
        /// Child: landlock_restrict_self failed (e.g. E2BIG: 16 Landlock
        /// layers already stacked on the host).
        public static let landlockRestrict = Code(rawValue: APH_STEP_LANDLOCK)
        /// Child: dropping capabilities failed (`detail` says which stage).
        public static let dropCapabilities = Code(rawValue: APH_STEP_CAPABILITIES)
        /// Child: writing its pid to a `cgroup.procs` file failed (`path` says which).
        public static let joinCgroup = Code(rawValue: APH_STEP_CGROUP)
        /// Child: taking its uid, gid or groups failed (`detail` says which).
        public static let takeIdentity = Code(rawValue: APH_STEP_IDENTITY)
        /// Making (host) or loading (child) the app's lockdown filter failed
        /// (`SpawnSettings.appLockdown`).
        public static let lockdown = Code(rawValue: APH_STEP_LOCKDOWN)
        /// Child: entering its namespaces (`SpawnSettings.namespaces`) failed
        /// (`detail` says at which step).
        public static let namespaces = Code(rawValue: APH_STEP_NAMESPACES)
        /// Compiling the seccomp policy failed (unknown syscall name, libseccomp error).
        public static let seccompCompile = Code(rawValue: 100)
        /// The reaper could not start its threads or descriptors.
        public static let reaperUnavailable = Code(rawValue: 101)
        /// The reaper could not watch the new child's pidfd (it was killed).
        public static let watchChild = Code(rawValue: 102)
        /// Building the Landlock ruleset of `SpawnSettings.landlock` in the
        /// host failed (`path` says which entry, when one did).
        public static let landlockRuleset = Code(rawValue: 103)

        /// A short name for the step ("chdir", "execve").
        public var description: String {
            switch self {
            case .invalidSettings: "invalid settings"
            case .pipe: "pipe"
            case .clone: "clone"
            case .pidfdOpen: "pidfd_open"
            case .readReport: "reading the child's report"
            case .signalMask: "signal reset"
            case .setsid: "setsid"
            case .deathSignal: "PR_SET_PDEATHSIG"
            case .parentExited: "parent exited"
            case .noNewPrivileges: "PR_SET_NO_NEW_PRIVS"
            case .openDevNull: "open /dev/null"
            case .installDescriptor: "dup2"
            case .closeDescriptors: "close_range"
            case .chdir: "chdir"
            case .setrlimit: "setrlimit"
            case .seccompLoad: "seccomp load"
            case .execve: "execve"
            case .landlockRestrict: "landlock_restrict_self"
            case .dropCapabilities: "dropping capabilities"
            case .joinCgroup: "joining the cgroup"
            case .takeIdentity: "taking the app's identity"
            case .lockdown: "the app's lockdown filter (one execve, its own scheduling)"
            case .namespaces: "entering the app's namespaces"
            case .seccompCompile: "seccomp compile"
            case .reaperUnavailable: "reaper start"
            case .watchChild: "watching the pidfd"
            case .landlockRuleset: "building the Landlock ruleset"
            default: "step \(rawValue)"
            }
        }
    }

    /// The step that failed.
    public var code: Code
    /// The errno of the failure, when there was one.
    public var errno: Errno?
    /// The path involved: the executable for execve, the directory for chdir.
    public var path: String?
    /// More context: which descriptor, which rlimit, which syscall name.
    public var detail: String?

    /// Creates an error.
    public init(code: Code, errno: Errno? = nil, path: String? = nil, detail: String? = nil) {
        self.code = code
        self.errno = errno
        self.path = path
        self.detail = detail
    }

    /// A sentence saying what failed, e.g. `execve /x failed: No such file or directory (ENOENT)`.
    public var description: String {
        if code == .invalidSettings {
            return "invalid spawn settings" + (detail.map { ": \($0)" } ?? "")
                + (errno.map { " (\($0.explained))" } ?? "")
        }
        var what: String
        switch code {
        case .execve: what = "execve \(path ?? "?")"
        case .chdir: what = "chdir to \(path ?? "?")"
        case .setrlimit: what = "setrlimit \(detail ?? "")"
        case .installDescriptor: what = "installing \(detail ?? "a descriptor")"
        case .seccompCompile: what = "compiling the seccomp filter" + (detail.map { " (\($0))" } ?? "")
        case .parentExited: what = "spawning \(path ?? "?"): the parent exited first"
        case .joinCgroup: what = "joining the cgroup (writing the child's pid to \(path ?? "?"))"
        case .landlockRuleset:
            what = "building the Landlock ruleset" + (detail.map { " for \($0)" } ?? "")
            if let path { what += " (at \(path))" }
        default:
            what = "\(code) for \(path ?? "?")"
            if let detail { what += " (\(detail))" }
        }
        if let errno { return "\(what) failed: \(errno.explained)" }
        return "\(what) failed"
    }
}
