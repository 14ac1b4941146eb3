import AppHostProtocol
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
import TestSupport
@testable import Scenarios

/// The repository's root (for manifests/ and scenarios/).
let packageRoot: String = {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
}()

/// Parses `yaml` as if it were `dir/s.yaml` (relative bundle paths resolve from the repository's root).
func parse(_ yaml: String, file: String = packageRoot + "/scenarios/t.yaml") throws(ScenarioError) -> Scenario {
    try ScenarioReader.parse(yaml, file: file)
}

/// The error `yaml` gives (or an issue if it parses).
func failure(_ yaml: String, sourceLocation: SourceLocation = #_sourceLocation) -> ScenarioError? {
    do {
        _ = try parse(yaml)
        Issue.record("parsed, but should not have", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

let header = """
    name: t
    apps:
      probe: ../manifests/Probe.app
    steps:

    """

@Suite struct ScenarioReaderTests {
    @Test func theIssuesExampleReads() throws {
        let s = try ScenarioReader.read(path: packageRoot + "/scenarios/examples/upload-expires.yaml")
        #expect(s.name == "An upload held past the background budget ends in 0x8badf00d")
        #expect(s.profile == "ios13")
        #expect(s.apps.map(\.alias) == ["probe"])
        #expect(s.apps[0].bundle == packageRoot + "/manifests/Probe.app")
        #expect(s.apps[0].args == ["--ignore-expiration", "--on", "background", "begin-task:upload"])
        #expect(s.steps.count == 6)
        #expect(s.steps[2].action == .advance(.seconds(29)))
        guard case .expect(let last) = s.steps[5].action else { Issue.record("not an expectation"); return }
        #expect(last.apps == [Expectation.AppExpectation(alias: "probe", state: .notRunning, process: .gone)])
        #expect(last.reports.first?.code == "0x8badf00d")
        #expect(last.reports.first?.namespace == "RUNNINGBOARD")
        #expect(last.reports.first?.reason == .contains("upload"))
        #expect(s.steps[0].position.line == 11)
    }

    @Test func jsonIsReadByTheSameReader() throws {
        let s = try parse(#"{"name": "j", "apps": {"probe": "../manifests/Probe.app"}, "steps": [{"launch": "probe"}, {"advance": "2s"}, {"expect": {"probe": {"state": "active"}}}]}"#)
        #expect(s.steps.count == 3)
        #expect(s.steps[1].action == .advance(.seconds(2)))
    }

    @Test func anUnknownStepSaysWhereAndSuggests() throws {
        let e = try #require(failure(header + "  - launch: probe\n  - advanec: 3s\n"))
        #expect(e.line == 6)
        #expect(e.column == 5)
        #expect(e.message.contains("unknown step \"advanec\""))
        #expect(e.message.contains("did you mean \"advance\"?"))
        #expect(e.description.hasPrefix(packageRoot + "/scenarios/t.yaml:6:5: "))
    }

    @Test func anUnknownExpectationKeySuggests() throws {
        let e = try #require(failure(header + "  - expect: {probe: {stat: active}}\n"))
        #expect(e.line == 5)
        #expect(e.message.contains("did you mean \"state\"?"))
        let s = try #require(failure(header + "  - expect: {probe: {state: backgound}}\n"))
        #expect(s.message.contains("did you mean \"background\"?"))
        let k = try #require(failure(header + "  - expect: {evnets: []}\n"))
        #expect(k.message.contains("did you mean \"events\"?"))
    }

    @Test func anUnknownAliasNamesTheKnownOnes() throws {
        let e = try #require(failure(header + "  - launch: prob\n"))
        #expect(e.message.contains("unknown app \"prob\" (did you mean \"probe\"?); known: probe"))
        #expect(e.line == 5)
    }

    @Test func aDurationThatDoesNotParse() throws {
        for bad in ["3 parsecs", "-1s", "s", "1e400", "12x"] {
            let e = try #require(failure(header + "  - advance: \"\(bad)\"\n"))
            #expect(e.message.contains("is not a duration"), "\(bad): \(e.message)")
        }
    }

    @Test func durations() {
        #expect(ScenarioDuration.parse("30s") == .seconds(30))
        #expect(ScenarioDuration.parse("1.5s") == .milliseconds(1500))
        #expect(ScenarioDuration.parse("250ms") == .milliseconds(250))
        #expect(ScenarioDuration.parse("2m") == .seconds(120))
        #expect(ScenarioDuration.parse("1h30m") == .seconds(5400))
        #expect(ScenarioDuration.parse("1d") == .seconds(86_400))
        #expect(ScenarioDuration.parse("7") == .seconds(7))
        #expect(ScenarioDuration.parse("11y") == nil)
        #expect(ScenarioDuration.parse(String(repeating: "1", count: 100) + "s") == nil)
        #expect(ScenarioDuration.format(.seconds(29)) == "29s")
        #expect(ScenarioDuration.format(.milliseconds(250)) == "250ms")
    }

    @Test func aBundleThatDoesNotExistIsNamed() throws {
        let e = try #require(failure("name: t\napps:\n  probe: ../manifests/Prob.app\nsteps: []\n"))
        #expect(e.line == 3)
        #expect(e.message.contains("no bundle at \(packageRoot)/manifests/Prob.app"))
    }

    @Test func brokenYAMLSaysWhere() throws {
        let e = try #require(failure("name: t\napps: {probe: ../manifests/Probe.app\nsteps: []\n"))
        #expect(e.line != nil)
        #expect(e.message.hasPrefix("not valid YAML"))
    }

    @Test func missingPartsAreNamed() throws {
        #expect(failure("apps: {probe: ../manifests/Probe.app}\nsteps: []\n")?.message.contains("no name") == true)
        #expect(failure("name: t\nsteps: []\n")?.message.contains("no apps") == true)
        #expect(failure("name: t\napps: {probe: ../manifests/Probe.app}\n")?.message.contains("no steps") == true)
        #expect(failure("name: t\napps: {report: ../manifests/Probe.app}\nsteps: []\n")?.message.contains("cannot name an app") == true)
        #expect(failure(header + "  - {launch: probe, advance: 1s}\n")?.message.contains("one verb") == true)
        #expect(failure("name: t\nprofile: ios99\napps: {probe: ../manifests/Probe.app}\nsteps: []\n")?.message.contains("unknown profile") == true)
    }

    @Test func theBoundsHold() throws {
        // Over 1 MiB: refused before it is parsed.
        let dir = try TempDir("scn-big")
        defer { dir.remove() }
        let big = dir.path + "/big.yaml"
        try Data(repeating: 0x20, count: ScenarioReader.maximumFileBytes + 1).write(to: URL(fileURLWithPath: big))
        #expect(throws: ScenarioError.self) { try ScenarioReader.read(path: big) }
        do { _ = try ScenarioReader.read(path: big) } catch { #expect(error.message.contains("at most 1 MiB")) }
        // Too many steps.
        let steps = String(repeating: "  - advance: 1s\n", count: ScenarioReader.maximumSteps + 1)
        #expect(failure(header + steps)?.message.contains("at most \(ScenarioReader.maximumSteps)") == true)
        // A string over 64 KiB.
        let long = String(repeating: "a", count: ScenarioReader.maximumStringBytes + 1)
        #expect(failure("name: \(long)\napps: {probe: ../manifests/Probe.app}\nsteps: []\n")?.message.contains("at most") == true)
    }

    @Test func pushesInlineAndFromFiles() throws {
        let s = try parse(header + """
              - push: {app: probe, payload: {aps: {content-available: 1}}, priority: 5}
              - push: {app: probe, file: ../manifests/Probe.app/Info.plist, type: voip}

            """)
        guard case .push(let inline) = s.steps[0].action, case .push(let file) = s.steps[1].action else {
            Issue.record("not pushes"); return
        }
        #expect(inline.payload == #"{"aps":{"content-available":1}}"#)
        #expect(inline.priority == 5)
        #expect(file.type == "voip")
        #expect(failure(header + "  - push: {app: probe, payload: {}, priority: 700}\n")?.message.contains("from 0 to 100") == true)
    }

    @Test func eventExpectationsAreTyped() throws {
        let s = try parse(header + "  - expect: {events: [{kind: signal, app: probe, signal: SIGSTOP, exactly: 2}, {kind: callback, callback: didEnterBackground}, {kind: modeRefused, none: true}]}\n")
        guard case .expect(let e) = s.steps[0].action else { Issue.record("not an expectation"); return }
        #expect(e.events.count == 3)
        #expect(e.events[0].signal == "SIGSTOP")
        #expect(e.events[0].count == .exactly(2))
        #expect(e.events[1].count == .atLeast(1))
        #expect(e.events[2].count == .none)
        #expect(failure(header + "  - expect: {events: [{kind: signl}]}\n")?.message.contains("did you mean \"signal\"?") == true)
        #expect(failure(header + "  - expect: {events: [{kind: signal, exactly: 1, none: true}]}\n")?.message.contains("one of exactly") == true)
    }
}

@Suite struct ScenarioSuiteTests {
    func suite(_ n: Int) -> ScenarioSuite {
        ScenarioSuite(files: (1...n).map { ScenarioSuite.File(path: "/s/\($0).yaml", display: "s/\($0).yaml") })
    }

    @Test func shardsAreDisjointAndCoverTheSuite() {
        for total in [1, 7, 40, 41] {
            for n in [1, 2, 3, 4, 5] {
                let parts = (1...n).map { suite(total).shard($0, of: n).files.map(\.path) }
                let all = parts.flatMap { $0 }
                #expect(all.count == total, "\(total) in \(n)")
                #expect(Set(all).count == total)
                #expect(Set(all) == Set(suite(total).files.map(\.path)))
                // Balanced, and the same every time.
                #expect(parts.map(\.count).max()! - parts.map(\.count).min()! <= 1)
                #expect(parts == (1...n).map { suite(total).shard($0, of: n).files.map(\.path) })
            }
        }
    }

    @Test func shardArguments() {
        #expect(ScenarioSuite.parseShard("2/4")! == (2, 4))
        for bad in ["0/4", "5/4", "2/0", "a/b", "2", "2/4/1", "-1/4", "1/1001"] {
            #expect(ScenarioSuite.parseShard(bad) == nil, "\(bad)")
        }
    }

    @Test func discoveryFindsYAMLAndJSONInPathOrder() throws {
        let dir = try TempDir("scn-find")
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.path + "/b", withIntermediateDirectories: true)
        for f in ["b/2.yml", "a.yaml", "c.json", "notes.txt", "b/1.YAML"] {
            FileManager.default.createFile(atPath: dir.path + "/" + f, contents: Data("x".utf8))
        }
        let found = try ScenarioSuite.discover([dir.path]).files.map { ($0.path as NSString).lastPathComponent }
        #expect(found == ["a.yaml", "1.YAML", "2.yml", "c.json"])
        #expect(throws: ScenarioError.self) { try ScenarioSuite.discover([dir.path + "/missing"]) }
    }

    @Test func junitIsWellFormedAndEscaped() throws {
        let results = [
            ScenarioResult(name: "ok <1>", file: "a.yaml", status: .passed, seconds: 0.1),
            ScenarioResult(name: "bad & \u{1}", file: "b.yaml", status: .failed,
                           failure: .init(step: 2, line: 9, column: 5, stepText: "expect: {probe: {state: active}}",
                                          expected: "probe active", seen: "probe \"suspended\"", time: nil, recentEvents: ["#3 <x>"])),
            ScenarioResult(name: "err", file: "c.yaml", status: .error, error: "c.yaml:3:1: unknown step"),
        ]
        let xml = ScenarioReports.junit(results)
        #expect(xml.contains(#"tests="3" failures="1" errors="1""#))
        #expect(xml.contains("expected probe active; seen probe &quot;suspended&quot;"))
        #expect(!xml.contains("\u{1}"))
        let parser = XMLParser(data: Data(xml.utf8))
        #expect(parser.parse(), "\(parser.parserError.map { "\($0)" } ?? "")")
        #expect(ScenarioReports.exitStatus(results) == 2)
        #expect(ScenarioReports.exitStatus(Array(results.prefix(2))) == 1)
        #expect(ScenarioReports.exitStatus(Array(results.prefix(1))) == 0)
    }
}

/// Device memory in scenario files: `deviceMemory:`, `device: {memory: ...}` and the
/// `memory` events' typed fields.
@Suite struct ScenarioMemoryReaderTests {
    @Test func deviceMemoryAndTheMemoryStep() throws {
        let s = try parse("""
            name: t
            deviceMemory: 512 MiB
            apps:
              probe: ../manifests/Probe.app
            steps:
              - device: { memory: critical }
              - expect:
                  events:
                    - {kind: memory, app: probe, band: suspended, pressure: critical}
            """)
        #expect(s.deviceMemory == 512 << 20)
        #expect(s.steps[0].action == .mode(.deviceMemory(.critical), what: "device memory critical"))
        guard case .expect(let e) = s.steps[1].action else { Issue.record("not an expectation"); return }
        #expect(e.events.first?.band == "suspended" && e.events.first?.pressure == "critical")
        #expect(try parse(header + "  - advance: 1s\n").deviceMemory == nil, "the profile's when not said")
    }

    @Test func badMemoryInputIsNamed() throws {
        let tooSmall = try #require(failure("name: t\ndeviceMemory: 1 MiB\napps:\n  probe: ../manifests/Probe.app\nsteps:\n  - advance: 1s\n"))
        #expect(tooSmall.message.contains("deviceMemory: 1 MiB is out of range (32 MiB to 16 TiB)"), "\(tooSmall.message)")
        let notSize = try #require(failure("name: t\ndeviceMemory: lots\napps:\n  probe: ../manifests/Probe.app\nsteps:\n  - advance: 1s\n"))
        #expect(notSize.message.contains("deviceMemory: not a size"), "\(notSize.message)")
        let level = try #require(failure(header + "  - device: { memory: critcal }\n"))
        #expect(level.message.contains("critical"), "\(level.message)")
        let band = try #require(failure(header + "  - expect: { events: [{kind: memory, band: idle}] }\n"))
        #expect(band.message.contains("backgroundActivity"), "\(band.message)")
    }
}
