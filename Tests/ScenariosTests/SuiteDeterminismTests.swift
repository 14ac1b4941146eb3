import AppHostProtocol
import Foundation
import Host
import Testing
import TestSupport
@testable import Scenarios

/// What must repeat from one run of a scenario to the next: every event, the host's
/// and each app's, in one order, with its host time and typed fields, even where two
/// apps (or an app and the transfer daemon) answer at the same virtual instant (the
/// host takes their answers in turns: see `TurnOrder`). Transfer ids start from the
/// virtual epoch and ProbeApp numbers its calls, so they compare too. Not compared:
/// pids, the temporary state directory, and report file names (they hold the pid).
func comparable(_ events: [HostEvent]) -> [String] {
    events.map { e in
        var cause = e.cause.replacingOccurrences(of: #"pid \d+"#, with: "pid N", options: .regularExpression)
        cause = cause.replacingOccurrences(of: #"/tmp/apphost-scenario-[0-9a-f]+"#, with: "STATE", options: .regularExpression)
        cause = cause.replacingOccurrences(of: #"-\d{13}-\d+"#, with: "-REPORT", options: .regularExpression)
        let fields = [e.bundleIdentifier, e.from?.rawValue, e.to?.rawValue, e.callback, e.signal, e.taskName, e.mode, e.transfer?.rawValue,
                      e.began.map { "\($0)" }, e.confirmed.map { "\($0)" }].map { $0 ?? "-" }
        return "\(e.time.timeIntervalSince1970) \(e.kind.rawValue) \(fields.joined(separator: " ")) \(cause)"
    }
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
            let (l, r) = (comparable(a.events), comparable(b.events))
            if l != r {
                let at = (0..<min(l.count, r.count)).first { l[$0] != r[$0] } ?? min(l.count, r.count)
                Issue.record("\(a.file): the events differ at \(at): \(at < l.count ? l[at] : "end") / \(at < r.count ? r[at] : "end")")
            }
        }
    }
}
