import Foundation
import Testing
@testable import AppHostProtocol

/// The direct frame encodings must be the generic coder's bytes, and the direct readers
/// must read only what the generic decoder reads the same way.
struct FrameFastPathTests {
    static let callbacks: [LifecycleCallback] = [
        .willResignActive, .didEnterBackground, .willEnterForeground, .didBecomeActive, .willTerminate,
        .backgroundTaskExpiration(taskID: 0), .backgroundTaskExpiration(taskID: 7),
        .backgroundTaskExpiration(taskID: -3), .backgroundTaskExpiration(taskID: .max), .backgroundTaskExpiration(taskID: .min),
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
                let message = HostMessage.reply(id: id, reply: .service(.transferTaskCreated(taskIdentifier: task)))
                let direct = try Frame.encode(message)
                #expect(String(decoding: direct, as: UTF8.self) == String(decoding: try Frame.genericEncode(message), as: UTF8.self))
                #expect(try Frame.decode(HostMessage.self, from: Array(direct.dropFirst(Frame.headerSize))) == message)
            }
        }
        let other = HostMessage.reply(id: 3, reply: .service(.ok))
        #expect(try Frame.encode(other) == (try Frame.genericEncode(other)))
    }

    @Test func otherMessagesGoTheGenericWay() throws {
        let hello = AppMessage.hello(version: 3, pid: 42)
        #expect(try Frame.encode(hello) == (try Frame.genericEncode(hello)))
        #expect(try Frame.decode(AppMessage.self, from: Array(try Frame.encode(hello).dropFirst(4))) == hello)
        let welcome = HostMessage.welcome(version: 3, bundleIdentifier: "com.a/b", screen: nil)
        #expect(try Frame.encode(welcome) == (try Frame.genericEncode(welcome)))
        let launch = HostMessage.callback(seq: 1, callback: .didFinishLaunching(options: LaunchOptions(reason: .user, arguments: ["x"])), state: .inactive)
        #expect(try Frame.encode(launch) == (try Frame.genericEncode(launch)))
        #expect(try Frame.decode(HostMessage.self, from: Array(try Frame.encode(launch).dropFirst(4))) == launch)
    }

    /// Near misses of the exact shapes: whatever the generic decoder makes of them, the
    /// fast readers make the same (they decline, and the generic one decides).
    @Test func nearMissesAreDecidedByTheGenericDecoder() {
        let app = [
            #"{"callbackReturned":{"seq":007}}"#, #"{"callbackReturned":{"seq":-1}}"#, #"{"callbackReturned":{"seq":18446744073709551616}}"#,
            #"{"callbackReturned":{"seq":1} }"#, #"{"callbackReturned":{"seq":1}}x"#, #"{"callbackReturned":{"seq":}}"#,
            #"{"callbackReturned":{"seq":1.0}}"#, #"{"callbackReturned":{"seq":1,"x":2}}"#, #" {"callbackReturned":{"seq":1}}"#,
            #"{"callbackReturned":{"seq":-0}}"#, #"{"callbackReturned":{"seq":1}"#,
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
        ]
        for text in host {
            let bytes = Array(text.utf8)
            #expect(Result { try Frame.decode(HostMessage.self, from: bytes) }.success == Result { try Frame.genericDecode(HostMessage.self, from: bytes) }.success, "\(text)")
        }
    }
}

private extension Result {
    var success: Success? { if case .success(let s) = self { s } else { nil } }
}
