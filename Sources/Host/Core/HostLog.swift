import AppHostProtocol
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Host time for the host's own log on a virtual-clock host: the supervisor publishes
/// its clock here (at start and at every step of `clock advance`) and every log line
/// shows it beside the wall clock, so a line can be matched with the event log (whose
/// times are host times).
public final class HostLogClock: Sendable {
    private let reading = Mutex<(start: Date, elapsed: Duration)?>(nil)

    public init() {}

    /// Host time is `elapsed` since the host started at `start` (a virtual date).
    public func set(start: Date, elapsed: Duration) {
        reading.withLock { $0 = (start, elapsed) }
    }

    /// `+31.000s 2026-01-01T00:00:31.000Z`, or nil before the host published its clock.
    public func text() -> String? {
        guard let (start, elapsed) = reading.withLock({ $0 }) else { return nil }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return String(format: "+%.3fs ", seconds) + Timestamp.format(start.addingTimeInterval(seconds))
    }
}

/// The host's own log file, `host.log` in the state directory, bounded: past
/// ``maximumSize`` bytes it becomes `host.1.log` (older ones move up to `host.<keep>.log`,
/// the oldest is dropped), as `events.jsonl` is rotated. A line longer than
/// ``maximumLineLength`` is cut. Writes come from any thread; one lock orders them.
public final class HostLogFile: Sendable {
    /// 16 MiB per file.
    public static let defaultMaximumSize = 16 << 20
    /// `host.1.log` … `host.3.log` are kept.
    public static let defaultKept = 3
    /// A longer line is cut (and says so).
    public static let maximumLineLength = 16 << 10

    /// The file's name in the state directory.
    public static let fileName = "host.log"

    public let path: String
    public let maximumSize: Int
    public let kept: Int
    private let state: Mutex<(fd: Int32, size: Int)>

    /// Opens (creating, mode 0600) `path` for appending.
    public init(path: String, maximumSize: Int = defaultMaximumSize, kept: Int = defaultKept) throws(HostLogError) {
        self.path = path
        self.maximumSize = max(1024, maximumSize)
        self.kept = max(1, kept)
        let fd = Self.open(path)
        guard fd >= 0 else { throw HostLogError(description: "cannot open \(path): \(String(cString: strerror(errno)))") }
        var info = stat()
        let size = fstat(fd, &info) == 0 ? Int(info.st_size) : 0
        state = Mutex((fd, size))
    }

    deinit {
        state.withLock { if $0.fd >= 0 { close($0.fd) } }
    }

    private static func open(_ path: String) -> Int32 {
        let fd = Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        if fd >= 0 { _ = fchmod(fd, 0o600) }
        return fd
    }

    /// The path of the `n`th older file (`host.1.log`).
    public func rotatedPath(_ n: Int) -> String {
        let base = (path as NSString).deletingPathExtension
        return base + ".\(n).log"
    }

    /// Appends one line (a newline is added), rotating first if it would not fit.
    public func write(_ line: String) {
        var bytes = Array(line.utf8)
        if bytes.count > Self.maximumLineLength {
            bytes = Array(bytes.prefix(Self.maximumLineLength)) + Array(" … (cut: \(bytes.count) bytes)".utf8)
        }
        bytes.append(0x0A)
        state.withLock { s in
            if s.size > 0, s.size + bytes.count > maximumSize {
                rotate(&s)
            }
            guard s.fd >= 0 else { return }
            let n = bytes.withUnsafeBytes { Glibc.write(s.fd, $0.baseAddress, $0.count) }
            if n > 0 { s.size += n }
        }
    }

    private func rotate(_ s: inout (fd: Int32, size: Int)) {
        if s.fd >= 0 { close(s.fd) }
        unlink(rotatedPath(kept))
        for n in stride(from: kept - 1, through: 1, by: -1) {
            rename(rotatedPath(n), rotatedPath(n + 1))
        }
        rename(path, rotatedPath(1))
        s.fd = Self.open(path)
        s.size = 0
    }
}

/// Why the host's log cannot be set up.
public struct HostLogError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

/// The host's log handler: each line to standard error and to the state directory's
/// ``HostLogFile``, stamped with the wall clock to the millisecond (local time, as
/// swift-log's `StreamLogHandler`) and, on a virtual-clock host, with host time.
public struct HostLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let file: HostLogFile?
    private let clock: HostLogClock?
    private let standardError: Bool

    public init(label: String, level: Logger.Level, file: HostLogFile?, clock: HostLogClock?, standardError: Bool = true,
                metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.logLevel = level
        self.file = file
        self.clock = clock
        self.standardError = standardError
        self.metadataProvider = metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
        if let explicit = event.metadata { all.merge(explicit) { $1 } }
        if let error = event.error { all["error.message"] = "\(error)" }
        let line = Self.line(wall: Date(), host: clock?.text(), level: event.level, label: label,
                             metadata: all, source: event.source, message: "\(event.message)")
        if standardError {
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
        file?.write(line)
    }

    /// `2026-03-01T10:15:42.123+0100 (host +31.000s 2026-01-01T00:00:31.000Z) info apphost.daemon: k=v [Host] message`.
    public static func line(wall: Date, host: String?, level: Logger.Level, label: String, metadata: Logger.Metadata,
                            source: String, message: String) -> String {
        var out = wallTimestamp(wall)
        if let host { out += " (host \(host))" }
        out += " \(level) \(label):"
        if !metadata.isEmpty {
            out += " " + metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        }
        return out + " [\(source)] \(message)"
    }

    /// Local time with milliseconds and the UTC offset: `2026-03-01T10:15:42.123+0100`.
    public static func wallTimestamp(_ date: Date) -> String {
        // Rounded to the millisecond first, as ``Timestamp/format(_:)`` does (a date is a
        // double a hair below its milliseconds).
        let totalMillis = Int64((date.timeIntervalSince1970 * 1000).rounded())
        var seconds = time_t(totalMillis >= 0 ? totalMillis / 1000 : -((-totalMillis + 999) / 1000))
        let millis = Int(totalMillis - Int64(seconds) * 1000)
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return Timestamp.format(date) }
        var head = [CChar](repeating: 0, count: 64)
        var zone = [CChar](repeating: 0, count: 16)
        strftime(&head, head.count, "%Y-%m-%dT%H:%M:%S", &parts)
        strftime(&zone, zone.count, "%z", &parts)
        let ms = String(millis)
        return String(cString: head) + "." + String(repeating: "0", count: 3 - ms.count) + ms + String(cString: zone)
    }
}

extension Logger.Level {
    /// `APPHOST_LOG_LEVEL` (or any setting naming a level): the level, or an error that
    /// lists them.
    public static func named(_ text: String, setting: String) throws(HostLogError) -> Logger.Level {
        if let level = Logger.Level(rawValue: text.lowercased()) { return level }
        let names = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
        throw HostLogError(description: "\(setting)=\"\(text)\" is not a log level: one of \(names)")
    }
}
