import AppHostProtocol
import AppHostSystem
import Foundation
import TestSupport
import HTTPTestServer
import SystemPackage
import Testing
import TransferCore

let daemonPath = productsDirectory + "/apphost-transferd"


struct TimedOut: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Events from the daemon, in order; `next` waits (with a timeout guard, not a sleep).
final class EventBox: @unchecked Sendable {
    private let lock = NSLock()
    private var queue: [TransferEvent] = []
    private var waiter: (gen: Int, c: CheckedContinuation<TransferEvent?, Never>)?
    private var gen = 0
    private var closed = false

    func push(_ e: TransferEvent) {
        lock.lock()
        if let w = waiter {
            waiter = nil
            lock.unlock()
            w.c.resume(returning: e)
        } else {
            queue.append(e)
            lock.unlock()
        }
    }

    func close() {
        lock.lock()
        closed = true
        let w = waiter
        waiter = nil
        lock.unlock()
        w?.c.resume(returning: nil)
    }

    private func expire(_ g: Int) {
        lock.lock()
        guard let w = waiter, w.gen == g else { lock.unlock(); return }
        waiter = nil
        lock.unlock()
        w.c.resume(returning: nil)
    }

    /// The next event, nil at EOF or after `timeout` seconds.
    func next(timeout: Double) async -> TransferEvent? {
        await withCheckedContinuation { (c: CheckedContinuation<TransferEvent?, Never>) in
            lock.lock()
            if !queue.isEmpty {
                let e = queue.removeFirst()
                lock.unlock()
                c.resume(returning: e)
                return
            }
            if closed {
                lock.unlock()
                c.resume(returning: nil)
                return
            }
            gen += 1
            let g = gen
            waiter = (g, c)
            lock.unlock()
            Task { [weak self] in
                try? await Task.sleep(for: .milliseconds(Int64(timeout * 1000)))
                self?.expire(g)
            }
        }
    }
}

/// The host's end of a transfer daemon's socket: requests out, events in (read by a
/// thread of its own into an ``EventBox``).
final class DaemonLink: @unchecked Sendable {
    let hostFD: Int32
    let events = EventBox()
    private var closedFD = false
    /// Every event seen by `next`, for assertions.
    private(set) var seen: [TransferEvent] = []

    init(hostFD: Int32) {
        self.hostFD = hostFD
        let fd = hostFD
        let box = events
        let t = Thread {
            var decoder = FrameDecoder()
            var buf = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                decoder.append(buf[0..<n])
                while let payload = try? decoder.next() {
                    if let e = try? Frame.decode(TransferEvent.self, from: payload) { box.push(e) }
                }
            }
            box.close()
        }
        t.start()
    }

    func send(_ request: TransferRequest) throws {
        let bytes = try Frame.encode(request)
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { write(hostFD, $0.baseAddress! + off, $0.count - off) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Errno(rawValue: errno)
            }
            off += n
        }
    }

    /// The next event matching `predicate` (others are recorded in `seen` and skipped).
    @discardableResult
    func next(timeout: Double = 60, _ what: String = "event",
              where predicate: (TransferEvent) -> Bool = { _ in true }) async throws -> TransferEvent {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0, let e = await events.next(timeout: left) else { throw TimedOut(what: what) }
            seen.append(e)
            if predicate(e) { return e }
        }
    }

    /// Closes the host end: the daemon reads EOF. `shutdown` first so its reader stops too.
    func close(shutdownFirst: Bool = true) {
        guard !closedFD else { return }
        closedFD = true
        if shutdownFirst { shutdown(hostFD, Int32(SHUT_RDWR)) }
        Glibc.close(hostFD)
    }
}

/// One running `apphost-transferd` with the host end of its descriptor 3.
final class Daemon: @unchecked Sendable {
    let process: ChildProcess
    private let exitEvents: AsyncStream<ChildEvent>
    let link: DaemonLink
    var events: EventBox { link.events }
    /// Every event seen by `next`, for assertions.
    var seen: [TransferEvent] { link.seen }

    static func spawn(stateDir: String, arguments: [String] = [], limits: [ResourceLimit] = [],
                      stderrPath: String) async throws -> Daemon {
        let (hostEnd, childEnd) = try makeSocketPair()
        let err = try FileDescriptor.open(stderrPath, .writeOnly, options: [.create, .append],
                                          permissions: .ownerReadWrite)
        defer {
            try? childEnd.close()
            try? err.close()
        }
        let settings = SpawnSettings(
            executablePath: daemonPath,
            arguments: [daemonPath, "--state-dir", stateDir] + arguments,
            environment: ["APPHOST_TRANSFERD_FD": "3", "PATH": "/usr/bin:/bin"],
            ipcDescriptor: childEnd,
            standardError: err,
            resourceLimits: limits,
            seccomp: .none)
        let (process, exits) = try await ProcessReaper.shared.spawn(settings)
        return Daemon(process: process, exits: exits, hostFD: hostEnd.rawValue)
    }

    private init(process: ChildProcess, exits: AsyncStream<ChildEvent>, hostFD: Int32) {
        self.process = process
        self.exitEvents = exits
        link = DaemonLink(hostFD: hostFD)
    }

    func send(_ request: TransferRequest) throws { try link.send(request) }

    /// The next event matching `predicate` (others are recorded in `seen` and skipped).
    @discardableResult
    func next(timeout: Double = 60, _ what: String = "event",
              where predicate: (TransferEvent) -> Bool = { _ in true }) async throws -> TransferEvent {
        try await link.next(timeout: timeout, what, where: predicate)
    }

    func waitExit() async -> AppHostSystem.ExitStatus {
        for await e in exitEvents {
            if case .exited(let s) = e { return s }
        }
        return process.exitStatus ?? .unavailable
    }

    /// Closes the host end (EOF for the daemon) and waits for the exit.
    func stop() async -> AppHostSystem.ExitStatus {
        link.close()
        return await waitExit()
    }

    func kill9() async -> AppHostSystem.ExitStatus {
        try? process.signal(SIGKILL)
        let s = await waitExit()
        link.close(shutdownFirst: false)
        return s
    }
}

/// A transfer daemon run in this process (`TransferDaemon.run` on a socketpair), so a
/// test can hand it a configuration of its own, a ``ManualTransferClock`` for one.
final class InProcessDaemon: Sendable {
    let link: DaemonLink
    private let task: Task<Void, any Error>

    init(configuration: TransferDaemonConfiguration) throws {
        let (hostEnd, daemonEnd) = try makeSocketPair()
        link = DaemonLink(hostFD: hostEnd.rawValue)
        let fd = daemonEnd.rawValue
        task = Task {
            defer { Glibc.close(fd) }
            try await TransferDaemon.run(configuration: configuration, fd: fd)
        }
    }

    /// EOF for the daemon; returns once it has stopped every transfer.
    func stop() async throws {
        link.close()
        try await task.value
    }
}

/// A ``TransferClock`` that moves only when told: its timers fire in `advance`, in order.
final class ManualTransferClock: TransferClock, @unchecked Sendable {
    private let lock = NSLock()
    private var current: Double
    private var nextID = 0
    private var timers: [Int: (at: Double, fire: @Sendable () -> Void)] = [:]

    init(start: Double = Date().timeIntervalSince1970) {
        current = start
    }

    func now() -> Double {
        lock.lock()
        defer { lock.unlock() }
        return current
    }

    func schedule(at: Double, _ fire: @escaping @Sendable () -> Void) -> any TransferTimer {
        lock.lock()
        nextID += 1
        let id = nextID
        timers[id] = (at, fire)
        lock.unlock()
        return Timer(clock: self, id: id)
    }

    /// How many timers wait to fire.
    var pending: Int {
        lock.lock()
        defer { lock.unlock() }
        return timers.count
    }

    /// Moves time forward by `seconds`, firing every timer that falls due, earliest first.
    func advance(by seconds: Double) {
        lock.lock()
        current += seconds
        let due = timers.filter { $0.value.at <= current }.sorted { $0.value.at < $1.value.at }
        for (id, _) in due { timers.removeValue(forKey: id) }
        lock.unlock()
        for (_, timer) in due { timer.fire() }
    }

    private func cancel(_ id: Int) {
        lock.lock()
        timers.removeValue(forKey: id)
        lock.unlock()
    }

    private struct Timer: TransferTimer {
        let clock: ManualTransferClock
        let id: Int
        func cancel() { clock.cancel(id) }
    }
}

func finishedOutcome(_ e: TransferEvent) -> TransferOutcome? {
    if case .finished(_, let o) = e { return o }
    return nil
}

func isFinished(_ id: UInt64) -> (TransferEvent) -> Bool {
    { if case .finished(let i, _) = $0 { return i.rawValue == id }; return false }
}

func isAccepted(_ id: UInt64) -> (TransferEvent) -> Bool {
    { if case .accepted(let i) = $0 { return i.rawValue == id }; return false }
}

/// Runs a command, returns its stdout (the process is waited for).
func run(_ path: String, _ args: [String], stdin: ((FileHandle) throws -> Void)? = nil) throws -> String {
    String(decoding: try Tool.run(path, args, stdin: stdin).stdout, as: UTF8.self)
}

func sha256(file: String) throws -> String {
    String(try run("/usr/bin/sha256sum", [file]).prefix(64))
}

/// SHA-256 of bytes produced chunk by chunk (never all in memory).
func sha256(chunks: @escaping (FileHandle) throws -> Void) throws -> String {
    String(try run("/usr/bin/sha256sum", ["-"], stdin: chunks).prefix(64))
}

/// Peak resident set (VmHWM) of `pid` in KiB.
func peakRSSKiB(_ pid: Int32) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in text.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "")
    }
    return nil
}

func job(_ id: UInt64, url: String, destination: String, kind: TransferKind = .download,
         method: String = "GET", uploadFile: String? = nil, app: BundleID = "com.example.t") -> TransferJob {
    TransferJob(id: TransferID(id), bundleIdentifier: app, session: "bg", taskIdentifier: TransferTaskID(Int(id)), kind: kind,
                url: url, method: method, uploadFile: uploadFile, destination: destination,
                created: Date().timeIntervalSince1970)
}
