import CAppHostSys
import Glibc
import SystemPackage

/// The namespaces an app of an unprivileged host runs in (`SpawnSettings.namespaces`),
/// as bubblewrap and Flatpak give theirs, with no helper and no privilege: new user,
/// mount, pid and IPC namespaces, made by the spawn's own `clone`.
///
/// - **pid**: the app is pid 1 of a namespace of its own; the host, the transfer daemon,
///   other apps and the user's processes have no pid there, so `kill`, `prlimit`,
///   `setpriority`, `sched_*`, `ptrace` and `pidfd_open` find nothing (`ESRCH`). It keeps
///   the host's `/proc` (read-only): the host's Landlock rules name that one, and
///   `/proc/self` resolves to it there too. The host still stops, continues and kills it
///   from outside (SIGSTOP and SIGKILL always reach a namespace's init from an ancestor).
/// - **user**: the host's uid and gid map to themselves, alone (no subordinate ids).
/// - **mount**: every mount it sees is read-only and nosuid, so `chmod`, `chown`,
///   `utimensat`, xattrs and writes fail with `EROFS` on every file of the machine
///   (the user's `~/.ssh` included); `hidden` (the state directory) is an empty
///   read-only tmpfs but for `writable` (its container and App Groups), read-write at
///   their own paths and noexec, so no file it wrote can be executed or mapped
///   executable. Other apps' containers, the database, logs and the control socket do
///   not exist for it.
///
/// Changes stay inside its namespaces: the host and other apps see none of them.
public struct AppNamespaces: Sendable, Hashable {
    /// True: user and pid namespaces too (a host run by a user, whose apps share its uid).
    /// False: mount and IPC namespaces only, for a root host whose apps have uids of their
    /// own (``SpawnSettings/identity`` may go with it): the mounts alone, read-only files
    /// and a noexec container, where the uid already keeps other processes out of reach.
    public var isolatesUser: Bool
    /// The host's effective uid, mapped to itself.
    public var uid: uid_t
    /// The host's effective gid, mapped to itself.
    public var gid: gid_t
    /// An absolute, canonical folder hidden under an empty tmpfs (the state directory).
    public var hidden: String
    /// Absolute, canonical folders beneath `hidden` kept read-write (noexec) at their paths.
    public var writable: [String]

    /// Most writable folders (a container and its App Groups).
    public static let maximumWritable = Int(APH_NAMESPACES_MAX_WRITABLE)

    public init(isolatesUser: Bool = true, uid: uid_t = geteuid(), gid: gid_t = getegid(), hidden: String, writable: [String]) {
        self.isolatesUser = isolatesUser
        self.uid = uid
        self.gid = gid
        self.hidden = hidden
        self.writable = writable
    }

    /// The folders to make in the tmpfs, parents first, for every writable folder to
    /// have a place there: each path between `hidden` and a writable folder. Nil when a
    /// writable folder is not strictly beneath `hidden`, or there are too many.
    public var directories: [String]? {
        guard writable.count <= Self.maximumWritable else { return nil }
        let base = hidden.hasSuffix("/") ? String(hidden.dropLast()) : hidden
        var made: [String] = []
        var seen: Set<String> = []
        for folder in writable {
            guard folder.hasPrefix(base + "/") else { return nil }
            let rest = folder.dropFirst(base.count + 1).split(separator: "/", omittingEmptySubsequences: true)
            guard !rest.isEmpty, !rest.contains(where: { $0 == ".." || $0 == "." }) else { return nil }
            var path = base
            for component in rest {
                path += "/" + component
                if seen.insert(path).inserted { made.append(path) }
            }
        }
        return made.count <= 4 * Self.maximumWritable ? made : nil
    }

    /// Why namespaces cannot be had here: the errno and the step.
    public struct Unavailable: Error, Sendable, CustomStringConvertible {
        public var errno: Errno
        /// The step that failed (`APH_NS_STAGE_*`), as words.
        public var step: String

        public var description: String { "\(step): \(errno)" }
    }

    /// Tries the namespaces for real in a child that exits at once: nil when this kernel
    /// and its policy (`user.max_user_namespaces`, AppArmor's
    /// `kernel.apparmor_restrict_unprivileged_userns`, a container's seccomp profile)
    /// allow them, else why not.
    public func probe() -> Unavailable? {
        guard let directories else {
            return Unavailable(errno: .invalidArgument, step: "a writable folder outside \(hidden)")
        }
        let writableArray = CStringArray(writable)
        let directoryArray = CStringArray(directories)
        guard writableArray.isComplete, directoryArray.isComplete else {
            return Unavailable(errno: .noMemory, step: "copying the paths")
        }
        var stage: Int32 = 0
        let rc: Int32 = hidden.withCString { hiddenPointer in
            var settings = aph_namespaces(
                isolate_user: isolatesUser ? 1 : 0, uid: uid, gid: gid, hidden: hiddenPointer,
                writable: UnsafeRawPointer(writableArray.pointer).assumingMemoryBound(to: UnsafePointer<CChar>?.self),
                writable_count: writableArray.count,
                directories: UnsafeRawPointer(directoryArray.pointer).assumingMemoryBound(to: UnsafePointer<CChar>?.self),
                directory_count: directoryArray.count)
            return aph_namespaces_probe(&settings, &stage)
        }
        guard rc != 0 else { return nil }
        return Unavailable(errno: Errno(rawValue: rc), step: Self.stageName(stage))
    }

    /// The words for an `APH_NS_STAGE_*`.
    public static func stageName(_ stage: Int32) -> String {
        switch stage {
        case APH_NS_STAGE_CLONE: "clone with new user, mount, pid and IPC namespaces"
        case APH_NS_STAGE_SETGROUPS: "writing /proc/self/setgroups"
        case APH_NS_STAGE_UID_MAP: "writing /proc/self/uid_map"
        case APH_NS_STAGE_GID_MAP: "writing /proc/self/gid_map"
        case APH_NS_STAGE_PRIVATE: "making its mounts private"
        case APH_NS_STAGE_OPEN_TREE: "open_tree of a writable folder"
        case APH_NS_STAGE_WRITABLE_ATTR: "making a writable folder noexec"
        case APH_NS_STAGE_READ_ONLY: "making every mount read-only"
        case APH_NS_STAGE_TMPFS: "mounting a tmpfs over the state directory"
        case APH_NS_STAGE_MKDIR: "making a folder in that tmpfs"
        case APH_NS_STAGE_MOVE: "moving a writable folder into place"
        case APH_NS_STAGE_TMPFS_RO: "making the tmpfs read-only"
        case APH_NS_STAGE_DEATH_SIGNAL: "PR_SET_PDEATHSIG (or the host was gone)"
        default: "step \(stage)"
        }
    }
}
