import AppHostProtocol
import Foundation
import Plugins

// MARK: - Settings

/// Where the push gateway listens, and whether it speaks TLS.
public struct PushGatewaySettings: Sendable, Equatable, CustomStringConvertible {
    /// A PEM certificate chain and its private key: the gateway then speaks TLS with ALPN `h2`.
    public struct TLS: Sendable, Equatable {
        /// The PEM file holding the certificate chain (leaf first).
        public var certificatePath: String
        /// The PEM file holding the certificate's private key.
        public var privateKeyPath: String

        /// A certificate chain file and its key file (PEM).
        public init(certificatePath: String, privateKeyPath: String) {
            self.certificatePath = certificatePath
            self.privateKeyPath = privateKeyPath
        }
    }

    /// The address to bind (`127.0.0.1`, `::1`, `0.0.0.0`, a host name).
    public var host: String
    /// The port; 0 takes any free one (see ``PushGateway/port``).
    public var port: Int
    /// TLS, or nil for cleartext HTTP/2 with prior knowledge (h2c).
    public var tls: TLS?
    /// Provider authentication (off unless given keys or a client CA).
    public var authentication: Authentication
    /// A connection must open its first stream (send its first request) within this: one
    /// that never finishes TLS, sends only the HTTP/2 preface, or nothing, is closed.
    public var firstRequestTimeout: Duration = .seconds(30)
    /// A connection with no stream open for this long is shut down gracefully (GOAWAY),
    /// as APNs closes idle connections; nil keeps idle connections for ever.
    public var idleTimeout: Duration? = .seconds(600)
    /// Connections open at once; one more is closed as soon as it is accepted.
    public var maximumConnections: Int = 1_000

    /// Loopback and any free port, cleartext, no authentication, unless told otherwise.
    public init(host: String = "127.0.0.1", port: Int = 0, tls: TLS? = nil, authentication: Authentication = .init()) {
        self.host = host
        self.port = port
        self.tls = tls
        self.authentication = authentication
    }

    /// Parses `HOST:PORT` (`[::1]:2197` for IPv6). A bare `PORT` or `:PORT` means 127.0.0.1.
    public init(parsing text: String) throws(PushGatewayError) {
        let text = text.trimmingCharacters(in: .whitespaces)
        var host = "127.0.0.1"
        var portText = text
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw PushGatewayError("push gateway address \"\(text)\": an IPv6 address is written [ADDRESS]:PORT, e.g. [::1]:2197")
            }
            host = String(text[text.index(after: text.startIndex)..<close])
            portText = String(text[text.index(close, offsetBy: 2)...])
        } else if let colon = text.lastIndex(of: ":") {
            let h = text[..<colon]
            if h.contains(":") {
                throw PushGatewayError("push gateway address \"\(text)\": put an IPv6 address in brackets, e.g. [::1]:2197")
            }
            if !h.isEmpty { host = String(h) }
            portText = String(text[text.index(after: colon)...])
        }
        guard let port = Int(portText), (0...65535).contains(port) else {
            throw PushGatewayError("push gateway address \"\(text)\": expected HOST:PORT with a port from 0 to 65535 (0: any free port), e.g. 127.0.0.1:2197")
        }
        self.init(host: host, port: port)
    }

    /// `127.0.0.1:2197`, `[::1]:2197`.
    public var description: String { PushGateway.hostPort(host, port) }
}

/// The push gateway could not start (address, certificate), with what to do.
public struct PushGatewayError: Error, Sendable, CustomStringConvertible {
    /// What went wrong and what to do.
    public var description: String
    /// An error with its message.
    public init(_ description: String) { self.description = description }
}

/// One push as the gateway received it, before APNs' checks (``APNsRequest/validate(owner:makeID:)``).
public typealias PushGatewayRequest = APNsRequest

public typealias PushResponder = @Sendable (PushGatewayRequest) async -> Result<String, APNsRejection>
