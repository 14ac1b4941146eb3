import CAppHostSys
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Processes left by a host that ended without shutting down, found by the uid they run
/// as, and killed without racing pid reuse.
///
/// A root host gives each app a uid of its own, claimed machine-wide (``AppIdentities``):
/// any process running as that uid is that app's, whatever its parent. Its apps die with
/// it (their parent-death signal), but a kernel or an older host that lost the signal
/// (issue 32: it was set before `setresuid`, which clears it) leaves them running,
/// suspended or not, under init. The next host must not report them dead while they run.
public enum LeftoverProcesses {
    /// One process found.
    public struct Found: Sendable, Equatable {
        public var pid: Int32
        public var uid: UInt32
    }

    /// Every live process whose real uid is one of `uids` (a scan of `/proc`; a process
    /// that ends while it is read is left out, and so is a zombie: it runs nothing, and
    /// only its parent can take it away).
    public static func find(uids: Set<UInt32>) -> [Found] {
        guard !uids.isEmpty, let directory = opendir("/proc") else { return [] }
        defer { closedir(directory) }
        var found: [Found] = []
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
            guard let pid = Int32(name), pid > 0 else { continue }
            guard let status = try? ProcStatus.read(pid: pid),
                  let real = status["Uid"]?.split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap({ UInt32($0) }),
                  uids.contains(real), status.state != "Z", status.state != "X" else { continue }
            found.append(Found(pid: pid, uid: real))
        }
        return found.sorted { $0.pid < $1.pid }
    }

    /// Kills each process of `found` that still runs as the uid it was found with, and
    /// waits (at most `timeoutMilliseconds` in all) until each has exited. Each pid is
    /// pinned with a pidfd and its uid read again after: a pid reused in between by
    /// another process is not touched. Returns the pids killed and those still there.
    public static func kill(_ found: [Found], timeoutMilliseconds: Int = 2000) -> (killed: [Int32], remaining: [Int32]) {
        var pinned: [(pid: Int32, fd: Int32)] = []
        for process in found {
            var fd: Int32 = -1
            guard aph_pidfd_open(process.pid, &fd) == 0 else { continue }
            guard let status = try? ProcStatus.read(pid: process.pid),
                  status["Uid"]?.split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap({ UInt32($0) }) == process.uid,
                  aph_pidfd_send_signal(fd, SIGKILL) == 0 else {
                _ = close(fd)
                continue
            }
            pinned.append((process.pid, fd))
        }
        defer { for (_, fd) in pinned { _ = close(fd) } }
        var start = timespec()
        clock_gettime(CLOCK_MONOTONIC, &start)
        func elapsedMilliseconds() -> Int {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            return (Int(now.tv_sec) - Int(start.tv_sec)) * 1000 + (Int(now.tv_nsec) - Int(start.tv_nsec)) / 1_000_000
        }
        // A pidfd turns readable when its process has exited (a stopped one dies of SIGKILL too).
        var waiting = pinned.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
        var remaining: Set<Int32> = Set(waiting.map(\.fd))
        while !waiting.isEmpty {
            let left = timeoutMilliseconds - elapsedMilliseconds()
            guard left > 0 else { break }
            let n = waiting.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), Int32(left)) }
            if n < 0 && errno != EINTR { break }
            for poll in waiting where poll.revents != 0 { remaining.remove(poll.fd) }
            waiting.removeAll { $0.revents != 0 }
            for i in waiting.indices { waiting[i].revents = 0 }
        }
        let killed = pinned.filter { !remaining.contains($0.fd) }.map(\.pid)
        let left = pinned.filter { remaining.contains($0.fd) }.map(\.pid)
        return (killed, left)
    }
}
