/// Direct encodings of the frames every round trip sends — a lifecycle callback to the
/// app, and its `callbackReturned`; and the answer to each background transfer's
/// `resume()` (`transferTaskCreated`) — of the launch's frames (`hello`, `welcome`,
/// `didFinishLaunching`), of a background download's (the `resume()` request of a
/// download without headers, its `didFinishDownloadingTo` and successful
/// `didCompleteWithError` callbacks), of a host timer's fire (`timerFired`), and of a
/// background fetch's (`performFetch`, its `fetchCompleted` request and the `ok` reply)
/// and of a background task's begin and end, byte
/// for byte what the generic JSON coder writes, and an
/// exact-shape reader for them that leaves anything else to the generic decoder.
/// The generic coder (a new encoder or decoder per frame, reflection through Codable)
/// was a tenth of the host's CPU in a turn of `apphost-bench virtual`; in a new app
/// process its first use (type metadata and protocol conformances looked up by the
/// runtime) was most of the 0.7 ms between `hello` and didFinishLaunching's return.
/// Strings go the direct way only when they need no escaping (printable ASCII without
/// `"` and `\`). `FrameFastPathTests` holds these to the generic coder.
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
                payload += String(id.rawValue).utf8
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
        if case .callback(let seq, .didFinishLaunching(let options), let state) = message,
           !options.afterJetsam, options.arguments.allSatisfy(FastString.isPlain) {
            // {"callback":{"callback":{"didFinishLaunching":{"options":{"arguments":["A",...],"reason":"R"}}},"seq":N,"state":"S"}}
            var payload = Array(#"{"callback":{"callback":{"didFinishLaunching":{"options":{"arguments":["#.utf8)
            for (i, argument) in options.arguments.enumerated() {
                if i > 0 { payload.append(UInt8(ascii: ",")) }
                payload.append(UInt8(ascii: "\""))
                payload += argument.utf8
                payload.append(UInt8(ascii: "\""))
            }
            payload += #"],"reason":""#.utf8
            payload += options.reason.rawValue.utf8
            payload += #""}}},"seq":"#.utf8
            payload += String(seq).utf8
            payload += #","state":""#.utf8
            payload += state.rawValue.utf8
            payload += #""}}"#.utf8
            return framed(payload)
        }
        if case .welcome(let version, let bundleIdentifier, let screen) = message, FastString.isPlain(bundleIdentifier),
           screen.map({ FastString.integralScale($0.scale) != nil }) ?? true {
            // {"welcome":{"bundleIdentifier":"B","screen":{"height":H,"scale":S,"width":W},"version":V}}
            var payload = Array(#"{"welcome":{"bundleIdentifier":""#.utf8)
            payload += bundleIdentifier.utf8
            payload.append(UInt8(ascii: "\""))
            if let screen, let scale = FastString.integralScale(screen.scale) {
                payload += #","screen":{"height":"#.utf8
                payload += String(screen.height).utf8
                payload += #","scale":"#.utf8
                payload += String(scale).utf8
                payload += #","width":"#.utf8
                payload += String(screen.width).utf8
                payload.append(UInt8(ascii: "}"))
            }
            payload += #","version":"#.utf8
            payload += String(version).utf8
            payload += "}}".utf8
            return framed(payload)
        }
        if case .callback(let seq, .service(let event), let state) = message, let payload = FastTransfer.encode(event, seq: seq, state: state) {
            return framed(payload)
        }
        if case .reply(let id, .service(.transferTaskCreated(let task))) = message {
            // {"reply":{"id":N,"reply":{"service":{"_0":{"transferTaskCreated":{"taskIdentifier":T}}}}}}
            var payload = Array(#"{"reply":{"id":"#.utf8)
            payload += String(id).utf8
            payload += #","reply":{"service":{"_0":{"transferTaskCreated":{"taskIdentifier":"#.utf8
            payload += String(task.rawValue).utf8
            payload += "}}}}}}".utf8
            return framed(payload)
        }
        if case .reply(let id, .service(.ok)) = message {
            // {"reply":{"id":N,"reply":{"service":{"_0":{"ok":{}}}}}}
            return framed(Array(#"{"reply":{"id":"#.utf8) + Array(String(id).utf8) + Array(#","reply":{"service":{"_0":{"ok":{}}}}}}"#.utf8))
        }
        return try genericEncode(message)
    }

    /// ``encode(_:)`` of an app message, directly for `callbackReturned`.
    public static func encode(_ message: AppMessage) throws -> [UInt8] {
        if case .callbackReturned(let seq) = message {
            return framed(Array(#"{"callbackReturned":{"seq":"#.utf8) + Array(String(seq).utf8) + Array("}}".utf8))
        }
        if case .request(let id, .service(.urlSessionStartTask(let session, let kind, let url, let method, let headers, nil))) = message,
           headers.isEmpty, FastString.isPlain(session.rawValue), FastString.isPlain(url), FastString.isPlain(method) {
            // {"request":{"id":I,"request":{"service":{"_0":{"urlSessionStartTask":{"headers":{},"kind":"K","method":"M","session":"S","url":"U"}}}}}}
            var payload = Array(#"{"request":{"id":"#.utf8)
            payload += String(id).utf8
            payload += #","request":{"service":{"_0":{"urlSessionStartTask":{"headers":{},"kind":""#.utf8
            payload += kind.rawValue.utf8
            payload += #"","method":""#.utf8
            payload += method.utf8
            payload += #"","session":""#.utf8
            payload += session.rawValue.utf8
            payload += #"","url":""#.utf8
            payload += url.utf8
            payload += #""}}}}}}"#.utf8
            guard payload.count <= maximumPayload else { return try genericEncode(message) }
            return framed(payload)
        }
        if case .request(let id, .service(.fetchCompleted(let fetch, let result))) = message {
            // {"request":{"id":I,"request":{"service":{"_0":{"fetchCompleted":{"id":F,"result":"R"}}}}}}
            var payload = Array(#"{"request":{"id":"#.utf8)
            payload += String(id).utf8
            payload += #","request":{"service":{"_0":{"fetchCompleted":{"id":"#.utf8
            payload += String(fetch).utf8
            payload += #","result":""#.utf8
            payload += result.rawValue.utf8
            payload += #""}}}}}}"#.utf8
            return framed(payload)
        }
        if case .beginBackgroundTask(let id, let name) = message, name.map(FastString.isPlain) ?? true {
            // {"beginBackgroundTask":{"id":I,"name":"N"}} (no "name" without one)
            var payload = Array(#"{"beginBackgroundTask":{"id":"#.utf8)
            payload += String(id.rawValue).utf8
            if let name {
                payload += #","name":""#.utf8
                payload += name.utf8
                payload.append(UInt8(ascii: "\""))
            }
            payload += "}}".utf8
            // A name past the bound: the generic way refuses it, saying so.
            guard payload.count <= maximumPayload else { return try genericEncode(message) }
            return framed(payload)
        }
        if case .endBackgroundTask(let id) = message {
            // {"endBackgroundTask":{"id":I}}
            return framed(Array(#"{"endBackgroundTask":{"id":"#.utf8) + Array(String(id.rawValue).utf8) + Array("}}".utf8))
        }
        if case .hello(let version, let pid) = message {
            // {"hello":{"pid":P,"version":V}}
            return framed(Array(#"{"hello":{"pid":"#.utf8) + Array(String(pid).utf8) + Array(#","version":"#.utf8)
                + Array(String(version).utf8) + Array("}}".utf8))
        }
        return try genericEncode(message)
    }

    /// ``decode(_:from:)`` of an app message: `callbackReturned` in exactly the form
    /// ``encode(_:)-(AppMessage)`` writes is read directly, anything else generically.
    public static func decode(_ type: AppMessage.Type, from payload: [UInt8]) throws(FrameError) -> AppMessage {
        var reader = FastReader(payload)
        if let seq = reader.callbackReturned() { return .callbackReturned(seq: seq) }
        reader = FastReader(payload)
        if let hello = reader.hello() { return hello }
        reader = FastReader(payload)
        if let start = reader.startTask() { return start }
        reader = FastReader(payload)
        if let completed = reader.fetchCompleted() { return completed }
        reader = FastReader(payload)
        if let task = reader.backgroundTask() { return task }
        return try genericDecode(AppMessage.self, from: payload)
    }

    /// ``decode(_:from:)`` of a host message: a plain lifecycle callback in exactly the
    /// form ``encode(_:)-(HostMessage)`` writes is read directly, anything else generically.
    public static func decode(_ type: HostMessage.Type, from payload: [UInt8]) throws(FrameError) -> HostMessage {
        var reader = FastReader(payload)
        if let message = reader.callback() { return message }
        reader = FastReader(payload)
        if let message = reader.taskCreated() { return message }
        reader = FastReader(payload)
        if let message = reader.okReply() { return message }
        reader = FastReader(payload)
        if let message = reader.transferCallback() { return message }
        reader = FastReader(payload)
        if let message = reader.launch() { return message }
        reader = FastReader(payload)
        if let message = reader.welcome() { return message }
        return try genericDecode(HostMessage.self, from: payload)
    }

    static func framed(_ payload: [UInt8]) -> [UInt8] {
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

/// The transfer callbacks every background download ends with (a success), and a host
/// timer's fire (a repeating timer sends one every interval), as the generic coder
/// writes them.
private enum FastTransfer {
    static func encode(_ event: ServiceEvent, seq: UInt64, state: AppState) -> [UInt8]? {
        var payload = Array(#"{"callback":{"callback":{"service":{"_0":{"#.utf8)
        switch event {
        case .urlSessionDidFinishDownloading(let session, let task, let location):
            guard FastString.isPlain(session.rawValue), FastString.isPlain(location) else { return nil }
            // ..."urlSessionDidFinishDownloading":{"location":"L","session":"S","taskIdentifier":T}}}},"seq":N,"state":"ST"}}
            payload += #""urlSessionDidFinishDownloading":{"location":""#.utf8
            payload += location.utf8
            payload += #"","session":""#.utf8
            payload += session.rawValue.utf8
            payload += #"","taskIdentifier":"#.utf8
            payload += String(task.rawValue).utf8
        case .urlSessionDidComplete(let session, let task, nil, nil, nil):
            guard FastString.isPlain(session.rawValue) else { return nil }
            // ..."urlSessionDidComplete":{"session":"S","taskIdentifier":T}}}},"seq":N,"state":"ST"}}
            payload += #""urlSessionDidComplete":{"session":""#.utf8
            payload += session.rawValue.utf8
            payload += #"","taskIdentifier":"#.utf8
            payload += String(task.rawValue).utf8
        case .timerFired(let id):
            // ..."timerFired":{"id":I}}}}},"seq":N,"state":"ST"}}
            payload += #""timerFired":{"id":"#.utf8
            payload += String(id.rawValue).utf8
        case .performFetch(let id):
            // ..."performFetch":{"id":I}}}}},"seq":N,"state":"ST"}}
            payload += #""performFetch":{"id":"#.utf8
            payload += String(id).utf8
        default:
            return nil
        }
        payload += #"}}}},"seq":"#.utf8
        payload += String(seq).utf8
        payload += #","state":""#.utf8
        payload += state.rawValue.utf8
        payload += #""}}"#.utf8
        return payload
    }
}

extension Frame {
    /// ``encode(_:)`` of a control answer, directly for one app of a `status` answer (a
    /// status of every app is one frame each: at 1,000 apps the generic coder made it
    /// 15 ms, most of it reflection).
    public static func encode(_ response: ControlResponse) throws -> [UInt8] {
        guard case .appStatus(let s) = response, FastString.isPlain(s.bundleIdentifier.rawValue),
              s.backgroundTasks.allSatisfy(FastString.isPlain), s.activities.allSatisfy(FastString.isPlain) else {
            return try genericEncode(response)
        }
        // {"appStatus":{"_0":{"activities":[..],"backgroundTasks":[..],"bundleIdentifier":"B",
        //  "footprint":F,"isFrontmost":b,"pid":P,"since":"T","state":"S"}}}
        func strings(_ list: [String], into payload: inout [UInt8]) {
            payload.append(UInt8(ascii: "["))
            for (i, item) in list.enumerated() {
                if i > 0 { payload.append(UInt8(ascii: ",")) }
                payload.append(UInt8(ascii: "\""))
                payload += item.utf8
                payload.append(UInt8(ascii: "\""))
            }
            payload.append(UInt8(ascii: "]"))
        }
        var payload = Array(#"{"appStatus":{"_0":{"activities":"#.utf8)
        strings(s.activities, into: &payload)
        payload += #","backgroundTasks":"#.utf8
        strings(s.backgroundTasks, into: &payload)
        payload += #","bundleIdentifier":""#.utf8
        payload += s.bundleIdentifier.rawValue.utf8
        payload.append(UInt8(ascii: "\""))
        payload += #","footprint":"#.utf8
        payload += (s.footprint.map { String($0) } ?? "null").utf8
        payload += #","isFrontmost":"#.utf8
        payload += (s.isFrontmost ? "true" : "false").utf8
        payload += #","pid":"#.utf8
        payload += (s.pid.map { String($0) } ?? "null").utf8
        payload += #","since":""#.utf8
        payload += Timestamp.format(s.since).utf8
        payload += #"","state":""#.utf8
        payload += s.state.rawValue.utf8
        payload += #""}}}"#.utf8
        // Over the bound (not for a bounded status): the generic way says so.
        guard payload.count <= maximumPayload else { return try genericEncode(response) }
        return framed(payload)
    }
}

enum FastString {
    /// True if the generic encoder writes `s` as its bytes between quotes: printable
    /// ASCII other than `"` and `\` (the wire encoder leaves `/` unescaped).
    static func isPlain(_ s: String) -> Bool {
        s.utf8.allSatisfy(isPlain)
    }

    /// A scale the generic encoder writes as a plain integer (1, 2, 3, ...).
    static func integralScale(_ scale: Double) -> Int? {
        scale >= 1 && scale < 1e15 ? Int(exactly: scale) : nil
    }

    static func isPlain(_ byte: UInt8) -> Bool {
        byte >= 0x20 && byte <= 0x7e && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
    }
}

/// Matches a payload against the exact bytes of the fast encodings; nil on any difference.
struct FastReader {
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

    /// A string of plain bytes (see ``FastString``) between quotes; nil on anything else.
    mutating func plainString() -> String? {
        guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else { return nil }
        let start = at + 1
        var end = start
        while end < bytes.count, bytes[end] != UInt8(ascii: "\"") {
            guard FastString.isPlain(bytes[end]) else { return nil }
            end += 1
        }
        guard end < bytes.count else { return nil }
        at = end + 1
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    /// An integer that fits `Int`.
    mutating func int() -> Int? {
        guard let n = integer() else { return nil }
        if n.negative { return n.magnitude <= UInt64(Int.max) + 1 ? Int(truncatingIfNeeded: 0 &- n.magnitude) : nil }
        return n.magnitude <= UInt64(Int.max) ? Int(n.magnitude) : nil
    }

    /// A list of plain strings, as ``Frame/encode(_:)-(ControlResponse)`` writes one.
    mutating func plainStrings() -> [String]? {
        guard literal("[") else { return nil }
        var out: [String] = []
        if literal("]") { return out }
        while true {
            guard let s = plainString() else { return nil }
            out.append(s)
            if literal("]") { return out }
            guard literal(",") else { return nil }
        }
    }

    /// One app of a `status` answer, in exactly the form the direct encoder writes.
    mutating func appStatus() -> ControlResponse? {
        guard literal(#"{"appStatus":{"_0":{"activities":"#), let activities = plainStrings(),
              literal(#","backgroundTasks":"#), let tasks = plainStrings(),
              literal(#","bundleIdentifier":"#), let rawID = plainString(), let id = BundleID(rawID),
              literal(#","footprint":"#) else { return nil }
        var footprint: UInt64?
        if !literal("null") {
            guard let n = integer(), !n.negative else { return nil }
            footprint = n.magnitude
        }
        let frontmost: Bool
        guard literal(#","isFrontmost":"#) else { return nil }
        if literal("true") { frontmost = true } else if literal("false") { frontmost = false } else { return nil }
        guard literal(#","pid":"#) else { return nil }
        var pid: Int32?
        if !literal("null") {
            guard let n = int(), let p = Int32(exactly: n) else { return nil }
            pid = p
        }
        guard literal(#","since":"#), let stamp = plainString(), let since = Timestamp.parse(stamp),
              literal(#","state":"#), let rawState = plainString(), let state = AppState(rawValue: rawState),
              literal("}}}"), at == bytes.count else { return nil }
        return .appStatus(AppStatus(bundleIdentifier: id, state: state, pid: pid, since: since, backgroundTasks: tasks,
                                    activities: activities, isFrontmost: frontmost, footprint: footprint))
    }

    mutating func startTask() -> AppMessage? {
        guard literal(#"{"request":{"id":"#), let id = integer(), !id.negative,
              literal(#","request":{"service":{"_0":{"urlSessionStartTask":{"headers":{},"kind":"#),
              let rawKind = plainString(), let kind = TransferKind(rawValue: rawKind),
              literal(#","method":"#), let method = plainString(), literal(#","session":"#), let session = plainString(),
              literal(#","url":"#), let url = plainString(), literal("}}}}}}"), at == bytes.count else { return nil }
        return .request(id: id.magnitude, request: .service(.urlSessionStartTask(
            session: SessionIdentifier(session), kind: kind, url: url, method: method, headers: [:], uploadFile: nil)))
    }

    mutating func transferCallback() -> HostMessage? {
        guard literal(#"{"callback":{"callback":{"service":{"_0":{""#) else { return nil }
        let event: ServiceEvent
        if literal(#"urlSessionDidFinishDownloading":{"location":"#) {
            guard let location = plainString(), literal(#","session":"#), let session = plainString(),
                  literal(#","taskIdentifier":"#), let task = int() else { return nil }
            event = .urlSessionDidFinishDownloading(session: SessionIdentifier(session), taskIdentifier: TransferTaskID(task), location: location)
        } else if literal(#"urlSessionDidComplete":{"session":"#) {
            guard let session = plainString(), literal(#","taskIdentifier":"#), let task = int() else { return nil }
            event = .urlSessionDidComplete(session: SessionIdentifier(session), taskIdentifier: TransferTaskID(task), errorCode: nil, errorReason: nil)
        } else if literal(#"timerFired":{"id":"#) {
            guard let id = int() else { return nil }
            event = .timerFired(id: HostTimerID(id))
        } else if literal(#"performFetch":{"id":"#) {
            guard let id = integer(), !id.negative else { return nil }
            event = .performFetch(id: id.magnitude)
        } else {
            return nil
        }
        guard literal(#"}}}},"seq":"#), let seq = integer(), !seq.negative, literal(#","state":"#),
              let rawState = plainString(), let state = AppState(rawValue: rawState),
              literal("}}"), at == bytes.count else { return nil }
        return .callback(seq: seq.magnitude, callback: .service(event), state: state)
    }

    mutating func fetchCompleted() -> AppMessage? {
        guard literal(#"{"request":{"id":"#), let id = integer(), !id.negative,
              literal(#","request":{"service":{"_0":{"fetchCompleted":{"id":"#), let fetch = integer(), !fetch.negative,
              literal(#","result":"#), let raw = plainString(), let result = FetchResult(rawValue: raw),
              literal("}}}}}}"), at == bytes.count else { return nil }
        return .request(id: id.magnitude, request: .service(.fetchCompleted(id: fetch.magnitude, result: result)))
    }

    mutating func backgroundTask() -> AppMessage? {
        if literal(#"{"endBackgroundTask":{"id":"#) {
            guard let id = int(), literal("}}"), at == bytes.count else { return nil }
            return .endBackgroundTask(id: BackgroundTaskID(id))
        }
        guard literal(#"{"beginBackgroundTask":{"id":"#), let id = int() else { return nil }
        var name: String?
        if literal(#","name":"#) {
            guard let plain = plainString() else { return nil }
            name = plain
        }
        guard literal("}}"), at == bytes.count else { return nil }
        return .beginBackgroundTask(id: BackgroundTaskID(id), name: name)
    }

    mutating func okReply() -> HostMessage? {
        guard literal(#"{"reply":{"id":"#), let id = integer(), !id.negative,
              literal(#","reply":{"service":{"_0":{"ok":{}}}}}}"#), at == bytes.count else { return nil }
        return .reply(id: id.magnitude, reply: .service(.ok))
    }

    mutating func hello() -> AppMessage? {
        guard literal(#"{"hello":{"pid":"#), let pid = int(), let pid32 = Int32(exactly: pid),
              literal(#","version":"#), let version = int(), literal("}}"), at == bytes.count else { return nil }
        return .hello(version: version, pid: pid32)
    }

    mutating func welcome() -> HostMessage? {
        guard literal(#"{"welcome":{"bundleIdentifier":"#), let id = plainString() else { return nil }
        var screen: ScreenSize?
        if literal(#","screen":{"height":"#) {
            guard let height = int(), literal(#","scale":"#), let scale = int(), literal(#","width":"#),
                  let width = int(), literal("}") else { return nil }
            screen = ScreenSize(width: width, height: height, scale: Double(scale))
        }
        guard literal(#","version":"#), let version = int(), literal("}}"), at == bytes.count else { return nil }
        return .welcome(version: version, bundleIdentifier: id, screen: screen)
    }

    mutating func launch() -> HostMessage? {
        guard literal(#"{"callback":{"callback":{"didFinishLaunching":{"options":{"arguments":["#) else { return nil }
        var arguments: [String] = []
        if !literal("]") {
            while true {
                guard let argument = plainString() else { return nil }
                arguments.append(argument)
                if literal("]") { break }
                guard literal(",") else { return nil }
            }
        }
        guard literal(#","reason":"#), let rawReason = plainString(), let reason = LaunchReason(rawValue: rawReason),
              literal(#"}}},"seq":"#), let seq = integer(), !seq.negative, literal(#","state":"#),
              let rawState = plainString(), let state = AppState(rawValue: rawState),
              literal("}}"), at == bytes.count else { return nil }
        return .callback(seq: seq.magnitude, callback: .didFinishLaunching(options: LaunchOptions(reason: reason, arguments: arguments)), state: state)
    }

    mutating func callbackReturned() -> UInt64? {
        guard literal(#"{"callbackReturned":{"seq":"#), let n = integer(), !n.negative, literal("}}"), at == bytes.count else { return nil }
        return n.magnitude
    }

    mutating func taskCreated() -> HostMessage? {
        guard literal(#"{"reply":{"id":"#), let id = integer(), !id.negative,
              literal(#","reply":{"service":{"_0":{"transferTaskCreated":{"taskIdentifier":"#), let task = int(),
              literal("}}}}}}"), at == bytes.count else { return nil }
        return .reply(id: id.magnitude, reply: .service(.transferTaskCreated(taskIdentifier: TransferTaskID(task))))
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
            guard literal(#"backgroundTaskExpiration":{"taskID":"#), let id = int(), literal(#"}},"seq":"#) else { return nil }
            callback = .backgroundTaskExpiration(taskID: BackgroundTaskID(id))
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
