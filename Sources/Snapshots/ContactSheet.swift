import AppHostProtocol

/// Snapshots side by side on one image, as the app switcher lays them out.
public enum ContactSheet {
    /// The sheet's background.
    public static let background = RGBA(230, 230, 230)
    static let labelColor = RGBA(40, 40, 40)
    static let borderColor = RGBA(180, 180, 186)

    /// Draws `images` left to right on a light grey sheet, each scaled to `thumbnailWidth`
    /// pixels wide (aspect kept; averaged when shrinking), with its label under it.
    /// Throws when there is no image, a size is out of range, or text cannot be drawn.
    public static func make(_ images: [(label: String, image: RGBAImage)], thumbnailWidth: Int = 300) throws -> RGBAImage {
        guard !images.isEmpty else { throw SnapshotError(.invalidArgument, "a contact sheet needs at least one image") }
        guard (16...4096).contains(thumbnailWidth) else {
            throw SnapshotError(.invalidArgument, "thumbnail width \(thumbnailWidth) out of range (16–4096)")
        }
        for (label, image) in images where !image.isConsistent || image.width == 0 || image.height == 0 {
            throw SnapshotError(.invalidArgument, "image \"\(label)\" is \(image.width)×\(image.height) with \(image.pixels.count) bytes of pixels")
        }
        let margin = Swift.max(8, thumbnailWidth / 12)
        let fontPixels = Swift.max(10, thumbnailWidth / 15)
        let heights = images.map { Swift.max(1, Int((Double($0.image.height) * Double(thumbnailWidth) / Double($0.image.width)).rounded())) }
        let thumbnailHeight = heights.max() ?? 1
        let metricsRun = try FontEngine.shared.run("", pixelSize: fontPixels)
        let labelHeight = metricsRun.lineHeight + margin / 2
        let width = margin + images.count * (thumbnailWidth + margin)
        let height = margin + thumbnailHeight + labelHeight + margin
        guard height <= 16384, width <= RGBAImage.maxPixelCount / height else {
            throw SnapshotError(.invalidArgument, "a sheet of \(images.count) images \(thumbnailWidth) px wide would be \(width)×\(height) px; too large")
        }
        var canvas = Canvas(width: width, height: height, fill: background)
        for (i, entry) in images.enumerated() {
            let x = margin + i * (thumbnailWidth + margin)
            let rect = PixelRect(x0: x, y0: margin, x1: x + thumbnailWidth, y1: margin + heights[i])
            canvas.fill(PixelRect(x0: rect.x0 - 1, y0: rect.y0 - 1, x1: rect.x1 + 1, y1: rect.y1 + 1), borderColor)
            canvas.fill(rect, background)
            let thumbnail = entry.image.width > thumbnailWidth ? shrink(entry.image, width: thumbnailWidth, height: heights[i]) : entry.image
            canvas.draw(thumbnail, opaque: thumbnail.isOpaque, in: rect, clip: canvas.bounds)
            let run = try FontEngine.shared.run(entry.label, pixelSize: fontPixels)
            let slot = PixelRect(x0: x, y0: margin + thumbnailHeight + margin / 4, x1: x + thumbnailWidth, y1: margin + thumbnailHeight + labelHeight)
            let textX = x + Swift.max(0, (thumbnailWidth - run.advance) / 2)
            let top = slot.y0 + (slot.height - run.lineHeight) / 2
            canvas.draw(run, x: textX, baseline: top + run.ascender, color: labelColor, clip: slot)
        }
        return canvas.image
    }

    /// Area-averaged (box filter) reduction, weighted by alpha so transparent pixels add no colour.
    static func shrink(_ source: RGBAImage, width: Int, height: Int) -> RGBAImage {
        var out = RGBAImage(width: width, height: height)
        let sw = source.width, sh = source.height
        let x0s = (0...width).map { $0 * sw / width }
        source.pixels.withUnsafeBufferPointer { src in
            out.pixels.withUnsafeMutableBufferPointer { dst in
                for y in 0..<height {
                    let sy0 = y * sh / height, sy1 = Swift.max(sy0 + 1, (y + 1) * sh / height)
                    for x in 0..<width {
                        let sx0 = x0s[x], sx1 = Swift.max(sx0 + 1, x0s[x + 1])
                        var r = 0, g = 0, b = 0, a = 0
                        for sy in sy0..<Swift.min(sy1, sh) {
                            var i = (sy * sw + sx0) * 4
                            for _ in sx0..<Swift.min(sx1, sw) {
                                let pa = Int(src[i + 3])
                                r += Int(src[i]) * pa
                                g += Int(src[i + 1]) * pa
                                b += Int(src[i + 2]) * pa
                                a += pa
                                i += 4
                            }
                        }
                        let n = (Swift.min(sy1, sh) - sy0) * (Swift.min(sx1, sw) - sx0)
                        let o = (y * width + x) * 4
                        if a > 0 {
                            dst[o] = UInt8((r + a / 2) / a)
                            dst[o + 1] = UInt8((g + a / 2) / a)
                            dst[o + 2] = UInt8((b + a / 2) / a)
                            dst[o + 3] = UInt8((a + n / 2) / n)
                        }
                    }
                }
            }
        }
        return out
    }
}
