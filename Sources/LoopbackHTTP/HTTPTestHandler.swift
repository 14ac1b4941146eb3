import Foundation
import NIOCore
import NIOHTTP1

/// One per connection. Requests arrive one at a time (the server pipeline
/// handler holds pipelined requests back until the response ends).
final class HTTPTestHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let chunkSize: Int64 = 64 * 1024

    private let state: ServerState

    /// The request being read.
    private var head: HTTPRequestHead?
    private var path = "/"
    private var fault: Fault = .none

    /// An upload being received.
    private struct Upload {
        var length: Int64 = 0
        var prefix = Data()
    }
    private var upload: Upload?
    /// Set once we closed the connection on purpose; ignore the rest.
    private var dropped = false

    /// A body being streamed out.
    private struct BodyStream {
        var resource: Resource
        var path: String
        var record: Int
        var next: Int64
        /// Exclusive end of what we will send (earlier than the range end for `.dropAfter`).
        var stop: Int64
        var drop: Bool
        var bytesPerSecond: Int?
        var keepAlive: Bool
        var paused = false
        /// `.holdAfter`: where the body waits for the server's `release`.
        var holdAt: Int64?
    }
    private var stream: BodyStream?
    /// In `pump`'s write loop. A write flushes, and a flush can report the channel
    /// writable again at once (over TLS it does): that re-entrant `pump` must not write
    /// the same bytes again, nor a body after its end; the loop goes on by itself.
    private var pumping = false
    /// The Host header of the body being streamed, counted in the server's concurrency figures.
    private var streamingFor: String?

    init(state: ServerState) {
        self.state = state
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !dropped else { return }
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            path = ServerState.normalize(h.uri)
            fault = state.nextFault(path)
            if h.method == .POST || h.method == .PUT {
                upload = Upload()
                if h.headers[canonicalForm: "expect"].contains(where: { $0.lowercased() == "100-continue" }) {
                    if case .status = fault {} else {
                        context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: h.version, status: .continue))), promise: nil)
                    }
                }
            }
        case .body(let buf):
            guard var up = upload else { return }
            let n = buf.readableBytes
            up.length += Int64(n)
            if up.prefix.count < ServerState.uploadPrefixLimit {
                let take = min(n, ServerState.uploadPrefixLimit - up.prefix.count)
                up.prefix.append(contentsOf: buf.readableBytesView.prefix(take))
            }
            upload = up
            if case .dropAfter(let limit) = fault, up.length >= limit {
                dropped = true
                recordSimple(status: 0, received: up.length)
                context.close(promise: nil)
            }
        case .end:
            guard let h = head else { return }
            head = nil
            respond(context: context, head: h)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { pump(context: context) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stream = nil
        endStreaming()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        stream = nil
        endStreaming()
        context.close(promise: nil)
    }

    // MARK: Responding

    private func recordSimple(status: Int, received: Int64 = 0) {
        _ = state.record(currentRecord(status: status, received: received))
    }

    private var currentHead: HTTPRequestHead?

    private func currentRecord(status: Int, received: Int64 = 0) -> RecordedRequest {
        let h = currentHead ?? head
        return RecordedRequest(
            method: h?.method.rawValue ?? "?",
            path: path,
            range: h?.headers.first(name: "range"),
            ifRange: h?.headers.first(name: "if-range"),
            status: status,
            bodyBytesSent: 0,
            bodyBytesReceived: received,
            fault: fault)
    }

    private func respond(context: ChannelHandlerContext, head h: HTTPRequestHead) {
        currentHead = h
        let keepAlive = h.isKeepAlive

        // An injected status wins over everything.
        if case .status(let code) = fault {
            let received = upload?.length ?? 0
            upload = nil
            sendSimple(context: context, head: h, status: code, text: "injected status \(code)\n", received: received, keepAlive: keepAlive)
            return
        }

        if h.method == .POST || h.method == .PUT {
            let up = upload ?? Upload()
            upload = nil
            state.lock.withLock {
                state.uploads[path, default: []].append(StoredUpload(length: up.length, prefix: up.prefix))
            }
            sendSimple(context: context, head: h, status: 201, text: "stored \(up.length) bytes\n", received: up.length, keepAlive: keepAlive)
            return
        }

        guard h.method == .GET || h.method == .HEAD else {
            sendSimple(context: context, head: h, status: 405, text: "method not allowed\n", keepAlive: keepAlive)
            return
        }

        let (redirect, entry) = state.lock.withLock { (state.redirects[path], state.resources[path]) }
        if let (location, code) = redirect {
            var headers = HTTPHeaders()
            headers.add(name: "Location", value: location)
            sendSimple(context: context, head: h, status: code, text: "redirect to \(location)\n", extraHeaders: headers, keepAlive: keepAlive)
            return
        }
        guard let entry else {
            sendSimple(context: context, head: h, status: 404, text: "not found\n", keepAlive: keepAlive)
            return
        }

        let size = entry.resource.size
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/octet-stream")
        headers.add(name: "Accept-Ranges", value: "bytes")
        headers.add(name: "ETag", value: entry.etag)
        headers.add(name: "Last-Modified", value: entry.lastModifiedString)
        if !keepAlive { headers.add(name: "Connection", value: "close") }

        var status = 200
        var range: Range<Int64> = 0..<size
        if let rangeHeader = h.headers.first(name: "range") {
            let honour: Bool
            if let ifRange = h.headers.first(name: "if-range")?.trimmingCharacters(in: .whitespaces) {
                if ifRange.hasPrefix("\"") || ifRange.hasPrefix("W/") {
                    honour = ifRange == entry.etag  // strong comparison; weak tags never match
                } else {
                    honour = ifRange == entry.lastModifiedString
                }
            } else {
                honour = true
            }
            if honour {
                switch Self.parseRange(rangeHeader, size: size) {
                case .some(.some(let r)):
                    status = 206
                    range = r
                    headers.add(name: "Content-Range", value: "bytes \(r.lowerBound)-\(r.upperBound - 1)/\(size)")
                case .some(.none):
                    var hh = HTTPHeaders()
                    hh.add(name: "Content-Range", value: "bytes */\(size)")
                    sendSimple(context: context, head: h, status: 416, text: "range not satisfiable\n", extraHeaders: hh, keepAlive: keepAlive)
                    return
                case .none:
                    break  // unparseable: ignore the header, answer 200
                }
            }
        }
        headers.add(name: "Content-Length", value: String(range.count))

        let record = state.record(currentRecord(status: status))
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: h.version, status: .init(statusCode: status), headers: headers))), promise: nil)

        if h.method == .HEAD {
            finish(context: context, keepAlive: keepAlive)
            return
        }

        var stop = range.upperBound
        var drop = false
        var bps: Int?
        var holdAt: Int64?
        switch fault {
        case .holdAfter(let n):
            holdAt = range.lowerBound + max(0, n)
        case .dropAfter(let n):
            if range.lowerBound + max(0, n) < stop {
                stop = range.lowerBound + max(0, n)
                drop = true
            }
        case .slow(let rate):
            bps = max(1, rate)
        default:
            break
        }
        stream = BodyStream(resource: entry.resource, path: path, record: record, next: range.lowerBound,
                            stop: stop, drop: drop, bytesPerSecond: bps, keepAlive: keepAlive, holdAt: holdAt)
        streamingFor = h.headers.first(name: "host") ?? ""
        state.streamingBegan(host: streamingFor!)
        context.flush()
        pump(context: context)
    }

    /// Writes as much of the current body as the channel accepts.
    private func pump(context: ChannelHandlerContext) {
        guard !pumping, var s = stream, !s.paused else { return }
        pumping = true
        var lastWrite: EventLoopFuture<Void>?
        while s.next < s.stop, context.channel.isWritable {
            if let hold = s.holdAt, s.next >= hold {
                let loop = context.eventLoop
                let bound = NIOLoopBound((handler: self, context: context), eventLoop: loop)
                let resume: @Sendable () -> Void = {
                    loop.execute {
                        let (handler, context) = bound.value
                        guard var cur = handler.stream else { return }
                        cur.paused = false
                        handler.stream = cur
                        handler.pump(context: context)
                    }
                }
                s.holdAt = nil
                if !state.mayContinue(s.path, orWait: resume) {
                    pumping = false
                    s.paused = true
                    stream = s
                    return
                }
            }
            var n = min(Self.chunkSize, s.stop - s.next)
            if let hold = s.holdAt, hold > s.next { n = min(n, hold - s.next) }
            if let bps = s.bytesPerSecond { n = min(n, Int64(max(1, bps / 10))) }
            var buf = context.channel.allocator.buffer(capacity: Int(n))
            s.resource.write(s.next..<(s.next + n), into: &buf)
            s.next += n
            // The body's last bytes: no longer counted as streaming before they go out. The
            // client may have them, finish and start its next request on another event loop
            // before this thread runs again (under load), and the concurrency figures would
            // count this response and that one together.
            if s.next >= s.stop { endStreaming() }
            let write = context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buf))))
            let state = self.state, path = s.path, record = s.record, count = n
            write.whenSuccess { state.addSent(path: path, record: record, bytes: count) }
            lastWrite = write
            // The connection ended under the write (channelInactive or errorCaught cleared the stream).
            guard stream != nil else {
                pumping = false
                return
            }
            if let bps = s.bytesPerSecond, s.next < s.stop {
                pumping = false
                s.paused = true
                stream = s
                let delay = TimeAmount.nanoseconds(max(1, n * 1_000_000_000 / Int64(bps)))
                context.eventLoop.assumeIsolated().scheduleTask(in: delay) { [self] in
                    guard var cur = self.stream else { return }
                    cur.paused = false
                    self.stream = cur
                    self.pump(context: context)
                }
                return
            }
        }
        // Before the end is written: writing it may hand us the next pipelined request.
        pumping = false
        stream = s
        guard s.next >= s.stop else { return }  // wait for writability
        stream = nil
        endStreaming()
        if s.drop {
            dropped = true
            let closeNow = { context.close(promise: nil) }
            if let lastWrite {
                lastWrite.assumeIsolated().whenComplete { _ in closeNow() }
            } else {
                context.flush()
                closeNow()
            }
        } else {
            finish(context: context, keepAlive: s.keepAlive)
        }
    }

    private func endStreaming() {
        guard let host = streamingFor else { return }
        streamingFor = nil
        state.streamingEnded(host: host)
    }

    private func finish(context: ChannelHandlerContext, keepAlive: Bool) {
        // Reset first: writing .end may hand us the next pipelined request at once.
        currentHead = nil
        fault = .none
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            done.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    private func sendSimple(context: ChannelHandlerContext, head h: HTTPRequestHead, status: Int, text: String,
                            extraHeaders: HTTPHeaders = HTTPHeaders(), received: Int64 = 0, keepAlive: Bool) {
        let noBody = status < 200 || status == 204 || status == 304 || h.method == .HEAD
        var headers = extraHeaders
        headers.add(name: "Content-Type", value: "text/plain")
        if status != 204 && status >= 200 { headers.add(name: "Content-Length", value: String(noBody && h.method != .HEAD ? 0 : text.utf8.count)) }
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        let record = state.record(currentRecord(status: status, received: received))
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: h.version, status: .init(statusCode: status), headers: headers))), promise: nil)
        if !noBody {
            let buf = context.channel.allocator.buffer(string: text)
            let state = self.state, path = self.path, count = Int64(buf.readableBytes)
            context.write(wrapOutboundOut(.body(.byteBuffer(buf)))).whenSuccess {
                state.addSent(path: path, record: record, bytes: count)
            }
        }
        finish(context: context, keepAlive: keepAlive)
    }

    /// `nil`: not a range we understand (ignore it). `.some(nil)`: unsatisfiable.
    static func parseRange(_ header: String, size: Int64) -> Range<Int64>?? {
        let v = header.trimmingCharacters(in: .whitespaces)
        guard v.lowercased().hasPrefix("bytes=") else { return nil }
        let spec = v.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        let a = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let b = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        if a.isEmpty {
            // bytes=-N: the last N bytes.
            guard let n = Int64(b) else { return nil }
            guard n > 0, size > 0 else { return .some(nil) }
            return .some(max(0, size - n)..<size)
        }
        guard let start = Int64(a), start >= 0 else { return nil }
        var end = size - 1
        if !b.isEmpty {
            guard let e = Int64(b), e >= start else { return nil }
            end = min(e, size - 1)
        }
        guard start < size else { return .some(nil) }
        return .some(start..<(end + 1))
    }
}
