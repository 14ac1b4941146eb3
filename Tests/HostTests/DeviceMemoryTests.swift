import AppHostProtocol
import Testing
@testable import Host

private let MiB: UInt64 = 1 << 20

/// The kernel as a table: pids, cgroup charges, resident and proportional sets, and the
/// reads asked of it.
private final class TableFootprints: FootprintSource {
    var pids: [BundleID: Int32] = [:]
    var charges: [BundleID: UInt64] = [:]
    var rss: [Int32: UInt64] = [:]
    var pss: [Int32: UInt64] = [:]
    var pssReads = 0

    func pid(of app: BundleID) -> Int32? { pids[app] }
    func cgroupCharge(of app: BundleID) -> UInt64? { charges[app] }
    func resident(pid: Int32) -> UInt64? { rss[pid] }
    func proportional(pid: Int32) -> UInt64? {
        pssReads += 1
        return pss[pid]
    }

    /// A running app of `mib` MiB (its resident set the same).
    func run(_ app: BundleID, pid: Int32, mib: UInt64) {
        pids[app] = pid
        rss[pid] = mib * MiB
        pss[pid] = mib * MiB
    }
}

/// The memory part alone: no host, no process. Its inputs are calls, its outputs effects.
@Suite("DeviceMemory")
struct DeviceMemoryTests {
    private func everyone(_: BundleID) -> JetsamBand? { .suspended }

    /// A device of 1000 MiB with apps `a` (pid 10) and `b` (pid 11) of these sizes, `a`
    /// launched into `aState` at 0 s and `b` into active at 1 s.
    private func twoApps(a aMiB: UInt64, b bMiB: UInt64, aState: AppState) -> (DeviceMemory, TableFootprints) {
        var memory = DeviceMemory(device: 1000 * MiB, cuesPerSecond: 4)
        let kernel = TableFootprints()
        kernel.run("a", pid: 10, mib: aMiB)
        kernel.run("b", pid: 11, mib: bMiB)
        memory.transition("a", from: .notRunning, to: aState, at: .zero)
        memory.transition("b", from: .notRunning, to: .active, at: .seconds(1))
        return (memory, kernel)
    }

    @Test func aTransitionMarksTheAppForReadingAndTheTotalCountsIt() {
        var memory = DeviceMemory(device: 1000 * MiB, cuesPerSecond: 4)
        let kernel = TableFootprints()
        kernel.run("a", pid: 10, mib: 100)
        #expect(!memory.hasStale)
        memory.transition("a", from: .notRunning, to: .active, at: .zero)
        #expect(memory.hasStale)
        let fx = memory.evaluate(kernel, band: everyone)
        #expect(fx.isEmpty, "100 of 1000 MiB is normal: \(fx)")
        #expect(memory.footprints["a"] == 100 * MiB)
        #expect(memory.total == 100 * MiB)
        #expect(!memory.hasStale)
        // An app that is not running any more reads as gone.
        kernel.pids["a"] = nil
        memory.transition("a", from: .active, to: .notRunning, at: .seconds(1))
        _ = memory.evaluate(kernel, band: everyone)
        #expect(memory.footprints["a"] == nil)
        #expect(memory.total == 0)
    }

    @Test func theProportionalSetIsReadAgainOnlyWhenTheResidentSetMovedAMebibyte() {
        var memory = DeviceMemory(device: 1000 * MiB, cuesPerSecond: 4)
        let kernel = TableFootprints()
        kernel.run("a", pid: 10, mib: 100)
        memory.transition("a", from: .notRunning, to: .active, at: .zero)
        _ = memory.evaluate(kernel, band: everyone)
        #expect(kernel.pssReads == 1)
        // Less than a MiB of movement: the reading stands, even if Pss itself moved.
        kernel.rss[10] = 100 * MiB + 512 * 1024
        kernel.pss[10] = 101 * MiB
        memory.transition("a", from: .active, to: .background, at: .seconds(1))
        _ = memory.evaluate(kernel, band: everyone)
        #expect(kernel.pssReads == 1)
        #expect(memory.footprints["a"] == 100 * MiB)
        // A MiB or more: read again.
        kernel.rss[10] = 102 * MiB
        memory.transition("a", from: .background, to: .suspended, at: .seconds(2))
        _ = memory.evaluate(kernel, band: everyone)
        #expect(kernel.pssReads == 2)
        #expect(memory.footprints["a"] == 101 * MiB)
        // A new process (another pid) is always read.
        kernel.run("a", pid: 11, mib: 50)
        memory.transition("a", from: .notRunning, to: .active, at: .seconds(3))
        _ = memory.evaluate(kernel, band: everyone)
        #expect(kernel.pssReads == 3)
        #expect(memory.footprints["a"] == 50 * MiB)
        // A cgroup's charge, where there is one, is read each time and wins.
        kernel.charges["a"] = 70 * MiB
        memory.markStale("a")
        _ = memory.evaluate(kernel, band: everyone)
        #expect(memory.footprints["a"] == 70 * MiB)
        #expect(kernel.pssReads == 3)
        #expect(memory.reads == 4)
    }

    @Test func cuesAreBoundedInHostTime() {
        var memory = DeviceMemory(device: 1000 * MiB, cuesPerSecond: 4)
        // At one host instant (a virtual clock that does not move), the burst and no more.
        let first = (0..<10).map { _ in memory.cue("a", at: .seconds(5)) }
        #expect(first == [true, true, true, true, false, false, false, false, false, false])
        // Half a second of host time refills two.
        let later = (0..<3).map { _ in memory.cue("a", at: .milliseconds(5500)) }
        #expect(later == [true, true, false])
        // Another app has a bucket of its own.
        let other = memory.cue("b", at: .milliseconds(5500))
        #expect(other)
        #expect(memory.cuesTaken == 7)
        #expect(memory.cuesDropped == 7)
        // An uninstall forgets the bucket: a reinstalled app starts full.
        memory.uninstalled("a")
        let refilled = (0..<4).map { _ in memory.cue("a", at: .milliseconds(5500)) }
        #expect(refilled == [true, true, true, true])
    }

    @Test func criticalPressureKillsTheLeastRecentlyUsedAndTheNextUserLaunchSaysSo() {
        var memory = DeviceMemory(device: 1000 * MiB, cuesPerSecond: 4)
        let kernel = TableFootprints()
        for (n, app) in ["old", "mid", "new"].enumerated() {
            kernel.run(BundleID(stringLiteral: app), pid: Int32(10 + n), mib: 330)
            memory.transition(BundleID(stringLiteral: app), from: .notRunning, to: .active, at: .seconds(n))
        }
        // 990 of 1000 MiB: critical from 950. The oldest use goes first; one kill suffices.
        let fx = memory.evaluate(kernel, band: everyone)
        let victims = fx.compactMap { if case .jetsam(let v) = $0 { v.app } else { nil } }
        #expect(victims == ["old"])
        #expect(fx.contains(.warnRunningApps(.critical)))
        #expect(memory.wasJetsammed("old"))
        // A background launch leaves it said for the user's; the user's launch says it once.
        let background = memory.launching("old", byUser: false, arguments: ["--bg"])
        let user = memory.launching("old", byUser: true, arguments: ["--user"])
        let again = memory.launching("old", byUser: true, arguments: ["--again"])
        #expect(!background && user && !again)
        #expect(memory.coldLaunchArguments("old") == ["--again"])
        #expect(memory.coldLaunchArguments("mid") == [])
    }

    @Test func anAppBeingKilledNoLongerCountsNorIsChosenAgain() {
        let (start, kernel) = twoApps(a: 600, b: 380, aState: .suspended)
        var memory = start
        memory.killSent("a")
        let fx = memory.evaluate(kernel, band: everyone)
        #expect(memory.total == 380 * MiB)
        #expect(!fx.contains { if case .jetsam = $0 { true } else { false } }, "a is already ending, and b alone is normal: \(fx)")
        memory.processGone("a")
        #expect(memory.total == 980 * MiB, "a new process of a counts again")
    }

    @Test func aReportedCriticalLevelFreesOneAppEvenWhenTheFootprintsSayNothing() {
        let (start, kernel) = twoApps(a: 10, b: 10, aState: .active)
        var memory = start
        // Only b may be chosen (a is in front, say): the band says so.
        let fx = memory.reported(.critical, by: .forced, running: [(app: "a", runsCode: true), (app: "b", runsCode: false)], kernel,
                                 band: { $0 == "b" ? .suspended : nil })
        let victims = fx.compactMap { if case .jetsam(let v) = $0 { v.app } else { nil } }
        #expect(victims == ["b"])
        #expect(memory.pressure.forced == .critical)
        #expect(memory.footprints.keys.sorted() == ["a", "b"], "the refresh read both: a runs code, b was never read")
    }

    @Test func anUninstallForgetsEverything() {
        var memory = DeviceMemory(device: 1000 * MiB, cuesPerSecond: 4)
        let kernel = TableFootprints()
        kernel.run("a", pid: 10, mib: 990)
        memory.transition("a", from: .notRunning, to: .background, at: .zero)
        _ = memory.launching("a", byUser: true, arguments: ["x"])
        _ = memory.evaluate(kernel, band: everyone)
        #expect(memory.wasJetsammed("a"))
        memory.uninstalled("a")
        #expect(!memory.wasJetsammed("a"))
        #expect(memory.footprints["a"] == nil)
        #expect(memory.coldLaunchArguments("a") == [])
        #expect(!memory.hasStale)
    }
}
