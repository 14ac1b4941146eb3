import AppHostProtocol
import Foundation
import TestSupport
import Logging
import Synchronization
import Testing
@testable import Host

#if canImport(Glibc)
import Glibc
#endif

/// A small tmpfs of a test's own (needs root and mount(2), as in the CI sandbox), so a
/// full disk is real; unmounted and removed by `remove()`.
struct SmallFileSystem {
    let path: String
    private let owned: TempDir?

    /// Whether tmpfs can be mounted here (tried once).
    static let available: Bool = {
        guard geteuid() == 0, let probe = try? SmallFileSystem("mnt", bytes: 64 << 10) else { return false }
        probe.remove()
        return true
    }()

    /// Mounts one on a new temporary directory.
    init(_ label: String, bytes: Int) throws {
        let dir = try TempDir(label)
        do {
            try Self.mountTmpfs(on: dir.path, bytes: bytes)
        } catch {
            dir.remove()
            throw error
        }
        path = dir.path
        owned = dir
    }

    /// Mounts one on an existing empty directory (a CLI session's state dir).
    init(mountingOn path: String, bytes: Int) throws {
        try Self.mountTmpfs(on: path, bytes: bytes)
        self.path = path
        owned = nil
    }

    private static func mountTmpfs(on path: String, bytes: Int) throws {
        guard mount("tmpfs", path, "tmpfs", 0, "size=\(bytes),mode=0755") == 0 else {
            throw CLITestFailure("mount tmpfs on \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Fills the file system with `fill` until ENOSPC; returns the bytes written.
    @discardableResult
    func fill() throws -> Int {
        let fd = open(path + "/fill", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CLITestFailure("open fill: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var total = 0
        var size = 1 << 16
        let chunk = [UInt8](repeating: 0x78, count: size)
        while size > 0 {
            let n = chunk.withUnsafeBytes { write(fd, $0.baseAddress, size) }
            if n > 0 { total += n; continue }
            guard errno == ENOSPC else { throw CLITestFailure("fill: \(String(cString: strerror(errno)))") }
            size /= 2
        }
        return total
    }

    /// Frees what ``fill()`` took.
    func free() {
        unlink(path + "/fill")
    }

    /// Unmounts it (lazily: a process may still hold a file) and removes the mount point.
    func unmount() {
        _ = umount2(path, 2)  // MNT_DETACH
        rmdir(path)
    }

    func remove() {
        unmount()
        owned?.remove()
    }
}

/// Every line of an events file: each must end with a newline and parse.
func eventLines(_ path: String) throws -> [HostEvent] {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    if let last = data.last { #expect(last == 0x0a, "\(path) ends inside a line") }
    let decoder = WireJSON.decoder()
    return try data.split(separator: 0x0a).map { line in
        do {
            return try decoder.decode(HostEvent.self, from: Data(line))
        } catch {
            throw CLITestFailure("torn or corrupt line in \(path): \(String(decoding: line.prefix(200), as: UTF8.self))")
        }
    }
}

@Suite struct EventLogTests {
    let logger = Logger(label: "test")
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func rotatesAtTheLimitAndKeepsAFixedNumberOfOldFiles() throws {
        let dir = try TempDir("evrot")
        defer { dir.remove() }
        let path = dir.path + "/events.jsonl"
        let log = try EventLog(path: path, limits: EventLogLimits(rotateAt: 4096, keep: 2), logger: logger)
        for i in 1...200 {
            _ = try log.append(.service, cause: "event \(i)", time: t0).get()
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        #expect(names == ["events.1.jsonl", "events.2.jsonl", "events.jsonl"], "\(names)")
        for name in names {
            let size = try #require(try FileManager.default.attributesOfItem(atPath: dir.path + "/" + name)[.size] as? Int)
            #expect(size <= 4096, "\(name) is \(size) bytes")
        }
        // The past is the kept files, oldest first, without a gap, up to the last event.
        let (past, _, sub) = log.subscribe(filter: nil)
        log.unsubscribe(sub)
        let seqs = past.map(\.seq)
        #expect(seqs.last == 200)
        #expect(seqs == Array((seqs.first ?? 0)...200), "consecutive")
        #expect(seqs.count < 200, "the oldest file was dropped")
        log.close()
        // A new log after a rotation that left events.jsonl empty finds the last seq in events.1.jsonl.
        try FileManager.default.moveItem(atPath: path, toPath: dir.path + "/events.3.jsonl")
        try FileManager.default.moveItem(atPath: dir.path + "/events.1.jsonl", toPath: path + ".tmp")
        try FileManager.default.moveItem(atPath: path + ".tmp", toPath: dir.path + "/events.1.jsonl")
        let reopened = try EventLog(path: path, limits: EventLogLimits(rotateAt: 4096, keep: 2), logger: logger)
        #expect(reopened.lastSeq > 0 && reopened.lastSeq < 200)
    }

    /// Tests (and `apphost events --json` readers) match typed fields, not `cause` text:
    /// the fields are written to the file and read back, and absent where not given.
    @Test func typedFieldsAreWrittenAndReadBack() throws {
        let dir = try TempDir("evfields")
        defer { dir.remove() }
        let log = try EventLog(path: dir.path + "/events.jsonl", logger: logger)
        _ = try log.append(.callback, app: "a", cause: "didEnterBackground returned", fields: .init(callback: "didEnterBackground"), time: t0).get()
        _ = try log.append(.signal, app: "a", cause: "SIGSTOP: no assertion left", fields: .init(signal: .stop), time: t0).get()
        _ = try log.append(.signal, app: "a", cause: "running again", fields: .init(signal: .cont, confirmed: true), time: t0).get()
        _ = try log.append(.backgroundTask, app: "a", cause: "begin", fields: .init(task: 7, taskName: "upload", began: true), time: t0).get()
        _ = try log.append(.service, app: "a", cause: "plain", time: t0).get()
        let (past, _, sub) = log.subscribe(filter: nil)
        log.unsubscribe(sub)
        let read = Array(past)
        #expect(read.map(\.callback) == ["didEnterBackground", nil, nil, nil, nil])
        #expect(read.map(\.signal) == [nil, .stop, .cont, nil, nil])
        #expect(read.map(\.confirmed) == [nil, nil, true, nil, nil])
        #expect(read[3].task == 7 && read[3].taskName == "upload" && read[3].began == true)
        let line = try String(contentsOfFile: dir.path + "/events.jsonl", encoding: .utf8).split(separator: "\n").last.map(String.init) ?? ""
        #expect(!line.contains("callback") && !line.contains("signal"), "absent fields are not written: \(line)")
        log.close()
    }

    @Test func theDefaultLimitIs64MiBWithThreeOldFiles() {
        #expect(EventLogLimits().rotateAt == 64 << 20)
        #expect(EventLogLimits().keep == 3)
    }

    @Test func aCutLastLineIsRemovedAtStart() throws {
        let dir = try TempDir("evcut")
        defer { dir.remove() }
        let path = dir.path + "/events.jsonl"
        do {
            let log = try EventLog(path: path, logger: logger)
            for i in 1...3 { _ = try log.append(.service, cause: "event \(i)", time: t0).get() }
            log.close()
        }
        // A write cut short (a crash, a full disk): no newline at the end.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("{\"cause\":\"half an ev".utf8))
        try handle.close()

        let log = try EventLog(path: path, logger: logger)
        #expect(log.lastSeq == 3)
        let next = try log.append(.service, cause: "after the repair", time: t0).get()
        #expect(next.seq == 4)
        log.close()
        let events = try eventLines(path)
        #expect(events.map(\.seq) == [1, 2, 3, 4])
        #expect(events.last?.cause == "after the repair")
    }

    @Test func startReadsOnlyTheTail() throws {
        let dir = try TempDir("evtail")
        defer { dir.remove() }
        let path = dir.path + "/events.jsonl"
        // 2 GiB of hole, then one event: only the end is read (a whole read would take seconds).
        let line = try WireJSON.encoder().encode(HostEvent(seq: 41, time: t0, kind: .service, cause: "last")) + Data([0x0a])
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        #expect(ftruncate(fd, off_t(2) << 30) == 0)
        _ = [UInt8](Data([0x0a]) + line).withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(2) << 30) }
        close(fd)
        let clock = ContinuousClock()
        let start = clock.now
        let log = try EventLog(path: path, logger: logger)
        #expect(clock.now - start < .seconds(1))
        #expect(log.lastSeq == 41)
        log.close()
    }

    @Test func thePastIsTheFilesAsTheyWereAtTheSubscription() async throws {
        let dir = try TempDir("evpast")
        defer { dir.remove() }
        let log = try EventLog(path: dir.path + "/events.jsonl", limits: EventLogLimits(rotateAt: 2048, keep: 3), logger: logger)
        for i in 1...10 {
            _ = try log.append(.service, app: i % 2 == 0 ? "com.a" : "com.b", cause: "e\(i)", time: t0).get()
        }
        let (past, live, sub) = log.subscribe(filter: "com.a")
        // Later events (and the rotations they cause) are not in the past, but live.
        for i in 11...40 {
            _ = try log.append(.service, app: "com.a", cause: "e\(i)", time: t0).get()
        }
        #expect(past.map(\.cause) == ["e2", "e4", "e6", "e8", "e10"])
        #expect(past.lastSeq == 10)
        log.unsubscribe(sub)
        var later: [UInt64] = []
        for await e in live { later.append(e.seq) }
        #expect(later == Array(11...40))
        log.close()
    }

    @Test func aBatchIsWrittenAndHandedOutWhenItsOutermostEndComes() async throws {
        let dir = try TempDir("evbatch")
        defer { dir.remove() }
        let path = dir.path + "/events.jsonl"
        let log = try EventLog(path: path, logger: logger)
        _ = try log.append(.service, cause: "before", time: t0).get()
        let (_, live, sub) = log.subscribe(filter: nil)
        log.beginBatch()
        log.beginBatch()
        let first = try log.append(.service, app: "com.a", cause: "one", time: t0).get()
        log.endBatch()
        let second = try log.append(.service, app: "com.b", cause: "two", time: t0).get()
        #expect([first.seq, second.seq] == [2, 3], "numbered at once")
        #expect(try eventLines(path).map(\.cause) == ["before"], "held until the outermost end")
        log.endBatch()
        #expect(try eventLines(path).map(\.cause) == ["before", "one", "two"])
        _ = try log.append(.service, cause: "after", time: t0).get()
        #expect(try eventLines(path).map(\.seq) == [1, 2, 3, 4], "and unbatched lines go at once again")
        log.unsubscribe(sub)
        var seen: [String] = []
        for await e in live { seen.append(e.cause) }
        #expect(seen == ["one", "two", "after"])
        log.close()
    }

    @Test func closingWritesAnOpenBatch() throws {
        let dir = try TempDir("evbatchclose")
        defer { dir.remove() }
        let path = dir.path + "/events.jsonl"
        let log = try EventLog(path: path, logger: logger)
        log.beginBatch()
        _ = try log.append(.hostStopped, cause: "host stopped", time: t0).get()
        log.close()
        #expect(try eventLines(path).map(\.kind) == [.hostStopped])
    }

    @Test func aLineOverTheReadLimitIsSkippedNotHeld() throws {
        let dir = try TempDir("evbig")
        defer { dir.remove() }
        let path = dir.path + "/events.jsonl"
        let encoder = WireJSON.encoder()
        var data = try encoder.encode(HostEvent(seq: 1, time: t0, kind: .service, cause: "before")) + Data([0x0a])
        // Not written by the log (it cuts causes), but a file may hold one: over 1 MiB.
        data += try encoder.encode(HostEvent(seq: 2, time: t0, kind: .service, cause: String(repeating: "z", count: EventLog.maximumLine + 10))) + Data([0x0a])
        data += try encoder.encode(HostEvent(seq: 3, time: t0, kind: .service, cause: "after")) + Data([0x0a])
        // Just at the limit: read.
        data += try encoder.encode(HostEvent(seq: 4, time: t0, kind: .service, cause: String(repeating: "a", count: EventLog.maximumLine - 200))) + Data([0x0a])
        try data.write(to: URL(fileURLWithPath: path))
        let log = try EventLog(path: path, logger: logger)
        #expect(log.lastSeq == 4)
        let (past, _, sub) = log.subscribe(filter: nil)
        log.unsubscribe(sub)
        #expect(past.map(\.seq) == [1, 3, 4])
        log.close()
    }

    @Test func nothingIsWrittenAfterClose() throws {
        let dir = try TempDir("evclosed")
        defer { dir.remove() }
        let path = dir.path + "/events.jsonl"
        let log = try EventLog(path: path, logger: logger)
        _ = try log.append(.hostStopped, cause: "host stopped", time: t0).get()
        log.close()
        #expect(throws: EventLogError.self) { try log.append(.warning, cause: "late", time: t0).get() }
        #expect(try eventLines(path).map(\.kind) == [.hostStopped])
    }

    @Test func aLongCauseIsCutSoAnEventFitsAFrame() throws {
        let dir = try TempDir("evlong")
        defer { dir.remove() }
        let log = try EventLog(path: dir.path + "/events.jsonl", logger: logger)
        let event = try log.append(.backgroundTask, app: "com.a", cause: String(repeating: "x", count: 2_000_000), time: t0).get()
        #expect(event.cause.utf8.count < EventLog.maximumCause + 100)
        #expect(event.cause.hasSuffix("(1991808 more bytes cut)"))
        #expect(try Frame.encode(ControlResponse.event(event)).count < Frame.maximumPayload)
        log.close()
    }

    @Test(.enabled(if: SmallFileSystem.available, "needs root and tmpfs"))
    func aFullDiskLeavesNoTornLineAndTheLogRecovers() throws {
        let fs = try SmallFileSystem("evfull", bytes: 256 << 10)
        defer { fs.remove() }
        let path = fs.path + "/events.jsonl"
        let log = try EventLog(path: path, logger: logger)
        for i in 1...5 { _ = try log.append(.service, cause: "before \(i)", time: t0).get() }
        try fs.fill()
        // Until the page the file ends in is full, lines still fit; then ENOSPC.
        var failure: EventLogError?
        for i in 1...200 {
            if case .failure(let error) = log.append(.service, cause: "while full \(i) " + String(repeating: "y", count: 300), time: t0) {
                failure = error
                break
            }
        }
        let error = try #require(failure, "no write failed on a full file system")
        #expect(error.code == ENOSPC)
        #expect(error.description.contains(path) && error.description.contains("ENOSPC"), "\(error)")
        #expect(log.failures == 1)
        let written = try eventLines(path)
        #expect(written.map(\.seq) == Array(1...UInt64(written.count)), "whole lines only, no gap")
        #expect(log.lastSeq == UInt64(written.count) + 1, "a failed event keeps its number: it waits for space")
        #expect(log.writtenSeq == UInt64(written.count) && log.hasUnwritten)

        // A batch that cannot be written whole leaves nothing on disk, and waits too.
        log.beginBatch()
        for i in 1...20 { _ = log.append(.service, cause: "batched \(i) " + String(repeating: "y", count: 300), time: t0) }
        log.endBatch()
        #expect(try eventLines(path) == written, "no line of the failed batch")
        #expect(log.lastSeq == UInt64(written.count) + 21)
        #expect(log.writtenSeq == UInt64(written.count))

        fs.free()
        log.retryUnwritten(force: true)
        let after = try log.append(.service, cause: "space again", time: t0).get()
        #expect(after.seq == UInt64(written.count) + 22)
        let all = try eventLines(path)
        #expect(all.map(\.seq) == Array(1...after.seq), "what waited is written first, in order: nothing lost")
        #expect(all.filter { $0.cause.hasPrefix("batched ") }.count == 20)
        #expect(!log.hasUnwritten && log.writtenSeq == after.seq)
        log.close()
        let reopened = try EventLog(path: path, logger: logger)
        #expect(reopened.lastSeq == after.seq)
        #expect(try eventLines(path).last == after)
        reopened.close()
    }
}

extension EventLogTests {
    /// What waits for a full disk is bounded (``EventLog/maximumUnwrittenBytes``): past it
    /// the oldest events are dropped, and once the disk takes lines again the log says how
    /// many, which numbers, and why, in a warning numbered after what was kept.
    @Test(.enabled(if: SmallFileSystem.available, "needs root and tmpfs"))
    func eventsWaitingForAFullDiskAreBoundedAndTheirLossIsSaid() throws {
        // Room for what is kept once it is freed.
        let fs = try SmallFileSystem("evbound", bytes: 24 << 20)
        defer { fs.remove() }
        let path = fs.path + "/events.jsonl"
        let log = try EventLog(path: path, logger: logger)
        _ = try log.append(.service, cause: "before", time: t0).get()
        try fs.fill()
        let big = String(repeating: "z", count: 8_000)
        // 8 MiB of causes and more: the oldest waiting ones must go.
        let count = EventLog.maximumUnwrittenBytes / 8_000 + 200
        for i in 1...count { _ = log.append(.service, cause: "waiting \(i) " + big, time: t0) }
        #expect(log.hasUnwritten)
        fs.free()
        log.retryUnwritten(force: true)
        let after = try log.append(.service, cause: "space again", time: t0).get()
        let lines = try eventLines(path)
        let warning = try #require(lines.first { $0.kind == .warning && $0.cause.hasPrefix("event log: ") }, "no line said what was dropped")
        #expect(warning.cause.contains("could not be written") && warning.cause.contains("were dropped"), "\(warning.cause)")
        let kept = lines.filter { $0.cause.hasPrefix("waiting ") }
        #expect(kept.count < count && kept.count > 0, "\(kept.count) of \(count) kept")
        #expect(kept.last?.cause.hasPrefix("waiting \(count) ") == true, "the newest are kept")
        // Every number is on disk or named in the warning.
        let dropped = count - kept.count
        #expect(warning.cause.hasPrefix("event log: \(dropped) event(s), seq 2–\(1 + dropped)"), "\(warning.cause)")
        #expect(lines.last == after && after.seq == UInt64(count) + 3)
        log.close()
    }
}

extension EventLogTests {
    /// A transaction of transitions that a full disk refuses loses nothing: its rows wait,
    /// in order, and go with the next write once there is space; at most the store's bound
    /// of them wait, the oldest dropped past it (the event log keeps them for the next start).
    @Test(.enabled(if: SmallFileSystem.available, "needs root and tmpfs"))
    func transitionsAFullDiskRefusedAreWrittenLaterAndBounded() async throws {
        let fs = try SmallFileSystem("dbfull", bytes: 16 << 20)
        defer { fs.remove() }
        let store = try Store(path: fs.path + "/apphost.sqlite", unwrittenLimit: 3_000)
        func rows(_ range: ClosedRange<Int>) -> [Store.TransitionRow] {
            range.map { i in
                Store.TransitionRow(bundleIdentifier: "com.db.full", pid: 1, from: .background, to: .suspended,
                                    cause: "row \(i) " + String(repeating: "c", count: 1_000), time: t0, seq: UInt64(i))
            }
        }
        try fs.fill()
        let failures = Mutex(0)
        for start in stride(from: 1, through: 4_001, by: 1_000) {
            store.recordTransitions(rows(start...(start + 999))) { _ in failures.withLock { $0 += 1 } }
            try await store.flushed()
        }
        #expect(failures.withLock { $0 } > 0, "the full disk refused the writes")
        let (waiting, dropped) = store.unwrittenTransitions
        #expect(waiting == 3_000 && dropped == 2_000, "bounded: \(waiting) waiting, \(dropped) dropped")
        fs.free()
        store.retryUnwritten { error in Issue.record("\(error)") }
        try await store.flushed()
        #expect(!store.hasUnwrittenTransitions)
        #expect(try store.numberedTransitions().map(\.seq) == Array(2_001...5_000), "the newest, in order")
    }
}

@Suite struct BoundsTests {
    @Test func statusListsAtMost64NamesOfAtMost256Characters() throws {
        let names = (1...300).map { "\($0)" + String(repeating: "n", count: 4000) }
        let bounded = AppStatus.bounded(names)
        #expect(bounded.count == AppStatus.maximumListed + 1)
        #expect(bounded.last == "… and 236 more")
        #expect(bounded.dropLast().allSatisfy { $0.count == AppStatus.maximumNameLength + 1 })
        #expect(AppStatus.bounded(["a", "b"]) == ["a", "b"])
        let status = AppStatus(bundleIdentifier: "com.a", state: .background, pid: 1, since: Date(),
                               backgroundTasks: bounded, activities: AppStatus.bounded(names), isFrontmost: false)
        #expect(try Frame.encode(ControlResponse.appStatus(status)).count < 64 << 10)
    }

    @Test func anEventLinesTimeIsTheMillisecondOtherOutputsShow() throws {
        // Times read back from the log: every millisecond of a second, parsed as the
        // reader parses them, print as `status` prints them (rounded, never a ms early).
        for ms in 0..<1000 {
            let text = String(format: "2026-11-29T21:35:06.%03dZ", ms)
            let time = try #require(Timestamp.parse(text))
            let line = EventFormatter.line(HostEvent(seq: 1, time: time, kind: .service, cause: "x"))
            #expect(line.hasPrefix(String(format: "21:35:06.%03d  ", ms)), "\(text): \(line)")
            #expect(Timestamp.format(time) == text)
        }
    }

    @Test func aReportTooLargeForAFrameIsCut() throws {
        let tasks = (1...300).map { HeldTaskRecord(id: BackgroundTaskID($0), name: String(repeating: "t", count: 4000), age: 1) }
        let report = TerminationReport(id: "r", bundleIdentifier: "com.a", pid: 1, time: Date(), exceptionType: "EXIT",
                                       exitStatus: 0, signal: nil, signalName: nil, terminationNamespace: nil,
                                       terminationCode: nil, reason: "r", backgroundTasks: tasks, lastStates: [])
        #expect(throws: FrameError.self) { try Frame.encode(ControlResponse.report(report)) }
        let bounded = report.boundedForWire()
        #expect(bounded.backgroundTasks.count == AppStatus.maximumListed)
        #expect(try Frame.encode(ControlResponse.report(bounded)).count < 64 << 10)
    }

    @Test func anInstalledAppTooLargeForAFrameIsCut() throws {
        let names = (1...300).map { "com.example.task\($0)." + String(repeating: "t", count: 4000) }
        let manifest = Manifest(bundleIdentifier: "com.a", executable: "A", name: "A", bgTaskIdentifiers: names,
                                externalAccessoryProtocols: names, sourcePath: "/a/Info.plist")
        let app = InstalledApp(bundleIdentifier: "com.a", name: "A", bundlePath: "/a", executablePath: "/a/A",
                               backgroundModes: [], installedAt: Date(), manifest: manifest, entitlements: names)
        #expect(throws: FrameError.self) { try Frame.encode(ControlResponse.app(app)) }
        let bounded = app.boundedForWire()
        #expect(bounded.manifest.bgTaskIdentifiers.count == AppStatus.maximumListed + 1)
        #expect(try Frame.encode(ControlResponse.app(bounded)).count < 64 << 10)
        #expect(AppStatus.bounded(["com.x"]) == ["com.x"], "a small app is sent as it is")
    }

    @Test func transferDaemonRestartsBackOffAndResetOnlyAfterStayingUp() {
        var b = RestartBackoff()
        // Dies at once, again and again: 1, 2, 4, ... 60, 60.
        var delays: [Duration] = []
        var now = Duration.zero
        for _ in 0..<9 {
            b.started(at: now)
            now += .seconds(1)
            let d = b.ended(at: now)
            delays.append(d)
            now += d
        }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60, 60].map { Duration.seconds($0) })
        // Up for 29 s: still failing.
        b.started(at: now)
        #expect(b.ended(at: now + .seconds(29)) == .seconds(60))
        // Up for 30 s: back to 1 s, then growing again.
        now += .seconds(100)
        b.started(at: now)
        #expect(b.ended(at: now + .seconds(30)) == .seconds(1))
        #expect(b.ended(at: now + .seconds(31)) == .seconds(2), "a start that failed (never up) counts")
        // Never overflows.
        for _ in 0..<200 { _ = b.ended(at: now) }
        #expect(b.ended(at: now) == .seconds(60))
    }
}
