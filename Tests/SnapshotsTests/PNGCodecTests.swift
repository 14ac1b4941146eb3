import AppHostProtocol
import Foundation
import Testing
@testable import Snapshots

@Suite struct PNGCodecTests {
    @Test func roundTripKeepsEveryByteWithAlpha() throws {
        var pixels: [UInt8] = []
        for i in 0..<(37 * 23) {
            pixels += [UInt8(i % 256), UInt8((i * 7) % 256), UInt8((i * 13) % 256), UInt8((i * 3) % 256)]
        }
        let image = try RGBAImage(width: 37, height: 23, pixels: pixels)
        let data = try PNGCodec.encode(image)
        #expect(Array(data.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        #expect(try PNGCodec.decode(data) == image)
    }

    @Test func opaqueImagesAreWrittenAsRGBAndReadBackAsRGBA() throws {
        var image = RGBAImage(width: 64, height: 40, fill: RGBA(10, 20, 30))
        image.pixels[4 * 65] = 200
        let data = try PNGCodec.encode(image)
        // IHDR colour type (byte 25): 2 = RGB.
        #expect(data[25] == 2)
        #expect(try PNGCodec.decode(data) == image)
        let translucent = RGBAImage(width: 4, height: 4, fill: RGBA(1, 2, 3, 4))
        #expect(try PNGCodec.encode(translucent)[25] == 6)
    }

    @Test func everyCompressionLevelRoundTrips() throws {
        let image = RGBAImage(width: 50, height: 50, fill: RGBA(99, 98, 97))
        for level in [0, 1, 6, 9] {
            #expect(try PNGCodec.decode(PNGCodec.encode(image, compressionLevel: level)) == image)
        }
        #expect(throws: SnapshotError.self) { try PNGCodec.encode(image, compressionLevel: 10) }
    }

    @Test func garbageAndBadSizesThrowInsteadOfTrapping() throws {
        #expect(throws: SnapshotError.self) { try PNGCodec.decode(Data("not a png at all".utf8)) }
        #expect(throws: SnapshotError.self) { try PNGCodec.decode(Data()) }
        let truncated = try PNGCodec.encode(RGBAImage(width: 30, height: 30, fill: .white)).prefix(40)
        #expect(throws: SnapshotError.self) { try PNGCodec.decode(Data(truncated)) }
        #expect(throws: SnapshotError.self) { try RGBAImage(width: 2, height: 2, pixels: [1, 2, 3]) }
        #expect(throws: SnapshotError.self) { try PNGCodec.encode(RGBAImage(width: 0, height: 0)) }
        var inconsistent = RGBAImage(width: 2, height: 2, fill: .white)
        inconsistent.pixels.removeLast()
        #expect(throws: SnapshotError.self) { try PNGCodec.encode(inconsistent) }
    }
}
