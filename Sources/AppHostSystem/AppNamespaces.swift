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
    /// Files beneath `writable` covered, before the app runs, by an empty file it cannot
    /// open (a locked device's protected files; see ``cover(in:files:uncover:)``).
    public var covered: [String] = []

    /// Most writable folders (a container and its App Groups).
    public static let maximumWritable = Int(APH_NAMESPACES_MAX_WRITABLE)
    /// Most covered files in one app's namespace (each is a mount).
    public static let maximumCovered = Int(APH_NAMESPACES_MAX_COVERED)
    /// The mount source of a cover, as `/proc/PID/mountinfo` shows it.
    public static let coverSource = APH_PROTECTED_SOURCE

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
                directory_count: directoryArray.count, covered: nil, covered_count: 0)
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
        case APH_NS_STAGE_COVER: "covering a protected file"
        case APH_NS_STAGE_DEATH_SIGNAL: "PR_SET_PDEATHSIG (or the host was gone)"
        default: "step \(stage)"
        }
    }
}

extension AppNamespaces {
    /// What a ``cover(in:files:uncover:)`` did, per path (0 or the errno).
    public struct CoverOutcome: Sendable, Equatable {
        public var covered: [(path: String, errno: Errno?)]
        public var uncovered: [(path: String, errno: Errno?)]

        public static func == (a: CoverOutcome, b: CoverOutcome) -> Bool {
            a.covered.map(\.path) == b.covered.map(\.path) && a.covered.map(\.errno) == b.covered.map(\.errno)
                && a.uncovered.map(\.path) == b.uncovered.map(\.path) && a.uncovered.map(\.errno) == b.uncovered.map(\.errno)
        }
    }

    /// Covers `files` and uncovers `uncover` in the mount namespace of `child` (an app
    /// spawned with ``isolatesUser``, so its user namespace is this process's): a forked,
    /// single-threaded helper joins its user and mount namespaces, mounts an empty,
    /// mode-000, read-only file over each of `files` and detaches the mount on each of
    /// `uncover`. Nothing changes for the host or other apps. Throws when the helper
    /// could not join (the app has exited: `ESRCH`) or the lists are too long.
    public static func cover(in child: ChildProcess, files: [String], uncover: [String]) throws(Errno) -> CoverOutcome {
        guard files.count <= maximumCovered, uncover.count <= maximumCovered else { throw .argListTooLong }
        guard let pidfd = child.duplicatePidfd() else { throw .noSuchProcess }
        defer { _ = Glibc.close(pidfd) }
        let coverArray = CStringArray(files)
        let uncoverArray = CStringArray(uncover)
        guard coverArray.isComplete, uncoverArray.isComplete else { throw .noMemory }
        var results = [Int32](repeating: 0, count: files.count + uncover.count)
        let rc = results.withUnsafeMutableBufferPointer { buffer in
            aph_namespace_cover(pidfd,
                                UnsafeRawPointer(coverArray.pointer).assumingMemoryBound(to: UnsafePointer<CChar>?.self), coverArray.count,
                                UnsafeRawPointer(uncoverArray.pointer).assumingMemoryBound(to: UnsafePointer<CChar>?.self), uncoverArray.count,
                                buffer.baseAddress)
        }
        guard rc == 0 else { throw Errno(rawValue: rc) }
        func outcome(_ code: Int32) -> Errno? { code == 0 ? nil : Errno(rawValue: code) }
        return CoverOutcome(covered: files.indices.map { (files[$0], outcome(results[$0])) },
                            uncovered: uncover.indices.map { (uncover[$0], outcome(results[files.count + $0])) })
    }

    /// The files covered in the mount namespace of process `pid` (their mount points
    /// whose source is ``coverSource``), from `/proc/PID/mountinfo`; nil when it cannot
    /// be read.
    public static func coveredFiles(pid: Int32) -> [String]? {
        // Its mounts are the host's and the covers: an app has no capability to mount.
        guard let text = try? readProcFile("/proc/\(pid)/mountinfo") else { return nil }
        return MountInfo.mountPoints(in: text, source: coverSource)
    }
}

/// `/proc/PID/mountinfo` (proc(5)): one mount per line, the mount point the fifth field
/// (octal escapes for space, tab, newline and backslash), the source after the " - "
/// separator and the file system type.
public enum MountInfo {
    /// The mount points of the mounts whose source is `source`, in the file's order.
    public static func mountPoints(in text: String, source: String) -> [String] {
        var points: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count > 5, let dash = fields.firstIndex(of: "-"), dash >= 6, fields.count > dash + 2,
                  fields[dash + 2] == source[...] else { continue }
            points.append(unescape(fields[4]))
        }
        return points
    }

    /// The kernel's `\ooo` escapes undone.
    static func unescape(_ field: Substring) -> String {
        guard field.contains("\\") else { return String(field) }
        var bytes: [UInt8] = []
        let utf8 = Array(field.utf8)
        var i = 0
        while i < utf8.count {
            if utf8[i] == UInt8(ascii: "\\"), i + 3 < utf8.count,
               let value = UInt8(String(decoding: utf8[(i + 1)...(i + 3)], as: UTF8.self), radix: 8) {
                bytes.append(value)
                i += 4
            } else {
                bytes.append(utf8[i])
                i += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
