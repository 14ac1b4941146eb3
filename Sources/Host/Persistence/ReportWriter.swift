import AppHostProtocol
import AppHostSystem
import Foundation
import Logging
import SystemPackage
import Synchronization

/// Termination reports, written in one place: the `report` row of the database and
/// `reports/<id>.json` (0600, whole or not at all), then a `report` event.
struct ReportWriter {
    let store: Store
    let directory: String
    let logger: Logger
    /// Reports a full disk kept from the database or `reports/`, written again first by
    /// the next ``write(_:events:)`` or ``retryUnwritten()`` (at most
    /// ``maximumUnwritten``; past that the oldest are dropped and the log says so).
    let unwritten = UnwrittenReports()

    /// At most this many reports wait for the disk.
    static let maximumUnwritten = 1_000

    final class UnwrittenReports: Sendable {
        let reports = Mutex<[TerminationReport]>([])
        var isEmpty: Bool { reports.withLock { $0.isEmpty } }
    }

    /// `<bundle id>-<ms since 1970>-<pid>`: unique per app and process, sorts by time, and
    /// fits a file name for any valid bundle id (155 characters at most).
    static func reportID(app: BundleID, time: Date, pid: Int32?) -> String {
        "\(app)-\(Int(time.timeIntervalSince1970 * 1000))-\(pid ?? 0)"
    }

    /// The report of a process that ended (or never started: `status` nil) as `record` says.
    static func report(app: BundleID, pid: Int32?, status: ExitStatus?, record: Lifecycle.TerminationRecord,
                       history: [StateRecord], time: Date) -> TerminationReport {
        var signal: Int32?
        var exitCode: Int32?
        let exceptionType: String
        switch status {
        case .signaled(let s, _)?:
            signal = s
            exceptionType = "EXC_CRASH (\(signalName(s)))"
        case .exited(let code)?:
            exitCode = code
            exceptionType = code == 0 ? "EXIT" : "EXIT (code \(code))"
        case nil:
            exceptionType = "SPAWN_FAILED"
        }
        return TerminationReport(
            id: reportID(app: app, time: time, pid: pid), bundleIdentifier: app, pid: pid ?? 0, time: time,
            exceptionType: exceptionType, exitStatus: exitCode, signal: signal, signalName: signal.map(signalName),
            terminationNamespace: record.namespace, terminationCode: record.code?.hex, reason: record.reason,
            explanation: record.code.map { "\($0.meaning). What to do: \($0.advice)." },
            backgroundTasks: record.tasks, budget: record.budget, lastStates: Array(history.suffix(16)),
            footprint: record.footprint, jetsamBand: record.band?.rawValue, exception: record.exception)
    }

    /// Stores `report` and writes its JSON file, then records the `report` event. A write
    /// that fails is logged: the event still says the app ended and why.
    func write(_ report: TerminationReport, events: EventLog) {
        retryUnwritten()
        do {
            try save(report)
        } catch {
            logger.error("could not write the termination report of \(report.bundleIdentifier): \(error); it is written again when the disk takes it")
            keep([report])
        }
        events.append(.report, app: report.bundleIdentifier, pid: report.pid == 0 ? nil : report.pid,
                      cause: "termination report \(report.id): \(report.reason)", time: report.time)
    }

    /// The report's row, then its file (whole or not at all).
    private func save(_ report: TerminationReport) throws {
        try store.saveReport(report)
        let data = try WireJSON.encoder(pretty: true).encode(report)
        let path = directory + "/\(report.id).json"
        let temp = path + ".tmp"
        guard FileManager.default.createFile(atPath: temp, contents: data, attributes: [.posixPermissions: 0o600]),
              rename(temp, path) == 0 else {
            let code = errno
            unlink(temp)
            throw ReportWriteError(path: path, code: code)
        }
    }

    private func keep(_ reports: [TerminationReport]) {
        let dropped = unwritten.reports.withLock { waiting -> [TerminationReport] in
            waiting += reports
            let over = waiting.count - Self.maximumUnwritten
            guard over > 0 else { return [] }
            defer { waiting.removeFirst(over) }
            return Array(waiting.prefix(over))
        }
        for report in dropped {
            logger.error("termination report \(report.id) dropped: more than \(Self.maximumUnwritten) reports waited for the disk")
        }
    }

    /// Writes the reports a full disk held back, in order; those that still fail wait on.
    func retryUnwritten() {
        let waiting = unwritten.reports.withLock { waiting -> [TerminationReport] in
            defer { waiting.removeAll() }
            return waiting
        }
        guard !waiting.isEmpty else { return }
        var failed: [TerminationReport] = []
        for report in waiting {
            if !failed.isEmpty { failed.append(report); continue }
            do {
                try save(report)
                logger.notice("termination report \(report.id) written once the disk took it")
            } catch {
                failed.append(report)
            }
        }
        if !failed.isEmpty { keep(failed) }
    }

    /// After a crash of the host (kill -9, a power cut) its apps died with it (PDEATHSIG)
    /// and nothing said how. For each app whose last recorded state is not notRunning,
    /// records the transition to notRunning and an APPHOST report. Returns when each changed.
    /// `killedAtStart` are the apps whose processes were still there, with their pids
    /// (see ``Supervisor/killLeftoverProcesses(apps:identities:events:logger:time:)``).
    func recordEndedWithHost(apps: [BundleID], killedAtStart: [BundleID: [Int32]] = [:], events: EventLog, time: Date) -> [BundleID: Date] {
        let cause = "ended with the host (the host stopped without shutting down)"
        var changed: [BundleID: Date] = [:]
        var rows: [Store.TransitionRow] = []
        for id in apps {
            let states: [StateRecord]
            do {
                states = try store.recentStates(bundleIdentifier: id, limit: 16)
            } catch {
                logger.error("could not read the last state of \(id): \(error)")
                continue
            }
            guard let last = states.last, last.state != .notRunning else { continue }
            let event = try? events.append(.transition, app: id, from: last.state, to: .notRunning, cause: cause, time: time).get()
            rows.append(Store.TransitionRow(bundleIdentifier: id, pid: nil, from: last.state, to: .notRunning, cause: cause, time: time,
                                            seq: event?.seq))
            let report = TerminationReport(
                id: ReportWriter.reportID(app: id, time: time, pid: nil), bundleIdentifier: id, pid: 0, time: time,
                exceptionType: "HOST_ENDED",
                exitStatus: nil, signal: nil, signalName: nil, terminationNamespace: "APPHOST", terminationCode: nil,
                reason: "the app was \(last.state.rawValue) when the host ended without shutting down (killed, or the machine stopped); "
                    + (killedAtStart[id].map { "its process was still there (pid \($0.map(String.init).joined(separator: ", "))) and was killed by this host at its start" }
                        ?? "the app ended with it (its parent-death signal)"),
                explanation: "Found by the next host at its start; how the app's process ended was not observed.",
                lastStates: states + [StateRecord(state: .notRunning, time: time, cause: cause)])
            write(report, events: events)
            changed[id] = time
        }
        if !rows.isEmpty {
            store.recordTransitions(rows) { error in logger.error("could not record state transitions: \(error)") }
        }
        return changed
    }
}

/// A report file that could not be written.
struct ReportWriteError: Error, CustomStringConvertible {
    var path: String
    var code: Int32
    var description: String { "cannot write \(path): \(Errno(rawValue: code))" }
}
