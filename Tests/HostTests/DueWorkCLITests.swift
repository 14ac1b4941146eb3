import Foundation
import TestSupport
import Testing

/// Issue 18: a device change that makes work due runs it at once on the virtual clock
/// too, through the CLI as a user types it: `apphost device power plugged` on a
/// `--clock virtual` daemon, and no `clock advance`.
@Suite("CLI: work made due by a device change", .tags(.process, .virtualClock), .timeLimit(.minutes(2)),
       .enabled(if: cliBuilt, "apphost and the probe app not built: run `swift build` first (scripts/test.sh does)"))
struct DueWorkCLITests {
    @Test func pluggingInRunsAWaitingProcessingTaskWithoutAClockAdvance() async throws {
        try await withCLISession("due") { s in
            _ = try await s.startDaemon(["--clock", "virtual"])
            let id = "com.cli.due"
            let task = "com.cli.due.cleanup"
            let bundle = try makeProbeBundle(in: s.stateDir, id: id, extra: [
                "UIBackgroundModes": ["processing"], "BGTaskSchedulerPermittedIdentifiers": [task],
            ])
            #expect(await s.run("install", bundle).status == 0)
            #expect(await s.run("device", "power", "battery").status == 0)
            // --bgtask never: the task stays running, so `bgtask list` shows where it is.
            let launch = await s.run("launch", id, "--", "--on", "launch", "bg-register:\(task)",
                                     "--on", "background", "bg-submit:processing:\(task):power", "--bgtask", "never")
            try #require(launch.status == 0, "launch: \(launch.stderr)")
            #expect(await s.run("background", id).status == 0)
            let waiting = await s.run("bgtask", "list", id)
            #expect(waiting.stdout.contains("waiting: requires external power"), "\(waiting.stdout)")

            let before = await s.run("clock", "now").stdout
            #expect(await s.run("device", "power", "plugged").status == 0)
            let running = await s.run("bgtask", "list", id)
            #expect(running.stdout.contains("\(id) \(task) (processing): running for 0ms"), "not \"due now\": \(running.stdout)")
            #expect(await s.run("clock", "now").stdout == before, "the virtual clock did not move")
        }
    }
}
