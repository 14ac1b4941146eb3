import CAppHostSys
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// The processes of one cgroup, listed from its `cgroup.procs` and signalled
/// without racing pid reuse.
///
/// A pid read from `cgroup.procs` may exit and be reused by an unrelated
/// process before the signal goes out. So each is first pinned with a pidfd,
/// the file is read again, and only the pidfds whose pid is still listed are
/// signalled: if the pid was reused in between, the new holder is either not
/// listed (skipped) or the pidfd names the old, dead process (ESRCH).
public enum CgroupProcesses {
    /// The pids in `procsFile` (a `cgroup.procs`: one line per live process,
    /// threads folded into their process); empty when it cannot be read.
    public static func list(_ procsFile: String) -> [Int32] {
        guard let text = try? readProcFile(procsFile) else { return [] }
        return text.split(separator: "\n").compactMap { Int32($0) }
    }

    /// Sends `signal` to every process listed in `procsFile` but those in
    /// `except`; returns the pids it reached.
    @discardableResult
    public static func signal(_ signal: Int32, in procsFile: String, except: Set<Int32> = []) -> [Int32] {
        let pinned = pin(list(procsFile).filter { !except.contains($0) })
        defer { for (_, fd) in pinned { _ = close(fd) } }
        let listed = Set(list(procsFile))
        var reached: [Int32] = []
        for (pid, fd) in pinned where listed.contains(pid) && aph_pidfd_send_signal(fd, signal) == 0 {
            reached.append(pid)
        }
        return reached
    }

    /// Kills every process in the cgroup and waits until each has exited:
    /// through `killFile` (cgroup v2 `cgroup.kill`) where given, else SIGKILL to
    /// each listed pid, again until the list is empty (a process forking while
    /// it is read shows up in the next round). Waits on pidfds, at most
    /// `timeoutMilliseconds` in all. Returns the pids still listed (empty when
    /// all are gone).
    @discardableResult
    public static func killAll(procsFile: String, killFile: String? = nil, timeoutMilliseconds: Int = 2000) -> [Int32] {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let end = Int(deadline.tv_sec) * 1000 + Int(deadline.tv_nsec) / 1_000_000 + timeoutMilliseconds
        func remaining() -> Int {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            return max(0, end - (Int(now.tv_sec) * 1000 + Int(now.tv_nsec) / 1_000_000))
        }
        while true {
            let pids = list(procsFile)
            if pids.isEmpty { return [] }
            let pinned = pin(pids)
            defer { for (_, fd) in pinned { _ = close(fd) } }
            if pinned.isEmpty {
                // Each exited between the two reads: gone from the next.
                if remaining() == 0 { return list(procsFile) }
                sched_yield()
                continue
            }
            var killedByFile = false
            if let killFile {
                let fd = open(killFile, O_WRONLY | O_CLOEXEC)
                if fd >= 0 {
                    let one: [UInt8] = [UInt8(ascii: "1")]
                    killedByFile = one.withUnsafeBytes { write(fd, $0.baseAddress, 1) } == 1
                    _ = close(fd)
                }
            }
            if !killedByFile {
                let listed = Set(list(procsFile))
                for (pid, fd) in pinned where listed.contains(pid) { _ = aph_pidfd_send_signal(fd, SIGKILL) }
            }
            // A pidfd turns readable when its process has exited.
            var waiting = pinned.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
            while !waiting.isEmpty {
                let left = remaining()
                if left == 0 { return list(procsFile) }
                let n = waiting.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), Int32(min(left, Int(Int32.max)))) }
                if n < 0 && errno != EINTR { break }
                waiting.removeAll { $0.revents != 0 }
                for i in waiting.indices { waiting[i].revents = 0 }
            }
            if remaining() == 0 { return list(procsFile) }
        }
    }

    /// A pidfd for each pid still alive.
    private static func pin(_ pids: [Int32]) -> [(pid: Int32, descriptor: Int32)] {
        pids.compactMap { pid in
            var fd: Int32 = -1
            return aph_pidfd_open(pid, &fd) == 0 ? (pid, fd) : nil
        }
    }
}
