import AppHostProtocol
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Plugins
import Synchronization

// MARK: - A client

/// A small HTTP/2 client of the gateway (cleartext, prior knowledge): one connection,
/// any number of concurrent requests, each on its own stream. For tests and benchmarks.
public final class PushGatewayClient: Sendable {
    /// An answer.
    public struct Response: Sendable, Equatable {
        /// The HTTP status.
        public var status: Int
        /// The `apns-id` header.
        public var apnsID: String?
        /// The body (empty for 200).
        public var body: Data
        /// Every response header but `:status`, in order.
        public var headers: [String]

        /// The JSON body's `reason`, if any.
        public var reason: String? { json?["reason"] as? String }
        /// The JSON body's `timestamp`, if any (410).
        public var timestamp: Int64? { (json?["timestamp"] as? NSNumber)?.int64Value }

        private var json: [String: Any]? {
            body.isEmpty ? nil : (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        }
    }

    private struct Connection: Sendable {
        let channel: any Channel
        let multiplexer: NIOHTTP2Handler.AsyncStreamMultiplexer<Void>
    }
    private typealias StreamChannel = NIOAsyncChannel<HTTP2Frame.FramePayload, HTTP2Frame.FramePayload>

    private let connection: Connection
    private let authority: String

    private init(connection: Connection, authority: String) {
        self.connection = connection
        self.authority = authority
    }

    /// Connects to `host:port` and exchanges the HTTP/2 preface.
    public static func connect(host: String, port: Int, group: any EventLoopGroup) async throws -> PushGatewayClient {
        let connection = try await ClientBootstrap(group: group)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let multiplexer = try channel.pipeline.syncOperations.configureAsyncHTTP2Pipeline(mode: .client) { stream in
                        // The server opens no streams (no server push).
                        stream.eventLoop.makeSucceededVoidFuture()
                    }
                    return Connection(channel: channel, multiplexer: multiplexer)
                }
            }
        return PushGatewayClient(connection: connection, authority: PushGateway.hostPort(host, port))
    }

    /// Sends one request on a new stream and reads the whole answer.
    public func send(method: String = "POST", path: String, headers: [(String, String)] = [], body: Data = Data()) async throws -> Response {
        let stream = try await connection.multiplexer.openStream { channel in
            channel.eventLoop.makeCompletedFuture { try StreamChannel(wrappingChannelSynchronously: channel) }
        }
        let authority = self.authority
        return try await stream.executeThenClose { inbound, outbound in
            var head = HPACKHeaders([(":method", method), (":scheme", "http"), (":authority", authority), (":path", path)])
            for (name, value) in headers { head.add(name: name, value: value) }
            if body.isEmpty {
                try await outbound.write(.headers(.init(headers: head, endStream: true)))
            } else {
                try await outbound.write(contentsOf: [
                    .headers(.init(headers: head)),
                    .data(.init(data: .byteBuffer(ByteBuffer(bytes: body)), endStream: true)),
                ])
            }
            var response = Response(status: 0, apnsID: nil, body: Data(), headers: [])
            loop: for try await frame in inbound {
                switch frame {
                case .headers(let h):
                    for field in h.headers {
                        if field.name == ":status" {
                            response.status = Int(field.value) ?? 0
                        } else {
                            response.headers.append("\(field.name): \(field.value)")
                            if field.name == "apns-id" { response.apnsID = field.value }
                        }
                    }
                    if h.endStream { break loop }
                case .data(let d):
                    if case .byteBuffer(let buffer) = d.data { response.body.append(contentsOf: buffer.readableBytesView) }
                    if d.endStream { break loop }
                default:
                    continue
                }
            }
            guard response.status != 0 else {
                throw PushGatewayError("the stream ended without an answer (connection closed or stream reset)")
            }
            return response
        }
    }

    /// Sends a push: `POST /3/device/<token>` with `apns-*` headers.
    public func push(token: String, topic: String?, pushType: String? = nil, priority: Int? = nil,
                     apnsID: String? = nil, extraHeaders: [(String, String)] = [], payload: Data) async throws -> Response {
        var headers: [(String, String)] = []
        if let topic { headers.append(("apns-topic", topic)) }
        if let pushType { headers.append(("apns-push-type", pushType)) }
        if let priority { headers.append(("apns-priority", String(priority))) }
        if let apnsID { headers.append(("apns-id", apnsID)) }
        return try await send(path: "/3/device/" + token, headers: headers + extraHeaders, body: payload)
    }

    /// Closes the connection.
    public func close() async {
        try? await connection.channel.close()
    }
}
