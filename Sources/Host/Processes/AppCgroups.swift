import AppHostProtocol
import AppHostSystem
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

private let hostCounter = Atomic<Int>(0)

/// Per-app cgroups: the memory and process (thread) limits.
///
/// Under the host's own cgroup the host makes `apphost-<pid>-<n>`, and in it one directory per
/// app with a memory or processes limit (its bundle identifier), with `memory.max`/`pids.max`
/// (cgroup v2) or `memory.limit_in_bytes`/`pids.max` (the v1 `memory` and `pids` hierarchies).
/// An app without either gets none: joining a cgroup takes the kernel's
/// cgroup_threadgroup_rwsem for writing, an RCU grace period (13-15 ms here) per launch. The
/// spawned child writes its own pid to each `cgroup.procs` before `execve`
/// (`SpawnSettings.cgroupProcsFiles`), so the app is under its limits from its first
/// instruction. Apps make no process (seccomp); should one get in, it is stopped and killed
/// with the app (`AppCgroup`). When an app dies of SIGKILL, the cgroup's `oom_kill` count
/// says whether the kernel's OOM killer did it for the limit.
///
/// v2 is used where the host's cgroup can delegate `memory` (and `pids`) to children;
/// else v1 where its hierarchies are writable (this machine: a v1/v2 hybrid); else none,
/// and the host falls back to rlimits (see `Supervisor.limitSettings`).
final class AppCgroups: Sendable {
    enum Layout: Sendable, Equatable, CustomStringConvertible {
        /// One directory holding both controllers.
        case v2(root: String)
        /// The `memory` hierarchy's directory and the `pids` one's (nil if not writable).
        case v1(memory: String?, pids: String?)

        /// "cgroup v2 at /sys/fs/cgroup/...", "cgroup v1: memory at ..., pids: none".
        var description: String {
            switch self {
            case .v2(let root): "cgroup v2 at \(root)"
            case .v1(let memory, let pids): "cgroup v1: memory at \(memory ?? "none"), pids at \(pids ?? "none")"
            }
        }
    }

    let layout: Layout

    /// Which limits the cgroups can hold.
    var limitsMemory: Bool {
        switch layout {
        case .v2: true
        case .v1(let memory, _): memory != nil
        }
    }

    var limitsProcesses: Bool {
        switch layout {
        case .v2: true
        case .v1(_, let pids): pids != nil
        }
    }

    private init(layout: Layout) {
        self.layout = layout
    }

    /// Makes the host's cgroup directory, or nil where the host cannot (not root, a
    /// read-only cgroupfs, no memory controller). `why` says why not.
    static func make(cgroupFile: String = "/proc/self/cgroup", mount: String = "/sys/fs/cgroup") -> (AppCgroups?, why: String?) {
        guard let text = try? String(contentsOfFile: cgroupFile, encoding: .utf8) else {
            return (nil, "cannot read \(cgroupFile)")
        }
        var v1: [String: String] = [:]
        var unified: String?
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3 else { continue }
            if parts[0] == "0" && parts[1].isEmpty { unified = parts[2] }
            for controller in parts[1].split(separator: ",") { v1[String(controller)] = parts[2] }
        }
        // Several hosts may share a process (tests): each its own directory.
        let name = "apphost-\(getpid())-\(hostCounter.add(1, ordering: .relaxed).newValue)"
        func controllers(_ dir: String) -> [String] {
            ((try? String(contentsOfFile: dir + "/cgroup.controllers", encoding: .utf8)) ?? "")
                .split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
        }
        // cgroup v2, where the memory controller reaches a directory under the host's cgroup.
        if let unified, FileManager.default.fileExists(atPath: mount + "/cgroup.controllers") {
            let own = mount + (unified == "/" ? "" : unified)
            removeStale(in: own)
            let root = own + "/" + name
            if controllers(own).contains("memory"), mkdir(root, 0o755) == 0 || errno == EEXIST {
                if !controllers(root).contains("memory") {
                    // Only allowed where the host's own cgroup holds no process (or is the root).
                    _ = write("+memory +pids", to: own + "/cgroup.subtree_control") || write("+memory", to: own + "/cgroup.subtree_control")
                }
                // The host's directory holds no process, so it may hand the controllers on.
                if controllers(root).contains("memory"),
                   write("+memory +pids", to: root + "/cgroup.subtree_control") || write("+memory", to: root + "/cgroup.subtree_control") {
                    return (AppCgroups(layout: .v2(root: root)), nil)
                }
                rmdir(root)
            }
        }
        // cgroup v1: the memory and pids hierarchies. A controller's files (`pids.max`) exist
        // in the directories below a hierarchy's root, not in the root itself: the root is
        // known by its `cgroup.procs`, the controller by the file in the directory made.
        func v1Directory(_ controller: String, probe: String) -> String? {
            guard let path = v1[controller] else { return nil }
            let base = mount + "/" + controller + (path == "/" ? "" : path)
            guard FileManager.default.fileExists(atPath: base + "/cgroup.procs") else { return nil }
            removeStale(in: base)
            let root = base + "/" + name
            guard mkdir(root, 0o755) == 0 || errno == EEXIST else { return nil }
            guard FileManager.default.fileExists(atPath: root + "/" + probe) else {
                rmdir(root)
                return nil
            }
            return root
        }
        let memory = v1Directory("memory", probe: "memory.limit_in_bytes")
        let pids = v1Directory("pids", probe: "pids.max")
        if memory != nil || pids != nil {
            return (AppCgroups(layout: .v1(memory: memory, pids: pids)), nil)
        }
        return (nil, getuid() == 0 ? "no writable memory or pids cgroup under \(mount)" : "the host is not root, so it cannot make cgroups")
    }

    /// Removes what a host that died without `remove()` left: `apphost-<pid>` directories
    /// whose pid is gone, and their (by then empty) app directories.
    private static func removeStale(in parent: String) {
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? [] where entry.hasPrefix("apphost-") {
            guard let pid = Int32(entry.dropFirst("apphost-".count).prefix { $0 != "-" }), pid != getpid(),
                  kill(pid, 0) != 0, errno == ESRCH else { continue }
            let dir = parent + "/" + entry
            for app in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] { rmdir(dir + "/" + app) }
            rmdir(dir)
        }
    }

    /// Prepares `app`'s directories with its limits (unlimited where nil). Throws when a
    /// limit cannot be written, so the app is not started without it.
    func prepare(_ app: BundleID, memory: UInt64?, processes: Int?) throws -> AppCgroup {
        switch layout {
        case .v2(let root):
            let dir = root + "/" + app.rawValue
            try Self.makeDirectory(dir)
            try Self.set(dir + "/memory.max", memory.map(String.init) ?? "max")
            // No swap: over the limit means killed, not paged out.
            _ = Self.write("0", to: dir + "/memory.swap.max")
            if FileManager.default.fileExists(atPath: dir + "/pids.max") {
                try Self.set(dir + "/pids.max", processes.map(String.init) ?? "max")
            }
            let kill = dir + "/cgroup.kill"
            return AppCgroup(procsFiles: [dir + "/cgroup.procs"], oomFile: dir + "/memory.events", directories: [dir],
                             killFile: FileManager.default.fileExists(atPath: kill) ? kill : nil,
                             memoryFile: dir + "/memory.current")
        case .v1(let memoryRoot, let pidsRoot):
            var procs: [String] = []
            var dirs: [String] = []
            var oom: String?
            var usage: String?
            if let memoryRoot {
                let dir = memoryRoot + "/" + app.rawValue
                try Self.makeDirectory(dir)
                // memory.memsw (memory plus swap) must stay at or above memory.limit_in_bytes:
                // raise it first when widening, set it after when narrowing.
                let memsw = dir + "/memory.memsw.limit_in_bytes"
                let hasMemsw = FileManager.default.fileExists(atPath: memsw)
                if hasMemsw { Self.write("-1", to: memsw) }
                try Self.set(dir + "/memory.limit_in_bytes", memory.map(String.init) ?? "-1")
                // No swap: over the limit means killed, not paged out. Without memsw (swap
                // accounting off) an app over its limit is swapped where there is swap.
                if hasMemsw, let memory { try Self.set(memsw, String(memory)) }
                procs.append(dir + "/cgroup.procs")
                dirs.append(dir)
                oom = dir + "/memory.oom_control"
                usage = dir + "/memory.usage_in_bytes"
            }
            if let pidsRoot {
                let dir = pidsRoot + "/" + app.rawValue
                try Self.makeDirectory(dir)
                try Self.set(dir + "/pids.max", processes.map(String.init) ?? "max")
                procs.append(dir + "/cgroup.procs")
                dirs.append(dir)
            }
            return AppCgroup(procsFiles: procs, oomFile: oom, directories: dirs, killFile: nil, memoryFile: usage)
        }
    }

    /// Removes every app's directory and the host's (their processes are gone by then).
    func remove() {
        let roots: [String] = switch layout {
        case .v2(let root): [root]
        case .v1(let memory, let pids): [memory, pids].compactMap { $0 }
        }
        for root in roots {
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] {
                var st = stat()
                let path = root + "/" + entry
                if stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR { rmdir(path) }
            }
            rmdir(root)
        }
    }

    private static func makeDirectory(_ path: String) throws {
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else {
            throw CgroupError(message: "mkdir \(path): \(String(cString: strerror(errno)))")
        }
    }

    private static func set(_ path: String, _ value: String) throws {
        guard write(value, to: path) else {
            throw CgroupError(message: "write \(value) to \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// One write(2) of `value` (cgroup files take a value per write).
    @discardableResult
    static func write(_ value: String, to path: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let bytes = Array(value.utf8)
        return bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } == bytes.count
    }
}

/// One app's cgroup directories.
struct AppCgroup: Sendable, Equatable {
    /// Each hierarchy's `cgroup.procs` (the child joins them all before `execve`).
    let procsFiles: [String]
    /// `memory.events` (v2) or `memory.oom_control` (v1): holds `oom_kill N`.
    let oomFile: String?
    let directories: [String]
    /// v2 `cgroup.kill` where the kernel has it (5.14).
    let killFile: String?
    /// `memory.current` (v2) or `memory.usage_in_bytes` (v1): what the app's cgroup is
    /// charged, its footprint where it has one (nil without a memory hierarchy).
    var memoryFile: String? = nil

    /// The memory its cgroup is charged now, bytes (nil when unreadable).
    var memoryCurrent: UInt64? {
        memoryFile.flatMap(readCgroupMemoryCurrent)
    }

    /// The processes in the app's cgroup: its own (apps make no other).
    var members: [Int32] {
        procsFiles.first.map(CgroupProcesses.list) ?? []
    }

    /// Sends `signal` to every process of the app but `except` (its main process,
    /// which the supervisor signals through its pidfd); returns those reached.
    @discardableResult
    func signalOthers(_ signal: Int32, except: Int32?) -> [Int32] {
        guard let file = procsFiles.first else { return [] }
        return CgroupProcesses.signal(signal, in: file, except: except.map { [$0] } ?? [])
    }

    /// Kills every process of the app and waits (bounded) until they are gone;
    /// returns those still there.
    @discardableResult
    func killAll() -> [Int32] {
        guard let file = procsFiles.first else { return [] }
        return CgroupProcesses.killAll(procsFile: file, killFile: killFile)
    }

    /// How many times the kernel's OOM killer killed a process here (0 if unknown).
    var oomKills: Int {
        guard let oomFile, let text = try? String(contentsOfFile: oomFile, encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix("oom_kill ") {
            return Int(line.dropFirst("oom_kill ".count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        return 0
    }
}

struct CgroupError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
