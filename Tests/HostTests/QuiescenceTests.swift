import Foundation
import Testing
@testable import Host

/// The rules that tell a blocked app from a slow one on the virtual clock, without a process.
@Suite("Quiescence")
struct QuiescenceTests {
    let a = Quiescence.Process(app: "a", instance: 1)
    let b = Quiescence.Process(app: "b", instance: 2)

    @Test func aProcessIsAwakeFromItsFirstExchangeUntilAProbeFindsItAsleep() throws {
        var q = Quiescence()
        #expect(!q.isQuiet(a))
        q.touched(a)
        #expect(q.awake == [a])
        let tokenToken = q.beginProbe(a)
        let token = try #require(tokenToken)
        #expect(q.isProbing(a))
        #expect(q.beginProbe(a) == nil, "one probe at a time")
        #expect(q.probeEnded(a, token: token, asleep: true) == .quiet)
        #expect(q.isQuiet(a) && q.awake.isEmpty && !q.isProbing(a))
        #expect(q.beginProbe(a) == nil, "nothing to probe: quiet")
    }

    @Test func anExchangeDuringTheProbeMakesItsReadingStale() throws {
        var q = Quiescence()
        q.touched(a)
        let tokenToken = q.beginProbe(a)
        let token = try #require(tokenToken)
        // The host sent it a frame while the probe read its threads asleep.
        q.touched(a)
        #expect(q.probeEnded(a, token: token, asleep: true) == .stale)
        #expect(!q.isQuiet(a) && q.awake == [a])
        // A new probe may start at once.
        #expect(q.beginProbe(a) != nil)
    }

    /// A probe begun before an exchange (one waiting out its delay, or a backed-off retry)
    /// does not hold the slot: the next probe starts at once, and the old verdict is dropped.
    @Test func anExchangeFreesTheProbeSlotAtOnce() throws {
        var q = Quiescence()
        q.touched(a)
        let oldProbe = q.beginProbe(a)
        let oldToken = try #require(oldProbe)
        q.touched(a) // the app answered before the old probe ran
        #expect(!q.isProbing(a))
        let newProbe = q.beginProbe(a)
        let newToken = try #require(newProbe)
        #expect(newToken != oldToken)
        #expect(q.probeEnded(a, token: oldToken, asleep: true) == .stale)
        #expect(q.isProbing(a), "the old verdict does not end the new probe")
        #expect(q.probeEnded(a, token: newToken, asleep: true) == .quiet)
        #expect(q.isQuiet(a) && q.awake.isEmpty)
    }

    /// `unprobed` is what a step looks at: the awake processes with no probe in flight.
    @Test func unprobedHoldsTheAwakeProcessesWithNoProbeInFlight() throws {
        var q = Quiescence()
        q.touched(a)
        q.touched(b)
        #expect(q.unprobed == [a, b])
        let probeA = q.beginProbe(a)
        let tokenA = try #require(probeA)
        #expect(q.unprobed == [b], "a probe in flight takes it out")
        guard case .awake(_, let retry) = q.probeEnded(a, token: tokenA, asleep: false) else {
            Issue.record("a running process is probed again")
            return
        }
        #expect(q.unprobed == [b], "the retry is a probe in flight")
        q.touched(a)
        #expect(q.unprobed == [a, b], "an exchange frees the slot")
        #expect(q.probeEnded(a, token: retry, asleep: true) == .stale)
        let probeB = q.beginProbe(b)
        #expect(probeB != nil)
        q.probeAbandoned(b)
        #expect(q.unprobed.contains(b), "an abandoned probe leaves it to be probed again")
        q.stopped(b)
        #expect(q.unprobed == [a])
        let probeA2 = q.beginProbe(a)
        let tokenA2 = try #require(probeA2)
        #expect(q.probeEnded(a, token: tokenA2, asleep: true) == .quiet)
        #expect(q.unprobed.isEmpty && q.awake.isEmpty)
        q.touched(a)
        q.exited(a)
        #expect(q.unprobed.isEmpty)
    }

    @Test func aRunningProcessIsProbedAgainWithABackoffThatAnExchangeResets() throws {
        var q = Quiescence()
        q.touched(a)
        let firstToken = q.beginProbe(a)
        var token = try #require(firstToken)
        var delays: [Duration] = []
        for _ in 0..<10 {
            guard case .awake(let delay, let next) = q.probeEnded(a, token: token, asleep: false) else {
                Issue.record("expected awake")
                return
            }
            #expect(q.isProbing(a), "the retry is the probe in flight")
            delays.append(delay)
            token = next
        }
        #expect(delays.prefix(4) == [.microseconds(100), .microseconds(200), .microseconds(400), .microseconds(800)])
        #expect(delays.last == Quiescence.longestRetry)
        // A stale token (an earlier probe) says nothing.
        #expect(q.probeEnded(a, token: token &- 1, asleep: true) == .stale)
        #expect(q.probeEnded(a, token: token, asleep: true) == .quiet)
        q.touched(a)
        let againToken = q.beginProbe(a)
        let again = try #require(againToken)
        guard case .awake(let first, _) = q.probeEnded(a, token: again, asleep: false) else {
            Issue.record("expected awake")
            return
        }
        #expect(first == Quiescence.firstRetry, "the backoff starts over after an exchange")
    }

    @Test func aConfirmedStopIsQuietUntilTheNextExchange() {
        var q = Quiescence()
        q.touched(a)
        q.touched(b)
        q.stopped(a)
        #expect(q.isQuiet(a) && !q.isQuiet(b) && q.awake == [b])
        q.touched(a) // SIGCONT
        #expect(!q.isQuiet(a))
    }

    @Test func theSafetyNetExcusesAProcessAndAnExitForgetsIt() throws {
        var q = Quiescence()
        q.touched(a)
        let tokenToken = q.beginProbe(a)
        let token = try #require(tokenToken)
        q.excuse(a)
        #expect(q.isQuiet(a) && q.awake.isEmpty && !q.isProbing(a))
        #expect(q.probeEnded(a, token: token, asleep: false) == .stale)
        q.touched(b)
        q.exited(b)
        #expect(q.awake.isEmpty && !q.isQuiet(b))
        q.touched(a)
        _ = q.beginProbe(a)
        q.probeAbandoned(a)
        #expect(!q.isProbing(a) && q.beginProbe(a) != nil)
    }
}

@Suite("Settle waits")
struct SettleWaitTests {
    @Test func verbsAreNumberedAndAMarkSeesOnlyLaterOnes() {
        var v = VerbWaits()
        let first = v.begin()
        let mark = v.last
        #expect(!v.anyOpen(after: mark), "the verb before the mark does not count")
        let second = v.begin()
        #expect(second > first && v.anyOpen(after: mark))
        v.end(second)
        #expect(!v.anyOpen(after: mark))
        v.end(first)
        #expect(!v.anyOpen(after: 0))
    }
}
