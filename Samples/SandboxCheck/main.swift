// aph-sandbox-check: reports what the sandbox around it allows.
//
// Tests spawn it through aph_spawn with the baseline seccomp filter and read
// its stdout, one fact per line:
//
//   pid <n> / sid <n> / cwd <path> / fd3 socket|other|closed / fds 0 1 2 3
//   nonewprivs <n> / seccomp <n> / sigblk <hex> / sigign <hex> / thread ok|failed <errno>
//   capinh / capprm / capeff / capbnd / capamb <hex>   (the capability sets)
//   syscall <name> <errno> <ERRNAME>     (errno 0: the call succeeded)
//   done
//
// With `--pdeathsig` it instead checks PR_SET_PDEATHSIG: a short-lived thread
// spawns `/bin/sleep 30` through aph_spawn (death signal SIGKILL) and exits;
// the kernel must then kill the grandchild, and it prints
//   pdeathsig <pid> signaled <n>    (or: pdeathsig <pid> exited <code>)
// This is why AppHostSystem spawns from one long-lived thread.
//
// With check options it runs only those, in order, one line each, then
// `done` (exit 0 once all ran, whatever they reported):
//   --socket F       socket(F, ...)      -> `socket F: ok` or `socket F: EPERM`
//   --socketpair F   socketpair(F, ...)  -> `socketpair F: ok` or `... : <ERRNAME>`
//   --open PATH      open O_RDWR (O_RDONLY when read-write is refused with
//                    EISDIR, EACCES, EROFS or EPERM) -> `open PATH: ok` or `... : <ERRNAME>`
//   --create PATH    create a new file and write a byte -> `create PATH: ok` or ...
//   --socket-high F  the socket syscall with F in the low 32 bits of a register
//                    whose high bits are set (the kernel reads an int) -> `socket-high F: ...`
//   --wait-stdin     read stdin to EOF before the next check -> `wait-stdin: ok`
//   --read PATH      open O_RDONLY and read            -> `read PATH: ok` or `... : <ERRNAME>`
//   --exec PATH      posix_spawn PATH (no arguments) and reap it -> `exec PATH: ok` (it ran,
//                    whatever its status) or the errno of the failed exec
//   --kill PID:SIG   kill(PID, SIG)                     -> `kill PID:SIG: ok` or `... : EPERM`
//   --bind-tcp -     bind a TCP socket to 127.0.0.1, any port -> `bind-tcp -: ok` or `... : EACCES`
//   --listen-tcp -   listen on an unbound TCP socket (the kernel picks a port) -> `listen-tcp -: ...`
//   --connect-unix P socket(AF_UNIX, SOCK_STREAM) and connect to P (`@NAME`: the abstract
//                    name NAME) -> `connect-unix P: ok` or the errno of the failed step
//   --rename A->B    rename(A, B)                       -> `rename A->B: ok` or `... : <ERRNAME>`
//   --fork -         fork(3) (glibc: clone without CLONE_THREAD); the child exits at
//                    once and is reaped -> `fork -: ok` or `fork -: EPERM`
//   --fork-syscall - the fork syscall itself, where the architecture has one
//                    -> `fork-syscall -: ok`, `... : EPERM` or `... : none here`
//   --execve-missing -  execve of a path that does not exist -> `execve-missing -: ENOENT`
//                    (it got past seccomp) or `... : EPERM`
//   --execveat-memfd -  execveat of an empty memfd -> `execveat-memfd -: ENOEXEC` (got
//                    past seccomp) or `... : EPERM`
//   --setaffinity PID   sched_setaffinity(PID or `self`) to the CPUs it has -> `ok` or errno
//   --pidfd-open PID    pidfd_open(PID or `self`) -> `ok` or errno
//   --thread -       pthread_create and join           -> `thread -: ok` or `... : <ERRNAME>`
//   --dispatch -     a block on a new Dispatch queue, waited for -> `dispatch -: ok`
//   --foundation-thread -  a Foundation Thread, waited for -> `foundation-thread -: ok`
// F is bluetooth (AF_BLUETOOTH, SOCK_SEQPACKET), unix, inet, inet6 (SOCK_STREAM),
// unix-dgram (AF_UNIX, SOCK_DGRAM) or an AF_* number (SOCK_STREAM).
//
// Every probe uses arguments that fail harmlessly even without the filter and
// as root (bad magic, bad flags, nonexistent paths, NULL pointers), so running
// it unsandboxed changes nothing; under the filter each must report EPERM
// (clone3: ENOSYS). Two are meant to succeed under the baseline too:
// prlimit64-self (pid 0, reads and sets nothing) and setpriority-self (its own
// nice value, set to what it is).
import CAppHostSys
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

func report(_ line: String) { print(line) }

func errnoName(_ e: Int32) -> String {
    switch e {
    case 0: return "OK"
    case EPERM: return "EPERM"
    case ENOENT: return "ENOENT"
    case ESRCH: return "ESRCH"
    case EBADF: return "EBADF"
    case EFAULT: return "EFAULT"
    case EINVAL: return "EINVAL"
    case ENOSYS: return "ENOSYS"
    case ENOEXEC: return "ENOEXEC"
    case EOPNOTSUPP: return "EOPNOTSUPP"
    case EACCES: return "EACCES"
    case EBUSY: return "EBUSY"
    case ENOTDIR: return "ENOTDIR"
    case EISDIR: return "EISDIR"
    case EROFS: return "EROFS"
    case EEXIST: return "EEXIST"
    case EAFNOSUPPORT: return "EAFNOSUPPORT"
    case EPROTONOSUPPORT: return "EPROTONOSUPPORT"
    case ESOCKTNOSUPPORT: return "ESOCKTNOSUPPORT"
    case EPROTOTYPE: return "EPROTOTYPE"
    case ENXIO: return "ENXIO"
    case ENODEV: return "ENODEV"
    case EAGAIN: return "EAGAIN"
    case ENOTTY: return "ENOTTY"
    case EMFILE: return "EMFILE"
    case ENOMEM: return "ENOMEM"
    case ELOOP: return "ELOOP"
    case EXDEV: return "EXDEV"
    case ECONNREFUSED: return "ECONNREFUSED"
    case EADDRINUSE: return "EADDRINUSE"
    default: return "E\(e)"
    }
}

// C strings that live for the whole run.
func cString(_ s: String) -> Int { Int(bitPattern: strdup(s)) }
let missingSource = cString("/nonexistent-aph-sandbox-check/source")
let missingTarget = cString("/nonexistent-aph-sandbox-check/target")
let missingSwap = cString("/nonexistent-aph-sandbox-check/swapfile")
let noneType = cString("none")
let emptyString = cString("")
let noSuchModule = cString("aph_no_such_module")

/// This thread's nice value (the raw getpriority syscall returns 20 - nice), so
/// the setpriority-self probe sets what is already there.
let ownNice: Int = {
    var number: Int32 = 0
    var raw = 0
    guard aph_seccomp_resolve("getpriority", &number) == 0,
          aph_syscall6(Int(number), 0, 0, 0, 0, 0, 0, &raw) == 0 else { return 0 }
    return 20 - raw
}()

let CLONE_NEWUSER_FLAG = 0x1000_0000
let CLONE_FS_FLAG = 0x0000_0200

// (label, syscall name, arguments)
let probes: [(String, String, [Int])] = [
    ("ptrace", "ptrace", [16 /* PTRACE_ATTACH */, 0x7fff_ffff /* no such pid */]),
    ("mount", "mount", [missingSource, missingTarget, noneType, 4096 /* MS_BIND */, 0]),
    ("umount2", "umount2", [missingTarget, 0]),
    ("unshare", "unshare", [0x1 /* not a valid unshare flag */]),
    ("setns", "setns", [-1, 0]),
    ("bpf", "bpf", [0xffff /* no such command */, 0, 0]),
    ("perf_event_open", "perf_event_open", [0 /* NULL attr */, 0, -1, -1, 0]),
    ("kexec_load", "kexec_load", [0, 0, 0, 0x8000 /* invalid flag */]),
    ("kexec_file_load", "kexec_file_load", [-1, -1, 0, 0, 0x4000_0000 /* invalid flag */]),
    ("init_module", "init_module", [0, 0 /* empty image */, 0]),
    ("finit_module", "finit_module", [-1, emptyString, 0]),
    ("delete_module", "delete_module", [noSuchModule, Int(O_NONBLOCK)]),
    ("reboot", "reboot", [0, 0, 0, 0 /* bad magic */]),
    ("keyctl", "keyctl", [0xffff /* no such operation */, 0, 0, 0, 0]),
    ("add_key", "add_key", [0 /* NULL type */, 0, 0, 0, 0]),
    ("request_key", "request_key", [0 /* NULL type */, 0, 0, 0]),
    ("process_vm_readv", "process_vm_readv", [0x7fff_ffff, 0, 0, 0, 0, 1 /* bad flags */]),
    ("process_vm_writev", "process_vm_writev", [0x7fff_ffff, 0, 0, 0, 0, 1 /* bad flags */]),
    ("pivot_root", "pivot_root", [missingSource, missingTarget]),
    ("swapon", "swapon", [missingSwap, 0]),
    ("swapoff", "swapoff", [missingSwap]),
    // CLONE_NEWUSER|CLONE_FS is rejected by the kernel, so no child is made.
    ("clone-newuser", "clone", [CLONE_NEWUSER_FLAG | CLONE_FS_FLAG, 0, 0, 0, 0]),
    ("clone3", "clone3", [0 /* NULL args */, 0]),
    // NULL params: EFAULT unless the filter denies it (socket families denied).
    ("io_uring_setup", "io_uring_setup", [1, 0]),
    // UFFD_USER_MODE_ONLY (which any process may ask for) with an unknown flag:
    // EINVAL, no descriptor, unless the filter denies it.
    ("userfaultfd", "userfaultfd", [0x4000_0001]),
    // Another process's limits and nice value: no such pid (ESRCH) unless the
    // filter denies it; a which the kernel does not know (EINVAL) with who 0.
    ("prlimit64-other", "prlimit64", [0x7fff_ffff, Int(RLIMIT_NOFILE.rawValue), 0, 0]),
    ("setpriority-other", "setpriority", [0 /* PRIO_PROCESS */, 0x7fff_ffff, 0]),
    ("setpriority-which", "setpriority", [3 /* no such which */, 0, 0]),
    // Its own: a read of nothing (NULL new and old limits), and its own nice
    // value set to what it is. Both must stay allowed (glibc, libdispatch).
    ("prlimit64-self", "prlimit64", [0, Int(RLIMIT_NOFILE.rawValue), 0, 0]),
    ("setpriority-self", "setpriority", [0 /* PRIO_PROCESS */, 0, ownNice]),
]

// MARK: - PDEATHSIG mode

nonisolated(unsafe) var grandchildPID: pid_t = -1
nonisolated(unsafe) var grandchildError: Int32 = 0

nonisolated func spawnSleeperAndExit(_: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    let argv: [UnsafeMutablePointer<CChar>?] = [strdup("sleep"), strdup("30"), nil]
    let envp: [UnsafeMutablePointer<CChar>?] = [nil]
    var settings = aph_spawn_settings()
    var result = aph_spawn_result()
    let rc = "/bin/sleep".withCString { path in
        argv.withUnsafeBufferPointer { argvBuffer in
            envp.withUnsafeBufferPointer { envpBuffer in
                settings.path = path
                settings.argv = argvBuffer.baseAddress
                settings.envp = envpBuffer.baseAddress
                settings.stdin_fd = -1
                settings.stdout_fd = -1
                settings.stderr_fd = -1
                settings.ipc_fd = -1
                settings.stamp_fd = -1
                settings.landlock_ruleset_fd = -1
                settings.death_signal = SIGKILL
                return aph_spawn(&settings, &result)
            }
        }
    }
    grandchildError = rc
    grandchildPID = result.pid
    if result.pidfd >= 0 { close(result.pidfd) }
    return nil // the thread exits: PDEATHSIG fires
}

if CommandLine.arguments.contains("--pdeathsig") {
    var spawner = pthread_t()
    guard pthread_create(&spawner, nil, spawnSleeperAndExit, nil) == 0 else {
        print("pdeathsig pthread_create failed")
        exit(1)
    }
    pthread_join(spawner, nil)
    guard grandchildError == 0, grandchildPID > 0 else {
        print("pdeathsig spawn failed \(errnoName(grandchildError))")
        exit(1)
    }
    var status: Int32 = 0
    while waitpid(grandchildPID, &status, 0) < 0 && errno == EINTR {}
    if status & 0x7f == 0 {
        print("pdeathsig \(grandchildPID) exited \((status >> 8) & 0xff)")
    } else {
        print("pdeathsig \(grandchildPID) signaled \(status & 0x7f)")
    }
    exit(0)
}

// MARK: - Checks

/// (family, type) for a `--socket`/`--socketpair` argument.
func socketFamily(_ name: String) -> (Int32, Int32)? {
    let stream = Int32(SOCK_STREAM.rawValue)
    switch name {
    case "bluetooth": return (AF_BLUETOOTH, Int32(SOCK_SEQPACKET.rawValue))
    case "unix": return (AF_UNIX, stream)
    case "unix-dgram": return (AF_UNIX, Int32(SOCK_DGRAM.rawValue))
    case "inet": return (AF_INET, stream)
    case "inet6": return (AF_INET6, stream)
    default: return Int32(name).map { ($0, stream) }
    }
}

func checkSocket(_ name: String, pair: Bool) -> String {
    let label = (pair ? "socketpair " : "socket ") + name
    guard let (family, type) = socketFamily(name) else { return "\(label): unknown family" }
    if pair {
        var fds: [Int32] = [-1, -1]
        guard socketpair(family, type | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            return "\(label): \(errnoName(errno))"
        }
        close(fds[0])
        close(fds[1])
    } else {
        let fd = socket(family, type | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return "\(label): \(errnoName(errno))" }
        close(fd)
    }
    return "\(label): ok"
}

func checkSocketHighBits(_ name: String) -> String {
    let label = "socket-high " + name
    guard let (family, type) = socketFamily(name) else { return "\(label): unknown family" }
    var number: Int32 = 0
    guard aph_seccomp_resolve("socket", &number) == 0 else { return "\(label): no socket syscall" }
    var fd = 0
    let e = aph_syscall6(Int(number), (1 << 32) | Int(family), Int(type | Int32(SOCK_CLOEXEC.rawValue)), 0, 0, 0, 0, &fd)
    guard e == 0 else { return "\(label): \(errnoName(e))" }
    close(Int32(fd))
    return "\(label): ok"
}

func waitForStandardInput() -> String {
    var buffer = [UInt8](repeating: 0, count: 256)
    while true {
        let n = read(0, &buffer, buffer.count)
        if n == 0 { return "wait-stdin: ok" }
        if n < 0 && errno != EINTR { return "wait-stdin: \(errnoName(errno))" }
    }
}

func checkOpen(_ path: String) -> String {
    // O_NONBLOCK: a serial line must not wait for carrier; O_NOCTTY: no tty takeover.
    let common = O_CLOEXEC | O_NOCTTY | O_NONBLOCK
    var fd = open(path, O_RDWR | common)
    if fd < 0, [EISDIR, EACCES, EROFS, EPERM].contains(errno) {
        fd = open(path, O_RDONLY | common)
    }
    guard fd >= 0 else { return "open \(path): \(errnoName(errno))" }
    close(fd)
    return "open \(path): ok"
}

func checkCreate(_ path: String) -> String {
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return "create \(path): \(errnoName(errno))" }
    defer { close(fd) }
    var byte: UInt8 = 0x78
    guard write(fd, &byte, 1) == 1 else { return "create \(path): \(errnoName(errno))" }
    return "create \(path): ok"
}

func checkRead(_ path: String) -> String {
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
    guard fd >= 0 else { return "read \(path): \(errnoName(errno))" }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 64)
    guard read(fd, &buffer, buffer.count) >= 0 else { return "read \(path): \(errnoName(errno))" }
    return "read \(path): ok"
}

func checkExec(_ path: String) -> String {
    var pid: pid_t = 0
    let argv: [UnsafeMutablePointer<CChar>?] = [strdup(path), nil]
    let envp: [UnsafeMutablePointer<CChar>?] = [nil]
    let rc = posix_spawn(&pid, path, nil, nil, argv, envp)
    guard rc == 0 else { return "exec \(path): \(errnoName(rc))" }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return "exec \(path): ok"
}

func checkKill(_ target: String) -> String {
    let parts = target.split(separator: ":")
    guard parts.count == 2, let pid = Int32(parts[0]), let sig = Int32(parts[1]) else { return "kill \(target): bad argument" }
    return "kill \(target): " + (kill(pid, sig) == 0 ? "ok" : errnoName(errno))
}

func checkTCP(listen: Bool) -> String {
    let label = listen ? "listen-tcp -" : "bind-tcp -"
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return "\(label): \(errnoName(errno))" }
    defer { close(fd) }
    if listen {
        return "\(label): " + (Glibc.listen(fd, 1) == 0 ? "ok" : errnoName(errno))
    }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = in_addr_t(0x7f00_0001).bigEndian
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    return "\(label): " + (rc == 0 ? "ok" : errnoName(errno))
}

func checkConnectUnix(_ path: String) -> String {
    let label = "connect-unix \(path)"
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return "\(label): \(errnoName(errno))" }
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    var bytes = Array(path.utf8)
    if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 } // abstract: a leading NUL, no terminator
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return "\(label): name too long" }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (i, b) in bytes.enumerated() { raw[i] = b }
    }
    let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (bytes.first == 0 ? 0 : 1))
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
    }
    return "\(label): " + (rc == 0 ? "ok" : errnoName(errno))
}

func checkRename(_ argument: String) -> String {
    let parts = argument.split(separator: ">", maxSplits: 1)
    guard parts.count == 2, parts[0].hasSuffix("-") else { return "rename \(argument): bad argument" }
    let from = String(parts[0].dropLast()), to = String(parts[1])
    return "rename \(argument): " + (rename(from, to) == 0 ? "ok" : errnoName(errno))
}

/// fork(3): the child exits at once; the parent reaps it.
func checkFork() -> String {
    let pid = fork()
    if pid == 0 { _exit(0) }
    guard pid > 0 else { return "fork -: \(errnoName(errno))" }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return "fork -: ok"
}

/// The fork syscall (not glibc's clone): the child exits at once.
func checkForkSyscall() -> String {
    var number: Int32 = 0
    guard aph_seccomp_resolve("fork", &number) == 0, number >= 0 else { return "fork-syscall -: none here" }
    var pid = 0
    let e = aph_syscall6(Int(number), 0, 0, 0, 0, 0, 0, &pid)
    if e == 0 && pid == 0 { _exit(0) }
    guard e == 0 else { return "fork-syscall -: \(errnoName(e))" }
    var status: Int32 = 0
    while waitpid(pid_t(pid), &status, 0) < 0 && errno == EINTR {}
    return "fork-syscall -: ok"
}

nonisolated func emptyThreadBody(_: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? { nil }

func checkThread() -> String {
    var thread = pthread_t()
    let rc = pthread_create(&thread, nil, emptyThreadBody, nil)
    guard rc == 0 else { return "thread -: \(errnoName(rc))" }
    pthread_join(thread, nil)
    return "thread -: ok"
}

func checkDispatch() -> String {
    let done = DispatchSemaphore(value: 0)
    DispatchQueue(label: "aph-sandbox-check").async { done.signal() }
    return "dispatch -: " + (done.wait(timeout: .now() + 10) == .success ? "ok" : "timed out")
}

func checkFoundationThread() -> String {
    let done = DispatchSemaphore(value: 0)
    let thread = Thread { done.signal() }
    thread.start()
    return "foundation-thread -: " + (done.wait(timeout: .now() + 10) == .success ? "ok" : "timed out")
}

/// A raw syscall by name: 0 or the errno.
func rawCall(_ name: String, _ a: Int = 0, _ b: Int = 0, _ c: Int = 0, _ d: Int = 0, _ e: Int = 0) -> (Int32, Int) {
    var number: Int32 = 0
    guard aph_seccomp_resolve(name, &number) == 0, number >= 0 else { return (ENOSYS, 0) }
    var result = 0
    let error = aph_syscall6(Int(number), a, b, c, d, e, 0, &result)
    return (error, result)
}

/// `self` or a pid.
func pidArgument(_ value: String) -> Int32? { value == "self" ? getpid() : Int32(value) }

/// execve of a path that does not exist: ENOENT means the call got past seccomp.
func checkExecveMissing() -> String {
    let path = "/nonexistent-aph-sandbox-check"
    let error = path.withCString { p -> Int32 in
        var argv: [UnsafePointer<CChar>?] = [p, nil]
        var envp: [UnsafePointer<CChar>?] = [nil]
        return argv.withUnsafeMutableBufferPointer { a in
            envp.withUnsafeMutableBufferPointer { e in
                rawCall("execve", Int(bitPattern: p), Int(bitPattern: a.baseAddress), Int(bitPattern: e.baseAddress)).0
            }
        }
    }
    return "execve-missing -: \(errnoName(error))"
}

/// execveat of an empty memfd: ENOEXEC means the call got past seccomp.
func checkExecveatMemfd() -> String {
    let (made, fd) = "aph".withCString { rawCall("memfd_create", Int(bitPattern: $0), 0) }
    guard made == 0 else { return "execveat-memfd -: memfd_create \(errnoName(made))" }
    defer { close(Int32(fd)) }
    let error = "".withCString { empty -> Int32 in
        var argv: [UnsafePointer<CChar>?] = [empty, nil]
        var envp: [UnsafePointer<CChar>?] = [nil]
        return argv.withUnsafeMutableBufferPointer { a in
            envp.withUnsafeMutableBufferPointer { e in
                rawCall("execveat", fd, Int(bitPattern: empty), Int(bitPattern: a.baseAddress), Int(bitPattern: e.baseAddress), 0x1000).0
            }
        }
    }
    return "execveat-memfd -: \(errnoName(error))"
}

/// sched_setaffinity(PID) to the CPUs it has.
func checkSetAffinity(_ value: String) -> String {
    guard let pid = pidArgument(value) else { return "setaffinity \(value): bad pid" }
    var mask = [UInt64](repeating: 0, count: 16)
    let (got, size) = mask.withUnsafeMutableBytes { rawCall("sched_getaffinity", Int(pid), $0.count, Int(bitPattern: $0.baseAddress)) }
    guard got == 0 else { return "setaffinity \(value): sched_getaffinity \(errnoName(got))" }
    let (set, _) = mask.withUnsafeMutableBytes { rawCall("sched_setaffinity", Int(pid), size, Int(bitPattern: $0.baseAddress)) }
    return "setaffinity \(value): " + (set == 0 ? "ok" : errnoName(set))
}

/// pidfd_open(PID), closed at once.
func checkPidfdOpen(_ value: String) -> String {
    guard let pid = pidArgument(value) else { return "pidfd-open \(value): bad pid" }
    let (error, fd) = rawCall("pidfd_open", Int(pid), 0)
    if error == 0 { close(Int32(fd)) }
    return "pidfd-open \(value): " + (error == 0 ? "ok" : errnoName(error))
}

let checkOptions: Set<String> = ["--socket", "--socketpair", "--socket-high", "--open", "--create", "--read", "--exec",
                                 "--kill", "--bind-tcp", "--listen-tcp", "--connect-unix", "--rename",
                                 "--fork", "--fork-syscall", "--thread", "--dispatch", "--foundation-thread",
                                 "--execve-missing", "--execveat-memfd", "--setaffinity", "--pidfd-open"]
let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.contains(where: { checkOptions.contains($0) || $0 == "--wait-stdin" }) {
    var index = 0
    while index < arguments.count {
        let option = arguments[index]
        if option == "--wait-stdin" {
            report(waitForStandardInput())
            index += 1
            continue
        }
        guard checkOptions.contains(option), index + 1 < arguments.count else {
            print("usage: bad argument \(option)")
            exit(2)
        }
        let value = arguments[index + 1]
        index += 2
        switch option {
        case "--socket": report(checkSocket(value, pair: false))
        case "--socketpair": report(checkSocket(value, pair: true))
        case "--socket-high": report(checkSocketHighBits(value))
        case "--open": report(checkOpen(value))
        case "--read": report(checkRead(value))
        case "--exec": report(checkExec(value))
        case "--kill": report(checkKill(value))
        case "--bind-tcp": report(checkTCP(listen: false))
        case "--listen-tcp": report(checkTCP(listen: true))
        case "--connect-unix": report(checkConnectUnix(value))
        case "--rename": report(checkRename(value))
        case "--fork": report(checkFork())
        case "--fork-syscall": report(checkForkSyscall())
        case "--thread": report(checkThread())
        case "--dispatch": report(checkDispatch())
        case "--foundation-thread": report(checkFoundationThread())
        case "--execve-missing": report(checkExecveMissing())
        case "--execveat-memfd": report(checkExecveatMemfd())
        case "--setaffinity": report(checkSetAffinity(value))
        case "--pidfd-open": report(checkPidfdOpen(value))
        default: report(checkCreate(value))
        }
    }
    report("done")
    exit(0)
}

// MARK: - Sandbox report

// Identity and environment.
report("pid \(getpid())")
report("sid \(getsid(0))")
if let cwd = getcwd(nil, 0) {
    report("cwd \(String(cString: cwd))")
    free(cwd)
} else {
    report("cwd ? \(errnoName(errno))")
}

var fd3Stat = stat()
if fstat(3, &fd3Stat) != 0 {
    report("fd3 closed")
} else {
    report((fd3Stat.st_mode & S_IFMT) == S_IFSOCK ? "fd3 socket" : "fd3 other")
}

// Open descriptors, without the one used for listing.
if let dir = opendir("/proc/self/fd") {
    let listing = dirfd(dir)
    var fds: [Int32] = []
    while let entry = readdir(dir) {
        let name = withUnsafePointer(to: entry.pointee.d_name) {
            $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
        }
        if let fd = Int32(name), fd != listing { fds.append(fd) }
    }
    closedir(dir)
    report("fds " + fds.sorted().map(String.init).joined(separator: " "))
} else {
    report("fds ? \(errnoName(errno))")
}

// /proc/self/status fields.
if let file = fopen("/proc/self/status", "r") {
    var buffer = [CChar](repeating: 0, count: 512)
    while fgets(&buffer, Int32(buffer.count), file) != nil {
        let line = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        let parts = line.split(separator: ":", maxSplits: 1)
        guard parts.count == 2 else { continue }
        let value = parts[1].filter { !$0.isWhitespace }
        switch parts[0] {
        case "NoNewPrivs": report("nonewprivs \(value)")
        case "Seccomp": report("seccomp \(value)")
        case "SigBlk": report("sigblk \(value)")
        case "SigIgn": report("sigign \(value)")
        case "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb": report("\(parts[0].lowercased()) \(value)")
        default: break
        }
    }
    fclose(file)
}

// Threads must still work under the filter (glibc falls back from clone3).
var thread = pthread_t()
let threadRC = pthread_create(&thread, nil, emptyThreadBody, nil)
if threadRC == 0 {
    pthread_join(thread, nil)
    report("thread ok")
} else {
    report("thread failed \(errnoName(threadRC))")
}

// The syscall probes.
for (label, name, arguments) in probes {
    var number: Int32 = 0
    guard aph_seccomp_resolve(name, &number) == 0 else {
        report("syscall \(label) unknown")
        continue
    }
    let a = arguments + Array(repeating: 0, count: 6 - arguments.count)
    var result = 0
    let e = aph_syscall6(Int(number), a[0], a[1], a[2], a[3], a[4], a[5], &result)
    report("syscall \(label) \(e) \(errnoName(e))")
}

report("done")
