import AppHostManifest
import AppHostProtocol
import Foundation
import Testing

/// The manifest reader checks bundle identifiers by `BundleID`'s rule.
@Suite struct ManifestBundleIDTests {
    @Test func theLengthLimitIsBundleIDs() {
        #expect(BundleID.maximumLength == ManifestReader.maximumBundleIdentifierLength)
    }

    /// The manifest reader refuses exactly what the type refuses, with its own words.
    @Test(arguments: ["com..example", String(repeating: "b", count: 156), "ok.id"])
    func manifestReaderUsesTheSameRule(text: String) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("bundleid-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let plist = dir.appendingPathComponent("Info.plist")
        let data = try PropertyListSerialization.data(
            fromPropertyList: ["CFBundleIdentifier": text, "CFBundleExecutable": "X"], format: .xml, options: 0)
        try data.write(to: plist)
        let read = Result { try ManifestReader.read(path: plist.path) }
        switch read {
        case .success:
            #expect(BundleID(text) != nil)
        case .failure(let error):
            #expect("\(error)".contains("bundle identifier") == (BundleID(text) == nil), "\(error)")
        }
    }
}
