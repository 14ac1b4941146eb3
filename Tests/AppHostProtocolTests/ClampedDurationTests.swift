import Foundation
import Testing
@testable import AppHostProtocol

@Suite("Duration(clampingSeconds:)")
struct ClampedDurationTests {
    @Test(arguments: [
        (1.2345, Duration.milliseconds(1235)), (0, .zero), (-5, .zero), (.nan, .zero), (-.infinity, .zero),
        (.infinity, Duration.longestWait), (1e300, .longestWait), (.greatestFiniteMagnitude, .longestWait),
        (86_400, .seconds(86_400)),
    ] as [(Double, Duration)])
    func secondsFromAnAppBecomeADurationWithoutTrapping(_ seconds: Double, _ expected: Duration) {
        #expect(Duration(clampingSeconds: seconds) == expected)
    }

    @Test func nanosecondsOfAnyDurationFitAnInt64() {
        #expect(Duration.seconds(Int64.max).clampedNanoseconds == Duration.longestWait.clampedNanoseconds)
        #expect(Duration.longestWait.clampedNanoseconds == 100 * 365 * 86_400 * 1_000_000_000)
        #expect((Duration.zero - .seconds(3)).clampedNanoseconds == 0)
        #expect(Duration.milliseconds(1500).clampedNanoseconds == 1_500_000_000)
    }
}
