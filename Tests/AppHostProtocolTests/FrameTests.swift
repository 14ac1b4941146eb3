import Foundation
import Testing
@testable import AppHostProtocol

@Suite("FrameDecoder")
struct FrameDecoderTests {
    @Test func roundTripsEveryMessageFedOneByteAtATime() throws {
        let messages: [AppMessage] = [
            .hello(version: 1, pid: 1234),
            .callbackReturned(seq: 7),
            .beginBackgroundTask(id: 1, name: "upload"),
            .beginBackgroundTask(id: 2, name: nil),
            .endBackgroundTask(id: 1),
            .request(id: 9, request: .backgroundTimeRemaining),
        ]
        var stream: [UInt8] = []
        for m in messages { stream += try Frame.encode(m) }
        var decoder = FrameDecoder()
        var decoded: [AppMessage] = []
        for byte in stream {
            decoder.append(CollectionOfOne(byte))
            while let payload = try decoder.next() {
                decoded.append(try Frame.decode(AppMessage.self, from: payload))
            }
        }
        #expect(decoded == messages)
        #expect(decoder.bufferedCount == 0)
        try decoder.finish()
    }

    @Test func hostMessagesRoundTripIncludingInfiniteTime() throws {
        let messages: [HostMessage] = [
            .welcome(version: 1, bundleIdentifier: "com.example.plain"),
            .callback(seq: 1, callback: .didFinishLaunching(options: LaunchOptions(reason: .background, arguments: ["a b", "ü"])), state: .background),
            .callback(seq: 2, callback: .willTerminate, state: .active),
            .reply(id: 3, reply: .backgroundTimeRemaining(seconds: .greatestFiniteMagnitude)),
            .reply(id: 4, reply: .backgroundTimeRemaining(seconds: .infinity)),
            .rejected(reason: "no"),
        ]
        var decoder = FrameDecoder()
        for m in messages { decoder.append(try Frame.encode(m)) }
        for m in messages {
            let payload = try #require(try decoder.next())
            #expect(try Frame.decode(HostMessage.self, from: payload) == m)
        }
        #expect(try decoder.next() == nil)
    }

    @Test func needsTheWholeHeaderAndPayload() throws {
        var decoder = FrameDecoder()
        decoder.append([0, 0, 0])
        #expect(try decoder.next() == nil)
        decoder.append([3, 0x61])
        #expect(try decoder.next() == nil)
        decoder.append([0x62, 0x63, 0x00])
        #expect(try decoder.next() == [0x61, 0x62, 0x63])
        #expect(decoder.bufferedCount == 1)
        #expect(throws: FrameError.truncated(buffered: 1)) { try decoder.finish() }
    }

    @Test func rejectsOversizedFramesFromTheHeaderAlone() {
        var decoder = FrameDecoder()
        // 100 MB announced; nothing else sent.
        decoder.append([0x05, 0xf5, 0xe1, 0x00])
        #expect(throws: FrameError.oversized(length: 100_000_000, maximum: Frame.maximumPayload)) {
            try decoder.next()
        }
    }

    @Test func acceptsExactlyTheMaximum() throws {
        var decoder = FrameDecoder(maximumPayload: 8)
        decoder.append([0, 0, 0, 8] + [UInt8](repeating: 1, count: 8))
        #expect(try decoder.next()?.count == 8)
        decoder.append([0, 0, 0, 9])
        #expect(throws: FrameError.self) { try decoder.next() }
    }

    @Test func garbageIsMalformedNotACrash() throws {
        var decoder = FrameDecoder()
        decoder.append([0, 0, 0, 4, 0xde, 0xad, 0xbe, 0xef])
        let payload = try #require(try decoder.next())
        #expect(throws: FrameError.self) { try Frame.decode(AppMessage.self, from: payload) }
        #expect(throws: FrameError.self) { try Frame.decode(AppMessage.self, from: Array(#"{"launchRockets":{}}"#.utf8)) }
    }

    @Test func encodingRefusesOversizedMessages() {
        let big = String(repeating: "x", count: Frame.maximumPayload)
        #expect(throws: FrameError.self) { try Frame.encode(AppMessage.beginBackgroundTask(id: 1, name: big)) }
        // The direct encodings of app messages whose strings the app chooses check the bound too.
        #expect(throws: FrameError.self) {
            try Frame.encode(AppMessage.request(id: 1, request: .service(.urlSessionStartTask(
                session: "s", kind: .download, url: "http://x/" + big, method: "GET", headers: [:], uploadFile: nil))))
        }
    }

    @Test func compactsItsBufferOverLongStreams() throws {
        var decoder = FrameDecoder()
        let frame = try Frame.encode(AppMessage.callbackReturned(seq: 1))
        for _ in 0..<10_000 {
            decoder.append(frame)
            #expect(try decoder.next() != nil)
        }
        #expect(decoder.bufferedCount == 0)
    }
}

@Suite("WireJSON")
struct WireJSONTests {
    @Test func statusEncodesNullPidAndISODates() throws {
        let s = AppStatus(bundleIdentifier: testID("a"), state: .notRunning, pid: nil,
                          since: Date(timeIntervalSince1970: 1_700_000_000.25), backgroundTasks: [], isFrontmost: false)
        let text = String(decoding: try WireJSON.encoder().encode(s), as: UTF8.self)
        #expect(text.contains(#""pid":null"#))
        #expect(text.contains(#""since":"2023-11-14T22:13:20.250Z""#))
        #expect(text.contains(#""state":"notRunning""#))
        let back = try WireJSON.decoder().decode(AppStatus.self, from: Data(text.utf8))
        #expect(back == s)
    }
}

@Suite("TerminationCode")
struct TerminationCodeTests {
    @Test func hexAndTableAreDocumentedInREADME() throws {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        for code in TerminationCode.allCases {
            #expect(text.contains(code.hex), "README's code table lacks \(code.hex)")
            #expect(!code.meaning.isEmpty && !code.advice.isEmpty)
        }
        #expect(TerminationCode.watchdog.hex == "0x8badf00d")
        #expect(TerminationCode.deadlock.hex == "0xdead10cc")
    }
}

@Suite("Budgets")
struct BudgetTests {
    @Test func namedProfilesCarryTheDocumentedBackgroundBudgets() {
        #expect(BudgetProfile.named("ios6")?.backgroundTask == 600)
        #expect(BudgetProfile.named("ios7")?.backgroundTask == 180)
        #expect(BudgetProfile.named("ios13")?.backgroundTask == 30)
        #expect(BudgetProfile.default == .ios13)
        let p = BudgetProfile.ios13
        #expect([p.fetch, p.silentPush, p.didEnterBackground, p.launch, p.foregroundHang] == [30, 30, 5, 20, 10])
        for key in BudgetProfile.keys { #expect(!key.note.isEmpty, "\(key) has no source note") }
    }
}
