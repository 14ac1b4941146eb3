// Small wrappers over the calls the attempts make. Each returns what the kernel
// said (a value or an errno) and never throws or traps: an attempt must not be
// able to stop the ones after it.
import CAppHostSys

#if canImport(Glibc)
import Glibc
#endif

/// The symbolic name of an errno ("EPERM"), or "errno N".
func errnoName(_ code: Int32) -> String {
    let names: [Int32: String] = [
        0: "OK", EPERM: "EPERM", ENOENT: "ENOENT", ESRCH: "ESRCH", EINTR: "EINTR", EIO: "EIO",
        ENXIO: "ENXIO", E2BIG: "E2BIG", ENOEXEC: "ENOEXEC", EBADF: "EBADF", ECHILD: "ECHILD",
        EAGAIN: "EAGAIN", ENOMEM: "ENOMEM", EACCES: "EACCES", EFAULT: "EFAULT", EBUSY: "EBUSY",
        EEXIST: "EEXIST", EXDEV: "EXDEV", ENODEV: "ENODEV", ENOTDIR: "ENOTDIR", EISDIR: "EISDIR",
        EINVAL: "EINVAL", ENFILE: "ENFILE", EMFILE: "EMFILE", ENOTTY: "ENOTTY", ETXTBSY: "ETXTBSY",
        EFBIG: "EFBIG", ENOSPC: "ENOSPC", EROFS: "EROFS", EPIPE: "EPIPE", ENAMETOOLONG: "ENAMETOOLONG",
        ENOSYS: "ENOSYS", ELOOP: "ELOOP", ENOTSOCK: "ENOTSOCK", EPROTOTYPE: "EPROTOTYPE",
        EPROTONOSUPPORT: "EPROTONOSUPPORT", ESOCKTNOSUPPORT: "ESOCKTNOSUPPORT", EOPNOTSUPP: "EOPNOTSUPP",
        EPFNOSUPPORT: "EPFNOSUPPORT", EAFNOSUPPORT: "EAFNOSUPPORT", ECONNREFUSED: "ECONNREFUSED",
        ECONNRESET: "ECONNRESET", ETIMEDOUT: "ETIMEDOUT", EDQUOT: "EDQUOT", EKEYREVOKED: "EKEYREVOKED",
        ENOKEY: "ENOKEY", EDEADLK: "EDEADLK", ENODATA: "ENODATA",
    ]
    return names[code] ?? "errno \(code)"
}

/// The current errno as a name.
func lastError() -> String { errnoName(errno) }

// MARK: - Raw syscalls

/// The syscall numbers the attempts need that glibc has no wrapper for, or one
/// Swift cannot call (variadic, or declared only under _GNU_SOURCE). The Glibc
/// module does not export `SYS_*`.
enum SyscallNumber {
    #if arch(x86_64)
    static let ptrace = 101, bpf = 321, perfEventOpen = 298, keyctl = 250, addKey = 248
    static let capget = 125, prctl = 157, unshare = 272, setns = 308
    static let setxattr = 188, removexattr = 197, getpriority = 140, setpriority = 141
    static let prlimit64 = 302, userfaultfd = 323
    static let schedSetparam = 142, schedGetparam = 143, schedSetscheduler = 144, schedGetscheduler = 145
    static let schedSetaffinity = 203, schedGetaffinity = 204, ioprioSet = 251, ioprioGet = 252
    static let execve = 59, execveat = 322, memfdCreate = 319
    static let fork: Int? = 57
    #elseif arch(arm64)
    static let ptrace = 117, bpf = 280, perfEventOpen = 241, keyctl = 219, addKey = 217
    static let capget = 90, prctl = 167, unshare = 97, setns = 268
    static let setxattr = 5, removexattr = 14, getpriority = 141, setpriority = 140
    static let prlimit64 = 261, userfaultfd = 282
    static let schedSetparam = 118, schedGetparam = 121, schedSetscheduler = 119, schedGetscheduler = 120
    static let schedSetaffinity = 122, schedGetaffinity = 123, ioprioSet = 30, ioprioGet = 31
    static let execve = 221, execveat = 281, memfdCreate = 279
    static let fork: Int? = nil  // clone only
    #else
    #error("HostileApp knows the syscall numbers of x86_64 and arm64 only")
    #endif
    // The same on every architecture (the table shared since Linux 5.1).
    static let pidfdOpen = 434, pidfdGetfd = 438
}

/// Namespace flags of clone, unshare and setns (<linux/sched.h>).
enum CloneFlag {
    static let newNS = 0x0002_0000, newUTS = 0x0400_0000, newUser = 0x1000_0000, newNet = 0x4000_0000
}

/// `syscall(number, args...)` (up to six arguments): the result, or -1 and the errno.
func rawSyscall(_ number: Int, _ args: Int...) -> (value: Int, error: Int32) {
    var a = args + Array(repeating: 0, count: max(0, 6 - args.count))
    a = Array(a.prefix(6))
    var result = 0
    let e = aph_syscall6(number, a[0], a[1], a[2], a[3], a[4], a[5], &result)
    return (e == 0 ? result : -1, e)
}

// MARK: - Files

/// `open(path, flags, mode)`: the descriptor, or -1 and the errno.
func openFile(_ path: String, _ flags: Int32, _ mode: mode_t = 0o600) -> (fd: Int32, error: Int32) {
    let fd = open(path, flags | O_CLOEXEC, mode)
    return (fd, fd < 0 ? errno : 0)
}

/// Reads up to `limit` bytes from `fd` (at `offset` with pread when given), until
/// end of file or, with `once`, after the first read that returns something.
func readSome(_ fd: Int32, limit: Int, offset: Int? = nil, once: Bool = false) -> (bytes: [UInt8], error: Int32) {
    var buffer = [UInt8](repeating: 0, count: max(1, limit))
    var total = 0
    while total < limit {
        let n = buffer.withUnsafeMutableBytes { raw -> Int in
            guard let base = raw.baseAddress else { return -1 }
            if let offset {
                return pread(fd, base + total, limit - total, off_t(offset + total))
            }
            return read(fd, base + total, limit - total)
        }
        if n < 0 {
            if errno == EINTR { continue }
            return (Array(buffer.prefix(total)), total > 0 ? 0 : errno)
        }
        if n == 0 { break }
        total += n
        if once { break }
    }
    return (Array(buffer.prefix(total)), 0)
}

/// The first `limit` bytes of a file, or the errno of the open or read.
func readFile(_ path: String, limit: Int = 64 * 1024) -> (bytes: [UInt8], error: Int32) {
    let (fd, e) = openFile(path, O_RDONLY)
    guard fd >= 0 else { return ([], e) }
    defer { close(fd) }
    return readSome(fd, limit: limit)
}

/// A file's text (lossy UTF-8), or nil.
func readText(_ path: String, limit: Int = 256 * 1024) -> String? {
    let (bytes, e) = readFile(path, limit: limit)
    return e == 0 ? String(decoding: bytes, as: UTF8.self) : nil
}

/// Writes all of `bytes`; 0 or the errno.
func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32 {
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { raw -> Int in
            guard let base = raw.baseAddress else { return 0 }
            return write(fd, base + offset, bytes.count - offset)
        }
        if n < 0 {
            if errno == EINTR { continue }
            return errno
        }
        offset += n
    }
    return 0
}

/// Where a symbolic link (or a `/proc/<pid>/fd/N` magic link) points, or nil.
func readLink(_ path: String) -> String? {
    var buffer = [CChar](repeating: 0, count: 4096)
    let n = readlink(path, &buffer, buffer.count - 1)
    guard n >= 0 else { return nil }
    return String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// The names in a directory (without `.` and `..`), or the errno of opening it.
func listDirectory(_ path: String) -> (names: [String], error: Int32) {
    guard let dir = opendir(path) else { return ([], errno) }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
        let name = withUnsafePointer(to: &entry.pointee.d_name) {
            String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return (names, 0)
}

/// Whether a path exists (lstat).
func exists(_ path: String) -> Bool {
    var st = stat()
    return lstat(path, &st) == 0
}

/// The descriptors open in this process among 0..<limit (fcntl F_GETFD).
func openDescriptors(limit: Int32 = 1024) -> [Int32] {
    (0..<limit).filter { fcntl($0, F_GETFD) != -1 }
}

// MARK: - Sockets

/// `socket(family, type, protocol)`: the descriptor, or -1 and the errno.
func makeSocket(_ family: Int32, _ type: Int32, _ proto: Int32) -> (fd: Int32, error: Int32) {
    let fd = socket(family, type | Int32(SOCK_CLOEXEC.rawValue), proto)
    return (fd, fd < 0 ? errno : 0)
}

/// Where a UNIX socket is: a path, or an abstract name (no leading NUL).
enum UnixAddress: CustomStringConvertible {
    case path(String)
    case abstract(String)

    var description: String {
        switch self {
        case .path(let p): return p
        case .abstract(let n): return "@" + n
        }
    }
}

/// Connects a new stream socket to `address`: the connected descriptor, or -1 and the errno.
/// Connects a new AF_UNIX stream socket to `address`: the descriptor, or -1 with the
/// errno and the call that failed ("socket" or "connect").
func connectUnix(_ address: UnixAddress) -> (fd: Int32, error: Int32, call: String) {
    var addr = sockaddr_un()
    addr.sun_family = sa_family_t(AF_UNIX)
    let capacity = MemoryLayout.size(ofValue: addr.sun_path)
    let bytes: [UInt8]
    switch address {
    case .path(let p): bytes = Array(p.utf8) + [0]
    case .abstract(let n): bytes = [0] + Array(n.utf8)
    }
    guard bytes.count <= capacity else { return (-1, ENAMETOOLONG, "the address (too long)") }
    withUnsafeMutableBytes(of: &addr.sun_path) { raw in
        for (i, b) in bytes.enumerated() { raw[i] = b }
    }
    let pathOffset = MemoryLayout<sa_family_t>.size
    let length: Int
    switch address {
    case .path: length = MemoryLayout<sockaddr_un>.size
    case .abstract: length = pathOffset + bytes.count
    }
    let (fd, e) = makeSocket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return (-1, e, "socket(AF_UNIX)") }
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(length)) }
    }
    if rc != 0 {
        let e = errno
        close(fd)
        return (-1, e, "connect")
    }
    return (fd, 0, "connect")
}

/// Gives up on a blocking read after `seconds`.
func setReceiveTimeout(_ fd: Int32, seconds: Int) {
    var tv = timeval(tv_sec: seconds, tv_usec: 0)
    _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
}

// MARK: - /proc

/// The parent pid of a process (field 4 of `/proc/<pid>/stat`), or nil.
func parentPID(of pid: Int32) -> Int32? {
    guard let stat = readText("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return nil }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 1 else { return nil }
    return Int32(fields[1])
}

/// The command name of a process (`/proc/<pid>/comm`), or nil.
func commandName(of pid: Int32) -> String? {
    readText("/proc/\(pid)/comm")?.split(separator: "\n").first.map(String.init)
}

/// A process's descriptors (`/proc/<pid>/fd`): the socket inodes among them
/// (`socket:[N]` links), the numbers whose link could not be read, and the errno
/// of listing them (0 when listed).
struct ProcessDescriptors {
    var sockets: [(fd: Int32, inode: UInt64)] = []
    var unreadable: [Int32] = []
    var linkError: Int32 = 0
    var all: [Int32] = []
    var error: Int32 = 0
    let pid: Int32

    init(of pid: Int32) {
        self.pid = pid
        let (names, e) = listDirectory("/proc/\(pid)/fd")
        error = e
        all = names.compactMap { Int32($0) }.sorted()
        for fd in all {
            errno = 0
            guard let link = readLink("/proc/\(pid)/fd/\(fd)") else {
                unreadable.append(fd)
                linkError = errno
                continue
            }
            guard link.hasPrefix("socket:["), link.hasSuffix("]"), let inode = UInt64(link.dropFirst(8).dropLast()) else { continue }
            sockets.append((fd, inode))
        }
    }

    /// What the listing showed, for a detail: "12 descriptors, 2 sockets" or the errors.
    var summary: String {
        if error != 0 { return "list /proc/\(pid)/fd: \(errnoName(error))" }
        var s = "\(all.count) descriptors, \(sockets.count) sockets"
        if !unreadable.isEmpty { s += ", \(unreadable.count) links unreadable (\(errnoName(linkError)))" }
        return s
    }
}

/// Bound UNIX sockets of this network namespace by inode (`/proc/net/unix`):
/// a path, or an abstract name.
func boundUnixSockets() -> [UInt64: UnixAddress] {
    guard let text = readText("/proc/net/unix", limit: 4 << 20) else { return [:] }
    var found: [UInt64: UnixAddress] = [:]
    for line in text.split(separator: "\n").dropFirst() {
        // Num RefCount Protocol Flags Type St Inode Path
        let fields = line.split(separator: " ", maxSplits: 7, omittingEmptySubsequences: true)
        guard fields.count == 8, let inode = UInt64(fields[6]) else { continue }
        let path = String(fields[7])
        found[inode] = path.hasPrefix("@") ? .abstract(String(path.dropFirst())) : .path(path)
    }
    return found
}

/// The names of the abstract UNIX sockets someone listens on (`/proc/net/unix`
/// entries with `__SO_ACCEPTCON`, 0x10000, in their flags), sorted.
func listeningAbstractSockets() -> [String] {
    guard let text = readText("/proc/net/unix", limit: 4 << 20) else { return [] }
    var names: Set<String> = []
    for line in text.split(separator: "\n").dropFirst() {
        let fields = line.split(separator: " ", maxSplits: 7, omittingEmptySubsequences: true)
        guard fields.count == 8, let flags = UInt32(fields[3], radix: 16), flags & 0x10000 != 0,
              fields[7].hasPrefix("@") else { continue }
        names.insert(String(fields[7].dropFirst()))
    }
    return names.sorted()
}

// MARK: - Privileges

/// What this process may do: ids, capabilities and no_new_privs, asked of the
/// kernel directly (capget, prctl), so it works where `/proc` is out of reach.
struct Privileges: Equatable {
    var uid: UInt32
    var euid: UInt32
    var effective: UInt64
    var permitted: UInt64
    var noNewPrivs: Int

    /// This process's privileges.
    static func current() -> Privileges {
        // _LINUX_CAPABILITY_VERSION_3: two 32-bit words per set.
        var header: [UInt32] = [0x2008_0522, 0]
        var data = [UInt32](repeating: 0, count: 6)
        let r = header.withUnsafeMutableBytes { h in
            data.withUnsafeMutableBytes { d in
                rawSyscall(SyscallNumber.capget, Int(bitPattern: h.baseAddress), Int(bitPattern: d.baseAddress))
            }
        }
        var effective: UInt64 = 0, permitted: UInt64 = 0
        if r.error == 0 {
            effective = UInt64(data[0]) | UInt64(data[3]) << 32
            permitted = UInt64(data[1]) | UInt64(data[4]) << 32
        }
        // PR_GET_NO_NEW_PRIVS = 39.
        let nnp = rawSyscall(SyscallNumber.prctl, 39, 0, 0, 0, 0)
        return Privileges(uid: getuid(), euid: geteuid(), effective: effective, permitted: permitted,
                          noNewPrivs: nnp.error == 0 ? nnp.value : -1)
    }

    /// One line: `privileges uid=0 euid=0 capeff=000001ffffffffff capprm=... nnp=1`.
    var line: String {
        "privileges uid=\(uid) euid=\(euid) capeff=\(hex(effective)) capprm=\(hex(permitted)) nnp=\(noNewPrivs)"
    }

    /// Parses `line`; nil when it is not one.
    init?(line: String) {
        var values: [String: String] = [:]
        let words = line.split(separator: " ")
        guard words.first == "privileges" else { return nil }
        for word in words.dropFirst() {
            let kv = word.split(separator: "=", maxSplits: 1)
            if kv.count == 2 { values[String(kv[0])] = String(kv[1]) }
        }
        guard let uid = values["uid"].flatMap({ UInt32($0) }), let euid = values["euid"].flatMap({ UInt32($0) }),
              let eff = values["capeff"].flatMap({ UInt64($0, radix: 16) }),
              let prm = values["capprm"].flatMap({ UInt64($0, radix: 16) }),
              let nnp = values["nnp"].flatMap({ Int($0) }) else { return nil }
        self.init(uid: uid, euid: euid, effective: eff, permitted: prm, noNewPrivs: nnp)
    }

    init(uid: UInt32, euid: UInt32, effective: UInt64, permitted: UInt64, noNewPrivs: Int) {
        self.uid = uid
        self.euid = euid
        self.effective = effective
        self.permitted = permitted
        self.noNewPrivs = noNewPrivs
    }
}

/// 16 hex digits, as `/proc/<pid>/status` shows capability sets.
func hex(_ value: UInt64) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: max(0, 16 - digits.count)) + digits
}

// MARK: - Spawning a helper

/// Runs `path args...` with stdout to a pipe (posix_spawn, no fork of this
/// process's memory): what it printed and how it ended, or the errno of the spawn
/// (EPERM under the host: apps make no process).
func runHelper(_ path: String, _ args: [String]) -> (spawnError: Int32, output: String, status: Int32) {
    var readEnd: Int32 = -1, writeEnd: Int32 = -1
    let pe = aph_pipe(&readEnd, &writeEnd)
    guard pe == 0 else { return (pe, "", -1) }
    let fds = [readEnd, writeEnd]
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + args).map { strdup($0) } + [nil]
    let envp: [UnsafeMutablePointer<CChar>?] = [strdup("PATH=/usr/bin:/bin"), strdup("LANG=C.UTF-8"), nil]
    defer {
        for p in argv { free(p) }
        for p in envp { free(p) }
    }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, path, &actions, nil, argv, envp)
    close(fds[1])
    guard rc == 0 else {
        close(fds[0])
        return (rc, "", -1)
    }
    let (bytes, _) = readSome(fds[0], limit: 4096)
    close(fds[0])
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    // WIFEXITED / WEXITSTATUS are macros: exit code in bits 8-15 when the low 7 are 0.
    let code: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    return (0, String(decoding: bytes, as: UTF8.self), code)
}
