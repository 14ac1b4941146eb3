import Foundation
import Logging
import NIOCore
import NIOPosix
import Testing
@testable import Host

#if canImport(Glibc)
import Glibc
#endif

/// The push gateway's bounds (issue 32): a connection that opens no stream is closed, an
/// idle one is shut down as APNs does, and past the limit of connections a new one is
/// closed at once. Raw TCP clients speaking as much HTTP/2 as each case needs.
@Suite(.timeLimit(.minutes(3)))
struct PushGatewayBoundsTests {
    /// The client connection preface and an empty SETTINGS frame (RFC 9113 §3.4).
    static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 0x4, 0, 0, 0, 0, 0]

    func withGateway(_ configure: (inout PushGatewaySettings) -> Void,
                     _ body: (PushGateway) async throws -> Void) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var settings = PushGatewaySettings()
        configure(&settings)
        var logger = Logger(label: "test.gateway.bounds")
        logger.logLevel = .critical
        let gateway = try await PushGateway.bind(settings: settings, group: group, logger: logger) { _ in .success("x") }
        let serving = Task { try await gateway.serve() }
        do {
            try await body(gateway)
        } catch {
            Issue.record("\(error)")
        }
        gateway.close()
        _ = try? await serving.value
        try await group.shutdownGracefully()
    }

    /// A TCP connection to the gateway (a 30 s receive timeout as a safety net only).
    func connect(_ port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw POSIXError(.ECONNREFUSED)
        }
        var limit = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    /// Reads on a thread of its own until the gateway hangs up or `stop` says enough;
    /// the bytes and whether it ended at the gateway's end of file.
    func read(_ fd: Int32, until stop: @escaping @Sendable ([UInt8]) -> Bool = { _ in false }) async -> (bytes: [UInt8], endOfFile: Bool) {
        await withCheckedContinuation { c in
            let thread = Thread {
                var all: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 16384)
                while true {
                    let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 {
                        c.resume(returning: (all, n == 0))
                        return
                    }
                    all += buffer[0..<n]
                    if stop(all) {
                        c.resume(returning: (all, false))
                        return
                    }
                }
            }
            thread.start()
        }
    }

    /// The types of the HTTP/2 frames in `bytes` (whole frames only).
    static func frameTypes(_ bytes: [UInt8]) -> [UInt8] {
        var types: [UInt8] = []
        var i = 0
        while i + 9 <= bytes.count {
            let length = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
            types.append(bytes[i + 3])
            i += 9 + length
        }
        return types
    }

    @Test func aConnectionThatOpensNoStreamIsClosed() async throws {
        try await withGateway({ $0.firstRequestTimeout = .milliseconds(200) }) { gateway in
            let silent = try connect(gateway.port)
            defer { close(silent) }
            let prefaceOnly = try connect(gateway.port)
            defer { close(prefaceOnly) }
            #expect(Self.preface.withUnsafeBytes { write(prefaceOnly, $0.baseAddress, $0.count) } == Self.preface.count)
            async let a = read(silent)
            async let b = read(prefaceOnly)
            let (first, second) = await (a, b)
            #expect(first.endOfFile, "a client that said nothing was hung up on")
            #expect(second.endOfFile, "a client that sent only the preface was hung up on")
        }
    }

    @Test func anIdleConnectionIsShutDownWithGoaway() async throws {
        try await withGateway({ $0.firstRequestTimeout = .seconds(60); $0.idleTimeout = .milliseconds(200) }) { gateway in
            let fd = try connect(gateway.port)
            defer { close(fd) }
            #expect(Self.preface.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == Self.preface.count)
            // GOAWAY is frame type 7.
            let got = await read(fd) { Self.frameTypes($0).contains(7) }
            #expect(Self.frameTypes(got.bytes).contains(7), "frames: \(Self.frameTypes(got.bytes))")
        }
    }

    @Test func pastTheLimitANewConnectionIsClosedAtOnce() async throws {
        try await withGateway({ $0.firstRequestTimeout = .seconds(60); $0.maximumConnections = 2 }) { gateway in
            let held = [try connect(gateway.port), try connect(gateway.port)]
            defer { for fd in held { close(fd) } }
            // Each held connection has been served once the gateway has answered its preface.
            for fd in held {
                #expect(Self.preface.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == Self.preface.count)
                let settings = await read(fd) { Self.frameTypes($0).contains(4) }
                #expect(Self.frameTypes(settings.bytes).contains(4))
            }
            let third = try connect(gateway.port)
            defer { close(third) }
            let got = await read(third)
            #expect(got.endOfFile)
            #expect(gateway.statistics.refusedOverLimit == 1)
        }
    }
}
