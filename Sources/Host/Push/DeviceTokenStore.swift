import AppHostProtocol
import Foundation
import GRDB
import Plugins

// Device tokens as the host keeps them: random per app install and per host, issued when
// first asked for, kept across restarts in `deviceToken`, retired (410 Unregistered) when
// the app is uninstalled. ModeHub decides; this file only stores.

extension Store {
    static func registerDeviceTokens(_ m: inout DatabaseMigrator) {
        m.registerMigration("v8: device tokens") { db in
            try db.create(table: "deviceToken") { t in
                t.primaryKey("token", .text)
                t.column("bundleIdentifier", .text).notNull().indexed()
                /// `DeviceTokenKind`: apns or voip.
                t.column("kind", .text).notNull()
                t.column("retired", .boolean).notNull().defaults(to: false)
                /// Order of issue (and of retirement, for the bound on retired tokens).
                t.column("sequence", .integer).notNull()
            }
            // Hosts before v8 derived tokens from the bundle id and kept only uninstalled
            // apps' (as settings "retiredToken.<token>"): those stay retired (410).
            let rows = try Row.fetchAll(db, sql: "SELECT key, value FROM setting WHERE key LIKE 'retiredToken.%' ORDER BY key")
            for (n, row) in rows.enumerated() {
                let key: String = row["key"]
                let token = String(key.dropFirst("retiredToken.".count))
                try db.execute(sql: "INSERT OR IGNORE INTO deviceToken (token, bundleIdentifier, kind, retired, sequence) VALUES (?, ?, 'apns', 1, ?)",
                               arguments: [token, row["value"] as String, n])
            }
            try db.execute(sql: "DELETE FROM setting WHERE key LIKE 'retiredToken.%'")
        }
    }

    /// Records a token issued or retired (committed before the token is handed out).
    func saveDeviceToken(_ record: DeviceTokenRecord) throws {
        try pool.write { db in
            let next = try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(sequence), 0) + 1 FROM deviceToken") ?? 1
            try db.execute(sql: "INSERT OR REPLACE INTO deviceToken (token, bundleIdentifier, kind, retired, sequence) VALUES (?, ?, ?, ?, ?)",
                           arguments: [record.token, record.bundleIdentifier.rawValue, record.kind.rawValue, record.retired, next])
        }
    }

    /// Forgets a retired token (past the bound of those kept).
    func deleteDeviceToken(_ token: String) throws {
        try pool.write { db in
            try db.execute(sql: "DELETE FROM deviceToken WHERE token = ?", arguments: [token])
        }
    }

    /// Every kept token, in the order issued or retired (rows this build cannot read, and
    /// rows whose bundle identifier is not one, are skipped).
    func deviceTokens() throws -> [DeviceTokenRecord] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT token, bundleIdentifier, kind, retired FROM deviceToken ORDER BY sequence").compactMap { row in
                let kind: String = row["kind"]
                guard let kind = DeviceTokenKind(rawValue: kind), let app = Self.bundleID(row) else { return nil }
                return DeviceTokenRecord(token: row["token"], bundleIdentifier: app, kind: kind, retired: row["retired"])
            }
        }
    }
}

extension Supervisor {
    /// Carries out ``ModeEffect/persistDeviceToken(_:)`` and ``ModeEffect/forgetDeviceToken(_:)``.
    func persistDeviceToken(_ effect: ModeEffect) {
        do {
            switch effect {
            case .persistDeviceToken(let record): try store.saveDeviceToken(record)
            case .forgetDeviceToken(let token): try store.deleteDeviceToken(token)
            default: return
            }
        } catch {
            logger.error("could not record a device token: \(error)")
            events.append(.warning, cause: "could not record a device token: \(error); it may change at the next host start", time: now())
        }
    }

    /// The device token of `kind` that `id` gets (or got) when it registers on this host:
    /// what a provider pushes to. Issued now when the app has none yet. Nil when `id` is
    /// not installed.
    public func deviceToken(of id: BundleID, _ kind: DeviceTokenKind = .apns) -> String? {
        guard let issued = modes.deviceToken(of: id, kind) else { return nil }
        performMode(issued.1)
        return issued.0
    }
}

extension Supervisor {
    /// Device tokens and the apns-ids of pushes sent without one come from `seed`, not
    /// the system's random source: a scenario host gives the same events every run.
    public func useSeededIdentifiers(seed: UInt64) {
        modes.useSeededIdentifiers(seed: seed)
    }
}
