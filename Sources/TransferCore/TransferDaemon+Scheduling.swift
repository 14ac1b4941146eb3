import AppHostProtocol
import AsyncHTTPClient
import DequeModule
import Foundation
import HeapModule
import NIOCore
import NIOPosix
import NIOSSL
#if canImport(Glibc)
import Glibc
#endif

extension TransferDaemon {
    // MARK: Scheduling

    func blockReason(_ job: TransferJob) -> String? {
        if network == .none { return "no network" }
        if job.discretionary && !(pluggedIn && network == .wifi) { return "discretionary: waiting for power and Wi-Fi" }
        if !job.allowsCellularAccess && network != .wifi { return "waiting for Wi-Fi (cellular access not allowed)" }
        return nil
    }

    /// Puts an unfinished transfer that is not running where it belongs: blocked by the
    /// device conditions, waiting for its retry, or runnable behind its host's queue.
    func place(_ id: TransferID) {
        guard var e = entries[id], e.state != .finished, running[id] == nil, !finishing.contains(id) else { return }
        if let reason = blockReason(e.job) {
            if e.waitReason != reason {
                e.waitReason = reason
                e.state = .waiting
                entries[id] = e
                send(.waiting(id: id, reason: reason))
            }
            return
        }
        if e.nextAttempt > config.clock.now() {
            // Its `waiting` (with the retry's reason) was sent when the attempt failed.
            e.state = .waiting
            entries[id] = e
            retries.insert(Due(at: e.nextAttempt, id: id))
            arm(e.nextAttempt)
            return
        }
        e.state = .queued
        entries[id] = e
        runnable[e.hostKey, default: []].append(id)
    }

    /// Starts runnable transfers, oldest first, while the global and per-host limits allow.
    func startRunnable() {
        guard !shuttingDown else { return }
        while running.count < config.globalLimit, finishing.count < config.maxFinishing {
            var best: (host: String, id: TransferID)?
            for host in Array(runnable.keys) where perHost[host, default: 0] < config.perHostLimit {
                // Transfers cancelled or finished while queued leave their id behind.
                while let head = runnable[host]?.first, entries[head]?.state != .queued || running[head] != nil {
                    runnable[host]!.removeFirst()
                }
                guard let head = runnable[host]?.first else {
                    runnable[host] = nil
                    continue
                }
                if best == nil || head < best!.id { best = (host, head) }
            }
            guard let (host, id) = best else { return }
            runnable[host]!.removeFirst()
            if runnable[host]!.isEmpty { runnable[host] = nil }
            launch(id)
        }
    }

    func launch(_ id: TransferID) {
        guard var e = entries[id] else { return }
        e.state = .running
        e.waitReason = nil
        entries[id] = e
        perHost[e.hostKey, default: 0] += 1
        let job = e.job
        let fresh = e.fresh
        let worker = transferrer
        let task = Task {
            // Isolated to the daemon; `run` is nonisolated, so the transfer itself runs off the actor.
            let result = await worker.run(job, fresh: fresh)
            self.attemptEnded(id, result)
        }
        running[id] = Running(task: task, stop: nil)
    }

    /// The device changed: running transfers no longer allowed are paused (they are
    /// placed again when their attempt ends), and everything waiting is placed again.
    func conditionsChanged() {
        for (id, r) in running where r.stop == nil {
            if let e = entries[id], blockReason(e.job) != nil {
                running[id]!.stop = .paused
                r.task.cancel()
            }
        }
        let waiting = entries.keys.filter { running[$0] == nil && !finishing.contains($0) && entries[$0]?.state != .finished }.sorted()
        runnable.removeAll()
        retries = Heap()
        for id in waiting { place(id) }
        startRunnable()
    }

    /// Due reminders: retries whose backoff ran out, transfers past their resource deadline.
    func wake() {
        turn { wakeInTurn() }
    }

    func wakeInTurn() {
        wakeAt = nil
        wakeTimer = nil
        guard !shuttingDown else { return }
        let now = config.clock.now()
        while let due = deadlines.min, due.at <= now {
            deadlines.removeMin()
            guard let e = entries[due.id], e.state != .finished, !finishing.contains(due.id),
                  e.job.created + e.job.timeoutForResource == due.at else { continue }
            if let r = running[due.id] {
                if r.stop == nil {
                    running[due.id]!.stop = .timedOut
                    r.task.cancel()
                }
            } else {
                removePartial(e.job)
                finish(due.id, .failed(code: "timedOut", reason: "timeoutIntervalForResource elapsed"))
            }
        }
        while let due = retries.min, due.at <= now {
            retries.removeMin()
            guard let e = entries[due.id], e.state == .waiting, running[due.id] == nil, e.nextAttempt == due.at else { continue }
            entries[due.id]!.nextAttempt = 0
            place(due.id)
        }
        startRunnable()
        if let next = [deadlines.min?.at, retries.min?.at].compactMap({ $0 }).min() { arm(next) }
    }

    func arm(_ at: Double) {
        guard at.isFinite else { return }
        if let current = wakeAt, current <= at { return }
        wakeTimer?.cancel()
        wakeAt = at
        wakeTimer = config.clock.schedule(at: at + 0.005) { [weak self] in
            Task { await self?.wake() }
        }
    }

    /// Stops every transfer, keeping partial downloads for a resume, and waits for them.
    func shutdown() async {
        shuttingDown = true
        wakeTimer?.cancel()
        let tasks = running.map { id, r -> Task<Void, Never> in
            running[id]!.stop = .shutdown
            r.task.cancel()
            return r.task
        }
        for t in tasks { await t.value }
        // Downloads already received are finished (synced, moved, recorded, reported),
        // those waiting for a batch to gather too.
        startFinisher(gathered: true)
        while let t = finisherTask { await t.value }
    }
}
