import AppHostProtocol
@testable import AppKitLess
import Dispatch
import Synchronization
import Testing

/// An application with its own service router (so its own host timers) over a
/// socketpair whose host end the test drives.
private typealias Fixture = AppHarness<TimerDelegate, TimerExtras>

@MainActor
private final class TimerDelegate: ApplicationDelegate {}

private struct TimerExtras: Sendable {
    let router: ServiceRouter
}

private extension AppHarness where Delegate == TimerDelegate, Extra == TimerExtras {
    init() async throws {
        try await self.init { connection, effects in
            let router = ServiceRouter()
            let app = Application(bundleIdentifier: "com.example.timers", delegate: TimerDelegate(), connection: connection,
                                  effects: effects, services: router)
            return (TimerDelegate(), app, TimerExtras(router: router))
        }
    }

    /// Schedules a timer on the main queue, plays the host's answer (`reply`), and
    /// returns what `scheduledTimer` returned; `fires` records each run of the block.
    func schedule(_ interval: Double, repeats: Bool, reply: ServiceReply = .ok, fires: Fires,
                  sourceLocation: SourceLocation = #_sourceLocation) async throws -> Result<HostTimer, ServiceError> {
        let timers = extra.router.timers
        let call = MainQueueCall { () -> Result<HostTimer, ServiceError> in
            Result { () throws(ServiceError) in
                try timers.schedule(interval: interval, repeats: repeats) { timer in
                    fires.record(timer.id, mainQueue: Application.isOnMainQueue, valid: timer.isValid)
                }
            }
        }
        guard case .request(let rid, .service(.timerSchedule(let id, let sent, let sentRepeats))) = try await host.receive() else {
            Issue.record("scheduledTimer sent no timerSchedule request", sourceLocation: sourceLocation)
            return .failure(ServiceError(.failed, reason: "no request"))
        }
        #expect(sent.bitPattern == interval.bitPattern && sentRepeats == repeats, "the interval goes to the host as given",
                sourceLocation: sourceLocation)
        try host.send(.reply(id: rid, reply: .service(reply)))
        let result = await call.value
        if case .success(let timer) = result { #expect(HostTimerID(timer.id) == id, sourceLocation: sourceLocation) }
        return result
    }

    /// Plays the host firing timer `id` as callback `seq`, and waits for its return.
    func fire(_ id: Int, seq: UInt64, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try host.send(.callback(seq: seq, callback: .service(.timerFired(id: HostTimerID(id))), state: .active))
        #expect(try await host.receive() == .callbackReturned(seq: seq), sourceLocation: sourceLocation)
    }
}

/// The runs of timer blocks: which timer, whether on the main queue, whether the timer
/// was valid during the run.
private final class Fires: Sendable {
    private let runs = Mutex<[(id: Int, mainQueue: Bool, valid: Bool)]>([])

    func record(_ id: Int, mainQueue: Bool, valid: Bool) {
        runs.withLock { $0.append((id, mainQueue, valid)) }
    }

    var ids: [Int] { runs.withLock { $0.map(\.id) } }
    var allOnMainQueue: Bool { runs.withLock { $0.allSatisfy(\.mainQueue) } }
    var allValid: Bool { runs.withLock { $0.allSatisfy(\.valid) } }
}

@Suite("HostTimer", .serialized, .timeLimit(.minutes(3)))
struct HostTimerTests {
    @Test("a timer is a timerSchedule request; each fire runs its block on the main queue before the callback returns")
    func scheduleAndFire() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        let fires = Fires()
        let once = try await fixture.schedule(10, repeats: false, fires: fires).get()
        #expect(once.isValid && once.timeInterval == 10 && !once.repeats)
        let every = try await fixture.schedule(0.5, repeats: true, fires: fires).get()
        #expect(every.id != once.id)
        #expect(fixture.router.timers.count == 2)

        try await fixture.fire(every.id, seq: 1)
        try await fixture.fire(once.id, seq: 2)
        try await fixture.fire(every.id, seq: 3)
        #expect(fires.ids == [every.id, once.id, every.id])
        #expect(fires.allOnMainQueue && fires.allValid, "valid while its block runs")
        #expect(!once.isValid && every.isValid, "a one-shot is invalid once it fired")
        #expect(fixture.router.timers.count == 1, "and no longer kept")

        // A one-shot that fired is forgotten by the host too: invalidating it sends nothing.
        once.invalidate()
        try await fixture.expectQuiet()
    }

    @Test("invalidate tells the host without waiting, drops a fire already on its way, and is idempotent")
    func invalidate() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        let fires = Fires()
        let timer = try await fixture.schedule(1, repeats: true, fires: fires).get()
        timer.invalidate()
        #expect(try await fixture.host.receive() == .invalidateTimer(id: HostTimerID(timer.id)))
        #expect(!timer.isValid)
        // The host fired before it read the invalidation: the fire is acknowledged, the
        // block does not run.
        try await fixture.fire(timer.id, seq: 1)
        #expect(fires.ids.isEmpty)
        timer.invalidate()
        try await fixture.expectQuiet()
        #expect(fixture.router.timers.count == 0)
    }

    @Test("a refusal throws the host's reason and keeps nothing; the interval reads as the host bounds it")
    func refusalsAndBounds() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        let fires = Fires()
        let reason = "the app has 256 live host timers, the most one app may have; invalidate one first"
        let refused = try await fixture.schedule(5, repeats: false, reply: .refused(reason: reason), fires: fires)
        guard case .failure(let error) = refused else {
            Issue.record("a refused timer was returned")
            return
        }
        #expect(error == .refused(reason))
        #expect(fixture.router.timers.count == 0)

        let nan = try await fixture.schedule(.nan, repeats: false, reply: .refused(reason: "not a number"), fires: fires)
        #expect((try? nan.get()) == nil)

        let tiny = try await fixture.schedule(-3, repeats: true, fires: fires).get()
        #expect(tiny.timeInterval == 0.001, "zero and negative intervals are 1 ms")
        let huge = try await fixture.schedule(1e300, repeats: false, fires: fires).get()
        #expect(huge.timeInterval == Double(Duration.longestWait.components.seconds), "cut to 100 years")
        try await fixture.expectQuiet()
    }

    @Test("without a connection scheduling throws connectionLost")
    func noConnection() async {
        let timers = HostTimerScheduler()
        #expect(throws: ServiceError.self) {
            try timers.schedule(interval: 1, repeats: false) { _ in }
        }
        #expect(timers.count == 0)
    }
}
