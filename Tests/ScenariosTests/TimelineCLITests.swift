import AppHostProtocol
import AppHostSystem
import Foundation
@testable import Scenarios
import SystemPackage
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Runs `path arguments...` to its exit with the project's own spawn, its stdout and
/// stderr written to files in `directory`. Waits for the exit event, bounded: the
/// process is killed if it has not exited after `limit`.
func runToExit(_ path: String, _ arguments: [String], in directory: String, environment: [String: String],
               limit: Duration = .seconds(60)) async throws -> (status: AppHostSystem.ExitStatus?, stdout: String, stderr: String) {
    let outPath = directory + "/.stdout", errPath = directory + "/.stderr"
    let out = try FileDescriptor.open(outPath, .writeOnly, options: [.create, .truncate, .closeOnExec], permissions: .ownerReadWrite)
    let err = try FileDescriptor.open(errPath, .writeOnly, options: [.create, .truncate, .closeOnExec], permissions: .ownerReadWrite)
    let settings = SpawnSettings(executablePath: path, arguments: [path] + arguments, environment: environment,
                                 standardOutput: out, standardError: err, seccomp: .none, dropsCapabilities: false)
    let spawned: (process: ChildProcess, events: AsyncStream<ChildEvent>)
    do {
        spawned = try await ProcessReaper.shared.spawn(settings)
    } catch {
        try? out.close()
        try? err.close()
        throw error
    }
    try? out.close()
    try? err.close()
    let child = spawned.process
    // A bound on the wait, not a pause: the process is killed if it has not exited by then.
    let deadline = try DeadlineTimer(name: "aph-test-bound") { try? child.signal(SIGKILL) }
    deadline.arm(after: limit)
    var status: AppHostSystem.ExitStatus?
    for await event in spawned.events {
        if case .exited(let s) = event {
            status = s
            break
        }
    }
    deadline.close()
    let stdout = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    let stderr = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    return (status, stdout, stderr)
}

/// `apphost timeline` run as a user runs it, on a state directory holding only an event
/// log (no daemon).
@Suite("apphost timeline", .tags(.process), .timeLimit(.minutes(2)))
struct TimelineCLITests {
    /// The CLI, built beside the test bundle (`<products>/AppHostPackageTests.xctest`).
    static let apphost: String = {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var dir = (exe as NSString).deletingLastPathComponent
        if dir.hasSuffix(".xctest") { dir = (dir as NSString).deletingLastPathComponent }
        return dir + "/apphost"
    }()
    static let built = FileManager.default.isExecutableFile(atPath: apphost) || ProcessInfo.processInfo.environment["CI"] == "true"

    func run(_ arguments: [String], in dir: TempDir) async throws -> (status: AppHostSystem.ExitStatus?, stdout: String, stderr: String) {
        try await runToExit(Self.apphost, arguments, in: dir.path, environment: ["HOME": dir.path, "PATH": "/usr/bin:/bin"])
    }

    func stateDirectory() throws -> TempDir {
        let dir = try TempDir("tlcli")
        try TimelineLogFilesTests.writeLog(EventScript.twoApps.events, to: dir.path + "/events.jsonl")
        return dir
    }

    @Test(.enabled(if: built, "apphost is not built: run `swift build` first"))
    func drawsTheLogOfAStoppedHostAsSVGAndHTML() async throws {
        let dir = try stateDirectory()
        defer { dir.remove() }
        let svg = try await run(["timeline", "--state-dir", dir.path, "-o", dir.path + "/t.svg"], in: dir)
        #expect(svg.status == .exited(code: 0), "stderr: \(svg.stderr)")
        #expect(svg.stdout.contains("t.svg: 2 apps, \(EventScript.twoApps.events.count) events"))
        let picture = try String(contentsOfFile: dir.path + "/t.svg", encoding: .utf8)
        #expect(xmlError(picture) == nil)
        #expect(occurrences("<g class=\"lane\">", in: picture) == 2)

        let html = try await run(["timeline", "--state-dir", dir.path, "com.example.news", "-o", dir.path + "/news.html"], in: dir)
        #expect(html.status == .exited(code: 0), "stderr: \(html.stderr)")
        let page = try String(contentsOfFile: dir.path + "/news.html", encoding: .utf8)
        #expect(page.hasPrefix("<!DOCTYPE html>"))
        #expect(occurrences("<g class=\"lane\">", in: page) == 1)
        #expect(!page.contains("com.example.mail"))
    }

    @Test(.enabled(if: built, "apphost is not built: run `swift build` first"))
    func anAppNotInTheLogIsRefusedNamingTheOnesThatAre() async throws {
        let dir = try stateDirectory()
        defer { dir.remove() }
        let r = try await run(["timeline", "--state-dir", dir.path, "com.example.nope", "-o", dir.path + "/t.svg"], in: dir)
        #expect(r.status == .exited(code: 2))
        #expect(r.stderr.contains("com.example.nope"), "stderr: \(r.stderr)")
        #expect(r.stderr.contains("com.example.mail, com.example.news"), "stderr: \(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/t.svg"))
    }

    @Test(.enabled(if: built, "apphost is not built: run `swift build` first"))
    func badOutputsAndMissingLogsAreClearErrors() async throws {
        let dir = try stateDirectory()
        defer { dir.remove() }
        let png = try await run(["timeline", "--state-dir", dir.path, "-o", dir.path + "/t.png"], in: dir)
        #expect(png.status == .exited(code: 64))
        #expect(png.stderr.contains(".svg") && png.stderr.contains(".html"), "stderr: \(png.stderr)")
        let folder = try await run(["timeline", "--state-dir", dir.path, "-o", dir.path], in: dir)
        #expect(folder.status == .exited(code: 64))
        #expect(folder.stderr.contains("it is a directory"), "stderr: \(folder.stderr)")
        let empty = try TempDir("tlcli")
        defer { empty.remove() }
        let none = try await run(["timeline", "--state-dir", empty.path, "-o", dir.path + "/t.svg"], in: dir)
        #expect(none.status == .exited(code: 1))
        #expect(none.stderr.contains("no event log in \(empty.path)"), "stderr: \(none.stderr)")
    }
}
