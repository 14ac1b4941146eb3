import AppHostProtocol
import Foundation
import Host
import Testing
import TestSupport
@testable import Scenarios


/// The probe is built beside the tests (on CI it must be: the suite then runs and fails).
let probeBuilt = FileManager.default.isExecutableFile(atPath: productsDirectory + "/ProbeApp")
    || ProcessInfo.processInfo.environment["CI"] == "true"

func runner() -> ScenarioRunner {
    var template = HostConfiguration(stateDirectory: "/nonexistent")
    template.productDirectories = [productsDirectory]
    return ScenarioRunner(template: template)
}

/// Writes `yaml` into `dir` as `name` and runs it.
func run(_ yaml: String, in dir: TempDir, name: String = "s.yaml") async throws -> ScenarioResult {
    let path = dir.path + "/" + name
    try yaml.write(toFile: path, atomically: true, encoding: .utf8)
    return await runner().run(path: path, display: name)
}

let probe = packageRoot + "/manifests/Probe.app"

/// The same events, in the same order, at the same host times: the log without what
/// differs between runs by nature (sequence numbers are kept; pids and temporary paths are not).
func normalised(_ events: [HostEvent]) -> [String] {
    events.map { e in
        var cause = e.cause.replacingOccurrences(of: #"pid \d+"#, with: "pid N", options: .regularExpression)
        cause = cause.replacingOccurrences(of: #"/tmp/apphost-scenario-[0-9a-f]+"#, with: "STATE", options: .regularExpression)
        cause = cause.replacingOccurrences(of: #"-\d{13}-\d+"#, with: "-REPORT", options: .regularExpression)
        let fields = [e.bundleIdentifier?.rawValue, e.from?.rawValue, e.to?.rawValue, e.callback, e.signal?.rawValue, e.taskName, e.mode?.rawValue,
                      e.transfer?.rawValue, e.began.map { "\($0)" }, e.confirmed.map { "\($0)" }].map { $0 ?? "-" }
        return "\(e.seq) \(e.time.timeIntervalSince1970) \(e.kind.rawValue) \(fields.joined(separator: " ")) \(cause)"
    }
}

@Suite(.tags(.process, .virtualClock), .enabled(if: probeBuilt, "ProbeApp is not built beside the tests (swift build builds it)"))
struct ScenarioRunnerTests {
    @Test func theIssuesExamplePasses() async throws {
        let r = await runner().run(path: packageRoot + "/scenarios/examples/upload-expires.yaml", display: "upload-expires.yaml")
        #expect(r.status == .passed, "\(r.failure.map { "\($0.expected) / \($0.seen)" } ?? r.error ?? "")")
        #expect(r.apps == [.init(alias: "probe", bundleIdentifier: "com.example.probe")])
        // The log starts at the epoch and the kill is at +30 s of host time.
        #expect(r.start == ScenarioDefaults.epoch)
        let kill = try #require(r.events.first { $0.kind == .signal && $0.signal == .kill })
        #expect(kill.time.timeIntervalSince(r.start) == 30)
    }

    @Test func aWrongExpectationFailsAtItsStepSayingWhatItSaw() async throws {
        let dir = try TempDir("scn-fail")
        defer { dir.remove() }
        let r = try await run("""
            name: wrong on purpose
            apps:
              probe: \(probe)
            steps:
              - launch: probe
              - background: probe
              - advance: 1s
              - expect: {probe: {state: active}}
            """, in: dir)
        #expect(r.status == .failed)
        let f = try #require(r.failure)
        #expect(f.step == 3)
        #expect(f.line == 8)
        #expect(f.expected == "probe active")
        #expect(f.seen == "probe suspended")
        #expect(f.recentEvents.contains { $0.contains("SIGSTOP") })
        #expect(ScenarioReports.details(r)?.contains("s.yaml:8:5") == true)
    }

    @Test func suspendedMeansStoppedInProc() async throws {
        let dir = try TempDir("scn-stop")
        defer { dir.remove() }
        let r = try await run("""
            name: suspended is T in /proc
            apps:
              probe: \(probe)
            steps:
              - launch: probe
              - expect: {probe: {state: active, process: running}}
              - background: probe
              - expect:
                  probe: {state: suspended, process: stopped}
                  events: [{kind: signal, app: probe, signal: SIGSTOP, exactly: 1}, {kind: callback, app: probe, callback: didEnterBackground}]
                  report: none
              - foreground: probe
              - expect: {probe: {state: active, process: running}}
              - terminate: probe
              - expect: {probe: {state: notRunning, process: gone}}
            """, in: dir)
        #expect(r.status == .passed, "\(r.failure.map { "\($0.stepText): \($0.expected) / \($0.seen)" } ?? r.error ?? "")")
    }

    @Test func withinMovesTheClockUntilItHolds() async throws {
        let dir = try TempDir("scn-within")
        defer { dir.remove() }
        let r = try await run("""
            name: within
            apps:
              probe:
                bundle: \(probe)
                args: [--ignore-expiration, --on, background, "begin-task:upload"]
            steps:
              - launch: probe
              - background: probe
              - expect: {probe: {state: notRunning}, within: 31s}
              - expect: {report: {app: probe, code: "0x8badf00d"}}
            """, in: dir)
        #expect(r.status == .passed, "\(r.failure.map { "\($0.expected) / \($0.seen)" } ?? r.error ?? "")")
        // It held at 30 s, not at the end of the 31 s allowed.
        #expect(r.end.timeIntervalSince(r.start) < 31)
        let short = try await run("""
            name: within too short
            apps:
              probe:
                bundle: \(probe)
                args: [--ignore-expiration, --on, background, "begin-task:upload"]
            steps:
              - launch: probe
              - background: probe
              - expect: {probe: {state: notRunning}, within: 10s}
            """, in: dir, name: "short.yaml")
        #expect(short.status == .failed)
        #expect(short.failure?.expected == "probe notRunning within 10s")
    }

    @Test func aKillFromOutsideIsSeenAndReported() async throws {
        let dir = try TempDir("scn-kill")
        defer { dir.remove() }
        let r = try await run("""
            name: kill
            apps:
              probe: \(probe)
            steps:
              - launch: probe
              - background: probe
              - kill: probe
              - expect:
                  probe: {state: notRunning, process: gone}
                  events: [{kind: exited, app: probe}]
            """, in: dir)
        #expect(r.status == .passed, "\(r.failure.map { "\($0.expected) / \($0.seen)" } ?? r.error ?? "")")
    }

    @Test func aRefusedStepFailsUnlessExpected() async throws {
        let dir = try TempDir("scn-refused")
        defer { dir.remove() }
        let refusedOK = try await run("""
            name: refused
            apps:
              probe: \(probe)
            steps:
              - launch: probe
              - bgtask: {app: probe, run: com.example.undeclared}
              - expect: {refused: true}
            """, in: dir)
        #expect(refusedOK.status == .passed, "\(refusedOK.failure.map { "\($0.expected) / \($0.seen)" } ?? "")")
        let refusedNot = try await run("""
            name: refused, unexpected
            apps:
              probe: \(probe)
            steps:
              - launch: probe
              - bgtask: {app: probe, run: com.example.undeclared}
              - advance: 1s
            """, in: dir, name: "b.yaml")
        #expect(refusedNot.status == .failed)
        #expect(refusedNot.failure?.seen.hasPrefix("the host refused it") == true)
    }

    @Test func aBadFileIsAnErrorNotACrash() async throws {
        let dir = try TempDir("scn-bad")
        defer { dir.remove() }
        let r = try await run("name: x\napps: {probe: \(probe)}\nsteps:\n  - lanch: probe\n", in: dir)
        #expect(r.status == .error)
        #expect(r.error?.contains("s.yaml:4:5: unknown step \"lanch\" (did you mean \"launch\"?)") == true)
        #expect(ScenarioReports.exitStatus([r]) == 2)
    }

    @Test func theSameFileGivesTheSameEventsTwice() async throws {
        let path = packageRoot + "/scenarios/examples/upload-expires.yaml"
        async let a = runner().run(path: path, display: "a")
        async let b = runner().run(path: path, display: "b")
        let (first, second) = await (a, b)
        #expect(first.status == .passed)
        #expect(second.status == .passed)
        let x = normalised(first.events)
        let y = normalised(second.events)
        #expect(x.count > 10)
        #expect(x == y)
    }
}
