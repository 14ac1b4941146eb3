import Foundation
import Snapshots
import Testing

/// The kinds of privacy leak, as reports and `privacy-check` print them.
@Suite struct LeakKindTests {
    @Test func rawValuesAreTheReportedStrings() {
        #expect(LeakKind.allCases.map(\.rawValue) == ["text", "pixels"])
        #expect("\(LeakKind.pixels)" == "pixels")
    }

    /// A leak encodes its kind as the plain string, and a report written before reads back.
    @Test func leakCodesItsKindAsAString() throws {
        let leak = Leak(kind: .text, view: #"label "1,234.56" at window/0"#, detail: "shown")
        let data = try JSONEncoder().encode(leak)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["kind"] as? String == "text")
        let old = #"{"kind":"pixels","view":"view at window/1","detail":"not one colour"}"#
        #expect(try JSONDecoder().decode(Leak.self, from: Data(old.utf8)).kind == .pixels)
        let unknown = #"{"kind":"sound","view":"v","detail":"d"}"#
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(Leak.self, from: Data(unknown.utf8)) }
    }
}
