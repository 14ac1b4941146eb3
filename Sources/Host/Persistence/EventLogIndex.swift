import AppHostProtocol
import Foundation
import SystemPackage

/// Where each app's lines are in the event-log files this host wrote, so that one app's
/// events are read without reading everyone's: at 1,000 apps `events <id>` read the
/// whole log (up to four files of 64 MiB) for each request (issue 17).
///
/// An entry is a line's file generation and offset (16 bytes). Lines written before the
/// host started are not indexed: those files, and the part of the current file an
/// earlier host wrote, are read whole, as before. Bounded: past ``limit`` entries the
/// oldest files' entries go first (those files are read whole again), then the current
/// file's, until its next rotation. A failed rotation forgets everything (the files are
/// then not where the index thinks).
struct EventLogIndex {
    /// 262,144 entries: 4 MiB.
    static let defaultLimit = 262_144

    struct Entry: Equatable {
        var generation: Int64
        var offset: Int64
    }

    /// How to read one file for one app.
    enum Plan: Sendable, Equatable {
        /// Every line (not indexed).
        case whole
        /// The lines before `scanTo` (not indexed), then the lines at `offsets`.
        case indexed(scanTo: Int64, offsets: [Int64])
    }

    var limit = EventLogIndex.defaultLimit
    /// The current file's generation; `events.<k>.jsonl` is `generation - k`.
    private(set) var generation: Int64 = 0
    /// Per indexed generation: the offset from which every line of it is indexed.
    private(set) var indexedFrom: [Int64: Int64] = [:]
    private var lines: [BundleID: [Entry]] = [:]
    private(set) var count = 0

    /// The current file had `existingBytes` when the host opened it.
    mutating func opened(existingBytes: Int64) {
        indexedFrom[generation] = existingBytes
    }

    /// A line of `app`'s (nil: the host's own, not indexed) was written at `offset` of
    /// the current file.
    mutating func add(app: BundleID?, at offset: Int64) {
        guard let app, indexedFrom[generation] != nil else { return }
        lines[app, default: []].append(Entry(generation: generation, offset: offset))
        count += 1
        if count > limit { shed() }
    }

    /// The current file became `events.1.jsonl`; files past `keep` are gone.
    mutating func rotated(keep: Int) {
        generation += 1
        indexedFrom[generation] = 0
        for old in indexedFrom.keys where old < generation - Int64(keep) { drop(old) }
    }

    /// A rotation failed part way: nothing is indexed until the next one succeeds.
    mutating func forget() {
        indexedFrom.removeAll()
        lines.removeAll()
        count = 0
    }

    /// How to read `events.<k>.jsonl` (k = 0: `events.jsonl`) for `app`.
    func plan(app: BundleID, rotated k: Int) -> Plan {
        let g = generation - Int64(k)
        guard let from = indexedFrom[g] else { return .whole }
        return .indexed(scanTo: from, offsets: (lines[app] ?? []).lazy.filter { $0.generation == g }.map(\.offset))
    }

    private mutating func shed() {
        while count > limit, let oldest = indexedFrom.keys.min(), oldest < generation { drop(oldest) }
        if count > limit { drop(generation) }
    }

    private mutating func drop(_ g: Int64) {
        indexedFrom[g] = nil
        var kept: [BundleID: [Entry]] = [:]
        var n = 0
        for (app, list) in lines {
            let rest = list.filter { $0.generation != g }
            if !rest.isEmpty {
                kept[app] = rest
                n += rest.count
            }
        }
        lines = kept
        count = n
    }
}

/// Reads whole lines at given offsets of a file, through a window of up to 64 KiB, so
/// that nearby lines cost one read.
struct LineReader {
    private var window: [UInt8] = []
    private var windowStart: Int64 = 0

    /// The line starting at `offset` (without its newline), or nil past `end` or when no
    /// newline comes within ``EventLog/maximumLine`` bytes.
    mutating func line(_ fd: FileDescriptor, at offset: Int64, end: Int64) -> ArraySlice<UInt8>? {
        guard offset >= 0, offset < end else { return nil }
        if offset >= windowStart, offset < windowStart + Int64(window.count),
           let nl = window[Int(offset - windowStart)...].firstIndex(of: 0x0a) {
            return window[Int(offset - windowStart)..<nl]
        }
        var size = 64 << 10
        while true {
            let count = Int(min(Int64(size), end - offset))
            window = EventLog.read(fd, at: offset, count: count)
            windowStart = offset
            if let nl = window.firstIndex(of: 0x0a) { return window[0..<nl] }
            if count < size || size >= EventLog.maximumLine { return nil }
            size = min(size * 4, EventLog.maximumLine)
        }
    }
}
