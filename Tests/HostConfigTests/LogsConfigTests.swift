import Foundation
import HostConfig
import Testing

/// `"logs"` in the host config: the bounds of the apps' logs, each named in its errors.
@Suite("Config: logs")
struct LogsConfigTests {
    func load(_ json: String) throws -> HostConfigFile {
        let path = NSTemporaryDirectory() + "logs-\(UUID().uuidString).json"
        try json.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try HostConfigFile.load(path: path)
    }

    @Test func sizesAndBytesAreRead() throws {
        let file = try load(#"{"logs": {"fileSize": "2 MiB", "rate": 65536, "burst": "1 MiB", "total": "64 MiB"}}"#)
        #expect(file.logs == LogSettings(fileSize: 2 << 20, rate: 65536, burst: 1 << 20, total: 64 << 20))
        #expect(try load("{}").logs == LogSettings(), "nothing given: the host's defaults")
    }

    @Test(arguments: [
        (#"{"logs": {"size": "1 MiB"}}"#, "logs.size: unknown key (known: fileSize, rate, burst, total)"),
        (#"{"logs": {"rate": "fast"}}"#, "logs.rate: not a size"),
        (#"{"logs": {"total": 100}}"#, "logs.total: at least 4 KiB"),
        (#"{"logs": {"burst": -1}}"#, "logs.burst: expected bytes"),
        (#"{"logs": []}"#, "logs: expected an object"),
    ])
    func badLogSettingsAreNamed(json: String, message: String) {
        #expect {
            _ = try load(json)
        } throws: { error in
            "\(error)".contains(message)
        }
    }
}
