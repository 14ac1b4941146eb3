import AppHostProtocol
import Testing
@testable import Host

/// The lifecycle table, without processes.
@Suite("Lifecycle")
struct LifecycleTests: LifecycleFixtures {
    @Test func noStopWhileACallbackIsInFlight() {
        // The expiration handler ends the task, then returns: stop only after the return.
        var m = activeMachine()
        _ = m.handle(.taskBegan(id: 1, name: "upload"))
        _ = m.handle(.home)
        _ = m.handle(.callbackReturned(.willResignActive))
        _ = m.handle(.callbackReturned(.didEnterBackground))
        _ = m.handle(.timerFired(.expirationWarning), at: .seconds(25))
        #expect(m.callbacksInFlight == 1)
        #expect(acts(m.handle(.taskEnded(id: 1), at: .seconds(25))).isEmpty, "its return is still on the way")
        #expect(acts(m.handle(.callbackReturned(.backgroundTaskExpiration(taskID: 1)), at: .seconds(25))) == [.signal(.stop, reason: "no assertion left")])
    }

    @Test func suspensionCancelsTheBackgroundTimers() {
        var m = activeMachine()
        _ = m.handle(.home)
        _ = m.handle(.callbackReturned(.willResignActive))
        _ = m.handle(.callbackReturned(.didEnterBackground))
        let fx = m.handle(.stopConfirmed)
        #expect(fx.contains(.cancelTimer(.backgroundBudget)) && fx.contains(.cancelTimer(.expirationWarning)))
    }

    @Test func launchGoesInactiveThenActiveWithCallbacksInOrder() {
        var m = Lifecycle()
        let options = LaunchOptions(reason: .user, arguments: ["-x"])
        var fx = m.handle(.launch(options, placement: .foreground))
        #expect(fx.first == .spawn(options))
        #expect(transitions(fx) == ["notRunning→inactive"])
        fx = m.handle(.handshake)
        #expect(acts(fx) == [.send(.didFinishLaunching(options: options), state: .inactive)])
        fx = m.handle(.callbackReturned(.didFinishLaunching(options: options)))
        #expect(transitions(fx) == ["inactive→active"])
        #expect(sends(fx) == ["didBecomeActive"])
        #expect(m.state == .active)
    }

    @Test func homeWithoutAssertionSuspendsAfterDidEnterBackgroundReturns() {
        var m = activeMachine()
        var fx = m.handle(.home)
        #expect(sends(fx) == ["willResignActive"])
        #expect(transitions(fx) == ["active→inactive"], "inactive until willResignActive has returned")
        fx = m.handle(.callbackReturned(.willResignActive))
        #expect(sends(fx) == ["didEnterBackground"])
        #expect(transitions(fx) == ["inactive→background"])
        #expect(!fx.contains(.signal(.stop, reason: "no assertion left")), "must wait for didEnterBackground to return")
        fx = m.handle(.callbackReturned(.didEnterBackground))
        #expect(acts(fx) == [.signal(.stop, reason: "no assertion left")])
        #expect(m.state == .background, "suspended only once the kernel confirms the stop")
        fx = m.handle(.stopConfirmed)
        #expect(transitions(fx) == ["background→suspended"])
    }

    @Test func backgroundTaskDefersSuspensionUntilEnded() {
        var m = activeMachine()
        _ = m.handle(.home)
        _ = m.handle(.taskBegan(id: 1, name: "upload"))
        _ = m.handle(.callbackReturned(.willResignActive))
        var fx = m.handle(.callbackReturned(.didEnterBackground))
        #expect(acts(fx).isEmpty)
        _ = m.handle(.taskBegan(id: 2, name: nil))
        fx = m.handle(.taskEnded(id: 1))
        #expect(acts(fx).isEmpty, "task 2 still held")
        fx = m.handle(.taskEnded(id: 2))
        #expect(acts(fx) == [.signal(.stop, reason: "no assertion left")])
    }

    @Test func taskBegunInForegroundDoesNotBlockActiveApp() {
        var m = activeMachine()
        let fx = m.handle(.taskBegan(id: 7, name: "sync"))
        #expect(acts(fx).isEmpty)
        #expect(m.state == .active)
        #expect(m.hasAssertion)
    }

    @Test func endingUnknownTaskIsLoggedNotFatal() {
        var m = activeMachine()
        let fx = m.handle(.taskEnded(id: 99))
        #expect(acts(fx).count == 1)
        if case .log(let text)? = fx.first { #expect(text.contains("99")) } else { Issue.record("expected a log") }
        #expect(m.state == .active)
    }

    @Test func foregroundFromSuspendedSendsSIGCONTThenCallbacks() {
        var m = activeMachine()
        _ = m.handle(.home)
        _ = m.handle(.callbackReturned(.willResignActive))
        _ = m.handle(.callbackReturned(.didEnterBackground))
        _ = m.handle(.stopConfirmed)
        let fx = m.handle(.foreground)
        #expect(acts(fx).first == .signal(.cont, reason: "resume"))
        #expect(sends(fx) == ["willEnterForeground", "didBecomeActive"])
        #expect(transitions(fx) == ["suspended→background", "background→inactive", "inactive→active"])
    }

    @Test func foregroundBeforeStopConfirmedContinuesTheApp() {
        var m = activeMachine()
        _ = m.handle(.home)
        _ = m.handle(.callbackReturned(.willResignActive))
        _ = m.handle(.callbackReturned(.didEnterBackground))
        let fx = m.handle(.foreground)
        #expect(acts(fx).first == .signal(.cont, reason: "brought to the foreground before the stop was confirmed"))
        #expect(m.state == .active)
        #expect(acts(m.handle(.stopConfirmed)).isEmpty, "a late stop report does not suspend an active app")
        #expect(m.state == .active)
    }

    @Test func exitsOnSuspendTerminatesInsteadOfEnteringTheBackground() {
        var m = activeMachine(exitsOnSuspend: true)
        var fx = m.handle(.home)
        #expect(sends(fx) == ["willResignActive"])
        fx = m.handle(.callbackReturned(.willResignActive))
        #expect(sends(fx) == ["willTerminate"], "no didEnterBackground")
        #expect(fx.contains(.send(.willTerminate, state: .inactive)))
        #expect(transitions(fx).isEmpty, "never in the background")
        #expect(m.state == .inactive && m.terminating == .exitsOnSuspend)
        #expect(fx.contains(.startTimer(.grace, after: .seconds(5))))
        #expect(!fx.contains { if case .signal(.stop, _) = $0 { true } else { false } })
        #expect(acts(m.handle(.callbackReturned(.willTerminate))).isEmpty)
        let exit = m.handle(.exited(description: "exited with code 0", clean: true))
        #expect(transitions(exit) == ["inactive→notRunning"])
        #expect(!exit.contains { if case .report = $0 { true } else { false } }, "a requested exit is not a crash")
        #expect(m.state == .notRunning)
    }

    @Test func backgroundLaunchSkipsForegroundCallbacksAndSuspends() {
        var m = Lifecycle()
        let options = LaunchOptions(reason: .background)
        var fx = m.handle(.launch(options, placement: .background))
        #expect(transitions(fx) == ["notRunning→background"])
        _ = m.handle(.handshake)
        fx = m.handle(.callbackReturned(.didFinishLaunching(options: options)))
        #expect(sends(fx).isEmpty)
        #expect(acts(fx) == [.signal(.stop, reason: "no assertion left")])
    }

    @Test func crashIsReported() {
        var m = activeMachine()
        let fx = m.handle(.exited(description: "killed by SIGSEGV", clean: false))
        #expect(fx.contains(.report(.init(namespace: nil, code: nil, reason: "killed by SIGSEGV"))))
        #expect(transitions(fx) == ["active→notRunning"])
    }

    @Test func crashDuringLaunchSaysSo() {
        var m = Lifecycle()
        _ = m.handle(.launch(LaunchOptions(reason: .user), placement: .foreground))
        _ = m.handle(.handshake)
        let fx = m.handle(.exited(description: "killed by SIGABRT", clean: false))
        #expect(fx.contains(.report(.init(namespace: nil, code: nil, reason: "killed by SIGABRT during launch"))))
    }

    @Test func userTerminateOfRunningAppSendsWillTerminateThenKillsAfterGrace() {
        var m = activeMachine()
        var fx = m.handle(.terminate(.user))
        #expect(sends(fx) == ["willTerminate"])
        #expect(fx.contains(.startTimer(.grace, after: .seconds(5))))
        fx = m.handle(.timerFired(.grace))
        #expect(acts(fx) == [.signal(.kill, reason: "grace period after willTerminate ran out")])
        fx = m.handle(.exited(description: "killed by SIGKILL", clean: false))
        #expect(fx.contains { if case .report = $0 { true } else { false } })
    }

    @Test func userTerminateOfSuspendedAppKillsWithoutCallbackOrReport() {
        var m = activeMachine()
        _ = m.handle(.home)
        _ = m.handle(.callbackReturned(.willResignActive))
        _ = m.handle(.callbackReturned(.didEnterBackground))
        _ = m.handle(.stopConfirmed)
        var fx = m.handle(.terminate(.user))
        #expect(acts(fx) == [.signal(.kill, reason: "terminated while suspended")])
        fx = m.handle(.exited(description: "killed by SIGKILL", clean: false))
        #expect(!fx.contains { if case .report = $0 { true } else { false } })
        #expect(m.state == .notRunning)
    }

    @Test func shutdownResumesSuspendedAppToDeliverWillTerminate() {
        var m = activeMachine()
        _ = m.handle(.home)
        _ = m.handle(.callbackReturned(.willResignActive))
        _ = m.handle(.callbackReturned(.didEnterBackground))
        _ = m.handle(.stopConfirmed)
        let fx = m.handle(.terminate(.shutdown))
        #expect(acts(fx).first == .signal(.cont, reason: "resume to deliver willTerminate"))
        #expect(sends(fx) == ["willTerminate"])
    }

    @Test func protocolViolationKillsWithReport() {
        var m = activeMachine()
        var fx = m.handle(.protocolViolation("frame of 100000000 bytes exceeds the maximum of 1048576"))
        #expect(acts(fx).count == 1)
        if case .signal(.kill, _)? = fx.first {} else { Issue.record("expected SIGKILL, got \(fx)") }
        fx = m.handle(.exited(description: "killed by SIGKILL", clean: false))
        let report = fx.compactMap { if case .report(let r) = $0 { r } else { nil } }.first
        #expect(report?.namespace == "APPHOST")
        #expect(report?.reason.contains("exceeds the maximum") == true)
    }

    @Test func secondHandshakeIsAViolation() {
        var m = activeMachine()
        let fx = m.handle(.handshake)
        #expect(fx.contains { if case .signal(.kill, _) = $0 { true } else { false } })
    }

    @Test func homeDuringLaunchGoesToBackgroundOnceLaunched() {
        var m = Lifecycle()
        let options = LaunchOptions(reason: .user)
        _ = m.handle(.launch(options, placement: .foreground))
        _ = m.handle(.handshake)
        #expect(acts(m.handle(.home)).isEmpty)
        let fx = m.handle(.callbackReturned(.didFinishLaunching(options: options)))
        #expect(transitions(fx) == ["inactive→background"])
        #expect(sends(fx) == ["didEnterBackground"])
    }

    // MARK: - Time

    func backgrounded(at t: Duration, tasks: [(BackgroundTaskID, String)]) -> Lifecycle {
        var m = activeMachine()
        for (id, name) in tasks { _ = m.handle(.taskBegan(id: id, name: name), at: .zero) }
        _ = m.handle(.home, at: t)
        _ = m.handle(.callbackReturned(.willResignActive), at: t)
        _ = m.handle(.callbackReturned(.didEnterBackground), at: t)
        return m
    }

    @Test func goingHomeStartsTheBudgetAndItsWarning() {
        var m = activeMachine()
        var fx = m.handle(.home, at: .seconds(100))
        #expect(fx.contains(.cancelTimer(.hangCheck)))
        #expect(!fx.contains(.startTimer(.backgroundCallback, after: .seconds(5))), "not before willResignActive returned")
        fx = m.handle(.callbackReturned(.willResignActive), at: .seconds(100))
        #expect(fx.contains(.startTimer(.expirationWarning, after: .seconds(25))))
        #expect(fx.contains(.startTimer(.backgroundBudget, after: .seconds(30))))
        #expect(fx.contains(.startTimer(.backgroundCallback, after: .seconds(5))))
        #expect(m.timeRemaining(at: .seconds(110)) == 20)
        #expect(m.timeRemaining(at: .seconds(200)) == 0)
    }

    @Test func foregroundTimeRemainingIsDBLMAX() {
        let m = activeMachine()
        #expect(m.timeRemaining(at: .seconds(1000)) == Double.greatestFiniteMagnitude)
    }

    @Test func warningRunsEveryHeldTasksHandlerAndLateTasksAtOnce() {
        var m = backgrounded(at: .zero, tasks: [(1, "a"), (2, "b")])
        var fx = m.handle(.timerFired(.expirationWarning), at: .seconds(25))
        #expect(sends(fx) == ["expirationHandler(task 1)", "expirationHandler(task 2)"])
        fx = m.handle(.taskBegan(id: 3, name: "late"), at: .seconds(26))
        #expect(sends(fx) == ["expirationHandler(task 3)"], "a task begun after the warning expires at once")
    }

    @Test func budgetEndKillsOnlyAnAppStillHoldingTasks() {
        var holding = backgrounded(at: .seconds(10), tasks: [(1, "upload")])
        var fx = holding.handle(.timerFired(.backgroundBudget), at: .seconds(40))
        #expect(fx.contains { if case .signal(.kill, _) = $0 { true } else { false } })
        fx = holding.handle(.exited(description: "SIGKILL", clean: false), at: .seconds(40))
        let record = fx.compactMap { if case .report(let r) = $0 { r } else { nil } }.first
        #expect(record?.code == .watchdog)
        #expect(record?.namespace == "RUNNINGBOARD")
        #expect(record?.tasks == [HeldTaskRecord(id: 1, name: "upload", age: 40)])
        #expect(record?.budget == BudgetRecord(name: "backgroundTask", seconds: 30, profile: "ios13"))

        var idle = backgrounded(at: .zero, tasks: [])
        _ = idle.handle(.stopConfirmed)
        #expect(acts(idle.handle(.timerFired(.backgroundBudget), at: .seconds(30))).isEmpty)
    }

    @Test func launchAndDidEnterBackgroundWatchdogs() {
        var m = Lifecycle()
        _ = m.handle(.launch(LaunchOptions(reason: .user), placement: .foreground))
        _ = m.handle(.handshake)
        var fx = m.handle(.timerFired(.launch), at: .seconds(20))
        #expect(fx.contains { if case .signal(.kill, _) = $0 { true } else { false } })
        #expect(m.pendingRecord?.budget?.name == "launch")

        var b = activeMachine()
        _ = b.handle(.home)
        _ = b.handle(.callbackReturned(.willResignActive))
        fx = b.handle(.timerFired(.backgroundCallback), at: .seconds(5))
        #expect(b.pendingRecord?.code == .watchdog)
        #expect(b.pendingRecord?.budget?.name == "didEnterBackground")

        var ok = activeMachine()
        _ = ok.handle(.home)
        _ = ok.handle(.callbackReturned(.willResignActive))
        _ = ok.handle(.callbackReturned(.didEnterBackground))
        #expect(ok.handle(.timerFired(.backgroundCallback)).filter { if case .signal(.kill, _) = $0 { true } else { false } }.isEmpty,
                "a late timer after the return does nothing")
    }

    // MARK: - The foreground hang watchdog (issue 18)

    /// The machine active since `t` (didFinishLaunching returned then).
    func activeMachine(since t: Duration) -> Lifecycle {
        var m = Lifecycle()
        _ = m.handle(.launch(LaunchOptions(reason: .user), placement: .foreground), at: .zero)
        _ = m.handle(.handshake, at: .zero)
        _ = m.handle(.callbackReturned(.didFinishLaunching(options: LaunchOptions(reason: .user))), at: t)
        _ = m.handle(.callbackReturned(.didBecomeActive), at: t)
        return m
    }

    func kills(_ fx: [Effect]) -> Bool {
        fx.contains { if case .signal(.kill, _) = $0 { true } else { false } }
    }

    @Test func activationArmsOneHangCheckAndSendsNothingForIt() {
        var m = Lifecycle()
        _ = m.handle(.launch(LaunchOptions(reason: .user), placement: .foreground))
        _ = m.handle(.handshake)
        let fx = m.handle(.callbackReturned(.didFinishLaunching(options: LaunchOptions(reason: .user))), at: .seconds(3))
        #expect(fx.contains(.startTimer(.hangCheck, after: .seconds(10))))
        #expect(sends(fx) == ["didBecomeActive"], "no probe goes to the app")
        #expect(m.activeSince == .seconds(3))
        // Back from the background: armed again.
        _ = home(&m, at: .seconds(5))
        let back = m.handle(.foreground, at: .seconds(40))
        #expect(back.contains(.startTimer(.hangCheck, after: .seconds(10))))
        #expect(!sends(back).contains { $0.contains("heartbeat") })
    }

    @Test func anIdleRunLoopIsCheckedAgainAHangLater() {
        var m = activeMachine(since: .zero)
        for t in stride(from: 10, through: 3600, by: 10) {
            let fx = m.handle(.hangCheck(.idle), at: .seconds(t))
            #expect(fx == [.startTimer(.hangCheck, after: .seconds(10))])
        }
        #expect(m.pendingRecord == nil)
    }

    @Test func aTurnBlockedAHangIsKilledWithHowLongItWasBlocked() {
        var m = activeMachine(since: .zero)
        // Blocked since 0.5 s, seen at the 10 s check: 10 s or more, killed.
        var fx = m.handle(.hangCheck(.busy(since: .milliseconds(500))), at: .milliseconds(10_600))
        #expect(kills(fx))
        #expect(m.pendingRecord?.code == .watchdog)
        #expect(m.pendingRecord?.namespace == "FRONTBOARD")
        #expect(m.pendingRecord?.budget == BudgetRecord(name: "foregroundHang", seconds: 10, profile: "ios13"))
        #expect(m.pendingRecord?.reason == "main run loop blocked for 10.1s while active")
        fx = m.handle(.exited(description: "SIGKILL", clean: false), at: .milliseconds(10_600))
        #expect(transitions(fx) == ["active→notRunning"])
    }

    @Test func aTurnNotYetBlockedAHangIsCheckedWhenItWouldBe() {
        var m = activeMachine(since: .zero)
        // Busy since 7 s at the 10 s check: checked again at 17 s, not 20 s.
        var fx = m.handle(.hangCheck(.busy(since: .seconds(7))), at: .seconds(10))
        #expect(fx == [.startTimer(.hangCheck, after: .seconds(7))])
        // Still the same turn at 17 s: blocked 10 s.
        fx = m.handle(.hangCheck(.busy(since: .seconds(7))), at: .seconds(17))
        #expect(kills(fx))
        #expect(m.pendingRecord?.reason == "main run loop blocked for 10s while active")
    }

    @Test func aBlockOfElevenToFourteenSecondsRightAfterActivationIsKilled() {
        // Heartbeats missed these (sent at 5 s, answered before the 15 s deadline).
        for block in [11, 12, 14] {
            var m = activeMachine(since: .seconds(2))
            let fx = m.handle(.hangCheck(.busy(since: .seconds(2))), at: .seconds(12))
            #expect(kills(fx), "blocked \(block) s from activation")
            #expect(m.pendingRecord?.reason == "main run loop blocked for 10s while active")
        }
    }

    @Test func blockedTimeCountsFromActivationAndNeverFromTheFuture() {
        // A turn that began before the app became active counts from the activation.
        var m = activeMachine(since: .seconds(100))
        var fx = m.handle(.hangCheck(.busy(since: .zero)), at: .seconds(105))
        #expect(fx == [.startTimer(.hangCheck, after: .seconds(5))])
        fx = m.handle(.hangCheck(.busy(since: .zero)), at: .seconds(110))
        #expect(m.pendingRecord?.reason == "main run loop blocked for 10s while active")
        // A start after now (garbage) reads as a turn that just began.
        var n = activeMachine(since: .zero)
        fx = n.handle(.hangCheck(.busy(since: .seconds(1_000_000))), at: .seconds(10))
        #expect(fx == [.startTimer(.hangCheck, after: .seconds(10))])
        #expect(n.pendingRecord == nil)
    }

    @Test func anUnwatchedProcessIsSaidOnceAndNotCheckedAgain() {
        var m = activeMachine(since: .zero)
        var fx = m.handle(.hangCheck(.unwatched("no page")), at: .seconds(10))
        #expect(fx == [.log("the foreground hang watchdog does not watch this process: no page")])
        #expect(!kills(fx))
        _ = home(&m, at: .seconds(11))
        fx = m.handle(.foreground, at: .seconds(20))
        #expect(!fx.contains(.startTimer(.hangCheck, after: .seconds(10))), "not armed again for this process")
        // A new process is watched again.
        _ = m.handle(.exited(description: "exit 0", clean: true), at: .seconds(30))
        #expect(!m.mainRunLoopUnwatched)
    }

    @Test func aCheckOutsideActiveOrWhileTerminatingDoesNothing() {
        var m = activeMachine(since: .zero)
        _ = m.handle(.home, at: .seconds(1))
        #expect(m.handle(.hangCheck(.busy(since: .zero)), at: .seconds(30)).isEmpty)
        var t = activeMachine(since: .zero)
        _ = t.handle(.terminate(.user), at: .seconds(1))
        #expect(!kills(t.handle(.hangCheck(.busy(since: .zero)), at: .seconds(30))))
        #expect(t.pendingRecord == nil)
    }

    @Test func lockAtSuspensionKillsWithDead10ccInsteadOfStopping() {
        var m = activeMachine()
        _ = m.handle(.home)
        _ = m.handle(.callbackReturned(.willResignActive))
        _ = m.handle(.callbackReturned(.didEnterBackground))
        #expect(m.stopPending)
        let fx = m.handle(.lockHeldAtSuspension("FLOCK write lock on /shared/db"))
        #expect(acts(fx).count == 1)
        #expect(m.pendingRecord?.code == .deadlock)
    }

    @Test func lockFoundAfterTheStopKillsTheSuspendedAppWithDead10cc() {
        var m = activeMachine()
        _ = m.handle(.home)
        _ = m.handle(.callbackReturned(.willResignActive))
        _ = m.handle(.callbackReturned(.didEnterBackground))
        _ = m.handle(.stopConfirmed)
        #expect(m.state == .suspended)
        let fx = m.handle(.lockHeldAtSuspension("POSIX write lock on /shared/db"))
        #expect(fx.contains(.signal(.kill, reason: "file lock held at suspension")))
        #expect(m.pendingRecord?.code == .deadlock)
        #expect(m.pendingRecord?.reason.contains("/shared/db") == true)
        #expect(m.handle(.lockHeldAtSuspension("again")).isEmpty, "one kill")
    }
}

