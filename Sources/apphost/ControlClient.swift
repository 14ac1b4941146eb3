import AppHostProtocol
import Foundation
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// What went wrong talking to the daemon, phrased for the user.
struct CLIError: Error, CustomStringConvertible {
    var description: String
    var exitCode: Int32 = 1
}

/// A blocking client for the control socket: one request per connection.
struct ControlClient {
    let stateDirectory: String
    var socketPath: String { stateDirectory + "/" + ControlSocket.fileName }

    /// Connects, or explains how to start a daemon.
    func connect() throws -> FileDescriptor {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CLIError(description: "socket: \(Errno(rawValue: errno))") }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let path = Array(socketPath.utf8)
        guard path.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            close(fd)
            throw CLIError(description: "state directory path is too long for a Unix socket: \(stateDirectory)")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: path)
            raw[path.count] = 0
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if rc != 0 {
            let err = errno
            close(fd)
            if err == ENOENT || err == ECONNREFUSED {
                throw CLIError(description: """
                    no AppHost daemon is running on \(stateDirectory)
                      start one with:  apphost daemon --state-dir \(stateDirectory)
                      or run apps in the foreground with:  apphost run <App.app>...
                    """, exitCode: 69)
            }
            throw CLIError(description: "cannot connect to \(socketPath): \(Errno(rawValue: err))", exitCode: 69)
        }
        return FileDescriptor(rawValue: fd)
    }

    /// Sends one request and returns the single response.
    func request(_ request: ControlRequest) throws -> ControlResponse {
        let fd = try connect()
        defer { try? fd.close() }
        try send(request, on: fd)
        var decoder = FrameDecoder()
        guard let response = try next(ControlResponse.self, from: fd, decoder: &decoder) else {
            throw CLIError(description: "the daemon closed the connection without answering (see its log)")
        }
        return response
    }

    /// Sends one request and calls `body` for each streamed response until `.end` or
    /// hangup (with `untilEnd`, a hangup before `.end` is an error: the answer is cut).
    func stream(_ request: ControlRequest, untilEnd: Bool = false, _ body: (ControlResponse) throws -> Void) throws {
        let fd = try connect()
        defer { try? fd.close() }
        try send(request, on: fd)
        var decoder = FrameDecoder()
        while let response = try next(ControlResponse.self, from: fd, decoder: &decoder) {
            if case .end = response { return }
            try body(response)
            // An error ends a streamed answer.
            if case .error = response { return }
        }
        if untilEnd {
            throw CLIError(description: "the daemon closed the connection before the end of its answer (see its log)")
        }
    }

    /// Sends a request and returns the connection, for a caller that reads the streamed
    /// answer itself (with ``ResponseReader``) while it waits on other descriptors.
    func open(_ request: ControlRequest) throws -> FileDescriptor {
        let fd = try connect()
        do {
            try send(request, on: fd)
        } catch {
            try? fd.close()
            throw error
        }
        return fd
    }

    /// Sends a request answered with a stream of items then `.end` (`status`, `reports`)
    /// and returns the items `item` extracts; an `.error` answer is thrown.
    func collect<T>(_ request: ControlRequest, _ item: (ControlResponse) -> T?) throws -> [T] {
        var items: [T] = []
        try stream(request, untilEnd: true) { r in
            if case .error(let e) = r { throw e }
            guard let value = item(r) else { throw unexpected(r) }
            items.append(value)
        }
        return items
    }

    /// Writes the request without SIGPIPE: a daemon that refuses a peer (another user, an
    /// app) answers and closes before it reads, and its answer, read next, says why. So a
    /// closed peer ends the write quietly; a daemon that said nothing is reported by the read.
    private func send(_ request: ControlRequest, on fd: FileDescriptor) throws {
        let bytes = try Frame.encode(request)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd.rawValue, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n >= 0 {
                offset += n
                continue
            }
            switch errno {
            case EINTR: continue
            case EPIPE, ECONNRESET: return
            default: throw Errno(rawValue: errno)
            }
        }
    }

    private func next<M: Decodable>(_ type: M.Type, from fd: FileDescriptor, decoder: inout FrameDecoder) throws -> M? {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            if let payload = try decoder.next() {
                do {
                    return try Frame.decode(M.self, from: payload)
                } catch {
                    throw CLIError(description: "cannot read the daemon's answer (\(error)); is the daemon the same apphost build? "
                                   + "This one speaks control version \(ControlSocket.version)")
                }
            }
            let n = try chunk.withUnsafeMutableBytes { try fd.read(into: $0, retryOnInterrupt: true) }
            if n == 0 {
                try decoder.finish()
                return nil
            }
            decoder.append(chunk[0..<n])
        }
    }
}

/// Reads the daemon's answers from a connection that ``ControlClient/open(_:)`` made, as
/// bytes arrive (one `read` per call, for a caller that polls the descriptor).
struct ResponseReader {
    private var decoder = FrameDecoder()
    private(set) var ended = false

    /// Reads what is there (blocking until something is) and returns the whole answers it
    /// completed; at end of file ``ended`` is set.
    mutating func read(from fd: FileDescriptor) throws -> [ControlResponse] {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let n = try chunk.withUnsafeMutableBytes { try fd.read(into: $0, retryOnInterrupt: true) }
        if n == 0 {
            ended = true
            try decoder.finish()
        } else {
            decoder.append(chunk[0..<n])
        }
        var out: [ControlResponse] = []
        while let payload = try decoder.next() {
            do {
                out.append(try Frame.decode(ControlResponse.self, from: payload))
            } catch {
                throw CLIError(description: "cannot read the daemon's answer (\(error)); is the daemon the same apphost build?")
            }
        }
        return out
    }
}
