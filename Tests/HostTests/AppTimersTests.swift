import AppHostProtocol
import Testing
@testable import Host

/// The rules of an app's host-clock timers (AppKitLess `HostTimer`) as a value: when a
/// timer falls due, what a repeating one keeps to, what a suspended app is owed, the
/// bounds. No process, no clock: host times are given.
@Suite("AppTimers")
struct AppTimersTests {
    func scheduled(_ timers: inout AppTimers, _ id: HostTimerID, _ seconds: Double, repeats: Bool = false,
                   at now: Duration = .zero) -> [AppTimers.Effect] {
        (try? timers.schedule(id: id, seconds: seconds, repeats: repeats, at: now).get()) ?? []
    }

    @Test func aTimerIsArmedItsIntervalFromNowAndAOneShotIsForgottenOnceFired() {
        var t = AppTimers()
        #expect(scheduled(&t, 1, 10, at: .seconds(3)) == [.arm(1, at: .seconds(13))])
        #expect(t.count == 1)
        #expect(t.fellDue(1, at: .seconds(13), canRun: true) == [.fire(1)])
        #expect(t.count == 0, "a one-shot is done with once fired")
        #expect(t.fellDue(1, at: .seconds(14), canRun: true).isEmpty, "a stale deadline fires nothing")
    }

    @Test func aRepeatingTimerKeepsToItsGridNotToWhenItRan() {
        var t = AppTimers()
        _ = scheduled(&t, 7, 2, repeats: true)
        // Fired 0.3 s late (a real-clock wake-up): the next is still at 4 s, not 4.3 s.
        #expect(t.fellDue(7, at: .milliseconds(2300), canRun: true) == [.fire(7), .arm(7, at: .seconds(4))])
        #expect(t.returned(7, at: .milliseconds(2400), canRun: true).isEmpty)
        // Fired 5 s late: the missed fires (4, 6) are not made up; the next is at 8 s.
        #expect(t.fellDue(7, at: .milliseconds(7500), canRun: true) == [.fire(7), .arm(7, at: .seconds(8))])
        #expect(t.count == 1, "a repeating timer lives until invalidated")
    }

    @Test func aFireThatFallsDueWhileTheLastStillRunsIsMadeOnceWhenItReturns() {
        var t = AppTimers()
        _ = scheduled(&t, 1, 1, repeats: true)
        _ = t.fellDue(1, at: .seconds(1), canRun: true)
        // The block runs long: fires at 2 s and 3 s come due before it returns.
        #expect(t.fellDue(1, at: .seconds(2), canRun: true).isEmpty, "not sent over a fire in flight")
        #expect(t.owedCount == 1)
        #expect(t.returned(1, at: .milliseconds(3500), canRun: true) == [.fire(1), .arm(1, at: .seconds(4))])
        #expect(t.owedCount == 0)
    }

    @Test func aSuspendedAppIsOwedOneFirePerTimerAndCostsNoDeadline() {
        var t = AppTimers()
        _ = scheduled(&t, 2, 1, repeats: true)
        _ = scheduled(&t, 1, 5)
        #expect(t.fellDue(2, at: .seconds(1), canRun: false).isEmpty, "owed, and not re-armed while suspended")
        #expect(t.fellDue(1, at: .seconds(5), canRun: false).isEmpty)
        #expect(t.owedIDs == [1, 2])
        // Resumed at 60.5 s: each fires once, in id order; the repeating one goes back
        // to its grid (61 s), not 59 fires.
        #expect(t.resumed(at: .milliseconds(60_500)) == [.fire(1), .fire(2), .arm(2, at: .seconds(61))])
        #expect(t.owedCount == 0 && t.count == 1)
        #expect(t.resumed(at: .seconds(61)).isEmpty, "nothing is owed twice")
    }

    @Test func invalidatingCancelsTheDeadlineAndWhatIsOwed() {
        var t = AppTimers()
        _ = scheduled(&t, 3, 1, repeats: true)
        _ = t.fellDue(3, at: .seconds(1), canRun: false)
        #expect(t.invalidate(3) == [.disarm(3)])
        #expect(t.owedCount == 0 && t.count == 0)
        #expect(t.resumed(at: .seconds(2)).isEmpty)
        #expect(t.invalidate(3).isEmpty, "an unknown id is ignored")
    }

    @Test func theProcessEndingDropsEveryTimer() {
        var t = AppTimers()
        _ = scheduled(&t, 2, 1)
        _ = scheduled(&t, 1, 1, repeats: true)
        #expect(t.removeAll() == [.disarm(1), .disarm(2)])
        #expect(t.count == 0)
    }

    @Test func theCountIsBoundedAndIdsAreUniqueAmongLiveTimers() {
        var t = AppTimers(maximum: 3)
        for id in 1...3 { _ = scheduled(&t, HostTimerID(id), 60) }
        #expect(t.schedule(id: 4, seconds: 60, repeats: false, at: .zero) == .failure(.tooMany(maximum: 3)))
        #expect(t.schedule(id: 2, seconds: 60, repeats: false, at: .zero) == .failure(.idInUse(2)))
        _ = t.invalidate(1)
        #expect(t.schedule(id: 4, seconds: 60, repeats: false, at: .zero) == .success([.arm(4, at: .seconds(60))]),
                "room again once one is invalidated")
        #expect(AppTimers().maximum == 256)
        #expect(AppTimers.Refusal.tooMany(maximum: 256).description.contains("256 live host timers"))
    }

    @Test func intervalsThatAreNotNumbersAreRefusedAndTheRestKeptInBounds() {
        var t = AppTimers()
        for bad in [Double.nan, .infinity, -.infinity] {
            guard case .failure(.notANumber(let seconds)) = t.schedule(id: 1, seconds: bad, repeats: true, at: .zero) else {
                Issue.record("\(bad) was not refused")
                continue
            }
            #expect(seconds.bitPattern == bad.bitPattern)
        }
        #expect(t.count == 0)
        // Zero, negative and sub-millisecond intervals become 1 ms; centuries, 100 years.
        #expect(scheduled(&t, 1, 0) == [.arm(1, at: .milliseconds(1))])
        #expect(scheduled(&t, 2, -5) == [.arm(2, at: .milliseconds(1))])
        #expect(scheduled(&t, 3, 0.0001) == [.arm(3, at: .milliseconds(1))])
        #expect(scheduled(&t, 4, 1e300) == [.arm(4, at: Duration.longestWait)])
        #expect(scheduled(&t, 5, 0.0015) == [.arm(5, at: .microseconds(1500))], "to the nanosecond above the floor")
    }

    @Test func theNextDueIsTheFirstGridPointAfterNowEvenFarAhead() {
        #expect(AppTimers.nextDue(after: .seconds(10), interval: .seconds(10), now: .seconds(10)) == .seconds(20))
        #expect(AppTimers.nextDue(after: .seconds(10), interval: .seconds(10), now: .seconds(20)) == .seconds(30))
        #expect(AppTimers.nextDue(after: .seconds(10), interval: .seconds(3), now: .seconds(9)) == .seconds(13))
        // A millisecond timer owed across a century of virtual time: no trap, and after now.
        let far = Duration.longestWait * 3
        let next = AppTimers.nextDue(after: .zero, interval: .milliseconds(1), now: far)
        #expect(next > far && next <= far + .milliseconds(1))
    }
}

/// The rows of the lifecycle table for host-clock timers.
@Suite("Lifecycle timers")
struct LifecycleTimerTests: LifecycleFixtures {
    @Test func aFireIsACallbackInFlightThatKeepsTheAppFromBeingStopped() {
        var m = activeMachine()
        _ = m.handle(.taskBegan(id: 1, name: "sync"))
        _ = home(&m)
        let fx = m.handle(.fireTimer(id: 4))
        #expect(acts(fx) == [.send(.service(.timerFired(id: 4)), state: .background)])
        #expect(!fx.contains { if case .startTimer(.wake, _) = $0 { true } else { false } }, "no wake budget for a timer")
        #expect(signals(m.handle(.taskEnded(id: 1))).isEmpty, "its last task ended while the block runs: no stop yet")
        #expect(m.callbacksInFlight == 1)
        #expect(signals(m.handle(.callbackReturned(.service(.timerFired(id: 4))))) == [.stop], "stopped once the block returned")
    }

    @Test func aFireWaitsForTheLaunchAndIsNotSentToAnAppThatRunsNoCode() {
        var m = Lifecycle()
        _ = m.handle(.launch(LaunchOptions(reason: .user), placement: .foreground))
        _ = m.handle(.spawned(pid: 42))
        _ = m.handle(.handshake)
        #expect(m.handle(.fireTimer(id: 1)).isEmpty, "queued during didFinishLaunching")
        let fx = m.handle(.callbackReturned(.didFinishLaunching(options: LaunchOptions(reason: .user))))
        #expect(sends(fx) == ["didBecomeActive", "HostTimer(1) fired"])
        var s = suspended()
        #expect(sends(s.handle(.fireTimer(id: 1))).isEmpty)
        #expect(signals(s.handle(.fireTimer(id: 1))).isEmpty, "a timer never wakes a suspended app")
    }
}
