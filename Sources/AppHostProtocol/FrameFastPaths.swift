/// Direct encodings of the frames every round trip sends — a lifecycle callback to the
/// app, and its `callbackReturned`; and the answer to each background transfer's
/// `resume()` (`transferTaskCreated`) — byte for byte what the generic JSON coder writes,
/// and an exact-shape reader for them that leaves anything else to the generic decoder.
/// The generic coder (a new encoder or decoder per frame, reflection through Codable)
/// was a tenth of the host's CPU in a turn of `apphost-bench virtual`. `FrameFastPathTests`
/// holds these to the generic coder.
extension Frame {
    /// ``encode(_:)`` of a host message, directly for a plain lifecycle callback.
    public static func encode(_ message: HostMessage) throws -> [UInt8] {
        if case .callback(let seq, let callback, let state) = message, let name = FastCallback.name(of: callback) {
            // {"callback":{"callback":{"NAME":{}},"seq":N,"state":"STATE"}}
            var payload = Array(#"{"callback":{"callback":{""#.utf8)
            payload += name.utf8
            switch callback {
            case .backgroundTaskExpiration(let id):
                payload += #"":{"taskID":"#.utf8
                payload += String(id).utf8
                payload += #"}},"seq":"#.utf8
            default:
                payload += #"":{}},"seq":"#.utf8
            }
            payload += String(seq).utf8
            payload += #","state":""#.utf8
            payload += state.rawValue.utf8
            payload += #""}}"#.utf8
            return framed(payload)
        }
        if case .reply(let id, .service(.transferTaskCreated(let task))) = message {
            // {"reply":{"id":N,"reply":{"service":{"_0":{"transferTaskCreated":{"taskIdentifier":T}}}}}}
            var payload = Array(#"{"reply":{"id":"#.utf8)
            payload += String(id).utf8
            payload += #","reply":{"service":{"_0":{"transferTaskCreated":{"taskIdentifier":"#.utf8
            payload += String(task).utf8
            payload += "}}}}}}".utf8
            return framed(payload)
        }
        return try genericEncode(message)
    }

    /// ``encode(_:)`` of an app message, directly for `callbackReturned`.
    public static func encode(_ message: AppMessage) throws -> [UInt8] {
        if case .callbackReturned(let seq) = message {
            return framed(Array(#"{"callbackReturned":{"seq":"#.utf8) + Array(String(seq).utf8) + Array("}}".utf8))
        }
        return try genericEncode(message)
    }

    /// ``decode(_:from:)`` of an app message: `callbackReturned` in exactly the form
    /// ``encode(_:)-(AppMessage)`` writes is read directly, anything else generically.
    public static func decode(_ type: AppMessage.Type, from payload: [UInt8]) throws(FrameError) -> AppMessage {
        var reader = FastReader(payload)
        if let seq = reader.callbackReturned() { return .callbackReturned(seq: seq) }
        return try genericDecode(AppMessage.self, from: payload)
    }

    /// ``decode(_:from:)`` of a host message: a plain lifecycle callback in exactly the
    /// form ``encode(_:)-(HostMessage)`` writes is read directly, anything else generically.
    public static func decode(_ type: HostMessage.Type, from payload: [UInt8]) throws(FrameError) -> HostMessage {
        var reader = FastReader(payload)
        if let message = reader.callback() { return message }
        reader = FastReader(payload)
        if let message = reader.taskCreated() { return message }
        return try genericDecode(HostMessage.self, from: payload)
    }

    private static func framed(_ payload: [UInt8]) -> [UInt8] {
        let n = UInt32(payload.count)
        var out: [UInt8] = [UInt8(n >> 24), UInt8((n >> 16) & 0xff), UInt8((n >> 8) & 0xff), UInt8(n & 0xff)]
        out.reserveCapacity(headerSize + payload.count)
        out += payload
        return out
    }
}

private enum FastCallback {
    static let plain: [(StaticString, LifecycleCallback)] = [
        ("willResignActive", .willResignActive), ("didEnterBackground", .didEnterBackground),
        ("willEnterForeground", .willEnterForeground), ("didBecomeActive", .didBecomeActive),
        ("willTerminate", .willTerminate),
    ]

    static func name(of callback: LifecycleCallback) -> String? {
        switch callback {
        case .willResignActive: "willResignActive"
        case .didEnterBackground: "didEnterBackground"
        case .willEnterForeground: "willEnterForeground"
        case .didBecomeActive: "didBecomeActive"
        case .willTerminate: "willTerminate"
        case .backgroundTaskExpiration: "backgroundTaskExpiration"
        default: nil
        }
    }
}

/// Matches a payload against the exact bytes of the fast encodings; nil on any difference.
private struct FastReader {
    let bytes: [UInt8]
    var at = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func literal(_ s: StaticString) -> Bool {
        let ok = s.withUTF8Buffer { lit -> Bool in
            guard bytes.count - at >= lit.count else { return false }
            for i in 0..<lit.count where bytes[at + i] != lit[i] { return false }
            return true
        }
        if ok { at += s.utf8CodeUnitCount }
        return ok
    }

    /// A JSON integer as the encoder writes one: no sign unless negative, no leading zero.
    mutating func integer() -> (negative: Bool, magnitude: UInt64)? {
        var negative = false
        if at < bytes.count, bytes[at] == UInt8(ascii: "-") { negative = true; at += 1 }
        let start = at
        var value: UInt64 = 0
        while at < bytes.count, bytes[at] >= 0x30, bytes[at] <= 0x39 {
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(UInt64(bytes[at] - 0x30))
            if o1 || o2 { return nil }
            value = a
            at += 1
        }
        let digits = at - start
        if digits == 0 || (digits > 1 && bytes[start] == 0x30) || (negative && value == 0) { return nil }
        return (negative, value)
    }

    mutating func callbackReturned() -> UInt64? {
        guard literal(#"{"callbackReturned":{"seq":"#), let n = integer(), !n.negative, literal("}}"), at == bytes.count else { return nil }
        return n.magnitude
    }

    mutating func taskCreated() -> HostMessage? {
        guard literal(#"{"reply":{"id":"#), let id = integer(), !id.negative,
              literal(#","reply":{"service":{"_0":{"transferTaskCreated":{"taskIdentifier":"#), let task = integer(),
              task.negative ? task.magnitude <= UInt64(Int.max) + 1 : task.magnitude <= UInt64(Int.max),
              literal("}}}}}}"), at == bytes.count else { return nil }
        return .reply(id: id.magnitude, reply: .service(.transferTaskCreated(
            taskIdentifier: task.negative ? Int(truncatingIfNeeded: 0 &- task.magnitude) : Int(task.magnitude))))
    }

    mutating func callback() -> HostMessage? {
        guard literal(#"{"callback":{"callback":{""#) else { return nil }
        var callback: LifecycleCallback?
        for (name, value) in FastCallback.plain {
            var probe = self
            if probe.literal(name), probe.literal(#"":{}},"seq":"#) {
                self = probe
                callback = value
                break
            }
        }
        if callback == nil {
            guard literal(#"backgroundTaskExpiration":{"taskID":"#), let id = integer(), literal(#"}},"seq":"#) else { return nil }
            guard id.negative ? id.magnitude <= UInt64(Int.max) + 1 : id.magnitude <= UInt64(Int.max) else { return nil }
            callback = .backgroundTaskExpiration(taskID: id.negative ? Int(truncatingIfNeeded: 0 &- id.magnitude) : Int(id.magnitude))
        }
        guard let callback, let seq = integer(), !seq.negative, literal(#","state":""#) else { return nil }
        let start = at
        while at < bytes.count, bytes[at] != UInt8(ascii: "\"") { at += 1 }
        guard at < bytes.count, let state = AppState(rawValue: String(decoding: bytes[start..<at], as: UTF8.self)) else { return nil }
        at += 1
        guard literal("}}"), at == bytes.count else { return nil }
        return .callback(seq: seq.magnitude, callback: callback, state: state)
    }
}
