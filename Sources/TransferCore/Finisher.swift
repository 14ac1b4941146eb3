import AppHostProtocol
import AppHostSystem
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Finishes received downloads in batches, off the daemon's actor (on its own thread).
///
/// A small download arrives with its body in memory (no file made on the event loop):
/// its `.part` is made and written here first (a failure: `cannotCreateFile` or
/// `cannotWriteToFile`, as on the event loop).
///
/// One file synced, renamed and recorded at a time cost an ext4 journal commit per
/// file (`fsync`) and a SQLite commit for each step. A batch does, in this order:
///
/// 1. start writeback of every file (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so the
///    disk gets all of them at once and their block allocations land in one journal
///    transaction;
/// 2. `fdatasync` each file and close it: the first commits that transaction, the
///    others find it committed and only wait for their own data;
/// 3. rename each synced file to its destination (a file is at the destination
///    complete, and on disk, or not at all);
/// 4. record every outcome (and the bytes) in one SQLite transaction;
///
/// and only then does the daemon report them `finished` to the host. A crash before 4
/// leaves the transfers queued: the next attempt finds no partial file (or a whole one
/// that it truncates) and fetches again, and its rename replaces what an earlier one
/// left at the destination. A file that cannot be synced or moved fails its transfer
/// (`cannotWriteToFile`, `cannotMoveFile`) and its partial file is removed.
enum Finisher {
    /// How one received download ended.
    struct Finished: Sendable {
        let id: TransferID
        let outcome: TransferOutcome
        let bytes: Int64
    }

    /// Syncs, moves and records `batch`; the descriptors are closed. `recordError` says
    /// why the outcomes could not be written (they are reported all the same).
    static func finish(_ batch: [(id: TransferID, file: ReceivedDownload)], store: TransferStore, files: AppFiles)
        -> (finished: [Finished], recordError: String?) {
        var outcomes: [TransferOutcome?] = Array(repeating: nil, count: batch.count)
        var fds = batch.map(\.file.fd)
        for (i, (_, file)) in batch.enumerated() {
            guard let body = file.body else { continue }
            let (fd, failure) = write(body, to: file.part, files: files)
            fds[i] = fd
            outcomes[i] = failure
        }
        for fd in fds where fd >= 0 { WriteBack.start(fd, offset: 0, length: 0) }
        for (i, (_, file)) in batch.enumerated() where fds[i] >= 0 {
            var rc: Int32
            repeat { rc = fdatasync(fds[i]) } while rc != 0 && errno == EINTR
            let e = errno
            close(fds[i])
            if rc != 0 {
                outcomes[i] = .failed(code: "cannotWriteToFile", reason: "writing \(file.part): \(String(cString: strerror(e)))")
            }
        }
        var finished: [Finished] = []
        finished.reserveCapacity(batch.count)
        for ((id, file), failure) in zip(batch, outcomes) {
            if let failure {
                files.unlink(file.part)
                finished.append(Finished(id: id, outcome: failure, bytes: file.bytes))
            } else if let e = files.rename(file.part, to: file.destination) {
                files.unlink(file.part)
                finished.append(Finished(id: id, outcome: .failed(code: "cannotMoveFile", reason: "rename to \(file.destination): \(e)"),
                                         bytes: file.bytes))
            } else {
                finished.append(Finished(id: id, outcome: .completed(status: file.status, bytes: file.bytes), bytes: file.bytes))
            }
        }
        do {
            try store.finish(finished.map { (id: $0.id, outcome: $0.outcome, bytesDone: $0.bytes) })
            return (finished, nil)
        } catch {
            return (finished, "\(error)")
        }
    }

    /// Makes `part` (from byte 0) and writes `body` into it: the open descriptor, or -1
    /// and why it failed (the file, if made, is closed; the caller unlinks it).
    static func write(_ body: [UInt8], to part: String, files: AppFiles) -> (Int32, TransferOutcome?) {
        let fd: Int32
        switch files.open(part, flags: O_WRONLY | O_CREAT | O_TRUNC) {
        case .success(let made): fd = made
        case .failure(let e): return (-1, .failed(code: "cannotCreateFile", reason: "open \(part): \(e)"))
        }
        var done = 0
        while done < body.count {
            let n = body.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, $0.count - done, off_t(done)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                let e = n < 0 ? errno : EIO
                close(fd)
                return (-1, .failed(code: "cannotWriteToFile", reason: "writing \(part): \(String(cString: strerror(e)))"))
            }
            done += n
        }
        return (fd, nil)
    }
}
