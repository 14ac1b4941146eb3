import AppHostProtocol
import Foundation
import HostConfig
import Testing

@Suite("Config: limits")
struct LimitsConfigTests {
    func load(_ json: String) throws -> HostConfigFile {
        let path = NSTemporaryDirectory() + "limits-\(UUID().uuidString).json"
        try json.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try HostConfigFile.load(path: path)
    }

    @Test func limitsForAllAppsAndPerAppOverrides() throws {
        let file = try load(#"{"limits": {"openFiles": 128, "memory": "512 MiB", "fileSize": 1048576, "apps": {"com.x": {"memory": "1GiB", "processes": 64}}}}"#)
        #expect(file.limits.all == AppLimits(openFiles: 128, fileSize: 1 << 20, memory: 512 << 20))
        #expect(file.limits.limits(for: "com.x") == AppLimits(openFiles: 128, processes: 64, fileSize: 1 << 20, memory: 1 << 30))
        #expect(file.limits.limits(for: "com.y") == AppLimits(openFiles: 128, fileSize: 1 << 20, memory: 512 << 20),
                "no process limit where none is given")
    }

    @Test func noLimitsGiveTheStandardOnes() throws {
        #expect(try load("{}").limits.limits(for: "com.a") == AppLimits.standard)
        // Nothing that needs a cgroup (its join costs every launch a grace period).
        #expect(AppLimits.standard == AppLimits(openFiles: 256))
    }

    @Test(arguments: [
        (#"{"limits": {"memroy": "1 GiB"}}"#, "limits.memroy: unknown key"),
        (#"{"limits": {"memory": "lots"}}"#, "limits.memory: not a size"),
        (#"{"limits": {"memory": "1 GiBs"}}"#, "unknown unit"),
        (#"{"limits": {"memory": "1 MiB"}}"#, "at least 16 MiB"),
        (#"{"limits": {"openFiles": 0}}"#, "limits.openFiles: expected a positive whole number"),
        (#"{"limits": {"apps": {"com.x": {"processes": 2}}}}"#, "limits.apps.com.x.processes: at least 8"),
        (#"{"limits": []}"#, "limits: expected an object"),
        (#"{"limits": {"apps": {"com x": {"processes": 8}}}}"#, #"limits.apps: "com x" is not a bundle identifier"#),
    ])
    func badLimitsAreNamed(json: String, message: String) {
        #expect {
            _ = try load(json)
        } throws: { error in
            "\(error)".contains(message) || ((error as? BudgetError)?.message.contains(message) ?? false)
        }
    }

    @Test func sizesParseAndPrint() throws {
        #expect(try ByteCountText.bytes("512 MiB") == 512 << 20)
        #expect(try ByteCountText.bytes("2G") == 2 << 30)
        #expect(try ByteCountText.bytes("1.5 GB") == 1_500_000_000)
        #expect(try ByteCountText.bytes("4096") == 4096)
        #expect(ByteCountText.format(64 << 20) == "64 MiB")
        #expect(ByteCountText.format(3 << 29) == "1.5 GiB")
    }
}
