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

// The push gateway's wire rules, pure: `APNsWire` parses a request head and builds
// answers, `APNsRequestAssembler` turns one HTTP/2 stream's frames into one request.

// MARK: - The wire rules (pure)

/// The APNs provider API's request and response shapes, without sockets.
enum APNsWire {
    /// The largest body the gateway reads: a VoIP payload's limit (others: 4096, checked
    /// by the supervisor). Anything larger is refused with 413 before it is all read.
    static let maximumBody = 5120

    /// The request headers the gateway reads; each may appear once.
    static let apnsHeaders: Set<String> = ["apns-id", "apns-push-type", "apns-topic", "apns-priority",
                                           "apns-expiration", "apns-collapse-id"]

    /// A request head that passed the wire checks.
    struct Head: Equatable {
        var request: PushGatewayRequest
        var contentLength: Int?
        /// The `authorization` header (a provider token), if any.
        var authorization: String?
    }

    /// The request's `apns-id`, if any (echoed in every answer, as APNs does).
    static func apnsID(in headers: [(String, String)]) -> String? {
        headers.first { $0.0 == "apns-id" }?.1
    }

    /// The `apns-id` an answer carries: the request's exactly as sent (provider libraries
    /// match answers to requests by it, as a string), or, when it sent none or one that
    /// is not a UUID (BadMessageId), a new lowercase UUID as APNs makes.
    static func answerID(_ requestAPNsID: String?) -> String {
        if let requestAPNsID, UUID(uuidString: requestAPNsID) != nil { return requestAPNsID }
        return APNsRequest.makeID()
    }

    /// Checks method, path and the `apns-*` headers (names are lowercase in HTTP/2).
    static func parseHead(_ headers: [(String, String)]) -> Result<Head, APNsRejection> {
        var method: String?
        var path: String?
        var seen: [String: String] = [:]
        var contentLength: Int?
        var authorization: String?
        for (name, value) in headers {
            switch name {
            case ":method": method = value
            case ":path": path = value
            case "content-length": contentLength = Int(value)
            case "authorization":
                if authorization != nil {
                    return .failure(APNsRejection(.duplicateHeaders, "authorization is given more than once"))
                }
                authorization = value
            case _ where apnsHeaders.contains(name):
                if seen[name] != nil {
                    return .failure(APNsRejection(.duplicateHeaders, "\(name) is given more than once"))
                }
                seen[name] = value
            default: break
            }
        }
        guard method == "POST" else {
            return .failure(APNsRejection(.methodNotAllowed, "the method must be POST, not \(method ?? "none")"))
        }
        let prefix = "/3/device/"
        guard let path, path.hasPrefix(prefix) else {
            return .failure(APNsRejection(.badPath, "the path must be /3/device/<device token>, not \(path ?? "none")"))
        }
        let token = String(path.dropFirst(prefix.count))
        guard !token.isEmpty else {
            return .failure(APNsRejection(.missingDeviceToken, "the path has no device token: /3/device/<device token>"))
        }
        guard !token.contains("/"), !token.contains("?") else {
            return .failure(APNsRejection(.badPath, "the path must be /3/device/<device token>, not \(path)"))
        }
        var priority: Int?
        if let text = seen["apns-priority"] {
            guard let p = Int(text) else {
                return .failure(APNsRejection(.badPriority, "apns-priority must be an integer (10, 5 or 1), not \"\(text)\""))
            }
            priority = p
        }
        var expiration: Int?
        if let text = seen["apns-expiration"] {
            guard let e = Int(text) else {
                return .failure(APNsRejection(.badExpirationDate, "apns-expiration must be an integer (UNIX seconds or 0), not \"\(text)\""))
            }
            expiration = e
        }
        if let contentLength, contentLength > maximumBody {
            return .failure(tooLarge(contentLength, exact: true))
        }
        let request = PushGatewayRequest(
            token: token, topic: seen["apns-topic"], pushType: seen["apns-push-type"], priority: priority,
            expiration: expiration, collapseID: seen["apns-collapse-id"], apnsID: seen["apns-id"], payload: Data())
        return .success(Head(request: request, contentLength: contentLength, authorization: authorization))
    }

    /// 413; `exact`: `size` is the whole body's (content-length), else only what was read so far.
    static func tooLarge(_ size: Int, exact: Bool) -> APNsRejection {
        APNsRejection(.payloadTooLarge,
                      "the payload is \(exact ? "" : "over ")\(exact ? size : maximumBody) bytes; a push carries at most 4096 (5120 for VoIP)")
    }

    /// An answer: `:status`, headers, and the body (nil: none).
    struct Response: Equatable {
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]?

        static func == (a: Response, b: Response) -> Bool {
            a.status == b.status && a.body == b.body && a.headers.map { $0.0 + ":" + $0.1 } == b.headers.map { $0.0 + ":" + $0.1 }
        }
    }

    /// 200 with `apns-id` and no body; or the rejection's status with `apns-id` and
    /// `{"reason": ...}` (410 adds `"timestamp"`, milliseconds since 1970, as APNs does).
    /// `requestAPNsID` is echoed on errors (``answerID(_:)``).
    static func response(_ result: Result<String, APNsRejection>, requestAPNsID: String?, now: Date) -> Response {
        switch result {
        case .success(let id):
            return Response(status: 200, headers: [("apns-id", id)], body: nil)
        case .failure(let rejection):
            var body = "{\"reason\":\"\(jsonEscaped(rejection.reason))\""
            if rejection.status == 410 {
                body += ",\"timestamp\":\(Int64((now.timeIntervalSince1970 * 1000).rounded(.down)))"
            }
            body += "}"
            let bytes = Array(body.utf8)
            return Response(status: rejection.status,
                            headers: [("apns-id", answerID(requestAPNsID)),
                                      ("content-type", "application/json"),
                                      ("content-length", String(bytes.count)),
                                      // Not APNs': the sentence for people (APNs clients ignore it).
                                      ("apphost-message", headerSafe(rejection.message))],
                            body: bytes)
        }
    }

    static func jsonEscaped(_ s: String) -> String {
        var out = ""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// A header value has no control characters.
    static func headerSafe(_ s: String) -> String {
        String(String.UnicodeScalarView(s.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7f ? " " : $0 }))
    }
}

/// Turns the frames of one HTTP/2 stream into one push request, or a rejection as
/// soon as one is certain (a bad head, a body over the limit).
struct APNsRequestAssembler {
    enum Step: Equatable {
        /// Keep reading.
        case more
        /// The request is complete.
        case complete(PushGatewayRequest)
        /// Refuse now (`apnsID`: the request's, to echo).
        case reject(APNsRejection, apnsID: String?)
    }

    /// The request's head, once read and accepted.
    private(set) var head: APNsWire.Head?
    private var body: [UInt8] = []
    private var rejected = false
    /// The client has ended its side of the stream (END_STREAM seen).
    private(set) var clientFinished = false

    /// Feeds a HEADERS frame's fields.
    mutating func headers(_ fields: [(String, String)], endStream: Bool) -> Step {
        clientFinished = clientFinished || endStream
        guard !rejected else { return .more }
        if head == nil {
            switch APNsWire.parseHead(fields) {
            case .success(let h): head = h
            case .failure(let r):
                rejected = true
                return .reject(r, apnsID: APNsWire.apnsID(in: fields))
            }
        }
        // A second HEADERS frame is a trailer block: nothing in it matters here.
        return endStream ? complete() : .more
    }

    /// Feeds a DATA frame's bytes.
    mutating func data(_ bytes: some Collection<UInt8>, endStream: Bool) -> Step {
        clientFinished = clientFinished || endStream
        guard !rejected, head != nil else { return .more }
        if body.count + bytes.count > APNsWire.maximumBody {
            rejected = true
            return .reject(APNsWire.tooLarge(body.count + bytes.count, exact: false), apnsID: head?.request.apnsID)
        }
        body.append(contentsOf: bytes)
        return endStream ? complete() : .more
    }

    private mutating func complete() -> Step {
        guard var request = head?.request else { return .more }
        request.payload = Data(body)
        return .complete(request)
    }
}
