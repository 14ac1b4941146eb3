import AppHostProtocol
import Foundation
import GRDB
import Synchronization

/// The host's durable state in `apphost.sqlite` (WAL): installed apps, state
/// history and termination reports. Every write is committed before the caller
/// acknowledges anything to a client.
public final class Store: Sendable {
    let pool: DatabasePool
    /// Transitions whose transaction failed (a full disk), written again before the next
    /// ones, in order; see ``recordTransitions(_:onError:)``.
    private let unwritten = Mutex<UnwrittenTransitions>(UnwrittenTransitions())

    /// At most this many transitions wait for a retry by default; past it the oldest are
    /// dropped from the database (the event log keeps them: `apphost events` shows them).
    public static let maximumUnwrittenTransitions = 100_000
    /// This store's bound (``maximumUnwrittenTransitions`` unless a test sets another).
    let unwrittenLimit: Int

    struct UnwrittenTransitions {
        var rows: [TransitionRow] = []
        var dropped = 0
    }

    /// Opens (creating and migrating) the database at `path`.
    public init(path: String, unwrittenLimit: Int = Store.maximumUnwrittenTransitions) throws {
        self.unwrittenLimit = unwrittenLimit
        // Made 0600 before SQLite opens it, whatever the umask: SQLite gives the -wal
        // and -shm files the database file's mode.
        let fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        if fd >= 0 {
            _ = fchmod(fd, 0o600)
            close(fd)
        }
        var config = Configuration()
        config.label = "apphost"
        config.busyMode = .timeout(5)
        // WAL with synchronous=NORMAL: a commit is durable when the host process dies
        // (SIGKILL, a crash) and the database never corrupts, but a commit is not
        // fsynced one by one; the WAL is synced at checkpoints. An OS crash or power
        // loss can lose the last transitions. FULL (SQLite's default) fsynced every
        // commit: 150 µs of every launch and terminate on this machine's ext4.
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        pool = try DatabasePool(path: path, configuration: config)
        try Self.migrator.migrate(pool)
    }

    private static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.create(table: "app") { t in
                t.primaryKey("bundleIdentifier", .text)
                t.column("bundlePath", .text).notNull()
                t.column("executablePath", .text).notNull()
                t.column("settings", .text).notNull()
                t.column("manifest", .text).notNull()
                t.column("installedAt", .double).notNull()
            }
            try db.create(table: "transition") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("time", .double).notNull()
                t.column("bundleIdentifier", .text).notNull().indexed()
                t.column("pid", .integer)
                t.column("fromState", .text).notNull()
                t.column("toState", .text).notNull()
                t.column("cause", .text).notNull()
            }
            try db.create(table: "report") { t in
                t.primaryKey("id", .text)
                t.column("bundleIdentifier", .text).notNull().indexed()
                t.column("time", .double).notNull()
                t.column("json", .text).notNull()
            }
        }
        m.registerMigration("v2: entitlements, privacy") { db in
            try db.alter(table: "app") { t in
                t.add(column: "entitlements", .text)
            }
            try db.create(table: "privacy") { t in
                t.column("bundleIdentifier", .text).notNull()
                t.column("service", .text).notNull()
                t.column("value", .text).notNull()
                t.primaryKey(["bundleIdentifier", "service"])
            }
        }
        m.registerMigration("v3: settings") { db in
            try db.create(table: "setting") { t in
                t.primaryKey("key", .text)
                t.column("value", .text).notNull()
            }
        }
        m.registerMigration("v4: background URLSession") { db in
            try db.create(table: "transferSession") { t in
                t.column("bundleIdentifier", .text).notNull()
                t.column("identifier", .text).notNull()
                t.column("config", .text).notNull()
                t.column("lastTaskIdentifier", .integer).notNull().defaults(to: 0)
                t.primaryKey(["bundleIdentifier", "identifier"])
            }
            try db.create(table: "transfer") { t in
                t.primaryKey("id", .integer)
                t.column("bundleIdentifier", .text).notNull().indexed()
                t.column("job", .text).notNull()
                t.column("accepted", .boolean).notNull().defaults(to: false)
            }
        }
        m.registerMigration("v5: app groups") { db in
            try db.alter(table: "app") { t in
                t.add(column: "applicationGroups", .text)
            }
        }
        m.registerMigration("v6: identities") { db in
            // The uid of each app and the gid of each App Group, kept for the app's life.
            try db.create(table: "identity") { t in
                t.column("kind", .text).notNull()
                t.column("name", .text).notNull()
                t.column("id", .integer).notNull().unique()
                t.primaryKey(["kind", "name"])
            }
        }
        registerCancelledTransfers(&m)
        registerDeviceTokens(&m)
        m.registerMigration("v9: transition seq") { db in
            // The `seq` of the transition's event in events.jsonl: what a host after a crash
            // compares to bring the table level with the log (`Supervisor.recoverTransitions`).
            try db.alter(table: "transition") { t in
                t.add(column: "seq", .integer)
            }
        }
        return m
    }

    /// Every stored identity: an app's uid (`kind` "app") or an App Group's gid ("group").
    public func identities() throws -> [(kind: String, name: String, id: UInt32)] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT kind, name, id FROM identity").compactMap { row in
                let id: Int64 = row["id"]
                guard let id32 = UInt32(exactly: id) else { return nil }
                return (kind: row["kind"], name: row["name"], id: id32)
            }
        }
    }

    /// Records (or replaces) one identity.
    public func saveIdentity(kind: String, name: String, id: UInt32) throws {
        try pool.write { db in
            try db.execute(sql: "DELETE FROM identity WHERE id = ? OR (kind = ? AND name = ?)", arguments: [Int64(id), kind, name])
            try db.execute(sql: "INSERT INTO identity (kind, name, id) VALUES (?, ?, ?)", arguments: [kind, name, Int64(id)])
        }
    }

    /// Forgets one identity.
    public func deleteIdentity(kind: String, name: String) throws {
        try pool.write { db in
            try db.execute(sql: "DELETE FROM identity WHERE kind = ? AND name = ?", arguments: [kind, name])
        }
    }

    /// Records a host setting or device condition; nil removes it (back to the default).
    public func setSetting(key: String, value: String?) throws {
        try pool.write { db in
            if let value {
                try db.execute(sql: "INSERT OR REPLACE INTO setting (key, value) VALUES (?, ?)", arguments: [key, value])
            } else {
                try db.execute(sql: "DELETE FROM setting WHERE key = ?", arguments: [key])
            }
        }
    }

    /// Every stored setting.
    public func settings() throws -> [(key: String, value: String)] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT key, value FROM setting ORDER BY key").map { (key: $0["key"], value: $0["value"]) }
        }
    }

    /// Records a privacy decision (`apphost privacy`); nil removes it (reset).
    public func setPrivacy(bundleIdentifier: BundleID, service: PrivacyService, value: PrivacyDecision?) throws {
        try pool.write { db in
            if let value {
                try db.execute(sql: "INSERT OR REPLACE INTO privacy (bundleIdentifier, service, value) VALUES (?, ?, ?)",
                               arguments: [bundleIdentifier.rawValue, service.rawValue, value.rawValue])
            } else {
                try db.execute(sql: "DELETE FROM privacy WHERE bundleIdentifier = ? AND service = ?",
                               arguments: [bundleIdentifier.rawValue, service.rawValue])
            }
        }
    }

    /// Every privacy decision, as stored (service and decision are the raw values of
    /// ``PrivacyService`` and ``PrivacyDecision``; the reader decides about unknown ones).
    /// A row whose bundle identifier is not one (see ``bundleID(_:column:)``) is skipped.
    public func privacy() throws -> [(bundleIdentifier: BundleID, service: String, value: String)] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM privacy ORDER BY bundleIdentifier, service").compactMap { row in
                guard let id = Self.bundleID(row) else { return nil }
                return (bundleIdentifier: id, service: row["service"], value: row["value"])
            }
        }
    }

    /// A row's bundle identifier, checked once here, where it comes back from the disk:
    /// the database may have been written by an older host, whose manifest reader let
    /// through identifiers the rule now refuses. Nil when it is not one; its row is then
    /// skipped (an installed app's row is reported, see ``apps(skipping:)``).
    static func bundleID(_ row: Row, column: String = "bundleIdentifier") -> BundleID? {
        guard let text = row[column] as String? else { return nil }
        return BundleID(text)
    }

    /// A row the store could not read back and skipped, with why.
    public struct SkippedRow: Error, Sendable, CustomStringConvertible {
        public var table: String
        public var key: String
        public var reason: String
        public var description: String { "table \(table), row \"\(key)\": \(reason); the row is skipped" }
    }

    // MARK: Background URLSession

    /// A background session an app made: its configuration and the last task identifier given out.
    public struct TransferSessionRow: Sendable {
        public var bundleIdentifier: BundleID
        public var config: BackgroundSessionConfig
        public var lastTaskIdentifier: TransferTaskID
    }

    /// Records a session (made or remade by the app) and its task counter.
    public func saveTransferSession(bundleIdentifier: BundleID, config: BackgroundSessionConfig, lastTaskIdentifier: TransferTaskID) throws {
        let text = String(decoding: try WireJSON.encoder().encode(config), as: UTF8.self)
        try pool.write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO transferSession (bundleIdentifier, identifier, config, lastTaskIdentifier) VALUES (?, ?, ?, ?)",
                arguments: [bundleIdentifier.rawValue, config.identifier.rawValue, text, lastTaskIdentifier.rawValue])
        }
    }

    /// Every recorded session (rows that no longer decode, or name no valid app, are skipped).
    public func transferSessions() throws -> [TransferSessionRow] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM transferSession ORDER BY bundleIdentifier, identifier").compactMap { row in
                let text: String = row["config"]
                guard let id = Self.bundleID(row),
                      let config = try? WireJSON.decoder().decode(BackgroundSessionConfig.self, from: Data(text.utf8)) else { return nil }
                return TransferSessionRow(bundleIdentifier: id, config: config, lastTaskIdentifier: TransferTaskID(row["lastTaskIdentifier"] as Int))
            }
        }
    }

    /// Records a transfer the host handed (or will hand) to the daemon, and its task counter, in one transaction.
    /// (The `accepted` column is no longer written: after a restart every transfer is
    /// offered to the daemon again, which accepts one it already has.)
    public func saveTransfer(_ job: TransferJob) throws {
        let text = String(decoding: try WireJSON.encoder().encode(job), as: UTF8.self)
        try pool.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO transfer (id, bundleIdentifier, job) VALUES (?, ?, ?)",
                           arguments: [Int64(bitPattern: job.id.rawValue), job.bundleIdentifier.rawValue, text])
            try db.execute(sql: "UPDATE transferSession SET lastTaskIdentifier = max(lastTaskIdentifier, ?) WHERE bundleIdentifier = ? AND identifier = ?",
                           arguments: [job.taskIdentifier.rawValue, job.bundleIdentifier.rawValue, job.session.rawValue])
        }
    }

    /// Records sessions (made or remade) and transfers in one transaction: the host's
    /// batch of new background URLSession rows (see ``TransferBroker``).
    public func saveTransferBatch(sessions: [TransferSessionRow], jobs: [TransferJob]) throws {
        guard !sessions.isEmpty || !jobs.isEmpty else { return }
        try pool.write { db in try Self.insertTransferBatch(db, sessions: sessions, jobs: jobs) }
    }

    /// ``saveTransferBatch(sessions:jobs:)`` on GRDB's writer queue, encoding included:
    /// the caller (the supervisor's actor) goes on with the next requests while the
    /// batch is encoded and committed, and hears the result in `completion` (on the
    /// writer queue). Writes stay in order: a later write waits for this one.
    public func saveTransferBatchAsync(sessions: [TransferSessionRow], jobs: [TransferJob],
                                       completion: @escaping @Sendable ((any Error)?) -> Void) {
        guard !sessions.isEmpty || !jobs.isEmpty else {
            completion(nil)
            return
        }
        pool.asyncWrite { db in
            try Self.insertTransferBatch(db, sessions: sessions, jobs: jobs)
        } completion: { _, result in
            if case .failure(let error) = result { completion(error) } else { completion(nil) }
        }
    }

    private static func insertTransferBatch(_ db: Database, sessions: [TransferSessionRow], jobs: [TransferJob]) throws {
        let encoder = WireJSON.encoder()
        let sessionTexts = try sessions.map { String(decoding: try encoder.encode($0.config), as: UTF8.self) }
        let jobTexts = try jobs.map { job in String(decoding: try job.directJSON ?? [UInt8](encoder.encode(job)), as: UTF8.self) }
        for (row, text) in zip(sessions, sessionTexts) {
            try db.execute(
                sql: "INSERT OR REPLACE INTO transferSession (bundleIdentifier, identifier, config, lastTaskIdentifier) VALUES (?, ?, ?, ?)",
                arguments: [row.bundleIdentifier.rawValue, row.config.identifier.rawValue, text, row.lastTaskIdentifier.rawValue])
        }
        var counters: [String: (app: BundleID, session: SessionIdentifier, last: TransferTaskID)] = [:]
        // Prepared once per connection (as the transitions' INSERT): a batch is a row a transfer.
        let insert = try db.cachedStatement(sql: "INSERT OR REPLACE INTO transfer (id, bundleIdentifier, job) VALUES (?, ?, ?)")
        for (job, text) in zip(jobs, jobTexts) {
            try insert.execute(arguments: [Int64(bitPattern: job.id.rawValue), job.bundleIdentifier.rawValue, text])
            let key = job.bundleIdentifier.rawValue + "|" + job.session.rawValue
            counters[key] = (job.bundleIdentifier, job.session, counters[key].map { max($0.last, job.taskIdentifier) } ?? job.taskIdentifier)
        }
        for (_, c) in counters.sorted(by: { $0.key < $1.key }) {
            try db.execute(sql: "UPDATE transferSession SET lastTaskIdentifier = max(lastTaskIdentifier, ?) WHERE bundleIdentifier = ? AND identifier = ?",
                           arguments: [c.last.rawValue, c.app.rawValue, c.session.rawValue])
        }
    }

    /// Every transfer not yet delivered and acknowledged.
    public func transfers() throws -> [TransferJob] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT job FROM transfer ORDER BY id").compactMap { row in
                let text: String = row["job"]
                return try? WireJSON.decoder().decode(TransferJob.self, from: Data(text.utf8))
            }
        }
    }

    /// Forgets transfers (delivered, or cancelled with their app).
    public func deleteTransfers(ids: [TransferID]) throws {
        guard !ids.isEmpty else { return }
        try pool.write { db in
            let delete = try db.cachedStatement(sql: "DELETE FROM transfer WHERE id = ?")
            for id in ids {
                try delete.execute(arguments: [Int64(bitPattern: id.rawValue)])
            }
        }
    }

    /// Forgets an app's sessions and transfers (uninstalled).
    public func deleteTransferState(bundleIdentifier: BundleID) throws {
        try pool.write { db in
            try db.execute(sql: "DELETE FROM transfer WHERE bundleIdentifier = ?", arguments: [bundleIdentifier.rawValue])
            try db.execute(sql: "DELETE FROM transferSession WHERE bundleIdentifier = ?", arguments: [bundleIdentifier.rawValue])
            try db.execute(sql: "DELETE FROM cancelledTransfer WHERE bundleIdentifier = ?", arguments: [bundleIdentifier.rawValue])
        }
    }

    /// An installed app plus the build settings it was installed with.
    public struct AppRow: Sendable {
        public var app: InstalledApp
        public var settings: [String: String]
    }

    /// Inserts or replaces an installed app.
    public func saveApp(_ app: InstalledApp, settings: [String: String]) throws {
        let manifest = try String(decoding: WireJSON.encoder().encode(app.manifest), as: UTF8.self)
        let settingsJSON = try String(decoding: WireJSON.encoder().encode(settings), as: UTF8.self)
        let entitlements = try app.entitlements.map { try String(decoding: WireJSON.encoder().encode($0), as: UTF8.self) }
        let groups = try app.applicationGroups.map { try String(decoding: WireJSON.encoder().encode($0), as: UTF8.self) }
        try pool.write { db in
            try db.execute(
                sql: """
                INSERT OR REPLACE INTO app (bundleIdentifier, bundlePath, executablePath, settings, manifest, installedAt, entitlements,
                                            applicationGroups)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
                arguments: [app.bundleIdentifier.rawValue, app.bundlePath, app.executablePath, settingsJSON, manifest,
                            app.installedAt.timeIntervalSince1970, entitlements, groups])
            // A reinstall starts with no privacy decisions, as on iOS.
            try db.execute(sql: "DELETE FROM privacy WHERE bundleIdentifier = ?", arguments: [app.bundleIdentifier.rawValue])
        }
    }

    /// Removes an installed app. Returns whether it existed.
    @discardableResult
    public func deleteApp(_ bundleIdentifier: BundleID) throws -> Bool {
        try pool.write { db in
            try db.execute(sql: "DELETE FROM app WHERE bundleIdentifier = ?", arguments: [bundleIdentifier.rawValue])
            let existed = db.changesCount > 0
            try db.execute(sql: "DELETE FROM privacy WHERE bundleIdentifier = ?", arguments: [bundleIdentifier.rawValue])
            return existed
        }
    }

    /// Every installed app, by bundle identifier. A row whose identifier is not a bundle
    /// identifier (a database of an older host, see ``bundleID(_:column:)``) is skipped
    /// and told to `skipping`.
    public func apps(skipping: (SkippedRow) -> Void = { _ in }) throws -> [AppRow] {
        let rows = try pool.read { db in try Row.fetchAll(db, sql: "SELECT * FROM app ORDER BY bundleIdentifier") }
        return try rows.compactMap { row in
            let text: String = row["bundleIdentifier"]
            let id: BundleID
            do {
                id = try BundleID(validating: text)
            } catch {
                skipping(SkippedRow(table: "app", key: text, reason: "not a bundle identifier (\(error)): "
                    + "reinstall the app under a valid CFBundleIdentifier"))
                return nil
            }
            let manifestText: String = row["manifest"]
            let settingsText: String = row["settings"]
            let manifest = try WireJSON.decoder().decode(Manifest.self, from: Data(manifestText.utf8))
            let settings = try WireJSON.decoder().decode([String: String].self, from: Data(settingsText.utf8))
            let entitlementsText: String? = row["entitlements"]
            let entitlements = try entitlementsText.map { try WireJSON.decoder().decode([String].self, from: Data($0.utf8)) }
            let groupsText: String? = row["applicationGroups"]
            let groups = try groupsText.map { try WireJSON.decoder().decode([String].self, from: Data($0.utf8)) }
            let app = InstalledApp(
                bundleIdentifier: id, name: manifest.name,
                bundlePath: row["bundlePath"], executablePath: row["executablePath"],
                backgroundModes: manifest.backgroundModes,
                installedAt: Date(timeIntervalSince1970: row["installedAt"]), manifest: manifest,
                entitlements: entitlements, applicationGroups: groups)
            return AppRow(app: app, settings: settings)
        }
    }

    /// One row of state history.
    public struct TransitionRow: Sendable {
        public var bundleIdentifier: BundleID
        public var pid: Int32?
        public var from: AppState
        public var to: AppState
        public var cause: String
        public var time: Date
        /// The `seq` of its event in events.jsonl (nil: none was numbered).
        public var seq: UInt64?

        public init(bundleIdentifier: BundleID, pid: Int32?, from: AppState, to: AppState, cause: String, time: Date,
                    seq: UInt64? = nil) {
            self.seq = seq
            self.bundleIdentifier = bundleIdentifier
            self.pid = pid
            self.from = from
            self.to = to
            self.cause = cause
            self.time = time
        }
    }

    /// Appends state transitions in one transaction, on GRDB's writer queue: the
    /// caller (the supervisor's actor) does not wait for the disk. History is not
    /// acknowledged to anyone; ``flush()`` waits for it when it must be on disk.
    ///
    /// A transaction that fails (a full disk) loses nothing: its rows are kept, in order,
    /// and written first by the next transaction or ``retryUnwritten(onError:)`` (at most
    /// ``maximumUnwrittenTransitions``; past that the oldest go from the database, the
    /// event log keeping them). `onError` hears of each failure. A host killed while rows
    /// wait loses them from memory, not from the log: the next start inserts what the log
    /// holds above the table's last `seq`.
    /// (Rows go in order; the writer queue is serial, so no later call overtakes a retry.)
    public func recordTransitions(_ rows: [TransitionRow], onError: @escaping @Sendable (any Error) -> Void) {
        guard !rows.isEmpty || hasUnwrittenTransitions else { return }
        pool.asyncWriteWithoutTransaction { [self] db in
            // Taken here, on the serial writer queue: what an earlier transaction could not
            // write goes first, so no later row is committed before it.
            let batch = unwritten.withLock { state -> [TransitionRow] in
                defer { state.rows.removeAll() }
                return state.rows + rows
            }
            guard !batch.isEmpty else { return }
            do {
                // The commit inside the catch: a full disk often refuses the COMMIT, not the
                // INSERTs.
                try db.inTransaction {
                    try Self.insert(batch, db)
                    return .commit
                }
            } catch {
                unwritten.withLock { state in
                    state.rows = batch
                    let over = state.rows.count - unwrittenLimit
                    if over > 0 {
                        state.rows.removeFirst(over)
                        state.dropped += over
                    }
                }
                onError(error)
            }
        }
    }

    /// Writes the transitions a failed transaction left, if any (when space may have
    /// come back: the host tries at each step that records nothing new, and at shutdown).
    public func retryUnwritten(onError: @escaping @Sendable (any Error) -> Void) {
        guard hasUnwrittenTransitions else { return }
        recordTransitions([], onError: onError)
    }

    /// Whether transitions wait for a retry.
    public var hasUnwrittenTransitions: Bool { unwritten.withLock { !$0.rows.isEmpty } }

    /// How many transitions wait for a retry, and how many were dropped past the bound.
    public var unwrittenTransitions: (waiting: Int, dropped: Int) { unwritten.withLock { ($0.rows.count, $0.dropped) } }

    private static func insert(_ rows: [TransitionRow], _ db: Database) throws {
        // Prepared once per connection: compiling the INSERT was a third of the write.
        let insert = try db.cachedStatement(sql:
            "INSERT INTO transition (time, bundleIdentifier, pid, fromState, toState, cause, seq) VALUES (?, ?, ?, ?, ?, ?, ?)")
        for r in rows {
            try insert.execute(arguments: [r.time.timeIntervalSince1970, r.bundleIdentifier.rawValue, r.pid.map { Int($0) },
                                           r.from.rawValue, r.to.rawValue, r.cause, r.seq.map { Int64(bitPattern: $0) }])
        }
    }

    /// Writes `rows` now, in one transaction (a host's start, bringing the table level with
    /// the event log).
    public func insertTransitions(_ rows: [TransitionRow]) throws {
        guard !rows.isEmpty else { return }
        try pool.write { db in try Self.insert(rows, db) }
    }

    /// Whether the table holds any transition.
    public func hasTransitions() throws -> Bool {
        try pool.read { db in try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM transition)") ?? false }
    }

    /// The highest event `seq` the table holds (nil: none, an older database's rows only).
    public func lastTransitionSeq() throws -> UInt64? {
        try pool.read { db in
            try Int64.fetchOne(db, sql: "SELECT MAX(seq) FROM transition").map { UInt64(bitPattern: $0) }
        }
    }

    /// Every transition with an event `seq`, in order: (seq, app, from, to, cause).
    public func numberedTransitions() throws -> [(seq: UInt64, app: String, from: String, to: String, cause: String)] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT seq, bundleIdentifier, fromState, toState, cause FROM transition WHERE seq IS NOT NULL ORDER BY seq")
                .map { row in (UInt64(bitPattern: row["seq"] as Int64), row["bundleIdentifier"], row["fromState"], row["toState"], row["cause"]) }
        }
    }

    /// Waits until every write scheduled so far is committed.
    public func flush() throws {
        try pool.barrierWriteWithoutTransaction { _ in }
    }

    /// Waits, without blocking the caller's thread or actor, until every write scheduled
    /// so far is committed: an empty block on GRDB's writer queue, which is serial, runs
    /// after them. (Not `asyncBarrierWriteWithoutTransaction`: it also waits for reads, on
    /// GRDB's concurrent barrier queue, whose libdispatch worker pool would start a 1 Hz
    /// pool monitor in an otherwise idle host; see HostConcurrency.) A write that failed
    /// says so through its own `onError`.
    public func flushed() async throws {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            afterWrites { continuation.resume() }
        }
    }

    /// Runs `body` on the writer queue once every write scheduled so far is committed
    /// (and its `onError` has run), as ``flushed()`` returns.
    public func afterWrites(_ body: @escaping @Sendable () -> Void) {
        pool.asyncWriteWithoutTransaction { _ in body() }
    }

    /// The last `limit` states of an app, oldest first.
    public func recentStates(bundleIdentifier: BundleID, limit: Int = 8) throws -> [StateRecord] {
        try pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT time, toState, cause FROM transition WHERE bundleIdentifier = ?
                ORDER BY id DESC LIMIT ?
                """, arguments: [bundleIdentifier.rawValue, limit]).reversed().map { row in
                StateRecord(state: AppState(rawValue: row["toState"]) ?? .notRunning,
                            time: Date(timeIntervalSince1970: row["time"]), cause: row["cause"])
            }
        }
    }

    /// Stores a termination report.
    public func saveReport(_ report: TerminationReport) throws {
        let json = try String(decoding: WireJSON.encoder().encode(report), as: UTF8.self)
        try pool.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO report (id, bundleIdentifier, time, json) VALUES (?, ?, ?, ?)",
                           arguments: [report.id, report.bundleIdentifier.rawValue, report.time.timeIntervalSince1970, json])
        }
    }

    /// Termination reports, oldest first, optionally for one app.
    /// Termination reports, oldest first; reports of one instant (jetsam's kills at one
    /// virtual time) in the order they were written, not by their ids (which begin with
    /// the bundle id: that listed them by app).
    public func reports(bundleIdentifier: BundleID?) throws -> [TerminationReport] {
        try pool.read { db in
            let rows: [Row]
            if let id = bundleIdentifier {
                rows = try Row.fetchAll(db, sql: "SELECT json FROM report WHERE bundleIdentifier = ? ORDER BY time, rowid", arguments: [id.rawValue])
            } else {
                rows = try Row.fetchAll(db, sql: "SELECT json FROM report ORDER BY time, rowid")
            }
            return try rows.map { row in
                let text: String = row["json"]
                return try WireJSON.decoder().decode(TerminationReport.self, from: Data(text.utf8))
            }
        }
    }
}
