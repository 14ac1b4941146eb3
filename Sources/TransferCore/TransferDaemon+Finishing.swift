import AppHostProtocol
import AppHostSystem
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
    // MARK: Finishing received downloads

    /// The bound on received downloads waiting to be finished, kept to half of the
    /// descriptors the process may open beyond a reserve of 64 (connections, the
    /// database, the running attempts' files), and at least 1.
    static func finishingBound(_ wanted: Int, openFileLimit: Int?) -> Int {
        guard let limit = openFileLimit else { return max(1, wanted) }
        return max(1, min(wanted, (limit - 64) / 2))
    }

    /// RLIMIT_NOFILE's soft limit, nil when unlimited or unknown.
    static func openFileLimit() -> Int? {
        var rl = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &rl) == 0, rl.rlim_cur != rlim_t.max else { return nil }  // RLIM_INFINITY
        return Int(clamping: rl.rlim_cur)
    }

    /// Starts a batch of what was received, unless one is running (then the next batch
    /// starts when it ends: while the disk syncs one batch, the next one gathers). A
    /// small batch first waits `finishGathering` for more (`gathered`: it has waited).
    func startFinisher(gathered: Bool = false) {
        guard finisherTask == nil, !received.isEmpty else { return }
        if !gathered, !shuttingDown, config.finishGathering > 0,
           received.count < min(config.finishBatch, config.maxFinishing) {
            if gatherTimer == nil {
                let wait = TimeAmount.nanoseconds(Int64(min(config.finishGathering, 1) * 1e9))
                gatherTimer = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: wait) { [weak self] in
                    Task { await self?.gatherEnded() }
                }
            }
            return
        }
        gatherTimer?.cancel()
        gatherTimer = nil
        let batch = received
        received = []
        let store = self.store
        let files = self.files
        let pool = finisherPool
        finisherTask = Task {
            let result: (finished: [Finisher.Finished], recordError: String?)
            do {
                result = try await pool.runIfActive { Finisher.finish(batch, store: store, files: files) }
            } catch {
                // The pool stopped (never before the daemon's shutdown waited for this).
                result = Finisher.finish(batch, store: store, files: files)
            }
            self.finished(result.finished, recordError: result.recordError)
        }
    }

    private func gatherEnded() {
        gatherTimer = nil
        startFinisher(gathered: true)
    }

    /// A batch is synced, moved and recorded: it is reported, in one write.
    func finished(_ batch: [Finisher.Finished], recordError: String?) {
        turn {
            finisherTask = nil
            if let recordError {
                send(.error("recording \(batch.map { String($0.id.rawValue) }.joined(separator: ", ")) finished: \(recordError)"))
            }
            for item in batch {
                finishing.remove(item.id)
                guard var e = entries[item.id] else { continue }
                e.state = .finished
                e.outcome = item.outcome
                e.waitReason = nil
                e.bytesDone = item.bytes
                entries[item.id] = e
                send(.finished(id: item.id, outcome: item.outcome))
            }
            // What came in meanwhile has waited for this batch: it starts at once.
            startFinisher(gathered: true)
            startRunnable()
        }
    }

    /// A received file whose attempt or transfer is no longer known (not expected: its
    /// descriptor must not leak all the same).
    func discard(_ file: ReceivedDownload) {
        if file.fd >= 0 { close(file.fd) }
        files.unlink(file.part)
    }
}
