import AppHostProtocol
import Foundation
import Logging
import Testing
import TestSupport
@testable import Host

/// One app's events read by offset instead of the whole log (issue 17).
@Suite struct EventLogIndexTests {
    let logger = Logger(label: "test")
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    /// Every event of `app` the log holds, the way `events <id>` reads them.
    func past(_ log: EventLog, _ app: BundleID?) -> [HostEvent] {
        let (past, _, sub) = log.subscribe(filter: app)
        log.unsubscribe(sub)
        return Array(past)
    }

    /// What reading every line and keeping `app`'s gives (the reference).
    func scanned(_ log: EventLog, _ app: BundleID) -> [UInt64] {
        past(log, nil).filter { $0.bundleIdentifier == app }.map(\.seq)
    }

    @Test func anIndexedLogGivesOneAppsEventsAsAFullReadDoes() throws {
        let dir = try TempDir("evidx")
        defer { dir.remove() }
        // Small files: the 3,000 events rotate many times, and the oldest go.
        let log = try EventLog(path: dir.path + "/events.jsonl", limits: EventLogLimits(rotateAt: 64 << 10, keep: 2), logger: logger)
        for i in 0..<3000 {
            if i % 7 == 0 { log.beginBatch() }
            _ = log.append(.service, app: i % 10 == 0 ? nil : "com.app.\(i % 10)", cause: "event \(i)", time: t0)
            if i % 7 == 6 { log.endBatch() }
        }
        log.endBatch()
        #expect(log.index.count > 0)
        for app: BundleID in ["com.app.3", "com.app.9"] {
            let read = past(log, app)
            #expect(!read.isEmpty)
            #expect(read.allSatisfy { $0.bundleIdentifier == app })
            #expect(read.map(\.seq) == scanned(log, app))
        }
        #expect(past(log, "com.app.none").isEmpty)
        // The current file is indexed from its start: no line of it is read for another app.
        if case .indexed(let scanTo, let offsets) = log.index.plan(app: "com.app.3", rotated: 0) {
            #expect(scanTo == 0)
            #expect(!offsets.isEmpty)
        } else {
            Issue.record("the current file is not indexed")
        }
    }

    @Test func whatAnEarlierHostWroteIsReadWholeAndWhatThisOneWroteByOffset() throws {
        let dir = try TempDir("evidx2")
        defer { dir.remove() }
        let path = dir.path + "/events.jsonl"
        do {
            let earlier = try EventLog(path: path, logger: logger)
            for i in 0..<50 { _ = earlier.append(.service, app: "com.app.\(i % 3)", cause: "before \(i)", time: t0) }
            earlier.close()
        }
        let log = try EventLog(path: path, logger: logger)
        for i in 0..<50 { _ = log.append(.service, app: "com.app.\(i % 3)", cause: "after \(i)", time: t0) }
        guard case .indexed(let scanTo, let offsets) = log.index.plan(app: "com.app.1", rotated: 0) else {
            Issue.record("not indexed")
            return
        }
        #expect(scanTo > 0, "the earlier host's part is scanned")
        #expect(offsets.count == 17)
        let read = past(log, "com.app.1")
        #expect(read.count == 34)
        #expect(read.map(\.seq) == scanned(log, "com.app.1"))
        #expect(read.first?.cause == "before 1" && read.last?.cause == "after 49")
    }

    @Test func pastItsBoundTheIndexLetsTheOldestFilesGoAndTheyAreReadWhole() throws {
        var index = EventLogIndex()
        index.limit = 10
        index.opened(existingBytes: 0)
        for i in 0..<8 { index.add(app: "a", at: Int64(i * 100)) }
        index.rotated(keep: 3)
        for i in 0..<8 { index.add(app: "a", at: Int64(i * 100)) }
        #expect(index.count <= 10)
        #expect(index.plan(app: "a", rotated: 1) == .whole, "the older file's entries went first")
        #expect(index.plan(app: "a", rotated: 0) == .indexed(scanTo: 0, offsets: (0..<8).map { Int64($0 * 100) }))
        // The current file alone past the bound: read whole until the next rotation.
        for i in 8..<20 { index.add(app: "a", at: Int64(i * 100)) }
        #expect(index.count == 0)
        #expect(index.plan(app: "a", rotated: 0) == .whole)
        index.add(app: "a", at: 5000)
        #expect(index.count == 0, "not indexed again until the next file")
        index.rotated(keep: 3)
        index.add(app: "a", at: 0)
        #expect(index.plan(app: "a", rotated: 0) == .indexed(scanTo: 0, offsets: [0]))
    }

    @Test func filesPastTheKeptOnesLeaveTheIndexAndAFailedRotationForgetsIt() {
        var index = EventLogIndex()
        index.opened(existingBytes: 10)
        index.add(app: "a", at: 10)
        index.add(app: nil, at: 20)
        #expect(index.count == 1, "the host's own lines are not indexed")
        index.rotated(keep: 1)
        index.add(app: "a", at: 0)
        index.rotated(keep: 1)
        #expect(index.plan(app: "a", rotated: 2) == .whole, "gone with its file")
        #expect(index.plan(app: "a", rotated: 1) == .indexed(scanTo: 0, offsets: [0]))
        index.forget()
        #expect(index.plan(app: "a", rotated: 1) == .whole)
        #expect(index.plan(app: "a", rotated: 0) == .whole)
    }
}
