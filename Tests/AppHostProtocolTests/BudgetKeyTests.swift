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

    @Test func configFileKeysAreBudgetKeys() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("budgetkey-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let good = dir.appendingPathComponent("good.json").path
        try #"{"budgets": {"voipReport": "3s", "backgroundTask": 45}}"#.write(toFile: good, atomically: true, encoding: .utf8)
        let file = try HostConfigFile.load(path: good)
        #expect(file.budgets == [.voipReport: 3, .backgroundTask: 45])
        let p = try HostConfigFile.resolve(profile: nil, file: file)
        #expect(p.duration(.voipReport) == .seconds(3) && p.name == "ios13+config")
        let bad = dir.appendingPathComponent("bad.json").path
        try #"{"budgets": {"voipreport": 3}}"#.write(toFile: bad, atomically: true, encoding: .utf8)
        #expect(throws: BudgetError.self) { try HostConfigFile.load(path: bad) }
    }

    @Test func everyKeyHasASourceNote() {
        for key in BudgetKey.allCases { #expect(!key.note.isEmpty) }
    }
}
