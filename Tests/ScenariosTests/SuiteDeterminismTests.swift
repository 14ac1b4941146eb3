import AppHostProtocol
import Foundation
import Host
import Testing
import TestSupport
@testable import Scenarios

@Suite(.tags(.process, .virtualClock), .enabled(if: probeBuilt, "ProbeApp is not built beside the tests (swift build builds it)"))
struct SuiteDeterminismTests {
    @Test(.tags(.slow)) func theShippedSuiteGivesTheSameEventsTwice() async throws {
        let suite = try ScenarioSuite.discover([packageRoot + "/scenarios/ios"])
        try #require(suite.files.count >= 40, "scenarios/ios has \(suite.files.count) scenarios")
        let first = await suite.run(with: runner(), jobs: 2)
        let second = await suite.run(with: runner(), jobs: 2)
        #expect(first.count == suite.files.count)
        for (a, b) in zip(first, second) {
            #expect(a.status == .passed, "\(a.file): \(a.failure.map { "\($0.expected) / \($0.seen)" } ?? a.error ?? "")")
            if let (at, left, right) = EventComparison.firstDifference(a.events, b.events) {
                Issue.record("\(a.file): the events differ at \(at): \(left) / \(right)")
            }
        }
    }
}
