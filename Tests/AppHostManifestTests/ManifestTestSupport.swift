import Foundation
import Testing
import AppHostProtocol
@testable import AppHostManifest

/// A fresh folder under the system temporary directory, removed when `body` returns.
func withTempDir<T>(_ body: (String) throws -> T) throws -> T {
    let dir = (NSTemporaryDirectory() as NSString).appendingPathComponent("apphost-manifest-\(UUID().uuidString)")
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return try body(dir)
}

/// Writes `text` to `dir/name`, creating folders on the way, and returns the path.
@discardableResult
func write(_ text: String, to name: String, in dir: String) throws -> String {
    try write(Data(text.utf8), to: name, in: dir)
}

/// Writes `data` to `dir/name`, creating folders on the way, and returns the path.
@discardableResult
func write(_ data: Data, to name: String, in dir: String) throws -> String {
    let path = (dir as NSString).appendingPathComponent(name)
    try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                            withIntermediateDirectories: true)
    try data.write(to: URL(fileURLWithPath: path))
    return path
}

/// Writes an executable shell script at `dir/name`.
@discardableResult
func writeExecutable(_ name: String, in dir: String, mode: Int = 0o755) throws -> String {
    let path = try write("#!/bin/sh\nexit 0\n", to: name, in: dir)
    try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
    return path
}

/// An XML property list whose top-level dictionary holds `body` (already XML).
func plist(_ body: String) -> String {
    """
    <?xml version="1.0" encoding="UTF-8"?>
    <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
    <plist version="1.0">
    <dict>
    \(body)
    </dict>
    </plist>

    """
}

/// `<key>k</key><string>v</string>` lines for each pair, in order.
func strings(_ pairs: KeyValuePairs<String, String>) -> String {
    pairs.map { "\t<key>\($0.key)</key>\n\t<string>\($0.value)</string>" }.joined(separator: "\n")
}

/// `<key>k</key><array><string>…</string>…</array>`.
func array(_ key: String, _ values: [String]) -> String {
    "\t<key>\(key)</key>\n\t<array>\n" + values.map { "\t\t<string>\($0)</string>\n" }.joined() + "\t</array>"
}

/// The identity keys of a typical Xcode Info.plist.
let xcodeIdentity = strings([
    "CFBundleIdentifier": "$(PRODUCT_BUNDLE_IDENTIFIER)",
    "CFBundleExecutable": "$(EXECUTABLE_NAME)",
    "CFBundleName": "$(PRODUCT_NAME)",
])
