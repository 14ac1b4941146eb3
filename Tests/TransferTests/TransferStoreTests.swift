import AppHostProtocol
import Foundation
import TestSupport
import GRDB
import Testing
@testable import TransferCore

/// The daemon's database: states written as strings (by this build or an older one)
/// read back as ``TransferState``.
@Suite struct TransferStoreTests {
    private func job(_ id: UInt64) -> TransferJob {
        TransferJob(id: TransferID(id), bundleIdentifier: "com.example.a", session: "s", taskIdentifier: TransferTaskID(Int(id)), kind: .download,
                    url: "https://example.com/\(id)", destination: "/tmp/\(id)", created: 0)
    }

    @Test func writesTheRawStrings() throws {
        let dir = try TempDir("transferstore")
        defer { dir.remove() }
        let path = dir.path + "/t.sqlite"
        let store = try TransferStore(path: path)
        #expect(try store.insert(job(1)))
        #expect(try store.insert(job(2)))
        try store.setState(id: 1, state: .waiting, attempts: 1, nextAttempt: 5)
        try store.finish(id: 2, outcome: .cancelled)
        let states = try store.withConnection { db in
            try String.fetchAll(db, sql: "SELECT state FROM transfer ORDER BY id")
        }
        #expect(states == ["waiting", "finished"])
        try store.delete(id: 2)
        #expect(try store.loadAll().map(\.job.id) == [1])
    }

    /// Rows as a daemon left them, an unknown state among them: nothing throws, finished
    /// stays finished, the rest is queued again.
    @Test func oldAndUnknownStatesLoad() throws {
        let dir = try TempDir("transferstore")
        defer { dir.remove() }
        let path = dir.path + "/t.sqlite"
        let store = try TransferStore(path: path)
        let stored = ["queued", "waiting", "running", "finished", "paused-by-a-newer-daemon"]
        for id in 1...UInt64(stored.count) { #expect(try store.insert(job(id))) }
        try store.withConnection { db in
            for (i, state) in stored.enumerated() {
                try db.execute(sql: "UPDATE transfer SET state = ? WHERE id = ?", arguments: [state, i + 1])
            }
        }
        let loaded = try store.loadAll()
        #expect(loaded.map(\.state) == [.queued, .queued, .queued, .finished, .queued])
    }

    /// The daemon's database is its own: exclusive locking, the WAL index in memory (no
    /// `-shm` file), and another connection cannot take it meanwhile.
    @Test func theDatabaseIsHeldByTheStoreAlone() throws {
        let dir = try TempDir("transferstore")
        defer { dir.remove() }
        let path = dir.path + "/t.sqlite"
        let store = try TransferStore(path: path)
        #expect(try store.insert(job(1)))
        let mode = try store.withConnection { db in try String.fetchOne(db, sql: "PRAGMA locking_mode") }
        #expect(mode == "exclusive")
        let journal = try store.withConnection { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(journal == "wal")
        #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
        var other = Configuration()
        other.busyMode = .immediateError
        #expect(throws: DatabaseError.self) {
            try DatabaseQueue(path: path, configuration: other).read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM transfer") }
        }
        #expect(try store.loadAll().map(\.job.id) == [1], "the store goes on")
    }
}
