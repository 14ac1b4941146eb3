import CAppHostSys
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// How a child ended.
public enum ExitStatus: Sendable, Equatable, Codable, CustomStringConvertible {
    /// It called exit(code) (or returned from main). `code` is -1 when the
    /// status was lost: something else in this process reaped the child
    /// (a `waitpid(-1)` elsewhere); see `ExitStatus.unavailable`.
    case exited(code: Int32)
    /// A signal ended it.
    case signaled(signal: Int32, coreDumped: Bool)

    /// The status reported when the child was reaped by someone else.
    public static let unavailable = ExitStatus.exited(code: -1)

    /// "exit 3", "SIGKILL", "SIGSEGV (core dumped)", "exit status unavailable".
    public var description: String {
        switch self {
        case .exited(let code) where code < 0: "exit status unavailable"
        case .exited(let code): "exit \(code)"
        case .signaled(let sig, let core): signalName(sig) + (core ? " (core dumped)" : "")
        }
    }

    init?(waitCode: Int32, status: Int32) {
        switch waitCode {
        case APH_CLD_EXITED: self = .exited(code: status)
        case APH_CLD_KILLED: self = .signaled(signal: status, coreDumped: false)
        case APH_CLD_DUMPED: self = .signaled(signal: status, coreDumped: true)
        default: return nil
        }
    }
}

/// A state change of a child, delivered in the order the kernel reported them;
/// `.exited` is always delivered, exactly once, and last. A `.continued` (or
/// `.stopped`) immediately followed by the child's death can be missing: the
/// kernel stops reporting them once the child is a zombie, and one still in
/// flight when `.exited` goes out is dropped to keep `.exited` last.
public enum ChildEvent: Sendable, Equatable, CustomStringConvertible {
    /// A signal (SIGSTOP, SIGTSTP, ...) stopped it.
    case stopped(signal: Int32)
    /// SIGCONT resumed it.
    case continued
    /// It ended and has been reaped (its pid is free again).
    case exited(ExitStatus)

    /// "stopped (SIGSTOP)", "continued", "exited (exit 3)".
    public var description: String {
        switch self {
        case .stopped(let sig): "stopped (\(signalName(sig)))"
        case .continued: "continued"
        case .exited(let status): "exited (\(status))"
        }
    }
}

/// A child started by `ProcessReaper`. It holds the child's pidfd until the
/// reaper reaps it, so `signal(_:)` can never reach a recycled pid.
public final class ChildProcess: Sendable, CustomStringConvertible {
    /// The child's pid (in the host's pid namespace).
    public let pid: Int32

    private struct Handle {
        var pidfd: Int32 // -1 once reaped
        var exitStatus: ExitStatus?
    }

    /// pidfd and exit status; taken by `signal(_:)` and by the reaper when it
    /// closes the pidfd, so a signal never goes to a reused descriptor.
    private let handle: Mutex<Handle>
    /// Serialises delivery (the reaper and stop-watcher threads both deliver)
    /// and drops anything after `.exited`. Held while `onEvent` runs, never
    /// taken by public API, so a callback may call `signal(_:)`.
    private let delivery = Mutex<Bool>(false)
    private let onEvent: @Sendable (ChildEvent) -> Void

    init(pid: Int32, pidfd: Int32, onEvent: @escaping @Sendable (ChildEvent) -> Void) {
        self.pid = pid
        self.handle = Mutex(Handle(pidfd: pidfd, exitStatus: nil))
        self.onEvent = onEvent
    }

    deinit {
        // The reaper holds every live child, so this normally finds -1.
        let fd = handle.withLock { $0.pidfd }
        if fd >= 0 { _ = Glibc.close(fd) }
    }

    /// "pid 1234".
    public var description: String { "pid \(pid)" }

    /// How it ended, once the reaper has reaped it; nil while it runs.
    public var exitStatus: ExitStatus? { handle.withLock { $0.exitStatus } }

    /// Sends `sig` through the pidfd. Throws ESRCH once the child has exited
    /// (never signals another process that reused the pid).
    public func signal(_ sig: Int32) throws(Errno) {
        let rc = handle.withLock { h -> Int32 in
            guard h.pidfd >= 0 else { return ESRCH }
            return aph_pidfd_send_signal(h.pidfd, sig)
        }
        if rc != 0 { throw Errno(rawValue: rc) }
    }

    // MARK: Reaper side

    /// A duplicate of the pidfd (close-on-exec), the caller's to close; nil once the child
    /// has been reaped. Taken under the same lock as ``signal(_:)``, so it never
    /// duplicates a reused descriptor.
    public func duplicatePidfd() -> Int32? {
        handle.withLock { h -> Int32? in
            guard h.pidfd >= 0 else { return nil }
            let fd = fcntl(h.pidfd, F_DUPFD_CLOEXEC, 0)
            return fd >= 0 ? fd : nil
        }
    }

    /// The pidfd number; read only on the reaper thread while it is open.
    var pidfdForReaper: Int32 { handle.withLock { $0.pidfd } }

    /// Records the status and closes the pidfd (reaper thread).
    func markReaped(_ status: ExitStatus) {
        handle.withLock { h in
            if h.pidfd >= 0 { _ = Glibc.close(h.pidfd) }
            h.pidfd = -1
            h.exitStatus = status
        }
    }

    /// Delivers `event` unless `.exited` was already delivered.
    func deliver(_ event: ChildEvent) {
        delivery.withLock { exited in
            guard !exited else { return }
            if case .exited = event { exited = true }
            onEvent(event)
        }
    }
}
