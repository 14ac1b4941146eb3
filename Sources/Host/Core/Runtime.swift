import AppHostProtocol
import AppHostSystem
import Foundation
import HostConfig
import Logging
import NIOCore
import NIOPosix
import Plugins
import SystemPackage

extension Supervisor {
    /// Inputs from app connections, the reaper and timers.
    enum Input: Sendable {
        case spawned(app: BundleID, instance: UInt64, child: ChildProcess)
        case spawnFailed(app: BundleID, instance: UInt64, error: String)
        /// The app's socket is attached; `writeDescriptor` is a duplicate for ``SocketWriter``
        /// (the input's handler owns it: closes it, or gives it to the runtime).
        case connected(app: BundleID, instance: UInt64, channel: any Channel, writer: SocketWriter?, hello: HelloAnswer)
        case message(app: BundleID, instance: UInt64, AppMessage)
        /// The messages of one read, in order: handled in one step (one event-log write,
        /// one wake of the supervisor for a pipelined burst).
        case messages(app: BundleID, instance: UInt64, [AppMessage])
        case violation(app: BundleID, instance: UInt64, String)
        /// The app's end of the socket closed (everything it sent has been read).
        case disconnected(app: BundleID, instance: UInt64)
        /// An exited app's socket did not reach EOF in time (a child of the app may hold it).
        case drainExpired(app: BundleID, instance: UInt64)
        /// `observed`: when the reaper thread got the kernel's report (the time a stop or a
        /// continue is recorded at, on the real clock).
        case child(app: BundleID, instance: UInt64, ChildEvent, observed: ContinuousClock.Instant)
        /// The verdict of the lock check started at a SIGSTOP: a lock outside the
        /// container (described), or nil.
        case lockVerdict(app: BundleID, instance: UInt64, String?, observed: ContinuousClock.Instant)
        /// The real-clock timer ran out: fire what is due.
        case deadlinesDue
        /// Virtual clock: the settle wait's real-time bound may have run out (see ``Supervisor/settle()``).
        case settleTimerFired
        /// `status` waited long enough for the kernel's word on a stop (see
        /// ``Supervisor/awaitStopConfirmations(_:)``).
        case stopWaitsExpired
        /// Virtual clock: a probe of an app's threads ended (see ``Quiescence``): `asleep` when
        /// every thread slept throughout and the host had read all it wrote.
        case quietProbe(app: BundleID, instance: UInt64, token: UInt64, asleep: Bool)
        /// The transfer daemon is up (spawned and attached) / said something / exited.
        case transferDaemonStarted(child: ChildProcess, channel: any Channel, writer: SocketWriter?, generation: UInt64)
        case transferDaemonFailed(String, generation: UInt64)
        case transferEvent(TransferEvent, generation: UInt64)
        /// The events of one read from the daemon, in order, handled in one step.
        case transferEvents([TransferEvent], generation: UInt64)
        case transferDaemonExited(ExitStatus, generation: UInt64)
        case transferDaemonRestart
        /// A batch of sessions and tasks written (or not) on the database's queue: its
        /// outcome is in `TransferBrokerState.batchOutcomes`.
        case transferBatchSaved(number: UInt64)
        /// Shutdown: the grace period (in real time, whatever the clock) is over; `final`:
        /// so is the wait for killed apps to be reaped.
        case shutdownGraceOver(final: Bool)
        /// A PSI trigger (the `trigger`th of the configuration's) fired: the kernel reports
        /// memory pressure `level` (from the watch's own thread: the host's input).
        case memoryPressureReported(MemoryPressureLevel, trigger: Int)
    }

    /// A running (or starting) app.
    /// A class, not a struct: the supervisor reads and changes its runtimes in place
    /// (`runtimes[id]?.machine...`), and a dictionary's getter returns a copy of its value:
    /// for this struct of some twenty references, a retain and a release of each on every
    /// read, a tenth of the host's CPU on the paths that run for every callback. Only the
    /// supervisor's actor holds them.
    final class Runtime {
        var machine: Lifecycle
        let instance: UInt64
        var child: ChildProcess?
        var channel: (any Channel)?
        /// Writes to `channel`'s socket from the supervisor's thread (see ``SocketWriter``).
        var writer: SocketWriter?
        /// Answers the app's first `hello` where its connection reads it.
        var helloAnswer: HelloAnswer?
        /// What its connection's handler knows of the callbacks sent (see ``CallbacksSent``).
        var callbacksSent: CallbacksSent?
        var pid: Int32?
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
        /// the kernel has confirmed a stop; a lock found kills the suspended app (0xdead10cc).
        var lockCheck: LockCheck?
        /// The bound on waiting for its socket's EOF after its exit (see `.drainExpired`).
        var drainTimer: Scheduled<Void>?
        /// This process's run-loop stamp page (nil: the host could make none), and
        /// what the hang watchdog has seen of it (see ``HangWatch``).
        var stampPage: RunLoopStampPage?
        var hangWatch = HangWatch()
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
    /// The stop is confirmed (the app is suspended) and /proc/locks is being read.
    case checking
}
