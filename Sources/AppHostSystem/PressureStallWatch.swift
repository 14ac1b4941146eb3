#if canImport(Glibc)
import Glibc
#endif
import CAppHostSys
import Synchronization
import SystemPackage

/// Linux pressure stall information (PSI) triggers on a pressure file
/// (`/proc/pressure/memory`, or a cgroup v2 `memory.pressure`), waited on by a thread of
/// its own in `poll(2)` for `POLLPRI`: the kernel wakes it when a trigger's stall
/// threshold is passed within its window, nothing is read on a timer (kernel
/// `Documentation/accounting/psi.rst`, "Monitoring for pressure thresholds").
///
/// Each trigger is its own descriptor (the kernel keeps one trigger per open file), e.g.
/// `some 150000 1000000`: tasks stalled on memory for 150 ms within any 1 s window. The
/// kernel reports a trigger at most once per window. An unprivileged process may only
/// use windows that are multiples of 2 s (kernel 6.5+); root any from 500 ms to 10 s.
public final class PressureStallWatch: Sendable {
    /// One trigger: its line and the tag ``init(path:triggers:onFire:)`` reports it by.
    public struct Trigger: Sendable, Equatable {
        public var line: String
        public var tag: Int
        public init(_ line: String, tag: Int) {
            self.line = line
            self.tag = tag
        }
    }

    /// Why a pressure file could not be watched.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public var path: String
        public var step: String
        public var errno: Errno?
        public var description: String {
            "\(path): \(step)" + (errno.map { ": \($0.explained)" } ?? "")
        }
    }

    /// The descriptors, nil once the thread has closed them; shared with the thread.
    private final class Descriptors: Sendable {
        let value: Mutex<(triggers: [Int32], stop: Int32)?>
        init(_ triggers: [Int32], _ stop: Int32) { value = Mutex((triggers, stop)) }
    }
    private let descriptors: Descriptors

    /// Opens `path` once per trigger, writes the trigger, and starts the thread that calls
    /// `onFire(tag)` each time the kernel reports one. Throws (and leaves nothing open)
    /// when the file is missing or unreadable (no PSI in this kernel: `CONFIG_PSI`, 4.20+,
    /// or `psi=0`), not a pressure file, or refuses a trigger (no permission, a window
    /// this process may not use, a kernel before 5.2).
    public init(path: String, triggers: [Trigger], name: String = "aph-psi",
                onFire: @escaping @Sendable (Int) -> Void) throws(Failure) {
        var opened: [Int32] = []
        func fail(_ step: String, _ code: Int32?) -> Failure {
            for fd in opened { _ = Glibc.close(fd) }
            return Failure(path: path, step: step, errno: code.map { Errno(rawValue: $0) })
        }
        // A pressure file starts "some avg10=": anything else (a regular file given by
        // mistake) would take the write and never report.
        let text: String
        do {
            text = try readProcFile(path)
        } catch {
            if case .unreadable(_, let code) = error { throw fail("cannot read", code.rawValue) }
            throw fail("cannot read", nil)
        }
        guard text.hasPrefix("some avg10=") else { throw fail("not a pressure (PSI) file", nil) }
        for trigger in triggers {
            let fd = retryingEINTR { Glibc.open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC) }
            guard fd >= 0 else { throw fail("cannot open for a trigger", errno) }
            opened.append(fd)
            // The kernel takes the trigger with its terminating NUL (psi.rst's example).
            let bytes = Array(trigger.line.utf8) + [0]
            let written = bytes.withUnsafeBytes { buffer in retryingEINTR { Glibc.write(fd, buffer.baseAddress, buffer.count) } }
            guard written == bytes.count else { throw fail("refused the trigger \"\(trigger.line)\"", written < 0 ? errno : nil) }
        }
        var eventfd: Int32 = -1
        let rc = aph_eventfd_create(0, &eventfd)
        guard rc == 0 else { throw fail("eventfd", rc) }
        let stop = eventfd
        let shared = Descriptors(opened, stop)
        descriptors = shared
        let tags = triggers.map(\.tag)
        let fds = opened
        do {
            try startDetachedThread(name: name) {
                var polled = fds.map { pollfd(fd: $0, events: Int16(POLLPRI), revents: 0) }
                polled.append(pollfd(fd: stop, events: Int16(POLLIN), revents: 0))
                while true {
                    let n = polled.withUnsafeMutableBufferPointer { Glibc.poll($0.baseAddress, nfds_t($0.count), -1) }
                    if n < 0 && errno == EINTR { continue }
                    let stopped = n < 0 || polled[polled.count - 1].revents != 0
                        || polled.dropLast().contains { $0.revents & Int16(POLLERR | POLLNVAL) != 0 }
                    if !stopped {
                        for (i, p) in polled.dropLast().enumerated() where p.revents & Int16(POLLPRI) != 0 {
                            onFire(tags[i])
                        }
                        continue
                    }
                    // Closed (or the file went away: a removed cgroup reports POLLERR).
                    shared.value.withLock { d in
                        for fd in fds { _ = Glibc.close(fd) }
                        _ = Glibc.close(stop)
                        d = nil
                    }
                    return
                }
            }
        } catch {
            for fd in opened { _ = Glibc.close(fd) }
            _ = Glibc.close(stop)
            throw Failure(path: path, step: "cannot start its thread", errno: error)
        }
    }

    /// Stops the thread (it closes the descriptors as it ends).
    public func close() {
        descriptors.value.withLock { d in
            if let d { _ = aph_eventfd_signal(d.stop) }
        }
    }

    deinit {
        close()
    }
}
