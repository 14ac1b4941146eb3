import AppHostProtocol
import Foundation
import TestSupport
import Testing
@testable import Host

/// AppKitLess host-clock timers (`HostTimer`) with real app processes (ProbeApp's
/// `timer:` actions): on the virtual clock a timer fires only when an advance passes
/// it, and what its block does lands at its virtual time before the advance returns;
/// repeating timers keep to their grid; a suspended app's timers fire once on resume;
/// the bounds hold. ProbeApp's timed actions (`hold-task:NAME:SECONDS`, ...) ride on
/// them.
@Suite("HostTimer on the host", .tags(.process, .virtualClock), .timeLimit(.minutes(2)),
       .enabled(if: probeBuilt, "sample apps not built: run `swift build` first"))
struct HostTimerHostTests {
    func log(_ host: TestHost, _ id: BundleID) -> String {
        (try? String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)) ?? ""
    }

    /// The lines of the log that say timer `name` fired.
    func fires(_ host: TestHost, _ id: BundleID, _ name: String) -> [String] {
        log(host, id).split(separator: "\n").filter { $0.hasPrefix("[ProbeApp] timer \(name) fired ") }.map(String.init)
    }

    func advance(_ host: TestHost, _ duration: Duration) async throws {
        _ = try await host.supervisor.advanceClock(by: duration)
    }

    /// Host time zero as a date (the host's start), to read events' times as host time.
    func start(_ host: TestHost) async -> Date {
        let reading = await host.supervisor.clockReading()
        return reading.date.addingTimeInterval(-(Double(reading.now.components.seconds) + Double(reading.now.components.attoseconds) / 1e18))
    }

    /// Host times (in ms) of `id`'s events matching `predicate`.
    func times(_ host: TestHost, _ id: BundleID, since start: Date, _ predicate: (HostEvent) -> Bool) async -> [Int] {
        await host.events(id).filter(predicate).map { Int(($0.time.timeIntervalSince(start) * 1000).rounded()) }
    }

    func began(_ name: String) -> @Sendable (HostEvent) -> Bool {
        { $0.kind == .backgroundTask && $0.began == true && $0.taskName == name }
    }

    @Test func aTimerFiresOnceTheAdvancePassesItAndItsEffectLandsAtItsTime() async throws {
        try await withHost(label: "tm", clock: .virtual) { host in
            let id = try await host.installProbe("com.timer.once")
            let t0 = await start(host)
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "timer:t:10", "--on", "timer", "begin-task:fired",
            ])
            #expect(log(host, id).contains("[ProbeApp] timer t scheduled interval=10.0"))
            #expect(await host.supervisor.liveTimerCount(id) == 1)

            try await advance(host, .milliseconds(9_900))
            #expect(fires(host, id, "t").isEmpty, "not due at 9.9 s")
            #expect(await times(host, id, since: t0, began("fired")).isEmpty)

            try await advance(host, .milliseconds(200))
            // Seen when the advance returns: the block ran and what it sent was handled.
            #expect(fires(host, id, "t") == ["[ProbeApp] timer t fired 1 state=active"])
            #expect(await times(host, id, since: t0, began("fired")) == [10_000], "at its virtual time, not at 10.1 s")
            #expect(await host.supervisor.liveTimerCount(id) == 0, "a one-shot is gone once fired")
            #expect(await host.supervisor.clockReading().now == .milliseconds(10_100))
            // A fire leaves no callback line of its own in the host's log.
            #expect(await host.events(id).allSatisfy { $0.callback?.hasPrefix("HostTimer") != true })
        }
    }

    @Test func aRepeatingTimerFiresEveryIntervalOnItsGridUntilInvalidated() async throws {
        try await withHost(label: "tr", clock: .virtual) { host in
            let id = try await host.installProbe("com.timer.repeat")
            let t0 = await start(host)
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "timer:r:2:repeat",
                "--on", "timer", "begin-task:tick", "--on", "timer", "end-task:tick",
                // Going home: keep running (a task), and stop the timer.
                "--on", "background", "begin-task:keep", "--on", "background", "invalidate-timer:r",
            ])
            try await advance(host, .seconds(7))
            #expect(fires(host, id, "r").count == 3)
            #expect(await times(host, id, since: t0, began("tick")) == [2_000, 4_000, 6_000])

            try await host.supervisor.background(id)
            _ = await host.waitForEvent(id) { $0.callback == "didEnterBackground" }
            #expect(log(host, id).contains("[ProbeApp] timer r invalidated"))
            #expect(await host.supervisor.liveTimerCount(id) == 0)
            try await advance(host, .seconds(10))
            #expect(try await host.supervisor.status(id).first?.state == .background, "running: it holds a task")
            #expect(fires(host, id, "r").count == 3, "an invalidated timer fires no more")
            #expect(await host.supervisor.appTimerDeadlines(id) == 0)
        }
    }

    /// As on iOS, a suspended app's timers do not run; on resume each overdue timer fires
    /// once (not once per missed interval), after the callbacks that resumed it, and a
    /// repeating one goes back to its grid.
    @Test func aSuspendedAppsTimerFiresOnceWhenItRunsAgain() async throws {
        try await withHost(label: "ts", clock: .virtual) { host in
            let id = try await host.installProbe("com.timer.suspend")
            let t0 = await start(host)
            let pid = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "timer:r:2:repeat", "--on", "timer", "begin-task:tick", "--on", "timer", "end-task:tick",
            ])
            try await advance(host, .seconds(3))
            #expect(fires(host, id, "r").count == 1)
            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .suspended)
            #expect(kernelState(pid) == "T")

            try await advance(host, .seconds(10))
            #expect(fires(host, id, "r").count == 1, "nothing runs in a suspended app")
            #expect(await host.supervisor.appTimerDeadlines(id) == 0, "an owed timer costs no deadline")
            #expect(try await host.supervisor.status(id).first?.state == .suspended, "a timer does not wake the app")

            try await host.supervisor.foreground(id)
            try await advance(host, .zero) // settles what the resume sent
            #expect(fires(host, id, "r") == ["[ProbeApp] timer r fired 1 state=active", "[ProbeApp] timer r fired 2 state=active"],
                    "one fire for the five intervals it missed")
            let callbacks = await host.callbacks(id)
            #expect(Array(callbacks.suffix(2)) == ["willEnterForeground", "didBecomeActive"])
            let resumed = try #require(await host.events(id).first { $0.kind == .service && $0.cause.hasPrefix("HostTimer:") })
            #expect(resumed.cause.contains("fell due while the app ran no code"))

            try await advance(host, .milliseconds(1_500))
            #expect(await times(host, id, since: t0, began("tick")) == [2_000, 13_000, 14_000], "back on its 2 s grid")
        }
    }

    @Test func theTimersOfAnAppThatEndsAreDropped() async throws {
        try await withHost(label: "te", clock: .virtual) { host in
            let id = try await host.installProbe("com.timer.exit")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "timer:a:1:repeat", "--on", "launch", "timer:b:30",
            ])
            #expect(await host.supervisor.appTimerDeadlines(id) == 2)
            try await host.supervisor.terminate(id)
            #expect(await host.supervisor.appTimerDeadlines(id) == 0)
            #expect(await host.supervisor.liveTimerCount(id) == nil)
            try await advance(host, .seconds(60))
            // Launched again: a new process starts with no timers.
            _ = try await host.supervisor.launch(id, background: false, arguments: [])
            #expect(await host.supervisor.liveTimerCount(id) == 0)
        }
    }

    @Test func the257thTimerIsRefusedWithAReasonAndTheAppGoesOn() async throws {
        try await withHost(label: "tb", clock: .virtual) { host in
            let id = try await host.installProbe("com.timer.bound")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "timers:257:60", "--on", "active", "print:still-here",
            ])
            #expect(log(host, id).contains(
                "[ProbeApp] timers: scheduled 256 of 257: refused: the app has 256 live host timers, the most one app may have; invalidate one first"))
            #expect(await host.supervisor.liveTimerCount(id) == 256)
            let refused = await host.events(id).filter { $0.kind == .service && $0.cause.hasPrefix("HostTimer.scheduledTimer refused") }
            #expect(refused.count == 1)
            try await advance(host, .seconds(1))
            #expect(try await host.supervisor.status(id).first?.state == .active, "refused, not killed")
            #expect(try await host.supervisor.reports(id).isEmpty)
        }
    }

    @Test func intervalsThatAreNoNumbersAreRefusedAndTheOthersBounded() async throws {
        try await withHost(label: "ti", clock: .virtual) { host in
            let id = try await host.installProbe("com.timer.interval")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "timer:nan:nan", "--on", "launch", "timer:inf:inf", "--on", "launch", "timer:ninf:-inf",
                "--on", "launch", "timer:zero:0", "--on", "launch", "timer:neg:-5", "--on", "launch", "timer:huge:1e300",
            ])
            let text = log(host, id)
            for name in ["nan", "inf", "ninf"] {
                #expect(text.contains("[ProbeApp] timer \(name): refused: the interval "), "\(name) refused: \(text)")
            }
            #expect(text.contains("is not a number of seconds"))
            #expect(text.contains("[ProbeApp] timer zero scheduled interval=0.001"))
            #expect(text.contains("[ProbeApp] timer neg scheduled interval=0.001"))
            #expect(text.contains("[ProbeApp] timer huge scheduled interval=3153600000.0"))
            #expect(await host.supervisor.liveTimerCount(id) == 3)
            try await advance(host, .milliseconds(1))
            #expect(fires(host, id, "zero").count == 1 && fires(host, id, "neg").count == 1, "1 ms, the floor")
            #expect(fires(host, id, "huge").isEmpty)
        }
    }

    /// Timer requests are messages like any other: a flood of them stops the app at the
    /// host's message rate.
    @Test func aFloodOfTimerRequestsKillsTheAppAtTheMessageRate() async throws {
        try await withHost(label: "tf", clock: .virtual, configure: { config in
            config.bounds.messageBurst = 300
            config.bounds.messagesPerSecond = 10
        }) { host in
            let id = try await host.installProbe("com.timer.flood")
            _ = try? await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "timer-churn:5000"])
            try await host.waitUntil(id, is: .notRunning)
            let reason = try #require(try await host.supervisor.reports(id).last).reason
            #expect(reason.contains("flooded the host: more than 300 messages at once"), "\(reason)")
            #expect(await host.supervisor.appTimerDeadlines(id) == 0)
        }
    }

    /// ProbeApp's timed actions follow the host's clock: a task held for 10 s ends (and
    /// the app is suspended) at 10 s of virtual time, however fast the advance runs.
    @Test func probeTimedActionsLandAtTheirVirtualTime() async throws {
        try await withHost(label: "tp", clock: .virtual) { host in
            let id = try await host.installProbe("com.timer.probe")
            let t0 = await start(host)
            _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "background", "hold-task:upload:10"])
            try await host.supervisor.background(id)
            _ = await host.waitForEvent(id) { $0.callback == "didEnterBackground" }
            try await advance(host, .milliseconds(9_900))
            #expect(try await host.supervisor.status(id).first?.state == .background)
            try await advance(host, .milliseconds(200))
            #expect(try await host.supervisor.status(id).first?.state == .suspended)
            #expect(await times(host, id, since: t0) { $0.kind == .backgroundTask && $0.began == false } == [10_000])
            #expect(await times(host, id, since: t0) { $0.kind == .transition && $0.to == .suspended } == [10_000])
        }
    }

    /// The same script on two hosts gives the same events, in the same order, at the
    /// same host times.
    @Test func theSameScriptGivesTheSameEventsAtTheSameTimes() async throws {
        func run() async throws -> [String] {
            try await withHost(label: "td", clock: .virtual) { host in
                let id = try await host.installProbe("com.timer.same")
                let t0 = await start(host)
                _ = try await host.supervisor.launch(id, background: false, arguments: [
                    "--on", "launch", "timer:a:1.5:repeat", "--on", "launch", "timer:b:1.5:repeat", "--on", "launch", "timer:c:4",
                    "--on", "timer", "begin-task:t", "--on", "timer", "end-task:t",
                    "--on", "background", "hold-task:h:5",
                ])
                try await advance(host, .seconds(5))
                try await host.supervisor.background(id)
                try await advance(host, .seconds(20))
                try await host.supervisor.foreground(id)
                try await advance(host, .seconds(2))
                let kinds: Set<HostEvent.Kind> = [.transition, .backgroundTask, .callback, .service]
                return await host.events(id).filter { kinds.contains($0.kind) }.map {
                    "\(Int(($0.time.timeIntervalSince(t0) * 1000).rounded())) \($0.kind.rawValue) \($0.cause)"
                }
            }
        }
        let first = try await run()
        let second = try await run()
        #expect(first == second)
        #expect(first.filter { $0.contains("beginBackgroundTask \"t\"") }.count >= 8, "\(first)")
    }

    /// On the real clock a timer fires at real time.
    @Test func onTheRealClockATimerFiresAtRealTime() async throws {
        try await withHost(label: "tc") { host in
            let id = try await host.installProbe("com.timer.real")
            let started = Date()
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "timer:t:0.2", "--on", "timer", "begin-task:fired",
            ])
            let event = try #require(await host.waitForEvent(id, began("fired")))
            #expect(event.time.timeIntervalSince(started) >= 0.2)
        }
    }
}
