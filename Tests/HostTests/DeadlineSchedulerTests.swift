import AppHostProtocol
import Foundation
import Testing
@testable import Host

/// The host's deadline table as a value: order, cancelling, the virtual clock, and when
/// the real-clock timer must be armed. No process, no timer.
@Suite("DeadlineScheduler")
struct DeadlineSchedulerTests {
    func key(_ app: BundleID, _ timer: Lifecycle.Timer = .grace, instance: UInt64 = 1) -> DeadlineKey {
        DeadlineKey(app: app, instance: instance, timer: .lifecycle(timer))
    }

    @Test func deadlinesComeDueInOrderTiesByApp() {
        var s = DeadlineScheduler(mode: .virtual)
        _ = s.start(key("b"), after: .seconds(5))
        _ = s.start(key("a"), after: .seconds(5))
        _ = s.start(key("c"), after: .seconds(1))
        _ = s.start(DeadlineKey(app: nil, instance: 0, timer: .transferRestart), after: .seconds(9))
        #expect(s.popDue(by: .milliseconds(999)) == nil, "nothing is due before its time")
        var fired: [String] = []
        while let (k, due) = s.popDue(by: .seconds(10)) {
            s.advance(to: due)
            fired.append(k.app?.rawValue ?? "host")
        }
        #expect(fired == ["c", "a", "b", "host"])
        #expect(s.now() == .seconds(9), "the virtual clock moved to the last deadline fired")
        #expect(s.count == 0)
    }

    /// One app's deadlines due at the same time fire in the order they were started,
    /// whatever order the table keeps them in: a run gives the same order every time.
    @Test func oneAppsTiesGoToTheDeadlineStartedFirst() {
        for _ in 0..<20 {
            var s = DeadlineScheduler(mode: .virtual)
            let order: [Lifecycle.Timer] = [.wake, .grace, .hangCheck, .launch, .backgroundCallback, .expirationWarning, .backgroundBudget]
            for timer in order { _ = s.start(key("a", timer), at: .seconds(10)) }
            var fired: [TimerID] = []
            while let (k, _) = s.popDue(by: .seconds(10)) { fired.append(k.timer) }
            #expect(fired == order.map { .lifecycle($0) })
        }
        var s = DeadlineScheduler(mode: .virtual)
        _ = s.start(key("a"), at: .seconds(4))
        s.advance(to: .seconds(5))
        #expect(s.popDue(by: s.now())?.due == .seconds(4), "a time already past falls due at once")
        _ = s.start(key("b"), at: .seconds(9))
        #expect(s.due(key("b")) == .seconds(9))
    }

    @Test func startingAgainMovesTheDeadlineAndCancellingRemovesIt() {
        var s = DeadlineScheduler(mode: .virtual)
        _ = s.start(key("a"), after: .seconds(5))
        _ = s.start(key("a"), after: .seconds(30))
        #expect(s.count == 1)
        #expect(s.earliest()?.due == .seconds(30))
        _ = s.start(key("a", .launch), after: .seconds(1))
        _ = s.cancel(key("a", .launch))
        #expect(!s.isPending(key("a", .launch)) && s.isPending(key("a")))
        _ = s.start(key("a", .hangCheck, instance: 2), after: .seconds(2))
        #expect(s.count == 2, "another process of the same app has deadlines of its own")
        _ = s.cancel(key("a", .hangCheck, instance: 2))
        s.advance(to: .seconds(40))
        s.advance(to: .seconds(10))
        #expect(s.now() == .seconds(40), "virtual time never goes back")
    }

    @Test func theRealClockTimerIsArmedForTheEarliestOnly() {
        var s = DeadlineScheduler(mode: .real)
        guard case .arm(let first)? = s.start(key("a"), after: .seconds(60)) else {
            Issue.record("the first deadline arms the timer")
            return
        }
        #expect(first > .seconds(59) && first <= .seconds(60))
        #expect(s.start(key("b"), after: .seconds(120)) == nil, "a later deadline leaves the timer as it is")
        if case .arm(let earlier)? = s.start(key("c"), after: .seconds(1)) {
            #expect(earlier <= .seconds(1))
        } else {
            Issue.record("an earlier deadline re-arms the timer")
        }
        #expect(s.cancel(key("b")) == nil, "cancelling one the timer is not armed for changes nothing")
        if case .arm(let next)? = s.cancel(key("c")) {
            #expect(next > .seconds(58), "back to the 60 s one: \(next)")
        } else {
            Issue.record("cancelling the armed one re-arms for the next")
        }
        #expect(s.cancel(key("a")) == .disarm, "none left: the timer goes")
        #expect(DeadlineScheduler(mode: .virtual).armedFor == nil)
        var v = DeadlineScheduler(mode: .virtual)
        #expect(v.start(key("a"), after: .seconds(1)) == nil, "nothing sleeps on the virtual clock")
    }

    @Test func aFiredTimerPopsWhatIsDueAndRecordsHowLate() {
        var s = DeadlineScheduler(mode: .real)
        _ = s.start(key("a"), after: .zero)
        _ = s.start(key("b"), after: .seconds(3600))
        s.timerFired()
        let t = s.now()
        #expect(s.popDueNow(by: t) == key("a"))
        #expect(s.popDueNow(by: t) == nil)
        let late = s.takeLateness()
        #expect(late.count == 1 && late[0] >= .zero)
        #expect(s.takeLateness().isEmpty, "taken once")
        if case .arm(let next)? = s.rearm() {
            #expect(next > .seconds(3590))
        } else {
            Issue.record("after firing, the timer is armed for the next deadline")
        }
        #expect(s.date(at: .seconds(10)) == s.startDate.addingTimeInterval(10))
    }
}
