import Foundation
import Testing
@testable import AppHostProtocol

/// The direct frame encodings must be the generic coder's bytes, and the direct readers
/// must read only what the generic decoder reads the same way.
struct FrameFastPathTests {
    static let callbacks: [LifecycleCallback] = [
        .willResignActive, .didEnterBackground, .willEnterForeground, .didBecomeActive, .willTerminate,
        .backgroundTaskExpiration(taskID: 0), .backgroundTaskExpiration(taskID: 7),
        .backgroundTaskExpiration(taskID: -3), .backgroundTaskExpiration(taskID: BackgroundTaskID(.max)), .backgroundTaskExpiration(taskID: BackgroundTaskID(.min)),
    ]

    @Test func callbacksAreTheGenericBytesAndReadBack() throws {
        for callback in Self.callbacks {
            for state in AppState.allCases {
                for seq: UInt64 in [0, 1, 9, 10, 12345, .max] {
                    let message = HostMessage.callback(seq: seq, callback: callback, state: state)
                    let direct = try Frame.encode(message)
                    let generic = try Frame.genericEncode(message)
                    #expect(String(decoding: direct, as: UTF8.self) == String(decoding: generic, as: UTF8.self))
                    let payload = Array(direct.dropFirst(Frame.headerSize))
                    #expect(try Frame.decode(HostMessage.self, from: payload) == message)
                    #expect(try Frame.genericDecode(HostMessage.self, from: payload) == message)
                }
            }
        }
    }

    @Test func callbackReturnedIsTheGenericBytesAndReadsBack() throws {
        for seq: UInt64 in [0, 1, 10, 99_999, .max] {
            let message = AppMessage.callbackReturned(seq: seq)
            let direct = try Frame.encode(message)
            #expect(direct == (try Frame.genericEncode(message)))
            #expect(try Frame.decode(AppMessage.self, from: Array(direct.dropFirst(Frame.headerSize))) == message)
        }
    }

    @Test func taskCreatedRepliesAreTheGenericBytesAndReadBack() throws {
        for id: UInt64 in [0, 1, 77, .max] {
            for task in [0, 1, 10_000, -5, Int.max, Int.min] {
                let message = HostMessage.reply(id: id, reply: .service(.transferTaskCreated(taskIdentifier: TransferTaskID(task))))
                let direct = try Frame.encode(message)
                #expect(String(decoding: direct, as: UTF8.self) == String(decoding: try Frame.genericEncode(message), as: UTF8.self))
                #expect(try Frame.decode(HostMessage.self, from: Array(direct.dropFirst(Frame.headerSize))) == message)
            }
        }
        let other = HostMessage.reply(id: 3, reply: .service(.ok))
        #expect(try Frame.encode(other) == (try Frame.genericEncode(other)))
    }

    @Test func launchFramesAreTheGenericBytesAndReadBack() throws {
        for pid: Int32 in [1, 42, .max, -1, .min] {
            for version in [0, 2, 3, Int.max] {
                let hello = AppMessage.hello(version: version, pid: pid)
                let direct = try Frame.encode(hello)
                #expect(direct == (try Frame.genericEncode(hello)))
                #expect(try Frame.decode(AppMessage.self, from: Array(direct.dropFirst(4))) == hello)
            }
        }
        let screens: [ScreenSize?] = [nil, .default, ScreenSize(width: 750, height: 1334, scale: 2), ScreenSize(width: 1, height: 1, scale: 1)]
        for id in ["com.example.app", "a", "x-y_z.1", "com.a/b", "~!@#$%^&*()"] {
            for screen in screens {
                let welcome = HostMessage.welcome(version: 2, bundleIdentifier: id, screen: screen)
                let direct = try Frame.encode(welcome)
                #expect(String(decoding: direct, as: UTF8.self) == String(decoding: try Frame.genericEncode(welcome), as: UTF8.self))
                #expect(try Frame.decode(HostMessage.self, from: Array(direct.dropFirst(4))) == welcome)
            }
        }
        let argumentLists: [[String]] = [[], ["x"], ["--on", "background", "begin-task:upload"], ["", " ", "a/b"]]
        for reason in [LaunchReason.user, .background, .voipPush, .urlSessionEvents] {
            for arguments in argumentLists {
                for state in [AppState.inactive, .background] {
                    let launch = HostMessage.callback(seq: 1, callback: .didFinishLaunching(options: LaunchOptions(reason: reason, arguments: arguments)), state: state)
                    let direct = try Frame.encode(launch)
                    #expect(String(decoding: direct, as: UTF8.self) == String(decoding: try Frame.genericEncode(launch), as: UTF8.self))
                    #expect(try Frame.decode(HostMessage.self, from: Array(direct.dropFirst(4))) == launch)
                }
            }
        }
    }

    /// Strings that need escaping, and scales that are not plain integers, take the
    /// generic coder both ways.
    @Test func launchFramesThatNeedEscapingGoTheGenericWay() throws {
        let messages: [HostMessage] = [
            .welcome(version: 2, bundleIdentifier: "quote\"d", screen: nil),
            .welcome(version: 2, bundleIdentifier: "back\\slash", screen: nil),
            .welcome(version: 2, bundleIdentifier: "tab\there", screen: nil),
            .welcome(version: 2, bundleIdentifier: "é", screen: nil),
            .welcome(version: 2, bundleIdentifier: "com.a", screen: ScreenSize(width: 10, height: 20, scale: 2.5)),
            .welcome(version: 2, bundleIdentifier: "com.a", screen: ScreenSize(width: 10, height: 20, scale: 0)),
            .welcome(version: 2, bundleIdentifier: "com.a", screen: ScreenSize(width: 10, height: 20, scale: 1e20)),
            .callback(seq: 1, callback: .didFinishLaunching(options: LaunchOptions(reason: .user, arguments: ["new\nline"])), state: .inactive),
            .callback(seq: 1, callback: .didFinishLaunching(options: LaunchOptions(reason: .user, arguments: ["ok", "ünï"])), state: .inactive),
        ]
        for message in messages {
            let direct = try Frame.encode(message)
            #expect(direct == (try Frame.genericEncode(message)))
            #expect(try Frame.decode(HostMessage.self, from: Array(direct.dropFirst(4))) == message)
        }
    }

    @Test func transferFramesAreTheGenericBytesAndReadBack() throws {
        for state in [AppState.active, .background] {
            for seq: UInt64 in [1, 77, .max] {
                for task in [0, 1, 10_000, -2, Int.max] {
                    let events: [ServiceEvent] = [
                        .urlSessionDidFinishDownloading(session: "s", taskIdentifier: TransferTaskID(task), location: "/var/c/com.a/tmp/CFNetworkDownload_1.tmp"),
                        .urlSessionDidComplete(session: "com.example.bg", taskIdentifier: TransferTaskID(task), errorCode: nil, errorReason: nil),
                    ]
                    for event in events {
                        let message = HostMessage.callback(seq: seq, callback: .service(event), state: state)
                        let direct = try Frame.encode(message)
                        #expect(String(decoding: direct, as: UTF8.self) == String(decoding: try Frame.genericEncode(message), as: UTF8.self))
                        #expect(try Frame.decode(HostMessage.self, from: Array(direct.dropFirst(4))) == message)
                    }
                }
            }
        }
        for id: UInt64 in [0, 5, .max] {
            for kind in [TransferKind.download, .upload] {
                let message = AppMessage.request(id: id, request: .service(.urlSessionStartTask(
                    session: "s", kind: kind, url: "http://127.0.0.1:8080/f/1?a=b&c=d", method: "GET", headers: [:], uploadFile: nil)))
                let direct = try Frame.encode(message)
                #expect(String(decoding: direct, as: UTF8.self) == String(decoding: try Frame.genericEncode(message), as: UTF8.self))
                #expect(try Frame.decode(AppMessage.self, from: Array(direct.dropFirst(4))) == message)
            }
        }
    }

    /// A background fetch's three frames: `performFetch`, its `fetchCompleted` request and
    /// the `ok` reply (every fetch of every app, most of `apphost-bench fetch-week`).
    @Test func fetchFramesAreTheGenericBytesAndReadBack() throws {
        for seq: UInt64 in [0, 1, 77, .max] {
            for id: UInt64 in [0, 1, 10, 12345, .max] {
                for state in AppState.allCases {
                    let message = HostMessage.callback(seq: seq, callback: .service(.performFetch(id: id)), state: state)
                    let direct = try Frame.encode(message)
                    #expect(String(decoding: direct, as: UTF8.self) == String(decoding: try Frame.genericEncode(message), as: UTF8.self))
                    #expect(try Frame.decode(HostMessage.self, from: Array(direct.dropFirst(4))) == message)
                }
                for result in FetchResult.allCases {
                    let message = AppMessage.request(id: seq, request: .service(.fetchCompleted(id: id, result: result)))
                    let direct = try Frame.encode(message)
                    #expect(String(decoding: direct, as: UTF8.self) == String(decoding: try Frame.genericEncode(message), as: UTF8.self))
                    #expect(try Frame.decode(AppMessage.self, from: Array(direct.dropFirst(4))) == message)
                }
            }
            let ok = HostMessage.reply(id: seq, reply: .service(.ok))
            let direct = try Frame.encode(ok)
            #expect(String(decoding: direct, as: UTF8.self) == String(decoding: try Frame.genericEncode(ok), as: UTF8.self))
            #expect(try Frame.decode(HostMessage.self, from: Array(direct.dropFirst(4))) == ok)
        }
        let app = [
            #"{"request":{"id":1,"request":{"service":{"_0":{"fetchCompleted":{"id":1,"result":"someData"}}}}}}"#,
            #"{"request":{"id":1,"request":{"service":{"_0":{"fetchCompleted":{"id":-1,"result":"newData"}}}}}}"#,
            #"{"request":{"id":1,"request":{"service":{"_0":{"fetchCompleted":{"id":18446744073709551616,"result":"newData"}}}}}}"#,
            #"{"request":{"id":1,"request":{"service":{"_0":{"fetchCompleted":{"result":"newData","id":1}}}}}}"#,
            #"{"request":{"id":1,"request":{"service":{"_0":{"fetchCompleted":{"id":1,"result":"newData"}}}}}"#,
            #"{"request":{"id":1,"request":{"service":{"_0":{"fetchCompleted":{"id":1,"result":"newData","x":0}}}}}}"#,
            #"{"request":{"id":01,"request":{"service":{"_0":{"fetchCompleted":{"id":1,"result":"newData"}}}}}}"#,
        ]
        for text in app {
            let bytes = Array(text.utf8)
            #expect(Result { try Frame.decode(AppMessage.self, from: bytes) }.success == Result { try Frame.genericDecode(AppMessage.self, from: bytes) }.success, "\(text)")
        }
        let host = [
            #"{"reply":{"id":1,"reply":{"service":{"_0":{"ok":{"x":1}}}}}}"#,
            #"{"reply":{"id":-1,"reply":{"service":{"_0":{"ok":{}}}}}}"#,
            #"{"reply":{"id":1,"reply":{"service":{"_0":{"ok":{}}}}}} "#,
            #"{"callback":{"callback":{"service":{"_0":{"performFetch":{"id":-1}}}},"seq":1,"state":"background"}}"#,
            #"{"callback":{"callback":{"service":{"_0":{"performFetch":{"id":1}}}},"seq":1,"state":"asleep"}}"#,
            #"{"callback":{"callback":{"service":{"_0":{"performFetch":{}}}},"seq":1,"state":"background"}}"#,
        ]
        for text in host {
            let bytes = Array(text.utf8)
            #expect(Result { try Frame.decode(HostMessage.self, from: bytes) }.success == Result { try Frame.genericDecode(HostMessage.self, from: bytes) }.success, "\(text)")
        }
    }

    /// Headers, an upload file, an error, or a string that needs escaping: the generic coder.
    @Test func transferFramesOutsideTheCommonShapeGoTheGenericWay() throws {
        let host: [HostMessage] = [
            .callback(seq: 1, callback: .service(.urlSessionDidComplete(session: "s", taskIdentifier: 1, errorCode: "cancelled", errorReason: nil)), state: .active),
            .callback(seq: 1, callback: .service(.urlSessionDidComplete(session: "s", taskIdentifier: 1, errorCode: nil, errorReason: "x")), state: .active),
            .callback(seq: 1, callback: .service(.urlSessionDidFinishDownloading(session: "s\"q", taskIdentifier: 1, location: "/a")), state: .active),
            .callback(seq: 1, callback: .service(.urlSessionDidFinishDownloading(session: "s", taskIdentifier: 1, location: "/ü")), state: .active),
            .callback(seq: 1, callback: .service(.urlSessionHandleEvents(session: "s")), state: .background),
        ]
        for message in host {
            let direct = try Frame.encode(message)
            #expect(direct == (try Frame.genericEncode(message)))
            #expect(try Frame.decode(HostMessage.self, from: Array(direct.dropFirst(4))) == message)
        }
        let app: [AppMessage] = [
            .request(id: 1, request: .service(.urlSessionStartTask(session: "s", kind: .download, url: "http://x/", method: "GET", headers: ["A": "b"], uploadFile: nil))),
            .request(id: 1, request: .service(.urlSessionStartTask(session: "s", kind: .upload, url: "http://x/", method: "POST", headers: [:], uploadFile: "/f"))),
            .request(id: 1, request: .service(.urlSessionStartTask(session: "s", kind: .download, url: "http://x/\\", method: "GET", headers: [:], uploadFile: nil))),
        ]
        for message in app {
            let direct = try Frame.encode(message)
            #expect(direct == (try Frame.genericEncode(message)))
            #expect(try Frame.decode(AppMessage.self, from: Array(direct.dropFirst(4))) == message)
        }
    }

    /// A background task's begin (with a name, without, or one that needs escaping) and end.
    @Test func backgroundTaskFramesAreTheGenericBytesAndReadBack() throws {
        for id in [0, 1, 42, -7, Int.max, Int.min] {
            for name: String? in [nil, "upload", "", "lock work", "a\"b", "ü", "tab\there"] {
                let begin = AppMessage.beginBackgroundTask(id: BackgroundTaskID(id), name: name)
                let direct = try Frame.encode(begin)
                #expect(String(decoding: direct, as: UTF8.self) == String(decoding: try Frame.genericEncode(begin), as: UTF8.self))
                #expect(try Frame.decode(AppMessage.self, from: Array(direct.dropFirst(4))) == begin)
            }
            let end = AppMessage.endBackgroundTask(id: BackgroundTaskID(id))
            let direct = try Frame.encode(end)
            #expect(String(decoding: direct, as: UTF8.self) == String(decoding: try Frame.genericEncode(end), as: UTF8.self))
            #expect(try Frame.decode(AppMessage.self, from: Array(direct.dropFirst(4))) == end)
        }
        let nearMisses = [
            #"{"beginBackgroundTask":{"id":1,"name":null}}"#, #"{"beginBackgroundTask":{"name":"a","id":1}}"#,
            #"{"beginBackgroundTask":{"id":1,"name":"a"}} "#, #"{"beginBackgroundTask":{"id":9223372036854775808}}"#,
            #"{"endBackgroundTask":{"id":1,"x":2}}"#, #"{"endBackgroundTask":{"id":01}}"#, #"{"endBackgroundTask":{}}"#,
        ]
        for text in nearMisses {
            let bytes = Array(text.utf8)
            #expect(Result { try Frame.decode(AppMessage.self, from: bytes) }.success == Result { try Frame.genericDecode(AppMessage.self, from: bytes) }.success, "\(text)")
        }
    }

    @Test func otherMessagesGoTheGenericWay() throws {
        let ignore = AppMessage.ignoreSnapshotOnNextApplicationLaunch
        #expect(try Frame.encode(ignore) == (try Frame.genericEncode(ignore)))
        #expect(try Frame.decode(AppMessage.self, from: Array(try Frame.encode(ignore).dropFirst(4))) == ignore)
        let rejected = HostMessage.rejected(reason: "no")
        #expect(try Frame.encode(rejected) == (try Frame.genericEncode(rejected)))
    }

    /// Near misses of the exact shapes: whatever the generic decoder makes of them, the
    /// fast readers make the same (they decline, and the generic one decides).
    @Test func nearMissesAreDecidedByTheGenericDecoder() {
        let app = [
            #"{"callbackReturned":{"seq":007}}"#, #"{"callbackReturned":{"seq":-1}}"#, #"{"callbackReturned":{"seq":18446744073709551616}}"#,
            #"{"callbackReturned":{"seq":1} }"#, #"{"callbackReturned":{"seq":1}}x"#, #"{"callbackReturned":{"seq":}}"#,
            #"{"callbackReturned":{"seq":1.0}}"#, #"{"callbackReturned":{"seq":1,"x":2}}"#, #" {"callbackReturned":{"seq":1}}"#,
            #"{"callbackReturned":{"seq":-0}}"#, #"{"callbackReturned":{"seq":1}"#,
            #"{"hello":{"pid":2147483648,"version":2}}"#, #"{"hello":{"pid":1,"version":2} }"#, #"{"hello":{"version":2,"pid":1}}"#,
            #"{"hello":{"pid":-0,"version":2}}"#, #"{"hello":{"pid":1,"version":9223372036854775808}}"#,
            #"{"request":{"id":1,"request":{"service":{"_0":{"urlSessionStartTask":{"headers":{},"kind":"sideways","method":"GET","session":"s","url":"u"}}}}}}"#,
            #"{"request":{"id":-1,"request":{"service":{"_0":{"urlSessionStartTask":{"headers":{},"kind":"download","method":"GET","session":"s","url":"u"}}}}}}"#,
            #"{"request":{"id":1,"request":{"service":{"_0":{"urlSessionStartTask":{"headers":{},"kind":"download","method":"GET","session":"s","url":"u"}}}}}"#,
            #"{"request":{"id":1,"request":{"service":{"_0":{"urlSessionStartTask":{"headers":{},"kind":"download","method":"GET","session":"s","url":"u","x":1}}}}}}"#,
        ]
        for text in app {
            let bytes = Array(text.utf8)
            #expect(Result { try Frame.decode(AppMessage.self, from: bytes) }.success == Result { try Frame.genericDecode(AppMessage.self, from: bytes) }.success, "\(text)")
        }
        let host = [
            #"{"callback":{"callback":{"didEnterBackground":{}},"seq":1,"state":"nowhere"}}"#,
            #"{"callback":{"callback":{"didEnterBackground":{}},"seq":01,"state":"background"}}"#,
            #"{"callback":{"callback":{"backgroundTaskExpiration":{"taskID":9223372036854775808}},"seq":1,"state":"background"}}"#,
            #"{"callback":{"callback":{"backgroundTaskExpiration":{"taskID":-9223372036854775809}},"seq":1,"state":"background"}}"#,
            #"{"callback":{"callback":{"backgroundTaskExpiration":{"taskID":-9223372036854775808}},"seq":1,"state":"background"}}"#,
            #"{"callback":{"callback":{"didEnterBackgroundX":{}},"seq":1,"state":"background"}}"#,
            #"{"callback":{"callback":{"didEnterBackground":{}},"seq":1,"state":"background\"}}"#,
            #"{"callback":{"callback":{"didEnterBackground":{}},"seq":1,"state":"background"}}  "#,
            #"{"reply":{"id":1,"reply":{"service":{"_0":{"transferTaskCreated":{"taskIdentifier":9223372036854775808}}}}}}"#,
            #"{"reply":{"id":-1,"reply":{"service":{"_0":{"transferTaskCreated":{"taskIdentifier":1}}}}}}"#,
            #"{"reply":{"id":1,"reply":{"service":{"_0":{"transferTaskCreated":{"taskIdentifier":01}}}}}}"#,
            #"{"reply":{"id":1,"reply":{"service":{"_0":{"transferTaskCreated":{"taskIdentifier":1}}}}}"#,
            #"{"welcome":{"bundleIdentifier":"a\u0041","version":2}}"#,
            #"{"welcome":{"bundleIdentifier":"a","screen":{"height":1,"scale":2.5,"width":1},"version":2}}"#,
            #"{"welcome":{"bundleIdentifier":"a","screen":{"height":1,"scale":2,"width":1}}}"#,
            #"{"welcome":{"bundleIdentifier":"a","screen":{"height":1,"scale":2,"width":1,"x":0},"version":2}}"#,
            #"{"welcome":{"bundleIdentifier":"a","version":2},"x":1}"#,
            #"{"welcome":{"bundleIdentifier":"a,"version":2}}"#,
            #"{"callback":{"callback":{"didFinishLaunching":{"options":{"arguments":["a",],"reason":"user"}}},"seq":1,"state":"inactive"}}"#,
            #"{"callback":{"callback":{"didFinishLaunching":{"options":{"arguments":[,"a"],"reason":"user"}}},"seq":1,"state":"inactive"}}"#,
            #"{"callback":{"callback":{"didFinishLaunching":{"options":{"arguments":["a" "b"],"reason":"user"}}},"seq":1,"state":"inactive"}}"#,
            #"{"callback":{"callback":{"didFinishLaunching":{"options":{"arguments":["a\"b"],"reason":"user"}}},"seq":1,"state":"inactive"}}"#,
            #"{"callback":{"callback":{"didFinishLaunching":{"options":{"arguments":[],"reason":"never"}}},"seq":1,"state":"inactive"}}"#,
            #"{"callback":{"callback":{"didFinishLaunching":{"options":{"arguments":[],"reason":"user"}}},"seq":1,"state":"inactive"}}}"#,
            #"{"callback":{"callback":{"didFinishLaunching":{"options":{"reason":"user"}}},"seq":1,"state":"inactive"}}"#,
            #"{"callback":{"callback":{"service":{"_0":{"urlSessionDidComplete":{"session":"s","taskIdentifier":9223372036854775808}}}},"seq":1,"state":"active"}}"#,
            #"{"callback":{"callback":{"service":{"_0":{"urlSessionDidComplete":{"session":"s","taskIdentifier":1}}}},"seq":1,"state":"nowhere"}}"#,
            #"{"callback":{"callback":{"service":{"_0":{"urlSessionDidFinishDownloading":{"location":"/a","session":"s"}}}},"seq":1,"state":"active"}}"#,
            #"{"callback":{"callback":{"service":{"_0":{"urlSessionDidFinishDownloading":{"location":"/a","session":"s","taskIdentifier":1}}}},"seq":1,"state":"active"}} "#,
        ]
        for text in host {
            let bytes = Array(text.utf8)
            #expect(Result { try Frame.decode(HostMessage.self, from: bytes) }.success == Result { try Frame.genericDecode(HostMessage.self, from: bytes) }.success, "\(text)")
        }
    }

    @Test func appStatusAnswersAreTheGenericBytes() throws {
        let since = Date(timeIntervalSince1970: 1_780_000_000.123)
        let statuses = [
            AppStatus(bundleIdentifier: testID("com.example.a"), state: .suspended, pid: 4242, since: since, backgroundTasks: [],
                      isFrontmost: false, footprint: 3_145_728),
            AppStatus(bundleIdentifier: testID("com.example.b"), state: .notRunning, pid: nil, since: Date(timeIntervalSince1970: 0),
                      backgroundTasks: [], isFrontmost: false),
            AppStatus(bundleIdentifier: testID("com.example.c"), state: .background, pid: 7, since: since,
                      backgroundTasks: ["upload", "#3", "a/b"], activities: ["audio playback"], isFrontmost: false, footprint: 0),
            AppStatus(bundleIdentifier: testID("com.example.d"), state: .active, pid: 1, since: Date(timeIntervalSince1970: -1.5),
                      backgroundTasks: [], isFrontmost: true, footprint: .max),
        ]
        for status in statuses {
            let response = ControlResponse.appStatus(status)
            let (fast, generic) = (String(decoding: try Frame.encode(response).dropFirst(Frame.headerSize), as: UTF8.self),
                                   String(decoding: try Frame.genericEncode(response).dropFirst(Frame.headerSize), as: UTF8.self))
            #expect(fast == generic, "\(fast) / \(generic)")
            let back = try Frame.decode(ControlResponse.self, from: Array(try Frame.encode(response).dropFirst(Frame.headerSize)))
            #expect(try Frame.encode(back) == (try Frame.encode(response)), "reads back")
        }
        // The direct reader gives the generic decoder's value, for every shape the direct
        // encoder writes.
        for status in statuses {
            let payload = Array(try Frame.encode(ControlResponse.appStatus(status)).dropFirst(Frame.headerSize))
            var reader = FastReader(payload)
            let read = reader.appStatus()
            let fast = try #require(read, "the direct reader takes \(status.bundleIdentifier)")
            #expect(fast == (try Frame.genericDecode(ControlResponse.self, from: payload)))
        }
        // Strings that need escaping, and other answers, take the generic way.
        let escaped = ControlResponse.appStatus(AppStatus(bundleIdentifier: testID("com.example.e"), state: .background, pid: 2, since: since,
                                                          backgroundTasks: ["say \"hi\"", "é"], isFrontmost: false))
        #expect(try Frame.encode(escaped) == (try Frame.genericEncode(escaped)))
        #expect(try Frame.encode(ControlResponse.end) == (try Frame.genericEncode(ControlResponse.end)))
    }
}

extension FrameFastPathTests {
    /// Near misses of a `status` row: the direct reader declines, and what the generic
    /// decoder makes of them stands (a value or an error).
    @Test func statusRowNearMissesAreDecidedByTheGenericDecoder() {
        let base = #"{"appStatus":{"_0":{"activities":[],"backgroundTasks":["a"],"bundleIdentifier":"com.example.a","footprint":5,"isFrontmost":false,"pid":7,"since":"2026-11-29T09:00:00.123Z","state":"suspended"}}}"#
        let swaps: [(String, String)] = [
            (#""state":"suspended""#, #""state":"asleep""#),
            (#""bundleIdentifier":"com.example.a""#, #""bundleIdentifier":"com..a""#),
            (#""pid":7"#, #""pid":2147483648"#),
            (#""pid":7"#, #""pid":-7"#),
            (#""footprint":5"#, #""footprint":-5"#),
            (#""footprint":5"#, #""footprint":18446744073709551616"#),
            (#""footprint":5"#, #""footprint":05"#),
            (#""since":"2026-11-29T09:00:00.123Z""#, #""since":"2026-02-30T09:00:00.123Z""#),
            (#""since":"2026-11-29T09:00:00.123Z""#, #""since":"2026-11-29T09:00:00Z""#),
            (#""since":"2026-11-29T09:00:00.123Z""#, #""since":"yesterday""#),
            (#"["a"]"#, #"["a\"b"]"#),
            (#"["a"]"#, #"["a",]"#),
            (#"["a"]"#, #"["a" ,"b"]"#),
            (#""isFrontmost":false"#, #""isFrontmost":0"#),
            (#""pid":7,"#, #""pid":null,"#),
        ]
        var rows: [String] = [base, base + " ", String(base.dropLast())]
        for (from, to) in swaps { rows.append(base.replacingOccurrences(of: from, with: to)) }
        rows.append(base.replacingOccurrences(of: #""footprint":5"#, with: #""footprint":null"#))
        for text in rows {
            let bytes = Array(text.utf8)
            #expect(Result { try Frame.decode(ControlResponse.self, from: bytes) }.success
                    == Result { try Frame.genericDecode(ControlResponse.self, from: bytes) }.success, "\(text)")
        }
    }
}

private extension Result {
    var success: Success? { if case .success(let s) = self { s } else { nil } }
}
