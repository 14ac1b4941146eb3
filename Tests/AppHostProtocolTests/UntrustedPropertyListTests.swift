import Foundation
import TestSupport
import Testing
@testable import AppHostProtocol

@Suite("UntrustedPropertyList")
struct UntrustedPropertyListTests {
    /// `{"UIRequiredDeviceCapabilities": {set: "armv7"}}`: a set (marker 0xC1, one element)
    /// where the file has an array. Foundation on Linux dies with SIGSEGV reading it.
    static let setInDictionary = binaryPlist([
        [0xD1, 1, 2], bplistString("UIRequiredDeviceCapabilities"), [0xC1, 3], bplistString("armv7"),
    ])

    @Test func aBinaryPlistHoldingASetIsRefusedNotRead() throws {
        let error = #expect(throws: UntrustedPropertyList.Refusal.self) {
            try UntrustedPropertyList.object(from: Self.setInDictionary)
        }
        #expect(error?.reason.contains("holds a set (object 2 at offset 42)") == true, "\(String(describing: error))")
    }

    @Test func anEmptySetIsRefusedToo() {
        let empty = binaryPlist([[0xD1, 1, 2], bplistString("a"), [0xC0]])
        #expect(throws: UntrustedPropertyList.Refusal.self) { try UntrustedPropertyList.check(empty) }
    }

    /// Trailer and table bytes, counted from the end of the file, set to a value the
    /// check cannot follow.
    @Test(arguments: [
        ("offsets of 0 bytes", 26, 0), ("references of 9 bytes", 25, 9), ("no objects", 17, 0),
        ("a table past the end", 1, 0xff), ("an object offset past the objects", 33, 0xf0),
    ] as [(String, Int, UInt8)])
    func aTableTheCheckCannotFollowIsRefused(_ what: String, fromEnd: Int, value: UInt8) {
        var bytes = [UInt8](Self.setInDictionary)
        bytes[bytes.count - fromEnd] = value
        #expect(throws: UntrustedPropertyList.Refusal.self, "\(what)") { try UntrustedPropertyList.check(Data(bytes)) }
    }

    @Test func binaryXmlAndOpenStepPlistsWithoutSetsReadAsBefore() throws {
        let values: [String: Any] = ["CFBundleIdentifier": "com.example.b", "UIBackgroundModes": ["audio"], "N": 3, "D": Data([1])]
        let binary = try PropertyListSerialization.data(fromPropertyList: values, format: .binary, options: 0)
        let read = try UntrustedPropertyList.object(from: binary)
        #expect(read.format == .binary)
        #expect((read.object as? [String: Any])?["CFBundleIdentifier"] as? String == "com.example.b")

        let xml = try PropertyListSerialization.data(fromPropertyList: values, format: .xml, options: 0)
        #expect(try UntrustedPropertyList.object(from: xml).format == .xml)
        let openStep = Data(#"{ CFBundleIdentifier = "com.example.o"; }"#.utf8)
        #expect(try UntrustedPropertyList.object(from: openStep).format == .openStep)
        // "bplist" not followed by "0" is not the binary format for Foundation either (this
        // one is an OpenStep string): the check leaves it alone.
        #expect(throws: Never.self) { try UntrustedPropertyList.check(Data("bplist15xxxxxxxxxxxx".utf8)) }
    }
}
