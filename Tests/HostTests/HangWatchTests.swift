import AppHostProtocol
import AppHostSystem
import Foundation
import Testing
@testable import Host

/// What the hang check makes of a run-loop stamp page, without a process.
@Suite("HangWatch")
struct HangWatchTests {
    func page(_ turn: UInt64, _ busySince: UInt64, consistent: Bool = true) -> RunLoopStampReading {
        RunLoopStampReading(turn: turn, busySince: busySince, consistent: consistent)
    }

    @Test func anAppThatNeverStampedIsUnwatched() {
        var w = HangWatch()
        guard case .unwatched = w.check(page(0, 0), at: .seconds(10), clock: .real, monotonicNow: 5_000_000_000) else {
            Issue.record("turn 0 is an app that does not stamp")
            return
        }
        guard case .unwatched = w.check(page(0, 123), at: .seconds(10), clock: .virtual, monotonicNow: 0) else {
            Issue.record("turn 0 is an app that does not stamp, whatever else the page says")
            return
        }
    }

    @Test func waitingOrTurningWhileReadIsIdle() {
        var w = HangWatch()
        #expect(w.check(page(7, 0), at: .seconds(10), clock: .real, monotonicNow: 1) == .idle)
        #expect(w.check(page(7, 99, consistent: false), at: .seconds(10), clock: .real, monotonicNow: 100) == .idle)
    }

    @Test func realClockBlockedIsTheHostsMonotonicTimeSinceTheStamp() {
        var w = HangWatch()
        let now = Duration.seconds(100)
        // Began 3.5 s ago by the host's own CLOCK_MONOTONIC reading.
        #expect(w.check(page(4, 10_000_000_000), at: now, clock: .real, monotonicNow: 13_500_000_000)
                == .busy(since: .milliseconds(96_500)))
        // In the future (garbage, or a clock the host does not share): just began.
        #expect(w.check(page(4, 20_000_000_000), at: now, clock: .real, monotonicNow: 13_500_000_000) == .busy(since: now))
        // Before the host's time began (garbage, UInt64.max ago): cut to host time zero.
        #expect(w.check(page(4, 1), at: now, clock: .real, monotonicNow: .max) == .busy(since: .zero))
    }

    @Test func virtualClockCountsATurnFromWhenItWasFirstSeenBusy() {
        var w = HangWatch()
        // Seen busy in turn 5 before host time moved on from 0 (the app's real-time stamp is ignored).
        w.observe(page(5, 42), at: .zero)
        w.observe(page(5, 42), at: .seconds(4))
        #expect(w.check(page(5, 42), at: .seconds(10), clock: .virtual, monotonicNow: 0) == .busy(since: .zero))
        // A new turn: busy from now.
        #expect(w.check(page(6, 43), at: .seconds(12), clock: .virtual, monotonicNow: 0) == .busy(since: .seconds(12)))
        // Idle in between forgets the turn, even if the number comes back (garbage).
        w.observe(page(6, 0), at: .seconds(13))
        #expect(w.check(page(6, 43), at: .seconds(20), clock: .virtual, monotonicNow: 0) == .busy(since: .seconds(20)))
    }

    /// The page the host makes: sealed, zeroed, read back as written through the descriptor.
    @Test func theHostsPageReadsWhatTheDescriptorHolds() throws {
        let page = try RunLoopStampPage()
        #expect(page.read() == RunLoopStampReading(turn: 0, busySince: 0))
        let fd = try #require(page.descriptor)
        var words: [UInt64] = [3, 77]
        let written = words.withUnsafeMutableBytes { pwrite(fd.rawValue, $0.baseAddress, 16, 0) }
        #expect(written == 16)
        #expect(page.read() == RunLoopStampReading(turn: 3, busySince: 77))
        // Sealed: the app cannot shrink it under the host's mapping.
        #expect(ftruncate(fd.rawValue, 0) == -1)
        page.closeDescriptor()
        #expect(page.descriptor == nil)
    }
}
