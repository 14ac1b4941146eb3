#if canImport(Glibc)
import Glibc
#endif
import CAppHostSys
import Synchronization
import SystemPackage

/// One real-clock timer (a timerfd on CLOCK_MONOTONIC) with a thread of its own that
/// calls `onFire` when it expires. Arming, moving and disarming it is one syscall from
/// any thread and wakes nobody: the thread sleeps in poll until the timer expires or
/// ``close()`` is called. (Moving a timer of an event loop from another thread takes the
/// loop's lock and wakes it, on the path of every step that moves a deadline.)
public final class DeadlineTimer: Sendable {
    /// The descriptors, nil once closed (the thread closes them as it ends); shared
    /// with the thread, which outlives this object by the time it takes to see the stop.
    private final class Descriptors: Sendable {
        let value: Mutex<(timer: Int32, stop: Int32)?>
        init(_ timer: Int32, _ stop: Int32) { value = Mutex((timer, stop)) }
    }
    private let shared: Descriptors

    public init(name: String = "aph-deadline", onFire: @escaping @Sendable () -> Void) throws(Errno) {
        var timer: Int32 = -1, stop: Int32 = -1
        var rc = aph_timerfd_create(&timer)
        if rc == 0 { rc = aph_eventfd_create(0, &stop) }
        guard rc == 0 else {
            for fd in [timer, stop] where fd >= 0 { _ = Glibc.close(fd) }
            throw Errno(rawValue: rc)
        }
        let descriptors = Descriptors(timer, stop)
        shared = descriptors
        let (t, s) = (timer, stop)
        do {
            try startDetachedThread(name: name) {
                while true {
                    var fired: Int32 = 0
                    _ = aph_timerfd_wait(t, s, &fired)
                    if fired != 0 { onFire(); continue }
                    // Woken without an expiry: a stop, a disarm racing the read, or EINTR.
                    let done = descriptors.value.withLock { d in
                        guard d == nil else { return false }
                        _ = Glibc.close(t)
                        _ = Glibc.close(s)
                        return true
                    }
                    if done { return }
                }
            }
        } catch {
            _ = Glibc.close(timer)
            _ = Glibc.close(stop)
            throw error
        }
    }

    /// Fires once, `after` from now (a zero or negative delay fires at once); replaces
    /// any earlier arming.
    public func arm(after: Duration) {
        let (seconds, attoseconds) = after.components
        let ns: Int64 = seconds >= Int64.max / 1_000_000_000 - 1 ? Int64.max : max(1, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        shared.value.withLock { d in
            if let d { _ = aph_timerfd_set(d.timer, ns) }
        }
    }

    /// Disarms it (nothing fires until armed again).
    public func disarm() {
        shared.value.withLock { d in
            if let d { _ = aph_timerfd_set(d.timer, 0) }
        }
    }

    /// Disarms it and ends its thread; it cannot be armed again.
    public func close() {
        shared.value.withLock { d in
            guard let current = d else { return }
            _ = aph_timerfd_set(current.timer, 0)
            _ = aph_eventfd_signal(current.stop)
            d = nil
        }
    }

    deinit {
        close()
    }
}
