import AppHostProtocol
import Foundation
import Testing
@testable import AppHostSystem
@testable import Host

/// The processes part alone: runtimes, instance numbers, the pid index and the reports
/// that come before a spawn returns, with no process (a `ChildProcess` without a pidfd
/// signals nothing).
@Suite("ProcessTable")
struct ProcessTableTests {
    private func child(_ pid: Int32) -> ChildProcess { ChildProcess(pid: pid, pidfd: -1, onEvent: { _ in }) }

    private func start(_ table: inout ProcessTable, _ id: BundleID) -> UInt64 {
        table.start(id, machine: Lifecycle(), since: Date(timeIntervalSince1970: 0), timers: AppTimers()).instance
    }

    @Test func eachStartHasANewInstanceAndReplacesTheAppsRuntime() {
        var table = ProcessTable()
        let a1 = start(&table, "com.a")
        let b1 = start(&table, "com.b")
        let a2 = start(&table, "com.a")
        #expect(a1 < b1 && b1 < a2, "instance numbers only grow: \(a1), \(b1), \(a2)")
        #expect(table["com.a"]?.instance == a2)
        #expect(table.ids.sorted() == ["com.a", "com.b"])
        #expect(table["com.c"] == nil)
    }

    @Test func aPidNamesItsAppOnlyWhileItsProcessLives() {
        var table = ProcessTable()
        let first = start(&table, "com.a")
        let (attached, early) = table.attach("com.a", instance: first, child: child(100))
        #expect(attached?.pid == 100 && early.isEmpty)
        #expect(table.app(pid: 100) == "com.a")
        // Gone: the pid names nobody, but the runtime keeps it for its report.
        table.processGone("com.a")
        #expect(table.app(pid: 100) == nil)
        #expect(table["com.a"]?.pid == 100)
        // A relaunch: the new process's pid names the app; a new start forgets the old one.
        let second = start(&table, "com.a")
        _ = table.attach("com.a", instance: second, child: child(101))
        #expect(table.app(pid: 101) == "com.a")
        _ = start(&table, "com.a")
        #expect(table.app(pid: 101) == nil, "a new runtime forgets the older process's pid")
        // A pid the kernel gave to another app since is not taken from it.
        let b = start(&table, "com.b")
        _ = table.attach("com.b", instance: b, child: child(100))
        table.processGone("com.a")
        #expect(table.app(pid: 100) == "com.b")
        table.remove("com.b")
        #expect(table.app(pid: 100) == nil)
        #expect(table["com.b"] == nil)
    }

    @Test func aSpawnOfAnOlderInstanceIsRefusedAndItsReportsDropped() {
        var table = ProcessTable()
        let old = start(&table, "com.a")
        let heldOld = table.holdEarly(instance: old, .stopped(signal: SIGSTOP), observed: .now)
        #expect(heldOld)
        let current = start(&table, "com.a")
        let (attached, early) = table.attach("com.a", instance: old, child: child(200))
        #expect(attached == nil && early.isEmpty, "the caller kills a child of an instance that is no longer the app's")
        #expect(table.app(pid: 200) == nil)
        #expect(table["com.a"]?.instance == current && table["com.a"]?.child == nil)
        // The old instance's reports went with it: none come back later.
        let heldCurrent = table.holdEarly(instance: current, .continued, observed: .now)
        #expect(heldCurrent)
        let (_, reports) = table.attach("com.a", instance: current, child: child(201))
        #expect(reports.map(\.event) == [.continued])
    }

    @Test func earlyReportsAreHandedOutOnceInOrderAndBounded() {
        var table = ProcessTable()
        let instance = start(&table, "com.a")
        let bound = ProcessTable.earlyReportsBound
        var kept = 0
        for k in 0..<(bound + 10) where table.holdEarly(instance: instance, k.isMultiple(of: 2) ? .stopped(signal: SIGSTOP) : .continued, observed: .now) {
            kept += 1
        }
        #expect(kept == bound, "at most \(bound) kept")
        let (_, reports) = table.attach("com.a", instance: instance, child: child(300))
        #expect(reports.count == bound)
        #expect(reports.prefix(3).map(\.event) == [.stopped(signal: SIGSTOP), .continued, .stopped(signal: SIGSTOP)])
        let again = table.attach("com.a", instance: instance, child: child(300))
        #expect(again.early.isEmpty, "handed out once")
    }

    @Test func aWatchListGivesItsAppsInBundleIDOrderAndLetsGoOfTheOnesWithNothingToSee() {
        var table = ProcessTable()
        for id: BundleID in ["com.c", "com.a", "com.b"] {
            _ = start(&table, id)
            table.watch(id, for: .front)
        }
        // One watched that has no runtime (never launched, or uninstalled since).
        table.watch("com.gone", for: .front)
        table["com.b"]?.machine.placement = .background
        var asked: [BundleID] = []
        let watched = table.watched(for: .front) { id, rt in
            asked.append(id)
            return rt.machine.placement == .foreground
        }
        #expect(watched == ["com.a", "com.c"])
        #expect(asked == ["com.a", "com.b", "com.c"], "asked in bundle-id order, never of an app with no runtime")
        // Pruned: only the two are left to ask about; the other list is untouched.
        #expect(table.watchList(.front) == ["com.a", "com.c"])
        #expect(table.watchList(.settle).isEmpty)
        table.unwatch("com.a", for: .front)
        #expect(table.watchList(.front) == ["com.c"])
    }
}
