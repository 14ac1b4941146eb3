import AppHostProtocol
import AppHostSystem
import Foundation
import Logging
import NIOCore
import NIOPosix
import Plugins
import SystemPackage

extension Supervisor {
    // MARK: - Running

    /// Consumes inputs until ``finish()``; call once.
    public func run() async {
        if !configuration.transferDaemonOnDemand || !transfers.broker.records.isEmpty {
            startTransferDaemon()
        }
        applyDataProtectionAtStart()
        for await item in inputs {
            step(item)
        }
    }

    /// Handles one input as a step, and then what follows every input: the turn passes
    /// on, frames are written, the timer is armed, and (virtual clock) the settle is
    /// judged. An input handled anywhere but here (the daemon's start, taken in by the
    /// task that spawned it) must come through this too: handled bare, a start that ended
    /// the daemon's turn left a settle waiting for an input that never came, until the
    /// safety net fired (seen under load: "the machine did not let the host's own work
    /// answer").
    func step(_ item: Input) {
        scope.beginInput()
        events.beginBatch()
        handle(item)
        passTurns()
        transferStepEnded()
        flushStepFrames()
        scope.endInput()
        armTimerIfChanged()
        events.endBatch()
        // The step's events are on disk: its transitions may go to the database.
        if !unloggedTransitions.isEmpty || events.hasUnwritten || store.hasUnwrittenTransitions { flushTransitions() }
        if !reportWriter.unwritten.isEmpty { reportWriter.retryUnwritten() }
        if takesTurns {
            if settling.isWaiting { checkSettled() } else { probeAwake() }
        }
    }

    /// Ends ``run()`` and every event subscription.
    public func finish() {
        memory.watch?.close()
        events.retryUnwritten(force: true)
        reportWriter.retryUnwritten()
        flushTransitions()
        if !unloggedTransitions.isEmpty {
            // Their events could not be written (the log says they are lost): the
            // database may still take them.
            let logger = self.logger
            store.recordTransitions(unloggedTransitions) { error in logger.error("could not record state transitions: \(error)") }
            unloggedTransitions.removeAll()
        }
        flushTransferDeletes()
        do { try store.flush() } catch { logger.error("could not flush the database: \(error)") }
        if !reportWriter.unwritten.isEmpty {
            logger.error("\(reportWriter.unwritten.reports.withLock { $0.count }) termination report(s) could not be written before the host stopped (the disk is full?): their events say how the apps ended")
        }
        events.append(.hostStopped, cause: "host stopped", time: now())
        input.finish()
        deadlineTimer?.close()
        settleTimer?.close()
        events.close()
    }

    /// Suspends until someone asks the host to shut down over the control socket.
    public func waitForShutdownRequest() async {
        if life.shutdownRequested { return }
        await withCheckedContinuation { life.shutdownRequests.append($0) }
    }

    /// Suspends until the host has stopped: apps terminated, state directory released.
    public func waitUntilStopped() async {
        if life.stopped { return }
        await withCheckedContinuation { life.stoppedWaiters.append($0) }
    }

    /// Called by the service once the state directory is released.
    public func markStopped() {
        life.stopped = true
        for c in life.stoppedWaiters { c.resume() }
        life.stoppedWaiters.removeAll()
    }

    /// Asks the host to shut down (control `shutdown`).
    public func requestShutdown() {
        life.shutdownRequested = true
        for c in life.shutdownRequests { c.resume() }
        life.shutdownRequests.removeAll()
    }

    /// Terminates every app (willTerminate, then SIGKILL after the grace period) and
    /// waits until none is left.
    public func shutdown() async {
        shuttingDown = true
        let running = processes.entries.filter { $0.value.machine.isRunning }.map(\.key).sorted()
        events.append(.hostStopping, cause: "shutting down, terminating \(running.count) app(s)", time: now())
        // Every app is told at once, and their grace periods run together: 10 apps hung in
        // willTerminate cost one grace period, not ten (issue 32).
        for id in running {
            feed(id, .terminate(.shutdown))
        }
        // The grace timers run on the host clock, which on the virtual clock nobody moves
        // now: after the grace period in real time the apps still there are killed, and
        // after 5 s more (a process SIGKILL cannot end at once) no longer waited for.
        if processes.entries.values.contains(where: { $0.machine.isRunning }) {
            armShutdownTimer(final: false)
        }
        if configuration.clock == .virtual {
            // Nobody moves host time now, so an app that has answered nothing once the host
            // has settled (blocked in willTerminate) has its grace period end at once: the
            // same kill, with the same report, however long the machine took to let it
            // answer. The apps' answers are taken in turn order (the order they were told),
            // so the log's end is the same every run. An app still at work (spinning) keeps
            // the host from settling until the real-time grace period above kills it.
            await settle()
            for id in running {
                guard let rt = processes[id], rt.machine.isRunning, !rt.machine.killSent else { continue }
                apply(scheduler.cancel(DeadlineKey(app: id, instance: rt.instance, timer: .lifecycle(.grace))))
                feed(id, .timerFired(.grace))
                if processes[id]?.machine.killSent != true, let child = processes[id]?.child {
                    try? child.signal(SIGKILL)
                }
            }
        }
        for id in running {
            await waitForExit(id)
        }
        life.shutdownTimer?.cancel()
        life.shutdownTimer = nil
        await stopTransferDaemon()
        launcher.madeCgroups?.remove()
    }

    func armShutdownTimer(final: Bool) {
        let input = self.input
        let after: Duration = final ? .seconds(5) : max(configuration.terminationGracePeriod, .milliseconds(100))
        life.shutdownTimer = group.any().scheduleTask(in: .nanoseconds(after.clampedNanoseconds)) {
            input.yield(.shutdownGraceOver(final: final))
        }
    }

    /// The grace period of a shutdown is over in real time: what its timers would have
    /// done on the real clock is done now (kill, with a FRONTBOARD report); then, once
    /// more time has passed, apps that are still not reaped are given up on.
    func shutdownGraceOver(final: Bool) {
        guard shuttingDown else { return }
        // Only apps already told to terminate.
        let left = processes.entries.filter { $0.value.machine.isRunning && (final || $0.value.machine.terminating != nil) }.map(\.key).sorted()
        guard !left.isEmpty else { return }
        if !final {
            for id in left {
                guard let rt = processes[id], !rt.machine.killSent else { continue }
                apply(scheduler.cancel(DeadlineKey(app: id, instance: rt.instance, timer: .lifecycle(.grace))))
                logger.warning("\(id) did not exit within the shutdown's grace period (real time): killing it")
                feed(id, .timerFired(.grace))
                if processes[id]?.machine.killSent != true, let child = processes[id]?.child {
                    // Not terminating in the machine's eyes: kill it all the same.
                    try? child.signal(SIGKILL)
                }
            }
            armShutdownTimer(final: true)
            return
        }
        for id in left {
            let pid = processes[id]?.pid.map { " (pid \($0))" } ?? ""
            logger.error("\(id)\(pid) was not reaped after SIGKILL; the host stops without waiting for it")
            events.append(.warning, app: id, pid: processes[id]?.pid,
                          cause: "not reaped after SIGKILL; the host stopped without waiting for it", time: now())
            let waiters = processes[id]?.exitWaiters ?? []
            processes[id]?.exitWaiters.removeAll()
            for w in waiters {
                verbWaits.end(w.number)
                w.continuation.resume()
            }
        }
    }

    func waitForExit(_ id: BundleID) async {
        guard let rt = processes[id], rt.machine.isRunning else { return }
        let number = verbWaits.begin()
        await withCheckedContinuation { c in processes[id]?.exitWaiters.append((number, c)) }
    }
}

/// The host's own life: whether it was asked to shut down and has stopped, who waits for
/// each, and shutdown's real-time bound on the grace period (see ``Supervisor/shutdown()``).
struct HostLife {
    var shutdownRequested = false
    var shutdownRequests: [CheckedContinuation<Void, Never>] = []
    var stopped = false
    var stoppedWaiters: [CheckedContinuation<Void, Never>] = []
    var shutdownTimer: Scheduled<Void>?
}
