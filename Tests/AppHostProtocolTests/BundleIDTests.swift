import AppHostProtocol
import Foundation
import Testing

/// Bundle identifiers as a checked type (the manifest reader checks by the same rule:
/// AppHostManifestTests' `ManifestBundleIDTests`).
@Suite struct BundleIDTests {
    @Test(arguments: ["com.example.App", "a", "com.example-1.x2", "A.B.C", String(repeating: "a", count: 155)])
    func wellFormed(text: String) throws {
        let id = try BundleID(validating: text)
        #expect(id.rawValue == text && id.description == text)
        #expect(BundleID(text) == id)
        #expect(BundleID.problem(with: text) == nil)
    }

    @Test(arguments: ["", ".com.example", "com.example.", "com..example", "com/example", "../etc", "com example",
                      "com.exämple", "com_example", "com.example\n"])
    func malformed(text: String) {
        #expect(BundleID.problem(with: text) == .malformed)
        #expect(BundleID(text) == nil)
        #expect(throws: BundleID.Problem.malformed) { try BundleID(validating: text) }
    }

    /// The rule reads UTF-8 bytes; it says what the rule over characters said (ASCII
    /// letters and digits, `-` and `.`), for what a grapheme or a non-ASCII letter or
    /// digit could make of it.
    @Test(arguments: ["com.e\u{301}xample", "com.\r\nx", "com.١٢", "com.ｅxample", "com.example\u{200B}", "a\u{0}b",
                      "-", "-.-", "a.-", "9.9", "A", "a..", "..a", ".", "é"])
    func theByteRuleIsTheCharacterRule(text: String) {
        let byCharacter = !text.isEmpty && text.utf8.count <= BundleID.maximumLength
            && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }
            && !text.hasPrefix(".") && !text.hasSuffix(".") && !text.contains("..")
        #expect((BundleID.problem(with: text) == nil) == byCharacter, "\(text.unicodeScalars.map { String($0.value, radix: 16) })")
    }

    @Test func tooLongIsCheckedFirst() {
        #expect(BundleID.problem(with: String(repeating: "a", count: 156)) == .tooLong(characters: 156))
        #expect(BundleID.problem(with: String(repeating: "/", count: 200)) == .tooLong(characters: 200))
    }

    /// Coded as the plain string; a malformed one is a DecodingError that says why.
    @Test func codableAsAPlainString() throws {
        let id = try BundleID(validating: "com.example.a")
        #expect(String(decoding: try JSONEncoder().encode([id]), as: UTF8.self) == #"["com.example.a"]"#)
        #expect(try JSONDecoder().decode([BundleID].self, from: Data(#"["com.example.a"]"#.utf8)) == [id])
        do {
            _ = try JSONDecoder().decode([BundleID].self, from: Data(#"["../../etc"]"#.utf8))
            Issue.record("decoded a malformed bundle id")
        } catch let DecodingError.dataCorrupted(context) {
            #expect(context.debugDescription.contains("invalid bundle identifier \"../../etc\""))
        }
    }

    @Test func ordersAndHashesAsItsString() throws {
        let a = try BundleID(validating: "com.a"), b = try BundleID(validating: "com.b")
        #expect(a < b && [b, a].sorted() == [a, b])
        #expect(Set([a, try BundleID(validating: "com.a")]).count == 1)
    }

    /// Control requests carry a BundleID and still code the plain string; a request with
    /// a malformed id no longer decodes (the daemon answers badRequest).
    @Test func controlRequestsKeepTheirWireForm() throws {
        let request = ControlRequest.launch(bundleIdentifier: try BundleID(validating: "com.example.a"), background: true,
                                            arguments: ["x"], terminateRunning: false)
        let text = String(decoding: try WireJSON.encoder().encode(request), as: UTF8.self)
        #expect(text.contains(#""bundleIdentifier":"com.example.a""#), "\(text)")
        #expect(try WireJSON.decoder().decode(ControlRequest.self, from: Data(text.utf8)) == request)
        let status = #"{"status":{"bundleIdentifier":"com.example.b"}}"#
        #expect(try WireJSON.decoder().decode(ControlRequest.self, from: Data(status.utf8))
            == .status(bundleIdentifier: try BundleID(validating: "com.example.b")))
        let bad = text.replacingOccurrences(of: "com.example.a", with: "../../etc")
        #expect(throws: DecodingError.self) { try WireJSON.decoder().decode(ControlRequest.self, from: Data(bad.utf8)) }
    }
}
