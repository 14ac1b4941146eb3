import AppHostProtocol
import Testing
@testable import Host

/// The way home as a value (issue 18): `inactive` and `willResignActive` first, the
/// background and `didEnterBackground` (and its 5 s) only once that has returned;
/// `UIApplicationExitsOnSuspend` apps terminate from `inactive` instead. No process.
@Suite("Lifecycle: home")
struct LifecycleHomeTests: LifecycleFixtures {
    func kills(_ fx: [Effect]) -> Bool {
        fx.contains { if case .signal(.kill, _) = $0 { true } else { false } }
    }

    @Test func aSlowWillResignActiveKeepsTheAppInactiveAndIsNotChargedToDidEnterBackground() {
        var m = activeMachine()
        var fx = m.handle(.home, at: .seconds(10))
        #expect(m.state == .inactive && m.resigning)
        #expect(fx.contains(.startTimer(.resignCallback, after: .seconds(10))))
        #expect(!fx.contains(.startTimer(.backgroundCallback, after: .seconds(5))), "didEnterBackground is not sent yet")
        #expect(m.timeRemaining(at: .seconds(17)) == Double.greatestFiniteMagnitude, "no background time runs yet")
        // willResignActive returns 7 s later: now the background and its 5 s begin.
        fx = m.handle(.callbackReturned(.willResignActive), at: .seconds(17))
        #expect(fx.contains(.cancelTimer(.resignCallback)))
        #expect(transitions(fx) == ["inactive→background"])
        #expect(fx.contains(.send(.didEnterBackground, state: .background)))
        #expect(fx.contains(.startTimer(.backgroundCallback, after: .seconds(5))))
        #expect(fx.contains(.startTimer(.backgroundBudget, after: .seconds(30))))
        #expect(m.backgroundSince == .seconds(17))
        #expect(m.timeRemaining(at: .seconds(27)) == 20, "the background budget runs from entering the background")
        fx = m.handle(.timerFired(.backgroundCallback), at: .seconds(22))
        #expect(kills(fx))
        #expect(m.pendingRecord?.reason == "didEnterBackground did not return within 5s")
        #expect(m.pendingRecord?.budget?.name == "didEnterBackground")
    }

    @Test func aWillResignActiveThatNeverReturnsIsKilledNamingIt() {
        var m = activeMachine()
        _ = m.handle(.home, at: .zero)
        let fx = m.handle(.timerFired(.resignCallback), at: .seconds(10))
        #expect(kills(fx))
        #expect(sends(fx).isEmpty, "no didEnterBackground for an app still in willResignActive")
        let record = m.pendingRecord
        #expect(record?.reason == "willResignActive did not return within 10s")
        #expect(record?.code == .watchdog && record?.namespace == "FRONTBOARD")
        #expect(record?.budget == BudgetRecord(name: "foregroundHang", seconds: 10, profile: "ios13"))
        let exit = m.handle(.exited(description: "killed by SIGKILL", clean: false), at: .seconds(10))
        #expect(transitions(exit) == ["inactive→notRunning"], "it never was in the background")
    }

    @Test func theResignDeadlineAfterTheReturnDoesNothing() {
        var m = activeMachine()
        _ = m.handle(.home)
        _ = m.handle(.callbackReturned(.willResignActive))
        #expect(!kills(m.handle(.timerFired(.resignCallback), at: .seconds(10))))
        #expect(m.pendingRecord == nil)
    }

    @Test func broughtBackWhileResigningBecomesActiveAgainWithoutEnteringTheBackground() {
        var m = activeMachine()
        _ = m.handle(.home, at: .seconds(1))
        #expect(acts(m.handle(.foreground, at: .seconds(2))).isEmpty, "it answers willResignActive first")
        let fx = m.handle(.callbackReturned(.willResignActive), at: .seconds(3))
        #expect(sends(fx) == ["didBecomeActive"])
        #expect(transitions(fx) == ["inactive→active"])
        #expect(fx.contains(.startTimer(.hangCheck, after: .seconds(10))))
        #expect(m.state == .active && m.backgroundSince == nil)
    }

    @Test func homeAgainWhileResigningSendsNothingTwice() {
        var m = activeMachine()
        _ = m.handle(.home)
        #expect(acts(m.handle(.home)).isEmpty)
        let fx = m.handle(.callbackReturned(.willResignActive))
        #expect(sends(fx) == ["didEnterBackground"])
    }

    @Test func terminatedWhileResigningGetsWillTerminateAndTheLateReturnChangesNothing() {
        var m = activeMachine()
        _ = m.handle(.home)
        var fx = m.handle(.terminate(.user))
        #expect(sends(fx) == ["willTerminate"])
        fx = m.handle(.callbackReturned(.willResignActive))
        #expect(sends(fx).isEmpty && transitions(fx).isEmpty)
        #expect(!kills(m.handle(.timerFired(.resignCallback), at: .seconds(10))), "the grace period decides now")
    }

    @Test func exitsOnSuspendSentHomeWhileLaunchingTerminatesOnceLaunched() {
        var m = Lifecycle(exitsOnSuspend: true)
        let options = LaunchOptions(reason: .user)
        _ = m.handle(.launch(options, placement: .foreground))
        _ = m.handle(.handshake)
        _ = m.handle(.home)
        let fx = m.handle(.callbackReturned(.didFinishLaunching(options: options)))
        #expect(sends(fx) == ["willTerminate"])
        #expect(transitions(fx).isEmpty)
        #expect(m.terminating == .exitsOnSuspend)
    }

    @Test func exitsOnSuspendTakesNoTaskIntoTheBackground() {
        // A task begun in the foreground does not keep an opted-out app: it terminates.
        var m = activeMachine(exitsOnSuspend: true)
        _ = m.handle(.taskBegan(id: 1, name: "upload"))
        _ = m.handle(.home)
        let fx = m.handle(.callbackReturned(.willResignActive))
        #expect(sends(fx) == ["willTerminate"])
    }

    @Test func exitsOnSuspendGraceRunsOutToAKill() {
        var m = activeMachine(exitsOnSuspend: true)
        _ = m.handle(.home)
        _ = m.handle(.callbackReturned(.willResignActive))
        let fx = m.handle(.timerFired(.grace), at: .seconds(5))
        #expect(kills(fx))
        #expect(m.pendingRecord?.reason == "did not exit within 5s after willTerminate")
        #expect(m.pendingRecord?.code == nil, "0xdeadfa11 is the user's terminate only")
    }
}

/// An uncaught exception the app says it aborts for, as a value (issue 18).
@Suite("Lifecycle: uncaught exceptions")
struct LifecycleExceptionTests: LifecycleFixtures {
    let exception = UncaughtException(name: .generic, reason: "Data tasks are not supported in background sessions")

    func report(_ fx: [Effect]) -> Lifecycle.TerminationRecord? {
        fx.compactMap { if case .report(let r) = $0 { r } else { nil } }.first
    }

    @Test func theExitThatFollowsIsReportedWithTheException() {
        var m = activeMachine()
        #expect(acts(m.handle(.exceptionRaised(exception))).isEmpty, "the app aborts itself: the host does nothing")
        let fx = m.handle(.exited(description: "killed by SIGABRT", clean: false))
        let record = report(fx)
        #expect(record?.exception == exception)
        #expect(record?.namespace == nil && record?.code == nil)
        #expect(record?.reason == "\(exception.terminationMessage) (killed by SIGABRT)")
        let cause = fx.compactMap { if case .transition(_, .notRunning, let c) = $0 { c } else { nil } }.first
        #expect(cause == "uncaught exception 'NSGenericException' (killed by SIGABRT)")
    }

    @Test func theFirstCountsAndANewProcessStartsWithout() {
        var m = activeMachine()
        _ = m.handle(.exceptionRaised(exception))
        _ = m.handle(.exceptionRaised(UncaughtException(name: .invalidArgument, reason: "later")))
        #expect(report(m.handle(.exited(description: "killed by SIGABRT", clean: false)))?.exception == exception)
        #expect(m.raisedException == nil)
        var next = activeMachine()
        #expect(report(next.handle(.exited(description: "killed by SIGSEGV", clean: false)))?.exception == nil)
    }

    @Test func theHostsOwnKillKeepsItsRecordAndAnExceptionIsReportedEvenWhileTerminating() {
        var m = activeMachine()
        _ = m.handle(.exceptionRaised(exception))
        _ = m.handle(.protocolViolation("garbage"))
        #expect(report(m.handle(.exited(description: "killed by SIGKILL", clean: false)))?.namespace == "APPHOST")

        var t = activeMachine()
        _ = t.handle(.terminate(.user))
        _ = t.handle(.exceptionRaised(exception))
        #expect(report(t.handle(.exited(description: "killed by SIGABRT", clean: false)))?.exception == exception,
                "an abort in willTerminate is still a crash")
    }

    @Test func whatAnAppSaysIsBounded() {
        var m = activeMachine()
        _ = m.handle(.exceptionRaised(UncaughtException(name: .generic, reason: String(repeating: "x", count: 50_000))))
        #expect(m.raisedException?.reason.count == UncaughtException.maximumReasonLength + 1)
    }
}
