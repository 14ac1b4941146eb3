import Foundation
import Testing
import TestSupport
@testable import Scenarios

/// `requires:`: a scenario the machine cannot run is skipped, saying why, and counts
/// as neither a failure nor an error.
@Suite struct ScenarioRequirementTests {
    func write(_ yaml: String, in dir: TempDir) throws -> String {
        let path = dir.path + "/r.yaml"
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func aScenarioThatNeedsRootIsSkippedWithoutItAndRunsWithIt() async throws {
        let dir = try TempDir("scn-req")
        defer { dir.remove() }
        let path = try write("""
            name: needs root
            requires: [root]
            apps:
              probe: \(packageRoot)/manifests/Probe.app
            steps:
              - install: probe
            """, in: dir)
        var r = runner()
        r.hostUID = 1000
        let skipped = await r.run(path: path, display: "r.yaml")
        #expect(skipped.status == .skipped)
        #expect(skipped.error?.contains("needs root") == true && skipped.error?.contains("uid 1000") == true)
        #expect(skipped.events.isEmpty, "no host was started")
        #expect(ScenarioReports.exitStatus([skipped]) == 0)
        #expect(ScenarioReports.line(skipped).hasPrefix("SKIP "))
        #expect(ScenarioReports.summary([skipped], seconds: 0).contains("1 skipped"))
        let junit = ScenarioReports.junit([skipped])
        #expect(junit.contains(#"<skipped message="needs root"#) && junit.contains(#"skipped="1""#))
        let scenario = try ScenarioReader.read(path: path)
        #expect(scenario.requires == [.root])
        #expect(Scenario.Requirement.root.unmet(uid: 0) == nil)
    }

    @Test func anUnknownRequirementIsABadFileWithTheNearestKnownOne() throws {
        let dir = try TempDir("scn-req2")
        defer { dir.remove() }
        let path = try write("""
            name: typo
            requires: roots
            apps:
              probe: \(packageRoot)/manifests/Probe.app
            steps:
              - install: probe
            """, in: dir)
        #expect {
            try ScenarioReader.read(path: path)
        } throws: { error in
            let text = "\(error)"
            return text.contains("r.yaml:2:") && text.contains("unknown requirement \"roots\"") && text.contains("did you mean \"root\"")
        }
    }
}
