import AppHostProtocol
import Foundation
import Host
import Snapshots

/// Checks an expectation at the host's present time; with `within`, moves the virtual
/// clock on in small steps until it holds or the time is up.
struct ExpectationCheck {
    let run: ScenarioRun
    var supervisor: Supervisor { run.supervisor }
    /// How far the clock moves between two looks, for `within`.
    static let pollStep = Duration.milliseconds(100)

    func check(_ e: Expectation) async throws {
        if let refused = e.refused {
            guard let message = run.refusal else {
                throw ScenarioRun.StepFailure(expected: "the previous step refused (\(refused))", seen: "the host did it")
            }
            guard refused.holds(message) else {
                throw ScenarioRun.StepFailure(expected: "the previous step refused \(refused)", seen: "refused: \(message)")
            }
        }
        guard let within = e.within else {
            if let miss = try await firstMiss(e) { throw miss }
            return
        }
        var waited = Duration.zero
        while true {
            guard let miss = try await firstMiss(e) else { return }
            if waited >= within {
                throw ScenarioRun.StepFailure(expected: miss.expected + " within \(ScenarioDuration.format(within))", seen: miss.seen)
            }
            let step = min(Self.pollStep, within - waited)
            _ = try await supervisor.advanceClock(by: step)
            waited += step
        }
    }

    /// The first part of `e` that does not hold now, or nil.
    func firstMiss(_ e: Expectation) async throws -> ScenarioRun.StepFailure? {
        for a in e.apps {
            if let miss = try await app(a) { return miss }
        }
        if !e.reports.isEmpty, let miss = try await reports(e.reports) { return miss }
        if !e.events.isEmpty, let miss = try await events(e.events) { return miss }
        if let p = e.push {
            guard let answer = run.pushAnswer else {
                return .init(expected: "a push answered", seen: "no push step before this expectation")
            }
            if let status = p.status, status != answer.status {
                return .init(expected: "the push answered \(status)", seen: "\(answer.status)\(answer.reason.isEmpty ? "" : " \(answer.reason)")")
            }
            if let reason = p.reason, !reason.holds(answer.reason) {
                return .init(expected: "the push's reason \(reason)", seen: "\"\(answer.reason)\"")
            }
        }
        return nil
    }

    func app(_ a: Expectation.AppExpectation) async throws -> ScenarioRun.StepFailure? {
        let id = try run.id(a.alias)
        let status = try? await supervisor.status(id).first
        if let state = a.state {
            let seen = status?.state
            if seen != state {
                return .init(expected: "\(a.alias) \(state.rawValue)", seen: "\(a.alias) \(seen?.rawValue ?? "unknown")")
            }
        }
        if let process = a.process {
            let seen = Self.process(status?.pid)
            if seen.state != process {
                return .init(expected: "\(a.alias)'s process \(process.rawValue)", seen: "\(seen.state.rawValue)\(seen.detail)")
            }
        }
        if !a.printed.isEmpty {
            let log = Self.tail(of: await supervisor.logPath(of: id))
            for match in a.printed where !log.split(separator: "\n").contains(where: { match.holds(String($0)) }) {
                let last = log.split(separator: "\n").suffix(3).joined(separator: " | ")
                return .init(expected: "\(a.alias) printed a line \(match)", seen: log.isEmpty ? "it printed nothing" : "its last lines: \(last)")
            }
        }
        if !a.snapshotShows.isEmpty || !a.snapshotHides.isEmpty || a.snapshotLeaks != nil {
            await supervisor.waitForSnapshots()
            guard let taken = await supervisor.takenSnapshots(id).last else {
                return .init(expected: "a snapshot of \(a.alias)", seen: "none taken")
            }
            guard let drawing = taken.drawing else {
                return .init(expected: "a snapshot of \(a.alias) drawn", seen: "snapshot \(taken.info.number) was not drawn (policy \(taken.info.policy.rawValue))")
            }
            let texts = drawing.textLayer.map(\.text)
            let all = texts.joined(separator: " | ")
            for s in a.snapshotShows where !texts.contains(where: { $0.contains(s) }) {
                return .init(expected: "snapshot \(taken.info.number) of \(a.alias) shows \"\(s)\"", seen: "its text: \(all.isEmpty ? "none" : all)")
            }
            for s in a.snapshotHides where texts.contains(where: { $0.contains(s) }) {
                return .init(expected: "snapshot \(taken.info.number) of \(a.alias) hides \"\(s)\"", seen: "it shows it: \(all)")
            }
            if let count = a.snapshotLeaks {
                let expected = "snapshot \(taken.info.number) of \(a.alias) with \(count) leak(s)"
                guard let rendered = taken.rendered else {
                    return .init(expected: expected, seen: "its picture cannot be read back (replaced by a newer one, or gone)")
                }
                let bundle = await supervisor.list().first { $0.bundleIdentifier == id }?.bundlePath
                let screen = await supervisor.configuration.screen
                let leaks = PrivacyInspector.inspect(tree: taken.tree, snapshot: rendered, screen: screen, bundlePath: bundle)
                if leaks.count != count {
                    let seen = leaks.map { "\($0.kind) of \($0.view)" }.joined(separator: "; ")
                    return .init(expected: expected, seen: "\(leaks.count)\(leaks.isEmpty ? "" : ": " + seen)")
                }
            }
        }
        if let refresh = a.backgroundRefreshStatus {
            let seen = await supervisor.backgroundRefreshStatus(id)
            if seen != refresh {
                return .init(expected: "\(a.alias)'s backgroundRefreshStatus \(refresh)", seen: seen)
            }
        }
        return nil
    }

    func reports(_ expected: [Expectation.ReportExpectation]) async throws -> ScenarioRun.StepFailure? {
        for r in expected {
            let reports: [TerminationReport]
            if let alias = r.alias {
                reports = (try? await supervisor.reports(try run.id(alias))) ?? []
            } else {
                reports = (try? await supervisor.reports(nil)) ?? []
            }
            let whose = r.alias ?? "any app"
            if r.none {
                if let first = reports.first {
                    return .init(expected: "no report for \(whose)", seen: Self.describe(first))
                }
                continue
            }
            let matching = reports.filter { report in
                (r.code.map { Self.sameCode($0, report.terminationCode) } ?? true)
                    && (r.namespace.map { $0 == report.terminationNamespace } ?? true)
                    && (r.reason.map { $0.holds(report.reason) || $0.holds(report.terminationReason ?? "") } ?? true)
                    && (r.exceptionType.map { $0 == report.exceptionType } ?? true)
                    && (r.exception.map { $0 == report.exception?.name.rawValue } ?? true)
            }
            if matching.isEmpty {
                var want: [String] = []
                if let c = r.code { want.append("code \(c)") }
                if let n = r.namespace { want.append("namespace \(n)") }
                if let reason = r.reason { want.append("reason \(reason)") }
                if let t = r.exceptionType { want.append("type \(t)") }
                if let e = r.exception { want.append("exception \(e)") }
                return .init(expected: "a report for \(whose)\(want.isEmpty ? "" : " with " + want.joined(separator: ", "))",
                             seen: reports.isEmpty ? "no report" : reports.map(Self.describe).joined(separator: "; "))
            }
        }
        return nil
    }

    static func sameCode(_ want: String, _ have: String?) -> Bool {
        guard let have else { return false }
        return want.lowercased() == have.lowercased()
    }

    static func describe(_ r: TerminationReport) -> String {
        "\(r.bundleIdentifier): \(r.exceptionType) \(r.terminationNamespace ?? "-") \(r.terminationCode ?? "-"): \(r.reason)"
    }

    func events(_ expected: [Expectation.EventExpectation]) async throws -> ScenarioRun.StepFailure? {
        let sub = await supervisor.subscribe(bundleIdentifier: nil)
        defer { Task { [supervisor] in await supervisor.unsubscribe(sub.id) } }
        let all = Array(sub.past)
        for want in expected {
            let id = try want.alias.map { alias throws in try run.id(alias) }
            let matching = all.filter { e in
                (want.kind.map { $0 == e.kind } ?? true)
                    && (id.map { $0 == e.bundleIdentifier } ?? true)
                    && (want.from.map { $0 == e.from } ?? true)
                    && (want.to.map { $0 == e.to } ?? true)
                    && (want.callback.map { $0 == e.callback } ?? true)
                    && (want.signal.map { $0 == e.signal?.rawValue } ?? true)
                    && (want.confirmed.map { $0 == (e.confirmed ?? false) } ?? true)
                    && (want.task.map { $0 == e.task } ?? true)
                    && (want.taskName.map { $0 == e.taskName } ?? true)
                    && (want.began.map { $0 == e.began } ?? true)
                    && (want.mode.map { $0 == e.mode?.rawValue } ?? true)
                    && (want.transfer.map { $0 == e.transfer } ?? true)
                    && (want.push.map { $0 == e.push } ?? true)
                    && (want.fetch.map { $0 == e.fetch } ?? true)
                    && (want.apnsID.map { $0 == e.apnsID?.uppercased() } ?? true)
                    && (want.result.map { $0 == e.result?.rawValue } ?? true)
                    && (want.deviceToken.map { $0 == e.deviceToken?.lowercased() } ?? true)
                    && (want.bgTask.map { $0 == e.bgTask } ?? true)
                    && (want.success.map { $0 == e.success } ?? true)
                    && (want.band.map { $0 == e.band?.rawValue } ?? true)
                    && (want.pressure.map { $0 == e.pressure?.rawValue } ?? true)
                    && (want.cause.map { $0.holds(e.cause) } ?? true)
            }
            if !want.count.holds(matching.count) {
                let shown = matching.suffix(3).map(EventText.line)
                return .init(expected: "\(want.count) event(s) \(Self.describe(want))",
                             seen: "\(matching.count)" + (shown.isEmpty ? "" : ": " + shown.joined(separator: " | ")))
            }
        }
        return nil
    }

    static func describe(_ w: Expectation.EventExpectation) -> String {
        var parts: [String] = []
        if let k = w.kind { parts.append("kind \(k.rawValue)") }
        if let a = w.alias { parts.append("app \(a)") }
        if let f = w.from { parts.append("from \(f.rawValue)") }
        if let t = w.to { parts.append("to \(t.rawValue)") }
        if let c = w.callback { parts.append("callback \(c)") }
        if let s = w.signal { parts.append("signal \(s)") }
        if let c = w.confirmed { parts.append("confirmed \(c)") }
        if let t = w.task { parts.append("task id \(t)") }
        if let t = w.taskName { parts.append("task \(t)") }
        if let b = w.began { parts.append(b ? "began" : "ended") }
        if let m = w.mode { parts.append("mode \(m)") }
        if let t = w.transfer { parts.append("transfer \(t.rawValue)") }
        if let p = w.push { parts.append("push \(p)") }
        if let f = w.fetch { parts.append("fetch \(f)") }
        if let a = w.apnsID { parts.append("apns-id \(a)") }
        if let r = w.result { parts.append("result \(r)") }
        if let t = w.deviceToken { parts.append("device token \(t)") }
        if let t = w.bgTask { parts.append("BGTask \(t)") }
        if let s = w.success { parts.append("success \(s)") }
        if let b = w.band { parts.append("band \(b)") }
        if let p = w.pressure { parts.append("pressure \(p)") }
        if let c = w.cause { parts.append("cause \(c)") }
        return parts.isEmpty ? "of any kind" : "with " + parts.joined(separator: ", ")
    }

    /// An app's process as /proc shows it: running, stopped (`T`/`t`), or gone (no pid,
    /// no /proc entry, or a zombie).
    static func process(_ pid: Int32?) -> (state: Expectation.ProcessState, detail: String) {
        guard let pid else { return (.gone, " (no process)") }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return (.gone, " (pid \(pid) is not in /proc)") }
        let rest = stat[stat.index(after: close)...].drop { $0 == " " }
        guard let code = rest.first else { return (.gone, "") }
        switch code {
        case "T", "t": return (.stopped, " (pid \(pid), \(code) in /proc)")
        case "Z", "X": return (.gone, " (pid \(pid) is a zombie)")
        default: return (.running, " (pid \(pid), \(code) in /proc)")
        }
    }

    /// The last 256 KiB of a log.
    static func tail(of path: String) -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else { return "" }
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()) ?? 0
        let start = size > 256 * 1024 ? size - 256 * 1024 : 0
        try? handle.seek(toOffset: start)
        let data = (try? handle.readToEnd()) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}

/// Events as report lines.
public enum EventText {
    /// `+12.500s transition com.example.probe background→suspended: cause`.
    public static func line(_ e: HostEvent) -> String {
        var s = "#\(e.seq) \(e.kind.rawValue)"
        if let app = e.bundleIdentifier { s += " \(app)" }
        if let from = e.from, let to = e.to { s += " \(from.rawValue)→\(to.rawValue)" } else if let to = e.to { s += " →\(to.rawValue)" }
        if let c = e.callback { s += " [\(c)]" }
        if let sig = e.signal { s += " [\(sig)\(e.confirmed == true ? " confirmed" : "")]" }
        let cause = e.cause.count > 200 ? String(e.cause.prefix(200)) + "…" : e.cause
        return s + ": " + cause
    }
}
