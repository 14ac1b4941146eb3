import Foundation
import Testing
@testable import AppHostProtocol

/// `HostEvent.jsonBytes()` must write exactly what the generic encoder writes.
struct HostEventJSONTests {
    let encoder = WireJSON.encoder()

    func same(_ e: HostEvent, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let generic = Array(try encoder.encode(e))
        let direct = e.jsonBytes()
        #expect(String(decoding: direct, as: UTF8.self) == String(decoding: generic, as: UTF8.self), sourceLocation: sourceLocation)
        // Read back as the generic line is (dates keep milliseconds only).
        #expect(try WireJSON.decoder().decode(HostEvent.self, from: Data(direct)) == WireJSON.decoder().decode(HostEvent.self, from: Data(generic)),
                sourceLocation: sourceLocation)
    }

    @Test func everyFieldAndNone() throws {
        let t = Date(timeIntervalSince1970: 1_764_000_000.123)
        try same(HostEvent(seq: 1, time: t, kind: .hostStarted, cause: "host started"))
        try same(HostEvent(seq: .max, time: t, kind: .transition, bundleIdentifier: testID("com.example.app"), pid: .min,
                           from: .background, to: .suspended, cause: "no assertion left (SIGSTOP)", mode: .audio,
                           fields: .init(callback: "didEnterBackground", signal: .stop, confirmed: false, task: -7,
                                         taskName: "upload/1", began: true, transfer: .heldForNextLaunch,
                                         session: "com.example.bg", transferTask: TransferTaskID(.max), push: .max,
                                         apnsID: "123E4567-E89B-12D3-A456-4266554400A0", fetch: 0, result: .newData)))
        try same(HostEvent(seq: 9, time: t, kind: .modeUsed, cause: "silent push 3", mode: .remoteNotification,
                           fields: .init(push: 3, apnsID: "a\"b")))
        try same(HostEvent(seq: 10, time: t, kind: .service, cause: "fetch 2 completed", fields: .init(fetch: 2, result: .noData)))
        // A registration's device token; a BGTask launched, completed (and how).
        try same(HostEvent(seq: 13, time: t, kind: .service, cause: "registered", fields: .init(deviceToken: "ab\"01")))
        try same(HostEvent(seq: 14, time: t, kind: .service, cause: "BGTask completed",
                           fields: .init(result: .failed, bgTask: "com.x.refresh", success: false)))
        try same(HostEvent(seq: 15, time: t, kind: .callback, cause: "expirationHandler returned",
                           fields: .init(callback: "expirationHandler", task: 3, taskName: "upload", began: nil, bgTask: "b", success: true)))
        // Device memory: a level change, a warning, a jetsam decision.
        try same(HostEvent(seq: 11, time: t, kind: .memory, cause: "memory pressure normal → warning",
                           fields: .init(footprint: 0, pressure: .warning)))
        try same(HostEvent(seq: 12, time: t, kind: .memory, bundleIdentifier: testID("com.x"), pid: 7, cause: "jetsam",
                           fields: .init(callback: "didReceiveMemoryWarning", fetch: 1, footprint: .max, pressure: .critical, band: .suspended)))
        for kind in [HostEvent.Kind.callback, .signal, .backgroundTask, .service, .snapshot, .modeRefused] {
            for note in TransferNote.allCases {
                try same(HostEvent(seq: 42, time: t, kind: kind, cause: "x", fields: .init(confirmed: true, transfer: note)))
            }
        }
        for state in AppState.allCases {
            try same(HostEvent(seq: 3, time: t, kind: .transition, from: state, to: state, cause: ""))
        }
    }

    @Test func everyByteAndCharacterInStrings() throws {
        let t = Date(timeIntervalSince1970: 0)
        let ascii = String(decoding: (0..<128).map { UInt8($0) }, as: UTF8.self)
        try same(HostEvent(seq: 1, time: t, kind: .warning, bundleIdentifier: testID("A-Z.a-z.0-9"), cause: ascii, mode: .bluetoothCentral,
                           fields: .init(taskName: ascii, session: SessionIdentifier(ascii))))
        let unicode = "é ü 日本 🚀 \u{2028}\u{2029}\u{7F}\u{FEFF} \u{0}end"
        try same(HostEvent(seq: 2, time: t, kind: .service, cause: unicode, fields: .init(callback: unicode)))
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let scalars = (0..<Int.random(in: 0..<40, using: &generator)).compactMap { _ in
                Unicode.Scalar(UInt32.random(in: 0..<0x1_0000, using: &generator))
            }
            var s = ""
            s.unicodeScalars.append(contentsOf: scalars)
            try same(HostEvent(seq: UInt64.random(in: 0...UInt64.max, using: &generator),
                               time: Date(timeIntervalSince1970: Double.random(in: -1e10...1e10, using: &generator)),
                               kind: .warning, cause: s))
        }
    }
}
