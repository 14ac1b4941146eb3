import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// What every thread of one process is doing at one reading of `/proc/<pid>/task/`:
/// its state letter and how many times the kernel has put it on a CPU.
///
/// It answers "is this process asleep, and has it stayed asleep?", which is how a
/// virtual-clock host tells a blocked app (one that will say nothing more until
/// something from outside wakes it) from a slow one, whatever the machine's load: a
/// thread that was woken but waits for a CPU reads `R` (runnable), not `S`. Two
/// readings in which every thread is asleep and none was scheduled in between
/// (``stayedAsleep(until:)``) prove an instant at which the whole process slept; a
/// process asleep everywhere stays so until a signal, a timer or input from outside
/// wakes it (no thread of its own is left to do it).
public struct ThreadActivity: Sendable, Equatable {
    /// One thread of the process.
    public struct Thread: Sendable, Equatable {
        public var tid: Int32
        /// `/proc/<pid>/task/<tid>/stat` field 3: R running or runnable, S sleeping, D disk
        /// sleep, T stopped, t traced, Z zombie, X dead, I idle, P parked.
        public var state: Character
        /// How many times it was scheduled on a CPU (`schedstat`'s third number, or the
        /// sum of `status`'s context switches where the kernel keeps no schedstat).
        public var runs: UInt64

        public init(tid: Int32, state: Character, runs: UInt64) {
            self.tid = tid
            self.state = state
            self.runs = runs
        }

        /// Asleep until something wakes it: interruptible sleep, or stopped by a signal
        /// or a tracer (it runs no code). Running, runnable, in disk sleep (I/O that
        /// completes by itself), exiting or dead is not.
        public var isAsleep: Bool {
            state == "S" || state == "T" || state == "t" || state == "I"
        }
    }

    /// The threads, by thread id.
    public var threads: [Thread]

    public init(threads: [Thread]) {
        self.threads = threads.sorted { $0.tid < $1.tid }
    }

    /// Every thread is asleep (and there is at least one).
    public var allAsleep: Bool {
        !threads.isEmpty && threads.allSatisfy(\.isAsleep)
    }

    /// Whether this reading and `later` show the same threads, every one asleep in both,
    /// none scheduled in between: then the whole process slept at once somewhere
    /// between the two readings (each thread was read asleep first in the one and again,
    /// unscheduled, in the other).
    public func stayedAsleep(until later: ThreadActivity) -> Bool {
        allAsleep && later.allAsleep && threads.count == later.threads.count
            && zip(threads, later.threads).allSatisfy { $0.tid == $1.tid && $0.runs == $1.runs }
    }

    /// Reads every thread of `pid`. A thread that ends while it is being read is left
    /// out; a process that is gone throws (`processIsGone`).
    public static func read(pid: Int32) throws(ProcFileError) -> ThreadActivity {
        var threads: [Thread] = []
        for tid in try threadIDs(of: pid) {
            do {
                threads.append(try read(pid: pid, tid: tid))
            } catch where error.processIsGone {
                continue
            }
        }
        guard !threads.isEmpty else {
            throw .unreadable(path: "/proc/\(pid)/task", errno: .noSuchProcess)
        }
        return ThreadActivity(threads: threads)
    }

    /// One thread's state and schedule count.
    static func read(pid: Int32, tid: Int32) throws(ProcFileError) -> Thread {
        let base = "/proc/\(pid)/task/\(tid)"
        let state = try ProcStat.parse(try readProcFile(base + "/stat"), path: base + "/stat").state
        let runs: UInt64
        if let count = try? parseScheduleCount(try readProcFile(base + "/schedstat")) {
            runs = count
        } else {
            let status = ProcStatus.parse(try readProcFile(base + "/status"))
            let voluntary = status["voluntary_ctxt_switches"].flatMap { UInt64($0) } ?? 0
            let involuntary = status["nonvoluntary_ctxt_switches"].flatMap { UInt64($0) } ?? 0
            runs = voluntary + involuntary
        }
        return Thread(tid: tid, state: state, runs: runs)
    }

    /// The third number of a `schedstat` line ("run ns, wait ns, timeslices").
    public static func parseScheduleCount(_ text: String) throws(ProcFileError) -> UInt64 {
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count >= 3, let count = UInt64(fields[2]) else {
            throw .malformed(path: "schedstat", reason: "expected three numbers, got \"\(text)\"")
        }
        return count
    }

    /// The thread ids listed in `/proc/<pid>/task`.
    static func threadIDs(of pid: Int32) throws(ProcFileError) -> [Int32] {
        let path = "/proc/\(pid)/task"
        let fd = retryingEINTR { Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard fd >= 0 else { throw .unreadable(path: path, errno: Errno(rawValue: errno)) }
        guard let directory = fdopendir(fd) else {
            let error = Errno(rawValue: errno)
            _ = Glibc.close(fd)
            throw .unreadable(path: path, errno: error)
        }
        defer { closedir(directory) }
        var ids: [Int32] = []
        while true {
            errno = 0
            guard let entry = readdir(directory) else {
                if errno != 0 { throw .unreadable(path: path, errno: Errno(rawValue: errno)) }
                break
            }
            // Read in place, up to its NUL (see ProcLocks: a dirent is only d_reclen long).
            let name = withUnsafePointer(to: &entry.pointee.d_name) { tuple in
                tuple.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: tuple.pointee)) { String(cString: $0) }
            }
            if let tid = Int32(name) { ids.append(tid) }
        }
        return ids
    }
}
