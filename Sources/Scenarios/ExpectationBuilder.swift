import AppHostProtocol
import Foundation

/// Reads an `expect:` step.
struct ExpectationBuilder {
    let step: StepBuilder

    static let appKeys = ["state", "process", "printed", "snapshot", "backgroundRefreshStatus"]
    static let reportKeys = ["app", "none", "code", "namespace", "reason", "type", "exception"]
    static let eventKeys = ["kind", "app", "from", "to", "callback", "signal", "confirmed", "task", "taskName", "began", "mode",
                            "transfer", "push", "fetch", "apnsID", "result", "deviceToken", "bgTask", "success", "band", "pressure", "cause", "exactly", "atLeast", "none"]
    static let refreshStatuses = ["available", "denied", "restricted"]

    func expectation(_ node: Located) throws(ScenarioError) -> Expectation {
        var e = Expectation()
        let pairs = try node.mapping("expect")
        guard !pairs.isEmpty else { throw node.error("expect: what must hold? (expect: {probe: {state: background}})") }
        for (key, keyNode, value) in pairs {
            switch key {
            case "within":
                let d = try value.duration("within")
                guard d > .zero, d <= .seconds(86_400) else { throw value.error("within: over 0 and at most 24h of host time") }
                e.within = d
            case "report", "reports":
                if case .scalar = value.node {
                    guard try value.string(key) == "none" else { throw value.error("\(key): none, or {app: probe, code: ...}") }
                    e.reports.append(contentsOf: step.aliases.map { Expectation.ReportExpectation(alias: $0, none: true) })
                } else if case .sequence(let seq) = value.node {
                    for item in seq { e.reports.append(try report(Located(node: item, file: value.file))) }
                } else {
                    e.reports.append(try report(value))
                }
            case "events", "event":
                if case .sequence(let seq) = value.node {
                    guard seq.count <= ScenarioReader.maximumListCount else { throw value.error("events: at most \(ScenarioReader.maximumListCount)") }
                    for item in seq { e.events.append(try event(Located(node: item, file: value.file))) }
                } else {
                    e.events.append(try event(value))
                }
            case "refused":
                // `refused: true`: refused for any reason.
                if case .scalar = value.node, ["true", "yes"].contains(try value.scalar("refused").lowercased()) {
                    e.refused = .any
                } else {
                    e.refused = try text(value, "refused")
                }
            case "push":
                let k = try step.keyed(value, "expect.push", known: ["status", "reason"])
                var p = Expectation.PushAnswerExpectation()
                p.status = try k["status"]?.int("push.status", in: 100...599)
                p.reason = try k["reason"].map { n throws(ScenarioError) in try text(n, "push.reason") }
                e.push = p
            default:
                guard step.aliases.contains(key) else {
                    throw keyNode.error(unknown("app or expectation", key, known: step.aliases + ScenarioReader.expectKeys))
                }
                e.apps.append(try app(key, value))
            }
        }
        return e
    }

    func app(_ alias: String, _ node: Located) throws(ScenarioError) -> Expectation.AppExpectation {
        var a = Expectation.AppExpectation(alias: alias)
        for (key, keyNode, value) in try node.mapping("expect.\(alias)") {
            switch key {
            case "state":
                let s = try value.string("state")
                guard let state = AppState(rawValue: s) else { throw value.error(unknown("state", s, known: AppState.allCases.map(\.rawValue))) }
                a.state = state
            case "process":
                let s = try value.string("process")
                guard let p = Expectation.ProcessState(rawValue: s) else {
                    throw value.error(unknown("process state", s, known: Expectation.ProcessState.allCases.map(\.rawValue)))
                }
                a.process = p
            case "printed":
                if case .sequence(let seq) = value.node {
                    for item in seq { a.printed.append(try text(Located(node: item, file: value.file), "printed")) }
                } else {
                    a.printed.append(try text(value, "printed"))
                }
            case "snapshot":
                let k = try step.keyed(value, "snapshot", known: ["shows", "hides", "leaks"])
                a.snapshotShows = try k["shows"]?.strings("snapshot.shows") ?? []
                a.snapshotHides = try k["hides"]?.strings("snapshot.hides") ?? []
                a.snapshotLeaks = try k["leaks"]?.int("snapshot.leaks", in: 0...10_000)
            case "backgroundRefreshStatus":
                let s = try value.string(key)
                guard Self.refreshStatuses.contains(s) else { throw value.error(unknown("status", s, known: Self.refreshStatuses)) }
                a.backgroundRefreshStatus = s
            default:
                throw keyNode.error(unknown("expectation of an app", key, known: Self.appKeys))
            }
        }
        return a
    }

    func report(_ node: Located) throws(ScenarioError) -> Expectation.ReportExpectation {
        let k = try step.keyed(node, "report", known: Self.reportKeys)
        var r = Expectation.ReportExpectation()
        if let a = k["app"] { r.alias = try step.alias(a, "report.app") }
        r.none = try k["none"]?.bool("report.none") ?? false
        r.code = try k["code"]?.string("report.code")
        r.namespace = try k["namespace"]?.string("report.namespace")
        r.reason = try k["reason"].map { n throws(ScenarioError) in try text(n, "report.reason") }
        r.exceptionType = try k["type"]?.string("report.type")
        r.exception = try k["exception"]?.string("report.exception")
        if r.none, r.code != nil || r.namespace != nil || r.reason != nil || r.exceptionType != nil || r.exception != nil {
            throw node.error("report: none: true says the app has no report; it takes no code, namespace, reason, type or exception")
        }
        return r
    }

    func event(_ node: Located) throws(ScenarioError) -> Expectation.EventExpectation {
        let k = try step.keyed(node, "event", known: Self.eventKeys)
        var e = Expectation.EventExpectation()
        if let n = k["kind"] {
            let s = try n.string("kind")
            guard let kind = HostEvent.Kind(rawValue: s) else { throw n.error(unknown("event kind", s, known: HostEvent.Kind.allCases.map(\.rawValue))) }
            e.kind = kind
        }
        if let a = k["app"] { e.alias = try step.alias(a, "event.app") }
        for (key, set) in [("from", { (e: inout Expectation.EventExpectation, s: AppState) in e.from = s }),
                           ("to", { (e: inout Expectation.EventExpectation, s: AppState) in e.to = s })] {
            if let n = k[key] {
                let s = try n.string(key)
                guard let state = AppState(rawValue: s) else { throw n.error(unknown("state", s, known: AppState.allCases.map(\.rawValue))) }
                set(&e, state)
            }
        }
        e.callback = try k["callback"]?.string("callback")
        if let n = k["signal"] {
            let s = try n.string("signal")
            guard ["SIGSTOP", "SIGCONT", "SIGKILL", "SIGTERM"].contains(s) else {
                throw n.error(unknown("signal", s, known: ["SIGSTOP", "SIGCONT", "SIGKILL", "SIGTERM"]))
            }
            e.signal = s
        }
        e.confirmed = try k["confirmed"]?.bool("confirmed")
        if let n = k["task"] { e.task = BackgroundTaskID(try n.int("task", in: 1...Int.max)) }
        e.taskName = try k["taskName"]?.string("taskName")
        e.began = try k["began"]?.bool("began")
        e.mode = try k["mode"]?.string("mode")
        if let n = k["transfer"] {
            let s = try n.string("transfer")
            guard let t = TransferNote(rawValue: s) else { throw n.error(unknown("transfer note", s, known: TransferNote.allCases.map(\.rawValue))) }
            e.transfer = t
        }
        e.push = try k["push"].map { n throws(ScenarioError) in UInt64(try n.int("push", in: 1...Int.max)) }
        e.fetch = try k["fetch"].map { n throws(ScenarioError) in UInt64(try n.int("fetch", in: 1...Int.max)) }
        e.apnsID = try k["apnsID"]?.string("apnsID").uppercased()
        if let n = k["result"] {
            let s = try n.string("result")
            guard FetchResult(rawValue: s) != nil else { throw n.error(unknown("result", s, known: FetchResult.allCases.map(\.rawValue))) }
            e.result = s
        }
        e.deviceToken = try k["deviceToken"]?.string("deviceToken").lowercased()
        e.bgTask = try k["bgTask"]?.string("bgTask")
        e.success = try k["success"]?.bool("success")
        if let n = k["band"] {
            let s = try n.string("band")
            guard JetsamBand(rawValue: s) != nil else { throw n.error(unknown("jetsam band", s, known: JetsamBand.allCases.map(\.rawValue))) }
            e.band = s
        }
        if let n = k["pressure"] {
            let s = try n.string("pressure")
            guard MemoryPressureLevel(rawValue: s) != nil else { throw n.error(unknown("pressure", s, known: MemoryPressureLevel.allCases.map(\.rawValue))) }
            e.pressure = s
        }
        e.cause = try k["cause"].map { n throws(ScenarioError) in try text(n, "cause") }
        let counts = [k["exactly"].map { ("exactly", $0) }, k["atLeast"].map { ("atLeast", $0) }, k["none"].map { ("none", $0) }].compactMap { $0 }
        guard counts.count <= 1 else { throw node.error("event: one of exactly, atLeast or none") }
        if let (which, n) = counts.first {
            switch which {
            case "exactly": e.count = .exactly(try n.int("exactly", in: 0...1_000_000))
            case "atLeast": e.count = .atLeast(try n.int("atLeast", in: 0...1_000_000))
            default:
                guard try n.bool("none") else { throw n.error("none: true (or leave it out)") }
                e.count = .none
            }
        }
        return e
    }

    /// A plain string (contained), or `{contains: s}`, `{equals: s}`, `{matches: regex}`.
    func text(_ node: Located, _ what: String) throws(ScenarioError) -> TextMatch {
        guard node.isMapping else { return .contains(try node.string(what)) }
        let k = try step.keyed(node, what, known: ["contains", "equals", "matches"])
        guard k.count == 1, let (key, v) = k.first else { throw node.error("\(what): one of contains, equals or matches") }
        let s = try v.string("\(what).\(key)")
        switch key {
        case "contains": return .contains(s)
        case "equals": return .equals(s)
        default:
            guard (try? NSRegularExpression(pattern: s)) != nil else { throw v.error("\(what).matches: \"\(s)\" is not a regular expression") }
            return .matches(s)
        }
    }
}
