import AppHostProtocol

/// An 8-bit RGBA image: straight (not premultiplied) alpha, rows top to bottom.
public struct RGBAImage: Sendable, Equatable {
    public var width: Int
    public var height: Int
    /// `width × height × 4` bytes: R, G, B, A of each pixel, row-major.
    public var pixels: [UInt8]

    /// The largest image this module makes or decodes (64 Mi pixels, 256 MiB).
    public static let maxPixelCount = 64 * 1024 * 1024

    /// An image of one colour. Sizes must be non-negative and at most `maxPixelCount` pixels.
    public init(width: Int, height: Int, fill: RGBA = .clear) {
        precondition(width >= 0 && height >= 0 && (height == 0 || width <= RGBAImage.maxPixelCount / height),
                     "image size \(width)×\(height) out of range")
        self.width = width
        self.height = height
        let count = width * height
        if fill == .clear {
            pixels = [UInt8](repeating: 0, count: count * 4)
        } else {
            let value = packPixel(fill)
            pixels = [UInt8](unsafeUninitializedCapacity: count * 4) { buffer, initialized in
                UnsafeMutableBufferPointer(rebasing: buffer[0..<count * 4]).withMemoryRebound(to: UInt32.self) {
                    $0.initialize(repeating: value)
                }
                initialized = count * 4
            }
        }
    }

    /// Wraps pixels made elsewhere; throws unless there are exactly `width × height × 4` bytes.
    public init(width: Int, height: Int, pixels: [UInt8]) throws {
        guard width >= 0, height >= 0, height == 0 || width <= RGBAImage.maxPixelCount / height else {
            throw SnapshotError(.invalidArgument, "image size \(width)×\(height) out of range")
        }
        guard pixels.count == width * height * 4 else {
            throw SnapshotError(.invalidArgument, "\(pixels.count) bytes for a \(width)×\(height) RGBA image (needs \(width * height * 4))")
        }
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// The pixel at column `x`, row `y` (both must be inside the image).
    public func pixel(x: Int, y: Int) -> RGBA {
        precondition(x >= 0 && x < width && y >= 0 && y < height, "pixel (\(x), \(y)) outside a \(width)×\(height) image")
        let i = (y * width + x) * 4
        return RGBA(pixels[i], pixels[i + 1], pixels[i + 2], pixels[i + 3])
    }

    /// Whether `pixels` holds exactly `width × height × 4` bytes.
    var isConsistent: Bool {
        width >= 0 && height >= 0 && (height == 0 || width <= RGBAImage.maxPixelCount / height) && pixels.count == width * height * 4
    }

    /// Whether every pixel has alpha 255 (a word-wide AND over the buffer).
    var isOpaque: Bool {
        pixels.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: UInt32.self) { words in
                var all: UInt32 = 0xFFFF_FFFF
                for w in words { all &= w }
                return UInt32(littleEndian: all) >> 24 == 0xFF
            }
        }
    }
}

/// One pixel as the 32-bit word it is in memory (R first), in host order for arithmetic.
@inline(__always)
func packPixel(_ c: RGBA) -> UInt32 {
    (UInt32(c.r) | UInt32(c.g) << 8 | UInt32(c.b) << 16 | UInt32(c.a) << 24).littleEndian
}

@inline(__always)
func unpackPixel(_ word: UInt32) -> RGBA {
    let v = UInt32(littleEndian: word)
    return RGBA(UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v >> 16), UInt8(truncatingIfNeeded: v >> 24))
}
