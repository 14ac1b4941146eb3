import Foundation
import Testing
@testable import AppHostProtocol

/// A binary property list (`bplist00`) of `objects`, each already encoded with 1-byte
/// object references; object 0 is the top. Offsets are 2 bytes.
func binaryPlist(_ objects: [[UInt8]]) -> Data {
    var out = Array("bplist00".utf8)
    var offsets: [Int] = []
    for object in objects {
        offsets.append(out.count)
        out += object
    }
    let table = out.count
    for offset in offsets { out += [UInt8(offset >> 8), UInt8(offset & 0xff)] }
    func u64(_ n: Int) -> [UInt8] { (0..<8).reversed().map { UInt8((n >> ($0 * 8)) & 0xff) } }
    out += [0, 0, 0, 0, 0, 0, 2, 1] + u64(objects.count) + u64(0) + u64(table)
    return Data(out)
}

/// An ASCII string object (under 256 bytes).
func bplistString(_ s: String) -> [UInt8] {
    let n = s.utf8.count
    return (n < 15 ? [0x50 | UInt8(n)] : [0x5F, 0x10, UInt8(n)]) + Array(s.utf8)
}

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

    @Test func theManifestReadersSayWhyAndDoNotCrash() throws {
        let error = #expect(throws: ManifestError.self) {
            try ManifestReader.readRaw(data: Self.setInDictionary, displayPath: "Evil.app/Info.plist")
        }
        #expect(error?.code == .malformedPropertyList)
        #expect(error?.description.hasPrefix("Evil.app/Info.plist: not a valid property list (binary property list holds a set") == true,
                "\(String(describing: error))")
        let lenient = ManifestReader.readLenient(data: Self.setInDictionary, displayPath: "Evil.app/Info.plist")
        #expect(lenient.problems == [try #require(error)])
        #expect(lenient.manifest == nil)

        // The same through the file readers `apphost install`, `lint` and the bundle loader use.
        try withTempDir { dir in
            let app = (dir as NSString).appendingPathComponent("Evil.app")
            try write(Self.setInDictionary, to: "Evil.app/Info.plist", in: dir)
            try write(Self.setInDictionary, to: "Evil.app/Evil.entitlements", in: dir)
            #expect(throws: ManifestError.self) { try ManifestReader.read(path: app) }
            #expect(ManifestReader.readLenient(path: app).problems.first?.code == .malformedPropertyList)
            let entitlements = #expect(throws: ManifestError.self) {
                try Entitlements.read(path: (app as NSString).appendingPathComponent("Evil.entitlements"))
            }
            #expect(entitlements?.code == .malformedPropertyList)
        }
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
        let raw = try ManifestReader.readRaw(data: binary, displayPath: "B.app/Info.plist")
        #expect(raw.format == .binary && raw.backgroundModes == [.audio])

        let xml = try PropertyListSerialization.data(fromPropertyList: values, format: .xml, options: 0)
        #expect(try UntrustedPropertyList.object(from: xml).format == .xml)
        let openStep = Data(#"{ CFBundleIdentifier = "com.example.o"; }"#.utf8)
        #expect(try UntrustedPropertyList.object(from: openStep).format == .openStep)
        // "bplist" not followed by "0" is not the binary format for Foundation either (this
        // one is an OpenStep string): the check leaves it alone.
        #expect(throws: Never.self) { try UntrustedPropertyList.check(Data("bplist15xxxxxxxxxxxx".utf8)) }
    }
}
