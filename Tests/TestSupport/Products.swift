import Foundation

/// Where SwiftPM put the products: the sample apps, `apphost` and `apphost-transferd` are
/// built beside the test bundle (`<products>/AppHostPackageTests.xctest` on Linux).
public let productsDirectory: String = {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var dir = (exe as NSString).deletingLastPathComponent
    if dir.hasSuffix(".xctest") { dir = (dir as NSString).deletingLastPathComponent }
    return dir
}()
