import AppHostProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One blocking connection to a daemon's control socket (the frame protocol the CLI speaks).
struct ControlConnection {
    let fd: Int32
    var reader: FrameReader

    init(socketPath: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket: \(String(cString: strerror(errno)))") }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let path = Array(socketPath.utf8)
        guard path.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            _ = Glibc.close(fd)
            throw BenchError("control socket path too long: \(socketPath)")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: path)
            raw[path.count] = 0
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0 else {
            let e = errno
            _ = Glibc.close(fd)
            throw BenchError("connect \(socketPath): \(String(cString: strerror(e)))")
        }
        self.fd = fd
        reader = FrameReader(fd: fd)
    }

    func send(_ request: ControlRequest) throws { try writeFrame(request, to: fd) }

    mutating func next() throws -> ControlResponse? { try reader.next(ControlResponse.self) }

    func close() { _ = Glibc.close(fd) }
}

/// Sends one request, returns the answer, and waits until the daemon has closed the
/// connection (so no work of this request is still under way in the daemon).
func controlRequest(_ socketPath: String, _ request: ControlRequest) throws -> ControlResponse {
    var c = try ControlConnection(socketPath: socketPath)
    defer { c.close() }
    try c.send(request)
    guard let response = try c.next() else { throw BenchError("the daemon closed the connection without answering \(request)") }
    if case .error(let e) = response { throw BenchError("daemon: \(request): \(e.message)") }
    _ = try c.reader.drainToEnd(ControlResponse.self)
    return response
}

/// Sends a request answered with a stream (status, reports, events) and returns every
/// response before `end`.
func controlStream(_ socketPath: String, _ request: ControlRequest) throws -> [ControlResponse] {
    var c = try ControlConnection(socketPath: socketPath)
    defer { c.close() }
    try c.send(request)
    var out: [ControlResponse] = []
    while let response = try c.next() {
        if case .end = response { break }
        if case .error(let e) = response { throw BenchError("daemon: \(request): \(e.message)") }
        out.append(response)
    }
    _ = try c.reader.drainToEnd(ControlResponse.self)
    return out
}
