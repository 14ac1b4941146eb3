import AppHostProtocol
import Foundation
import HostConfig
import Testing

@Suite("Config: device memory")
struct DeviceMemoryConfigTests {
    func load(_ json: String) throws -> HostConfigFile {
        let path = NSTemporaryDirectory() + "memory-\(UUID().uuidString).json"
        try json.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try HostConfigFile.load(path: path)
    }

    @Test func eachProfileHasAnIPhoneLikeDeviceMemory() {
        #expect(BudgetProfile.ios6.deviceMemory == 1 << 30)
        #expect(BudgetProfile.ios7.deviceMemory == 2 << 30)
        #expect(BudgetProfile.ios13.deviceMemory == 3 << 30)
        #expect(BudgetProfile.default.deviceMemory == 3 << 30)
        #expect(BudgetProfile.all.allSatisfy { $0.deviceMemory >= MemorySettings.minimumDevice })
    }

    @Test func deviceAndSource() throws {
        let file = try load(#"{"memory": {"device": "3 GiB", "source": "psi"}}"#)
        #expect(file.memory == MemorySettings(device: 3 << 30, source: .psi))
        #expect(try load(#"{"memory": {"device": 268435456}}"#).memory == MemorySettings(device: 256 << 20, source: .computed))
        #expect(try load("{}").memory == MemorySettings(), "nothing said: the profile's device, computed pressure")
    }

    @Test func theDeviceSizeBoundsHold() throws {
        #expect(try load(#"{"memory": {"device": "32 MiB"}}"#).memory.device == MemorySettings.minimumDevice)
        #expect(try load(#"{"memory": {"device": "16 TiB"}}"#).memory.device == MemorySettings.maximumDevice)
    }

    @Test(arguments: [
        (#"{"memory": {"device": "lots"}}"#, "memory.device: not a size"),
        (#"{"memory": {"device": "3 GiBs"}}"#, "memory.device: unknown unit"),
        (#"{"memory": {"device": []}}"#, "memory.device: expected bytes or a size"),
        (#"{"memory": {"device": "31 MiB"}}"#, "memory.device: 31 MiB is out of range (32 MiB to 16 TiB)"),
        (#"{"memory": {"device": "17 TiB"}}"#, "memory.device: 17 TiB is out of range"),
        (#"{"memory": {"device": -5}}"#, "memory.device: expected bytes or a size"),
        (#"{"memory": {"source": "kernel"}}"#, "memory.source: expected one of computed, psi"),
        (#"{"memory": {"devcie": "1 GiB"}}"#, "memory.devcie: unknown key (known: device, source)"),
        (#"{"memory": "3 GiB"}"#, "memory: expected an object"),
    ])
    func badMemorySettingsNameTheKey(json: String, message: String) {
        #expect {
            _ = try load(json)
        } throws: { error in
            let text = (error as? BudgetError)?.message ?? "\(error)"
            return text.contains(message)
        }
    }
}
