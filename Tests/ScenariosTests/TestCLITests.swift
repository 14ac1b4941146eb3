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
