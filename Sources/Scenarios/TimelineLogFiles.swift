import AppHostProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A host's event log read from its files, as `apphost timeline` draws it: the daemon
/// need not run (the files are read as they are; a line still being written is skipped).
public struct TimelineLogFiles: Sendable {
    /// The events read (of the apps asked for), oldest first; at most `keepLast` of them.
    public var events: [HostEvent]
    /// Events of the apps asked for that were read but not kept (older than the kept ones).
    public var dropped: Int
    /// Every bundle identifier the log names, in order of first appearance.
    public var bundleIdentifiers: [BundleID]
    /// Lines that were not events (cut, too long, or not JSON), skipped.
    public var skippedLines: Int
    /// The files read, oldest first.
    public var files: [String]

    /// Longer lines are skipped (the host writes none).
    public static let maximumLine = 1 << 20

    /// Why the log could not be read.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        /// What could not be read and what to do (`no event log in DIR ...: ... --state-dir`).
        public let description: String
    }

    /// Reads `<stateDirectory>/events.<n>.jsonl` (the rotated ones, oldest first), then
    /// `events.jsonl`, keeping the events of `apps` (all when nil), at most the last
    /// `keepLast` of them.
    public static func read(stateDirectory: String, apps: Set<BundleID>? = nil, keepLast: Int = 200_000) throws(Failure) -> TimelineLogFiles {
        let files = logFiles(stateDirectory)
        guard !files.isEmpty else {
            throw Failure(description: "no event log in \(stateDirectory) (expected \(stateDirectory)/events.jsonl): "
                + "is it a host's state directory? Give it with --state-dir (a host started with `apphost daemon --state-dir DIR` writes one)")
        }
        var out = TimelineLogFiles(events: [], dropped: 0, bundleIdentifiers: [], skippedLines: 0, files: files)
        var seen = Set<BundleID>()
        let keep = max(1, keepLast)
        let decoder = WireJSON.decoder()
        for file in files {
            try eachLine(file) { line in
                guard let line, let e = try? decoder.decode(HostEvent.self, from: line) else {
                    out.skippedLines += 1
                    return
                }
                if let id = e.bundleIdentifier, seen.insert(id).inserted { out.bundleIdentifiers.append(id) }
                if let apps, !(e.bundleIdentifier.map(apps.contains) ?? false) { return }
                out.events.append(e)
                if out.events.count >= 2 * keep {
                    out.dropped += out.events.count - keep
                    out.events.removeFirst(out.events.count - keep)
                }
            }
        }
        if out.events.count > keep {
            out.dropped += out.events.count - keep
            out.events.removeFirst(out.events.count - keep)
        }
        return out
    }

    /// The termination reports in `<stateDirectory>/reports` of `apps`: each
    /// `<bundle id>-<ms>-<pid>.json` the host wrote, at most `limit` of them (the latest by
    /// name), unreadable ones skipped (a report only adds the termination code to a mark).
    public static func reports(stateDirectory: String, apps: Set<BundleID>, limit: Int = 5_000) -> [TerminationReport] {
        let directory = stateDirectory + "/reports"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        let wanted = names.filter { name in
            name.hasSuffix(".json") && apps.contains { name.hasPrefix($0.rawValue + "-") }
        }.sorted().suffix(limit)
        let decoder = WireJSON.decoder()
        return wanted.compactMap { name in
            let path = directory + "/" + name
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
                  (attributes[.size] as? NSNumber)?.intValue ?? Int.max <= maximumLine,
                  let data = FileManager.default.contents(atPath: path),
                  let report = try? decoder.decode(TerminationReport.self, from: data),
                  apps.contains(report.bundleIdentifier) else { return nil }
            return report
        }
    }

    /// `events.<n>.jsonl` by decreasing n, then `events.jsonl`: the ones that exist.
    static func logFiles(_ directory: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        let rotated = names.compactMap { name -> (Int, String)? in
            guard name.hasPrefix("events."), name.hasSuffix(".jsonl") else { return nil }
            let middle = name.dropFirst("events.".count).dropLast(".jsonl".count)
            guard let n = Int(middle), n > 0, String(n) == middle else { return nil }
            return (n, directory + "/" + name)
        }.sorted { $0.0 > $1.0 }.map(\.1)
        let current = directory + "/events.jsonl"
        return rotated + (FileManager.default.fileExists(atPath: current) ? [current] : [])
    }

    /// Calls `body` with each line of `path` (nil for a line too long to read), reading
    /// 1 MiB at a time. A last line without its newline is a write in progress: skipped.
    static func eachLine(_ path: String, _ body: (Data?) -> Void) throws(Failure) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(description: "cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var skipping = false
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(description: "cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { return }
            buffer += chunk[0..<n]
            var start = 0
            while let newline = buffer[start...].firstIndex(of: 0x0a) {
                if skipping {
                    skipping = false
                    body(nil)
                } else if newline > start {
                    body(newline - start > maximumLine ? nil : Data(buffer[start..<newline]))
                }
                start = newline + 1
            }
            buffer.removeSubrange(0..<start)
            if buffer.count > maximumLine {
                buffer.removeAll()
                skipping = true
            }
        }
    }
}
