import AppHostProtocol
import Testing
@testable import Host

/// The lifecycle rules background modes add: activities, service events that wake
/// or launch, mode violations. Without processes.
@Suite("Lifecycle: modes")
struct LifecycleModeTests: LifecycleFixtures {
    let fix = ServiceEvent.locationUpdate([LocationFix(latitude: 1, longitude: 2)])

    @Test func anActivityKeepsABackgroundedAppRunningWithoutABudget() {
        var m = activeMachine()
        _ = m.handle(.activityBegan("audio playback"))
        let fx = home(&m)
        #expect(signals(fx).isEmpty, "no SIGSTOP while audio plays")
        #expect(m.state == .background)
        #expect(m.timeRemaining(at: .seconds(100)) == Double.greatestFiniteMagnitude)
        // The budget timers were cancelled: firing them does nothing.
        #expect(signals(m.handle(.timerFired(.backgroundBudget), at: .seconds(30))).isEmpty)
        let end = m.handle(.activityEnded("audio playback"), at: .seconds(600))
        #expect(signals(end) == [.stop], "suspended once nothing keeps it running")
    }

    @Test func aTaskLeftWhenTheActivityEndsGetsAFreshBudget() {
        var m = activeMachine()
        _ = m.handle(.activityBegan("VoIP call 1"))
        _ = home(&m)
        _ = m.handle(.taskBegan(id: 1, name: "upload"), at: .seconds(5))
        let fx = m.handle(.activityEnded("VoIP call 1"), at: .seconds(100))
        #expect(signals(fx).isEmpty, "the task still holds it")
        #expect(fx.contains(.startTimer(.backgroundBudget, after: .seconds(30))))
        #expect(m.timeRemaining(at: .seconds(110)) == 20)
    }

    @Test func anActivityBegunWhileSuspendingResumesTheApp() {
        var m = suspended()
        let fx = m.handle(.activityBegan("location updates"))
        #expect(signals(fx) == [.cont])
        #expect(m.state == .background)
    }

    @Test func aWakingEventResumesASuspendedAppAndAWatchdogTimesItsHandler() {
        var m = suspended()
        let fx = m.handle(.deliver(fix, wake: true, launch: nil), at: .seconds(50))
        #expect(signals(fx) == [.cont])
        #expect(sends(fx) == ["didUpdateLocations(1)"])
        #expect(fx.contains(.startTimer(.wake, after: .seconds(10))))
        #expect(m.state == .background)
        // The handler returns: suspended again.
        let back = m.handle(.callbackReturned(.service(fix)), at: .seconds(51))
        #expect(signals(back) == [.stop])
        #expect(back.contains(.cancelTimer(.wake)))
    }

    @Test func aHandlerThatDoesNotReturnWithinTheWakeBudgetIsKilled() {
        var m = suspended()
        _ = m.handle(.deliver(fix, wake: true, launch: nil), at: .seconds(50))
        let fx = m.handle(.timerFired(.wake), at: .seconds(60))
        #expect(signals(fx) == [.kill])
        #expect(m.pendingRecord?.code == .watchdog)
        #expect(m.pendingRecord?.budget?.name == "wake")
    }

    @Test func theWakeBudgetTimesEachHandlerNotTheBacklog() {
        var m = suspended()
        let second = ServiceEvent.locationUpdate([LocationFix(latitude: 3, longitude: 4)])
        _ = m.handle(.deliver(fix, wake: true, launch: nil), at: .seconds(50))
        _ = m.handle(.deliver(second, wake: true, launch: nil), at: .seconds(50))
        // The first took 8 s: the second's 10 s start now, not at 50 s.
        let first = m.handle(.callbackReturned(.service(fix)), at: .seconds(58))
        #expect(first.contains(.startTimer(.wake, after: .seconds(10))))
        #expect(signals(first).isEmpty)
        let back = m.handle(.callbackReturned(.service(second)), at: .seconds(66))
        #expect(back.contains(.cancelTimer(.wake)))
        #expect(signals(back) == [.stop])
        #expect(m.pendingRecord == nil)
    }

    @Test func aNonWakingEventDoesNotReachASuspendedApp() {
        var m = suspended()
        let fx = m.handle(.deliver(fix, wake: false, launch: nil))
        #expect(signals(fx).isEmpty && sends(fx).isEmpty)
        #expect(m.state == .suspended)
    }

    @Test func aLaunchingEventLaunchesInTheBackgroundAndIsDeliveredAfterLaunch() {
        var m = Lifecycle()
        let push = ServiceEvent.voipPush(payload: "{}")
        let fx = m.handle(.deliver(push, wake: true, launch: .voipPush))
        #expect(fx.contains(.spawn(LaunchOptions(reason: .voipPush))))
        #expect(m.state == .background)
        _ = m.handle(.spawned(pid: 7))
        let hello = m.handle(.handshake)
        #expect(sends(hello) == ["didFinishLaunching"])
        let launched = m.handle(.callbackReturned(.didFinishLaunching(options: LaunchOptions(reason: .voipPush))))
        #expect(sends(launched) == ["didReceiveIncomingPush(voIP)"], "the push follows the launch")
        #expect(signals(launched).isEmpty, "not suspended with the push handler to run")
        let done = m.handle(.callbackReturned(.service(push)))
        #expect(signals(done) == [.stop])
    }

    @Test func withoutLaunchPermissionANotRunningAppGetsNothing() {
        var m = Lifecycle()
        let fx = m.handle(.deliver(fix, wake: true, launch: nil))
        #expect(!fx.contains { if case .spawn = $0 { true } else { false } })
        #expect(m.state == .notRunning)
    }

    @Test func aModeViolationKillsWithItsRecord() {
        var m = activeMachine()
        let record = Lifecycle.TerminationRecord(namespace: "FRONTBOARD", code: .badCall, reason: "no call reported")
        let fx = m.handle(.modeViolation(record))
        #expect(signals(fx) == [.kill])
        let exit = m.handle(.exited(description: "killed by SIGKILL", clean: false))
        #expect(exit.contains(.report(record)))
        #expect(m.lastTermination == .system, "a rule kill is not the user's doing")
    }

    @Test func foregroundEventsAreSentAtOnce() {
        var m = activeMachine()
        let fx = m.handle(.deliver(fix, wake: false, launch: nil))
        #expect(sends(fx) == ["didUpdateLocations(1)"])
        #expect(!fx.contains(.startTimer(.wake, after: .seconds(10))), "no wake budget in the foreground")
    }
}
