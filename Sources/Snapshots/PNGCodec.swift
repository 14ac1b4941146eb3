import CPNG
import Foundation

/// PNG through libpng: encode with the classic API (zlib level and row filter chosen
/// for speed), decode with the simplified `png_image` API.
public enum PNGCodec {
    /// Encodes `image` as an 8-bit PNG: RGB when every pixel is opaque (the alpha bytes
    /// carry nothing), RGBA otherwise. `compressionLevel` is zlib's, 0–9; the default, 1,
    /// with the Up filter is the fastest setting measured on snapshots (see docs/benchmarks/2026-11-22-snapshots-issue-7.md).
    public static func encode(_ image: RGBAImage, compressionLevel: Int = 1) throws -> Data {
        guard image.isConsistent, image.width > 0, image.height > 0, image.width <= Int(Int32.max), image.height <= Int(Int32.max) else {
            throw SnapshotError(.invalidArgument, "cannot encode a \(image.width)×\(image.height) image with \(image.pixels.count) bytes of pixels")
        }
        guard (0...9).contains(compressionLevel) else {
            throw SnapshotError(.invalidArgument, "compression level \(compressionLevel) is not 0–9")
        }
        let opaque = image.isOpaque
        var out = aph_png_output()
        let rc = image.pixels.withUnsafeBufferPointer { px in
            aph_png_encode_rgba(px.baseAddress, UInt32(image.width), UInt32(image.height), opaque ? 1 : 0,
                                Int32(compressionLevel), Int32(PNG_FILTER_UP), &out)
        }
        guard rc == 0, let data = out.data else {
            let message = withUnsafeBytes(of: &out.message) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            throw SnapshotError(.png, "libpng could not encode a \(image.width)×\(image.height) image: \(message)")
        }
        return Data(bytesNoCopy: data, count: out.size, deallocator: .free)
    }

    /// Decodes any PNG libpng reads (palette, grey, 16-bit, with tRNS…) into 8-bit straight RGBA.
    public static func decode(_ data: Data) throws -> RGBAImage {
        guard !data.isEmpty else { throw SnapshotError(.png, "not a PNG: no bytes") }
        return try data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> RGBAImage in
            var png = png_image()
            png.version = png_uint_32(PNG_IMAGE_VERSION)
            guard png_image_begin_read_from_memory(&png, bytes.baseAddress, bytes.count) != 0 else {
                throw SnapshotError(.png, "not a readable PNG: \(message(of: &png))")
            }
            let width = Int(png.width), height = Int(png.height)
            guard width > 0, height > 0, width <= RGBAImage.maxPixelCount / height else {
                png_image_free(&png)
                throw SnapshotError(.png, "PNG of \(width)×\(height) pixels is larger than \(RGBAImage.maxPixelCount) pixels")
            }
            png.format = aph_png_format_rgba
            var failure: String?
            let pixels = [UInt8](unsafeUninitializedCapacity: width * height * 4) { buffer, initialized in
                if png_image_finish_read(&png, nil, buffer.baseAddress, 0, nil) != 0 {
                    initialized = width * height * 4
                } else {
                    failure = message(of: &png)
                    initialized = 0
                }
            }
            if let failure { throw SnapshotError(.png, "PNG of \(width)×\(height) could not be decoded: \(failure)") }
            return try RGBAImage(width: width, height: height, pixels: pixels)
        }
    }

    private static func message(of png: inout png_image) -> String {
        let text = withUnsafeBytes(of: &png.message) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return text.isEmpty ? "libpng gave no reason" : text
    }
}

/// libpng's simplified writer with its own settings, for the benchmark's baseline only.
package enum SimplifiedPNGWriter {
    /// `png_image_write_to_memory` as libpng's manual shows it: size first, then write;
    /// `fast` sets PNG_IMAGE_FLAG_FAST (zlib level 3, no filter).
    package static func encode(_ image: RGBAImage, fast: Bool) throws -> Data {
        guard image.isConsistent, image.width > 0, image.height > 0 else {
            throw SnapshotError(.invalidArgument, "cannot encode a \(image.width)×\(image.height) image")
        }
        var png = png_image()
        png.version = png_uint_32(PNG_IMAGE_VERSION)
        png.width = png_uint_32(image.width)
        png.height = png_uint_32(image.height)
        png.format = aph_png_format_rgba
        png.flags = fast ? png_uint_32(PNG_IMAGE_FLAG_FAST) : 0
        return try image.pixels.withUnsafeBufferPointer { px -> Data in
            var size: png_alloc_size_t = 0
            guard png_image_write_to_memory(&png, nil, &size, 0, px.baseAddress, 0, nil) != 0, size > 0 else {
                throw SnapshotError(.png, "png_image_write_to_memory (size) failed")
            }
            var data = Data(count: size)
            let ok = data.withUnsafeMutableBytes { out in
                png_image_write_to_memory(&png, out.baseAddress, &size, 0, px.baseAddress, 0, nil) != 0
            }
            guard ok else { throw SnapshotError(.png, "png_image_write_to_memory failed") }
            data.count = size
            return data
        }
    }
}
