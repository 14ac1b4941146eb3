import AppHostProtocol
import AppHostSystem
import Foundation
import HostConfig
import NIOCore
import NIOPosix
import SystemPackage

extension Supervisor {
    /// A running (or starting) app: one process instance, what the host knows of it, and
    /// its ``Lifecycle``. Owned by the ``ProcessTable``, the only place that makes one.
    /// A class, not a struct: the supervisor reads and changes a runtime in place
    /// (`processes[id]?.machine...`), and a dictionary's getter returns a copy of its value:
    /// for a struct of some twenty references, a retain and a release of each on every
    /// read, a tenth of the host's CPU on the paths that run for every callback (measured;
    /// decision 0042). Only the supervisor's actor holds them.
    final class Runtime {
        var machine: Lifecycle
        let instance: UInt64
        /// Its process, once spawned: set by the table alone (``ProcessTable/attach(_:instance:child:)``),
        /// which keeps its pid index true.
        fileprivate(set) var child: ChildProcess?
        var channel: (any Channel)?
        /// Writes to `channel`'s socket from the supervisor's thread (see ``SocketWriter``).
        var writer: SocketWriter?
        /// Answers the app's first `hello` where its connection reads it.
        var helloAnswer: HelloAnswer?
        /// What its connection's handler knows of the callbacks sent (see ``CallbacksSent``).
        var callbacksSent: CallbacksSent?
        /// Its process's pid (kept after it exits, for its report): set with `child`.
        fileprivate(set) var pid: Int32?
        /// The kernel confirmed its stop, and no continue since.
        var stopConfirmed = false
        /// Virtual clock: frames for the app made after a SIGCONT to its confirmed-stopped
        /// process, held until the kernel confirms the continue, so the log reads
        /// "SIGCONT confirmed" before whatever the app answers (see `sendFrames`).
        var heldForContinue: [UInt8]?
        var seq: UInt64 = 0
        var pending: [UInt64: LifecycleCallback] = [:]
        var since: Date
        var exitStatus: ExitStatus?
        /// The IPC connection is attached and has not reached EOF.
        var channelOpen = false
        /// An exit that waits for the connection to drain, so messages the app sent
        /// before dying are handled before its exit.
        var pendingExit: ExitStatus?
        /// This run's transitions, oldest first (for termination reports).
        var history: [StateRecord] = []
        var launchWaiters: [LaunchTicket] = []
        /// Verbs waiting for the process to end, each with its number in ``VerbWaits``.
        var exitWaiters: [(number: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
        /// What the app's window shows now (its last `viewTree` message).
        var viewTree: ViewTree?
        /// `ignoreSnapshotOnNextApplicationLaunch()` was called in this run and the app
        /// has not been active since: every snapshot shows the launch image.
        var ignoreSnapshotsUntilActive = false
        /// Its cgroup, where it has a memory or processes limit (else nil).
        var cgroup: AppCgroup?
        /// OOM kills counted in its cgroup that were not of the app's own process: those
        /// before it started, and those before it last confirmed a stop (a process with
        /// SIGKILL pending never stops).
        var oomKillsBefore = 0
        /// The count when the host itself sent SIGKILL: a SIGKILL death is the OOM
        /// killer's only if the count rose after that.
        var oomKillsAtHostKill: Int?
        /// The memory limit it runs under (for its report).
        var memoryLimit: UInt64?
        /// The check for file locks outside its container, which runs off the actor once
        /// the kernel has confirmed a stop; a lock found kills the app instead of
        /// suspending it (0xdead10cc).
        var lockCheck: LockCheck?
        /// The bound on waiting for its socket's EOF after its exit (see `.drainExpired`).
        var drainTimer: Scheduled<Void>?
        /// This process's run-loop stamp page (nil: the host could make none), and
        /// what the hang watchdog has seen of it (see ``HangWatch``).
        var stampPage: RunLoopStampPage?
        var hangWatch = HangWatch()
        /// Its stdout and stderr on their way to its log (nil: it writes the file itself).
        var logPump: AppLogPump?
        /// The process's host-clock timers (AppKitLess `HostTimer`).
        var timers = AppTimers()

        init(machine: Lifecycle, instance: UInt64, since: Date, timers: AppTimers) {
            self.machine = machine
            self.instance = instance
            self.since = since
            self.timers = timers
        }
    }
}

extension Supervisor.Runtime {
    /// Sends `sig` to the app's process: the error if it failed (ESRCH: already gone, its
    /// exit is on its way), and the other processes of its cgroup that got it too. Those
    /// are stopped before the app and continued after it, and killed with it; only the
    /// app's own stop and continue are confirmed. (Apps make no process: defense in
    /// depth, harmless when there is none.) Nil without a process.
    func signal(_ sig: Lifecycle.Signal) -> (error: (any Error)?, others: [Int32])? {
        guard let child else { return nil }
        var others: [Int32] = []
        if sig == .stop, let cgroup { others = cgroup.signalOthers(SIGSTOP, except: child.pid) }
        if sig == .kill, let cgroup, oomKillsAtHostKill == nil { oomKillsAtHostKill = cgroup.oomKills }
        var failure: (any Error)?
        do {
            try child.signal(sig == .stop ? SIGSTOP : sig == .cont ? SIGCONT : SIGKILL)
        } catch {
            failure = error
        }
        if sig == .cont, let cgroup { others = cgroup.signalOthers(SIGCONT, except: child.pid) }
        if sig == .kill, let cgroup { others = cgroup.signalOthers(SIGKILL, except: child.pid) }
        return (failure, others)
    }

    /// The JETSAM record of an exit by SIGKILL when the OOM killer struck in this kill's
    /// window: after the host's own SIGKILL if it sent one, else since the app last proved
    /// alive (its start or a stop). (The kernel does not say whom it killed; apps make no
    /// process, so an OOM kill in an app's cgroup is of the app.) Nil otherwise.
    func outOfMemoryRecord(_ status: ExitStatus) -> Lifecycle.TerminationRecord? {
        guard case .signaled(SIGKILL, _) = status, let cgroup, cgroup.oomKills > (oomKillsAtHostKill ?? oomKillsBefore) else {
            return nil
        }
        let limit = memoryLimit.map { ByteCountText.format($0) } ?? "its limit"
        return Lifecycle.TerminationRecord(
            namespace: "JETSAM", code: nil,
            reason: "per-process-limit: the app's memory went over \(limit) and the kernel killed it (memory cgroup \(cgroup.directories.first ?? "?"))")
    }
}

/// Where the lock check of a stop stands (see ``Supervisor/Runtime/lockCheck``).
enum LockCheck: Equatable {
    /// SIGSTOP is sent; the kernel has not confirmed the stop yet.
    case awaitingStop
    /// The kernel confirmed the stop at `stoppedAt` and /proc/locks is being read. The
    /// app is not `suspended` yet: with a lock outside its container it is killed at the
    /// moment of suspension, never suspended first (iOS: 0xdead10cc); without one it is
    /// suspended as of `stoppedAt`.
    case checking(stoppedAt: ContinuousClock.Instant)
}

/// The processes part: the runtime of each running (or starting) app, the index from pid
/// to app, the numbering of process instances, and the kernel's reports that came before
/// the spawn call returned. It owns them alone, and keeps them true to one another:
///
/// - an app has at most one runtime, and a new one has a new instance number (a report
///   or a frame of an older instance names a number no runtime has);
/// - a pid names an app exactly while that app's runtime has that process and it has not
///   been reported gone (``processGone(_:)``);
/// - reports that came early are kept per instance, at most ``earlyReportsBound`` of them,
///   and handed out once, with the process.
///
/// Tested without a process (`ProcessTableTests`).
struct ProcessTable {
    private var table: [BundleID: Supervisor.Runtime] = [:]
    private var byPID: [Int32: BundleID] = [:]
    private var lastInstance: UInt64 = 0
    private var early: [UInt64: [EarlyReport]] = [:]
    private var watches: [Watch: Set<BundleID>] = [:]

    /// A question the supervisor asks of a few apps, often (is anything of it still to be
    /// waited for before the host settles; is it in front): the apps worth a look are
    /// noted where the answer can become yes, so the question never reads every runtime
    /// (a scan copied each one, a fifth of the host's CPU in a virtual run).
    enum Watch: Hashable {
        /// May keep a virtual-clock settle waiting: a transition, a signal, a lock check,
        /// an exit to drain, a spawn.
        case settle
        /// May be in the foreground: launched or brought to the front.
        case front
    }

    /// A kernel report about a process whose spawn call had not returned yet.
    struct EarlyReport {
        var event: ChildEvent
        var observed: ContinuousClock.Instant
    }

    /// The most reports kept for one instance before its spawn returns: a stop, a
    /// continue and an exit are all a process can be reported for, a few times over.
    static let earlyReportsBound = 64

    /// The app's runtime, nil when it has none.
    subscript(id: BundleID) -> Supervisor.Runtime? { table[id] }

    /// Every runtime, by app (a copy of the table: its values are the runtimes themselves).
    var entries: [BundleID: Supervisor.Runtime] { table }

    /// The apps that have a runtime.
    var ids: Dictionary<BundleID, Supervisor.Runtime>.Keys { table.keys }

    /// A new runtime for a launch, with the next instance number; the app's older process
    /// (if any) no longer answers to its pid.
    @discardableResult
    mutating func start(_ id: BundleID, machine: Lifecycle, since: Date, timers: AppTimers) -> Supervisor.Runtime {
        processGone(id)
        lastInstance += 1
        let runtime = Supervisor.Runtime(machine: machine, instance: lastInstance, since: since, timers: timers)
        table[id] = runtime
        return runtime
    }

    /// The spawn of `instance` returned `child`: the runtime gets its process and pid, and
    /// the reports that came before it are handed out. Nil runtime when `instance` is no
    /// longer the app's (the caller kills the child); its early reports are dropped.
    mutating func attach(_ id: BundleID, instance: UInt64, child: ChildProcess) -> (runtime: Supervisor.Runtime?, early: [EarlyReport]) {
        let reports = early.removeValue(forKey: instance) ?? []
        guard let rt = table[id], rt.instance == instance else { return (nil, []) }
        rt.child = child
        rt.pid = child.pid
        byPID[child.pid] = id
        return (rt, reports)
    }

    /// Keeps a report that came before its process's spawn returned. False when the
    /// instance has ``earlyReportsBound`` already (the report is dropped).
    mutating func holdEarly(instance: UInt64, _ event: ChildEvent, observed: ContinuousClock.Instant) -> Bool {
        guard early[instance, default: []].count < Self.earlyReportsBound else { return false }
        early[instance, default: []].append(EarlyReport(event: event, observed: observed))
        return true
    }

    /// The app's process is gone (or replaced): its pid names it no more. Its runtime keeps
    /// the pid, for its report.
    mutating func processGone(_ id: BundleID) {
        if let pid = table[id]?.pid, byPID[pid] == id { byPID[pid] = nil }
    }

    /// The app is uninstalled: its runtime goes.
    mutating func remove(_ id: BundleID) {
        processGone(id)
        table.removeValue(forKey: id)
    }

    /// The app whose live process has this pid.
    func app(pid: Int32) -> BundleID? { byPID[pid] }

    // MARK: watch lists

    /// `id` is worth a look for `watch` from now on.
    mutating func watch(_ id: BundleID, for watch: Watch) {
        watches[watch, default: []].insert(id)
    }

    /// The apps watched for `watch` for which `still` holds of their runtime, in bundle-id
    /// order (so that what the caller does to each comes in one order, whatever the hash
    /// seed); the others leave the list: those with no runtime, and those `still` says
    /// nothing more is to be seen of. `inOrder` false skips the sort, for a caller that only
    /// asks whether any is left (the settle asks after every step, of up to every app).
    mutating func watched(for watch: Watch, inOrder: Bool = true, where still: (BundleID, Supervisor.Runtime) -> Bool) -> [BundleID] {
        guard let ids = watches[watch], !ids.isEmpty else { return [] }
        var kept: [BundleID] = []
        for id in inOrder ? ids.sorted() : Array(ids) {
            if let rt = table[id], still(id, rt) {
                kept.append(id)
            } else {
                watches[watch]?.remove(id)
            }
        }
        return kept
    }

    /// Whether an app watched for `watch` still is (`still`), pruning those that are not
    /// until it finds one: the question after every input, answered without a list.
    mutating func anyWatched(for watch: Watch, where still: (BundleID, Supervisor.Runtime) -> Bool) -> Bool {
        guard let ids = watches[watch], !ids.isEmpty else { return false }
        for id in ids {
            if let rt = table[id], still(id, rt) { return true }
            watches[watch]?.remove(id)
        }
        return false
    }

    /// The apps watched for `watch` now, in bundle-id order, without pruning.
    func watchList(_ watch: Watch) -> [BundleID] {
        (watches[watch] ?? []).sorted()
    }

    /// `id` leaves the list for `watch`.
    mutating func unwatch(_ id: BundleID, for watch: Watch) {
        watches[watch]?.remove(id)
    }
}
