import AppHostProtocol
import Foundation
import GRDB

/// Background transfers the system cancelled, kept until the app has heard of them
/// (see ``CancelledTransfer``): a host restart between a user terminate and the app's
/// next launch still reports them.
extension Store {
    static func registerCancelledTransfers(_ m: inout DatabaseMigrator) {
        m.registerMigration("v7: transfers cancelled by the system") { db in
            try db.create(table: "cancelledTransfer") { t in
                t.primaryKey("id", .integer)
                t.column("bundleIdentifier", .text).notNull().indexed()
                t.column("session", .text).notNull()
                t.column("taskIdentifier", .integer).notNull()
                t.column("kind", .text).notNull()
                t.column("url", .text).notNull()
                /// `BackgroundTaskCancelledReason`'s raw value (Foundation's number).
                t.column("reason", .integer).notNull()
            }
        }
    }

    /// In one transaction: `transfers` leave the `transfer` table, `entries` are recorded
    /// as cancelled, and the cancelled rows `dropped` (past the per-app bound) are deleted.
    func saveCancelledTransfers(_ entries: [CancelledTransfer], transfers: [TransferID], dropped: [TransferID]) throws {
        try pool.write { db in
            for id in transfers {
                try db.execute(sql: "DELETE FROM transfer WHERE id = ?", arguments: [Int64(bitPattern: id.rawValue)])
            }
            for e in entries {
                try db.execute(
                    sql: "INSERT OR REPLACE INTO cancelledTransfer (id, bundleIdentifier, session, taskIdentifier, kind, url, reason) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    arguments: [Int64(bitPattern: e.id.rawValue), e.bundleIdentifier.rawValue, e.session.rawValue, e.taskIdentifier.rawValue, e.kind.rawValue, e.url, e.reason.rawValue])
            }
            for id in dropped {
                try db.execute(sql: "DELETE FROM cancelledTransfer WHERE id = ?", arguments: [Int64(bitPattern: id.rawValue)])
            }
        }
    }

    /// Every cancelled transfer not yet reported, oldest first (rows this build cannot
    /// read, e.g. a reason it does not know or a bundle identifier that is not one, are skipped).
    func cancelledTransfers() throws -> [CancelledTransfer] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM cancelledTransfer ORDER BY id").compactMap { row in
                let id: Int64 = row["id"]
                let kind: String = row["kind"]
                let reason: Int = row["reason"]
                guard let kind = TransferKind(rawValue: kind), let reason = BackgroundTaskCancelledReason(rawValue: reason),
                      let app = Self.bundleID(row) else { return nil }
                return CancelledTransfer(id: TransferID(UInt64(bitPattern: id)), bundleIdentifier: app,
                                         session: SessionIdentifier(row["session"] as String), taskIdentifier: TransferTaskID(row["taskIdentifier"] as Int),
                                         kind: kind, url: row["url"], reason: reason)
            }
        }
    }

    /// Forgets cancelled transfers (reported to the app, or of an app no longer installed).
    func deleteCancelledTransfers(ids: [TransferID]) throws {
        guard !ids.isEmpty else { return }
        try pool.write { db in
            for id in ids {
                try db.execute(sql: "DELETE FROM cancelledTransfer WHERE id = ?", arguments: [Int64(bitPattern: id.rawValue)])
            }
        }
    }
}
