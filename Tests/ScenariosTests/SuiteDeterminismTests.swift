import AppHostProtocol
import Foundation
import Host
import Testing
import TestSupport
@testable import Scenarios

/// What must repeat from one run of a scenario to the next: each app's events (and the
/// host's own), in order, with their host times and typed fields. Not compared: pids,
/// temporary paths, identifiers an app or the transfer daemon draws at random (UUIDs,
/// transfer ids), the interleaving of different apps' events at one instant (separate
/// processes answering in real time), and where among an app's events the transfer
/// daemon's notes land (a real process, answering when it answers; they are compared
/// as a set).
func comparable(_ events: [HostEvent]) -> (ordered: [String: [String]], daemonNotes: [String: [String]]) {
    var ordered: [String: [String]] = [:]
    var notes: [String: [String]] = [:]
    for e in events {
        var cause = e.cause.replacingOccurrences(of: #"pid \d+"#, with: "pid N", options: .regularExpression)
        cause = cause.replacingOccurrences(of: #"/tmp/apphost-scenario-[0-9a-f]+"#, with: "STATE", options: .regularExpression)
        cause = cause.replacingOccurrences(of: #"-\d{13}-\d+"#, with: "-REPORT", options: .regularExpression)
        cause = cause.replacingOccurrences(of: #"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"#, with: "UUID", options: .regularExpression)
        cause = cause.replacingOccurrences(of: #"transfer \d+"#, with: "transfer N", options: .regularExpression)
        cause = cause.replacingOccurrences(of: #"terminating \d+ app"#, with: "terminating N app", options: .regularExpression)
        let fields = [e.from?.rawValue, e.to?.rawValue, e.callback, e.signal, e.taskName, e.mode, e.transfer?.rawValue,
                      e.began.map { "\($0)" }, e.confirmed.map { "\($0)" }].map { $0 ?? "-" }
        let line = "\(e.time.timeIntervalSince1970) \(e.kind.rawValue) \(fields.joined(separator: " ")) \(cause)"
        let key = e.bundleIdentifier ?? "host"
        if e.transfer != nil && e.kind == .service {
            notes[key, default: []].append(line)
        } else if e.kind == .hostStopping {
            continue // how many apps are still running at shutdown depends on exits in real time
        } else {
            ordered[key, default: []].append(line)
        }
    }
    return (ordered, notes.mapValues { $0.sorted() })
}

@Suite(.tags(.process, .virtualClock), .enabled(if: probeBuilt, "ProbeApp is not built beside the tests (swift build builds it)"))
struct SuiteDeterminismTests {
    @Test func theShippedSuiteGivesTheSameEventsTwice() async throws {
        let suite = try ScenarioSuite.discover([packageRoot + "/scenarios/ios"])
        try #require(suite.files.count >= 40, "scenarios/ios has \(suite.files.count) scenarios")
        let first = await suite.run(with: runner(), jobs: 2)
        let second = await suite.run(with: runner(), jobs: 2)
        #expect(first.count == suite.files.count)
        for (a, b) in zip(first, second) {
            #expect(a.status == .passed, "\(a.file): \(a.failure.map { "\($0.expected) / \($0.seen)" } ?? a.error ?? "")")
            let x = comparable(a.events)
            let y = comparable(b.events)
            #expect(x.ordered.keys.sorted() == y.ordered.keys.sorted(), "\(a.file)")
            for key in x.ordered.keys.sorted() where x.ordered[key] != y.ordered[key] {
                let (l, r) = (x.ordered[key] ?? [], y.ordered[key] ?? [])
                let at = (0..<min(l.count, r.count)).first { l[$0] != r[$0] } ?? min(l.count, r.count)
                Issue.record("\(a.file): \(key)'s events differ at \(at): \(at < l.count ? l[at] : "end") / \(at < r.count ? r[at] : "end")")
            }
            #expect(x.daemonNotes == y.daemonNotes, "\(a.file)")
        }
    }
}
