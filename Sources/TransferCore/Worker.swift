import AppHostProtocol
import AsyncHTTPClient
import AppHostSystem
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
#if canImport(Glibc)
import Glibc
#endif

/// How one attempt at a transfer ended.
enum AttemptResult: Sendable {
    case completed(status: Int, bytes: Int64)
    /// A transient error: retry with backoff (`progressed`: bytes arrived, so the attempt count restarts).
    case retry(code: String, reason: String, progressed: Bool)
    /// Failed for good.
    case fatal(code: String, reason: String)
    /// Stopped from outside (cancel, timeout, shutdown, conditions); progress is saved.
    case stopped
    /// A download's body is all in its partial file, not yet synced nor renamed: the
    /// daemon finishes it with others in one batch (see ``Finisher``).
    case received(ReceivedDownload)
}

/// A download whose every byte is in its partial file (written, not yet synced), or
/// in `body` (a small one, no file made yet: the ``Finisher`` writes it to `part`
/// first). The descriptor, if any, is open and now belongs to the daemon's ``Finisher``.
struct ReceivedDownload: Sendable {
    /// -1 when the bytes are in `body`.
    let fd: Int32
    let part: String
    let destination: String
    /// The status reported (a 206 answering our Range is reported as 200).
    let status: Int
    let bytes: Int64
    let bytesExpected: Int64?
    /// A small body held in memory (`fd` is -1).
    var body: [UInt8]? = nil
}

/// A write to the partial file failed (disk full, file-size limit...), or (`opening`)
/// the file could not be made.
struct WriteFailure: Error {
    let errnoValue: Int32
    var opening = false
}

/// Runs single attempts; stateless apart from its collaborators.
struct Transferrer: Sendable {
    let client: HTTPClient
    let store: TransferStore
    let files: AppFiles
    let link: HostLink
    let commitBytes: Int64
    /// The daemon's clock (resource timeouts are wall times from the job's creation).
    let clock: any TransferClock
    let onProgress: @Sendable (TransferID, Int64, Int64?) async -> Void

    static func isSupported(_ url: String) -> Bool {
        guard let u = URL(string: url), let scheme = u.scheme?.lowercased(), let host = u.host, !host.isEmpty else {
            return false
        }
        return scheme == "http" || scheme == "https"
    }

    static func hostKey(_ url: String) -> String {
        guard let u = URL(string: url) else { return url }
        let scheme = u.scheme?.lowercased() ?? ""
        let port = u.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(u.host?.lowercased() ?? ""):\(port)"
    }

    /// One attempt. `fresh`: nothing was ever stored for this job to resume from (its
    /// resume point is not read).
    func run(_ job: TransferJob, fresh: Bool = false) async -> AttemptResult {
        switch job.kind {
        case .download: return await download(job, fresh: fresh)
        case .upload: return await upload(job)
        }
    }

    // MARK: Download

    private func download(_ job: TransferJob, fresh: Bool) async -> AttemptResult {
        let part = job.destination + ".part"
        let point = fresh ? ResumePoint() : (try? store.resumePoint(id: job.id)) ?? ResumePoint()
        var offset = point.bytesDone
        let validator = point.etag ?? point.lastModified
        if validator == nil { offset = 0 }
        if offset > 0 {
            let fileSize: Int64 = files.status(part).map { Int64($0.st_size) } ?? -1
            if fileSize < 0 { offset = 0 } else if fileSize < offset { offset = fileSize }
        }

        // A fresh job (from byte 0, nothing stored) gets no file here: its writer makes
        // one when it first writes, and a small body is handed to the finisher in memory
        // (no open on the event loop at all). Otherwise, from byte 0 whatever an earlier
        // attempt left is emptied by the open itself, no stat or ftruncate first.
        let fresh = offset == 0 && Self.isFresh(point)
        var fd: Int32 = -1
        if !fresh {
            switch files.open(part, flags: O_WRONLY | O_CREAT | (offset == 0 ? O_TRUNC : 0)) {
            case .success(let opened): fd = opened
            case .failure(let e): return .fatal(code: "cannotCreateFile", reason: "open \(part): \(e)")
            }
        }
        var closed = fd < 0
        defer { if !closed { close(fd) } }
        if offset > 0, ftruncate(fd, off_t(offset)) != 0 {
            return .fatal(code: "cannotWriteToFile", reason: "truncate \(part): \(String(cString: strerror(errno)))")
        }

        var headers = HTTPHeaders()
        for (k, v) in job.headers { headers.replaceOrAdd(name: k, value: v) }
        if offset > 0, let validator {
            headers.replaceOrAdd(name: "Range", value: "bytes=\(offset)-")
            headers.replaceOrAdd(name: "If-Range", value: validator)
        }
        let request: HTTPClient.Request
        do {
            request = try HTTPClient.Request(url: job.url, method: HTTPMethod(rawValue: job.method.uppercased()), headers: headers)
        } catch {
            let (code, reason) = Self.classify(error)
            if Self.isFatal(code) { return .fatal(code: code, reason: reason) }
            return .retry(code: code, reason: reason, progressed: false)
        }
        // The body goes from the event loop straight to a BodyWriter (no hop to this
        // task per part); this task checks the head, forwards progress and finishes.
        let eventLoop = client.eventLoopGroup.any()
        let (progress, progressSink) = AsyncStream<Int64>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let delegate = DownloadDelegate(eventLoop: eventLoop)
        if fresh {
            // From byte 0 with nothing stored: a full answer (2xx) needs no check by this
            // task, so its body flows into a writer made where the head is read, in the
            // same turn of the event loop, not after a round trip through this task.
            let (store, files, commitBytes) = (self.store, self.files, self.commitBytes)
            delegate.acceptEarly = { head in
                guard (200..<300).contains(Int(head.status.code)) else { return nil }
                let length = head.headers.first(name: "Content-Length").flatMap { Int64($0) }
                return BodyWriter(fd: nil, path: part, files: files, offset: 0, length: length, point: Self.point(from: head, offset: 0, expected: length),
                                  store: store, id: job.id, commitBytes: commitBytes, progress: progressSink, eventLoop: eventLoop)
            }
        }
        let deadline = NIODeadline.now() + resourceTimeLeft(job, now: clock.now())
        let task = client.execute(request: request, delegate: delegate, eventLoop: .delegate(on: eventLoop), deadline: deadline, logger: nil)
        task.futureResult.whenFailure { delegate.fail($0) }
        return await withTaskCancellationHandler {
            await receive(job, part: part, fd: fd, offset: offset, point: point, task: task, delegate: delegate,
                          progress: (progress, progressSink), closed: &closed)
        } onCancel: {
            task.cancel()
        }
    }

    /// What a request whose head the attempt refused fails with.
    private struct Rejected: Error {}

    /// The attempt after the request went out: the head checked (Range answered as
    /// asked, or a full answer that restarts the file), the body left to a `BodyWriter`
    /// while progress is forwarded, then the outcome; a complete file is handed back
    /// unsynced, still open (`.received`).

    /// Whether nothing was stored for a job to resume from.
    static func isFresh(_ point: ResumePoint) -> Bool {
        point.bytesDone == 0 && point.etag == nil && point.lastModified == nil
    }

    /// The resume point a response head gives: its validators and the expected size.
    static func point(from head: HTTPResponseHead, offset: Int64, expected: Int64?) -> ResumePoint {
        ResumePoint(bytesDone: offset, bytesExpected: expected,
                    etag: head.headers.first(name: "ETag"),
                    lastModified: head.headers.first(name: "Last-Modified"))
    }

    private func receive(_ job: TransferJob, part: String, fd: Int32, offset startOffset: Int64, point: ResumePoint,
                         task: HTTPClient.Task<Void>, delegate: DownloadDelegate,
                         progress: (stream: AsyncStream<Int64>, sink: AsyncStream<Int64>.Continuation),
                         closed: inout Bool) async -> AttemptResult {
        var point = point
        var offset = startOffset
        var done = offset
        let head: HTTPResponseHead
        do {
            head = try await delegate.head.get()
        } catch {
            return failed(job, error, done: done, startOffset: startOffset, point: &point)
        }
        let code = Int(head.status.code)
        var expected: Int64?
        let length = head.headers.first(name: "Content-Length").flatMap { Int64($0) }
        if code == 206 && offset > 0 {
            // Content-Range: bytes a-b/total
            let cr = head.headers.first(name: "Content-Range") ?? ""
            let start = cr.split(separator: " ").dropFirst().first?.split(separator: "-").first.flatMap { Int64($0) }
            guard start == offset else {
                await reject(task, delegate)
                point = ResumePoint()
                try? store.saveProgress(id: job.id, point)
                _ = ftruncate(fd, 0)
                return .retry(code: "badServerResponse", reason: "unexpected Content-Range '\(cr)'", progressed: false)
            }
            if let total = cr.split(separator: "/").last.flatMap({ Int64($0) }) { expected = total }
            else if let length { expected = offset + length }
        } else if (200..<300).contains(code) {
            // A full answer (the resource changed, or no resume): start over.
            if offset > 0 {
                guard ftruncate(fd, 0) == 0 else {
                    let e = errno
                    await reject(task, delegate)
                    return .fatal(code: "cannotWriteToFile", reason: "writing \(part): \(String(cString: strerror(e)))")
                }
                offset = 0
                done = 0
            }
            expected = length
        } else {
            await reject(task, delegate)
            return .retry(code: "badServerResponse", reason: "HTTP \(code) from \(job.url)", progressed: false)
        }
        let stored = point
        point = Self.point(from: head, offset: offset, expected: expected)
        let writer: BodyWriter
        if let early = delegate.acceptedEarly {
            // Taken where the head was read (a fresh 2xx: nothing to save yet).
            writer = early
        } else {
            // A fresh download (nothing stored, from byte 0) has nothing to record yet: the
            // validators go in with the first progress commit or the stop, and until then a
            // restart starts from zero anyway. Saved otherwise: a resumed or restarted file.
            if startOffset > 0 || !Self.isFresh(stored) {
                try? store.saveProgress(id: job.id, point)
            }
            writer = BodyWriter(fd: fd < 0 ? nil : fd, path: part, files: files, offset: offset, length: length, point: point, store: store, id: job.id,
                                commitBytes: commitBytes, progress: progress.sink, eventLoop: delegate.eventLoop)
            delegate.accept(writer)
        }
        for await bytes in progress.stream {
            await onProgress(job.id, bytes, expected)
        }
        // Not cancellable: the writer must be done with the file before it is closed.
        let end = try? await writer.end.get()
        let response: (any Error)? = await { () async -> (any Error)? in
            do { try await task.futureResult.get(); return nil } catch { return error }
        }()
        // A file the writer made itself is this attempt's to close from here on.
        var made = writer.takeDescriptor()
        defer { if made >= 0 { close(made) } }
        switch end {
        case .failed(let failure, _)? where failure.opening:
            return .fatal(code: "cannotCreateFile", reason: "open \(part): \(String(cString: strerror(failure.errnoValue)))")
        case .failed(let failure, _)?:
            return .fatal(code: "cannotWriteToFile", reason: "writing \(part): \(String(cString: strerror(failure.errnoValue)))")
        case .stopped(let written)?:
            done = written
        case .finished(let written)?, .held(let written)?:
            done = written
        case nil:
            break
        }
        if let response {
            return failed(job, response, done: done, startOffset: startOffset, point: &point)
        }
        let body: [UInt8]?
        switch end {
        case .finished?: body = nil
        case .held?: body = writer.heldBody()
        default: return failed(job, HTTPClientError.cancelled, done: done, startOffset: startOffset, point: &point)
        }
        if let expected, done != expected {
            // (A held body is short of its length only if the server closed early: nothing
            // was written, so there is nothing to resume from.)
            point.bytesDone = body == nil ? done : 0
            try? store.saveProgress(id: job.id, point)
            return .retry(code: "networkConnectionLost", reason: "body ended at \(done) of \(expected) bytes", progressed: done > startOffset)
        }
        // The sync, the rename and the record are the daemon's, in batches (``Finisher``).
        let descriptor: Int32
        if made >= 0 {
            descriptor = made
            made = -1
        } else {
            descriptor = fd
            closed = true
        }
        return .received(ReceivedDownload(fd: descriptor, part: part, destination: job.destination,
                                          status: code == 206 ? 200 : code, bytes: done, bytesExpected: expected, body: body))
    }

    /// Cancels a request whose head was refused and waits until it has ended.
    private func reject(_ task: HTTPClient.Task<Void>, _ delegate: DownloadDelegate) async {
        delegate.reject(Rejected())
        _ = try? await task.futureResult.get()
    }

    /// The attempt failed after `done` bytes were in the file: progress saved, then
    /// `.stopped` if cancelled, else the error classified.
    private func failed(_ job: TransferJob, _ error: any Error, done: Int64, startOffset: Int64, point: inout ResumePoint) -> AttemptResult {
        point.bytesDone = done
        try? store.saveProgress(id: job.id, point)
        if Task.isCancelled { return .stopped }
        let (code, reason) = Self.classify(error)
        if code == "timedOut", clock.now() >= job.created + job.timeoutForResource {
            return .fatal(code: "timedOut", reason: "timeoutIntervalForResource elapsed")
        }
        if Self.isFatal(code) { return .fatal(code: code, reason: reason) }
        return .retry(code: code, reason: reason, progressed: done > startOffset)
    }

    /// URLError-like codes for which iOS does not retry: the answer would not change.
    static func isFatal(_ code: String) -> Bool {
        ["serverCertificateUntrusted", "secureConnectionFailed", "unsupportedURL", "httpTooManyRedirects"].contains(code)
    }

    static func classify(_ error: any Error) -> (String, String) {
        // TLS: an unknown CA or a name mismatch is NSURLErrorServerCertificateUntrusted,
        // any other failed handshake NSURLErrorSecureConnectionFailed.
        if let e = error as? NIOSSLError {
            if case .handshakeFailed(let ssl) = e, "\(ssl)".contains("CERTIFICATE_VERIFY_FAILED") {
                return ("serverCertificateUntrusted", "the server's certificate is not trusted: \(ssl)")
            }
            return ("secureConnectionFailed", "TLS: \(e)")
        }
        if let e = error as? NIOSSLExtraError, e == .failedToValidateHostname {
            return ("serverCertificateUntrusted", "the server's certificate is not for this host: \(e)")
        }
        if let e = error as? HTTPClientError {
            if e == .deadlineExceeded || e == .readTimeout || e == .writeTimeout || e == .connectTimeout {
                return ("timedOut", "\(e)")
            }
            if e == .invalidURL || e == .emptyHost || e == .emptyScheme { return ("unsupportedURL", "\(e)") }
            if e == .redirectLimitReached || e == .redirectCycleDetected { return ("httpTooManyRedirects", "\(e)") }
            return ("networkConnectionLost", "\(e)")
        }
        let text = "\(error)"
        if text.contains("connect") || text.contains("Connection refused") {
            return ("cannotConnectToHost", text)
        }
        return ("networkConnectionLost", text)
    }

    // MARK: Upload

    private func upload(_ job: TransferJob) async -> AttemptResult {
        guard let path = job.uploadFile else {
            return .fatal(code: "fileDoesNotExist", reason: "upload without uploadFile")
        }
        let fd: Int32
        switch files.open(path, flags: O_RDONLY) {
        case .success(let opened): fd = opened
        case .failure(let e): return .fatal(code: "fileDoesNotExist", reason: "open \(path): \(e)")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            return .fatal(code: "cannotOpenFile", reason: "fstat \(path): \(String(cString: strerror(errno)))")
        }
        let size = Int64(st.st_size)
        var request = HTTPClientRequest(url: job.url)
        request.method = HTTPMethod(rawValue: job.method.uppercased())
        for (k, v) in job.headers { request.headers.replaceOrAdd(name: k, value: v) }
        request.body = .stream(FileChunks(fd: fd, size: size), length: .known(size))
        do {
            let deadline = NIODeadline.now() + resourceTimeLeft(job, now: clock.now())
            let response = try await client.execute(request, deadline: deadline)
            let code = Int(response.status.code)
            for try await _ in response.body {}
            await onProgress(job.id, size, size)
            if (200..<300).contains(code) { return .completed(status: code, bytes: size) }
            return .retry(code: "badServerResponse", reason: "HTTP \(code) from \(job.url)", progressed: false)
        } catch {
            if Task.isCancelled { return .stopped }
            let (code, reason) = Self.classify(error)
            if code == "timedOut", clock.now() >= job.created + job.timeoutForResource {
                return .fatal(code: "timedOut", reason: "timeoutIntervalForResource elapsed")
            }
            if Self.isFatal(code) { return .fatal(code: code, reason: reason) }
            return .retry(code: code, reason: reason, progressed: false)
        }
    }
}

/// Write-behind for a download: writeback of each window starts as soon as it is
/// written (`sync_file_range`), and the window before it is waited for and dropped
/// from the page cache. The disk works while the network does, so the final fsync
/// has at most two windows left; and a large download does not fill memory with
/// dirty pages or push the apps' own page cache out. Errors here are ignored: the
/// fsync before the rename reports any I/O error.
struct WriteBehind {
    static let window: Int64 = 8 << 20
    let fd: Int32
    /// Writeback started up to here.
    private var started: Int64
    /// Written back and dropped up to here.
    private var waited: Int64

    init(fd: Int32, from offset: Int64) {
        self.fd = fd
        started = offset
        waited = offset
    }

    mutating func wrote(upTo done: Int64) {
        guard done - started >= Self.window else { return }
        WriteBack.start(fd, offset: started, length: done - started)
        if started > waited { WriteBack.wait(fd, offset: waited, length: started - waited, drop: true) }
        waited = started
        started = done
    }
}

/// An upload body read from a file in 64 KiB chunks with pread (never the whole file in memory).
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let fd: Int32
    let size: Int64

    struct AsyncIterator: AsyncIteratorProtocol {
        let fd: Int32
        let size: Int64
        var offset: Int64 = 0

        mutating func next() async throws -> ByteBuffer? {
            guard offset < size else { return nil }
            let want = Int(Swift.min(Int64(65536), size - offset))
            var buffer = ByteBufferAllocator().buffer(capacity: want)
            let at = offset
            let fd = self.fd
            let n = try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { raw -> Int in
                while true {
                    let r = pread(fd, raw.baseAddress, want, off_t(at))
                    if r < 0 {
                        if errno == EINTR { continue }
                        throw WriteFailure(errnoValue: errno)
                    }
                    return r
                }
            }
            if n == 0 { return nil }
            offset += Int64(n)
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(fd: fd, size: size) }
}

/// What is left of a job's `timeoutIntervalForResource`: never negative, and no longer
/// than ``Duration/longestWait`` however large a timeout the app gave (no overflow).
func resourceTimeLeft(_ job: TransferJob, now: Double) -> TimeAmount {
    .nanoseconds(Duration(clampingSeconds: job.created + job.timeoutForResource - now).clampedNanoseconds)
}
