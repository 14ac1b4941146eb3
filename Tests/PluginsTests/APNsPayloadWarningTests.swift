import Foundation
import Testing
@testable import Plugins

/// `.apns` files as people write them (issue 19): what reads but is not what was meant.
@Suite("APNsPayload: warnings")
struct APNsPayloadWarningTests {
    private func parse(_ text: String) throws -> APNsPayload {
        try APNsPayload.parse(Data(text.utf8), name: "p.apns")
    }

    @Test func aStringWhereAPNsWantsANumberIsNotASilentPush() throws {
        let p = try parse(#"{"aps": {"content-available": "1"}}"#)
        #expect(!p.contentAvailable, "iOS acts on the number 1 only")
        #expect(p.inferredPushType == "alert")
        #expect(p.warnings == [
            "\"aps\".\"content-available\" is the string \"1\", not a number: APNs documents a number and iOS acts only on the number 1, so this is not a background (silent) push: the app is not woken for it, and with nothing to show it does nothing (write \"content-available\": 1, without quotes)",
        ])
        let mutable = try parse(#"{"aps": {"alert": "Hi", "mutable-content": "1", "content-available": 1}}"#)
        #expect(mutable.contentAvailable)
        #expect(mutable.warnings == [
            "\"aps\".\"mutable-content\" is the string \"1\", not a number: APNs documents a number and iOS acts only on the number 1, so iOS does not pass the notification to the app's notification service extension; it is shown as sent (write \"mutable-content\": 1, without quotes)",
        ])
        #expect(try parse(#"{"aps": {"content-available": 1, "mutable-content": 1, "alert": "x"}}"#).warnings.isEmpty)
        // A long string is quoted short.
        let long = try parse(#"{"aps": {"content-available": "\#(String(repeating: "1", count: 100))"}}"#)
        #expect(long.warnings.first?.contains("\"11111111111111111111…\"") == true, "\(long.warnings)")
    }

    @Test func misspelledKeysGetDidYouMean() throws {
        let target = try parse(#"{"Simulation Target Bundle": "com.example.app", "aps": {"alert": "Hi"}}"#)
        #expect(target.target == nil)
        #expect(target.misspelledTarget == "Simulation Target Bundle")
        #expect(target.warnings == ["\"Simulation Target Bundle\" is not a key simctl reads (it is ignored): did you mean \"Simulator Target Bundle\"?"])
        for near in ["simulator target bundle", "Simulator_Target_Bundle", "SimulatorTargetBundle", "Simulator Target Bundel"] {
            #expect(try parse(#"{"\#(near)": "a.b", "aps": {}}"#).misspelledTarget == near, "\(near)")
        }
        // Keys real payloads carry are not taken for it (Xcode's watchOS template, custom keys).
        for other in ["WatchKit Simulator Actions", "customKey", "Target", "aps-extra"] {
            #expect(try parse(#"{"\#(other)": "a.b", "aps": {}}"#).misspelledTarget == nil, "\(other)")
        }
        // With the right key present, a near one is left alone.
        let both = try parse(#"{"Simulator Target Bundle": "a.b", "Simulator Target Bundles": "c.d", "aps": {}}"#)
        #expect(both.target == "a.b" && both.misspelledTarget == nil && both.warnings.isEmpty)

        let aps = try parse(#"{"aps": {"content_available": 1, "contentAvailable": 1, "Sound": "default", "my-own-key": 1}}"#)
        #expect(!aps.contentAvailable)
        #expect(aps.warnings == [
            "\"aps\".\"Sound\" is not a key APNs knows (iOS ignores it): did you mean \"sound\"?",
            "\"aps\".\"contentAvailable\" is not a key APNs knows (iOS ignores it): did you mean \"content-available\"?",
            "\"aps\".\"content_available\" is not a key APNs knows (iOS ignores it): did you mean \"content-available\"?",
        ])
    }

    @Test func misspellingsAreComparedWithinABound() {
        #expect(APNsPayload.isNear("Simulation Target Bundle", APNsPayload.targetKey))
        #expect(!APNsPayload.isNear(APNsPayload.targetKey, APNsPayload.targetKey))
        // A key far longer than the target is not compared at all (the edit distance is quadratic).
        #expect(!APNsPayload.isNear(String(repeating: "Simulator Target Bundle", count: 3), APNsPayload.targetKey))
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: warningCorpus + "/INDEX.tsv"),
                   "needs ../shared/corpus beside the checkout (or APPHOST_CORPUS)"))
    func realPayloadsThatParseGiveNoWarnings() throws {
        let folder = warningCorpus + "/apns"
        var parsed = 0
        for name in try FileManager.default.contentsOfDirectory(atPath: folder).sorted() where name.hasSuffix(".apns") {
            let data = try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name))
            guard let payload = try? APNsPayload.parse(data, name: name) else { continue }  // not strict JSON: refused elsewhere
            parsed += 1
            #expect(payload.warnings.isEmpty, "\(name): \(payload.warnings)")
            #expect(payload.misspelledTarget == nil, "\(name)")
        }
        #expect(parsed >= 5)
    }
}

private let warningCorpus: String = {
    if let env = ProcessInfo.processInfo.environment["APPHOST_CORPUS"], !env.isEmpty { return env }
    return URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("../shared/corpus").standardizedFileURL.path
}()
