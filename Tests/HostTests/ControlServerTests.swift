import AppHostProtocol
import Foundation
import Logging
import Testing
@testable import Host

#if canImport(Glibc)
import Glibc
#endif

/// The control server over a real Unix socket, read by a plain blocking client as the CLI
/// reads it.
@Suite("Control server", .tags(.process), .timeLimit(.minutes(2)),
       .enabled(if: probeBuilt, "ProbeApp not built: run `swift build` first (scripts/test.sh does)"))
struct ControlServerTests {
    /// A streamed answer arrives whole, however far its writes are ahead of the socket:
    /// `executeThenClose` used to close with writes still pending in NIO, and the client
    /// saw a clean end after the first ~200 KiB (`status` of 200 apps listed 167).
    @Test func aLongStreamedAnswerArrivesWholeBeforeTheConnectionEnds() async throws {
        try await withHost(label: "ctl", clock: .virtual) { host in
            // Rows of about 1.5 KiB (20 BGTask identifiers each): `list` is 600 KiB, more
            // than a Unix socket holds, so most of it is still in NIO when the server is done.
            let count = 400
            for i in 1...count {
                let tasks = (1...20).map { "com.ctl.app\(i).refresh.task-number-\($0)-of-twenty" }
                _ = try await host.installProbe(BundleID(validating: "com.ctl.app\(i)"),
                                                extra: ["BGTaskSchedulerPermittedIdentifiers": tasks])
            }
            var logger = Logger(label: "ctl")
            logger.logLevel = .warning
            let path = host.dir.path + "/" + ControlSocket.fileName
            let server = try await ControlServer.bind(path: path, group: host.group, supervisor: host.supervisor, logger: logger)
            let serving = Task { try? await server.serve() }

            let status = try await readStream(path, .status(bundleIdentifier: nil))
            let listed = status.compactMap { r -> String? in
                if case .appStatus(let s) = r { return s.bundleIdentifier.rawValue }
                return nil
            }
            #expect(listed.count == count, "status listed \(listed.count) of \(count) apps")
            #expect(status.last == .end, "the answer ends with its end frame")

            // Read a byte at a time: the server is done long before the client, with the
            // socket full and the rest still in NIO when it ends the connection.
            let list = try await readStream(path, .list, chunk: 1)
            let apps = list.filter { if case .app = $0 { true } else { false } }
            #expect(apps.count == count, "list gave \(apps.count) of \(count) apps")
            #expect(list.last == .end)

            server.close()
            await serving.value
        }
    }

    /// Sends `request` and reads frames until the server ends the connection, on a thread
    /// of its own (the reads block).
    func readStream(_ path: String, _ request: ControlRequest, chunk: Int = 4096) async throws -> [ControlResponse] {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Result { try Self.blockingRead(path, request, chunk: chunk) })
            }.start()
        }
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    static func blockingRead(_ path: String, _ request: ControlRequest, chunk size: Int) throws -> [ControlResponse] {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { throw Failure(description: "path too long: \(path)") }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { throw Failure(description: "connect: errno \(errno)") }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let frame = try Frame.encode(request)
        var offset = 0
        while offset < frame.count {
            let n = frame.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            guard n > 0 else { throw Failure(description: "write: errno \(errno)") }
            offset += n
        }
        var decoder = FrameDecoder()
        var out: [ControlResponse] = []
        var chunk = [UInt8](repeating: 0, count: size)
        while true {
            while let payload = try decoder.next() {
                out.append(try Frame.decode(ControlResponse.self, from: payload))
            }
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { throw Failure(description: "read: errno \(errno) after \(out.count) frames") }
            if n == 0 { return out }
            decoder.append(chunk[0..<n])
        }
    }
}
