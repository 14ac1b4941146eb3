import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Why a /proc file could not be read or understood.
public enum ProcFileError: Error, Sendable, Equatable, CustomStringConvertible {
    /// open/read failed (ENOENT or ESRCH: the process is gone).
    case unreadable(path: String, errno: Errno)
    /// The text did not have the expected shape.
    case malformed(path: String, reason: String)

    /// True when the error means the process no longer exists.
    public var processIsGone: Bool {
        if case .unreadable(_, let errno) = self { return errno == .noSuchFileOrDirectory || errno == .noSuchProcess }
        return false
    }

    /// "/proc/42/stat: No such file or directory (ENOENT)".
    public var description: String {
        switch self {
        case .unreadable(let path, let errno): "\(path): \(errno.explained)"
        case .malformed(let path, let reason): "\(path): \(reason)"
        }
    }
}

/// The fields of /proc/<pid>/stat this project uses.
public struct ProcStatInfo: Sendable, Equatable {
    /// Field 1: pid.
    public var pid: Int32
    /// Field 2: the command name, without the parentheses (may contain spaces and ')').
    public var comm: String
    /// Field 3: R running, S sleeping, D disk sleep, T stopped, t traced, Z zombie, X dead, I idle.
    public var state: Character
    /// Field 4: parent pid.
    public var parentPID: Int32
    /// Field 5: process group.
    public var processGroup: Int32
    /// Field 6: session id.
    public var session: Int32
    /// Field 14: user-mode CPU time in clock ticks.
    public var userTicks: UInt64
    /// Field 15: kernel-mode CPU time in clock ticks.
    public var systemTicks: UInt64
    /// Field 20: number of threads.
    public var threadCount: Int
    /// Field 22: start time in clock ticks after boot.
    public var startTicks: UInt64

    /// True for state T (stopped by a signal) or t (tracing stop).
    public var isStopped: Bool { state == "T" || state == "t" }
}

/// Reads /proc/<pid>/stat.
public enum ProcStat {
    /// Reads and parses /proc/<pid>/stat.
    public static func read(pid: Int32) throws(ProcFileError) -> ProcStatInfo {
        let path = "/proc/\(pid)/stat"
        return try parse(try readProcFile(path), path: path)
    }

    /// Parses the text of a stat file. The command name is found between the
    /// first '(' and the *last* ')', since it may itself contain both.
    public static func parse(_ text: String, path: String = "stat") throws(ProcFileError) -> ProcStatInfo {
        guard let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")"), open < close else {
            throw .malformed(path: path, reason: "no (comm) field")
        }
        guard let pid = Int32(text[..<open].trimmingSpaces) else {
            throw .malformed(path: path, reason: "bad pid field")
        }
        let comm = String(text[text.index(after: open)..<close])
        // Fields from 3 (state) on, space separated.
        let rest = text[text.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        guard rest.count >= 20 else {
            throw .malformed(path: path, reason: "only \(rest.count + 2) fields")
        }
        func number<T: FixedWidthInteger>(_ field: Int, as _: T.Type) throws(ProcFileError) -> T {
            guard let value = T(rest[field - 3].trimmingSpaces) else {
                throw .malformed(path: path, reason: "field \(field) is not a number: \"\(rest[field - 3])\"")
            }
            return value
        }
        guard rest[0].count == 1, let state = rest[0].first else {
            throw .malformed(path: path, reason: "bad state field \"\(rest[0])\"")
        }
        return ProcStatInfo(
            pid: pid, comm: comm, state: state,
            parentPID: try number(4, as: Int32.self),
            processGroup: try number(5, as: Int32.self),
            session: try number(6, as: Int32.self),
            userTicks: try number(14, as: UInt64.self),
            systemTicks: try number(15, as: UInt64.self),
            threadCount: try number(20, as: Int.self),
            startTicks: try number(22, as: UInt64.self))
    }
}

/// The "Key:\tvalue" lines of /proc/<pid>/status.
public struct ProcStatusInfo: Sendable, Equatable {
    /// Every field, key without the colon, value trimmed.
    public var fields: [String: String]

    /// Creates the info from its fields.
    public init(fields: [String: String]) { self.fields = fields }

    /// A field's value, e.g. `self["Seccomp"]`.
    public subscript(key: String) -> String? { fields[key] }

    /// The state letter of "State:\tT (stopped)".
    public var state: Character? { fields["State"]?.first }
    /// NoNewPrivs: 1 once PR_SET_NO_NEW_PRIVS is set.
    public var noNewPrivs: Int? { fields["NoNewPrivs"].flatMap { Int($0) } }
    /// Seccomp: 0 off, 1 strict, 2 filter.
    public var seccompMode: Int? { fields["Seccomp"].flatMap { Int($0) } }
    /// Seccomp_filters: how many filters are attached.
    public var seccompFilters: Int? { fields["Seccomp_filters"].flatMap { Int($0) } }
    /// The parent pid.
    public var parentPID: Int32? { fields["PPid"].flatMap { Int32($0) } }
}

/// Reads /proc/<pid>/status.
public enum ProcStatus {
    /// Reads and parses /proc/<pid>/status.
    public static func read(pid: Int32) throws(ProcFileError) -> ProcStatusInfo {
        parse(try readProcFile("/proc/\(pid)/status"))
    }

    /// Parses the text of a status file.
    public static func parse(_ text: String) -> ProcStatusInfo {
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let key = String(line[..<colon])
            fields[key] = String(line[line.index(after: colon)...].trimmingSpaces)
        }
        return ProcStatusInfo(fields: fields)
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var s = self
        while let c = s.first, c == " " || c == "\t" || c == "\n" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" || c == "\n" { s = s.dropLast() }
        return s
    }
}

extension StringProtocol {
    var trimmingSpaces: Substring { Substring(self).trimmingSpaces }
}

/// Reads a whole (small, sizeless) /proc file.
func readProcFile(_ path: String) throws(ProcFileError) -> String {
    let fd = retryingEINTR { Glibc.open(path, O_RDONLY | O_CLOEXEC) }
    guard fd >= 0 else { throw .unreadable(path: path, errno: Errno(rawValue: errno)) }
    defer { _ = Glibc.close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = chunk.withUnsafeMutableBytes { buffer in
            retryingEINTR { Glibc.read(fd, buffer.baseAddress, buffer.count) }
        }
        if n < 0 { throw .unreadable(path: path, errno: Errno(rawValue: errno)) }
        if n == 0 { break }
        bytes.append(contentsOf: chunk[0..<n])
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// Repeats `body` while it fails with EINTR.
func retryingEINTR<T: SignedInteger>(_ body: () -> T) -> T {
    while true {
        let result = body()
        if result == -1 && errno == EINTR { continue }
        return result
    }
}

/// The shared libraries this process has loaded, from /proc/self/maps.
public enum LoadedLibraries {
    /// The folders holding the shared objects (`*.so`, `*.so.N`) mapped
    /// executable into this process, sorted: where the Swift runtime and
    /// Foundation were found (`/opt/swift/usr/lib/swift/linux`, or
    /// `/usr/lib/swift/linux` for a packaged toolchain) and libc's folder.
    /// Empty when /proc is not readable.
    public static func directories() -> [String] {
        guard let text = try? readProcFile("/proc/self/maps") else { return [] }
        return parseDirectories(text)
    }

    /// The folders of the executable shared-object mappings in the text of a maps file.
    public static func parseDirectories(_ text: String) -> [String] {
        var directories: Set<String> = []
        for line in text.split(separator: "\n") {
            // address perms offset dev inode [path]; the path may hold spaces.
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count == 6, fields[1].contains("x") else { continue }
            let path = fields[5].trimmingSpaces
            guard path.hasPrefix("/"), !path.hasSuffix("(deleted)") else { continue }
            guard let slash = path.lastIndex(of: "/") else { continue }
            let name = path[path.index(after: slash)...]
            guard name.hasSuffix(".so") || name.contains(".so.") else { continue }
            directories.insert(slash == path.startIndex ? "/" : String(path[..<slash]))
        }
        return directories.sorted()
    }
}

/// Walks of `/proc` that answer "whose process is this?".
public enum ProcessTree {
    /// The parents of `pid`, nearest first, read from each `/proc/<pid>/stat`; the walk
    /// stops below pid 1 and `stop` (neither is listed), at a process that is gone, or
    /// after `limit` steps.
    public static func ancestors(of pid: Int32, stoppingAt stop: Int32 = getpid(), limit: Int = 64) -> [Int32] {
        var chain: [Int32] = []
        var current = pid
        for _ in 0..<limit {
            guard let parent = try? ProcStat.read(pid: current).parentPID, parent > 1, parent != stop else { break }
            chain.append(parent)
            current = parent
        }
        return chain
    }

    /// The cgroup paths of `pid`, one per hierarchy (`/proc/<pid>/cgroup`'s third field:
    /// `0::/a/b` gives `/a/b`); empty when the process is gone.
    public static func cgroupPaths(of pid: Int32) -> [String] {
        guard let text = try? readProcFile("/proc/\(pid)/cgroup") else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            return fields.count == 3 ? String(fields[2]) : nil
        }
    }
}
