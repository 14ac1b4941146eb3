import AppHostProtocol
import AppHostSystem
import Foundation
import Plugins
import TestSupport
import Testing
@testable import Host

/// Fetch, BGTaskScheduler and silent pushes with real probe processes on the virtual
/// clock: a week of fetches is checked in milliseconds.
@Suite("Background work (virtual clock)", .tags(.process, .virtualClock), .timeLimit(.minutes(3)), .enabled(if: probeBuilt, "sample apps not built: run `swift build` first (scripts/test.sh does)"))
struct BackgroundWorkTests {
    /// Runs `body` with a host of its own on the virtual clock (see `withHost`).
    func withVirtualHost<T>(_ profile: BudgetProfile = .default,
                            _ body: (TestHost) async throws -> T) async throws -> T {
        try await withHost(label: "bw", clock: .virtual, profile: profile, body)
    }

    func state(_ host: TestHost, _ id: BundleID) async throws -> AppState? {
        try await host.supervisor.status(id).first?.state
    }

    func advance(_ host: TestHost, _ seconds: Int) async throws {
        _ = try await host.supervisor.advanceClock(by: .seconds(seconds))
    }

    func returned(_ host: TestHost, _ id: BundleID, _ callback: String) async -> Int {
        await host.events(id).filter { $0.callback == callback }.count
    }

    func log(_ host: TestHost, _ id: BundleID) -> String {
        (try? String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)) ?? ""
    }

    /// Launches, sends home, lets it be suspended.
    func launchAndSuspend(_ host: TestHost, _ id: BundleID, _ args: [String]) async throws -> Int32 {
        let pid = try await host.supervisor.launch(id, background: false, arguments: args)
        try await host.supervisor.background(id)
        _ = await host.waitForEvent(id) { $0.callback == "didEnterBackground" }
        try await advance(host, 0)
        #expect(try await state(host, id) == .suspended)
        return pid
    }

    @Test func aSuspendedAppIsWokenForItsFetchesAndSuspendedAgain() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.bw.fetch", extra: ["UIBackgroundModes": ["fetch"]])
            let pid = try await launchAndSuspend(host, id, ["--on", "launch", "fetch-interval:minimum"])
            try await advance(host, 899)
            #expect(await returned(host, id, "performFetch") == 0, "never earlier than the interval")
            try await advance(host, 1)
            #expect(await returned(host, id, "performFetch") == 1)
            #expect(log(host, id).contains("fetch completed newData"))
            #expect(try await state(host, id) == .suspended, "suspended again once the completion came")
            #expect(kernelState(pid) == "T")
            try await advance(host, 3 * 900)
            #expect(await returned(host, id, "performFetch") == 4, "newData keeps the interval")
        }
    }

    @Test func anExitedAppIsLaunchedInTheBackgroundForAFetchButNotAfterAUserTerminate() async throws {
        // The advance waits for the background launch *and* the fetch it brings, however
        // long the machine takes to let the app run them.
        try await withVirtualHost() { host in
            let id = try await host.installProbe("com.bw.relaunch", extra: ["UIBackgroundModes": ["fetch"]])
            // It sets its interval, then exits on its own when sent home (not the user's doing).
            _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "fetch-interval:minimum", "--on", "background", "exit:0"])
            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .notRunning)
            try await advance(host, 900)
            let trace = await host.events(id).map { "\($0.kind) \($0.cause)" }.joined(separator: "\n")
            #expect(await returned(host, id, "performFetch") == 1, "launched in the background for its fetch: \(trace)")
            let relaunch = await host.events(id).last { $0.kind == .transition && $0.from == .notRunning }
            #expect(relaunch?.to == .background)
            #expect(relaunch?.cause.contains("performFetch") == true)
            // The user swipes it away: no more fetches until the user launches it.
            try await host.supervisor.terminate(id)
            try await advance(host, 4 * 3600)
            #expect(await returned(host, id, "performFetch") == 1)
            #expect(try await state(host, id) == .notRunning)
            let waiting = try await host.supervisor.modeCommand(.fetchSchedule)
            #expect(waiting.contains("the user terminated it"), "\(waiting)")
            _ = try await host.supervisor.launch(id, background: false, arguments: [])
            let schedule = try await host.supervisor.modeCommand(.fetchSchedule)
            #expect(schedule.contains("next fetch"), "\(schedule)")
        }
    }

    @Test func aFetchThatNeverCompletesIsKilledWith2182bad4() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.bw.slow", extra: ["UIBackgroundModes": ["fetch"]])
            _ = try await launchAndSuspend(host, id, ["--fetch-result", "never", "--on", "launch", "fetch-interval:minimum"])
            try await advance(host, 900)
            #expect(try await state(host, id) == .background, "kept running while the fetch is out")
            try await advance(host, 30)
            #expect(try await state(host, id) == .notRunning)
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.terminationCode == "0x2182bad4")
            #expect(report.reason.contains("performFetch"))
        }
    }

    @Test func simulateBackgroundFetchLaunchesANotRunningApp() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.bw.sim", extra: ["UIBackgroundModes": ["fetch"]])
            _ = try await host.supervisor.modeCommand(.fetchNow(bundleIdentifier: id))
            _ = await host.waitForEvent(id) { $0.callback == "performFetch" }
            try await advance(host, 0)
            let launch = await host.events(id).first { $0.kind == .transition }
            #expect(launch?.to == .background)
            #expect(log(host, id).contains("didFinishLaunching state=background"))
            #expect(try await state(host, id) == .suspended)
        }
    }

    @Test func aProcessingTaskWaitsForPowerRunsAndCompletes() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.bw.task", extra: [
                "UIBackgroundModes": ["processing"], "BGTaskSchedulerPermittedIdentifiers": ["com.bw.task.clean"],
            ])
            _ = try await host.supervisor.modeCommand(.devicePower(plugged: false))
            _ = try await launchAndSuspend(host, id, [
                "--on", "launch", "bg-register:com.bw.task.clean",
                "--on", "launch", "bg-submit:processing:com.bw.task.clean:60:power",
            ])
            try await advance(host, 600)
            #expect(await returned(host, id, "BGTask launch(com.bw.task.clean)") == 0, "waits for external power")
            let list = try await host.supervisor.modeCommand(.bgTaskList(bundleIdentifier: id))
            #expect(list.contains("requires external power"), "\(list)")
            _ = try await host.supervisor.modeCommand(.devicePower(plugged: true))
            try await advance(host, 1)
            #expect(await returned(host, id, "BGTask launch(com.bw.task.clean)") == 1)
            #expect(log(host, id).contains("bgtask completed com.bw.task.clean"))
            #expect(try await state(host, id) == .suspended)
        }
    }

    @Test func aTaskThatIgnoresItsExpirationIsKilledWith2182bad2() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.bw.stuck", extra: [
                "UIBackgroundModes": ["fetch"], "BGTaskSchedulerPermittedIdentifiers": ["com.bw.stuck.refresh"],
            ])
            _ = try await launchAndSuspend(host, id, [
                "--bgtask", "never", "--bgtask-expire", "ignore",
                "--on", "launch", "bg-register:com.bw.stuck.refresh", "--on", "launch", "bg-submit:refresh:com.bw.stuck.refresh:86400",
            ])
            _ = try await host.supervisor.modeCommand(.bgTaskRun(bundleIdentifier: id, identifier: "com.bw.stuck.refresh"))
            _ = await host.waitForEvent(id) { $0.callback == "BGTask launch(com.bw.stuck.refresh)" }
            try await advance(host, 25)
            #expect(await returned(host, id, "BGTask expiration(com.bw.stuck.refresh)") == 1)
            try await advance(host, 5)
            #expect(try await host.supervisor.reports(id).last?.terminationCode == "0x2182bad2")
        }
    }

    @Test func silentPushesWakeLaunchAndAreThrottled() async throws {
        var profile = BudgetProfile.default
        profile.silentPushesPerHour = 2
        try await withVirtualHost(profile) { host in
            let id = try await host.installProbe("com.bw.push", extra: ["UIBackgroundModes": ["remote-notification"]])
            let silent = #"{"aps":{"content-available":1},"n":1}"#
            // Not running: launched in the background.
            _ = try await host.supervisor.modeCommand(.push(PushRequest(bundleIdentifier: id, payload: silent)))
            _ = await host.waitForEvent(id) { $0.callback == "didReceiveRemoteNotification(background)" }
            try await advance(host, 0)
            #expect(log(host, id).contains("didFinishLaunching state=background"))
            #expect(try await state(host, id) == .suspended)
            // Suspended: woken.
            _ = try await host.supervisor.modeCommand(.push(PushRequest(bundleIdentifier: id, payload: silent)))
            try await advance(host, 0)
            #expect(await returned(host, id, "didReceiveRemoteNotification(background)") == 2)
            // Over the budget of 2 per hour: held, then delivered in front.
            let held = try await host.supervisor.modeCommand(.push(PushRequest(bundleIdentifier: id, payload: silent)))
            #expect(held.contains("held"), "\(held)")
            try await advance(host, 0)
            #expect(await returned(host, id, "didReceiveRemoteNotification(background)") == 2)
            try await host.supervisor.foreground(id)
            _ = await host.waitForEvent(id) { e in e.kind == .service && e.cause.contains("held silent push delivered") }
            try await advance(host, 0)
            #expect(await returned(host, id, "didReceiveRemoteNotification(background)") == 3)
        }
    }
}
