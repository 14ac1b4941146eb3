import Foundation
import Synchronization
import HTTPTestServer
import Testing
import TestSupport
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

/// The daemon keeps its retry times on the clock it is given: a retry an hour away runs
/// when a manual clock is moved an hour, at once, and not before.
@Suite("TransferDaemon on a manual clock", .tags(.network))
struct TransferDaemonManualClockTests {
    @Test func aRetryAnHourAwayRunsWhenTheClockSaysSo() async throws {
        let dir = try TempDir("tclock")
        defer { dir.remove() }
        let server = try await HTTPTestServer.start()
        let clock = ManualTransferClock()
        var config = TransferDaemonConfiguration(stateDirectory: dir.path + "/state")
        config.retryBase = 3600
        config.retryCap = 7200
        config.clock = clock
        let daemon = try InProcessDaemon(configuration: config)
        do {
            try await daemon.link.next("ready")
            let resource = Resource.generated(size: 10_000, seed: 9)
            server.serve("/r", resource: resource)
            server.inject("/r", [.status(503)])
            let dest = dir.path + "/r.bin"
            var first = job(1, url: server.url("/r"), destination: dest)
            first.created = clock.now()
            try daemon.link.send(.enqueue(first))
            let waiting = try await daemon.link.next("waiting") { if case .waiting(1, _) = $0 { return true }; return false }
            guard case .waiting(_, let reason) = waiting else { return }
            #expect(reason.contains("in 3600.0 s"), "\(reason)")
            #expect(server.requests("/r").map(\.status) == [503])
            #expect(clock.pending == 1, "one timer, for the retry")
            // An hour later on the daemon's clock (a moment of real time), it asks again.
            clock.advance(by: 3601)
            let fin = try await daemon.link.next("finished", where: isFinished(1))
            #expect(finishedOutcome(fin) == .completed(status: 200, bytes: 10_000))
            #expect(server.requests("/r").map(\.status) == [503, 200])
            try daemon.link.send(.acknowledge(id: 1))
        } catch {
            try? await daemon.stop()
            try? await server.stop()
            throw error
        }
        try await daemon.stop()
        try await server.stop()
    }
}
