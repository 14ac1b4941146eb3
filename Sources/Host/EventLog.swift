import AppHostProtocol
import Foundation

/// `events.jsonl`: every host event, one JSON object a line, plus live subscribers.
/// Owned by the ``Supervisor`` actor (not thread-safe on its own).
final class EventLog {
    private let path: String
    private var handle: FileHandle?
    private(set) var lastSeq: UInt64
    private var subscribers: [UInt64: (filter: String?, continuation: AsyncStream<HostEvent>.Continuation)] = [:]
    private var nextSubscriber: UInt64 = 0
    private let encoder = WireJSON.encoder()
    /// The newest events in memory, so `events` does not re-read the file.
    private var recent: [HostEvent] = []
    /// Whether `recent` holds every event of the file (else older ones are read from it).
    private var recentIsComplete = true
    /// How many events are kept in memory.
    static let memoryLimit = 20_000

    init(path: String) {
        self.path = path
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil)
        }
        let existing = Self.read(path: path)
        lastSeq = existing.last?.seq ?? 0
        recent = Array(existing.suffix(Self.memoryLimit))
        recentIsComplete = existing.count <= Self.memoryLimit
        handle = FileHandle(forWritingAtPath: path)
        _ = try? handle?.seekToEnd()
    }

    /// Appends an event, writes it to the file and hands it to subscribers.
    @discardableResult
    func append(_ kind: HostEvent.Kind, app: String? = nil, pid: Int32? = nil, from: AppState? = nil,
                to: AppState? = nil, cause: String, mode: String? = nil, time: Date) -> HostEvent {
        lastSeq += 1
        let event = HostEvent(seq: lastSeq, time: time, kind: kind, bundleIdentifier: app, pid: pid,
                              from: from, to: to, cause: cause, mode: mode)
        if let data = try? encoder.encode(event) {
            // The throwing API: the old `write(_:)` traps on I/O errors.
            try? handle?.write(contentsOf: data + Data([0x0a]))
        }
        recent.append(event)
        if recent.count > Self.memoryLimit + Self.memoryLimit / 4 {
            recent.removeFirst(recent.count - Self.memoryLimit)
            recentIsComplete = false
        }
        for (_, sub) in subscribers where sub.filter == nil || sub.filter == app {
            sub.continuation.yield(event)
        }
        return event
    }

    /// Events recorded so far (from the file) and, atomically with that read, a
    /// stream of every later event. The stream ends when `cancel` is called or the log closes.
    func subscribe(filter: String?) -> (past: [HostEvent], live: AsyncStream<HostEvent>, id: UInt64) {
        let all = recentIsComplete ? recent : Self.read(path: path)
        let past = all.filter { filter == nil || $0.bundleIdentifier == filter }
        let (stream, continuation) = AsyncStream<HostEvent>.makeStream(bufferingPolicy: .bufferingNewest(10_000))
        nextSubscriber += 1
        subscribers[nextSubscriber] = (filter, continuation)
        return (past, stream, nextSubscriber)
    }

    /// Ends one subscription.
    func unsubscribe(_ id: UInt64) {
        subscribers.removeValue(forKey: id)?.continuation.finish()
    }

    /// Ends every subscription and closes the file.
    func close() {
        for (_, sub) in subscribers { sub.continuation.finish() }
        subscribers.removeAll()
        try? handle?.close()
        handle = nil
    }

    /// Parses an events file; lines that do not parse (a torn last line) are skipped.
    static func read(path: String) -> [HostEvent] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        let decoder = WireJSON.decoder()
        return data.split(separator: 0x0a).compactMap { try? decoder.decode(HostEvent.self, from: Data($0)) }
    }
}

/// Readable one-line rendering of events for terminals.
public enum EventFormatter {
    /// `21:35:06.123  com.example.plain  inactive → background  (home button)`.
    public static func line(_ e: HostEvent) -> String {
        let time = e.time.formatted(.iso8601.time(includingFractionalSeconds: true).timeSeparator(.colon))
        let app = e.bundleIdentifier ?? "host"
        let pid = e.pid.map { "[\($0)]" } ?? ""
        switch e.kind {
        case .transition:
            let from = e.from?.rawValue ?? "?"
            let to = e.to?.rawValue ?? "?"
            return "\(time)  \(app)\(pid)  \(from) → \(to)  (\(e.cause))"
        default:
            return "\(time)  \(app)\(pid)  \(e.kind.rawValue): \(e.cause)"
        }
    }
}
