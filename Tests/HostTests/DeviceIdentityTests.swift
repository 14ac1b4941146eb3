import Foundation
import Host
import TestSupport
import Testing

/// The device a state directory stands for: made once, the same for every reader, and a
/// file that is not ours is a clear error, not a new UDID.
@Suite("device identity")
struct DeviceIdentityTests {
    @Test func madeOnceAndTheSameForConcurrentMakers() async throws {
        let dir = try TempDir("device")
        defer { dir.remove() }
        #expect(try DeviceIdentity.load(stateDirectory: dir.path) == nil)
        let path = dir.path
        let made = try await withThrowingTaskGroup(of: DeviceIdentity.self) { group in
            for _ in 0..<8 { group.addTask { try DeviceIdentity.loadOrCreate(stateDirectory: path) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(made.map(\.udid)).count == 1, "every maker got the one UDID: \(made.map(\.udid))")
        let kept = try #require(try DeviceIdentity.load(stateDirectory: dir.path))
        #expect(kept == made[0])
        #expect(kept.name == "AppHost " + (dir.path as NSString).lastPathComponent)
        #expect(kept.isNamed(by: kept.udid.lowercased()) && kept.isNamed(by: kept.name) && !kept.isNamed(by: "booted"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == [DeviceIdentity.fileName], "no temporary file left")
    }

    @Test(arguments: [
        ("{\"udid\": \"not-a-uuid\", \"name\": \"x\"}", "is not a UUID"),
        ("garbage", "not a device file AppHost wrote"),
        (String(repeating: " ", count: DeviceIdentity.maximumFileSize + 1), "over 4096 bytes"),
    ])
    func aFileThatIsNotOursIsAClearError(contents: String, says: String) throws {
        let dir = try TempDir("device")
        defer { dir.remove() }
        try Data(contents.utf8).write(to: URL(fileURLWithPath: DeviceIdentity.path(stateDirectory: dir.path)))
        #expect {
            try DeviceIdentity.loadOrCreate(stateDirectory: dir.path)
        } throws: { error in
            "\(error)".contains(says) && ("\(error)".contains("delete it") || "\(error)".contains("delete the file"))
        }
        #expect(try String(contentsOfFile: DeviceIdentity.path(stateDirectory: dir.path), encoding: .utf8) == contents, "left as it was")
    }
}
