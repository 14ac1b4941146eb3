import AppHostProtocol
import Foundation
import TestSupport
import Testing
@testable import Host

/// The live half of an event subscription: a step's events handed over together, in
/// order, bounded, ended by the subscription's end or the consumer's cancellation.
@Suite struct HostEventStreamTests {
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    func events(_ seqs: ClosedRange<UInt64>, app: BundleID? = nil) -> [HostEvent] {
        seqs.map { HostEvent(seq: $0, time: t0, kind: .service, bundleIdentifier: app, cause: "e\($0)") }
    }

    @Test func eventsComeInOrderAndTheEndComesAfterTheWaitingOnes() async {
        let stream = HostEventStream()
        stream.channel.yield(events(1...3), filter: nil)
        stream.channel.yield(events(4...5), filter: nil)
        stream.channel.finish()
        stream.channel.yield(events(6...6), filter: nil)
        var seen: [UInt64] = []
        for await e in stream { seen.append(e.seq) }
        #expect(seen == [1, 2, 3, 4, 5], "what waited is taken, nothing after the end")
    }

    @Test func aFilterKeepsOneAppsEvents() async {
        let stream = HostEventStream()
        stream.channel.yield(events(1...2, app: "com.a") + events(3...4, app: "com.b") + events(5...5), filter: "com.b")
        stream.channel.finish()
        var seen: [UInt64] = []
        for await e in stream { seen.append(e.seq) }
        #expect(seen == [3, 4])
    }

    @Test func pastTheBoundTheOldestAreDropped() async {
        let stream = HostEventStream(limit: 100)
        stream.channel.yield(events(1...150), filter: nil)
        stream.channel.yield(events(151...160), filter: nil)
        #expect(stream.channel.waiting == 100, "never more than the bound")
        #expect(stream.channel.dropped == 60)
        stream.channel.finish()
        var seen: [UInt64] = []
        for await e in stream { seen.append(e.seq) }
        #expect(seen == Array(61...160), "the newest kept, in order")
    }

    @Test func theDefaultBoundIsTenThousandEvents() {
        let stream = HostEventStream()
        stream.channel.yield(events(1...10_500), filter: nil)
        #expect(stream.channel.waiting == 10_000)
        #expect(stream.channel.dropped == 500)
    }

    @Test func aWaitingConsumerIsWokenByTheNextBatch() async {
        let stream = HostEventStream()
        let consumer = Task {
            var seen: [UInt64] = []
            for await e in stream { seen.append(e.seq) }
            return seen
        }
        // The consumer waits (or is about to): each batch wakes it at most once; the end
        // lets it return.
        stream.channel.yield(events(1...4), filter: nil)
        stream.channel.yield(events(5...8), filter: nil)
        stream.channel.finish()
        #expect(await consumer.value == Array(1...8))
    }

    @Test func aCancelledConsumerStopsWaiting() async {
        let stream = HostEventStream()
        let consumer = Task {
            var count = 0
            for await _ in stream { count += 1 }
            return count
        }
        consumer.cancel()
        #expect(await consumer.value == 0, "ends without an event and without finish()")
        stream.channel.yield(events(1...3), filter: nil)
        #expect(stream.channel.waiting == 0, "a cancelled stream takes nothing more")
    }

    @Test func theEventLogHandsAStepsEventsToItsSubscribers() async throws {
        let dir = try TempDir("evstream")
        defer { dir.remove() }
        let log = try EventLog(path: dir.path + "/events.jsonl", logger: .init(label: "test"))
        let (_, all, a) = log.subscribe(filter: nil)
        let (_, onlyB, b) = log.subscribe(filter: "com.b")
        log.beginBatch()
        for i in 1...6 { _ = log.append(.service, app: i % 2 == 0 ? "com.b" : "com.a", cause: "e\(i)", time: t0) }
        #expect(all.channel.waiting == 0, "nothing before the step's end")
        log.endBatch()
        #expect(all.channel.waiting == 6)
        #expect(onlyB.channel.waiting == 3)
        log.unsubscribe(a)
        log.unsubscribe(b)
        var seenAll: [String] = []
        for await e in all { seenAll.append(e.cause) }
        var seenB: [String] = []
        for await e in onlyB { seenB.append(e.cause) }
        #expect(seenAll == ["e1", "e2", "e3", "e4", "e5", "e6"])
        #expect(seenB == ["e2", "e4", "e6"])
        log.close()
    }
}
