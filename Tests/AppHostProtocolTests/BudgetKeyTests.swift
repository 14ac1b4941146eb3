import AppHostProtocol
import Foundation
import Testing

/// Budget names as a type, and the one accessor every reader of a budget uses.
@Suite struct BudgetKeyTests {
    /// The names config files, `apphost profile show` and reports have always used.
    @Test func rawValuesAreTheOldNames() {
        #expect(BudgetKey.allCases.map(\.rawValue) == [
            "backgroundTask", "fetch", "silentPush", "didEnterBackground", "launch",
            "foregroundHang", "expirationWarning", "heartbeatInterval",
            "wake", "audioIdle", "voipReport",
            "fetchMinimum", "fetchCoalescing", "silentPushesPerHour", "processing",
        ])
        #expect(BudgetProfile.keys == BudgetKey.allCases)
    }

    /// The subscript reads and writes the stored property of the same name.
    @Test func subscriptMatchesTheProperties() {
        var p = BudgetProfile.ios7
        #expect(p[.backgroundTask] == 180 && p[.voipReport] == p.voipReport && p[.processing] == p.processing)
        for (i, key) in BudgetKey.allCases.enumerated() { p[key] = Double(i + 1) }
        #expect(p.backgroundTask == 1 && p.fetch == 2 && p.silentPushesPerHour == 14 && p.processing == 15)
    }

    /// Whole milliseconds, as every copy of the accessor computed before; never a trap.
    @Test func durationIsWholeMilliseconds() {
        var p = BudgetProfile.ios13
        #expect(p.duration(.backgroundTask) == .seconds(30))
        #expect(p.duration(.voipReport) == .seconds(7))
        p.wake = 0.0004
        #expect(p.duration(.wake) == .zero)
        p.wake = 1.2345
        #expect(p.duration(.wake) == .milliseconds(1235))
        p.launch = .infinity
        #expect(p.duration(.launch) == .longestWait)
        p.launch = -3
        #expect(p.duration(.launch) == .zero)
    }

    @Test func everyKeyHasASourceNote() {
        for key in BudgetKey.allCases { #expect(!key.note.isEmpty) }
    }
}
