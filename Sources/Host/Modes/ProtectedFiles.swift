import AppHostProtocol
import CAppHostStamp
#if canImport(Glibc)
import Glibc
#endif

/// Closes and opens an app's protected files on disk, for the device's lock state
/// (docs/decisions/0022-device-lock-and-data-protection.md). A file's class is the extended
/// attribute ``FileProtectionClass/attribute`` AppKitLess sets when the app writes it
/// (none: `completeUntilFirstUserAuthentication`, iOS's default). Closing a file gives it
/// to root with mode 0 and saves its owner and mode in ``ownerAttribute``; the app runs as
/// a uid of its own with no capability, so it can neither open it nor change its mode,
/// owner or attributes back. Opening restores them. The walk never follows a symbolic
/// link (each step is an `openat` with `O_NOFOLLOW`, each file an `O_PATH` descriptor
/// whose `/proc/self/fd` path reaches that inode only), touches only files owned by the
/// app (closing) or by root with the saved owner naming the app (opening), and is bounded.
enum ProtectedFiles {
    /// Where a closed file's owner and mode are kept: `uid:gid:mode` (octal).
    static let ownerAttribute = "user.apphost.closed-owner"
    /// Entries looked at per app and walk (a container larger than that is cut short, said).
    static let maximumEntries = 100_000
    /// Folder depth followed.
    static let maximumDepth = 64

    /// `O_PATH` and `AT_EMPTY_PATH` (Linux, <fcntl.h> under `_GNU_SOURCE`, which Swift's Glibc does not define).
    private static let O_PATH: Int32 = 0o10000000
    private static let AT_EMPTY_PATH: Int32 = 0x1000

    /// What one walk did.
    struct Outcome: Equatable {
        var closed = 0
        var opened = 0
        /// Files that could not be changed (path relative to the root and the errno's name).
        var failures: [String] = []
        /// The walk stopped at ``maximumEntries`` or ``maximumDepth``.
        var cut = false
    }

    /// Brings every regular file under `root` to `level` for the app running as `uid`/`gid`:
    /// the app's container, or an App Group container it shares (`gid` the group's; a
    /// file there is reopened whether its saved group is the group's or the app's own).
    static func apply(_ level: DataProtectionLevel, root: String, uid: uid_t, gid: gid_t) -> Outcome {
        var outcome = Outcome()
        outcome.cut = !eachFile(under: root) { fd, st, relative in
            change(fd, st, relative, level: level, uid: uid, gid: gid, outcome: &outcome)
        }
        return outcome
    }

    /// The files under `roots` that `level` closes, by their class, as absolute paths
    /// (each root's path and the name beneath it), with every other name under `roots`
    /// of the same files (hard links): what a host whose apps share its uid covers in
    /// the app's mount namespace (``AppNamespaces/cover(in:files:uncover:)``), where a
    /// cover hides a path, not an inode. `cut`: a walk stopped at a bound.
    static func closedFiles(_ level: DataProtectionLevel, roots: [String]) -> (paths: [String], cut: Bool) {
        struct Found {
            var path: String
            var device: UInt64
            var inode: UInt64
        }
        var found: [Found] = []
        var closedInodes: Set<[UInt64]> = []
        var cut = false
        for root in roots {
            let base = root.hasSuffix("/") ? String(root.dropLast()) : root
            cut = !eachFile(under: base) { fd, st, relative in
                let key = [UInt64(st.st_dev), UInt64(st.st_ino)]
                found.append(Found(path: base + "/" + relative, device: key[0], inode: key[1]))
                if level.closes(protectionClass("/proc/self/fd/\(fd)")) { closedInodes.insert(key) }
            } || cut
        }
        let paths = found.filter { closedInodes.contains([$0.device, $0.inode]) }.map(\.path)
        return (paths, cut)
    }

    /// Calls `body` with every regular file under `root` (an `O_PATH` descriptor, its
    /// `stat` and its path beneath `root`), in name order, never following a symbolic
    /// link. False when the walk stopped at ``maximumEntries`` or ``maximumDepth``.
    private static func eachFile(under root: String, _ body: (Int32, stat, String) -> Void) -> Bool {
        let top = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard top >= 0 else { return true }
        var entries = 0
        var cut = false
        walk(top, path: "", depth: 0, entries: &entries, cut: &cut, body)
        return !cut
    }

    /// Walks the folder open as `dirfd` (and closes it).
    private static func walk(_ dirfd: Int32, path: String, depth: Int, entries: inout Int, cut: inout Bool,
                             _ body: (Int32, stat, String) -> Void) {
        guard let dir = fdopendir(dirfd) else {
            close(dirfd)
            return
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name == "." || name == ".." { continue }
            entries += 1
            if entries > maximumEntries {
                cut = true
                return
            }
            names.append(name)
        }
        // In name order, so the same tree gives the same outcome.
        for name in names.sorted() {
            let fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { continue }
            var st = stat()
            guard fstat(fd, &st) == 0 else { close(fd); continue }
            let relative = path.isEmpty ? name : path + "/" + name
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                close(fd)
                guard depth + 1 < maximumDepth else { cut = true; continue }
                let sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                if sub >= 0 {
                    walk(sub, path: relative, depth: depth + 1, entries: &entries, cut: &cut, body)
                }
            case S_IFREG:
                body(fd, st, relative)
                close(fd)
            default:
                close(fd)
            }
        }
    }

    /// Closes or opens one file (open as an `O_PATH` descriptor) as `level` asks.
    private static func change(_ fd: Int32, _ st: stat, _ relative: String, level: DataProtectionLevel, uid: uid_t, gid: gid_t,
                               outcome: inout Outcome) {
        let proc = "/proc/self/fd/\(fd)"
        let closes = level.closes(protectionClass(proc))
        if closes, st.st_uid == uid {
            let saved = "\(st.st_uid):\(st.st_gid):\(String(st.st_mode & 0o7777, radix: 8))"
            let code = aph_xattr_set(proc, ownerAttribute, saved, saved.utf8.count)
            guard code == 0 else {
                outcome.failures.append("\(relative): \(String(cString: strerror(code)))")
                return
            }
            guard fchownat(fd, "", 0, 0, AT_EMPTY_PATH) == 0 else {
                outcome.failures.append("\(relative): \(errnoName())")
                _ = aph_xattr_remove(proc, ownerAttribute)
                return
            }
            chmod(proc, 0)
            outcome.closed += 1
        } else if !closes, st.st_uid == 0, let saved = attribute(proc, ownerAttribute) {
            let parts = saved.split(separator: ":")
            guard parts.count == 3, let owner = uid_t(parts[0]), let group = gid_t(parts[1]), let mode = mode_t(parts[2], radix: 8),
                  owner == uid, group == gid || group == uid else { return }
            guard fchownat(fd, "", owner, group, AT_EMPTY_PATH) == 0 else {
                outcome.failures.append("\(relative): \(errnoName())")
                return
            }
            chmod(proc, mode & 0o777)
            _ = aph_xattr_remove(proc, ownerAttribute)
            outcome.opened += 1
        }
    }

    /// The class AppKitLess recorded on the file at `path` (none: iOS's default,
    /// `completeUntilFirstUserAuthentication`).
    private static func protectionClass(_ path: String) -> FileProtectionClass {
        attribute(path, FileProtectionClass.attribute).flatMap(FileProtectionClass.init(rawValue:)) ?? .completeUntilFirstUserAuthentication
    }

    /// An extended attribute's value as text (at most 64 bytes: the host's own values are shorter).
    private static func attribute(_ path: String, _ name: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 64)
        var length = 0
        guard aph_xattr_get(path, name, &buffer, buffer.count, &length) == 0 else { return nil }
        return String(decoding: buffer[..<min(length, buffer.count)], as: UTF8.self)
    }

    private static func errnoName() -> String {
        String(cString: strerror(errno))
    }
}
