import AppHostProtocol
import Foundation
import TestSupport
import Testing
@testable import AppHostManifest

/// The manifest readers on property lists `UntrustedPropertyList` refuses, and on those it
/// lets through (AppHostProtocolTests test the check itself).
@Suite("Manifest readers: untrusted property lists")
struct ManifestUntrustedPropertyListTests {
    /// `{"UIRequiredDeviceCapabilities": {set: "armv7"}}`: a set (marker 0xC1, one element)
    /// where the file has an array. Foundation on Linux dies with SIGSEGV reading it.
    static let setInDictionary = binaryPlist([
        [0xD1, 1, 2], bplistString("UIRequiredDeviceCapabilities"), [0xC1, 3], bplistString("armv7"),
    ])

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

    @Test func aBinaryPlistWithoutSetsReadsAsBefore() throws {
        let values: [String: Any] = ["CFBundleIdentifier": "com.example.b", "UIBackgroundModes": ["audio"], "N": 3, "D": Data([1])]
        let binary = try PropertyListSerialization.data(fromPropertyList: values, format: .binary, options: 0)
        let raw = try ManifestReader.readRaw(data: binary, displayPath: "B.app/Info.plist")
        #expect(raw.format == .binary && raw.backgroundModes == [.audio])
    }
}
