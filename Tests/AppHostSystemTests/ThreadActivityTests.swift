import AppHostSystem
import Foundation
import SystemPackage
import Testing

@Suite("ThreadActivity")
struct ThreadActivityTests {
    typealias T = ThreadActivity.Thread

    @Test func aProcessStayedAsleepOnlyIfNoThreadRanAndEveryOneSlept() {
        let a = ThreadActivity(threads: [T(tid: 2, state: "S", runs: 7), T(tid: 1, state: "S", runs: 40)])
        #expect(a.threads.map(\.tid) == [1, 2])
        #expect(a.allAsleep)
        #expect(a.stayedAsleep(until: a))
        // A thread scheduled in between (woken, ran, asleep again).
        #expect(!a.stayedAsleep(until: ThreadActivity(threads: [T(tid: 1, state: "S", runs: 41), T(tid: 2, state: "S", runs: 7)])))
        // Woken and waiting for a CPU: runnable, however loaded the machine.
        #expect(!a.stayedAsleep(until: ThreadActivity(threads: [T(tid: 1, state: "R", runs: 40), T(tid: 2, state: "S", runs: 7)])))
        // A thread came or went.
        #expect(!a.stayedAsleep(until: ThreadActivity(threads: [T(tid: 1, state: "S", runs: 40)])))
        #expect(!a.stayedAsleep(until: ThreadActivity(threads: [T(tid: 1, state: "S", runs: 40), T(tid: 3, state: "S", runs: 7)])))
        // Disk sleep ends by itself; a zombie is on its way out: neither is asleep.
        #expect(!ThreadActivity(threads: [T(tid: 1, state: "D", runs: 1)]).allAsleep)
        #expect(!ThreadActivity(threads: [T(tid: 1, state: "Z", runs: 1)]).allAsleep)
        // Stopped by a signal runs no code.
        #expect(ThreadActivity(threads: [T(tid: 1, state: "T", runs: 1)]).allAsleep)
        #expect(!ThreadActivity(threads: []).allAsleep)
    }

    /// A pid namespace's init that exits waits, in `S`, for the rest of its namespace (its
    /// own threads included) inside the exit: `PF_EXITING` says it is not asleep.
    @Test func aThreadTheKernelIsEndingIsNotAsleepWhateverItsState() {
        #expect(!ThreadActivity(threads: [T(tid: 1, state: "S", runs: 3, exiting: true)]).allAsleep)
        #expect(ThreadActivity(threads: [T(tid: 1, state: "S", runs: 3, exiting: false)]).allAsleep)
        // stat's flags, the seventh field after the command (which may hold spaces and ")").
        #expect(ThreadActivity.parseExiting("4242 (Probe) App) S 1 4242 4242 0 -1 4194628 220 0 0 0 1 0 0 0 20 0 3 0 1 2 3\n"))
        #expect(!ThreadActivity.parseExiting("4242 (ProbeApp) S 1 4242 4242 0 -1 4194560 220 0 0 0 1 0 0 0 20 0 3 0 1 2 3\n"))
        #expect(!ThreadActivity.parseExiting("4242 (ProbeApp) S 1\n"))
        #expect(!ThreadActivity.parseExiting("garbage"))
    }

    @Test func readsTheScheduleCountOfASchedstatLine() throws {
        #expect(try ThreadActivity.parseScheduleCount("359131058 213436 118\n") == 118)
        #expect(throws: ProcFileError.self) { try ThreadActivity.parseScheduleCount("12 34\n") }
    }

    @Test func readsEveryThreadOfThisProcess() throws {
        let activity = try ThreadActivity.read(pid: getpid())
        #expect(activity.threads.contains { $0.tid == getpid() })
        // This thread is running while it reads.
        #expect(!activity.allAsleep)
    }

    @Test func aSpinningProcessIsNeverAsleepAndAStoppedOneStaysAsleep() async throws {
        let (child, events) = try await ProcessReaper.shared.spawn(
            SpawnSettings(executablePath: "/bin/sh", arguments: ["sh", "-c", "while :; do :; done"], seccomp: .none))
        var iterator = events.makeAsyncIterator()
        defer { try? child.signal(SIGKILL) }
        // Running or runnable at every reading, however loaded the machine.
        let spinning = try ThreadActivity.read(pid: child.pid)
        let again = try ThreadActivity.read(pid: child.pid)
        #expect(!spinning.allAsleep && !spinning.stayedAsleep(until: again))

        try child.signal(SIGSTOP)
        #expect(await iterator.next() == .stopped(signal: SIGSTOP))
        let first = try ThreadActivity.read(pid: child.pid)
        let second = try ThreadActivity.read(pid: child.pid)
        #expect(first.stayedAsleep(until: second))

        try child.signal(SIGKILL)
        #expect(await iterator.next() == .exited(.signaled(signal: SIGKILL, coreDumped: false)))
        #expect(await iterator.next() == nil)
        do {
            _ = try ThreadActivity.read(pid: child.pid)
        } catch {
            #expect(error.processIsGone, "\(error)")
        }
    }
}
