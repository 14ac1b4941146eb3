import AppHostProtocol
import AppHostSystem
import Foundation
@testable import Scenarios
import TestSupport
import Testing
#if canImport(FoundationXML)
import FoundationXML
#endif

/// `apphost test` run as a user runs it: a directory holding a passing, a failing and a
/// broken scenario.
@Suite("apphost test", .tags(.process, .virtualClock), .timeLimit(.minutes(3)),
       .enabled(if: TimelineCLITests.built && probeBuilt, "apphost or ProbeApp is not built beside the tests"))
struct TestCLITests {
    func write(_ dir: TempDir) throws {
        try FileManager.default.createDirectory(atPath: dir.path + "/s/sub", withIntermediateDirectories: true)
        let probe = packageRoot + "/manifests/Probe.app"
        try """
            name: home suspends
            rule: an app with nothing to do is suspended at home
            source: IOS-MODEL.md
            apps: {probe: \(probe)}
            steps:
              - launch: probe
              - home: probe
              - expect: {probe: {state: suspended, process: stopped}}
            """.write(toFile: dir.path + "/s/a-pass.yaml", atomically: true, encoding: .utf8)
        try """
            name: wrong on purpose
            apps: {probe: \(probe)}
            steps:
              - launch: probe
              - expect: {probe: {state: background}}
            """.write(toFile: dir.path + "/s/sub/b-fail.yml", atomically: true, encoding: .utf8)
        try #"{"name": "broken", "apps": {"probe": "\#(probe)"}, "steps": [{"advanse": "1s"}]}"#
            .write(toFile: dir.path + "/s/c-broken.json", atomically: true, encoding: .utf8)
    }

    func apphost(_ arguments: [String], in dir: TempDir) async throws -> (status: AppHostSystem.ExitStatus?, stdout: String, stderr: String) {
        try await runToExit(TimelineCLITests.apphost, arguments, in: dir.path, environment: ["HOME": dir.path, "PATH": "/usr/bin:/bin"])
    }

    @Test func aSuiteWithAFailureAndABrokenFile() async throws {
        let dir = try TempDir("cli-test")
        defer { dir.remove() }
        try write(dir)
        let r = try await apphost(["test", dir.path + "/s", "--jobs", "2", "--junit", dir.path + "/out.xml", "--html", dir.path + "/report"], in: dir)
        #expect(r.status == .exited(code: 2), "stdout: \(r.stdout)\nstderr: \(r.stderr)")
        #expect(r.stdout.contains("PASS  home suspends"))
        #expect(r.stdout.contains("FAIL  wrong on purpose"))
        #expect(r.stdout.contains("expected: probe background"))
        #expect(r.stdout.contains("seen:     probe active"))
        #expect(r.stdout.contains("ERROR c-broken.json"))  // named by its file: its name could not be read
        #expect(r.stdout.contains("c-broken.json:1:"))
        #expect(r.stdout.contains("did you mean \"advance\"?"))
        #expect(r.stdout.contains("3 scenario(s): 1 passed, 1 failed, 1 could not run"))
        let xml = try String(contentsOfFile: dir.path + "/out.xml", encoding: .utf8)
        #expect(xml.contains(#"tests="3" failures="1" errors="1""#))
        #expect(XMLParser(data: Data(xml.utf8)).parse())
        let index = try String(contentsOfFile: dir.path + "/report/index.html", encoding: .utf8)
        #expect(index.contains("home suspends") && index.contains("wrong on purpose") && index.contains("c-broken.json"))
    }

    @Test func onlyAFailureExitsOne() async throws {
        let dir = try TempDir("cli-test1")
        defer { dir.remove() }
        try write(dir)
        let r = try await apphost(["test", dir.path + "/s", "--filter", "on purpose", "--json"], in: dir)
        #expect(r.status == .exited(code: 1), "stderr: \(r.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        #expect(json["version"] as? Int == 1)
        #expect(json["failed"] as? Int == 1)
        let results = try #require(json["results"] as? [[String: Any]])
        #expect((results.first?["events"] as? [Any])?.isEmpty == false)
    }

    @Test func passingExitsZeroAndListingNamesTheRules() async throws {
        let dir = try TempDir("cli-test0")
        defer { dir.remove() }
        try write(dir)
        let pass = try await apphost(["test", dir.path + "/s/a-pass.yaml"], in: dir)
        #expect(pass.status == .exited(code: 0), "stdout: \(pass.stdout)\nstderr: \(pass.stderr)")
        let list = try await apphost(["test", "--list", dir.path + "/s"], in: dir)
        #expect(list.status == .exited(code: 2)) // the broken file is listed as unreadable
        #expect(list.stdout.contains("rule:   an app with nothing to do is suspended at home"))
        #expect(list.stdout.contains("(unreadable)"))
        // Shards: disjoint, and together the suite.
        var seen: [String] = []
        for i in 1...2 {
            let part = try await apphost(["test", "--list", "--shard", "\(i)/2", dir.path + "/s"], in: dir)
            seen += part.stdout.split(separator: "\n").filter { $0.hasPrefix("    file:") || $0.hasPrefix("(unreadable)") }.map(String.init)
        }
        #expect(seen.count == 3)
        #expect(Set(seen).count == 3)
        let bad = try await apphost(["test", "--shard", "3/2", dir.path + "/s"], in: dir)
        #expect(bad.status == .exited(code: 64))
        #expect(bad.stderr.contains("--shard"))
    }
}

/// Every verb of the CLI that acts on a host is a step of scenario files (the steps are
/// the CLI's verbs as data). A verb added to the CLI fails this test until it gets its
/// step, or is listed here with why it is not one.
@Suite("every CLI verb has its step", .tags(.process), .timeLimit(.minutes(3)),
       .enabled(if: TimelineCLITests.built, "apphost is not built beside the tests"))
struct VerbCoverageTests {
    /// Verbs that are not steps, and why.
    static let notSteps: [String: String] = [
        "run": "starts a host (a scenario has its own)",
        "daemon": "starts a host (a scenario has its own)",
        "list": "reads; expectations read state",
        "status": "reads; `expect: {app: {state, process}}`",
        "events": "reads; `expect: {events: [...]}`",
        "reports": "reads; `expect: {report: ...}`",
        "manifest": "reads a bundle; needs no host",
        "shutdown": "the runner stops the host at the end",
        "clock": "`advance` is `clock advance`; `clock now` reads",
        "profile": "reads; a scenario names its `profile:`",
        "demo": "a show, not an action",
        "lint": "reads a bundle; needs no host",
        "switcher": "reads; `expect: {app: {snapshot: ...}}` reads the pictures",
        "privacy-check": "runs its own private hosts",
        "test": "runs scenarios",
        "timeline": "draws a log; needs no host",
        "help": "ArgumentParser's",
        "list-devices": "reads; a scenario's private host is its own device",
        "listapps": "reads; expectations read state",
        "get_app_container": "reads a path; a scenario's containers are its private host's",
        "io": "`io screenshot` reads the screen; `expect: {app: {snapshot: ...}}` reads pictures",
    ]

    @Test func everyVerbIsAStepOrSaysWhyNot() async throws {
        let dir = try TempDir("cli-verbs")
        defer { dir.remove() }
        let r = try await runToExit(TimelineCLITests.apphost, ["--help"], in: dir.path, environment: ["HOME": dir.path, "PATH": "/usr/bin:/bin"])
        #expect(r.status == .exited(code: 0))
        guard let start = r.stdout.range(of: "SUBCOMMANDS:") else {
            Issue.record("no SUBCOMMANDS in apphost --help:\n\(r.stdout)")
            return
        }
        // The list ends at the first empty line (then comes "See 'apphost help <subcommand>'").
        let listed = r.stdout[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false)
            .dropFirst().prefix { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        let verbs = listed.compactMap { line -> String? in
            // A verb's line starts with two spaces and the verb; its help's other lines with more.
            guard line.hasPrefix("  "), !line.hasPrefix("   ") else { return nil }
            return line.split(separator: " ").first.map(String.init)
        }
        #expect(verbs.count > 20, "\(verbs)")
        for verb in verbs where !ScenarioReader.verbs.contains(verb) && Self.notSteps[verb] == nil {
            Issue.record("apphost \(verb) has no step in scenario files: add it (StepBuilder, docs/scenarios.md) or say why not in VerbCoverageTests.notSteps")
        }
    }
}

/// The count docs/scenarios.md gives for the shipped suite is the count of its files.
@Suite("Docs: the shipped suite's count")
struct ShippedSuiteCountTests {
    @Test func docsScenariosGivesTheNumberOfFilesInScenariosIOS() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: packageRoot + "/scenarios/ios").filter { $0.hasSuffix(".yaml") }
        let doc = try String(contentsOfFile: packageRoot + "/docs/scenarios.md", encoding: .utf8)
        let marker = "holds one scenario per iOS rule AppHost enforces ("
        let start = try #require(doc.range(of: marker), "docs/scenarios.md no longer says how many scenarios it holds")
        let number = doc[start.upperBound...].prefix { $0.isNumber }
        #expect(Int(number) == files.count, "docs/scenarios.md says \(number); scenarios/ios has \(files.count) files")
    }
}
