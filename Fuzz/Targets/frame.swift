// libFuzzer target `frame`: the IPC and control-socket wire. Each input is used twice:
// 1. as one frame's payload, decoded as every message type that crosses a socket
//    (AppMessage: app → host, the untrusted direction; HostMessage; ControlRequest and
//    ControlResponse; TransferRequest and TransferEvent);
// 2. as a byte stream split by `FrameDecoder`, fed whole, byte by byte and in chunks
//    of 7, which must give the same frames and the same error; each frame is decoded
//    as in 1.
// A message that decodes must encode, and decode and encode again to the same bytes.
// Seeds are written by the harness itself (`APPHOST_FUZZ_MAKE_SEEDS=DIR harness`):
// one payload per message case below, and streams of several frames.
@testable import AppHostProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ bytes: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = Array(UnsafeBufferPointer(start: bytes, count: size))
    decodeEveryType(input)

    let whole = split(input, chunk: max(input.count, 1))
    let single = split(input, chunk: 1)
    let chunked = split(input, chunk: 7)
    invariant(whole == single && whole == chunked, "chunking changed the frames: \(whole) / \(single) / \(chunked)")
    if whole.error == nil {
        let framed = whole.payloads.reduce(0) { $0 + Frame.headerSize + $1.count }
        invariant(framed + whole.buffered == input.count, "\(framed) framed + \(whole.buffered) buffered != \(input.count)")
    }
    for payload in whole.payloads { decodeEveryType(payload) }

    // A small maximum: every frame returned is within it.
    let small = split(input, chunk: 5, maximum: 64)
    invariant(small.payloads.allSatisfy { $0.count <= 64 }, "a payload over the maximum was returned")
    return 0
}

/// What a decoder made of a stream: its frames, the error that stopped it, the bytes left
/// (0 after an error).
struct Split: Equatable, CustomStringConvertible {
    var payloads: [[UInt8]] = []
    var error: FrameError?
    var buffered = 0
    var description: String { "\(payloads.count) frames, error \(error.map { "\($0)" } ?? "none"), \(buffered) buffered" }
}

func split(_ stream: [UInt8], chunk: Int, maximum: Int = Frame.maximumPayload) -> Split {
    var decoder = FrameDecoder(maximumPayload: maximum)
    var result = Split()
    var offset = 0
    outer: while offset < stream.count {
        let end = min(offset + chunk, stream.count)
        decoder.append(stream[offset..<end])
        offset = end
        do {
            while let payload = try decoder.next() { result.payloads.append(payload) }
        } catch {
            result.error = error
            break outer
        }
    }
    // After an error the connection is dropped: what is left in the buffer then depends
    // on how the bytes arrived and means nothing.
    guard result.error == nil else { return result }
    result.buffered = decoder.bufferedCount
    do {
        try decoder.finish()
        invariant(result.buffered == 0, "finish passed with \(result.buffered) bytes buffered")
    } catch {
        invariant(result.buffered > 0, "finish threw with nothing buffered")
    }
    return result
}

func decodeEveryType(_ payload: [UInt8]) {
    roundTrip(AppMessage.self, payload)
    roundTrip(HostMessage.self, payload)
    roundTrip(ControlRequest.self, payload)
    roundTrip(ControlResponse.self, payload)
    roundTrip(TransferRequest.self, payload)
    roundTrip(TransferEvent.self, payload)
}

/// Decodes `payload` as `type`; if it is one, it must encode, and encode the same after
/// another decode (what the host logs or forwards is what it understood).
func roundTrip<M: Codable>(_ type: M.Type, _ payload: [UInt8]) {
    guard let message = try? Frame.decode(type, from: payload) else { return }
    let first: [UInt8]
    do { first = try Frame.encode(message) } catch {
        invariant(false, "\(type) decoded but does not encode: \(error)")
        return
    }
    let again: M
    do { again = try Frame.decode(type, from: Array(first.dropFirst(Frame.headerSize))) } catch {
        invariant(false, "\(type) does not decode its own encoding: \(error)\n\(String(decoding: first.dropFirst(4), as: UTF8.self))")
        return
    }
    let second = try? Frame.encode(again)
    invariant(second == first, "\(type) encodes differently after a round trip:\n\(String(decoding: first.dropFirst(4), as: UTF8.self))\n\(String(decoding: (second ?? []).dropFirst(4), as: UTF8.self))")
}

// MARK: - Seeds

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<Int32>,
                           _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> Int32 {
    guard let request = seedRequest() else { return 0 }
    var count = 0
    func payload<M: Encodable>(_ name: String, _ messages: [M]) {
        for (i, m) in messages.enumerated() {
            guard let frame = try? Frame.encode(m) else { continue }
            writeSeed(Data(frame.dropFirst(Frame.headerSize)), named: "\(name)-\(i).json", in: request.directory)
            count += 1
        }
    }
    func stream<M: Encodable>(_ name: String, _ messages: [M]) {
        let bytes = messages.compactMap { try? Frame.encode($0) }.joined()
        writeSeed(Data(bytes), named: "\(name).stream", in: request.directory)
        count += 1
    }
    let app = SeedMessages.app, host = SeedMessages.host, control = SeedMessages.control
    payload("app", app)
    payload("host", host)
    payload("control", control)
    payload("transfer-request", SeedMessages.transferRequests)
    payload("transfer-event", SeedMessages.transferEvents)
    stream("app-session", Array(app.prefix(8)))
    stream("host-session", Array(host.prefix(6)))
    stream("control-session", Array(control.prefix(4)))
    print("frame: \(count) seeds written")
    exit(0)
}

/// One message per case that matters, with the nested types filled in.
enum SeedMessages {
    static let date = Date(timeIntervalSince1970: 1_763_000_000.123)
    static let fix = LocationFix(latitude: 59.3293, longitude: 18.0686, altitude: 12.5, timestamp: date)
    static let peripheral = BLEPeripheral(id: "hr", name: "Heart Rate", services: ["180D"], rssi: -52)
    static let accessory = Accessory(id: 1, name: "Printer", protocols: ["com.acme.printer"])
    static let resume = TransferResume(partialFile: "/c/tmp/part", bytes: 1024, etag: "\"abc\"", lastModified: nil)
    static let job = TransferJob(id: 7, bundleIdentifier: "com.example.probe", session: "s", taskIdentifier: 1,
                                 kind: .download, url: "https://example.com/a", headers: ["Accept": "*/*"],
                                 destination: "/c/Library/a", created: 1_763_000_000, resume: resume)
    static let view = ViewNode(content: .label(text: "Balance", fontSize: 17, color: .black),
                               frame: Rect(x: 0, y: 0, width: 390, height: 44), backgroundColor: .white,
                               isPrivacySensitive: true, subviews: [
                                   ViewNode(content: .secureTextField(text: "1234", fontSize: 17, color: .black),
                                            frame: Rect(x: 8, y: 8, width: 100, height: 30)),
                                   ViewNode(content: .textField(text: "", placeholder: "Name", fontSize: 12, color: RGBA(1, 2, 3, 4)),
                                            frame: Rect(x: 8, y: 40, width: 100, height: 30), isHidden: true),
                                   ViewNode(content: .image(name: "logo.png"), frame: Rect(x: 0, y: 0, width: 1, height: 1)),
                               ])

    static let requests: [ServiceRequest] = [
        .audioActivate(category: "playback"), .audioPlay(samples: Data([0, 1, 2, 255]), sampleRate: 44100), .audioStop,
        .locationRequestAuthorization(always: true), .locationStart, .locationStop, .locationAllowsBackgroundUpdates(true),
        .voipRegister, .voipReportIncomingCall(uuid: "6F1D0F4E-0000-4000-8000-000000000001", handle: "+46700000000"),
        .voipEndCall(uuid: "6F1D0F4E-0000-4000-8000-000000000001"),
        .bleScan(services: ["180D"]), .bleScan(services: nil), .bleStopScan, .bleConnect(peripheral: "hr"),
        .bleDisconnect(peripheral: "hr"), .bleStartAdvertising(services: ["180F"], localName: "Probe"), .bleStopAdvertising,
        .accessoryList, .registerForRemoteNotifications, .remoteNotificationCompleted(id: 3, result: .newData),
        .fetchSetMinimumInterval(.minimum), .fetchSetMinimumInterval(.seconds(900.5)), .fetchSetMinimumInterval(.never),
        .fetchCompleted(id: 4, result: .failed), .backgroundRefreshStatus, .bgRegister(identifier: "com.example.refresh"),
        .bgSubmit(BGTaskRequestInfo(kind: .processing, identifier: "com.example.db", earliestBegin: 60,
                                    requiresExternalPower: true, requiresNetworkConnectivity: true)),
        .bgCancel(identifier: nil), .bgPending, .bgTaskCompleted(identifier: "com.example.db", success: false),
        .urlSessionCreate(BackgroundSessionConfig(identifier: "s", isDiscretionary: true)),
        .urlSessionStartTask(session: "s", kind: .upload, url: "http://127.0.0.1:8080/u", method: "PUT",
                             headers: ["X-A": "b"], uploadFile: "/c/Documents/f"),
        .urlSessionCancel(session: "s", taskIdentifier: 2, produceResumeData: true),
        .urlSessionResumeTask(session: "s", resumeData: Data("resume".utf8)), .urlSessionTasks(session: "s"),
        .urlSessionEventsCompleted(session: "s"),
    ]

    static let app: [AppMessage] = [
        .hello(version: 1, pid: 4242), .callbackReturned(seq: 9), .beginBackgroundTask(id: 1, name: "upload"),
        .beginBackgroundTask(id: 2, name: nil), .endBackgroundTask(id: 1), .request(id: 1, request: .backgroundTimeRemaining),
        .viewTree(ViewTree(backgroundColor: .white, views: [view])), .ignoreSnapshotOnNextApplicationLaunch,
    ] + requests.enumerated().map { .request(id: UInt64($0.offset + 2), request: .service($0.element)) }

    static let events: [ServiceEvent] = [
        .audioInterruption(began: true, reason: "another app"), .locationUpdate([fix]), .locationAuthorizationChanged(.always),
        .voipPush(payload: #"{"aps":{}}"#), .bleDiscovered(peripheral), .bleConnected(peripheral: "hr"),
        .bleDisconnected(peripheral: "hr"), .bleNotification(peripheral: "hr", characteristic: "2A37", value: Data([0x48])),
        .accessoryConnected(accessory), .accessoryDisconnected(accessory),
        .accessoryData(accessory: accessory, protocolString: "com.acme.printer", bytes: Data("hi".utf8)),
        .performFetch(id: 5), .remoteNotification(id: 6, userInfo: #"{"aps":{"content-available":1}}"#, silent: true),
        .bgTaskLaunch(identifier: "com.example.db", kind: .processing), .bgTaskExpire(identifier: "com.example.db"),
        .urlSessionHandleEvents(session: "s"), .urlSessionProgress(session: "s", taskIdentifier: 1, bytesDone: 10, bytesExpected: nil),
        .urlSessionDidFinishDownloading(session: "s", taskIdentifier: 1, location: "/c/tmp/x"),
        .urlSessionDidComplete(session: "s", taskIdentifier: 1, errorCode: "timedOut", errorReason: "no answer"),
        .urlSessionDidFinishEvents(session: "s"), .urlSessionResumeData(session: "s", taskIdentifier: 1, data: Data([1])),
    ]

    static let host: [HostMessage] = [
        .welcome(version: 1, bundleIdentifier: "com.example.probe"),
        .callback(seq: 1, callback: .didFinishLaunching(options: LaunchOptions(reason: .voipPush, arguments: ["--on", "x"])), state: .background),
        .callback(seq: 2, callback: .backgroundTaskExpiration(taskID: 1), state: .background),
        .reply(id: 1, reply: .backgroundTimeRemaining(seconds: .greatestFiniteMagnitude)),
        .reply(id: 2, reply: .backgroundTimeRemaining(seconds: .infinity)),
        .rejected(reason: "version 2 not supported"),
        .callback(seq: 3, callback: .heartbeat, state: .active),
        .reply(id: 3, reply: .failed(reason: "no")),
        .reply(id: 4, reply: .service(.accessories([accessory]))),
        .reply(id: 5, reply: .service(.bgRequests([BGTaskRequestInfo(kind: .refresh, identifier: "r")]))),
        .reply(id: 6, reply: .service(.transferTasks([TransferTaskSnapshot(taskIdentifier: 1, kind: .download, url: "https://e/a",
                                                                             state: "running", bytesDone: 1, bytesExpected: 2)]))),
        .reply(id: 7, reply: .service(.refused(reason: "no mode"))),
        .reply(id: 8, reply: .service(.failed(code: "x", reason: "y"))),
    ] + events.enumerated().map { .callback(seq: UInt64($0.offset + 10), callback: .service($0.element), state: .background) }

    static let control: [ControlRequest] = [
        .ping(version: 1), .install(path: "manifests/Probe.app", settings: ["A": "b"]), .uninstall(bundleIdentifier: "a.b"),
        .list, .launch(bundleIdentifier: "a.b", background: true, arguments: ["--x"], terminateRunning: true),
        .foreground(bundleIdentifier: "a.b"), .background(bundleIdentifier: "a.b"), .terminate(bundleIdentifier: "a.b"),
        .status(bundleIdentifier: nil), .events(follow: true, bundleIdentifier: "a.b"), .reports(bundleIdentifier: nil),
        .shutdown, .clockAdvance(seconds: 31), .clockNow, .profile,
        .mode(.privacy(action: .grant, service: "location-always", bundleIdentifier: "a.b")), .mode(.locationSet(fix)),
        .mode(.locationRoute(name: "commute", fixes: [fix, fix], interval: 1)), .mode(.voipPush(bundleIdentifier: "a.b", payload: "{}")),
        .mode(.bleLoad([peripheral])), .mode(.bleNotify(peripheral: "hr", characteristic: "2A37", value: Data([0x48]))),
        .mode(.accessoryConnect(name: "Printer", protocols: ["com.acme.printer"])), .mode(.accessorySend(protocolString: "p", bytes: Data([0]))),
        .mode(.settingsBackgroundRefresh(bundleIdentifier: nil, on: false)), .mode(.deviceNetwork(.cellular)),
        .mode(.bgTaskRun(bundleIdentifier: "a.b", identifier: "r")),
        .mode(.push(PushRequest(bundleIdentifier: "a.b", payload: #"{"aps":{"alert":"hi"}}"#, pushType: "alert", priority: 10,
                                collapseID: "c", apnsID: "6F1D0F4E-0000-4000-8000-000000000001", expiration: 0, source: "gateway"))),
    ]

    static let transferRequests: [TransferRequest] = [
        .enqueue(job), .cancel(id: 7), .cancelProducingResumeData(id: 7), .cancelApp(bundleIdentifier: "a.b"),
        .conditions(pluggedIn: true, network: .wifi), .list, .acknowledge(id: 7),
    ]

    static let transferEvents: [TransferEvent] = [
        .ready(pid: 1, unfinished: 2), .accepted(id: 7), .progress(id: 7, bytesDone: 5, bytesExpected: 10),
        .waiting(id: 7, reason: "no network"), .finished(id: 7, outcome: .completed(status: 200, bytes: 10)),
        .finished(id: 8, outcome: .cancelledResumable(resume)), .finished(id: 9, outcome: .failed(code: "x", reason: "y")),
        .transfers([TransferStatus(job: job, state: "waiting", bytesDone: 0, bytesExpected: nil, outcome: .cancelled)]),
        .error("bad"),
    ]
}
