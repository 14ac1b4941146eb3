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
}
