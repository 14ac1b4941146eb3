// Messages with every case that matters, for the seeds of the frame and mode-hub
// targets (written by the harnesses with APPHOST_FUZZ_MAKE_SEEDS).
@testable import AppHostProtocol
import Foundation

/// One message per case that matters, with the nested types filled in.
enum SeedMessages {
    /// A bundle identifier written in a harness (a BundleID has no literal form): a
    /// malformed one is a bug of the harness, not an input, so it stops the run.
    static func id(_ literal: String) -> BundleID {
        guard let id = BundleID(literal) else { preconditionFailure("the harness's literal \"\(literal)\" is not a bundle identifier") }
        return id
    }

    static let date = Date(timeIntervalSince1970: 1_763_000_000.123)
    static let fix = LocationFix(latitude: 59.3293, longitude: 18.0686, altitude: 12.5, timestamp: date)
    static let peripheral = BLEPeripheral(id: "hr", name: "Heart Rate", services: ["180D"], rssi: -52)
    static let accessory = Accessory(id: 1, name: "Printer", protocols: ["com.acme.printer"])
    static let resume = TransferResume(partialFile: "/c/tmp/part", bytes: 1024, etag: "\"abc\"", lastModified: nil)
    static let job = TransferJob(id: 7, bundleIdentifier: id("com.example.probe"), session: "s", taskIdentifier: 1,
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
        .timerSchedule(id: 1, interval: 0.5, repeats: true), .timerSchedule(id: 2, interval: .nan, repeats: false),
    ]

    static let app: [AppMessage] = [
        .hello(version: 1, pid: 4242), .callbackReturned(seq: 9), .beginBackgroundTask(id: 1, name: "upload"),
        .beginBackgroundTask(id: 2, name: nil), .endBackgroundTask(id: 1), .request(id: 1, request: .backgroundTimeRemaining),
        .viewTree(ViewTree(backgroundColor: .white, views: [view])), .ignoreSnapshotOnNextApplicationLaunch,
        .invalidateTimer(id: 1),
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
        .timerFired(id: 1),
    ]

    static let host: [HostMessage] = [
        .welcome(version: 1, bundleIdentifier: "com.example.probe"),
        .callback(seq: 1, callback: .didFinishLaunching(options: LaunchOptions(reason: .voipPush, arguments: ["--on", "x"])), state: .background),
        .callback(seq: 2, callback: .backgroundTaskExpiration(taskID: 1), state: .background),
        .reply(id: 1, reply: .backgroundTimeRemaining(seconds: .greatestFiniteMagnitude)),
        .reply(id: 2, reply: .backgroundTimeRemaining(seconds: .infinity)),
        .rejected(reason: "version 2 not supported"),
        .callback(seq: 3, callback: .didBecomeActive, state: .active),
        .reply(id: 3, reply: .failed(reason: "no")),
        .reply(id: 4, reply: .service(.accessories([accessory]))),
        .reply(id: 5, reply: .service(.bgRequests([BGTaskRequestInfo(kind: .refresh, identifier: "r")]))),
        .reply(id: 6, reply: .service(.transferTasks([TransferTaskSnapshot(taskIdentifier: 1, kind: .download, url: "https://e/a",
                                                                             state: .running, bytesDone: 1, bytesExpected: 2)]))),
        .reply(id: 7, reply: .service(.refused(reason: "no mode"))),
        .reply(id: 8, reply: .service(.failed(code: "x", reason: "y"))),
    ] + events.enumerated().map { .callback(seq: UInt64($0.offset + 10), callback: .service($0.element), state: .background) }

    /// The requests that name an app, `a.b`.
    static let appRequests: [ControlRequest] = [
        .uninstall(bundleIdentifier: id("a.b")), .launch(bundleIdentifier: id("a.b"), background: true, arguments: ["--x"], terminateRunning: true),
        .foreground(bundleIdentifier: id("a.b")), .background(bundleIdentifier: id("a.b")), .terminate(bundleIdentifier: id("a.b")),
        .events(follow: true, bundleIdentifier: id("a.b")),
    ]

    static let control: [ControlRequest] = appRequests + [
        .ping(version: 1), .install(path: "manifests/Probe.app", settings: ["A": "b"]),
        .list,
        .status(bundleIdentifier: nil), .reports(bundleIdentifier: nil),
        .shutdown, .clockAdvance(seconds: 31), .clockNow, .profile,
        .mode(.privacy(action: .grant, service: .service(.locationAlways), bundleIdentifier: id("a.b"))), .mode(.locationSet(fix)),
        .mode(.locationRoute(name: "commute", fixes: [fix, fix], interval: 1)), .mode(.voipPush(bundleIdentifier: id("a.b"), payload: "{}")),
        .mode(.bleLoad([peripheral])), .mode(.bleNotify(peripheral: "hr", characteristic: "2A37", value: Data([0x48]))),
        .mode(.accessoryConnect(name: "Printer", protocols: ["com.acme.printer"])), .mode(.accessorySend(protocolString: "p", bytes: Data([0]))),
        .mode(.settingsBackgroundRefresh(bundleIdentifier: nil, on: false)), .mode(.deviceNetwork(.cellular)),
        .mode(.bgTaskRun(bundleIdentifier: id("a.b"), identifier: "r")),
        .mode(.push(PushRequest(bundleIdentifier: id("a.b"), payload: #"{"aps":{"alert":"hi"}}"#, pushType: "alert", priority: 10,
                                collapseID: "c", apnsID: "6F1D0F4E-0000-4000-8000-000000000001", expiration: 0, source: "gateway"))),
    ]

    static let transferRequests: [TransferRequest] = [
        .enqueue(job), .cancel(id: 7), .cancelProducingResumeData(id: 7), .cancelApp(bundleIdentifier: id("a.b")),
        .conditions(pluggedIn: true, network: .wifi), .list, .acknowledge(id: 7),
    ]

    static let transferEvents: [TransferEvent] = [
        .ready(pid: 1, unfinished: 2), .accepted(id: 7), .progress(id: 7, bytesDone: 5, bytesExpected: 10),
        .waiting(id: 7, reason: "no network"), .finished(id: 7, outcome: .completed(status: 200, bytes: 10)),
        .finished(id: 8, outcome: .cancelledResumable(resume)), .finished(id: 9, outcome: .failed(code: "x", reason: "y")),
        .transfers([TransferStatus(job: job, state: .waiting, bytesDone: 0, bytesExpected: nil, outcome: .cancelled)]),
        .error("bad"),
    ]
}

// The ids of the messages above are written as the numbers and strings they are on the
// wire: their literal forms come from Tests/TestNumericIDLiterals (scripts/fuzz.sh
// compiles that file in).
