import AppHostProtocol
import Testing
@testable import Host

/// The verbs' waiters alone: numbers stand for continuations.
@Suite("AppWaiters")
struct AppWaitersTests {
    @Test func aStateWaiterIsHandedBackOnceWhenItsAppEntersItsState() {
        var waiters = AppWaiters<Int>()
        waiters.wait(for: .suspended, of: "com.a", 1)
        waiters.wait(for: .active, of: "com.a", 2)
        waiters.wait(for: .suspended, of: "com.a", 3)
        waiters.wait(for: .suspended, of: "com.b", 4)
        #expect(waiters.entered(.background, by: "com.a") == [])
        #expect(waiters.entered(.suspended, by: "com.a") == [1, 3], "in the order they came")
        #expect(waiters.entered(.suspended, by: "com.a") == [], "handed back once")
        #expect(waiters.entered(.active, by: "com.a") == [2])
        #expect(waiters.entered(.suspended, by: "com.b") == [4], "another app's waiter is its own")
    }

    @Test func stopWaitersGoWhenTheirStopSettlesOrAllWhenTheBoundRunsOut() {
        var waiters = AppWaiters<Int>()
        #expect(!waiters.waitsForStops)
        waiters.waitForStop(of: "com.b", 1)
        waiters.waitForStop(of: "com.a", 2)
        waiters.waitForStop(of: "com.b", 3)
        #expect(waiters.waitsForStops)
        #expect(waiters.stopSettled(of: "com.b") == [1, 3])
        #expect(waiters.stopSettled(of: "com.b") == [])
        #expect(waiters.waitsForStops)
        waiters.waitForStop(of: "com.c", 4)
        #expect(waiters.allStopWaiters() == [2, 4], "by app, each in its order")
        #expect(!waiters.waitsForStops)
    }
}
