import AppHostProtocol
import Foundation
import GRDB

/// One row of the daemon's queue as stored in `transfers.sqlite`.
struct StoredTransfer: Sendable {
    var job: TransferJob
    /// As the daemon resumes it: finished, or queued (see ``TransferState/init(restoring:)``).
    var state: TransferState
    var bytesDone: Int64
    var bytesExpected: Int64?
    var etag: String?
    var lastModified: String?
    var attempts: Int
    var nextAttempt: Double
    var outcome: TransferOutcome?
}

/// Where a download can resume from.
struct ResumePoint: Sendable {
    var bytesDone: Int64 = 0
    var bytesExpected: Int64?
    var etag: String?
    var lastModified: String?
}

/// The daemon's durable queue (GRDB, WAL). Every write is committed before the
/// daemon reports it to the host.
///
/// One connection, in SQLite's exclusive locking mode: the database is the daemon's
/// alone (the host speaks to the daemon, never to its file), so the connection takes
/// its locks once and keeps them, and the WAL index lives in its memory, not in a
/// shared `-shm` mapping. In the normal mode every transaction took and released its
/// locks with six `fcntl` calls (59,000 for 10,000 small downloads). A second daemon
/// on the same state directory waits for the lock (the busy timeout) and then fails
/// to start, rather than sharing the queue.
final class TransferStore: Sendable {
    private let queue: DatabaseQueue

    init(path: String) throws {
        var config = Configuration()
        config.label = "apphost-transferd"
        config.busyMode = .timeout(5)
        // Before WAL is turned on: only then does the WAL index stay in memory.
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE")
        }
        config.journalMode = .wal
        queue = try DatabaseQueue(path: path, configuration: config)
        try Self.migrator.migrate(queue)
    }

    /// Runs `body` on the store's own connection (tests: the file admits no other).
    func withConnection<T>(_ body: (Database) throws -> T) throws -> T {
        try queue.write(body)
    }

    private static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.create(table: "transfer") { t in
                t.primaryKey("id", .integer)
                t.column("bundleIdentifier", .text).notNull().indexed()
                t.column("job", .text).notNull()
                t.column("state", .text).notNull()
                t.column("bytesDone", .integer).notNull().defaults(to: 0)
                t.column("bytesExpected", .integer)
                t.column("etag", .text)
                t.column("lastModified", .text)
                t.column("partPath", .text).notNull()
                t.column("attempts", .integer).notNull().defaults(to: 0)
                t.column("nextAttempt", .double).notNull().defaults(to: 0)
                t.column("outcome", .text)
            }
        }
        return m
    }

    private static func json<T: Encodable>(_ v: T) throws -> String {
        String(decoding: try WireJSON.encoder().encode(v), as: UTF8.self)
    }

    /// Inserts a new job; false when the id is already known (a duplicate enqueue).
    func insert(_ job: TransferJob) throws -> Bool {
        try insert([job])[0]
    }

    /// Inserts new jobs in one transaction; for each, false when its id is already known.
    /// The statements of every transfer (insert, progress, state, finish, delete) are GRDB's
    /// cached statements: prepared once a connection, not parsed and authorized again for
    /// each transfer (a tenth of the daemon's time for 10,000 small downloads).
    func insert(_ jobs: [TransferJob]) throws -> [Bool] {
        let texts = try jobs.map { job in try job.directJSON.map { String(decoding: $0, as: UTF8.self) } ?? Self.json(job) }
        return try queue.write { db in
            try zip(jobs, texts).map { job, text in
                try db.cachedStatement(sql: """
                        INSERT OR IGNORE INTO transfer (id, bundleIdentifier, job, state, partPath)
                        VALUES (?, ?, ?, ?, ?)
                        """).execute(
                    arguments: [Int64(bitPattern: job.id.rawValue), job.bundleIdentifier.rawValue, text, TransferState.queued.rawValue,
                                job.destination + ".part"])
                return db.changesCount > 0
            }
        }
    }

    func loadAll() throws -> [StoredTransfer] {
        try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM transfer ORDER BY id").compactMap { row -> StoredTransfer? in
                let jobText: String = row["job"]
                guard let job = try? WireJSON.decoder().decode(TransferJob.self, from: Data(jobText.utf8)) else { return nil }
                var outcome: TransferOutcome?
                if let o: String = row["outcome"] {
                    outcome = try? WireJSON.decoder().decode(TransferOutcome.self, from: Data(o.utf8))
                }
                return StoredTransfer(
                    job: job, state: TransferState(restoring: row["state"]), bytesDone: row["bytesDone"], bytesExpected: row["bytesExpected"],
                    etag: row["etag"], lastModified: row["lastModified"], attempts: row["attempts"],
                    nextAttempt: row["nextAttempt"], outcome: outcome)
            }
        }
    }

    func resumePoint(id: TransferID) throws -> ResumePoint {
        try queue.read { db in
            guard let row = try Row.fetchOne(
                db, sql: "SELECT bytesDone, bytesExpected, etag, lastModified FROM transfer WHERE id = ?",
                arguments: [Int64(bitPattern: id.rawValue)])
            else { return ResumePoint() }
            return ResumePoint(bytesDone: row["bytesDone"], bytesExpected: row["bytesExpected"],
                               etag: row["etag"], lastModified: row["lastModified"])
        }
    }

    func saveProgress(id: TransferID, _ p: ResumePoint) throws {
        try queue.write { db in
            try db.cachedStatement(sql: "UPDATE transfer SET bytesDone = ?, bytesExpected = ?, etag = ?, lastModified = ? WHERE id = ?").execute(
                arguments: [p.bytesDone, p.bytesExpected, p.etag, p.lastModified, Int64(bitPattern: id.rawValue)])
        }
    }

    func setState(id: TransferID, state: TransferState, attempts: Int, nextAttempt: Double) throws {
        try queue.write { db in
            try db.cachedStatement(sql: "UPDATE transfer SET state = ?, attempts = ?, nextAttempt = ? WHERE id = ?").execute(
                arguments: [state.rawValue, attempts, nextAttempt, Int64(bitPattern: id.rawValue)])
        }
    }

    func finish(id: TransferID, outcome: TransferOutcome) throws {
        let text = try outcome.directJSON.map { String(decoding: $0, as: UTF8.self) } ?? Self.json(outcome)
        try queue.write { db in
            try db.cachedStatement(sql: "UPDATE transfer SET state = ?, outcome = ? WHERE id = ?").execute(
                arguments: [TransferState.finished.rawValue, text, Int64(bitPattern: id.rawValue)])
        }
    }

    /// Records finished transfers in one transaction, with the bytes each got.
    func finish(_ items: [(id: TransferID, outcome: TransferOutcome, bytesDone: Int64)]) throws {
        let texts = try items.map { item in try item.outcome.directJSON.map { String(decoding: $0, as: UTF8.self) } ?? Self.json(item.outcome) }
        try queue.write { db in
            for (item, text) in zip(items, texts) {
                try db.cachedStatement(sql: "UPDATE transfer SET state = ?, outcome = ?, bytesDone = ? WHERE id = ?").execute(
                    arguments: [TransferState.finished.rawValue, text, item.bytesDone, Int64(bitPattern: item.id.rawValue)])
            }
        }
    }

    func delete(id: TransferID) throws {
        try delete(ids: [id])
    }

    /// Forgets finished transfers (acknowledged by the host), in one transaction.
    func delete(ids: [TransferID]) throws {
        try queue.write { db in
            for id in ids {
                try db.cachedStatement(sql: "DELETE FROM transfer WHERE id = ? AND state = ?").execute(
                    arguments: [Int64(bitPattern: id.rawValue), TransferState.finished.rawValue])
            }
        }
    }
}
