import AppHostProtocol
import AppHostSystem
import Foundation
import TestSupport
import Testing
@testable import Host

/// Every time rule of the iOS model, with real app processes, on the virtual clock:
/// a 30-second rule is checked in milliseconds.
@Suite("Policy (virtual clock)", .tags(.process, .virtualClock), .timeLimit(.minutes(2)), .enabled(if: probeBuilt, "sample apps not built: run `swift build` first (scripts/test.sh does)"))
struct PolicyTests {
    /// Runs `body` with a host of its own on the virtual clock (see `withHost`).
    func withVirtualHost<T>(_ profile: BudgetProfile = .default,
                            _ body: (TestHost) async throws -> T) async throws -> T {
        try await withHost(label: "v", clock: .virtual, profile: profile, body)
    }

    func advance(_ host: TestHost, _ seconds: Int) async throws {
        _ = try await host.supervisor.advanceClock(by: .seconds(seconds))
    }

    func state(_ host: TestHost, _ id: BundleID) async throws -> AppState? {
        try await host.supervisor.status(id).first?.state
    }

    @Test func taskHeldPastTheBudgetIsKilledWith8badf00dNamingTasks() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.policy.overrun")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [
                "--ignore-expiration", "--on", "background", "begin-task:upload", "--on", "background", "begin-task:sync",
            ])
            try await host.supervisor.background(id)
            _ = await host.waitForEvent(id) { $0.callback == "didEnterBackground" }

            try await advance(host, 29)
            #expect(try await state(host, id) == .background, "still inside the budget")
            #expect(processExists(pid))
            let handlers = await host.callbacks(id).filter { $0.hasPrefix("expirationHandler") }
            #expect(handlers == ["expirationHandler(task 1)", "expirationHandler(task 2)"], "handlers run before the budget ends")

            try await advance(host, 1)
            #expect(try await state(host, id) == .notRunning)
            #expect(!processExists(pid))
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.exceptionType == "EXC_CRASH (SIGKILL)")
            #expect(report.terminationCode == "0x8badf00d")
            #expect(report.terminationNamespace == "RUNNINGBOARD")
            #expect(report.terminationReason == "Namespace RUNNINGBOARD, Code 0x8badf00d")
            #expect(report.reason.contains("\"upload\"") && report.reason.contains("\"sync\""))
            #expect(report.backgroundTasks.map(\.name) == ["upload", "sync"])
            #expect(report.backgroundTasks.allSatisfy { $0.age == 30 })
            #expect(report.budget == BudgetRecord(name: "backgroundTask", seconds: 30, profile: "ios13"))
            #expect(report.explanation?.contains("What to do") == true)
            #expect(report.lastStates.last?.state == .notRunning)
        }
    }

    @Test func tasksEndedInTheirHandlersAreSuspendedNotKilled() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.policy.polite")
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "background", "begin-task:upload"])
            try await host.supervisor.background(id)
            _ = await host.waitForEvent(id) { $0.callback == "didEnterBackground" }
            try await advance(host, 25)
            // The handler (run at budget - 5 s) ended the task: suspended, stop confirmed.
            #expect(try await state(host, id) == .suspended)
            #expect(kernelState(pid) == "T")
            try await advance(host, 60)
            #expect(try await state(host, id) == .suspended)
            #expect(try await host.supervisor.reports(id).isEmpty)
        }
    }

    @Test func foregroundAppHoldingTasksIsNotLimitedAndTheBudgetStartsAtHome() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.policy.fg")
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--ignore-expiration", "--on", "active", "begin-task:early"])
            _ = await host.waitForEvent(id) { $0.kind == .backgroundTask }
            try await advance(host, 600)
            #expect(try await state(host, id) == .active, "a foreground app holding a task is not limited")
            try await host.supervisor.background(id)
            _ = await host.waitForEvent(id) { $0.callback == "didEnterBackground" }
            try await advance(host, 29)
            #expect(try await state(host, id) == .background, "the budget runs from entering the background")
            try await advance(host, 1)
            #expect(!processExists(pid))
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.backgroundTasks.first?.age == 630, "the task's age counts from beginBackgroundTask")
        }
    }

    @Test(arguments: [("ios6", 600), ("ios7", 180), ("ios13", 30)])
    func profilesSetTheBackgroundBudget(profile: String, seconds: Int) async throws {
        try await withVirtualHost(try #require(BudgetProfile.named(profile))) { host in
            let id = try await host.installProbe("com.policy.\(profile)")
            _ = try await host.supervisor.launch(id, background: false, arguments: ["--ignore-expiration", "--on", "background", "begin-task:t"])
            try await host.supervisor.background(id)
            _ = await host.waitForEvent(id) { $0.callback == "didEnterBackground" }
            try await advance(host, seconds - 1)
            #expect(try await state(host, id) == .background)
            try await advance(host, 1)
            #expect(try await state(host, id) == .notRunning)
            #expect(try await host.supervisor.reports(id).last?.budget?.seconds == Double(seconds))
        }
    }

    @Test func launchWatchdogKillsAnAppStuckInDidFinishLaunching() async throws {
        // The first advance waits (once) for the unanswered didFinishLaunching: keep that short.
        try await withVirtualHost() { host in
            let id = try await host.installProbe("com.policy.slowlaunch")
            let launching = Task { try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "block:forever"]) }
            _ = await host.waitForEvent(id) { $0.kind == .spawned }
            try await advance(host, 19)
            #expect(try await state(host, id) == .inactive)
            try await advance(host, 1)
            await #expect(throws: ControlError.self) { _ = try await launching.value }
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.terminationCode == "0x8badf00d")
            #expect(report.budget?.name == "launch")
            #expect(report.reason.contains("didFinishLaunching"))
        }
    }

    @Test func didEnterBackgroundMustReturnWithinItsBudget() async throws {
        try await withVirtualHost() { host in
            let id = try await host.installProbe("com.policy.slowbg")
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "background", "block:forever"])
            try await host.supervisor.background(id)
            try await advance(host, 4)
            #expect(processExists(pid))
            try await advance(host, 1)
            #expect(!processExists(pid))
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.terminationCode == "0x8badf00d")
            #expect(report.budget == BudgetRecord(name: "didEnterBackground", seconds: 5, profile: "ios13"))
        }
    }

    /// Virtual clock: an app that takes real time to answer (it computes, however loaded the
    /// machine) is waited for — no host time passes while it runs — so its didEnterBackground
    /// returns at the instant it was sent, and advancing past the budget kills nothing. An
    /// app blocked in it (the test above) is not waited for: host time moves and the budget
    /// ends it. Real time decides neither.
    @Test func aSlowAppIsWaitedForAndNotKilledByTheBudgetItsRealTimeOverruns() async throws {
        try await withVirtualHost() { host in
            let id = try await host.installProbe("com.policy.slowreturn")
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "background", "spin:1.5"])
            try await host.supervisor.background(id)
            try await advance(host, 10)
            #expect(processExists(pid))
            #expect(try await state(host, id) == .suspended)
            #expect(try await host.supervisor.reports(id).isEmpty)
            let returned = try #require(await host.events(id).first { $0.callback == "didEnterBackground" && $0.kind == .callback })
            let sent = try #require(await host.events(id).first { $0.kind == .transition && $0.to == .background })
            #expect(returned.time == sent.time, "returned at the virtual instant it was sent")
        }
    }

    @Test func aHealthyActiveAppCostsNoCallbackAndIsNeverKilled() async throws {
        try await withVirtualHost() { host in
            let id = try await host.installProbe("com.policy.healthy")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [])
            _ = await host.waitForEvent(id) { $0.callback == "didBecomeActive" }
            let sent = await host.supervisor.callbacksSent(id)
            let events = await host.events(id).count
            // An hour: 360 hang checks, each a read of the app's stamp page.
            try await advance(host, 3600)
            #expect(try await state(host, id) == .active)
            #expect(processExists(pid))
            #expect(await host.supervisor.callbacksSent(id) == sent, "nothing was sent to the app")
            #expect(await host.events(id).count == events, "nothing happened to it")
            #expect(try await host.supervisor.reports(id).isEmpty)
        }
    }

    /// An app blocked in a callback (asleep on a FIFO nobody writes) holds no advance: the
    /// host finds it asleep, host time goes on, and the callback's watchdog kills it.
    @Test func anAppBlockedInACallbackHoldsNoAdvanceAndItsWatchdogEndsIt() async throws {
        try await withVirtualHost() { host in
            let id = try await host.installProbe("com.policy.unanswered")
            let fifo = try makeContainerFIFO(host, id, "never.fifo")
            // didEnterBackground blocks on a FIFO nobody writes: it never returns.
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "background", "wait-fifo:\(fifo)"])
            try await host.waitUntil(id, is: .active)
            try await host.supervisor.background(id)
            // didEnterBackground's 5 s count from when it is sent, once willResignActive has
            // returned (in real time, however slow the machine is).
            _ = await host.waitForEvent(id) { $0.callback == "willResignActive" }
            try await advance(host, 1)
            #expect(processExists(pid), "1 s of host time: still within the 5 s of didEnterBackground")
            try await advance(host, 5)
            try await host.waitUntil(id, is: .notRunning)
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.terminationCode == "0x8badf00d")
            #expect(report.reason.contains("didEnterBackground"), "\(report.reason)")
        }
    }

    @Test func aMainThreadBlockedRightAfterActivationIsKilledAtTheHangBudget() async throws {
        try await withVirtualHost() { host in
            let id = try await host.installProbe("com.policy.hung")
            let fifo = try makeContainerFIFO(host, id, "block.fifo")
            // Blocked once didBecomeActive returned, until the test writes a byte, which it
            // means to do at +12 s: the host must not wait that long.
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "active", "hang-fifo:\(fifo)"])
            let writer = await openFIFOForWriting(fifo)
            #expect(writer >= 0)
            defer { close(writer) }
            try await advance(host, 9)
            #expect(processExists(pid), "blocked 9 s")
            #expect(try await state(host, id) == .active)
            try await advance(host, 1)
            // The advance waits for the verdict and for the kernel's word of the kill.
            #expect(try await state(host, id) == .notRunning)
            #expect(!processExists(pid))
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.terminationCode == "0x8badf00d")
            #expect(report.budget?.name == "foregroundHang")
            #expect(report.reason == "main run loop blocked for 10s while active", "\(report.reason)")
            // Killed at 10 s of host time after the activation (virtual dates are exact).
            let events = await host.events(id)
            let activated = try #require(events.first { $0.kind == .transition && $0.to == .active })
            let kill = try #require(events.first { $0.kind == .signal && $0.signal == .kill })
            #expect(kill.time.timeIntervalSince(activated.time) == 10)
        }
    }

    /// iOS's 0xdead10cc: a lock held in a shared (App Group) container when the app is
    /// suspended. The app can reach no other place outside its own container.
    @Test(arguments: ["lock", "posix-lock"])
    func lockInAGroupContainerAtSuspensionIsKilledWithDead10cc(kind: String) async throws {
        try await withVirtualHost { host in
            let group = "group.com.policy.shared"
            let id = try await host.installProbe("com.policy.lock.\(kind)",
                                                 entitlements: ["com.apple.security.application-groups": [group]])
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "background", "\(kind):group:\(group)/db"])
            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .notRunning)
            #expect(!processExists(pid))
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.terminationCode == "0xdead10cc")
            #expect(report.reason.contains("\(host.dir.path)/groups/\(group)/db"), "\(report.reason)")
        }
    }

    @Test func lockInsideTheOwnContainerDoesNotPreventSuspension() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.policy.ownlock")
            // Relative to the working directory, which is the app's container.
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "background", "lock:Documents/db"])
            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .suspended)
            #expect(kernelState(pid) == "T")
            #expect(try await host.supervisor.reports(id).isEmpty)
        }
    }

    @Test func advanceRightAfterHomeWaitsForTheCallbacksAlreadySent() async throws {
        // No wait for didEnterBackground here: the advance itself must let the app run it
        // (in real time) before firing anything, or its 5 s watchdog would fire at +5 s.
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.policy.eager")
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--ignore-expiration", "--on", "background", "begin-task:upload"])
            try await host.supervisor.background(id)
            try await advance(host, 29)
            #expect(processExists(pid))
            #expect(try await host.supervisor.reports(id).isEmpty)
            try await advance(host, 2)
            #expect(try await host.supervisor.reports(id).last?.budget?.name == "backgroundTask")
        }
    }

    @Test func advancingTheRealClockIsRefused() async throws {
        try await withHost { host in
            await #expect(throws: ControlError.self) { _ = try await host.supervisor.advanceClock(by: .seconds(1)) }
        }
    }
}
