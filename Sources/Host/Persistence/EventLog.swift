import AppHostProtocol
import AppHostSystem
import Foundation
import HostConfig
import Logging
import Synchronization
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// How large `events.jsonl` may grow and how many older files are kept.
public struct EventLogLimits: Sendable, Equatable {
    /// The size at which `events.jsonl` is renamed `events.1.jsonl` and a new one begun.
    public var rotateAt: Int64 = 64 << 20
    /// Older files kept: `events.1.jsonl` (newest) … `events.<keep>.jsonl` (oldest).
    public var keep = 3

    /// Limits of at least 1 byte and 1 old file.
    public init(rotateAt: Int64 = 64 << 20, keep: Int = 3) {
        self.rotateAt = max(1, rotateAt)
        self.keep = max(1, keep)
    }
}

/// An event the host could not write to its log.
public struct EventLogError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file concerned.
    public var path: String
    /// What was being done: "write to", "rename", "open".
    public var operation: String
    /// The `errno` of the failed call.
    public var code: Int32

    /// `cannot write to <path>: No space left on device (ENOSPC, errno 28)`.
    public var description: String {
        "cannot \(operation) \(path): \(Self.errnoText(code))"
    }

    /// `No space left on device (ENOSPC, errno 28)`.
    static func errnoText(_ code: Int32) -> String {
        let names: [Int32: String] = [ENOSPC: "ENOSPC", EDQUOT: "EDQUOT", EIO: "EIO", EROFS: "EROFS", EFBIG: "EFBIG",
                                      EACCES: "EACCES", EPERM: "EPERM", ENOENT: "ENOENT", EBADF: "EBADF"]
        let text = String(cString: strerror(code))
        return "\(text) (\(names[code].map { "\($0), " } ?? "")errno \(code))"
    }
}

/// `events.jsonl`: every host event, one JSON object a line, plus live subscribers.
/// Owned by the ``Supervisor`` actor (not thread-safe on its own).
///
/// - Each line is written with one `write(2)` (finished by more only after a short
///   write) on an `O_APPEND` descriptor; if the line cannot be written whole (ENOSPC,
///   EIO), the file is truncated back to where the line began: no torn line is left.
/// - At ``EventLimits/rotateAt`` bytes the file becomes `events.1.jsonl` (older ones
///   move up to `events.<keep>.jsonl`; the oldest is dropped).
/// - Opening reads only the file's tail (the last sequence number), after cutting off
///   a last line without its newline (a write cut short by a crash or a full disk).
/// - Subscribers get the past as ``EventLogPast``: descriptors of the files as they
///   were, read later in bounded chunks, off the actor.
final class EventLog {
    /// The longest `cause` written; longer ones are cut (an app controls much of it, and
    /// one event must fit a control frame).
    static let maximumCause = 8_192
    /// Lines longer than this are skipped when reading (none is written).
    static let maximumLine = 1 << 20

    let path: String
    private let limits: EventLogLimits
    private let logger: Logger
    private var descriptor: FileDescriptor?
    /// Bytes of whole lines in the current file (where the next line begins).
    private var end: Int64 = 0
    private(set) var lastSeq: UInt64
    /// The `seq` of the last event on disk: events above it are held in a batch or wait
    /// in `unwritten`. (The database's transitions follow it, never lead it.)
    private(set) var writtenSeq: UInt64
    /// Numbered events a write could not take (a full disk), written first, in order, by
    /// the next write; at most ``maximumUnwrittenBytes`` of them (past that the oldest are
    /// dropped, counted in `dropped`, and the log says so once it writes again).
    private var unwritten: [HostEvent] = []
    private var unwrittenBytes = 0
    private var dropped: (count: Int, first: UInt64, last: UInt64)?
    /// When a write last failed (CLOCK_MONOTONIC ns): while events wait, a write is tried
    /// again at most every ``retryInterval`` (each try encodes and writes all of them).
    private var lastFailure: UInt64 = 0
    static let retryInterval: UInt64 = 250_000_000
    /// How much waits for a retry, at most.
    static let maximumUnwrittenBytes = 8 << 20
    /// Appends that could not be written, and the last reason.
    private(set) var failures: UInt64 = 0
    private(set) var lastError: EventLogError?
    private var failingSince: UInt64?
    /// After a failed rotation, the size at which it is tried again (meanwhile the
    /// current file grows past the limit rather than events being lost).
    private var nextRotation: Int64?
    private var closed = false
    private var subscribers: [UInt64: (filter: BundleID?, channel: HostEventChannel)] = [:]
    private var nextSubscriber: UInt64 = 0
    /// Open batches (see ``beginBatch()``): while above 0, lines wait in `held`.
    private var batchDepth = 0
    /// The open batch's events (numbered, not yet encoded nor handed out), and the
    /// buffer they are encoded into when it is written.
    private var held: [UInt8] = []
    private var heldEvents: [HostEvent] = []
    /// The length of each held line, newline included.
    private var heldLengths: [Int] = []
    /// Where each app's lines are (see ``EventLogIndex``).
    private(set) var index = EventLogIndex()

    /// Opens (or creates) the log at `path`, repairing a cut last line.
    init(path: String, limits: EventLogLimits = EventLogLimits(), logger: Logger) throws(EventLogError) {
        self.path = path
        self.limits = limits
        self.logger = logger
        let fd = try Self.open(path)
        descriptor = fd
        var whole: Int64 = 0
        do throws(EventLogError) {
            let size = try Self.size(fd, path)
            whole = try Self.wholeLinesEnd(fd, size: size)
            if whole < size {
                guard ftruncate(fd.rawValue, off_t(whole)) == 0 else {
                    throw EventLogError(path: path, operation: "truncate", code: errno)
                }
                logger.warning("\(path): removed a cut last line (\(size - whole) bytes without a newline)")
            }
        } catch {
            try? fd.close()
            throw error
        }
        end = whole
        index.opened(existingBytes: whole)
        var seq = Self.lastEvent(fd, end: whole)?.seq
        if seq == nil {
            // Just rotated: the newest event is in the newest old file.
            for k in 1...limits.keep where seq == nil {
                if let old = try? FileDescriptor.open(FilePath(Self.rotatedPath(path, k)), .readOnly, options: .closeOnExec) {
                    if let n = try? Self.size(old, path) { seq = Self.lastEvent(old, end: n)?.seq }
                    try? old.close()
                }
            }
        }
        lastSeq = seq ?? 0
        writtenSeq = lastSeq
    }

    /// Numbers the next event above `seq` at least (the database holds a transition whose
    /// event was dropped from a full disk before a crash: its number is never given again).
    func advanceSeq(atLeast seq: UInt64) {
        lastSeq = max(lastSeq, seq)
        writtenSeq = max(writtenSeq, seq)
    }

    /// Whether events wait for a retry.
    var hasUnwritten: Bool { !unwritten.isEmpty }

    /// Writes what waits for a retry (space may have come back), outside any batch.
    func retryUnwritten(force: Bool = false) {
        guard !unwritten.isEmpty, batchDepth == 0 else { return }
        if !force, Self.now() &- lastFailure < Self.retryInterval { return }
        flushHeld(force: true)
    }

    private static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    deinit {
        try? descriptor?.close()
    }

    /// `events.<k>.jsonl` beside `events.jsonl`.
    static func rotatedPath(_ path: String, _ k: Int) -> String {
        let base = path.hasSuffix(".jsonl") ? String(path.dropLast(".jsonl".count)) : path
        return "\(base).\(k).jsonl"
    }

    /// Appends an event: writes it to the file and hands it to subscribers. An event
    /// that cannot be written whole is not written at all, not numbered and not handed
    /// out; the error is returned (and logged, once until writing works again).
    @discardableResult
    func append(_ kind: HostEvent.Kind, app: BundleID? = nil, pid: Int32? = nil, from: AppState? = nil,
                to: AppState? = nil, cause: String, mode: BackgroundMode? = nil, fields: HostEvent.Fields = HostEvent.Fields(),
                time: Date) -> Result<HostEvent, EventLogError> {
        var cause = cause
        if cause.utf8.count > Self.maximumCause {
            let cut = cause.utf8.count - Self.maximumCause
            cause = String(decoding: cause.utf8.prefix(Self.maximumCause), as: UTF8.self) + "… (\(cut) more bytes cut)"
        }
        let event = HostEvent(seq: lastSeq + 1, time: time, kind: kind, bundleIdentifier: app, pid: pid,
                              from: from, to: to, cause: cause, mode: mode, fields: fields)
        guard !closed else {
            // After the host stopped: nothing is written after hostStopped.
            return .failure(EventLogError(path: path, operation: "write to (closed)", code: EBADF))
        }
        if batchDepth > 0 {
            // Numbered now, encoded when the batch is written: a step's signal is not
            // held up by the encoding of the lines recorded before it in the step.
            heldEvents.append(event)
            lastSeq += 1
            return .success(event)
        }
        lastSeq += 1
        if !unwritten.isEmpty {
            // Behind what waits: written after it, or waiting with it (tried again only
            // every ``retryInterval`` while the disk refuses).
            if Self.now() &- lastFailure < Self.retryInterval {
                keepUnwritten([event])
                failures += 1
                return .failure(lastError ?? EventLogError(path: path, operation: "write to", code: EIO))
            }
            heldEvents.append(event)
            flushHeld()
            return unwritten.isEmpty ? .success(event) : .failure(lastError ?? EventLogError(path: path, operation: "write to", code: EIO))
        }
        do throws(EventLogError) {
            index.add(app: app, at: try write(event.jsonBytes() + [0x0a]))
        } catch {
            keepUnwritten([event])
            lastFailure = Self.now()
            return .failure(failed(error, count: 1))
        }
        writtenSeq = event.seq
        written([event])
        return .success(event)
    }

    /// Holds appended lines until the matching ``endBatch()`` (batches nest): the host
    /// opens one around each step, so a step's events cost one `write(2)`, after the
    /// step's signals rather than before them. Events are numbered at once and handed to
    /// subscribers once written; if the batch cannot be written whole, none of it is
    /// written, numbered or handed out (as for a single line).
    func beginBatch() {
        batchDepth += 1
    }

    /// Closes a batch; the outermost one writes what it held.
    func endBatch() {
        batchDepth -= 1
        guard batchDepth <= 0 else { return }
        batchDepth = 0
        flushHeld()
    }

    /// Writes what the open batch holds so far; the batch stays open (a launch's answer
    /// does not wait for the rest of its step).
    func writeHeld() {
        flushHeld()
    }

    private func flushHeld(force: Bool = false) {
        guard !heldEvents.isEmpty || !unwritten.isEmpty else { return }
        if !unwritten.isEmpty, !force, Self.now() &- lastFailure < Self.retryInterval {
            // The disk refused a moment ago: this batch waits behind the others.
            keepUnwritten(heldEvents)
            failures += UInt64(heldEvents.count)
            heldEvents.removeAll()
            held.removeAll(keepingCapacity: true)
            heldLengths.removeAll()
            return
        }
        if !unwritten.isEmpty {
            // What a full disk held back goes first, then (if some had to be dropped) a
            // line saying so, numbered after them, then this batch.
            var batch = unwritten
            if let dropped {
                lastSeq += 1
                let time = (unwritten.last ?? heldEvents.last).map(\.time) ?? Date()
                batch.append(HostEvent(seq: lastSeq, time: time, kind: .warning, bundleIdentifier: nil, pid: nil, from: nil, to: nil,
                                       cause: "event log: \(dropped.count) event(s), seq \(dropped.first)–\(dropped.last), could not be written (\(lastError.map { "\($0)" } ?? "a write failed")) and were dropped after \(Self.maximumUnwrittenBytes >> 20) MiB waited",
                                       mode: nil, fields: HostEvent.Fields()))
                // Said once: from here it waits (or is dropped) as any other event.
                self.dropped = nil
            }
            heldEvents = batch + heldEvents
            unwritten.removeAll()
            unwrittenBytes = 0
        }
        // Written from the buffers themselves, then emptied in place. (Copying them out
        // first made `removeAll(keepingCapacity:)` allocate a fresh buffer of the old
        // capacity each step: above the allocator's mmap threshold, a mapping made and
        // unmapped per step, 8 % of the host's CPU in the transfer benchmark.)
        defer {
            // Kept for the next step, unless a burst grew them past the mmap threshold.
            let keep = held.capacity < Int(Allocator.mmapThreshold)
            held.removeAll(keepingCapacity: keep)
            heldEvents.removeAll(keepingCapacity: keep)
            heldLengths.removeAll(keepingCapacity: keep)
        }
        for event in heldEvents {
            let before = held.count
            held += event.jsonBytes()
            held.append(0x0a)
            heldLengths.append(held.count - before)
        }
        do throws(EventLogError) {
            var offset = try write(held)
            for (event, length) in zip(heldEvents, heldLengths) {
                index.add(app: event.bundleIdentifier, at: offset)
                offset += Int64(length)
            }
        } catch {
            // Kept, numbered, for the next write: nothing is lost while space may come back.
            keepUnwritten(heldEvents)
            lastFailure = Self.now()
            _ = failed(error, count: heldEvents.count)
            return
        }
        if let last = heldEvents.last { writtenSeq = last.seq }
        written(heldEvents)
    }

    /// Keeps `events` for the next write, dropping the oldest past ``maximumUnwrittenBytes``.
    private func keepUnwritten(_ events: [HostEvent]) {
        unwritten += events
        unwrittenBytes += events.reduce(0) { $0 + $1.cause.utf8.count + 256 }
        while unwrittenBytes > Self.maximumUnwrittenBytes, let first = unwritten.first {
            unwritten.removeFirst()
            unwrittenBytes -= first.cause.utf8.count + 256
            dropped = (count: (dropped?.count ?? 0) + 1, first: dropped?.first ?? first.seq, last: first.seq)
            if dropped?.count == 1 {
                logger.error("event log: more than \(Self.maximumUnwrittenBytes >> 20) MiB of events wait for the disk; the oldest are dropped (seq \(first.seq) on)")
            }
        }
    }

    private func failed(_ error: EventLogError, count: Int) -> EventLogError {
        failures += UInt64(count)
        lastError = error
        if failingSince == nil {
            failingSince = failures
            logger.error("event log: \(error); events are not recorded until this is fixed")
        }
        return error
    }

    private func written(_ batch: [HostEvent]) {
        if let since = failingSince {
            logger.notice("event log: writing again after \(failures - since + 1) event(s) could not be written")
            failingSince = nil
        }
        for (_, sub) in subscribers {
            sub.channel.yield(batch, filter: sub.filter)
        }
    }

    /// Writes one line (or a batch of lines) whole or not at all, rotating first if it
    /// would pass the limit; returns the offset where it begins.
    private func write(_ line: [UInt8]) throws(EventLogError) -> Int64 {
        if end > 0, end + Int64(line.count) > max(limits.rotateAt, nextRotation ?? 0) {
            do {
                try rotate()
                nextRotation = nil
                index.rotated(keep: limits.keep)
            } catch {
                index.forget()
                // The events matter more than the limit: keep appending, try again 1 MiB on.
                logger.error("event log: could not rotate (\(error)); \(path) grows past \(limits.rotateAt) bytes meanwhile")
                nextRotation = end + (1 << 20)
            }
        }
        if descriptor == nil {
            descriptor = try Self.open(path)
            end = try Self.size(descriptor!, path)
        }
        guard let fd = descriptor else { return end }
        let start = end
        var written = 0
        while written < line.count {
            let n = line.withUnsafeBytes { raw in
                Glibc.write(fd.rawValue, raw.baseAddress! + written, raw.count - written)
            }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                let code = n < 0 ? errno : EIO
                // Nothing of this line may stay: the next one would be appended to it.
                _ = ftruncate(fd.rawValue, off_t(end))
                throw EventLogError(path: path, operation: "write to", code: code)
            }
            written += n
        }
        end += Int64(line.count)
        return start
    }

    /// `events.jsonl` → `events.1.jsonl` → … → `events.<keep>.jsonl` (the oldest dropped).
    private func rotate() throws(EventLogError) {
        try? descriptor?.close()
        descriptor = nil
        for k in stride(from: limits.keep - 1, through: 1, by: -1) {
            let from = Self.rotatedPath(path, k)
            if Glibc.rename(from, Self.rotatedPath(path, k + 1)) != 0, errno != ENOENT {
                throw EventLogError(path: from, operation: "rename", code: errno)
            }
        }
        if Glibc.rename(path, Self.rotatedPath(path, 1)) != 0, errno != ENOENT {
            throw EventLogError(path: path, operation: "rename", code: errno)
        }
        descriptor = try Self.open(path)
        end = 0
    }

    /// Events recorded so far (the files as they are now, read later) and, atomically
    /// with that cut, a stream of every later event. The stream ends when `cancel` is
    /// called or the log closes.
    /// `limit` and `overflow`: the live part's bound and what passing it does (see
    /// ``HostEventChannel/Overflow``).
    func subscribe(filter: BundleID?, limit: Int = HostEventStream.defaultLimit,
                   overflow: HostEventChannel.Overflow = .dropOldest,
                   onOverflow: (@Sendable () -> Void)? = nil) -> (past: EventLogPast, live: HostEventStream, id: UInt64) {
        var files: [(FileDescriptor, Int64, EventLogIndex.Plan)] = []
        func plan(_ k: Int) -> EventLogIndex.Plan { filter.map { index.plan(app: $0, rotated: k) } ?? .whole }
        for k in stride(from: limits.keep, through: 1, by: -1) {
            if let fd = try? FileDescriptor.open(FilePath(Self.rotatedPath(path, k)), .readOnly, options: .closeOnExec) {
                files.append((fd, (try? Self.size(fd, path)) ?? 0, plan(k)))
            }
        }
        if let fd = try? FileDescriptor.open(FilePath(path), .readOnly, options: .closeOnExec) {
            files.append((fd, end, plan(0)))
        }
        let past = EventLogPast(files: files, filter: filter, lastSeq: lastSeq)
        let stream = HostEventStream(limit: limit, overflow: overflow, onOverflow: onOverflow)
        nextSubscriber += 1
        subscribers[nextSubscriber] = (filter, stream.channel)
        return (past, stream, nextSubscriber)
    }

    /// The events numbered above `seq`, oldest first, read from the end of the log files
    /// back (the current file, then `events.1.jsonl`, ...) only as far as needed: what a
    /// host at its start compares with the database. Lines that do not parse are skipped.
    func events(after seq: UInt64) -> [HostEvent] {
        guard lastSeq > seq else { return [] }
        let decoder = WireJSON.decoder()
        var newestFirst: [[HostEvent]] = []
        for k in 0...limits.keep {
            let file = k == 0 ? path : Self.rotatedPath(path, k)
            guard let fd = try? FileDescriptor.open(FilePath(file), .readOnly, options: .closeOnExec) else { break }
            defer { try? fd.close() }
            guard let size = try? Self.size(fd, file), size > 0 else { continue }
            var found: [HostEvent] = []
            var reachedOlder = false
            var window: Int64 = 256 << 10
            while true {
                let from = max(0, size - window)
                let bytes = Self.read(fd, at: from, count: Int(size - from))
                var lines = bytes.split(separator: 0x0a, omittingEmptySubsequences: true)
                if from > 0, !lines.isEmpty { lines.removeFirst() }  // cut by the window
                found = lines.compactMap { try? decoder.decode(HostEvent.self, from: Data($0)) }
                reachedOlder = found.first.map { $0.seq <= seq + 1 } ?? false
                if reachedOlder || from == 0 { break }
                window *= 8
            }
            newestFirst.append(found.filter { $0.seq > seq })
            if reachedOlder { break }
        }
        return newestFirst.reversed().flatMap { $0 }
    }

    /// Ends one subscription.
    func unsubscribe(_ id: UInt64) {
        subscribers.removeValue(forKey: id)?.channel.finish()
    }

    /// Ends every subscription and closes the file.
    func close() {
        flushHeld(force: true)
        if !unwritten.isEmpty {
            logger.error("event log: \(unwritten.count) event(s), seq \(unwritten.first?.seq ?? 0)–\(unwritten.last?.seq ?? 0), could not be written to \(path) before the host stopped (\(lastError.map { "\($0)" } ?? "a write failed")): they are lost")
        }
        batchDepth = 0
        closed = true
        for (_, sub) in subscribers { sub.channel.finish() }
        subscribers.removeAll()
        try? descriptor?.close()
        descriptor = nil
    }

    // MARK: - Files

    private static func open(_ path: String) throws(EventLogError) -> FileDescriptor {
        do {
            let fd = try FileDescriptor.open(FilePath(path), .readWrite, options: [.append, .create, .closeOnExec],
                                             permissions: [.ownerReadWrite])
            // 0600 whatever the umask (and for a file an older host made with its own).
            _ = fchmod(fd.rawValue, 0o600)
            return fd
        } catch {
            throw EventLogError(path: path, operation: "open", code: (error as? Errno)?.rawValue ?? EIO)
        }
    }

    private static func size(_ fd: FileDescriptor, _ path: String) throws(EventLogError) -> Int64 {
        var st = stat()
        guard fstat(fd.rawValue, &st) == 0 else { throw EventLogError(path: path, operation: "stat", code: errno) }
        return Int64(st.st_size)
    }

    /// Reads `count` bytes at `offset` (fewer at end of file).
    static func read(_ fd: FileDescriptor, at offset: Int64, count: Int) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = buffer.withUnsafeMutableBytes { raw in
                pread(fd.rawValue, raw.baseAddress! + got, count - got, off_t(offset) + off_t(got))
            }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            got += n
        }
        buffer.removeSubrange(got...)
        return buffer
    }

    /// Where the last whole line of a file of `size` bytes ends (0 if it has none),
    /// reading backwards in chunks.
    static func wholeLinesEnd(_ fd: FileDescriptor, size: Int64) throws(EventLogError) -> Int64 {
        var upTo = size
        let chunk: Int64 = 64 << 10
        while upTo > 0 {
            let from = max(0, upTo - chunk)
            let bytes = read(fd, at: from, count: Int(upTo - from))
            if let i = bytes.lastIndex(of: 0x0a) { return from + Int64(i) + 1 }
            upTo = from
        }
        return 0
    }

    /// The last event that parses in the first `end` bytes, reading at most a few MiB
    /// from the end (a file that ends in that much garbage starts numbering again).
    static func lastEvent(_ fd: FileDescriptor, end: Int64) -> HostEvent? {
        let decoder = WireJSON.decoder()
        for window: Int64 in [64 << 10, 2 << 20, 8 << 20] {
            let from = max(0, end - window)
            let bytes = read(fd, at: from, count: Int(end - from))
            var lines = bytes.split(separator: 0x0a, omittingEmptySubsequences: true)
            // A line cut by the window's start is not whole.
            if from > 0, !lines.isEmpty, bytes.first != 0x0a { lines.removeFirst() }
            for line in lines.reversed() {
                if let event = try? decoder.decode(HostEvent.self, from: Data(line)) { return event }
            }
            if from == 0 { break }
        }
        return nil
    }
}

/// The events recorded before a subscription: the log files as they were then (kept
/// open, so a rotation does not change them), read lazily in chunks of 256 KiB. Lines
/// that do not parse are skipped. Iterating does blocking file reads: do it off the
/// supervisor's actor.
public final class EventLogPast: Sequence, Sendable {
    private let files: [(descriptor: FileDescriptor, end: Int64, plan: EventLogIndex.Plan)]
    private let filter: BundleID?
    /// The sequence number of the last event recorded when the subscription began.
    public let lastSeq: UInt64

    init(files: [(FileDescriptor, Int64, EventLogIndex.Plan)], filter: BundleID?, lastSeq: UInt64) {
        self.files = files.map { (descriptor: $0.0, end: $0.1, plan: $0.2) }
        self.filter = filter
        self.lastSeq = lastSeq
    }

    deinit {
        for f in files { try? f.descriptor.close() }
    }

    /// The first event (of the filtered app).
    public var first: HostEvent? {
        var iterator = makeIterator()
        return iterator.next()
    }

    /// The last event (of the filtered app); reads everything.
    public var last: HostEvent? {
        var last: HostEvent?
        for e in self { last = e }
        return last
    }

    /// The last event that matches; reads everything.
    public func last(where predicate: (HostEvent) throws -> Bool) rethrows -> HostEvent? {
        var last: HostEvent?
        for e in self where try predicate(e) { last = e }
        return last
    }

    /// Reads the files from the start, oldest first.
    public func makeIterator() -> Iterator { Iterator(past: self) }

    /// Reads one chunk at a time and decodes the lines in it.
    public struct Iterator: IteratorProtocol {
        static let chunk = 256 << 10
        private let past: EventLogPast
        private let decoder = WireJSON.decoder()
        /// `"bundleIdentifier":"<id>"`: lines without it are not decoded.
        private let needle: [UInt8]?
        private var file = 0
        private var offset: Int64 = 0
        private var buffer: [UInt8] = []
        private var position = 0
        private var skippingLongLine = false
        /// The next of an indexed file's offsets, and the reader for them.
        private var lineCursor = 0
        private var lines = LineReader()

        init(past: EventLogPast) {
            self.past = past
            if let filter = past.filter, let id = try? WireJSON.encoder().encode(filter) {
                needle = Array("\"bundleIdentifier\":".utf8) + Array(id)
            } else {
                needle = nil
            }
        }

        /// The next event (of the filtered app), reading the next chunk when needed.
        public mutating func next() -> HostEvent? {
            while true {
                if let newline = buffer[position...].firstIndex(of: 0x0a) {
                    let line = buffer[position..<newline]
                    position = newline + 1
                    if skippingLongLine || line.count > EventLog.maximumLine {
                        skippingLongLine = false
                        continue
                    }
                    if let event = decode(line) { return event }
                    continue
                }
                // No whole line buffered: keep the partial one and read on.
                buffer.removeSubrange(..<position)
                position = 0
                if buffer.count > EventLog.maximumLine {
                    buffer.removeAll()
                    skippingLongLine = true
                }
                guard file < past.files.count else { return nil }
                let (fd, fileEnd, plan) = past.files[file]
                var end = fileEnd
                if case .indexed(let scanTo, let offsets) = plan {
                    end = Swift.min(scanTo, fileEnd)
                    // Past the part an earlier host wrote: the app's own lines, by offset.
                    if offset >= end, lineCursor < offsets.count {
                        let at = offsets[lineCursor]
                        lineCursor += 1
                        if let line = lines.line(fd, at: at, end: fileEnd), let event = decode(line) { return event }
                        continue
                    }
                }
                if offset >= end {
                    file += 1
                    offset = 0
                    lineCursor = 0
                    lines = LineReader()
                    buffer.removeAll()
                    skippingLongLine = false
                    continue
                }
                let bytes = EventLog.read(fd, at: offset, count: Int(Swift.min(Int64(Self.chunk), end - offset)))
                if bytes.isEmpty {
                    offset = end
                    continue
                }
                offset += Int64(bytes.count)
                buffer += bytes
            }
        }

        private func decode(_ line: ArraySlice<UInt8>) -> HostEvent? {
            if let needle, !contains(line, needle) { return nil }
            guard let event = try? decoder.decode(HostEvent.self, from: Data(line)) else { return nil }
            if let filter = past.filter, event.bundleIdentifier != filter { return nil }
            return event
        }

        private func contains(_ line: ArraySlice<UInt8>, _ needle: [UInt8]) -> Bool {
            guard let first = needle.first, line.count >= needle.count else { return false }
            var i = line.startIndex
            let last = line.endIndex - needle.count
            while i <= last {
                if line[i] == first, line[i..<(i + needle.count)].elementsEqual(needle) { return true }
                i += 1
            }
            return false
        }
    }
}

/// Readable one-line rendering of events for terminals.
public enum EventFormatter {
    /// `21:35:06.123  com.example.plain  inactive → background  (home button)`.
    public static func line(_ e: HostEvent) -> String {
        // The time of day of `Timestamp.format`, which rounds to the millisecond as every
        // other AppHost output does (`status`'s since): Foundation's style truncates, and a
        // time read back from the log (.123 as 0.12299…) printed a millisecond early.
        let time = String(Timestamp.format(e.time).dropFirst(11).prefix(12))
        let app = e.bundleIdentifier?.rawValue ?? "host"
        let pid = e.pid.map { "[\($0)]" } ?? ""
        switch e.kind {
        case .transition:
            let from = e.from?.rawValue ?? "?"
            let to = e.to?.rawValue ?? "?"
            return "\(time)  \(app)\(pid)  \(from) → \(to)  (\(e.cause))"
        case .memory:
            var extra: [String] = []
            if let f = e.footprint { extra.append("footprint \(ByteCountText.format(f))") }
            if let b = e.band { extra.append("band \(b)") }
            return "\(time)  \(app)\(pid)  memory: \(e.cause)" + (extra.isEmpty ? "" : " [\(extra.joined(separator: ", "))]")
        default:
            return "\(time)  \(app)\(pid)  \(e.kind.rawValue): \(e.cause)"
        }
    }
}

/// Writes that failed, counted from any thread (the database reports on its own queue).
final class RecordingFailures: Sendable {
    private let state = Mutex<(count: UInt64, last: String?)>((0, nil))

    func note(_ error: String) {
        state.withLock { $0.count += 1; $0.last = error }
    }

    var count: UInt64 { state.withLock { $0.count } }
    var last: String? { state.withLock { $0.last } }
}
