import AppHostProtocol
import Foundation
@testable import Snapshots

/// A directory of a test's own under /tmp, removed by `remove()`.
struct TempBundle {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "/snapshots-test-\(UUID().uuidString.prefix(8)).app"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func write(_ name: String, _ data: Data) throws {
        try data.write(to: URL(fileURLWithPath: path + "/" + name))
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// A small screen at 2×, so frames in points are easy to turn into pixels by hand.
let smallScreen = ScreenSize(width: 400, height: 600, scale: 2)

/// Renders `tree` on `screen` (a `nil` result is a test failure).
func render(_ tree: ViewTree, policy: SnapshotPolicy = .default, screen: ScreenSize = smallScreen,
            bundle: String = "/nonexistent", launchImage: String? = nil) throws -> RenderedSnapshot {
    guard let snapshot = try SnapshotRenderer.render(tree, screen: screen, policy: policy, bundlePath: bundle, launchImage: launchImage) else {
        throw SnapshotError(.invalidArgument, "no snapshot under \(policy)")
    }
    return snapshot
}

/// A 2×2 PNG: red, green / blue, white.
func quadrantPNG() throws -> Data {
    let pixels: [UInt8] = [255, 0, 0, 255, 0, 255, 0, 255,
                           0, 0, 255, 255, 255, 255, 255, 255]
    return try PNGCodec.encode(try RGBAImage(width: 2, height: 2, pixels: pixels))
}

extension RGBAImage {
    /// Every pixel inside `x0..<x1, y0..<y1` (pixels).
    func pixels(inX x: Range<Int>, y: Range<Int>) -> [RGBA] {
        y.flatMap { yy in x.map { xx in pixel(x: xx, y: yy) } }
    }

    /// Every pixel of the image.
    var allPixels: [RGBA] { pixels(inX: 0..<width, y: 0..<height) }

    /// Every pixel outside the rectangle.
    func pixels(outsideX x: Range<Int>, y: Range<Int>) -> [RGBA] {
        var out: [RGBA] = []
        for yy in 0..<height {
            for xx in 0..<width where !(x.contains(xx) && y.contains(yy)) { out.append(pixel(x: xx, y: yy)) }
        }
        return out
    }
}

func label(_ text: String, _ frame: Rect, size: Double = 12, color: RGBA = .black, sensitive: Bool = false) -> ViewNode {
    ViewNode(content: .label(text: text, fontSize: size, color: color), frame: frame, isPrivacySensitive: sensitive)
}
