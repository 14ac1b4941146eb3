import AppHostSystem
import Foundation
import Testing

/// The supervisor's real-clock timer: a timerfd with a thread of its own.
@Suite struct DeadlineTimerTests {
    @Test func itFiresOnceWhenArmedAndMovingItReplacesTheEarlierArming() async throws {
        let (fires, sink) = AsyncStream<Void>.makeStream()
        let timer = try DeadlineTimer { sink.yield(()) }
        timer.arm(after: .seconds(3600))
        timer.arm(after: .milliseconds(1))  // moved: the hour-long arming is gone
        var iterator = fires.makeAsyncIterator()
        #expect(await iterator.next() != nil, "fired")
        // Armed again at once: fires again (a zero or negative delay fires at once).
        timer.arm(after: .zero)
        #expect(await iterator.next() != nil, "fired again")
        timer.close()
        sink.finish()
        #expect(await iterator.next() == nil, "nothing else was pending")
    }

    @Test func extremeDelaysAreClampedAndAClosedTimerIgnoresArming() throws {
        let timer = try DeadlineTimer { Issue.record("must not fire") }
        timer.arm(after: .seconds(Int64.max))  // a plugin's "never": must not trap
        timer.disarm()
        timer.close()
        timer.arm(after: .zero)  // closed: a no-op, nothing fires (else the issue above)
        timer.close()            // twice: a no-op
    }
}
