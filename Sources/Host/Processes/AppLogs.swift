import AppHostProtocol
import CAppHostSys
import Foundation
import Logging
import NIOCore
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// The bounds of the apps' logs (`logs/<bundle id>.log`): what an app writes to its
/// stdout and stderr reaches the file through the host, within these. An app once wrote
/// 3 GiB to stdout in 13 s, and filled a 4 MiB state directory in 3 s, when its output
/// went to the file directly.
public struct AppLogLimits: Sendable, Equatable {
    /// A log file is rotated (`<id>.log` → `<id>.log.1`, the older one removed) before
    /// it would pass this size; so an app holds at most twice this on disk.
    public var fileBytes: Int64 = 8 << 20
    /// The rate an app may write at, sustained (a token bucket: `burstBytes` at once, then
    /// this much a second). What passes it is dropped, and the log says how much.
    public var bytesPerSecond: Int64 = 1 << 20
    /// What an app may write at once before the rate applies.
    public var burstBytes: Int64 = 8 << 20
    /// All apps' logs together (current and rotated files), at most; and never more than a
    /// quarter of the state directory's file system (measured at the host's start).
    public var totalBytes: Int64 = 256 << 20

    public init() {}

    /// The defaults.
    public static let standard = AppLogLimits()
}

/// What every app's log shares: the budget of the logs folder. Counted from the files
/// there at the host's start, then kept by the pumps as they write, rotate and remove.
final class AppLogBudget: Sendable {
    let limits: AppLogLimits
    /// The bound in force: ``AppLogLimits/totalBytes`` or a quarter of the file system.
    let total: Int64
    private let used: Mutex<Int64>
    let logger: Logger

    init(directory: String, limits: AppLogLimits, logger: Logger) {
        self.limits = limits
        self.logger = logger
        var fs = statvfs()
        let quarter = statvfs(directory, &fs) == 0 ? Int64(fs.f_blocks) * Int64(fs.f_frsize) / 4 : Int64.max
        total = max(0, min(limits.totalBytes, quarter))
        var sum: Int64 = 0
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where AppLogBudget.isAppLog(name) {
            var st = stat()
            if stat(directory + "/" + name, &st) == 0 { sum += Int64(st.st_size) }
        }
        used = Mutex(sum)
    }

    /// `<id>.log` or `<id>.log.1` of an app (not the transfer daemon's or the host's own).
    static func isAppLog(_ name: String) -> Bool {
        guard !name.hasPrefix("apphost-transferd."), !name.hasPrefix("host.") else { return false }
        return name.hasSuffix(".log") || name.hasSuffix(".log.1")
    }

    /// Takes `bytes` from the budget if they fit.
    func take(_ bytes: Int64) -> Bool {
        used.withLock { u in
            guard u + bytes <= total else { return false }
            u += bytes
            return true
        }
    }

    /// Gives back `bytes` (a file removed).
    func giveBack(_ bytes: Int64) {
        used.withLock { $0 = max(0, $0 - bytes) }
    }

    /// Bytes in the app logs now, as counted.
    var inUse: Int64 { used.withLock { $0 } }
}

/// One app process's stdout and stderr: a pipe the host reads on the event loop of the
/// app's IPC socket, appending to `logs/<id>.log` within the limits (see
/// ``AppLogLimits``): the file is rotated at its size, output past the app's rate or the
/// folder's budget is dropped and the log says so, once an episode, with the count.
///
/// Ordering: what the app wrote before a message is in the file before the host handles
/// the message (``AppConnectionHandler`` drains the pipe before it forwards what it
/// read), and all of it before the host records the app's exit (the reaper's report waits
/// for ``finish()`` on the same loop). Confined to that event loop.
final class AppLogPump: @unchecked Sendable {
    let loop: any EventLoop
    private let path: String
    private let budget: AppLogBudget
    private let app: BundleID
    /// The host's end of the pipe (non-blocking); -1 once closed.
    private var readEnd: Int32
    private var file: SystemPackage.FileDescriptor?
    private var size: Int64 = 0
    private var tokens: Double
    private var refilled: NIODeadline
    private var droppedForRate: Int64 = 0
    private var droppedForBudget: Int64 = 0
    /// Whether `size` has been read from the file (at the first write, not at the launch).
    private var sized = false

    /// The pipe's ends: the host's (kept) and the child's (given to the spawn, then closed
    /// by the caller).
    static func makePipe() throws -> (host: Int32, child: Int32) {
        var read: Int32 = -1
        var write: Int32 = -1
        let rc = aph_pipe(&read, &write)
        guard rc == 0 else { throw Errno(rawValue: rc) }
        _ = fcntl(read, F_SETFL, fcntl(read, F_GETFL) | O_NONBLOCK)
        return (read, write)
    }

    init(app: BundleID, path: String, readEnd: Int32, loop: any EventLoop, budget: AppLogBudget) {
        self.app = app
        self.path = path
        self.readEnd = readEnd
        self.loop = loop
        self.budget = budget
        tokens = Double(budget.limits.burstBytes)
        refilled = .now()
    }

    /// The watcher's key for this pump's pipe (0: not watched).
    private var watchKey: UInt64 = 0

    /// Starts reading when the pipe has something (the app writes without talking to the
    /// host): ``AppLogWatcher`` tells the pump's loop, and the pump reads there. (Not a NIO
    /// channel: the pump also reads the pipe itself before the app's messages go on, and
    /// NIO's channels assume no one else reads their descriptor.)
    func register() {
        loop.execute { [self] in
            guard readEnd >= 0, watchKey == 0 else { return }
            watchKey = AppLogWatcher.shared.watch(readEnd, pump: self)
        }
    }

    /// The watcher saw the pipe readable (or its writers gone).
    func readable(key: UInt64) {
        loop.preconditionInEventLoop()
        guard readEnd >= 0, key == watchKey else { return }
        drain()
        if readEnd >= 0 { AppLogWatcher.shared.rearm(readEnd, key: key) }
    }

    /// Whether bytes wait in the pipe (an app blocked writing to a full pipe is not idle).
    func hasUnread() -> Bool {
        loop.preconditionInEventLoop()
        guard readEnd >= 0 else { return false }
        var count: Int32 = 0
        return ioctl(readEnd, UInt(FIONREAD), &count) == 0 && count > 0
    }

    /// Reads what the pipe holds now and writes it within the limits.
    func drain() {
        loop.preconditionInEventLoop()
        guard readEnd >= 0 else { return }
        // On the loop thread's stack: a pump holds no buffer between reads (200 suspended
        // apps would hold 12.8 MiB of them).
        withUnsafeTemporaryAllocation(byteCount: 64 * 1024, alignment: 16) { buffer in
            while readEnd >= 0 {
                let n = Glibc.read(readEnd, buffer.baseAddress, buffer.count)
                if n > 0 {
                    accept(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                    continue
                }
                if n < 0 && errno == EINTR { continue }
                if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
                // End of file (every writer gone) or an error: nothing more will come.
                close()
                return
            }
        }
    }

    /// The app has exited: reads what is left (its writers are gone, so up to the end of
    /// file), says what was dropped, and closes everything.
    func finish() {
        loop.preconditionInEventLoop()
        drain()
        close()
    }

    private func close() {
        if readEnd >= 0 {
            if watchKey != 0 { AppLogWatcher.shared.unwatch(readEnd, key: watchKey) }
            _ = Glibc.close(readEnd)
            readEnd = -1
        }
        sayDropped()
        try? file?.close()
        file = nil
    }

    // MARK: - The limits

    private func accept(_ bytes: UnsafeRawBufferPointer) {
        let count = bytes.count
        let limits = budget.limits
        let now = NIODeadline.now()
        let elapsed = Double((now - refilled).nanoseconds) / 1e9
        refilled = now
        tokens = min(Double(limits.burstBytes), tokens + elapsed * Double(limits.bytesPerSecond))
        guard tokens >= Double(count) else {
            if droppedForRate == 0 {
                note("[apphost] \(app) writes faster than \(limits.bytesPerSecond) bytes a second (after \(limits.burstBytes) at once): its output is dropped until it slows")
            }
            droppedForRate += Int64(count)
            return
        }
        tokens -= Double(count)
        sayDropped()
        write(bytes)
    }

    /// Says, once output is written again (or at the end), how much was dropped.
    private func sayDropped() {
        if droppedForRate > 0 {
            let dropped = droppedForRate
            droppedForRate = 0
            note("[apphost] \(dropped) bytes of \(app)'s output were dropped: over its rate of \(budget.limits.bytesPerSecond) bytes a second")
        }
        if droppedForBudget > 0 {
            let dropped = droppedForBudget
            droppedForBudget = 0
            note("[apphost] \(dropped) bytes of \(app)'s output were dropped: the apps' logs had used their budget of \(budget.total) bytes")
        }
    }

    /// A line of the host's own in the app's log (and the host's log), within the budget.
    private func note(_ text: String) {
        budget.logger.warning("\(text)")
        let line = Array(("\n" + text + "\n").utf8)
        line.withUnsafeBytes { write($0, notice: true) }
    }

    private func write(_ bytes: UnsafeRawBufferPointer, notice: Bool = false) {
        let count = Int64(bytes.count)
        if !sized {
            var st = stat()
            if stat(path, &st) == 0 { size = Int64(st.st_size) }
            sized = true
        }
        if size + count > budget.limits.fileBytes, size > 0 { rotate() }
        guard budget.take(count) else {
            if !notice {
                if droppedForBudget == 0 {
                    budget.logger.warning("[apphost] the apps' logs have used their budget of \(budget.total) bytes: \(app)'s output is dropped")
                }
                droppedForBudget += count
            }
            return
        }
        guard let file = openFile() else {
            budget.giveBack(count)
            return
        }
        do {
            let written = try file.writeAll(bytes)
            size += Int64(written)
        } catch {
            budget.giveBack(count)
        }
    }

    private func openFile() -> SystemPackage.FileDescriptor? {
        if let file { return file }
        file = try? SystemPackage.FileDescriptor.open(FilePath(path), .writeOnly, options: [.append, .create, .closeOnExec],
                                        permissions: [.ownerReadWrite])
        return file
    }

    /// `<id>.log` becomes `<id>.log.1` (the older `.1` removed, its bytes given back).
    private func rotate() {
        try? file?.close()
        file = nil
        let old = path + ".1"
        var st = stat()
        if stat(old, &st) == 0 {
            budget.giveBack(Int64(st.st_size))
        }
        _ = rename(path, old)
        size = 0
    }
}

/// One thread for every app's log pipe: waits until one is readable and tells that pump's
/// event loop (one-shot: the pump arms it again once it has read). It never reads.
final class AppLogWatcher: Sendable {
    static let shared = AppLogWatcher()

    private let epoll: Int32
    private struct State {
        var pumps: [UInt64: AppLogPump] = [:]
        var lastKey: UInt64 = 0
        var started = false
    }
    private let state = Mutex(State())

    private init() {
        var fd: Int32 = -1
        epoll = aph_epoll_create(&fd) == 0 ? fd : -1
    }

    /// Watches `fd` for `pump`; returns its key (0: cannot be watched).
    func watch(_ fd: Int32, pump: AppLogPump) -> UInt64 {
        guard epoll >= 0 else { return 0 }
        let (key, start) = state.withLock { s -> (UInt64, Bool) in
            s.lastKey += 1
            s.pumps[s.lastKey] = pump
            defer { s.started = true }
            return (s.lastKey, !s.started)
        }
        if start { startThread() }
        guard aph_epoll_add_oneshot(epoll, fd, key, 0) == 0 else {
            _ = state.withLock { $0.pumps.removeValue(forKey: key) }
            return 0
        }
        return key
    }

    func rearm(_ fd: Int32, key: UInt64) {
        _ = aph_epoll_add_oneshot(epoll, fd, key, 1)
    }

    /// Before the descriptor is closed.
    func unwatch(_ fd: Int32, key: UInt64) {
        _ = aph_epoll_remove(epoll, fd)
        _ = state.withLock { $0.pumps.removeValue(forKey: key) }
    }

    private func startThread() {
        let thread = Thread { [self] in
            _ = aph_set_thread_name("aph-app-logs")
            var keys = [UInt64](repeating: 0, count: 64)
            while true {
                var count: Int32 = 0
                let rc = keys.withUnsafeMutableBufferPointer { aph_epoll_wait(epoll, $0.baseAddress, Int32($0.count), &count) }
                if rc != 0 { continue }
                for key in keys.prefix(Int(count)) {
                    guard let pump = state.withLock({ $0.pumps[key] }) else { continue }
                    pump.loop.execute { pump.readable(key: key) }
                }
            }
        }
        thread.start()
    }
}
