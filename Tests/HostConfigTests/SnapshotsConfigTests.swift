import AppHostProtocol
import Foundation
import HostConfig
import Testing

/// The config file's `"snapshots"`: a host-wide policy and the screen pictures are drawn for.
@Suite("Host config: snapshots")
struct SnapshotsConfigTests {
    func load(_ json: String) throws -> HostConfigFile {
        let path = NSTemporaryDirectory() + "snapshots-\(UUID().uuidString).json"
        try json.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try HostConfigFile.load(path: path)
    }

    @Test func aPolicyAndAScreen() throws {
        let file = try load(#"{"snapshots": {"policy": "redact", "screen": "750x1334@2"}}"#)
        #expect(file.snapshotPolicy == .redact)
        #expect(file.screen == ScreenSize(width: 750, height: 1334, scale: 2))
        #expect(try load(#"{"snapshots": {"screen": "1170x2532"}}"#).screen == .default, "scale 3 when omitted")
        #expect(try load("{}").screen == nil)
    }

    /// Empty text, a lone `@` and the like are refused with the key named, never a trap.
    @Test(arguments: ["", "@", "@3", "x", "1170x", "x2532", "0x10", "10x8193", "axb", "10x10@", "10x10@5", "10x10@0.5", "10x10x10"])
    func aScreenThatIsNotOneIsRefused(text: String) {
        #expect {
            _ = try load(#"{"snapshots": {"screen": "\#(text)"}}"#)
        } throws: { error in
            (error as? BudgetError)?.message.contains("snapshots.screen: expected WIDTHxHEIGHT[@SCALE]") == true
        }
    }
}
