// The escape attempts. Each is a function that returns what happened; none throws
// or leaves anything changed that matters to others:
//
// - fork and spawn: a child that got made exits at once and is reaped (apps make no
//   process: seccomp refuses, as iOS's sandbox does; the exec attempts spawn a helper,
//   so they stop there too);
// - a write that gets through creates only `hostile-was-here` files (evidence the
//   test looks for) or opens for writing and writes nothing (the host's database,
//   its event log, /proc/sys);
// - signals: `kill(pid, 0)` (the kernel's permission check, nothing delivered) and
//   `SIGCONT`, whose default action does nothing to a running process. Never
//   SIGSTOP or SIGKILL: the host of a test is the test runner itself, and a sandbox
//   that failed would take the run down with it;
// - ptrace: `PTRACE_SEIZE`, which does not stop the tracee (ATTACH would send it a
//   SIGSTOP), then interrupt, wait and detach at once;
// - mount: a read-only remount of a directory that is not a mount point, which the
//   kernel rejects with EINVAL only after every permission check has passed: EPERM
//   means refused, EINVAL means it got through, and nothing was mounted;
// - sethostname to the name it already has, chroot("/"), a mknod of /dev/null's
//   numbers in its own container, removed at once;
// - another's files: chmod, chown and utimensat to the mode, owner and times the
//   file already has (only its ctime moves; explicit times, since UTIME_OMIT for
//   both skips the permission check, and chown to the owner it has, since
//   chown(-1, -1) checks nothing); a setuid or setgid target is left alone (a chown
//   or chmod that got through could clear the bit); an extended attribute
//   `user.apphost-hostile` created (XATTR_CREATE) and removed at once, and a remove
//   of one that is not there (ENODATA means it got past the permission checks);
//   stat and an inotify watch, removed at once;
// - another process's limits and nice value: read, then set to what was read
//   (prlimit64 RLIMIT_NOFILE; setpriority to what getpriority says);
// - userfaultfd: a descriptor closed at once.
// Attempts that change this process (unshare, setns) run last.
import AppHostProtocol

#if canImport(Glibc)
import Glibc
#endif

/// How an attempt ended.
enum Verdict: String {
    /// The kernel (or the host) refused.
    case denied
    /// It worked: a hole.
    case allowed = "ALLOWED"
    /// It could not be tried here (no target, a missing device, ...).
    case skipped
}

/// What an attempt reports: the verdict and what the kernel said or what it got.
struct Outcome {
    var verdict: Verdict
    var detail: String

    static func denied(_ detail: String) -> Outcome { Outcome(verdict: .denied, detail: detail) }
    static func allowed(_ detail: String) -> Outcome { Outcome(verdict: .allowed, detail: detail) }
    static func skipped(_ detail: String) -> Outcome { Outcome(verdict: .skipped, detail: detail) }
}

/// Whether the harness vouches that every target it gave exists (`--targets-exist`).
nonisolated(unsafe) var targetsExist = false

/// A target the app cannot find. Where the harness vouches that every target it gave
/// exists (`--targets-exist`), not finding it is the sandbox hiding it (a pid namespace
/// of its own, the state directory under a tmpfs): denied. Otherwise the app cannot
/// tell, and skips it.
func outOfSight(_ detail: String) -> Outcome {
    targetsExist ? .denied("\(detail) in its sight: hidden (the harness vouches it exists)") : .skipped(detail)
}

/// Everything an attempt may look at.
struct AttackContext {
    var targets: Targets
    /// Descriptors open when main started, before any code of the app ran.
    var startupDescriptors: [Int32]
    /// The IPC socket's descriptor (the only one besides 0-2 the host passes).
    var ipcDescriptor: Int32
}

/// One attempt: a name (`[a-z0-9-]`) and the function that tries it.
struct Attempt {
    let name: String
    let run: (AttackContext) -> Outcome
}

/// Every attempt, in the order they run (the ones that change this process last).
func allAttempts() -> [Attempt] {
    [
        // Files: another app's container, the host's state, the machine's secrets.
        Attempt(name: "victim-container-read", run: readVictimFile),
        Attempt(name: "victim-container-write", run: writeVictimContainer),
        Attempt(name: "state-dir-create", run: createInStateDirectory),
        Attempt(name: "state-db-write", run: openDatabaseForWriting),
        Attempt(name: "event-log-append", run: openEventLogForAppending),
        Attempt(name: "event-log-read", run: readEventLog),
        Attempt(name: "shadow-read", run: readSecretFile),
        Attempt(name: "proc-sys-write", run: openProcSysForWriting),
        Attempt(name: "dev-mem", run: openDevMem),
        Attempt(name: "mknod", run: makeDeviceNode),
        Attempt(name: "inherited-fd", run: useInheritedDescriptor),
        // Others' files: metadata (which Landlock does not cover), stat, inotify.
        Attempt(name: "chmod-outside", run: chmodOutside),
        Attempt(name: "chown-outside", run: chownOutside),
        Attempt(name: "setxattr-outside", run: setXattrOutside),
        Attempt(name: "removexattr-outside", run: removeXattrOutside),
        Attempt(name: "utimensat-outside", run: setTimesOutside),
        Attempt(name: "victim-stat", run: statVictimFile),
        Attempt(name: "victim-inotify", run: watchVictimDocuments),
        // Other processes: signals, tracing, /proc, their descriptors.
        Attempt(name: "signal-host", run: { signalProcess($0.targets.hostPID, "host") }),
        Attempt(name: "signal-victim", run: { signalProcess($0.targets.victimPID, "victim app") }),
        Attempt(name: "signal-transferd", run: { signalProcess($0.targets.transferdPID, "transfer daemon") }),
        Attempt(name: "ptrace-host", run: { ptraceSeize($0.targets.hostPID, "host") }),
        Attempt(name: "ptrace-victim", run: { ptraceSeize($0.targets.victimPID, "victim app") }),
        Attempt(name: "host-proc-mem", run: readHostMemory),
        Attempt(name: "host-proc-maps", run: readHostMaps),
        Attempt(name: "host-fd-reopen", run: reopenHostDescriptor),
        Attempt(name: "victim-proc-environ", run: readVictimEnvironment),
        Attempt(name: "host-steal-fd", run: { stealDescriptor($0.targets.hostPID, "host") }),
        Attempt(name: "transferd-steal-fd", run: { stealDescriptor($0.targets.transferdPID, "transfer daemon") }),
        Attempt(name: "prlimit-host", run: { setOpenFilesLimit($0.targets.hostPID, "host") }),
        Attempt(name: "prlimit-transferd", run: { setOpenFilesLimit($0.targets.transferdPID, "transfer daemon") }),
        Attempt(name: "setpriority-host", run: { setNiceValue($0.targets.hostPID, "host") }),
        Attempt(name: "setpriority-transferd", run: { setNiceValue($0.targets.transferdPID, "transfer daemon") }),
        // Another process's scheduling, CPUs and I/O priority: each set to what it has.
        Attempt(name: "sched-setscheduler-host", run: { setSchedulingPolicy($0.targets.hostPID, "host") }),
        Attempt(name: "sched-setaffinity-host", run: { setAffinity($0.targets.hostPID, "host") }),
        Attempt(name: "ioprio-set-host", run: { setIOPriority($0.targets.hostPID, "host") }),
        Attempt(name: "sched-setscheduler-victim", run: { setSchedulingPolicy($0.targets.victimPID, "victim app") }),
        Attempt(name: "pidfd-open-host", run: { openPidfd($0.targets.hostPID, "host") }),
        // Sockets.
        Attempt(name: "transferd-connect", run: connectToTransferDaemon),
        Attempt(name: "control-socket", run: connectToControlSocket),
        Attempt(name: "abstract-socket", run: connectToAbstractSocket),
        Attempt(name: "socket-packet", run: { _ in openSocket(AF_PACKET, Int32(SOCK_RAW.rawValue), Int32(UInt16(0x0003).bigEndian), "AF_PACKET, SOCK_RAW, ETH_P_ALL") }),
        Attempt(name: "socket-raw-inet", run: { _ in openSocket(AF_INET, Int32(SOCK_RAW.rawValue), Int32(IPPROTO_ICMP), "AF_INET, SOCK_RAW, IPPROTO_ICMP") }),
        Attempt(name: "socket-netlink", run: { _ in openSocket(AF_NETLINK, Int32(SOCK_RAW.rawValue), 0, "AF_NETLINK, SOCK_RAW, NETLINK_ROUTE") }),
        // Kernel interfaces no app needs.
        Attempt(name: "bpf", run: loadBPFProgram),
        Attempt(name: "perf-event-open", run: openPerfEvent),
        Attempt(name: "keyctl", run: readUserKeyring),
        Attempt(name: "add-key", run: addKey),
        Attempt(name: "userfaultfd", run: openUserfaultfd),
        // Processes: an app makes none (iOS).
        Attempt(name: "fork", run: forkProcess),
        Attempt(name: "spawn-process", run: spawnProcess),
        // Privileges.
        Attempt(name: "hold-capabilities", run: holdCapabilities),
        Attempt(name: "exec-setuid", run: execSetuid),
        Attempt(name: "exec-regain-caps", run: execSelf),
        // New code in this process (iOS: code signing): exec replaces it, no fork needed.
        Attempt(name: "exec-replace", run: execReplace),
        Attempt(name: "execveat-memfd", run: execMemfd),
        Attempt(name: "map-written-executable", run: mapWrittenExecutable),
        Attempt(name: "sethostname", run: setHostname),
        Attempt(name: "chroot", run: changeRoot),
        Attempt(name: "mount", run: remount),
        // These change this process: last.
        Attempt(name: "setns", run: enterHostNamespace),
        Attempt(name: "unshare", run: unshareNamespaces),
    ]
}

// MARK: - Files

/// The name of the files a write that got through leaves behind.
let evidenceName = "hostile-was-here"

func readVictimFile(_ c: AttackContext) -> Outcome {
    guard let file = c.targets.victimFile else {
        // No file to read: its listing is a leak too.
        guard let container = c.targets.victimContainer else { return .skipped("no other app's container found") }
        let (names, e) = listDirectory(container)
        return e == 0 ? .allowed("listed \(container) (no file in it to read): \(names.sorted().joined(separator: " "))")
            : .denied("list \(container): \(errnoName(e))")
    }
    let (bytes, e) = readFile(file, limit: 4096)
    return e == 0 ? .allowed("read \(bytes.count) bytes of \(file)") : .denied("open \(file): \(errnoName(e))")
}

func writeVictimContainer(_ c: AttackContext) -> Outcome {
    guard let container = c.targets.victimContainer else { return .skipped("no other app's container found") }
    let dir = exists(container + "/Documents") ? container + "/Documents" : container
    return createEvidence(in: dir)
}

func createInStateDirectory(_ c: AttackContext) -> Outcome {
    guard let state = c.targets.stateDirectory else { return .skipped("no state directory found") }
    return createEvidence(in: state)
}

/// Creates `dir/hostile-was-here` and writes a line to it.
func createEvidence(in dir: String) -> Outcome {
    let path = dir + "/" + evidenceName
    let (fd, e) = openFile(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    guard fd >= 0 else { return .denied("create \(path): \(errnoName(e))") }
    defer { close(fd) }
    let w = writeAll(fd, Array("written by HostileApp\n".utf8))
    return .allowed("created \(path)" + (w == 0 ? " and wrote to it" : " (write: \(errnoName(w)))"))
}

func openDatabaseForWriting(_ c: AttackContext) -> Outcome {
    guard let state = c.targets.stateDirectory else { return .skipped("no state directory found") }
    return openForWriting(state + "/apphost.sqlite", flags: O_WRONLY)
}

func openEventLogForAppending(_ c: AttackContext) -> Outcome {
    guard let state = c.targets.stateDirectory else { return .skipped("no state directory found") }
    return openForWriting(state + "/events.jsonl", flags: O_WRONLY | O_APPEND)
}

/// Opens an existing file for writing and writes nothing.
func openForWriting(_ path: String, flags: Int32) -> Outcome {
    guard exists(path) else { return outOfSight("no \(path)") }
    let (fd, e) = openFile(path, flags)
    guard fd >= 0 else { return .denied("open \(path) for writing: \(errnoName(e))") }
    close(fd)
    return .allowed("opened \(path) for writing (nothing written)")
}

func readEventLog(_ c: AttackContext) -> Outcome {
    guard let state = c.targets.stateDirectory else { return .skipped("no state directory found") }
    let path = state + "/events.jsonl"
    let (bytes, e) = readFile(path, limit: 64 * 1024)
    guard e == 0 else { return e == ENOENT ? outOfSight("no \(path)") : .denied("open \(path): \(errnoName(e))") }
    let lines = bytes.split(separator: UInt8(ascii: "\n")).count
    return .allowed("read \(lines) events of the host (other apps' included)")
}

func readSecretFile(_ c: AttackContext) -> Outcome {
    let path = c.targets.secretFile
    guard exists(path) else { return .skipped("no \(path) on this machine") }
    let (bytes, e) = readFile(path, limit: 4096)
    return e == 0 ? .allowed("read \(bytes.count) bytes of \(path)") : .denied("open \(path): \(errnoName(e))")
}

func openProcSysForWriting(_ c: AttackContext) -> Outcome {
    let path = "/proc/sys/kernel/hostname"
    let (fd, e) = openFile(path, O_WRONLY)
    guard fd >= 0 else { return .denied("open \(path) for writing: \(errnoName(e))") }
    close(fd)
    return .allowed("opened \(path) for writing (nothing written)")
}

func openDevMem(_ c: AttackContext) -> Outcome {
    let path = "/dev/mem"
    guard exists(path) else { return .skipped("no \(path) on this machine") }
    let (fd, e) = openFile(path, O_RDONLY)
    guard fd >= 0 else { return .denied("open \(path): \(errnoName(e))") }
    close(fd)
    return .allowed("opened \(path) (nothing read)")
}

func makeDeviceNode(_ c: AttackContext) -> Outcome {
    guard let container = c.targets.container else { return .skipped("no container (HOME) to make it in") }
    let path = container + "/tmp/hostile-null"
    // Major 1, minor 3: /dev/null's numbers (makedev is a macro; this is its value).
    let dev: dev_t = (1 << 8) | 3
    guard mknod(path, S_IFCHR | 0o600, dev) == 0 else { return .denied("mknod \(path) c 1 3: \(lastError())") }
    unlink(path)
    return .allowed("made a character device node \(path) (1,3), then removed it")
}

func useInheritedDescriptor(_ c: AttackContext) -> Outcome {
    // The run-loop stamp page (a memfd of the app's own, issue 18) is the app's to write.
    let expected: Set<Int32> = [0, 1, 2, c.ipcDescriptor, IPCProtocol.stampDescriptor]
    let extra = c.startupDescriptors.filter { !expected.contains($0) }
    var note = ""
    if let leaked = c.targets.leakedDescriptor {
        note = extra.contains(leaked) ? "" : "; the host's descriptor \(leaked) is not among them"
    }
    guard let fd = extra.first else {
        return .denied("open at start: \(c.startupDescriptors.map(String.init).joined(separator: " ")) (stdio, the IPC socket and the run-loop stamp page)\(note)")
    }
    let link = readLink("/proc/self/fd/\(fd)") ?? "?"
    var st = stat()
    let statResult = fstat(fd, &st) == 0 ? "fstat ok" : "fstat \(lastError())"
    let (bytes, e) = readSome(fd, limit: 64, offset: 0)
    let readResult = e == 0 ? "read \(bytes.count) bytes" : "read \(errnoName(e))"
    return .allowed("inherited \(extra.map(String.init).joined(separator: ",")): fd \(fd) -> \(link), \(statResult), \(readResult)\(note)")
}

// MARK: - Others' files

/// A target of the metadata attempts: what it is (for the detail) and its path.
typealias FileTarget = (what: String, path: String?)

/// The outside file, the control socket and another app's file.
func outsideTargets(_ c: AttackContext) -> [FileTarget] {
    [("outside file", c.targets.outsideFile), ("control socket", c.targets.controlSocket),
     ("another app's file", c.targets.victimPath)]
}

/// Runs `probe` on each target with its stat(2), and sums up: ALLOWED when any got
/// through, denied when none did and at least one was refused (a target the app
/// cannot even stat is refused: the path walk stopped it), skipped otherwise.
func onEachTarget(_ targets: [FileTarget], leaveSetID: Bool = false,
                  _ probe: (String, stat) -> Outcome) -> Outcome {
    var results: [Outcome] = []
    for (what, path) in targets {
        guard let path else {
            results.append(.skipped("no \(what)"))
            continue
        }
        var st = stat()
        guard stat(path, &st) == 0 else {
            let e = errno
            results.append(e == ENOENT ? outOfSight("no \(what) \(path)") : .denied("stat \(what) \(path): \(errnoName(e))"))
            continue
        }
        if leaveSetID, st.st_mode & UInt32(S_ISUID | S_ISGID) != 0, (st.st_mode & S_IFMT) != S_IFDIR {
            results.append(.skipped("\(what) \(path) is setuid or setgid: left alone"))
            continue
        }
        let outcome = probe(path, st)
        results.append(Outcome(verdict: outcome.verdict, detail: "\(what): \(outcome.detail)"))
    }
    let detail = results.map(\.detail).joined(separator: "; ")
    if results.contains(where: { $0.verdict == .allowed }) { return .allowed(detail) }
    if results.contains(where: { $0.verdict == .denied }) { return .denied(detail) }
    return .skipped(detail)
}

/// A mode in octal, as ls -l's numbers: "0600".
func octal(_ mode: UInt32) -> String {
    let digits = String(mode & 0o7777, radix: 8)
    return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}

func chmodOutside(_ c: AttackContext) -> Outcome {
    onEachTarget(outsideTargets(c), leaveSetID: true) { path, st in
        let mode = mode_t(st.st_mode & 0o7777)
        guard chmod(path, mode) == 0 else { return .denied("chmod \(path) \(octal(mode)): \(lastError())") }
        return .allowed("chmod \(path) \(octal(mode)) succeeded (the mode it had)")
    }
}

func chownOutside(_ c: AttackContext) -> Outcome {
    onEachTarget(outsideTargets(c), leaveSetID: true) { path, st in
        guard chown(path, st.st_uid, st.st_gid) == 0 else {
            return .denied("chown \(path) \(st.st_uid):\(st.st_gid): \(lastError())")
        }
        return .allowed("chown \(path) \(st.st_uid):\(st.st_gid) succeeded (the owner it had)")
    }
}

/// The extended attribute the xattr attempts create and remove.
let hostileAttribute = "user.apphost-hostile"

/// setxattr(2) or removexattr(2) of `hostileAttribute` (raw: the Glibc module has no <sys/xattr.h>).
func xattrCall(set: Bool, _ path: String, flags: Int = 0) -> Int32 {
    let value: [UInt8] = [0x31]
    return path.withCString { p in
        hostileAttribute.withCString { n in
            value.withUnsafeBytes { v in
                set ? rawSyscall(SyscallNumber.setxattr, Int(bitPattern: p), Int(bitPattern: n),
                                 Int(bitPattern: v.baseAddress), v.count, flags).error
                    : rawSyscall(SyscallNumber.removexattr, Int(bitPattern: p), Int(bitPattern: n)).error
            }
        }
    }
}

/// The xattr targets: another app's file and the outside file (user attributes
/// exist on regular files and folders only, so not the socket).
func xattrTargets(_ c: AttackContext) -> [FileTarget] {
    [("another app's file", c.targets.victimPath), ("outside file", c.targets.outsideFile)]
}

func setXattrOutside(_ c: AttackContext) -> Outcome {
    onEachTarget(xattrTargets(c)) { path, _ in
        // XATTR_CREATE (1): never replaces one that is there.
        let e = xattrCall(set: true, path, flags: 1)
        switch e {
        case 0:
            let removed = xattrCall(set: false, path)
            return .allowed("setxattr \(path) \(hostileAttribute) succeeded; removed at once: \(errnoName(removed))")
        case EEXIST:
            return .allowed("setxattr \(path) \(hostileAttribute): EEXIST (past the permission checks; it was there already)")
        case EOPNOTSUPP:
            return .skipped("setxattr \(path): EOPNOTSUPP (its file system keeps no user attributes: cannot tell)")
        default:
            return .denied("setxattr \(path) \(hostileAttribute): \(errnoName(e))")
        }
    }
}

func removeXattrOutside(_ c: AttackContext) -> Outcome {
    onEachTarget(xattrTargets(c)) { path, _ in
        let e = xattrCall(set: false, path)
        switch e {
        case 0:
            return .allowed("removexattr \(path) \(hostileAttribute) removed one that was there")
        case ENODATA:
            return .allowed("removexattr \(path) \(hostileAttribute): ENODATA (past the permission checks; there was none to remove)")
        case EOPNOTSUPP:
            return .skipped("removexattr \(path): EOPNOTSUPP (its file system keeps no user attributes: cannot tell)")
        default:
            return .denied("removexattr \(path) \(hostileAttribute): \(errnoName(e))")
        }
    }
}

func setTimesOutside(_ c: AttackContext) -> Outcome {
    // Not another app's file: a running app may write it between the stat and the
    // call, and its mtime set back would undo that write's.
    onEachTarget(Array(outsideTargets(c).prefix(2))) { path, st in
        // Explicit times (the ones it has): only the owner (or CAP_FOWNER) may.
        let times = [st.st_atim, st.st_mtim]
        guard utimensat(AT_FDCWD, path, times, 0) == 0 else {
            return .denied("utimensat \(path) (its own atime and mtime): \(lastError())")
        }
        return .allowed("utimensat \(path) succeeded (set to the atime and mtime it had)")
    }
}

func statVictimFile(_ c: AttackContext) -> Outcome {
    guard let path = c.targets.victimPath else { return .skipped("no other app's container found") }
    var st = stat()
    guard stat(path, &st) == 0 else {
        let e = errno
        return e == ENOENT ? outOfSight("no \(path)") : .denied("stat \(path): \(errnoName(e))")
    }
    return .allowed("stat \(path): mode \(octal(st.st_mode)) uid \(st.st_uid) gid \(st.st_gid) size \(st.st_size) mtime \(st.st_mtim.tv_sec)")
}

func watchVictimDocuments(_ c: AttackContext) -> Outcome {
    guard let container = c.targets.victimContainer else { return .skipped("no other app's container found") }
    let documents = container + "/Documents"
    let path = exists(documents) ? documents : container
    let fd = inotify_init1(O_CLOEXEC)
    guard fd >= 0 else { return .skipped("inotify_init1: \(lastError())") }
    defer { close(fd) }
    // IN_ALL_EVENTS (0xfff): every access, change, open and close in the folder.
    let wd = inotify_add_watch(fd, path, 0xfff)
    guard wd >= 0 else { return .denied("inotify_add_watch \(path): \(lastError())") }
    inotify_rm_watch(fd, wd)
    return .allowed("inotify_add_watch \(path): watch \(wd) (the victim's file activity), removed at once")
}

// MARK: - Other processes

/// `kill(pid, 0)` and `kill(pid, SIGCONT)`: see the top of the file for why these two.
func signalProcess(_ pid: Int32?, _ who: String) -> Outcome {
    guard let pid else { return .skipped("no \(who) pid") }
    let probe = kill(pid, 0) == 0 ? 0 : errno
    let cont = kill(pid, SIGCONT) == 0 ? 0 : errno
    let detail = "kill(\(pid), 0): \(errnoName(probe)); kill(\(pid), SIGCONT): \(errnoName(cont))"
    if probe == ESRCH && cont == ESRCH { return outOfSight("no process \(pid) (\(who))") }
    return probe == 0 || cont == 0 ? .allowed(detail) : .denied(detail)
}

func ptraceSeize(_ pid: Int32?, _ who: String) -> Outcome {
    guard let pid else { return .skipped("no \(who) pid") }
    // PTRACE_SEIZE = 0x4206: attaches without stopping the tracee.
    let r = rawSyscall(SyscallNumber.ptrace, 0x4206, Int(pid), 0, 0)
    guard r.error == 0 else {
        return r.error == ESRCH ? outOfSight("no process \(pid) (\(who))") : .denied("PTRACE_SEIZE \(pid): \(errnoName(r.error))")
    }
    // Let go at once: PTRACE_INTERRUPT (0x4207), wait for the stop (__WALL), PTRACE_DETACH (17).
    _ = rawSyscall(SyscallNumber.ptrace, 0x4207, Int(pid), 0, 0)
    var status: Int32 = 0
    var waited = waitpid(pid, &status, Int32(bitPattern: 0x4000_0000))
    while waited < 0 && errno == EINTR { waited = waitpid(pid, &status, Int32(bitPattern: 0x4000_0000)) }
    let detach = rawSyscall(SyscallNumber.ptrace, 17, Int(pid), 0, 0)
    return .allowed("PTRACE_SEIZE \(pid) (\(who)) succeeded; interrupted, then detached: \(errnoName(detach.error))")
}

func readHostMemory(_ c: AttackContext) -> Outcome {
    guard let host = c.targets.hostPID else { return .skipped("no host pid") }
    let path = "/proc/\(host)/mem"
    let (fd, e) = openFile(path, O_RDONLY)
    guard fd >= 0 else { return .denied("open \(path): \(errnoName(e))") }
    defer { close(fd) }
    // An address the host has mapped readable, from its maps when they can be read.
    if let maps = readText("/proc/\(host)/maps"),
       let line = maps.split(separator: "\n").first(where: { $0.split(separator: " ").dropFirst().first?.hasPrefix("r") == true }),
       let start = line.split(separator: "-").first.flatMap({ UInt64($0, radix: 16) }),
       let offset = Int(exactly: start) {
        let (bytes, re) = readSome(fd, limit: 16, offset: offset)
        let read = re == 0 ? "read \(bytes.count) bytes at 0x\(String(start, radix: 16))" : "read at 0x\(String(start, radix: 16)): \(errnoName(re))"
        return .allowed("opened \(path); \(read)")
    }
    return .allowed("opened \(path) (no address to read: maps unreadable)")
}

func readHostMaps(_ c: AttackContext) -> Outcome {
    guard let host = c.targets.hostPID else { return .skipped("no host pid") }
    let path = "/proc/\(host)/maps"
    let (bytes, e) = readFile(path, limit: 1 << 20)
    guard e == 0 else { return .denied("open \(path): \(errnoName(e))") }
    let lines = bytes.split(separator: UInt8(ascii: "\n")).count
    return .allowed("read \(path): \(lines) mappings")
}

func reopenHostDescriptor(_ c: AttackContext) -> Outcome {
    guard let host = c.targets.hostPID else { return .skipped("no host pid") }
    let dir = "/proc/\(host)/fd"
    let (names, e) = listDirectory(dir)
    guard e == 0 else { return .denied("list \(dir): \(errnoName(e))") }
    // Open each descriptor's magic link; the first regular file that opens is a hole
    // (the host's database, its event log). Links that cannot be read are tried too.
    var errors: [Int32: Int] = [:]
    var unreadable = 0
    for fd in names.compactMap({ Int32($0) }).sorted() {
        let link = readLink("\(dir)/\(fd)")
        if link == nil { unreadable += 1 }
        if let link, !link.hasPrefix("/") || link.hasPrefix("/dev/") { continue }
        let (opened, oe) = openFile("\(dir)/\(fd)", O_RDONLY | O_NONBLOCK | O_NOCTTY)
        guard opened >= 0 else {
            errors[oe, default: 0] += 1
            continue
        }
        var st = stat()
        let isFile = fstat(opened, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
        close(opened)
        if isFile {
            return .allowed("reopened the host's fd \(fd) through \(dir)/\(fd): \(link ?? "(link unreadable)")")
        }
    }
    if errors.isEmpty { return .skipped("\(names.count) descriptors of the host, none a file") }
    let counts = errors.sorted { $0.key < $1.key }.map { "\(errnoName($0.key))x\($0.value)" }.joined(separator: " ")
    return .denied("open \(dir)/N: \(counts)" + (unreadable > 0 ? "; \(unreadable) links unreadable" : ""))
}

func readVictimEnvironment(_ c: AttackContext) -> Outcome {
    guard let victim = c.targets.victimPID else { return .skipped("no victim pid") }
    let path = "/proc/\(victim)/environ"
    let (bytes, e) = readFile(path, limit: 64 * 1024)
    guard e == 0 else { return e == ESRCH || e == ENOENT ? outOfSight("no process \(victim)") : .denied("read \(path): \(errnoName(e))") }
    let home = bytes.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }.first { $0.hasPrefix("HOME=") }
    return .allowed("read \(bytes.count) bytes of \(path)" + (home.map { " (\($0))" } ?? ""))
}

/// pidfd_open + pidfd_getfd: a copy of one of `pid`'s descriptors.
func stealDescriptor(_ pid: Int32?, _ who: String) -> Outcome {
    guard let pid else { return .skipped("no \(who) pid") }
    let open = rawSyscall(SyscallNumber.pidfdOpen, Int(pid), 0)
    guard open.error == 0 else {
        return open.error == ESRCH ? outOfSight("no process \(pid) (\(who))") : .denied("pidfd_open \(pid): \(errnoName(open.error))")
    }
    let pidfd = Int32(truncatingIfNeeded: open.value)
    defer { close(pidfd) }
    // Its sockets first (the IPC with the host), else the low numbers.
    let sockets = ProcessDescriptors(of: pid).sockets.map(\.fd)
    var errors: [Int32: Int] = [:]
    for target in sockets + Array(0..<32) {
        let r = rawSyscall(SyscallNumber.pidfdGetfd, Int(pidfd), Int(target), 0)
        if r.error == 0 {
            let fd = Int32(truncatingIfNeeded: r.value)
            let link = readLink("/proc/self/fd/\(fd)") ?? "?"
            close(fd)
            return .allowed("pidfd_getfd took a copy of the \(who)'s fd \(target) (\(link))")
        }
        errors[r.error, default: 0] += 1
        // EPERM is the answer for every descriptor: no need to ask 32 times.
        if r.error == EPERM || r.error == EACCES { break }
    }
    return .denied("pidfd_getfd on \(pid): " + errors.sorted { $0.key < $1.key }.map { "\(errnoName($0.key))x\($0.value)" }.joined(separator: " "))
}

/// RLIMIT_NOFILE's soft and hard limits from `/proc/<pid>/limits`, which any
/// process may read ("unlimited" is RLIM_INFINITY), or nil.
func openFilesLimit(fromProc pid: Int32) -> (soft: UInt64, hard: UInt64)? {
    guard let text = readText("/proc/\(pid)/limits") else { return nil }
    guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Max open files") }) else { return nil }
    let fields = line.split(separator: " ", omittingEmptySubsequences: true)
    guard fields.count >= 5 else { return nil }
    func value(_ s: Substring) -> UInt64? { s == "unlimited" ? UInt64.max : UInt64(s) }
    guard let soft = value(fields[3]), let hard = value(fields[4]) else { return nil }
    return (soft, hard)
}

/// prlimit64 on another process: read its RLIMIT_NOFILE, then set it to what it is
/// (read from /proc/<pid>/limits when the read is refused).
func setOpenFilesLimit(_ pid: Int32?, _ who: String) -> Outcome {
    guard let pid else { return .skipped("no \(who) pid") }
    let nofile = 7  // RLIMIT_NOFILE
    var old: [UInt64] = [0, 0]
    let read = old.withUnsafeMutableBytes {
        rawSyscall(SyscallNumber.prlimit64, Int(pid), nofile, 0, Int(bitPattern: $0.baseAddress))
    }
    if read.error == ESRCH { return outOfSight("no process \(pid) (\(who))") }
    var notes: [String] = []
    var value: (soft: UInt64, hard: UInt64)?
    if read.error == 0 {
        value = (old[0], old[1])
        notes.append("prlimit64(\(pid), RLIMIT_NOFILE) read \(old[0])/\(old[1])")
    } else {
        notes.append("prlimit64(\(pid), RLIMIT_NOFILE) read: \(errnoName(read.error))")
        value = openFilesLimit(fromProc: pid)
    }
    guard let value else {
        notes.append("no value to set it back to (/proc/\(pid)/limits unreadable): the write was not tried")
        return read.error == 0 ? .allowed(notes.joined(separator: "; ")) : .denied(notes.joined(separator: "; "))
    }
    var new: [UInt64] = [value.soft, value.hard]
    let write = new.withUnsafeMutableBytes {
        rawSyscall(SyscallNumber.prlimit64, Int(pid), nofile, Int(bitPattern: $0.baseAddress), 0)
    }
    notes.append(write.error == 0 ? "set to \(value.soft)/\(value.hard) (what it was)"
                 : "set to \(value.soft)/\(value.hard) (what it is): \(errnoName(write.error))")
    let detail = notes.joined(separator: "; ")
    return read.error == 0 || write.error == 0 ? .allowed(detail) : .denied(detail)
}

/// The nice value of a process's main thread (field 19 of `/proc/<pid>/stat`), or nil.
func niceValue(fromProc pid: Int32) -> Int? {
    guard let stat = readText("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return nil }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    // fields[0] is field 3 (state).
    guard fields.count > 16 else { return nil }
    return Int(fields[16])
}

/// setpriority on another process (its main thread), to the nice value
/// getpriority (which checks nothing) says it has.
func setNiceValue(_ pid: Int32?, _ who: String) -> Outcome {
    guard let pid else { return .skipped("no \(who) pid") }
    // PRIO_PROCESS (0). The raw getpriority returns 20 - nice.
    let get = rawSyscall(SyscallNumber.getpriority, 0, Int(pid))
    if get.error == ESRCH { return outOfSight("no process \(pid) (\(who))") }
    var notes: [String] = []
    let nice: Int?
    if get.error == 0 {
        nice = 20 - get.value
        notes.append("getpriority(\(pid)): nice \(20 - get.value)")
    } else {
        notes.append("getpriority(\(pid)): \(errnoName(get.error))")
        nice = niceValue(fromProc: pid)
    }
    guard let nice else {
        notes.append("no value to set (/proc/\(pid)/stat unreadable): setpriority was not tried")
        return .denied(notes.joined(separator: "; "))
    }
    let set = rawSyscall(SyscallNumber.setpriority, 0, Int(pid), nice)
    notes.append(set.error == 0 ? "setpriority(\(pid), \(nice)) succeeded (the value it had)"
                 : "setpriority(\(pid), \(nice)): \(errnoName(set.error))")
    let detail = notes.joined(separator: "; ")
    return set.error == 0 ? .allowed(detail) : .denied(detail)
}

/// `sched_setscheduler(pid, policy, param)` with the policy and priority it has.
func setSchedulingPolicy(_ pid: Int32?, _ who: String) -> Outcome {
    guard let pid else { return .skipped("no \(who) pid") }
    let policy = rawSyscall(SyscallNumber.schedGetscheduler, Int(pid))
    if policy.error == ESRCH { return outOfSight("no process \(pid) (\(who))") }
    guard policy.error == 0 else { return .skipped("sched_getscheduler(\(pid)): \(errnoName(policy.error))") }
    var priority: Int32 = 0
    let get = withUnsafeMutablePointer(to: &priority) { rawSyscall(SyscallNumber.schedGetparam, Int(pid), Int(bitPattern: $0)) }
    guard get.error == 0 else { return .skipped("sched_getparam(\(pid)): \(errnoName(get.error))") }
    let set = withUnsafeMutablePointer(to: &priority) { rawSyscall(SyscallNumber.schedSetscheduler, Int(pid), policy.value, Int(bitPattern: $0)) }
    let detail = "sched_setscheduler(\(pid), policy \(policy.value), priority \(priority)) (what it has): "
        + (set.error == 0 ? "succeeded" : errnoName(set.error))
    return set.error == 0 ? .allowed(detail) : .denied(detail)
}

/// `sched_setaffinity(pid, mask)` with the mask it has.
func setAffinity(_ pid: Int32?, _ who: String) -> Outcome {
    guard let pid else { return .skipped("no \(who) pid") }
    var mask = [UInt64](repeating: 0, count: 16)
    let size = mask.count * 8
    let get = mask.withUnsafeMutableBytes { rawSyscall(SyscallNumber.schedGetaffinity, Int(pid), size, Int(bitPattern: $0.baseAddress)) }
    if get.error == ESRCH { return outOfSight("no process \(pid) (\(who))") }
    guard get.error == 0 else { return .skipped("sched_getaffinity(\(pid)): \(errnoName(get.error))") }
    let set = mask.withUnsafeMutableBytes { rawSyscall(SyscallNumber.schedSetaffinity, Int(pid), get.value, Int(bitPattern: $0.baseAddress)) }
    let detail = "sched_setaffinity(\(pid), the CPUs it has): " + (set.error == 0 ? "succeeded" : errnoName(set.error))
    return set.error == 0 ? .allowed(detail) : .denied(detail)
}

/// `ioprio_set(IOPRIO_WHO_PROCESS, pid, ioprio)` with the I/O priority it has.
func setIOPriority(_ pid: Int32?, _ who: String) -> Outcome {
    guard let pid else { return .skipped("no \(who) pid") }
    let get = rawSyscall(SyscallNumber.ioprioGet, 1, Int(pid))
    if get.error == ESRCH { return outOfSight("no process \(pid) (\(who))") }
    guard get.error == 0 else { return .skipped("ioprio_get(\(pid)): \(errnoName(get.error))") }
    let set = rawSyscall(SyscallNumber.ioprioSet, 1, Int(pid), get.value)
    let detail = "ioprio_set(IOPRIO_WHO_PROCESS, \(pid), \(get.value)) (what it has): " + (set.error == 0 ? "succeeded" : errnoName(set.error))
    return set.error == 0 ? .allowed(detail) : .denied(detail)
}

/// `pidfd_open(pid)`: a handle on another process (closed at once).
func openPidfd(_ pid: Int32?, _ who: String) -> Outcome {
    guard let pid else { return .skipped("no \(who) pid") }
    let open = rawSyscall(SyscallNumber.pidfdOpen, Int(pid), 0)
    if open.error == ESRCH { return outOfSight("no process \(pid) (\(who))") }
    guard open.error == 0 else { return .denied("pidfd_open(\(pid)): \(errnoName(open.error))") }
    close(Int32(open.value))
    return .allowed("pidfd_open(\(pid)): descriptor \(open.value)")
}

// MARK: - New code

/// `execve` of a path that does not exist: ENOENT means the call got past every check
/// before the path walk (a real program would have replaced this one); EPERM, refused.
func execReplace(_ c: AttackContext) -> Outcome {
    let path = "/nonexistent-apphost-hostile/echo"
    let e = path.withCString { p -> Int32 in
        var argv: [UnsafePointer<CChar>?] = [p, nil]
        var envp: [UnsafePointer<CChar>?] = [nil]
        return argv.withUnsafeMutableBufferPointer { a in
            envp.withUnsafeMutableBufferPointer { e in
                rawSyscall(SyscallNumber.execve, Int(bitPattern: p), Int(bitPattern: a.baseAddress), Int(bitPattern: e.baseAddress)).error
            }
        }
    }
    let detail = "execve(\(path)): \(errnoName(e))"
    return e == EPERM ? .denied(detail) : .allowed(detail + " (the call reached the path walk: an existing program would run)")
}

/// A file it wrote in its container mapped executable (`mmap` with `PROT_EXEC`), the
/// way a loader would run code it fetched: refused on a noexec mount (`EPERM`). The page
/// holds a `ret` and is never called.
func mapWrittenExecutable(_ c: AttackContext) -> Outcome {
    guard let container = c.targets.container else { return .skipped("no container (HOME) to write in") }
    let path = container + "/hostile-code"
    let fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o700)
    guard fd >= 0 else { return .skipped("create \(path): \(lastError())") }
    defer { close(fd); unlink(path) }
    var page = [UInt8](repeating: 0xC3, count: 4096)
    guard page.withUnsafeMutableBytes({ write(fd, $0.baseAddress, $0.count) }) == 4096 else {
        return .skipped("write \(path): \(lastError())")
    }
    let mapped = mmap(nil, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0)
    if mapped != MAP_FAILED {
        munmap(mapped, 4096)
        return .allowed("mapped \(path), which it wrote, executable")
    }
    let mapError = errno
    // The other way to the same end: a readable mapping made executable afterwards.
    guard let readable = mmap(nil, 4096, PROT_READ, MAP_PRIVATE, fd, 0), readable != MAP_FAILED else {
        return .skipped("mmap(PROT_READ) of \(path): \(lastError())")
    }
    defer { munmap(readable, 4096) }
    if mprotect(readable, 4096, PROT_READ | PROT_EXEC) == 0 {
        return .allowed("mprotect(PROT_EXEC) of \(path), which it wrote, mapped readable")
    }
    let protectError = errno
    return .denied("mmap(PROT_EXEC) of \(path): \(errnoName(mapError)); mprotect(PROT_EXEC): \(errnoName(protectError))")
}

/// `execveat` of a memfd it wrote (here empty, so an exec that got through fails with
/// ENOEXEC instead of replacing this process): the copy of `/usr/bin/echo` an attacker ran.
func execMemfd(_ c: AttackContext) -> Outcome {
    let name = "hostile"
    let made = name.withCString { rawSyscall(SyscallNumber.memfdCreate, Int(bitPattern: $0), 0) }
    guard made.error == 0 else { return .denied("memfd_create: \(errnoName(made.error))") }
    let fd = Int32(made.value)
    defer { close(fd) }
    let e = "".withCString { empty -> Int32 in
        var argv: [UnsafePointer<CChar>?] = [empty, nil]
        var envp: [UnsafePointer<CChar>?] = [nil]
        return argv.withUnsafeMutableBufferPointer { a in
            envp.withUnsafeMutableBufferPointer { e in
                // AT_EMPTY_PATH = 0x1000
                rawSyscall(SyscallNumber.execveat, Int(fd), Int(bitPattern: empty), Int(bitPattern: a.baseAddress),
                           Int(bitPattern: e.baseAddress), 0x1000).error
            }
        }
    }
    let detail = "execveat(memfd \(fd), AT_EMPTY_PATH): \(errnoName(e))"
    return e == EPERM ? .denied(detail) : .allowed(detail + " (the call reached the loader: a memfd holding a program would run)")
}

// MARK: - Sockets

func connectToTransferDaemon(_ c: AttackContext) -> Outcome {
    guard let daemon = c.targets.transferdPID else { return .skipped("no transfer daemon pid") }
    let descriptors = ProcessDescriptors(of: daemon)
    var notes = [descriptors.summary]
    // A socket it bound (a path or an abstract name) could be connected to.
    let bound = boundUnixSockets()
    for socket in descriptors.sockets {
        guard let address = bound[socket.inode] else { continue }
        let (fd, ce, call) = connectUnix(address)
        if fd >= 0 {
            close(fd)
            return .allowed("connected to the daemon's socket \(address)")
        }
        notes.append("\(call == "connect" ? "connect \(address)" : call): \(errnoName(ce))")
    }
    if descriptors.error == 0 && descriptors.unreadable.isEmpty {
        notes.append("\(descriptors.sockets.filter { bound[$0.inode] != nil }.count) bound to a name")
    }
    // Its descriptors' magic links as socket paths: its sockets, else every descriptor.
    let candidates = !descriptors.sockets.isEmpty ? descriptors.sockets.map(\.fd)
        : descriptors.error == 0 ? descriptors.all : Array(0..<16)
    var errors: [String: Int] = [:]
    for fd in candidates {
        let (s, ce, call) = connectUnix(.path("/proc/\(daemon)/fd/\(fd)"))
        if s >= 0 {
            close(s)
            return .allowed("connected through /proc/\(daemon)/fd/\(fd)")
        }
        errors["\(call == "connect" ? "connect" : call): \(errnoName(ce))", default: 0] += 1
    }
    if !errors.isEmpty {
        notes.append("to /proc/\(daemon)/fd/N: " + errors.sorted { $0.key < $1.key }.map { "\($0.key)x\($0.value)" }.joined(separator: " "))
    }
    return .denied(notes.joined(separator: "; "))
}

func connectToControlSocket(_ c: AttackContext) -> Outcome {
    guard let path = c.targets.controlSocket else { return .skipped("no control socket path") }
    guard exists(path) else { return outOfSight("no \(path)") }
    let (fd, e, call) = connectUnix(.path(path))
    guard fd >= 0 else { return .denied("\(call == "connect" ? "connect \(path)" : "\(call) to reach \(path)"): \(errnoName(e))") }
    defer { close(fd) }
    // Prove it is the host: a ping, answered with a pong.
    guard let frame = try? Frame.encode(ControlRequest.ping(version: ControlSocket.version)) else {
        return .allowed("connected to \(path)")
    }
    // The host may answer (a refusal) and close before reading: a failed write is not
    // the end, what it sent is still there to read.
    let w = writeAll(fd, frame)
    setReceiveTimeout(fd, seconds: 5)
    var decoder = FrameDecoder()
    while true {
        let (bytes, re) = readSome(fd, limit: 4096, once: true)
        if re != 0 || bytes.isEmpty {
            if w != 0 { return .denied("connected to \(path), but the host closed it unanswered (write: \(errnoName(w)))") }
            return .allowed("connected to \(path) (no answer: \(errnoName(re)))")
        }
        decoder.append(bytes)
        if let payload = try? decoder.next() {
            switch try? Frame.decode(ControlResponse.self, from: payload) {
            case .pong(let pid, _)?:
                return .allowed("connected to \(path); the host answered a ping (pong from pid \(pid))")
            case .error(let error)? where error.code == .refused:
                return .denied("connected to \(path); the host refused: \(error.message)")
            default:
                return .allowed("connected to \(path); the host answered")
            }
        }
    }
}

func connectToAbstractSocket(_ c: AttackContext) -> Outcome {
    guard let name = c.targets.abstractName else {
        return .skipped("nobody listens on an abstract socket here (the host has none, /proc/net/unix lists none)")
    }
    let (fd, e, call) = connectUnix(.abstract(name))
    guard fd >= 0 else {
        return e == ECONNREFUSED ? .skipped("nobody listens on @\(name)")
            : .denied("\(call == "connect" ? "connect @\(name)" : "\(call) to reach @\(name)"): \(errnoName(e))")
    }
    close(fd)
    return .allowed("connected to @\(name)")
}

func openSocket(_ family: Int32, _ type: Int32, _ proto: Int32, _ what: String) -> Outcome {
    let (fd, e) = makeSocket(family, type, proto)
    guard fd >= 0 else { return .denied("socket(\(what)): \(errnoName(e))") }
    close(fd)
    return .allowed("socket(\(what)) = fd \(fd)")
}

// MARK: - Kernel interfaces

func loadBPFProgram(_ c: AttackContext) -> Outcome {
    // A socket filter of two instructions: r0 = 0; exit.
    var instructions: [UInt64] = [0xb7, 0x95]
    var license: [CChar] = Array("GPL".utf8CString)
    var attr = [UInt8](repeating: 0, count: 128)
    let r = instructions.withUnsafeMutableBytes { insns in
        license.withUnsafeMutableBytes { lic in
            attr.withUnsafeMutableBytes { a -> (value: Int, error: Int32) in
                a.storeBytes(of: UInt32(1), toByteOffset: 0, as: UInt32.self)  // BPF_PROG_TYPE_SOCKET_FILTER
                a.storeBytes(of: UInt32(2), toByteOffset: 4, as: UInt32.self)  // insn_cnt
                a.storeBytes(of: UInt64(UInt(bitPattern: insns.baseAddress)), toByteOffset: 8, as: UInt64.self)
                a.storeBytes(of: UInt64(UInt(bitPattern: lic.baseAddress)), toByteOffset: 16, as: UInt64.self)
                // BPF_PROG_LOAD = 5.
                return rawSyscall(SyscallNumber.bpf, 5, Int(bitPattern: a.baseAddress), a.count)
            }
        }
    }
    guard r.error == 0 else { return .denied("bpf(BPF_PROG_LOAD): \(errnoName(r.error))") }
    close(Int32(truncatingIfNeeded: r.value))
    return .allowed("bpf(BPF_PROG_LOAD) loaded a socket filter (fd \(r.value))")
}

func openPerfEvent(_ c: AttackContext) -> Outcome {
    let target = c.targets.hostPID ?? 0
    var attr = [UInt8](repeating: 0, count: 128)
    let r = attr.withUnsafeMutableBytes { a -> (value: Int, error: Int32) in
        a.storeBytes(of: UInt32(1), toByteOffset: 0, as: UInt32.self)    // PERF_TYPE_SOFTWARE
        a.storeBytes(of: UInt32(128), toByteOffset: 4, as: UInt32.self)  // size
        a.storeBytes(of: UInt64(1), toByteOffset: 8, as: UInt64.self)    // PERF_COUNT_SW_TASK_CLOCK
        // disabled, exclude_kernel, exclude_hv.
        a.storeBytes(of: UInt64(1 | 1 << 5 | 1 << 6), toByteOffset: 40, as: UInt64.self)
        // pid, cpu -1, no group, PERF_FLAG_FD_CLOEXEC (8).
        return rawSyscall(SyscallNumber.perfEventOpen, Int(bitPattern: a.baseAddress), Int(target), -1, -1, 8)
    }
    let whose = target == 0 ? "itself" : "pid \(target) (host)"
    guard r.error == 0 else { return .denied("perf_event_open on \(whose): \(errnoName(r.error))") }
    close(Int32(truncatingIfNeeded: r.value))
    return .allowed("perf_event_open: a task-clock counter on \(whose)")
}

func readUserKeyring(_ c: AttackContext) -> Outcome {
    // KEYCTL_GET_KEYRING_ID (0) of KEY_SPEC_USER_KEYRING (-4): the keyring every
    // process of this uid shares, the host's included.
    let r = rawSyscall(SyscallNumber.keyctl, 0, -4, 0)
    return r.error == 0 ? .allowed("keyctl: the user keyring is \(r.value)") : .denied("keyctl(KEYCTL_GET_KEYRING_ID): \(errnoName(r.error))")
}

func addKey(_ c: AttackContext) -> Outcome {
    // Into KEY_SPEC_PROCESS_KEYRING (-2): gone when this process ends.
    let r = "user".withCString { type in
        "apphost-escape".withCString { description in
            "x".withCString { payload in
                rawSyscall(SyscallNumber.addKey, Int(bitPattern: type), Int(bitPattern: description),
                           Int(bitPattern: payload), 1, -2)
            }
        }
    }
    return r.error == 0 ? .allowed("add_key: key \(r.value) in the process keyring") : .denied("add_key: \(errnoName(r.error))")
}

func openUserfaultfd(_ c: AttackContext) -> Outcome {
    var notes: [String] = []
    // Plain, then UFFD_USER_MODE_ONLY (1), which the kernel grants any process
    // (vm.unprivileged_userfaultfd and CAP_SYS_PTRACE only guard kernel-mode faults).
    let plain = Int(O_CLOEXEC | O_NONBLOCK)
    for (flags, label) in [(plain, "O_CLOEXEC|O_NONBLOCK"), (plain | 1, "O_CLOEXEC|O_NONBLOCK|UFFD_USER_MODE_ONLY")] {
        let r = rawSyscall(SyscallNumber.userfaultfd, flags)
        if r.error == 0 {
            close(Int32(truncatingIfNeeded: r.value))
            return .allowed((notes + ["userfaultfd(\(label)) = fd \(r.value), closed"]).joined(separator: "; "))
        }
        notes.append("userfaultfd(\(label)): \(errnoName(r.error))")
    }
    // The device (Linux 6.1) that makes the same descriptors with an ioctl.
    let device = "/dev/userfaultfd"
    if exists(device) {
        let (fd, e) = openFile(device, O_RDWR)
        if fd >= 0 {
            close(fd)
            return .allowed((notes + ["opened \(device) (no ioctl made), closed"]).joined(separator: "; "))
        }
        notes.append("open \(device): \(errnoName(e))")
    }
    return .denied(notes.joined(separator: "; "))
}

// MARK: - Processes

func forkProcess(_ c: AttackContext) -> Outcome {
    // glibc's fork (a clone without CLONE_THREAD), then the fork syscall where there is one.
    var said: [String] = []
    let pid = fork()
    if pid == 0 { _exit(0) }
    if pid > 0 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return .allowed("fork: child \(pid) made")
    }
    said.append("fork: \(lastError())")
    if let number = SyscallNumber.fork {
        let r = rawSyscall(number)
        if r.error == 0 && r.value == 0 { _exit(0) }
        if r.error == 0 {
            var status: Int32 = 0
            while waitpid(pid_t(r.value), &status, 0) < 0 && errno == EINTR {}
            return .allowed("fork syscall: child \(r.value) made")
        }
        said.append("fork syscall: \(errnoName(r.error))")
    }
    return .denied(said.joined(separator: "; "))
}

func spawnProcess(_ c: AttackContext) -> Outcome {
    let (spawnError, _, status) = runHelper("/bin/true", [])
    return spawnError == 0 ? .allowed("posix_spawn /bin/true: ran, exit \(status)")
        : .denied("posix_spawn /bin/true: \(errnoName(spawnError))")
}

// MARK: - Privileges

func holdCapabilities(_ c: AttackContext) -> Outcome {
    let p = Privileges.current()
    let detail = "uid \(p.uid) euid \(p.euid) CapEff \(hex(p.effective)) CapPrm \(hex(p.permitted)) NoNewPrivs \(p.noNewPrivs)"
    return p.effective != 0 || p.permitted != 0 ? .allowed("holds capabilities: \(detail)") : .denied("no capabilities: \(detail)")
}

/// Runs `path --report-privileges` and compares what it has with what this process has.
func compareAfterExec(_ path: String, _ what: String) -> Outcome {
    let before = Privileges.current()
    // A setuid file owned by another uid: whether exec honours the bit shows even when
    // this app is root already (a setuid-root file could give it nothing to see).
    var st = stat()
    let setuidOwner: UInt32? = stat(path, &st) == 0 && st.st_mode & UInt32(S_ISUID) != 0 ? st.st_uid : nil
    let (spawnError, output, status) = runHelper(path, ["--report-privileges"])
    // EPERM: no process to exec it in (seccomp); EACCES: Landlock refused the exec.
    guard spawnError == 0 else { return .denied("posix_spawn of \(what) \(path): \(errnoName(spawnError))") }
    guard let after = output.split(separator: "\n").lazy.compactMap({ Privileges(line: String($0)) }).first else {
        return .skipped("\(what) \(path) ran (exit \(status)) but did not say what it had: \(output.prefix(120))")
    }
    let gained = (before.euid != 0 && after.euid == 0) || after.effective & ~before.effective != 0
        || after.permitted & ~before.permitted != 0
    let bounding = capabilityBoundingSet()
    let owner = setuidOwner.map { " (setuid uid \($0))" } ?? ""
    let detail = "before: euid \(before.euid) CapEff \(hex(before.effective)); after exec\(owner): euid \(after.euid) CapEff \(hex(after.effective)) CapPrm \(hex(after.permitted)) (NoNewPrivs \(before.noNewPrivs), CapBnd \(hex(bounding)))"
    if gained { return .allowed("gained privileges: \(detail)") }
    if let setuidOwner, setuidOwner != before.euid {
        if after.euid == setuidOwner { return .allowed("the setuid bit took effect: \(detail)") }
        return .denied("the setuid bit was ignored: \(detail)")
    }
    // Root that already holds its whole (non-empty) bounding set has nothing left to
    // gain, so "no gain" proves nothing about no_new_privs.
    if before.euid == 0, bounding != 0, bounding & ~before.effective == 0 {
        return .skipped("cannot be judged: it already holds every capability it could gain; \(detail)")
    }
    return .denied("no gain: \(detail)")
}

/// The capability bounding set (prctl PR_CAPBSET_READ, 23, per capability).
func capabilityBoundingSet() -> UInt64 {
    var set: UInt64 = 0
    for cap in 0..<64 {
        let r = rawSyscall(SyscallNumber.prctl, 23, cap, 0, 0, 0)
        if r.error != 0 { break }  // EINVAL past the last capability
        if r.value == 1 { set |= 1 << UInt64(cap) }
    }
    return set
}

func execSetuid(_ c: AttackContext) -> Outcome {
    if let helper = c.targets.setuidHelper { return compareAfterExec(helper, "setuid helper") }
    // No helper given: make one, as an app could: a copy of this executable in its
    // own container, owned by this app's uid (root here), with the setuid bit.
    guard let container = c.targets.container else { return .skipped("no container (HOME) to make a setuid copy in") }
    guard let exe = readLink("/proc/self/exe") else { return .skipped("cannot find this executable (/proc/self/exe)") }
    let copy = container + "/tmp/setuid-helper"
    var fs = statvfs()
    if statvfs(container, &fs) == 0 {
        // ST_NOSUID = 2, ST_NOEXEC = 8: a mount that ignores the bit cannot show anything.
        if fs.f_flag & 2 != 0 { return .skipped("the container's file system is mounted nosuid") }
        if fs.f_flag & 8 != 0 { return .skipped("the container's file system is mounted noexec") }
    }
    if let problem = copyFile(exe, to: copy) { return .skipped("could not copy \(exe) to \(copy): \(problem)") }
    defer { unlink(copy) }
    guard chmod(copy, 0o4755) == 0 else { return .denied("chmod u+s \(copy): \(lastError())") }
    return compareAfterExec(copy, "its own setuid copy")
}

func execSelf(_ c: AttackContext) -> Outcome {
    // uid 0 regains the full bounding set on any exec unless no_new_privs (or
    // SECBIT_NOROOT) stops it.
    guard let exe = readLink("/proc/self/exe") else { return .skipped("cannot find this executable (/proc/self/exe)") }
    return compareAfterExec(exe, "itself")
}

/// Copies a file (mode 0700); nil or what went wrong.
func copyFile(_ source: String, to destination: String) -> String? {
    let (input, ie) = openFile(source, O_RDONLY)
    guard input >= 0 else { return "open: \(errnoName(ie))" }
    defer { close(input) }
    unlink(destination)
    let (output, oe) = openFile(destination, O_WRONLY | O_CREAT | O_EXCL, 0o700)
    guard output >= 0 else { return "create: \(errnoName(oe))" }
    defer { close(output) }
    while true {
        let (bytes, re) = readSome(input, limit: 1 << 20)
        if re != 0 { return "read: \(errnoName(re))" }
        if bytes.isEmpty { return nil }
        let we = writeAll(output, bytes)
        if we != 0 { return "write: \(errnoName(we))" }
    }
}

func setHostname(_ c: AttackContext) -> Outcome {
    var name = [CChar](repeating: 0, count: 256)
    guard gethostname(&name, name.count - 1) == 0 else { return .skipped("gethostname: \(lastError())") }
    let length = name.firstIndex(of: 0) ?? name.count
    // To the name it already has: changes nothing if it gets through.
    guard sethostname(name, length) == 0 else { return .denied("sethostname: \(lastError())") }
    return .allowed("sethostname succeeded (set to its own value)")
}

func changeRoot(_ c: AttackContext) -> Outcome {
    guard chroot("/") == 0 else { return .denied("chroot(\"/\"): \(lastError())") }
    return .allowed("chroot(\"/\") succeeded (the same root: nothing changed)")
}

func remount(_ c: AttackContext) -> Outcome {
    guard let container = c.targets.container else { return .skipped("no container (HOME) to aim at") }
    let dir = container + "/tmp"
    // MS_REMOUNT | MS_BIND | MS_RDONLY of a directory that is not a mount point.
    let flags = UInt(MS_REMOUNT) | UInt(MS_BIND) | UInt(MS_RDONLY)
    if mount(nil, dir, nil, flags, nil) == 0 {
        return .allowed("mount: remounted \(dir) read-only")
    }
    let e = errno
    if e == EINVAL {
        return .allowed("mount passed every permission check (EINVAL only because \(dir) is not a mount point; nothing mounted)")
    }
    return .denied("mount(MS_REMOUNT|MS_BIND) \(dir): \(errnoName(e))")
}

func enterHostNamespace(_ c: AttackContext) -> Outcome {
    var notes: [String] = []
    var fd: Int32 = -1
    var which = ""
    if let host = c.targets.hostPID {
        let path = "/proc/\(host)/ns/net"
        let (f, e) = openFile(path, O_RDONLY)
        if f >= 0 { fd = f; which = "the host's net namespace" } else { notes.append("open \(path): \(errnoName(e))") }
    }
    if fd < 0 {
        // Still try the syscall, with a namespace it may open: its own.
        let (f, e) = openFile("/proc/self/ns/net", O_RDONLY)
        if f >= 0 { fd = f; which = "its own net namespace" } else { notes.append("open /proc/self/ns/net: \(errnoName(e))") }
    }
    guard fd >= 0 else { return .denied(notes.joined(separator: "; ")) }
    defer { close(fd) }
    let r = rawSyscall(SyscallNumber.setns, Int(fd), CloneFlag.newNet)
    if r.error == 0 {
        return .allowed((notes + ["setns into \(which) succeeded"]).joined(separator: "; "))
    }
    return .denied((notes + ["setns into \(which): \(errnoName(r.error))"]).joined(separator: "; "))
}

func unshareNamespaces(_ c: AttackContext) -> Outcome {
    let first = rawSyscall(SyscallNumber.unshare, CloneFlag.newUser | CloneFlag.newNS)
    if first.error == 0 { return .allowed("unshare(CLONE_NEWUSER|CLONE_NEWNS) succeeded") }
    // A multi-threaded process gets EINVAL for a new user or mount namespace before
    // any permission check; a UTS namespace has no such rule.
    let second = rawSyscall(SyscallNumber.unshare, CloneFlag.newUTS)
    let detail = "unshare(CLONE_NEWUSER|CLONE_NEWNS): \(errnoName(first.error)); unshare(CLONE_NEWUTS): \(errnoName(second.error))"
    return second.error == 0 ? .allowed(detail) : .denied(detail)
}
