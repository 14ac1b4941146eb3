import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A file lock a process holds, as needed by the 0xdead10cc rule ("an app about
/// to be suspended that holds a lock on a file outside its container is killed").
public struct HeldFileLock: Sendable, Equatable {
    /// The lock's flavour, spelled as /proc/locks spells it.
    public enum Kind: String, Sendable {
        /// fcntl(F_SETLK)/lockf: owned by the process, released when it closes any fd of the file.
        case posix = "POSIX"
        /// flock(2): owned by the open file description.
        case flock = "FLOCK"
        /// fcntl(F_OFD_SETLK): owned by the open file description; /proc/locks shows pid -1.
        case ofd = "OFDLCK"
    }

    /// POSIX, FLOCK or OFDLCK.
    public var kind: Kind
    /// True for a WRITE (exclusive) lock, false for READ (shared).
    public var exclusive: Bool
    /// The file's device as /proc/locks prints it: hex "major:minor", e.g. "fd:01".
    public var device: String
    /// The file's inode number.
    public var inode: UInt64
    /// The file's path, resolved through /proc/<pid>/fd when the process has it
    /// open (as the kernel prints it: may end in " (deleted)"); nil otherwise.
    public var path: String?

    /// Creates a lock description.
    public init(kind: Kind, exclusive: Bool, device: String, inode: UInt64, path: String? = nil) {
        self.kind = kind
        self.exclusive = exclusive
        self.device = device
        self.inode = inode
        self.path = path
    }
}

/// Reads /proc/locks.
///
/// Which locks are "held by" a process (see `held(by:)`):
/// - POSIX and FLOCK: the lock's pid is the process's. For FLOCK that is the
///   pid that *took* the lock: a process that inherited the descriptor (and so
///   shares the lock) is not matched, and a lock taken by a process that has
///   since exited is attributed to nobody.
/// - OFDLCK (pid always -1): the process has a descriptor open on the same
///   (device, inode). This may over-report: another process's OFD lock on a
///   file this process merely has open is matched too.
///
/// Paths are found by `stat`ing the targets of /proc/<pid>/fd/* and comparing
/// (major, minor, inode). On filesystems whose `st_dev` differs from the
/// superblock device /proc/locks prints (btrfs subvolumes, some overlayfs
/// setups) paths stay nil; the locks are still reported.
/// LEASE, DELEG and ACCESS entries, UNLCK types and waiters ("->") are skipped.
public enum ProcLocks {
    /// One line of /proc/locks.
    public struct ParsedLock: Sendable, Equatable {
        /// The ordinal at the start of the line ("1:").
        public var id: Int
        /// POSIX, FLOCK or OFDLCK.
        public var kind: HeldFileLock.Kind
        /// True for WRITE, false for READ.
        public var exclusive: Bool
        /// The owner's pid (in the /proc mount's pid namespace); -1 for OFD locks.
        public var pid: Int32
        /// "major:minor" in hex, as printed.
        public var device: String
        /// The device's major number.
        public var deviceMajor: UInt32
        /// The device's minor number.
        public var deviceMinor: UInt32
        /// The inode number.
        public var inode: UInt64
        /// First locked byte (0 for whole-file locks).
        public var start: UInt64
        /// Last locked byte, nil for "EOF" (to the end of the file, however it grows).
        public var end: UInt64?

        /// Creates a parsed lock.
        public init(
            id: Int, kind: HeldFileLock.Kind, exclusive: Bool, pid: Int32,
            device: String, deviceMajor: UInt32, deviceMinor: UInt32, inode: UInt64,
            start: UInt64 = 0, end: UInt64? = nil
        ) {
            self.id = id
            self.kind = kind
            self.exclusive = exclusive
            self.pid = pid
            self.device = device
            self.deviceMajor = deviceMajor
            self.deviceMinor = deviceMinor
            self.inode = inode
            self.start = start
            self.end = end
        }
    }

    /// Parses /proc/locks text, one lock per line:
    /// `1: POSIX  ADVISORY  WRITE 1234 fd:01:5678 0 EOF`.
    /// Waiter lines (`1: -> POSIX ...`), kinds other than POSIX/FLOCK/OFDLCK,
    /// types other than READ/WRITE and malformed lines are skipped.
    public static func parse(_ text: String) -> [ParsedLock] {
        text.split(separator: "\n").compactMap(parseLine)
    }

    /// The locks held by `pid` (see the type's documentation for what "held"
    /// means), in /proc/locks order, with paths resolved where the process has
    /// the file open. Throws `.unreadable` when /proc/locks or /proc/<pid>/fd
    /// cannot be read (`processIsGone` when the process does not exist; EACCES
    /// for another user's process).
    public static func held(by pid: Int32) throws(ProcFileError) -> [HeldFileLock] {
        // Read twice: the kernel prints /proc/locks a page at a time, and a lock taken or
        // dropped by anyone between two pages can shift the list so that an entry that
        // stays is skipped (seen once in the suite under load: one of a child's two
        // locks missing). A lock held all along is in at least one of the two reads.
        func key(_ l: ParsedLock) -> String { "\(l.kind.rawValue) \(l.pid) \(l.device) \(l.inode) \(l.exclusive)" }
        var locks = parse(try readProcFile("/proc/locks"))
        var seen = Set(locks.map(key))
        for lock in parse(try readProcFile("/proc/locks")) where seen.insert(key(lock)).inserted {
            locks.append(lock)
        }
        let candidates = locks.filter { $0.kind == .ofd || $0.pid == pid }
        if candidates.isEmpty {
            // The common case (checked before every suspension): no lock can be the
            // process's, so skip scanning its descriptors; still say if it is gone.
            let dir = "/proc/\(pid)"
            guard access(dir, F_OK) == 0 else {
                throw .unreadable(path: dir, errno: Errno(rawValue: errno))
            }
            return []
        }
        let wanted = Set(candidates.map { FileID(major: $0.deviceMajor, minor: $0.deviceMinor, inode: $0.inode) })
        let paths = try openFiles(of: pid, matching: wanted)
        return candidates.compactMap { lock in
            let path = paths[FileID(major: lock.deviceMajor, minor: lock.deviceMinor, inode: lock.inode)]
            if lock.kind == .ofd && path == nil { return nil }
            return HeldFileLock(
                kind: lock.kind, exclusive: lock.exclusive, device: lock.device, inode: lock.inode, path: path)
        }
    }

    private static func parseLine(_ line: Substring) -> ParsedLock? {
        let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
        // id: kind mode type pid maj:min:ino start end
        guard fields.count >= 8, fields[0].last == ":", let id = Int(fields[0].dropLast()) else { return nil }
        if fields[1].hasPrefix("->") { return nil } // a waiter, blocked on the lock above
        guard let kind = HeldFileLock.Kind(rawValue: String(fields[1])) else { return nil }
        let exclusive: Bool
        switch fields[3] {
        case "WRITE": exclusive = true
        case "READ": exclusive = false
        default: return nil
        }
        guard let pid = Int32(fields[4]) else { return nil }
        let file = fields[5].split(separator: ":", omittingEmptySubsequences: false)
        guard file.count == 3,
              let major = UInt32(file[0], radix: 16),
              let minor = UInt32(file[1], radix: 16),
              let inode = UInt64(file[2])
        else { return nil }
        guard let start = UInt64(fields[6]) else { return nil }
        let end: UInt64?
        if fields[7] == "EOF" {
            end = nil
        } else if let value = UInt64(fields[7]) {
            end = value
        } else {
            return nil
        }
        return ParsedLock(
            id: id, kind: kind, exclusive: exclusive, pid: pid,
            device: "\(file[0]):\(file[1])", deviceMajor: major, deviceMinor: minor, inode: inode,
            start: start, end: end)
    }

    /// (major, minor, inode) → path for the descriptors of `pid` whose target
    /// is in `wanted`; the first descriptor listed wins. Opening the directory
    /// even when nothing is wanted reports a missing process. Descriptors that
    /// close while being listed are skipped.
    private static func openFiles(of pid: Int32, matching wanted: Set<FileID>) throws(ProcFileError) -> [FileID: String] {
        let path = "/proc/\(pid)/fd"
        let fd = retryingEINTR { Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard fd >= 0 else { throw .unreadable(path: path, errno: Errno(rawValue: errno)) }
        guard let directory = fdopendir(fd) else {
            let error = Errno(rawValue: errno)
            _ = Glibc.close(fd)
            throw .unreadable(path: path, errno: error)
        }
        defer { closedir(directory) }
        var found: [FileID: String] = [:]
        guard !wanted.isEmpty else { return found }
        while true {
            errno = 0
            guard let entry = readdir(directory) else {
                if errno != 0 { throw .unreadable(path: path, errno: Errno(rawValue: errno)) }
                break
            }
            // In place, up to its NUL: a dirent is only `d_reclen` bytes long, and copying
            // the whole struct (`entry.pointee.d_name` by value) read past the end of the
            // last one in readdir's buffer (a crash seen once under load).
            let name = withUnsafePointer(to: &entry.pointee.d_name) { tuple in
                tuple.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: tuple.pointee)) { String(cString: $0) }
            }
            if name == "." || name == ".." { continue }
            var info = stat()
            // Follows the magic link to the open file itself.
            guard fstatat(fd, name, &info, 0) == 0 else { continue }
            let id = FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
            guard wanted.contains(id), found[id] == nil, let target = readLink(at: fd, name) else { continue }
            found[id] = target
        }
        return found
    }

    private static func readLink(at directory: Int32, _ name: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = buffer.withUnsafeMutableBytes { raw in
            readlinkat(directory, name, raw.baseAddress!.assumingMemoryBound(to: CChar.self), raw.count)
        }
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }
}

/// A file's identity as /proc/locks prints it.
private struct FileID: Hashable {
    var major: UInt32
    var minor: UInt32
    var inode: UInt64

    init(major: UInt32, minor: UInt32, inode: UInt64) {
        self.major = major
        self.minor = minor
        self.inode = inode
    }

    /// Decodes a Linux `st_dev` as glibc's gnu_dev_major/gnu_dev_minor do.
    init(device dev: UInt64, inode: UInt64) {
        self.major = UInt32(truncatingIfNeeded: ((dev >> 8) & 0xfff) | ((dev >> 32) & ~UInt64(0xfff)))
        self.minor = UInt32(truncatingIfNeeded: (dev & 0xff) | ((dev >> 12) & ~UInt64(0xff)))
        self.inode = inode
    }
}

extension ProcLocks {
    /// The first lock `pid` holds on a file outside `directory` (a path prefix ending in
    /// "/"), described ("posix write lock on /path"), or nil. A lock whose path cannot be
    /// resolved (see ``held(by:)``) is not counted: a wrong kill is worse than a missed
    /// one. Nil too when /proc cannot be read (the process is gone).
    public static func firstOutside(_ directory: String, heldBy pid: Int32) -> String? {
        // /proc/locks is a seq_file: it comes in pieces of about a page, each resuming by
        // record number, so locks of other processes released between two pieces shift
        // the list and one record can be missed (seen once in CI, with many SQLite
        // databases opening and closing). Nothing found is looked for a second time.
        for _ in 0..<2 {
            if let found = firstOutsideOnce(directory, heldBy: pid) { return found }
        }
        return nil
    }

    static func firstOutsideOnce(_ directory: String, heldBy pid: Int32) -> String? {
        // The common case, on the path of every suspension: no line of /proc/locks can be
        // the process's (no POSIX/FLOCK lock of its pid, no OFD lock at all), decided on
        // the raw bytes without building strings or looking at its descriptors.
        guard mayHoldLocks(pid) else { return nil }
        guard let locks = try? held(by: pid) else { return nil }
        for lock in locks {
            if let path = lock.path, !path.hasPrefix(directory) {
                return "\(lock.kind.rawValue) \(lock.exclusive ? "write" : "read") lock on \(path)"
            }
        }
        return nil
    }

    /// Whether /proc/locks has a line that may be `pid`'s: a POSIX or FLOCK lock whose pid
    /// field is `pid`, or any OFD lock (whose pid is -1). True when it cannot be read (the
    /// full check then decides). One read into a stack buffer; a file longer than 64 KiB
    /// (thousands of locks) is left to the full check.
    static func mayHoldLocks(_ pid: Int32) -> Bool {
        let fd = retryingEINTR { Glibc.open("/proc/locks", O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { return true }
        defer { _ = Glibc.close(fd) }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1 << 16) { buffer -> Bool in
            guard let base = buffer.baseAddress else { return true }
            var length = 0
            while length < buffer.count {
                let n = retryingEINTR { Glibc.read(fd, base + length, buffer.count - length) }
                if n < 0 { return true }
                if n == 0 { break }
                length += n
            }
            if length == buffer.count { return true }
            let wanted = Array(String(pid).utf8)
            // Fields of a line: "id:" kind mode type pid dev start end.
            var field = 0
            var start = 0
            var i = 0
            while i <= length {
                let byte: UInt8 = i < length ? base[i] : 0x0a
                if byte == 0x20 || byte == 0x09 || byte == 0x0a {
                    if i > start {
                        let token = UnsafeBufferPointer(start: base + start, count: i - start)
                        if field == 1 && token.elementsEqual("OFDLCK".utf8) { return true }
                        if field == 4 && token.elementsEqual(wanted) { return true }
                        field += 1
                    }
                    if byte == 0x0a { field = 0 }
                    start = i + 1
                }
                i += 1
            }
            return false
        }
    }
}
