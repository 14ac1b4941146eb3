import AppHostProtocol
import Testing
@testable import Host

private let MiB: UInt64 = 1 << 20

private func app(_ id: BundleID, _ band: JetsamBand, _ mib: UInt64, used: Int) -> JetsamPolicy.Candidate {
    JetsamPolicy.Candidate(app: id, band: band, footprint: mib * MiB, lastUsed: .seconds(used))
}

/// Who jetsam kills, without a process: bands from suspended up, least recently used
/// first in a band, until the footprints left are below the limit.
@Suite("JetsamPolicy")
struct JetsamPolicyTests {
    @Test func bandsFirstThenRecencyThenName() {
        let apps = [
            app("fg", .foreground, 10, used: 100),
            app("audio", .backgroundActivity, 10, used: 1),
            app("task", .background, 10, used: 2),
            app("s-new", .suspended, 10, used: 50),
            app("s-old", .suspended, 10, used: 5),
            app("s-tie-b", .suspended, 10, used: 7),
            app("s-tie-a", .suspended, 10, used: 7),
        ]
        #expect(JetsamPolicy.order(apps).map(\.app) == ["s-old", "s-tie-a", "s-tie-b", "s-new", "task", "audio", "fg"])
        // At one host time (a virtual clock that did not move), the order of the uses decides.
        var first = app("zz-first", .suspended, 10, used: 7)
        first.useOrder = 1
        var second = app("aa-second", .suspended, 10, used: 7)
        second.useOrder = 2
        #expect(JetsamPolicy.order([second, first]).map(\.app) == ["zz-first", "aa-second"])
    }

    @Test func killsUntilTheFootprintsLeftAreBelowTheLimit() {
        let apps = [app("a", .suspended, 100, used: 1), app("b", .suspended, 100, used: 2), app("c", .background, 100, used: 3),
                    app("fg", .foreground, 100, used: 4)]
        // 400 MiB against a limit of 250: a (300 left), b (200 left), stop.
        let v = JetsamPolicy.victims(apps, total: 400 * MiB, below: 250 * MiB)
        #expect(v.map(\.app) == ["a", "b"])
        #expect(v.map(\.band) == [.suspended, .suspended])
        #expect(v.map(\.footprint) == [100 * MiB, 100 * MiB])
        #expect(JetsamPolicy.victims(apps, total: 200 * MiB, below: 250 * MiB).isEmpty, "already below: nobody")
        #expect(JetsamPolicy.victims(apps, total: 200 * MiB, below: 250 * MiB, atLeast: 1).map(\.app) == ["a"], "a report frees one")
        // Nothing frees enough: everyone, the foreground app last.
        #expect(JetsamPolicy.victims(apps, total: 900 * MiB, below: 10 * MiB).map(\.app) == ["a", "b", "c", "fg"])
        #expect(JetsamPolicy.victims([], total: 900 * MiB, below: 10 * MiB).isEmpty)
    }

    @Test func theBandOfEachState() {
        #expect(JetsamBand.of(state: .suspended, placement: .background, hasActivity: false) == .suspended)
        #expect(JetsamBand.of(state: .background, placement: .background, hasActivity: false) == .background)
        #expect(JetsamBand.of(state: .background, placement: .background, hasActivity: true) == .backgroundActivity)
        #expect(JetsamBand.of(state: .active, placement: .foreground, hasActivity: true) == .foreground)
        #expect(JetsamBand.of(state: .inactive, placement: .foreground, hasActivity: false) == .foreground)
        #expect(JetsamBand.of(state: .inactive, placement: .background, hasActivity: false) == .background, "on its way home")
        #expect(JetsamBand.allCases.sorted() == [.suspended, .background, .backgroundActivity, .foreground])
    }
}

/// The pressure levels, warnings and kills as a value.
@Suite("MemoryPressure")
struct MemoryPressureTests {
    let device = 1000 * MiB

    @Test func levelsFromTheShareOfTheDevice() {
        let p = MemoryPressure(device: device)
        #expect(p.level(for: 799 * MiB) == .normal)
        #expect(p.level(for: 800 * MiB) == .warning)
        #expect(p.level(for: 949 * MiB) == .warning)
        #expect(p.level(for: 950 * MiB) == .critical)
    }

    @Test func risingWarnsOnceAndCriticalKillsUntilBelowTheCriticalThreshold() {
        var p = MemoryPressure(device: device)
        #expect(p.handle(.measured(total: 500 * MiB, candidates: [])).isEmpty)
        #expect(p.handle(.measured(total: 850 * MiB, candidates: [])) == [
            .levelChanged(from: .normal, to: .warning, total: 850 * MiB), .warnRunningApps(.warning),
        ])
        #expect(p.handle(.measured(total: 900 * MiB, candidates: [])).isEmpty, "still warning: no second warning")
        let apps = [app("old", .suspended, 60, used: 1), app("new", .suspended, 60, used: 2), app("fg", .foreground, 300, used: 3)]
        // 1000 MiB: old (940 left, below 950): one kill.
        let fx = p.handle(.measured(total: 1000 * MiB, candidates: apps))
        #expect(fx == [
            .levelChanged(from: .warning, to: .critical, total: 1000 * MiB), .warnRunningApps(.critical),
            .jetsam(.init(app: "old", band: .suspended, footprint: 60 * MiB)),
            .levelChanged(from: .critical, to: .warning, total: 940 * MiB),
        ])
        #expect(p.level == .warning && p.total == 940 * MiB)
        #expect(p.handle(.measured(total: 100 * MiB, candidates: [])) == [.levelChanged(from: .warning, to: .normal, total: 100 * MiB)])
    }

    @Test func aForcedLevelStaysUntilNormalAndEachReportWarns() {
        var p = MemoryPressure(device: device)
        #expect(p.handle(.reported(.warning, by: .forced, total: 10 * MiB, candidates: [])) == [
            .levelChanged(from: .normal, to: .warning, total: 10 * MiB), .warnRunningApps(.warning),
        ])
        #expect(p.handle(.measured(total: 10 * MiB, candidates: [])).isEmpty, "forced: still warning")
        #expect(p.level == .warning && p.forced == .warning)
        #expect(p.handle(.reported(.warning, by: .forced, total: 10 * MiB, candidates: [])) == [.warnRunningApps(.warning)],
                "a report warns again, as the Simulator's Simulate Memory Warning")
        #expect(p.handle(.reported(.normal, by: .forced, total: 10 * MiB, candidates: [])) == [.levelChanged(from: .warning, to: .normal, total: 10 * MiB)])
        #expect(p.forced == nil)
    }

    @Test func aReportedCriticalKillsOneAppEachTimeTheForegroundLast() {
        var p = MemoryPressure(device: device)
        let apps = [app("fg", .foreground, 5, used: 9), app("bg", .background, 5, used: 1), app("s", .suspended, 5, used: 5)]
        let first = p.handle(.reported(.critical, by: .forced, total: 15 * MiB, candidates: apps))
        #expect(first == [
            .levelChanged(from: .normal, to: .critical, total: 15 * MiB), .warnRunningApps(.critical),
            .jetsam(.init(app: "s", band: .suspended, footprint: 5 * MiB)),
        ])
        let second = p.handle(.reported(.critical, by: .forced, total: 10 * MiB, candidates: Array(apps.prefix(2))))
        #expect(second == [.warnRunningApps(.critical), .jetsam(.init(app: "bg", band: .background, footprint: 5 * MiB))])
        let third = p.handle(.reported(.critical, by: .psi, total: 5 * MiB, candidates: Array(apps.prefix(1))))
        #expect(third.last == .jetsam(.init(app: "fg", band: .foreground, footprint: 5 * MiB)))
        #expect(p.forced == .critical, "a PSI report does not change what was forced")
    }

    @Test func aPSIReportIsNotKept() {
        var p = MemoryPressure(device: device)
        #expect(p.handle(.reported(.warning, by: .psi, total: 0, candidates: [])) == [
            .levelChanged(from: .normal, to: .warning, total: 0), .warnRunningApps(.warning), .levelChanged(from: .warning, to: .normal, total: 0),
        ])
        #expect(p.level == .normal)
    }
}
