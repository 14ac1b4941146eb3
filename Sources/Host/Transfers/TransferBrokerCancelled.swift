import AppHostProtocol
import Plugins

/// A background transfer the system cancelled (the user terminated the app, Background App
/// Refresh was turned off), remembered until the app has heard of it: when it makes the
/// transfer's session again, `didCompleteWithError` gets `NSURLErrorCancelled` with
/// `NSURLErrorBackgroundTaskCancelledReasonKey` set to ``reason``, as URLSession does.
/// Kept in the host's database (`cancelledTransfer`), so a host restart between the
/// cancellation and the next launch still reports it.
struct CancelledTransfer: Equatable, Sendable {
    var id: TransferID
    var bundleIdentifier: BundleID
    var session: SessionIdentifier
    var taskIdentifier: TransferTaskID
    var kind: TransferKind
    var url: String
    var reason: BackgroundTaskCancelledReason
    /// Its `didCompleteWithError` went to the running process (in memory only: a process
    /// that ends before returning it hears it again next time).
    var sent = false

    init(id: TransferID, bundleIdentifier: BundleID, session: SessionIdentifier, taskIdentifier: TransferTaskID, kind: TransferKind, url: String,
         reason: BackgroundTaskCancelledReason, sent: Bool = false) {
        self.id = id
        self.bundleIdentifier = bundleIdentifier
        self.session = session
        self.taskIdentifier = taskIdentifier
        self.kind = kind
        self.url = url
        self.reason = reason
        self.sent = sent
    }

    init(_ job: TransferJob, reason: BackgroundTaskCancelledReason) {
        self.init(id: job.id, bundleIdentifier: job.bundleIdentifier, session: job.session, taskIdentifier: job.taskIdentifier,
                  kind: job.kind, url: job.url, reason: reason)
    }

    /// The event its delegate hears.
    var event: ServiceEvent {
        .urlSessionDidComplete(session: session, taskIdentifier: taskIdentifier, errorCode: "cancelled",
                               errorReason: "cancelled by the system (\(reason.name))", cancelledReason: reason)
    }
}

extension TransferBroker {
    /// Cancelled transfers remembered per app, to be reported at the next session: past
    /// it the oldest are forgotten (said in the event log). iOS publishes no figure.
    static let cancelledPerApp = 1_000

    /// **The entry point for cancellations by the system.** The system cancels `app`'s
    /// background transfers for `reason`:
    /// - `only == nil` (a user force-quit): every transfer the app has not heard the end
    ///   of, finished ones included (their events were not delivered; a finished
    ///   download's file is removed), and the daemon drops all of the app's jobs;
    /// - `only` given (Background App Refresh turned off: `{ $0.discretionary }`): the
    ///   unfinished transfers it picks, each cancelled in the daemon by id.
    ///
    /// Each is remembered durably (its `transfer` row becomes a `cancelledTransfer` row in
    /// one transaction) and reported with `didCompleteWithError` (`NSURLErrorCancelled`,
    /// `NSURLErrorBackgroundTaskCancelledReasonKey` = `reason`): at once to an app running
    /// code, else when the app next makes the session.
    mutating func systemCancelled(_ app: BundleID, reason: BackgroundTaskCancelledReason,
                                  only include: ((TransferJob) -> Bool)? = nil, world: World) -> [Effect] {
        let picked = records.filter { id, r in
            guard r.job.bundleIdentifier == app else { return false }
            guard let include else { return true }
            return r.outcome == nil && include(r.job)
        }.sorted { $0.key < $1.key }
        guard !picked.isEmpty else { return [] }
        var effects: [Effect] = []
        var entries: [CancelledTransfer] = []
        var finished: [TransferID] = []
        for (id, r) in picked {
            dropRecord(id)
            entries.append(CancelledTransfer(r.job, reason: reason))
            switch r.outcome {
            case nil:
                if include != nil { effects.append(.daemon(.cancel(id: id))) }
            case .completed? where r.job.kind == .download:
                finished.append(id)
                effects.append(.removeFile(r.job.destination))
            case .cancelledResumable(let resume)?:
                finished.append(id)
                effects.append(.removeFile(resume.partialFile))
            case _?:
                finished.append(id)
            }
        }
        if include == nil { effects.append(.daemon(.cancelApp(bundleIdentifier: app))) }
        // Finished in the daemon: it may forget them (it would report them again otherwise).
        effects += finished.map { .daemon(.acknowledge(id: $0)) }

        var kept = cancelled[app, default: []] + entries
        let excess = kept.count - cancelledLimit
        let dropped = excess > 0 ? kept.prefix(excess).map(\.id) : []
        if excess > 0 { kept.removeFirst(excess) }
        cancelled[app] = kept
        let stored = entries.filter { !dropped.contains($0.id) }
        effects.insert(.saveCancelled(stored, transfers: picked.map(\.key), dropped: dropped), at: 0)

        let note: HostEvent.Fields = .init(transfer: reason == .userForceQuitApplication ? .cancelledByUser : .cancelledByRefreshOff)
        let who = reason == .userForceQuitApplication ? "terminated by the user" : "Background App Refresh turned off"
        effects.append(.note(app: app, "\(who): \(entries.count) background transfer(s) cancelled; reported (\(reason.name)) when the app makes their session again", note))
        if !dropped.isEmpty {
            effects.append(.note(app: app, "\(dropped.count) older cancelled transfer(s) will not be reported (at most \(cancelledLimit) are kept per app)",
                                 .init(transfer: .cancelledForgotten)))
        }
        if world.isRunningCode(app) { effects += sendCancelled(app: app, session: nil) }
        // Cancelled, the picked tasks are complete: a session may have none left now.
        if include != nil {
            for session in Set(picked.map(\.value.job.session)).sorted() {
                effects += releaseWaiting(Self.counterKey(app, session), world: world)
            }
        }
        return effects
    }

    /// The app's cancelled transfers of `session` (every session: nil) it has not been
    /// sent yet go to it now (after its session is made, or while it runs code).
    mutating func sendCancelled(app: BundleID, session: SessionIdentifier?) -> [Effect] {
        guard var list = cancelled[app] else { return [] }
        var effects: [Effect] = []
        for i in list.indices where !list[i].sent && (session == nil || list[i].session == session) {
            list[i].sent = true
            effects.append(.mode(.deliver(app: app, list[i].event, wake: .ifRunning,
                                          because: "transfer cancelled by the system (\(list[i].reason.name))")))
        }
        cancelled[app] = list
        return effects
    }

    /// The app returned `didCompleteWithError` for a cancelled transfer: forgotten.
    mutating func cancelledReturned(app: BundleID, session: SessionIdentifier, task: TransferTaskID) -> [Effect] {
        guard let i = cancelled[app]?.firstIndex(where: { $0.sent && $0.session == session && $0.taskIdentifier == task }),
              let entry = cancelled[app]?.remove(at: i) else { return [] }
        if cancelled[app]?.isEmpty == true { cancelled.removeValue(forKey: app) }
        return [.deleteCancelled([entry.id])]
    }

    /// The app's process ended: cancelled transfers sent to it and not returned are sent
    /// again to the next one.
    mutating func cancelledUnsent(app: BundleID) {
        guard var list = cancelled[app] else { return }
        for i in list.indices { list[i].sent = false }
        cancelled[app] = list
    }

    /// Cancelled transfers recorded before a restart, for installed apps (oldest first,
    /// at most ``cancelledLimit`` per app); the ids of the others, to delete.
    mutating func restoreCancelled(_ rows: [CancelledTransfer], installed: Set<BundleID>) -> [TransferID] {
        var orphans: [TransferID] = []
        for row in rows.sorted(by: { $0.id < $1.id }) {
            guard installed.contains(row.bundleIdentifier) else { orphans.append(row.id); continue }
            var entry = row
            entry.sent = false
            cancelled[row.bundleIdentifier, default: []].append(entry)
            let key = Self.counterKey(row.bundleIdentifier, row.session)
            taskCounters[key] = taskCounters[key].map { max($0, row.taskIdentifier) } ?? row.taskIdentifier
        }
        for (app, list) in cancelled where list.count > cancelledLimit {
            orphans += list.prefix(list.count - cancelledLimit).map(\.id)
            cancelled[app] = Array(list.suffix(cancelledLimit))
        }
        return orphans
    }
}
