// The processes and threads the probe starts: fork, fork-limit, fork-allocate, spawn,
// threads. Under the host apps make no process (seccomp, as iOS's sandbox): every fork
// and spawn fails with EPERM, and the output says so.
#if canImport(Glibc)
import Glibc
#endif

/// Forks up to `count` sleeping children, stopping at the first failure: their pids and
/// "" or the failure (" (EAGAIN)", say).
func forkSleepers(_ count: Int) -> (pids: [Int32], failure: String) {
    var pids: [Int32] = []
    for _ in 0..<count {
        let pid = forkSleeper()
        guard pid > 0 else { return (pids, " (\(errnoName(-pid)))") }
        pids.append(pid)
    }
    return (pids, "")
}

/// Forks a child that sleeps in `pause()` for good. Returns its pid, or minus the errno.
/// The child makes only async-signal-safe calls (the parent has other threads).
func forkSleeper() -> Int32 {
    let pid = fork()
    if pid == 0 {
        while true { pause() }
    }
    return pid > 0 ? pid : -errno
}

/// Forks a child that maps and touches `mebibytes` MiB, then exits 0. Returns its pid,
/// or minus the errno. (mmap, not malloc: the child may only make system calls.)
func forkAllocator(mebibytes: Int) -> Int32 {
    let pid = fork()
    if pid == 0 {
        let size = mebibytes << 20
        guard let memory = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              memory != MAP_FAILED else { _exit(1) }
        let bytes = memory.assumingMemoryBound(to: UInt8.self)
        var offset = 0
        while offset < size {
            bytes[offset] = 0xA5
            offset += 4096
        }
        _exit(0)
    }
    return pid > 0 ? pid : -errno
}

/// posix_spawn `path` (no arguments, no environment) and waits for it: "exit N", a
/// signal, or the spawn's errno ("EPERM" under the host).
func spawnAndReap(_ path: String) -> String {
    var pid: pid_t = 0
    let argv: [UnsafeMutablePointer<CChar>?] = [strdup(path), nil]
    defer { free(argv[0]) }
    let envp: [UnsafeMutablePointer<CChar>?] = [nil]
    let rc = posix_spawn(&pid, path, nil, nil, argv, envp)
    guard rc == 0 else { return errnoName(rc) }
    return reap(pid)
}

/// "forked 0 of 2 (EPERM)": the outcome of forking `count`, the pids (if any) after a colon.
func forkLine(_ label: String, _ pids: [Int32], of count: Int, _ failure: String, listing: Bool) -> String {
    let list = listing && !pids.isEmpty ? ": " + pids.map(String.init).joined(separator: ",") : ""
    return "[ProbeApp] \(label) \(pids.count) of \(count)\(list)\(failure)"
}

/// Waits for child `pid`: "exit N", "SIGKILL", "signal N" or the waitpid error.
@discardableResult
func reap(_ pid: Int32) -> String {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
        if errno != EINTR { return "waitpid: \(errnoName(errno))" }
    }
    let signal = status & 0x7f
    if signal == 0 { return "exit \((status >> 8) & 0xff)" }
    return signal == SIGKILL ? "SIGKILL" : "signal \(signal)"
}

/// Starts up to `count` threads, each blocked reading a pipe, stopping at the first
/// failure; then closes the pipe (each thread's read returns) and joins them. Returns
/// how many started and the error that stopped it (0 when none did).
func startBlockedThreads(_ count: Int) -> (started: Int, error: Int32) {
    var ends: [Int32] = [0, 0]
    guard pipe(&ends) == 0 else { return (0, errno) }
    var threads: [pthread_t] = []
    var failure: Int32 = 0
    for _ in 0..<count {
        var thread = pthread_t()
        // The read end's number rides in the argument (never 0: stdin is open).
        let rc = pthread_create(&thread, nil, { argument in
            var byte: UInt8 = 0
            _ = read(Int32(Int(bitPattern: argument)), &byte, 1)
            return nil
        }, UnsafeMutableRawPointer(bitPattern: Int(ends[0])))
        guard rc == 0 else {
            failure = rc
            break
        }
        threads.append(thread)
    }
    close(ends[1])
    for thread in threads { pthread_join(thread, nil) }
    close(ends[0])
    return (threads.count, failure)
}
