import Foundation
import TestSupport
import Testing
@testable import Host

/// How snapshot files are written (decision 0041): over an existing file, the new bytes
/// and nothing of the old.
@Suite("Snapshot files")
struct SnapshotFileTests {
    @Test func aFileWrittenOverIsCutToItsNewLength() throws {
        let dir = try TempDir("snapfile")
        defer { dir.remove() }
        let path = dir.path + "/layer.json"
        try Supervisor.writeUnsynced(Array(repeating: UInt8(ascii: "x"), count: 100), to: path)
        try Supervisor.writeUnsynced(Array("{\"short\":1}".utf8), to: path)
        #expect(FileManager.default.contents(atPath: path) == Data("{\"short\":1}".utf8))
        try Supervisor.writeUnsynced(Array("a longer text than the one before".utf8), to: path)
        #expect(FileManager.default.contents(atPath: path) == Data("a longer text than the one before".utf8))
    }
}
