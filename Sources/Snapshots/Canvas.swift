import AppHostProtocol

/// The drawing primitives of snapshots, on an `RGBAImage`: fills, scaled images and text
/// runs, each clipped and blended source-over with straight alpha. Spans are written through
/// 32-bit words of the pixel buffer; opaque spans are plain stores.
struct Canvas {
    var image: RGBAImage

    init(width: Int, height: Int, fill: RGBA) {
        image = RGBAImage(width: width, height: height, fill: fill)
    }

    var bounds: PixelRect { PixelRect(x0: 0, y0: 0, x1: image.width, y1: image.height) }

    /// Fills `rect` (clipped to the canvas) with `color`, blended over what is there.
    mutating func fill(_ rect: PixelRect, _ color: RGBA) {
        let r = rect.intersection(bounds)
        guard !r.isEmpty, color.a > 0 else { return }
        let stride = image.width
        let value = packPixel(color)
        withWords { px in
            for y in r.y0..<r.y1 {
                let row = px + y * stride
                if color.a == 255 {
                    (row + r.x0).update(repeating: value, count: r.width)
                } else {
                    for x in r.x0..<r.x1 { row[x] = blend(row[x], color.r, color.g, color.b, color.a) }
                }
            }
        }
    }

    /// Draws `source` scaled (nearest neighbour, sampled at pixel centres) to fill `rect`,
    /// only where `rect`, `clip` and the canvas meet.
    mutating func draw(_ source: RGBAImage, opaque: Bool, in rect: PixelRect, clip: PixelRect) {
        let c = rect.intersection(clip).intersection(bounds)
        guard !c.isEmpty, source.width > 0, source.height > 0, source.isConsistent else { return }
        let rw = rect.width, rh = rect.height
        let sw = source.width, sh = source.height
        // Source column of each destination column, computed once.
        var columns = [Int](repeating: 0, count: c.width)
        for i in 0..<c.width {
            columns[i] = Swift.min(sw - 1, ((2 * (c.x0 + i - rect.x0) + 1) * sw) / (2 * rw))
        }
        let stride = image.width
        source.pixels.withUnsafeBufferPointer { sbytes in
            sbytes.withMemoryRebound(to: UInt32.self) { src in
                columns.withUnsafeBufferPointer { cols in
                    withWords { px in
                        var previousSourceRow = -1
                        for y in c.y0..<c.y1 {
                            let sy = Swift.min(sh - 1, ((2 * (y - rect.y0) + 1) * sh) / (2 * rh))
                            let row = px + y * stride + c.x0
                            if opaque && sy == previousSourceRow {
                                // Upscaled: the same source row again is a copy of the row above.
                                row.update(from: row - stride, count: c.width)
                                continue
                            }
                            previousSourceRow = sy
                            let srow = src.baseAddress! + sy * sw
                            if opaque {
                                for i in 0..<cols.count { row[i] = srow[cols[i]] }
                            } else {
                                for i in 0..<cols.count {
                                    let s = unpackPixel(srow[cols[i]])
                                    if s.a == 255 {
                                        row[i] = srow[cols[i]]
                                    } else if s.a > 0 {
                                        row[i] = blend(row[i], s.r, s.g, s.b, s.a)
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Draws `run` with its pen starting at `x` on `baseline`, in `color`, clipped to `clip`.
    mutating func draw(_ run: GlyphRun, x: Int, baseline: Int, color: RGBA, clip: PixelRect) {
        let c = clip.intersection(bounds)
        guard !c.isEmpty, color.a > 0 else { return }
        let stride = image.width
        let value = packPixel(color)
        withWords { px in
            var pen = 0  // 26.6
            for glyph in run.glyphs {
                defer { pen += glyph.advance }
                guard glyph.width > 0 else { continue }
                let gx = x + ((pen + 32) >> 6) + glyph.left
                let gy = baseline - glyph.top
                let box = PixelRect(x0: gx, y0: gy, x1: gx + glyph.width, y1: gy + glyph.height).intersection(c)
                guard !box.isEmpty else { continue }
                glyph.coverage.withUnsafeBufferPointer { cov in
                    for y in box.y0..<box.y1 {
                        let row = px + y * stride
                        let crow = cov.baseAddress! + (y - gy) * glyph.width
                        for x in box.x0..<box.x1 {
                            let k = Int(crow[x - gx])
                            guard k > 0 else { continue }
                            let a = color.a == 255 ? k : (k * Int(color.a) + 127) / 255
                            if a >= 255 {
                                row[x] = value
                            } else if a > 0 {
                                row[x] = blend(row[x], color.r, color.g, color.b, UInt8(a))
                            }
                        }
                    }
                }
            }
        }
    }

    private mutating func withWords(_ body: (UnsafeMutablePointer<UInt32>) -> Void) {
        image.pixels.withUnsafeMutableBufferPointer { bytes in
            bytes.withMemoryRebound(to: UInt32.self) { words in
                if let base = words.baseAddress { body(base) }
            }
        }
    }
}

/// Source-over of a straight-alpha colour with alpha `a` onto the pixel word `dst`.
@inline(__always)
func blend(_ dst: UInt32, _ r: UInt8, _ g: UInt8, _ b: UInt8, _ a: UInt8) -> UInt32 {
    let d = UInt32(littleEndian: dst)
    let sa = UInt32(a), ia = 255 - sa
    let da = d >> 24
    let dr = d & 0xFF, dg = (d >> 8) & 0xFF, db = (d >> 16) & 0xFF
    if da == 255 {
        // Opaque destination: the common case, one weighted mean per channel.
        let or = (UInt32(r) * sa + dr * ia + 127) / 255
        let og = (UInt32(g) * sa + dg * ia + 127) / 255
        let ob = (UInt32(b) * sa + db * ia + 127) / 255
        return (or | og << 8 | ob << 16 | 0xFF00_0000).littleEndian
    }
    // General: out_a = sa + da(1 − sa); out_c = (c_s·sa + c_d·da(1 − sa)) / out_a, all in 1/255ths.
    let dw = da * ia                    // destination weight × 255
    let outA255 = sa * 255 + dw         // out alpha × 255
    guard outA255 > 0 else { return 0 }
    let half = outA255 / 2
    let or = (UInt32(r) * sa * 255 + dr * dw + half) / outA255
    let og = (UInt32(g) * sa * 255 + dg * dw + half) / outA255
    let ob = (UInt32(b) * sa * 255 + db * dw + half) / outA255
    let oa = (outA255 + 127) / 255
    return (or | og << 8 | ob << 16 | oa << 24).littleEndian
}
