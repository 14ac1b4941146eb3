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
        /// The kernel is ending it (`PF_EXITING` in `stat`'s flags): it may read `S` while
        /// it waits inside the exit (a pid namespace's init waits there for the others of
        /// its namespace, its own threads among them), but it is on its way out, not asleep.
        public var exiting: Bool

        public init(tid: Int32, state: Character, runs: UInt64, exiting: Bool = false) {
            self.tid = tid
            self.state = state
            self.runs = runs
            self.exiting = exiting
        }

        /// Asleep until something wakes it: interruptible sleep, or stopped by a signal
        /// or a tracer (it runs no code). Running, runnable, in disk sleep (I/O that
        /// completes by itself), exiting or dead is not.
        public var isAsleep: Bool {
            !exiting && (state == "S" || state == "T" || state == "t" || state == "I")
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
    ///
    /// A probe of a virtual-clock host runs this twice per app and step, so it is cheap:
    /// the task directory is opened once and each thread's two small files are read
    /// relative to it into one stack buffer and parsed as bytes (no `String`, no path
    /// walk from `/`).
    public static func read(pid: Int32) throws(ProcFileError) -> ThreadActivity {
        let path = "/proc/\(pid)/task"
        let directory = retryingEINTR { Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard directory >= 0 else { throw .unreadable(path: path, errno: Errno(rawValue: errno)) }
        guard let stream = fdopendir(directory) else {
            let error = Errno(rawValue: errno)
            _ = Glibc.close(directory)
            throw .unreadable(path: path, errno: error)
        }
        defer { closedir(stream) }
        var tids: [Int32] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw .unreadable(path: path, errno: Errno(rawValue: errno)) }
                break
            }
            // The name in place, up to its NUL (see ProcLocks: a dirent is only d_reclen long).
            let tid = withUnsafePointer(to: &entry.pointee.d_name) { tuple in
                tuple.withMemoryRebound(to: UInt8.self, capacity: MemoryLayout.size(ofValue: tuple.pointee)) { name -> Int32? in
                    var value: Int32 = 0
                    var i = 0
                    while name[i] != 0 {
                        guard name[i] >= 48, name[i] <= 57, value < Int32.max / 10 else { return nil }
                        value = value * 10 + Int32(name[i] - 48)
                        i += 1
                    }
                    return i > 0 ? value : nil
                }
            }
            if let tid { tids.append(tid) }
        }
        let fd = dirfd(stream)
        var threads: [Thread] = []
        threads.reserveCapacity(tids.count)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 2048) { buffer in
            for tid in tids {
                // A thread that ended meanwhile is left out.
                guard let stat = readAt(fd, "\(tid)/stat", into: buffer), let state = stateLetter(stat) else { continue }
                let exiting = isExiting(stat)
                guard let runs = readAt(fd, "\(tid)/schedstat", into: buffer).flatMap({ number(at: 2, in: $0) })
                        ?? readAt(fd, "\(tid)/status", into: buffer).flatMap(contextSwitches) else { continue }
                threads.append(Thread(tid: tid, state: state, runs: runs, exiting: exiting))
            }
        }
        guard !threads.isEmpty else {
            throw .unreadable(path: path, errno: .noSuchProcess)
        }
        return ThreadActivity(threads: threads)
    }

    /// Reads the file `name` below the directory `fd` into `buffer` (at most its size).
    private static func readAt(_ fd: Int32, _ name: String, into buffer: UnsafeMutableBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8>? {
        let file = retryingEINTR { openat(fd, name, O_RDONLY | O_CLOEXEC) }
        guard file >= 0 else { return nil }
        defer { _ = Glibc.close(file) }
        var count = 0
        while count < buffer.count {
            let n = retryingEINTR { Glibc.read(file, buffer.baseAddress! + count, buffer.count - count) }
            if n <= 0 { break }
            count += n
        }
        return count > 0 ? UnsafeBufferPointer(rebasing: buffer[0..<count]) : nil
    }

    /// `PF_EXITING` (include/linux/sched.h) in a `stat` line's flags, the seventh field
    /// after the last `)` (state, ppid, pgrp, session, tty_nr, tpgid, flags).
    static func isExiting(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")), close + 2 < bytes.count,
              let flags = number(at: 6, in: UnsafeBufferPointer(rebasing: bytes[(close + 2)...])) else { return false }
        return flags & 0x4 != 0
    }

    /// The state letter of a `stat` line: the first field after the last `)`.
    static func stateLetter(_ bytes: UnsafeBufferPointer<UInt8>) -> Character? {
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")), close + 2 < bytes.count else { return nil }
        return Character(Unicode.Scalar(bytes[close + 2]))
    }

    /// The `field`th (0-based) space-separated number of `bytes`.
    static func number(at field: Int, in bytes: UnsafeBufferPointer<UInt8>) -> UInt64? {
        var current = 0
        var value: UInt64 = 0
        var digits = 0
        for byte in bytes {
            if byte >= 48, byte <= 57 {
                if current == field {
                    guard value < UInt64.max / 10 else { return nil }
                    value = value * 10 + UInt64(byte - 48)
                    digits += 1
                }
            } else {
                if current == field, digits > 0 { return value }
                if byte == 32 { current += 1 }
            }
        }
        return current == field && digits > 0 ? value : nil
    }

    /// The sum of `status`'s voluntary and involuntary context switches.
    static func contextSwitches(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64? {
        let status = ProcStatus.parse(String(decoding: bytes, as: UTF8.self))
        guard let voluntary = status["voluntary_ctxt_switches"].flatMap({ UInt64($0) }),
              let involuntary = status["nonvoluntary_ctxt_switches"].flatMap({ UInt64($0) }) else { return nil }
        return voluntary + involuntary
    }

    /// Whether a `stat` line says the kernel is ending the thread (``Thread/exiting``).
    public static func parseExiting(_ text: String) -> Bool {
        var bytes = Array(text.utf8)
        return bytes.withUnsafeMutableBufferPointer { isExiting(UnsafeBufferPointer($0)) }
    }

    /// The third number of a `schedstat` line ("run ns, wait ns, timeslices").
    public static func parseScheduleCount(_ text: String) throws(ProcFileError) -> UInt64 {
        var bytes = Array(text.utf8)
        let count = bytes.withUnsafeMutableBufferPointer { number(at: 2, in: UnsafeBufferPointer($0)) }
        guard let count else {
            throw .malformed(path: "schedstat", reason: "expected three numbers, got \"\(text)\"")
        }
        return count
    }
}
