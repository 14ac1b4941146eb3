import Foundation
import Synchronization
import Testing
@testable import TransferCore

/// The daemon's one time source: its timer fires once, in order, and a cancelled one
/// never does. Waits on the timers' own firings, never on a sleep.
@Suite("TransferClock")
struct TransferClockTests {
    @Test func timersFireInOrderAndACancelledOneNever() async {
        let clock = SystemTransferClock()
        let fired = Mutex<[String]>([])
        let start = clock.now()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let cancelled = clock.schedule(at: start + 0.010) { fired.withLock { $0.append("cancelled") } }
            _ = clock.schedule(at: start + 0.005) { fired.withLock { $0.append("first") } }
            cancelled.cancel()
            // Due after the cancelled one: had that fired, it would be in the list by now.
            _ = clock.schedule(at: start + 0.020) {
                fired.withLock { $0.append("last") }
                done.resume()
            }
        }
        #expect(fired.withLock { $0 } == ["first", "last"])
        #expect(clock.now() >= start + 0.020)
    }

    @Test func aTimeInThePastFiresAtOnceAndAFarOneIsClamped() async {
        let clock = SystemTransferClock()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            _ = clock.schedule(at: 0) { done.resume() }
        }
        // 1e300 s ahead is armed (at most 30 days ahead), not trapped on, and cancels cleanly.
        clock.schedule(at: 1e300) { Issue.record("fired") }.cancel()
        clock.schedule(at: .nan) { Issue.record("fired") }.cancel()
    }
}
