import AppHostProtocol
import AppHostSystem
import Foundation
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A NULL-terminated `char *[]` (strdup'ed once, freed on deinit).
final class CStringList: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
    private let count: Int

    init(_ strings: [String]) {
        count = strings.count
        pointer = .allocate(capacity: strings.count + 1)
        for (i, s) in strings.enumerated() { pointer[i] = strdup(s) }
        pointer[strings.count] = nil
    }

    deinit {
        for i in 0..<count { free(pointer[i]) }
        pointer.deallocate()
    }
}

/// The environment the host gives an app, for bare spawns of the same binary.
func appEnvironment(home: String, bundleIdentifier: String) -> [String] {
    [
        "HOME=\(home)",
        "TMPDIR=\(home)",
        "PATH=/usr/local/bin:/usr/bin:/bin",
        "LANG=C.UTF-8",
        "\(IPCProtocol.descriptorEnvironmentKey)=\(IPCProtocol.descriptor)",
        "\(IPCProtocol.bundleIdentifierEnvironmentKey)=\(bundleIdentifier)",
    ].sorted()
}

/// glibc `posix_spawn` (vfork-style clone + execve) with dup2 file actions:
/// stdin from /dev/null, stdout/stderr to `output` (or /dev/null), `ipc` as fd 3.
/// Signal mask emptied and the usual signals reset to their defaults. No sandbox.
func posixSpawn(path: String, argv: CStringList, envp: CStringList?, ipc: Int32? = nil,
                output: Int32? = nil) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    if let output {
        posix_spawn_file_actions_adddup2(&actions, output, 1)
        posix_spawn_file_actions_adddup2(&actions, output, 2)
    } else {
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    }
    if let ipc {
        // dup2 onto itself would keep CLOEXEC: the caller passes a descriptor above 3.
        precondition(ipc != IPCProtocol.descriptor, "IPC descriptor must not already be 3")
        posix_spawn_file_actions_adddup2(&actions, ipc, IPCProtocol.descriptor)
    }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigmask(&attributes, &empty)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for sig in [SIGPIPE, SIGINT, SIGTERM, SIGCHLD, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2] { sigaddset(&defaults, sig) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, path, &actions, &attributes, argv.pointer, envp?.pointer ?? environ)
    guard rc == 0 else { throw BenchError("posix_spawn \(path): \(String(cString: strerror(rc)))") }
    return pid
}

/// Blocks until `pid` (a child of this process) has exited and reaps it.
@discardableResult
func reap(_ pid: pid_t) -> Int32 {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
        if errno != EINTR { return -1 }
    }
    return status
}

/// SIGKILL and reap a child.
func killAndReap(_ pid: pid_t) {
    _ = kill(pid, SIGKILL)
    reap(pid)
}

/// A socketpair whose child end is not descriptor 3 (so dup2 clears its CLOEXEC).
func benchSocketPair() throws -> (host: Int32, app: Int32) {
    let (h, a) = try makeSocketPair()
    var app = a.rawValue
    if app == IPCProtocol.descriptor {
        app = fcntl(a.rawValue, F_DUPFD_CLOEXEC, 10)
        _ = close(a.rawValue)
    }
    return (h.rawValue, app)
}

// MARK: - Frames on a blocking descriptor

/// Writes one frame completely.
func writeFrame<M: Encodable>(_ message: M, to fd: Int32) throws {
    // The host's coder for its messages (direct for the frames of a launch), as the host writes them.
    let bytes: [UInt8]
    switch message {
    case let m as HostMessage: bytes = try Frame.encode(m)
    case let m as AppMessage: bytes = try Frame.encode(m)
    default: bytes = try Frame.encode(message)
    }
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
        if n < 0 {
            if errno == EINTR { continue }
            throw BenchError("send: \(String(cString: strerror(errno)))")
        }
        offset += n
    }
}

/// Reads frames from a blocking descriptor.
struct FrameReader {
    let fd: Int32
    private var decoder = FrameDecoder()
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)

    init(fd: Int32) { self.fd = fd }

    /// The next message, or nil at end of stream.
    mutating func next<M: Decodable>(_ type: M.Type) throws -> M? {
        while true {
            if let payload = try decoder.next() {
                if M.self == AppMessage.self, let m = try Frame.decode(AppMessage.self, from: payload) as? M { return m }
                return try Frame.decode(M.self, from: payload)
            }
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw BenchError("read: \(String(cString: strerror(errno)))")
            }
            if n == 0 {
                try decoder.finish()
                return nil
            }
            decoder.append(chunk[0..<n])
        }
    }

    /// Reads until end of stream (the peer closed); returns how many frames were skipped.
    mutating func drainToEnd<M: Decodable>(_ type: M.Type) throws -> Int {
        var n = 0
        while try next(M.self) != nil { n += 1 }
        return n
    }
}

// MARK: - A bare app: the same binary driven with raw frames, no host

/// An app binary spawned with posix_spawn and spoken to directly over its socket.
struct BareApp {
    let pid: pid_t
    let socket: Int32
    var reader: FrameReader
    var seq: UInt64 = 0

    /// Spawns and returns once the `hello` frame has been read.
    static func spawnToHello(path: String, argv: CStringList, envp: CStringList) throws -> BareApp {
        let (host, app) = try benchSocketPair()
        let pid: pid_t
        do {
            pid = try posixSpawn(path: path, argv: argv, envp: envp, ipc: app)
        } catch {
            _ = close(host)
            _ = close(app)
            throw error
        }
        _ = close(app)
        var reader = FrameReader(fd: host)
        guard case .hello? = try reader.next(AppMessage.self) else {
            killAndReap(pid)
            _ = close(host)
            throw BenchError("\(path) did not say hello")
        }
        return BareApp(pid: pid, socket: host, reader: reader)
    }

    /// Sends `welcome`, as the host does after `hello`.
    func welcome(_ id: String) throws {
        try writeFrame(HostMessage.welcome(version: IPCProtocol.version, bundleIdentifier: id), to: socket)
    }

    /// Sends a callback; returns its sequence number.
    @discardableResult
    mutating func send(_ callback: LifecycleCallback, state: AppState) throws -> UInt64 {
        seq += 1
        try writeFrame(HostMessage.callback(seq: seq, callback: callback, state: state), to: socket)
        return seq
    }

    /// Reads until `callbackReturned(seq)`.
    mutating func awaitReturn(_ seq: UInt64) throws {
        while true {
            guard let m = try reader.next(AppMessage.self) else { throw BenchError("app closed its socket") }
            if case .callbackReturned(let s) = m, s == seq { return }
        }
    }

    /// The whole launch the host performs: welcome, didFinishLaunching, wait for its return,
    /// then didBecomeActive (sent, as the host does, before `launch` returns).
    mutating func launchActive(_ id: String) throws {
        try welcome(id)
        let s = try send(.didFinishLaunching(options: LaunchOptions(reason: .user, arguments: [])), state: .inactive)
        try awaitReturn(s)
        try send(.didBecomeActive, state: .active)
    }

    /// SIGKILL, reap, close.
    func kill() {
        killAndReap(pid)
        _ = close(socket)
    }
}
