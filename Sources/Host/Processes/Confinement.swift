import AppHostProtocol
import AppHostSystem
import Foundation
import Synchronization
import Plugins

#if canImport(Glibc)
import Glibc
#endif

/// What confines an app process beyond its container: the Landlock allow-list,
/// the seccomp additions and the capabilities it loses. Policy only; the
/// mechanisms are `LandlockPolicy`, `SeccompPolicy` and `SpawnSettings`.
///
/// An app may:
/// - read, write, create and remove beneath its container and its App Group
///   containers (never execute there);
/// - read and execute the system's programs and libraries (`/usr`, `/bin`,
///   `/sbin`, `/lib*`), the folders the host's own Swift runtime and
///   Foundation were loaded from, its executable and the executable's folder;
/// - read its bundle, the certificates, the few `/etc` files the C library,
///   Foundation and TLS read (`systemFiles`), `/proc`, and what the runtime
///   reads in `/sys` (CPUs, cgroup CPU quota);
/// - use `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom`,
///   and the devices of its background modes (sound with `audio`, serial
///   lines with `external-accessory`).
///
/// Nothing of the state directory but its own containers: not other apps'
/// containers, not the databases, logs, reports, snapshots or the control
/// socket. A bundle or executable folder inside the state directory, `/` or a
/// folder holding the state directory gets no folder grant (only the executable
/// file itself), and a grant on a folder
/// holding the state directory (`/usr` holding `/usr/local/var/apphost`) is
/// split around it.
///
/// Beyond files: no TCP `bind` (Landlock ABI 4) and no `listen` (seccomp:
/// `listen` on an unbound socket picks a port without `bind`); signals and
/// abstract Unix sockets stay inside the app's own Landlock domain (ABI 6); no
/// `socket(AF_UNIX)` (seccomp: Landlock does not check `connect`, so the
/// control socket would be reachable by its path); no new process (seccomp:
/// as on iOS, `fork` and `posix_spawn` fail with EPERM, threads are made); no
/// capabilities.
public enum AppConfinement {
    /// Files of `/etc` an app reads to run: the dynamic linker's cache (the
    /// only one a sample app opens, traced with strace), and what glibc's name
    /// service and resolver, `getpwuid`, time zones and Foundation read for an
    /// app that goes to the network or asks for its user, zone or OS version.
    /// Not `/etc/shadow`, not the rest.
    public static let systemFiles = [
        "/etc/ld.so.cache", "/etc/ld.so.preload", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/hosts",
        "/etc/resolv.conf", "/etc/gai.conf", "/etc/services", "/etc/protocols", "/etc/passwd", "/etc/group",
        "/etc/localtime", "/etc/timezone", "/etc/os-release",
    ]

    /// Certificate stores (Debian, Fedora, Arch, Alpine, openSUSE) and the
    /// OpenSSL configuration that may point into them.
    public static let certificatePaths = [
        "/etc/ssl", "/etc/ca-certificates", "/etc/ca-certificates.conf", "/etc/pki",
        "/etc/crypto-policies", "/usr/share/ca-certificates",
    ]

    /// Program and library trees (their merged-/usr links are followed).
    public static let systemTrees = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]

    /// What the Swift runtime, Dispatch and NIO read in /sys: the CPUs online
    /// and the cgroup CPU quota.
    public static let systemInformation = ["/sys/devices/system/cpu", "/sys/fs/cgroup"]

    /// Devices every app may use.
    public static let commonDevices = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"]

    /// Where the host's Swift runtime and Foundation live (read once):
    /// apps built with the same toolchain load theirs from there.
    public static let runtimeDirectories = LoadedLibraries.directories()

    /// The Landlock policy of an app.
    ///
    /// - Parameters:
    ///   - app: the installed app (bundle and executable).
    ///   - container: its container.
    ///   - groupContainers: its App Group containers.
    ///   - devices: the device paths its modes grant (`*` in the last component).
    ///   - stateDirectory: the host's state directory, kept out of reach.
    ///   - abiLimit: the Landlock ABI to build for at most.
    public static func landlockPolicy(app: InstalledApp, container: String, groupContainers: [String], devices: [String],
                               stateDirectory: String, abiLimit: Int?) -> LandlockPolicy {
        var grants: [PathGrant] = [PathGrant(container, .readWrite)]
        grants += groupContainers.map { PathGrant($0, .readWrite) }
        // The paths every app shares: looked up at most once a second (isSystemPath).
        grants += systemTrees.map { PathGrant($0, .readExecute, isSystemPath: true) }
        grants += runtimeDirectories.map { PathGrant($0, .readExecute, isSystemPath: true) }
        grants += (systemFiles + certificatePaths + systemInformation).map { PathGrant($0, .readOnly, isSystemPath: true) }
        grants.append(PathGrant("/proc", .readOnly, isSystemPath: true))
        grants += (commonDevices + devices).map { PathGrant($0, .device, isSystemPath: true) }

        // The app's own files: never a folder inside the state directory (other
        // apps' containers, the database and the logs are there), nor `/` or a folder
        // holding the state directory (everything beside it would be granted). The
        // installer keeps the executable inside its bundle or a products directory;
        // this holds for what an older install recorded too.
        let state = canonical(stateDirectory)
        func grantable(_ path: String) -> Bool {
            let resolved = canonical(path)
            guard !resolved.isEmpty, resolved != "/", resolved != state else { return false }
            let insideState = resolved.hasPrefix(state == "/" ? "/" : state + "/")
            let holdsState = state.hasPrefix(resolved + "/")
            return !insideState && !holdsState
        }
        grants.append(PathGrant(app.executablePath, .readExecute))
        let executableFolder = (app.executablePath as NSString).deletingLastPathComponent
        if !executableFolder.isEmpty, grantable(executableFolder) {
            grants.append(PathGrant(executableFolder, .readExecute))
        }
        if grantable(app.bundlePath) {
            grants.append(PathGrant(app.bundlePath, .readOnly))
        }
        return LandlockPolicy(grants: grants, excluded: [stateDirectory], abiLimit: abiLimit)
    }

    /// The seccomp policy of an app: the host's, plus the families its modes
    /// do not grant, no Unix sockets of its own making, no `listen` and no new
    /// process (the host's other children, the transfer daemon, keep `base`).
    public static func seccomp(_ base: SeccompPolicy, deniedSocketFamilies: [Int32]) -> SeccompPolicy {
        guard base.isEnabled else { return base }
        var policy = base
        // AF_NETLINK (16) for every app: NETLINK_ROUTE needs no capability and shows the
        // machine's interfaces, routes and neighbours (glibc's getaddrinfo falls back
        // without it). AF_PACKET (17) needs CAP_NET_RAW, which apps do not hold; denied
        // too, so the rule does not rest on the capability drop alone.
        policy.deniedSocketFamilies = Array(Set(policy.deniedSocketFamilies + deniedSocketFamilies + [16, 17])).sorted()
        policy.deniesUnixSocketCreation = true
        // iOS apps cannot make processes. It is also what keeps an app's lifecycle
        // whole without a cgroup per app: nothing else of it to stop or kill.
        policy.deniesProcessCreation = true
        if !policy.extraDenied.contains("listen") { policy.extraDenied.append("listen") }
        return policy
    }

    /// The device paths an app declaring `modes` may use (all of them when the
    /// mode rules are off).
    public static func devices(for modes: [BackgroundMode], modeRules: Bool) -> [String] {
        let plugins = modeRules ? ModeRegistry.all.filter { modes.contains($0.mode) } : ModeRegistry.all
        var paths: [String] = []
        for plugin in plugins {
            for path in plugin.sandbox.devicePaths where !paths.contains(path) { paths.append(path) }
        }
        return paths
    }

    /// `path` with symbolic links resolved, or as given when it does not exist.
    static func canonical(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

/// What the sandbox enforces with the Landlock ABI in use, for the one line the
/// host logs at startup and the one warning it gives when protection is missing.
struct SandboxSummary: Equatable {
    /// The kernel's ABI (nil: no Landlock).
    let kernelABI: Int?
    /// The ABI apps are confined with (nil: none).
    let abi: Int?
    /// Whether apps get namespaces of their own (a host without per-app uids).
    let namespaces: NamespaceUse
    /// One line: the ABI and what is enforced.
    let enforced: String
    /// Each protection missing at this ABI, as a sentence; empty when none is.
    let lost: [String]

    /// The summary for a kernel offering `kernelABI`, used up to `limit`
    /// (0: Landlock off), with the seccomp policy `seccomp`, for a host whose
    /// effective uid is `uid`.
    init(kernelABI: Int?, limit: Int?, seccomp: SeccompPolicy, uid: uid_t, identities: (first: UInt32, count: UInt32)? = nil,
         namespaces: NamespaceUse = .notNeeded) {
        self.namespaces = namespaces
        let isolated = identities != nil || namespaces == .used
        self.kernelABI = kernelABI
        let used = kernelABI.map { min($0, limit ?? $0) }
        abi = used.flatMap { $0 >= 1 ? $0 : nil }
        var enforced: [String] = []
        var lost: [String] = []
        let source: String
        if let kernelABI {
            if let limit, limit < kernelABI {
                source = limit < 1 ? "turned off, kernel ABI \(kernelABI)" : "kernel ABI \(kernelABI), limited to \(limit)"
            } else {
                source = "kernel ABI \(kernelABI)"
            }
        } else {
            source = "no Landlock in this kernel"
        }
        if let abi {
            enforced.append("Landlock ABI \(abi) (\(source)): files allow-listed (own container and App Groups read-write, system paths read-only)")
            enforced.append("ptrace and /proc/<pid> details of the host and other apps denied")
            if Landlock.controlsTCP(abi: abi) { enforced.append("TCP bind denied") }
            if Landlock.scopesProcesses(abi: abi) { enforced.append("signals and abstract Unix sockets scoped to each app") }
            if !Landlock.controlsRenames(abi: abi) {
                lost.append("apps cannot rename or link files between folders of their container (EXDEV): Landlock ABI 1 has no rule for it")
            }
            if !Landlock.controlsTruncation(abi: abi) {
                lost.append("apps can truncate any file the host's user may write, other apps' files and the host's database included (truncate(2) is checked from Landlock ABI 3)")
            }
            if !Landlock.controlsTCP(abi: abi) {
                lost.append("apps can bind TCP ports (from Landlock ABI 4); listening stays denied by seccomp")
            }
            if !Landlock.scopesProcesses(abi: abi), !isolated {
                lost.append("apps can signal (kill) the host and other apps running as the same user (signal scoping comes with Landlock ABI 6)")
            }
        } else {
            enforced.append("no Landlock (\(source))")
            if identities != nil {
                lost.append("apps can read every world-readable file of the machine\(namespaces == .used ? "" : " and write world-writable ones (/tmp, /var/tmp)"): only their uid keeps them out of other apps' containers\(namespaces == .used ? "" : " and the state directory")")
            } else if namespaces == .used {
                lost.append("apps can read every file the host's user can outside the state directory (the home directory included); their namespaces keep every write in their container and every other process out of reach")
            } else {
                lost.append("apps can read and write every file the host's user can: other apps' containers, the state directory (database, logs, reports), the home directory")
                lost.append("apps can read /proc/<pid>/environ, maps, fd and mem of other apps running as the same user")
                lost.append("apps can signal (kill) the host and other apps running as the same user")
            }
            if uid == 0 && identities == nil {
                lost.append("the host runs as root: apps run as uid 0 without capabilities and own every root-owned file (/etc, /usr), so they can change them")
            }
        }
        if seccomp.isEnabled {
            enforced.append("seccomp: baseline, no Unix sockets of their own, no listen, no new processes")
        } else {
            lost.append("seccomp is off: ptrace, mount, namespaces, bpf, Unix sockets (the control socket by its path) and fork are open to apps")
        }
        enforced.append("capabilities dropped")
        if namespaces == .used, identities != nil {
            enforced.append("apps in mount and IPC namespaces of their own: every file outside their container read-only, the state directory hidden but their container (noexec: nothing they wrote runs or maps executable)")
        } else if namespaces == .used {
            enforced.append("apps in user, mount, pid and IPC namespaces of their own: every file outside their container read-only (no chmod, chown, xattrs or utimes), the state directory hidden but their container (noexec), no other process in sight (no signal, prlimit, setpriority or scheduling of the host or another app)")
        } else if identities != nil {
            switch namespaces {
            case .off:
                lost.append("apps can map files they wrote in their container executable, and see the state directory's names (\"namespaces\": false in --config)")
            case .unavailable(let reason, _):
                lost.append("apps can map files they wrote in their container executable, and see the state directory's names (this machine refused a mount namespace: \(reason))")
            case .used, .notNeeded:
                break
            }
        }
        if let identities {
            enforced.append("each app runs as a uid of its own (\(identities.first)...\(identities.first + identities.count - 1)), its container 0700 and its own")
        } else if uid == 0 {
            lost.append("apps run as uid 0 without capabilities (per-app identities are off): they own every root-owned file, so chmod, chown, xattrs and utimes reach files outside their container that Landlock does not govern, and they share one uid with the host and each other")
        } else if namespaces != .used {
            let why: String
            let enable: String
            switch namespaces {
            case .off:
                why = "namespaces are off (\"namespaces\": false in --config)"
                enable = "remove \"namespaces\": false from the config"
            case .unavailable(let reason, let command):
                why = "this machine refused the apps' namespaces (\(reason))"
                enable = command
            case .used, .notNeeded:
                why = "no namespaces"
                enable = "run the host as root for per-app uids"
            }
            lost.append("apps run as the host's own uid \(uid) in the host's namespaces (\(why)): chmod, chown, xattrs and utimes reach the user's files that Landlock does not govern, the host and other apps are in sight for signals and prlimit where Landlock and seccomp do not stop them, and apps share one uid with the host and each other; to isolate them: \(enable)")
        }
        self.enforced = "sandbox: " + enforced.joined(separator: "; ")
        self.lost = lost
    }

    /// The warning to give once, or nil when nothing is lost.
    var warning: String? {
        guard !lost.isEmpty else { return nil }
        let what = abi.map { "Landlock ABI \($0)" } ?? "no Landlock"
        return "sandbox: with \(what), " + lost.joined(separator: "; ")
    }
}

/// Whether a host's apps run in namespaces of their own (``AppNamespaces``).
enum NamespaceUse: Equatable, Sendable {
    /// Yes, where the kernel allowed them: user, mount, pid and IPC namespaces for a
    /// host without per-app uids, mount and IPC namespaces for a root host with them.
    case used
    /// Not tried (a summary made without asking).
    case notNeeded
    /// Turned off in the config.
    case off
    /// Refused by this machine: why, and the command that would allow them.
    case unavailable(reason: String, enable: String)

    /// What a host with `configured` namespaces and per-app uids or not (`identities`)
    /// uses here, after trying them for real in a child (``AppNamespaces/probe()``) on
    /// `stateDirectory` with `writable` (its containers folder).
    static func decide(configured: Bool, identities: Bool, stateDirectory: String, writable: String) -> NamespaceUse {
        if !configured { return .off }
        // Once per process and kind: what the machine allows does not change while it
        // runs (a process holding many hosts, as the tests do, tries once).
        let refused = probes.withLock { known -> AppNamespaces.Unavailable?? in known[!identities] }
            ?? {
                let probe = AppNamespaces(isolatesUser: !identities, hidden: AppConfinement.canonical(stateDirectory),
                                          writable: [AppConfinement.canonical(writable)])
                let result = probe.probe()
                probes.withLock { $0[!identities] = .some(result) }
                return result
            }()
        guard let refused else { return .used }
        return .unavailable(reason: refused.description, enable: enableCommand())
    }

    /// What ``decide(configured:identities:stateDirectory:writable:)`` found, per kind
    /// (user and pid namespaces too, or not).
    private static let probes = Mutex<[Bool: AppNamespaces.Unavailable?]>([:])

    /// The command that would let an unprivileged user make user namespaces here, from
    /// the sysctls that forbid it.
    static func enableCommand(read: (String) -> String? = { try? String(contentsOfFile: $0, encoding: .utf8) }) -> String {
        func value(_ path: String) -> Int? { read(path).flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } }
        if value("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1 {
            return "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile with \"userns,\" for apphost)"
        }
        if value("/proc/sys/kernel/unprivileged_userns_clone") == 0 {
            return "sudo sysctl -w kernel.unprivileged_userns_clone=1"
        }
        if value("/proc/sys/user/max_user_namespaces") == 0 {
            return "sudo sysctl -w user.max_user_namespaces=15000"
        }
        return "allow unprivileged user namespaces (a container's seccomp profile may forbid them: run it with --security-opt seccomp=unconfined), or run the host as root for per-app uids"
    }
}
