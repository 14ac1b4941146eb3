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
        #expect(sends(fx) == ["willResignActive", "didEnterBackground"])
        #expect(transitions(fx) == ["active→inactive", "inactive→background"])
        #expect(!fx.contains(.signal(.stop, reason: "no assertion left")), "must wait for didEnterBackground to return")
        fx = m.handle(.callbackReturned(.willResignActive))
        #expect(acts(fx).isEmpty)
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

    @Test func exitsOnSuspendTerminatesInsteadOfSuspending() {
        var m = activeMachine(exitsOnSuspend: true)
        _ = m.handle(.home)
        _ = m.handle(.callbackReturned(.willResignActive))
        let fx = m.handle(.callbackReturned(.didEnterBackground))
        #expect(sends(fx) == ["willTerminate"])
        #expect(fx.contains(.startTimer(.grace, after: .seconds(5))))
        #expect(!fx.contains { if case .signal(.stop, _) = $0 { true } else { false } })
        let exit = m.handle(.exited(description: "exited with code 0", clean: true))
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

    func backgrounded(at t: Duration, tasks: [(Int, String)]) -> Lifecycle {
        var m = activeMachine()
        for (id, name) in tasks { _ = m.handle(.taskBegan(id: id, name: name), at: .zero) }
        _ = m.handle(.home, at: t)
        _ = m.handle(.callbackReturned(.willResignActive), at: t)
        _ = m.handle(.callbackReturned(.didEnterBackground), at: t)
        return m
    }

    @Test func goingHomeStartsTheBudgetAndItsWarning() {
        var m = activeMachine()
        let fx = m.handle(.home, at: .seconds(100))
        #expect(fx.contains(.startTimer(.expirationWarning, after: .seconds(25))))
        #expect(fx.contains(.startTimer(.backgroundBudget, after: .seconds(30))))
        #expect(fx.contains(.startTimer(.backgroundCallback, after: .seconds(5))))
        #expect(fx.contains(.cancelTimer(.heartbeat)))
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

    @Test func heartbeatThenHangOnlyWhileUnanswered() {
        var m = activeMachine()
        var fx = m.handle(.timerFired(.heartbeat), at: .seconds(5))
        #expect(sends(fx) == ["heartbeat"])
        #expect(fx.contains(.startTimer(.hang, after: .seconds(10))))
        fx = m.handle(.callbackReturned(.heartbeat), at: .seconds(5))
        #expect(fx.contains(.cancelTimer(.hang)))
        #expect(fx.contains(.startTimer(.heartbeat, after: .seconds(5))))
        _ = m.handle(.timerFired(.heartbeat), at: .seconds(10))
        fx = m.handle(.timerFired(.hang), at: .seconds(20))
        #expect(m.pendingRecord?.budget?.name == "foregroundHang")
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

