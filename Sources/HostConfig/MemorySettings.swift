import Foundation

/// Where the host's memory pressure comes from (`"memory": {"source": ...}` in `--config`).
public enum MemoryPressureSource: String, Codable, Sendable, CaseIterable {
    /// The sum of the apps' footprints against the device memory (the default).
    case computed
    /// The computed pressure, and the kernel's pressure stall information on top:
    /// triggers written to `/proc/pressure/memory` and waited on with `poll(2)`.
    case psi
}

/// The host config's `"memory"`: the simulated device's memory and where pressure comes from.
///
/// ```json
/// "memory": { "device": "3 GiB", "source": "psi" }
/// ```
public struct MemorySettings: Sendable, Equatable {
    /// The device's memory in bytes; nil: the profile's figure (``BudgetProfile/deviceMemory``).
    public var device: UInt64?
    /// Computed from footprints (default), or the kernel's PSI on top.
    public var source: MemoryPressureSource = .computed

    public init(device: UInt64? = nil, source: MemoryPressureSource = .computed) {
        self.device = device
        self.source = source
    }

    /// The smallest device memory a config may name: a few apps' runtimes (about 10 MiB each).
    public static let minimumDevice: UInt64 = 32 << 20
    /// The largest: 16 TiB.
    public static let maximumDevice: UInt64 = 16 << 40
    public static let keys = ["device", "source"]

    /// Parses the `"memory"` object; errors name the file and the key.
    static func parse(_ value: Any, path: String) throws(BudgetError) -> MemorySettings {
        guard let dict = value as? [String: Any] else { throw BudgetError(message: "\(path): memory: expected an object") }
        var settings = MemorySettings()
        for (key, raw) in dict {
            switch key {
            case "device":
                settings.device = try device(raw, path: path)
            case "source":
                guard let text = raw as? String, let source = MemoryPressureSource(rawValue: text) else {
                    throw BudgetError(message: "\(path): memory.source: expected one of \(MemoryPressureSource.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                settings.source = source
            default:
                throw BudgetError(message: "\(path): memory.\(key): unknown key (known: \(keys.joined(separator: ", ")))")
            }
        }
        return settings
    }

    /// A device size written as text ("512 MiB"), within the bounds (scenario files).
    public static func device(_ text: String) throws(BudgetError) -> UInt64 {
        let bytes = try ByteCountText.bytes(text)
        guard bytes >= minimumDevice, bytes <= maximumDevice else {
            throw BudgetError(message: "\(ByteCountText.format(bytes)) is out of range (\(ByteCountText.format(minimumDevice)) to \(ByteCountText.format(maximumDevice)))")
        }
        return bytes
    }

    /// A device size: bytes or a size like "3 GiB", within the bounds.
    static func device(_ raw: Any, path: String) throws(BudgetError) -> UInt64 {
        let bytes = try ByteCountText.bytes(raw, key: "memory.device", path: path, example: "3 GiB")
        guard bytes >= minimumDevice, bytes <= maximumDevice else {
            throw BudgetError(message: "\(path): memory.device: \(ByteCountText.format(bytes)) is out of range (\(ByteCountText.format(minimumDevice)) to \(ByteCountText.format(maximumDevice)))")
        }
        return bytes
    }
}
