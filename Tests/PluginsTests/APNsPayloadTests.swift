import AppHostProtocol
import Foundation
import Testing
@testable import Plugins

/// The APNsRejection parsing `text` throws (fails the test if it parses).
private func rejection(_ text: String, name: String = "payload.apns",
                       sourceLocation: SourceLocation = #_sourceLocation) -> APNsRejection? {
    rejection(Data(text.utf8), name: name, sourceLocation: sourceLocation)
}

private func rejection(_ data: Data, name: String = "payload.apns",
                       sourceLocation: SourceLocation = #_sourceLocation) -> APNsRejection? {
    do throws(APNsRejection) {
        let payload = try APNsPayload.parse(data, name: name)
        Issue.record("expected an APNsRejection, parsed \(payload)", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

private func parse(_ text: String) throws -> APNsPayload {
    try APNsPayload.parse(Data(text.utf8), name: "payload.apns")
}

@Suite("APNsPayload")
struct APNsPayloadTests {
    // MARK: - what a payload says

    @Test func pureSilentPushIsBackground() throws {
        let p = try parse(#"{"aps": {"content-available": 1}, "customData": {"message": "sync"}}"#)
        #expect(p.contentAvailable)
        #expect(!p.isVisible)
        #expect(p.summary == nil)
        #expect(p.target == nil)
        #expect(p.inferredPushType == "background")
    }

    @Test func alertStringIsVisibleAndSummarised() throws {
        let p = try parse(#"{"aps": {"alert": "Your order shipped", "sound": "default"}}"#)
        #expect(!p.contentAvailable)
        #expect(p.isVisible)
        #expect(p.summary == "Your order shipped")
        #expect(p.inferredPushType == "alert")
    }

    @Test func alertDictionarySummaryPrefersTitleThenBodyThenLocKeys() throws {
        #expect(try parse(#"{"aps": {"alert": {"title": "T", "body": "B"}}}"#).summary == "T")
        #expect(try parse(#"{"aps": {"alert": {"body": "B"}}}"#).summary == "B")
        #expect(try parse(#"{"aps": {"alert": {"title-loc-key": "TK", "loc-key": "K"}}}"#).summary == "TK")
        #expect(try parse(#"{"aps": {"alert": {"loc-key": "K"}}}"#).summary == "K")
        #expect(try parse(#"{"aps": {"alert": {"subtitle": "S"}}}"#).summary == nil)
    }

    @Test func badgeOrSoundAloneIsVisible() throws {
        let badge = try parse(#"{"aps": {"badge": 3}}"#)
        #expect(badge.isVisible && badge.summary == nil && badge.inferredPushType == "alert")
        let sound = try parse(#"{"aps": {"sound": "chime.caf"}}"#)
        #expect(sound.isVisible && sound.inferredPushType == "alert")
    }

    @Test func contentAvailableWithAnAlertIsAnAlertPush() throws {
        let p = try parse(#"{"aps": {"alert": {"title": "New mail"}, "content-available": 1}}"#)
        #expect(p.contentAvailable && p.isVisible)
        #expect(p.inferredPushType == "alert")
    }

    @Test func contentAvailableMustBeOne() throws {
        #expect(try !parse(#"{"aps": {"content-available": 0}}"#).contentAvailable)
        #expect(try !parse(#"{"aps": {"content-available": "1"}}"#).contentAvailable)
        #expect(try !parse(#"{"aps": {}}"#).contentAvailable)
        // Neither visible nor content-available: APNs still calls it an alert push.
        #expect(try parse(#"{"aps": {}}"#).inferredPushType == "alert")
    }

    @Test func simulatorTargetBundleNamesTheTarget() throws {
        let p = try parse(#"{"Simulator Target Bundle": "com.example.app", "aps": {"alert": "Hi"}}"#)
        #expect(p.target == "com.example.app")
        #expect(APNsPayload.targetKey == "Simulator Target Bundle")

        let empty = try #require(rejection(#"{"Simulator Target Bundle": "", "aps": {}}"#))
        #expect(empty.reason == "BadTopic")
        #expect(empty.message.contains("Simulator Target Bundle"))
        let number = try #require(rejection(#"{"Simulator Target Bundle": 42, "aps": {}}"#))
        #expect(number.reason == "BadTopic")
    }

    @Test func theTextIsKeptAsGiven() throws {
        let text = "{\n  \"aps\" : {\"alert\": \"é\"},\n  \"x\": [1, 2]\n}\n"
        #expect(try parse(text).json == text)
    }

    // MARK: - what APNs refuses

    @Test func emptyPayloadsAreRefused() throws {
        for text in ["", "  \n\t\r\n"] {
            let r = try #require(rejection(text))
            #expect(r.reason == "PayloadEmpty")
            #expect(r.status == 400)
            #expect(r.message.hasPrefix("payload.apns: "))
        }
    }

    @Test func theSizeLimitIs4096Bytes() throws {
        let frame = #"{"aps": {"alert": ""}}"#
        let fill = { (n: Int) in #"{"aps": {"alert": ""# + String(repeating: "a", count: n) + #""}}"# }
        let exact = fill(APNsPayload.maximumSize - frame.utf8.count)
        #expect(exact.utf8.count == 4096)
        #expect(try parse(exact).isVisible)

        let over = fill(APNsPayload.maximumSize - frame.utf8.count + 1)
        let r = try #require(rejection(over))
        #expect(r.reason == "PayloadTooLarge")
        #expect(r.status == 413)
        #expect(r.message.contains("4097") && r.message.contains("4096"), "\(r.message)")
    }

    @Test func notUTF8IsABadPayload() throws {
        let r = try #require(rejection(Data([0x7B, 0xFF, 0xFE, 0x7D])))
        #expect(r.reason == "PayloadEmpty")
        #expect(r.message.contains("UTF-8"))
    }

    @Test func theTopLevelMustBeAnObjectWithAnApsDictionary() throws {
        let list = try #require(rejection(#"[{"aps": {}}]"#))
        #expect(list.reason == "PayloadEmpty" && list.message.contains("JSON object"), "\(list.message)")
        let noAps = try #require(rejection(#"{"caller": "Ada"}"#))
        #expect(noAps.reason == "PayloadEmpty" && noAps.message.contains("\"aps\""), "\(noAps.message)")
        let apsString = try #require(rejection(#"{"aps": "alert"}"#))
        #expect(apsString.reason == "PayloadEmpty" && apsString.message.contains("dictionary"), "\(apsString.message)")
    }

    @Test func aTrailingCommaIsNamedWithItsLineAndColumn() throws {
        let text = """
            {
              "aps": {
                "alert": "Hi",
              }
            }
            """
        let r = try #require(rejection(text, name: "hi.apns"))
        #expect(r.reason == "PayloadEmpty")
        #expect(r.message.hasPrefix("hi.apns: "), "\(r.message)")
        #expect(r.message.contains("trailing comma at line 3, column 18"), "\(r.message)")
        #expect(r.message.contains("strict JSON"), "\(r.message)")
    }

    @Test func aCommentIsNamedWithItsLine() throws {
        let r = try #require(rejection("{\n  // greeting\n  \"aps\": {\"alert\": \"Hi\"}\n}"))
        #expect(r.reason == "PayloadEmpty")
        #expect(r.message.contains("a comment at line 2"), "\(r.message)")
    }

    @Test func slashesAndCommasInsideStringsAreNotProblems() throws {
        let p = try parse(#"{"aps": {"alert": "a, } // b \" ,]"}, "url": "https://x/y"}"#)
        #expect(p.summary == #"a, } // b " ,]"#)
        let r = try #require(rejection(#"{"aps": {"alert": "unterminated}}"#))
        #expect(r.message.contains("unterminated string"), "\(r.message)")
    }

    // MARK: - the real-world corpus

    static let skipReason: Comment = "needs ../shared/corpus beside the checkout (or APPHOST_CORPUS)"

    @Test(.enabled(if: apnsCorpusAvailable, skipReason))
    func everyCorpusPayloadHasAnIndexRowAndEveryRowAFile() throws {
        let folder = (apnsCorpusDirectory as NSString).appendingPathComponent("apns")
        let files = Set(try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".apns") }.map { "apns/\($0)" })
        let indexed = Set(apnsCorpusRows.map(\.file))
        #expect(!files.isEmpty)
        #expect(files.subtracting(indexed).isEmpty, "apns files with no INDEX.tsv row: \(files.subtracting(indexed).sorted())")
        #expect(indexed.subtracting(files).isEmpty, "INDEX.tsv apns rows with no file: \(indexed.subtracting(files).sorted())")
        #expect(apnsCorpusRows.contains { !$0.strict } && apnsCorpusRows.contains { $0.strict }, "both kinds are exercised")
    }

    @Test(.enabled(if: apnsCorpusAvailable, skipReason), arguments: apnsCorpusRows)
    func corpusPayloadReadsAsIndexed(row: APNsCorpusRow) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: row.path))
        if row.strict {
            let payload = try APNsPayload.parse(data, name: row.file)
            #expect(payload.target == row.bundleIdentifier, "\(row.file)")
            let contentAvailable = try #require(row.facts["content-available"], "\(row.file): INDEX.tsv says nothing of content-available")
            #expect(payload.contentAvailable == (contentAvailable == "1"), "\(row.file)")
            #expect(payload.inferredPushType == (payload.contentAvailable && !payload.isVisible ? "background" : "alert"))
            if row.notes.contains("Pure silent push") {
                #expect(payload.inferredPushType == "background", "\(row.file)")
            }
            #expect(payload.json == String(decoding: data, as: UTF8.self))
        } else {
            let r = try #require(rejection(data, name: row.file), "\(row.file) is indexed as not strict JSON")
            #expect(r.reason == "PayloadEmpty", "\(row.file): \(r)")
            #expect(r.message.hasPrefix(row.file + ": "), "\(r.message)")
            #expect(r.message.contains("trailing comma"), "\(r.message)")
            // The line named holds the comma.
            let match = try #require(r.message.firstMatch(of: /trailing comma at line (\d+), column (\d+)/), "\(r.message)")
            let lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            let line = try #require(Int(match.output.1)), column = try #require(Int(match.output.2))
            try #require((1...lines.count).contains(line), "\(r.message)")
            let text = Array(lines[line - 1])
            try #require((1...text.count).contains(column), "\(r.message)")
            #expect(text[column - 1] == ",", "\(row.file) line \(line): \(lines[line - 1])")
        }
    }
}

// MARK: - corpus index

/// The real-world corpus: `$APPHOST_CORPUS`, or `../shared/corpus` beside the checkout.
private let apnsCorpusDirectory: String = {
    if let env = ProcessInfo.processInfo.environment["APPHOST_CORPUS"], !env.isEmpty { return env }
    return URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("../shared/corpus").standardizedFileURL.path
}()

private let apnsCorpusAvailable = FileManager.default.fileExists(
    atPath: (apnsCorpusDirectory as NSString).appendingPathComponent("INDEX.tsv"))

/// An `apns` row of `INDEX.tsv`: kind, local_file, repo, path, commit,
/// expected_bundle_id, expected_UIBackgroundModes, notes (`-` means absent).
struct APNsCorpusRow: Sendable, CustomTestStringConvertible {
    var file: String
    /// The "Simulator Target Bundle" as written, nil if the file has none.
    var bundleIdentifier: String?
    var notes: String
    /// `key=value` pairs after the ` | ` in the notes (`content-available`, `mutable-content`).
    var facts: [String: String]
    /// Strict JSON, as APNs takes it (the notes say "NOT strict JSON" otherwise).
    var strict: Bool { !notes.contains("NOT strict JSON") }

    var testDescription: String { file }
    var path: String { (apnsCorpusDirectory as NSString).appendingPathComponent(file) }

    static func load() -> [APNsCorpusRow] {
        guard apnsCorpusAvailable,
              let text = try? String(contentsOfFile: (apnsCorpusDirectory as NSString).appendingPathComponent("INDEX.tsv"), encoding: .utf8)
        else { return [] }
        return text.split(whereSeparator: \.isNewline).dropFirst().compactMap { line in
            let columns = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard columns.count >= 8, columns[0] == "apns" else { return nil }
            var facts: [String: String] = [:]
            if let bar = columns[7].range(of: " | ", options: .backwards) {
                for pair in columns[7][bar.upperBound...].components(separatedBy: "; ") {
                    let kv = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                    if kv.count == 2 { facts[kv[0]] = kv[1] }
                }
            }
            return APNsCorpusRow(file: columns[1], bundleIdentifier: columns[5] == "-" ? nil : columns[5],
                                 notes: columns[7], facts: facts)
        }
    }
}

private let apnsCorpusRows = APNsCorpusRow.load()
