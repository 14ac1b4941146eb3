import AppHostProtocol
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's end of the host socket (descriptor 3): a reader thread turns
/// frames into requests; `send` writes one event frame (serialised by a lock).
final class HostLink: @unchecked Sendable {
    let fd: Int32
    private let writeLock = NSLock()
    private var broken = false

    init(fd: Int32) { self.fd = fd }

    /// Requests from the host, those of one read together (a burst of enqueues is
    /// committed in one transaction); finishes at EOF (or a broken stream).
    func requests() -> AsyncStream<[TransferRequest]> {
        let (stream, continuation) = AsyncStream<[TransferRequest]>.makeStream()
        let fd = self.fd
        let thread = Thread {
            var decoder = FrameDecoder()
            var buf = [UInt8](repeating: 0, count: 65536)
            loop: while true {
                let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 {
                    if errno == EINTR { continue }
                    break
                }
                if n == 0 { break }
                decoder.append(buf[0..<n])
                var batch: [TransferRequest] = []
                do {
                    while let payload = try decoder.next() {
                        do {
                            batch.append(try Frame.decode(TransferRequest.self, from: payload))
                        } catch {
                            self.send(.error("\(error)"))
                        }
                    }
                } catch {
                    if !batch.isEmpty { continuation.yield(batch) }
                    self.send(.error("\(error)"))
                    break loop
                }
                if !batch.isEmpty { continuation.yield(batch) }
            }
            continuation.finish()
        }
        thread.name = "transferd-host-reader"
        thread.start()
        return stream
    }

    /// Writes one event; errors (the host is gone) are ignored, EOF on the read side ends the daemon.
    func send(_ event: TransferEvent) {
        writeAll(Self.frame(event))
    }

    /// Writes events in order, with one `write` (a turn's accepts or finishes are not
    /// one system call each).
    func send(_ events: [TransferEvent]) {
        guard !events.isEmpty else { return }
        if events.count == 1 { return send(events[0]) }
        var bytes: [UInt8] = []
        for event in events { bytes += Self.frame(event) }
        writeAll(bytes)
    }

    private static func frame(_ event: TransferEvent) -> [UInt8] {
        do {
            return try Frame.encode(event)
        } catch {
            // e.g. a `transfers` answer above Frame.maximumPayload: say so instead of staying silent.
            return (try? Frame.encode(TransferEvent.error("event not sent: \(error)"))) ?? []
        }
    }

    private func writeAll(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        writeLock.lock()
        defer { writeLock.unlock() }
        if broken { return }
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + off, $0.count - off) }
            if n < 0 {
                if errno == EINTR { continue }
                broken = true
                return
            }
            off += n
        }
    }
}
