import Foundation

/// A temporary directory of a test's own; removed by `remove()`. Every test target uses
/// this one, so parallel tests never share state.
public struct TempDir: Sendable {
    public let path: String

    public init(_ label: String = "t") throws {
        // Short: a control socket path inside must stay under 108 bytes.
        path = NSTemporaryDirectory() + "ah-\(label)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    public func remove() { try? FileManager.default.removeItem(atPath: path) }
}
