/// A transfer job as JSON, written and read directly: each `resume()` of a background
/// download makes one, which the host stores in its database and sends to the transfer
/// daemon, and the daemon stores in its own. The generic coder (reflection through
/// Codable, a new encoder each time) was the largest part of the host's and the
/// daemon's work per enqueued download. Byte for byte what `WireJSON.encoder()` writes,
/// for a job without headers, upload file or resume (a download as most are made) whose
/// strings need no escaping; any other job, and any text not in exactly that shape,
/// goes through the generic coder. `TransferJobJSONTests` holds them to it.
extension TransferJob {
    /// The job's JSON as `WireJSON.encoder()` writes it, or nil when it is not in the
    /// shape written directly.
    public var directJSON: [UInt8]? {
        guard headers.isEmpty, uploadFile == nil, resume == nil,
              FastString.isPlain(bundleIdentifier.rawValue), FastString.isPlain(session.rawValue), FastString.isPlain(url),
              FastString.isPlain(method), FastString.isPlain(destination),
              let created = FastNumber.text(created), let timeout = FastNumber.text(timeoutForResource)
        else { return nil }
        // {"allowsCellularAccess":B,"bundleIdentifier":"…","created":N,"destination":"…","discretionary":B,
        //  "headers":{},"id":N,"kind":"…","method":"…","session":"…","taskIdentifier":N,"timeoutForResource":N,"url":"…"}
        var out = Array(#"{"allowsCellularAccess":"#.utf8)
        out += (allowsCellularAccess ? "true" : "false").utf8
        out += #","bundleIdentifier":""#.utf8
        out += bundleIdentifier.rawValue.utf8
        out += #"","created":"#.utf8
        out += created.utf8
        out += #","destination":""#.utf8
        out += destination.utf8
        out += #"","discretionary":"#.utf8
        out += (discretionary ? "true" : "false").utf8
        out += #","headers":{},"id":"#.utf8
        out += String(id.rawValue).utf8
        out += #","kind":""#.utf8
        out += kind.rawValue.utf8
        out += #"","method":""#.utf8
        out += method.utf8
        out += #"","session":""#.utf8
        out += session.rawValue.utf8
        out += #"","taskIdentifier":"#.utf8
        out += String(taskIdentifier.rawValue).utf8
        out += #","timeoutForResource":"#.utf8
        out += timeout.utf8
        out += #","url":""#.utf8
        out += url.utf8
        out += #""}"#.utf8
        return out
    }
}

extension Frame {
    /// ``encode(_:)`` of a request to the transfer daemon, directly for `enqueue` of a
    /// job in the shape ``TransferJob/directJSON`` writes.
    public static func encode(_ message: TransferRequest) throws -> [UInt8] {
        if case .enqueue(let job) = message, let json = job.directJSON {
            return framed(Array(#"{"enqueue":{"_0":"#.utf8) + json + Array("}}".utf8))
        }
        // One a delivered transfer: as the generic coder writes it.
        if case .acknowledge(let id) = message {
            return framed(Array(#"{"acknowledge":{"id":"#.utf8) + Array(String(id.rawValue).utf8) + Array("}}".utf8))
        }
        return try genericEncode(message)
    }

    /// ``decode(_:from:)`` of a request to the transfer daemon: `enqueue` and `acknowledge`
    /// in exactly the form ``encode(_:)-(TransferRequest)`` writes are read directly,
    /// anything else generically.
    public static func decode(_ type: TransferRequest.Type, from payload: [UInt8]) throws(FrameError) -> TransferRequest {
        var reader = FastReader(payload)
        if reader.literal(#"{"enqueue":{"_0":"#), let job = reader.transferJob(), reader.literal("}}"), reader.at == payload.count {
            return .enqueue(job)
        }
        reader = FastReader(payload)
        if reader.literal(#"{"acknowledge":{"id":"#), let id = reader.integer(), !id.negative, reader.literal("}}"),
           reader.at == payload.count {
            return .acknowledge(id: TransferID(id.magnitude))
        }
        return try genericDecode(TransferRequest.self, from: payload)
    }
}

/// Numbers as the generic encoder writes a `Double`.
enum FastNumber {
    /// `d`'s shortest round-trip digits with a whole number's ".0" left off, as
    /// `WireJSON.encoder()` writes it; nil for infinities and NaN (written as strings).
    static func text(_ d: Double) -> String? {
        guard d.isFinite else { return nil }
        var s = d.description
        if s.hasSuffix(".0") { s.removeLast(2) }
        return s
    }
}

extension FastReader {
    /// A JSON number as the generic encoder writes a `Double` (see ``FastNumber``), read
    /// back to the same value; nil on anything else.
    mutating func double() -> Double? {
        let start = at
        while at < bytes.count, Self.numberByte(bytes[at]) { at += 1 }
        guard at > start, let value = Double(String(decoding: bytes[start..<at], as: UTF8.self)), value.isFinite,
              FastNumber.text(value).map({ Array($0.utf8) == Array(bytes[start..<at]) }) == true
        else { return nil }
        return value
    }

    private static func numberByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || b == UInt8(ascii: "-") || b == UInt8(ascii: "+") || b == UInt8(ascii: ".") || b == UInt8(ascii: "e")
    }

    mutating func bool() -> Bool? {
        if literal("true") { return true }
        if literal("false") { return false }
        return nil
    }

    /// A job in exactly the shape ``TransferJob/directJSON`` writes.
    mutating func transferJob() -> TransferJob? {
        guard literal(#"{"allowsCellularAccess":"#), let cellular = bool(),
              literal(#","bundleIdentifier":"#), let bundleText = plainString(), let bundle = BundleID(bundleText),
              literal(#","created":"#), let created = double(),
              literal(#","destination":"#), let destination = plainString(),
              literal(#","discretionary":"#), let discretionary = bool(),
              literal(#","headers":{},"id":"#), let id = integer(), !id.negative,
              literal(#","kind":"#), let rawKind = plainString(), let kind = TransferKind(rawValue: rawKind),
              literal(#","method":"#), let method = plainString(),
              literal(#","session":"#), let session = plainString(),
              literal(#","taskIdentifier":"#), let task = int(),
              literal(#","timeoutForResource":"#), let timeout = double(),
              literal(#","url":"#), let url = plainString(), literal("}")
        else { return nil }
        return TransferJob(id: TransferID(id.magnitude), bundleIdentifier: bundle, session: SessionIdentifier(session),
                           taskIdentifier: TransferTaskID(task), kind: kind,
                           url: url, method: method, headers: [:], uploadFile: nil, destination: destination,
                           discretionary: discretionary, allowsCellularAccess: cellular, timeoutForResource: timeout,
                           created: created, resume: nil)
    }
}

// MARK: - The daemon's events

extension TransferOutcome {
    /// A successful outcome's JSON as `WireJSON.encoder()` writes it (the daemon's
    /// database keeps it, its `finished` event carries it); nil for any other outcome.
    public var directJSON: [UInt8]? {
        guard case .completed(let status, let bytes) = self else { return nil }
        // {"completed":{"bytes":B,"status":S}}
        return Array(#"{"completed":{"bytes":"#.utf8) + Array(String(bytes).utf8) + Array(#","status":"#.utf8)
            + Array(String(status).utf8) + Array("}}".utf8)
    }
}

extension Frame {
    /// ``encode(_:)`` of an event of the transfer daemon, directly for the three every
    /// download sends (`accepted`, `progress`, a successful `finished`).
    public static func encode(_ message: TransferEvent) throws -> [UInt8] {
        switch message {
        case .accepted(let id):
            return framed(Array(#"{"accepted":{"id":"#.utf8) + Array(String(id.rawValue).utf8) + Array("}}".utf8))
        case .progress(let id, let done, let expected):
            // {"progress":{"bytesDone":D[,"bytesExpected":E],"id":N}}
            var payload = Array(#"{"progress":{"bytesDone":"#.utf8) + Array(String(done).utf8)
            if let expected { payload += Array(#","bytesExpected":"#.utf8) + Array(String(expected).utf8) }
            return framed(payload + Array(#","id":"#.utf8) + Array(String(id.rawValue).utf8) + Array("}}".utf8))
        case .finished(let id, let outcome):
            guard let json = outcome.directJSON else { return try genericEncode(message) }
            // {"finished":{"id":N,"outcome":{...}}}
            return framed(Array(#"{"finished":{"id":"#.utf8) + Array(String(id.rawValue).utf8) + Array(#","outcome":"#.utf8) + json + Array("}}".utf8))
        default:
            return try genericEncode(message)
        }
    }

    /// ``decode(_:from:)`` of an event of the transfer daemon: the shapes
    /// ``encode(_:)-(TransferEvent)`` writes directly are read directly, anything else generically.
    public static func decode(_ type: TransferEvent.Type, from payload: [UInt8]) throws(FrameError) -> TransferEvent {
        var reader = FastReader(payload)
        if let event = reader.transferEvent(), reader.at == payload.count { return event }
        return try genericDecode(TransferEvent.self, from: payload)
    }
}

extension FastReader {
    /// An integer that fits `Int64`.
    mutating func int64() -> Int64? {
        guard let n = integer() else { return nil }
        if n.negative { return n.magnitude <= UInt64(Int64.max) + 1 ? Int64(truncatingIfNeeded: 0 &- n.magnitude) : nil }
        return n.magnitude <= UInt64(Int64.max) ? Int64(n.magnitude) : nil
    }

    mutating func transferEvent() -> TransferEvent? {
        if literal(#"{"accepted":{"id":"#) {
            guard let id = integer(), !id.negative, literal("}}") else { return nil }
            return .accepted(id: TransferID(id.magnitude))
        }
        if literal(#"{"progress":{"bytesDone":"#) {
            guard let done = int64() else { return nil }
            var expected: Int64?
            if literal(#","bytesExpected":"#) {
                guard let e = int64() else { return nil }
                expected = e
            }
            guard literal(#","id":"#), let id = integer(), !id.negative, literal("}}") else { return nil }
            return .progress(id: TransferID(id.magnitude), bytesDone: done, bytesExpected: expected)
        }
        if literal(#"{"finished":{"id":"#) {
            guard let id = integer(), !id.negative, literal(#","outcome":{"completed":{"bytes":"#), let bytes = int64(),
                  literal(#","status":"#), let status = int(), literal("}}}}") else { return nil }
            return .finished(id: TransferID(id.magnitude), outcome: .completed(status: status, bytes: bytes))
        }
        return nil
    }
}
