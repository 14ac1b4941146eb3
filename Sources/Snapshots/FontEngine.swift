import CFreeType
import Foundation

/// One rendered glyph: an 8-bit coverage bitmap and where it sits on the pen.
struct Glyph: Sendable {
    var width = 0
    var height = 0
    /// Pixels from the pen to the bitmap's left edge.
    var left = 0
    /// Pixels from the baseline up to the bitmap's top row.
    var top = 0
    /// Pen advance in 26.6 fixed point.
    var advance = 0
    var coverage: [UInt8] = []
}

/// The glyphs of one line of text at one pixel size.
struct GlyphRun: Sendable {
    var glyphs: [Glyph]
    /// Pixels above the baseline.
    var ascender: Int
    /// Pixels below the baseline (positive).
    var descender: Int

    var lineHeight: Int { ascender + descender }
    /// The pen's total advance in whole pixels.
    var advance: Int { (glyphs.reduce(0) { $0 + $1.advance } + 32) >> 6 }
}

/// FreeType and one font: a face per pixel size and a cache of rendered glyphs, shared by
/// every render in the process behind one lock (an FT_Library is not thread-safe).
///
/// The font: `$APPHOST_FONT` if set, else DejaVu Sans where Debian's fonts-dejavu-core
/// puts it (`/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf`), else where other
/// distributions' packages do; the first FreeType opens wins. No child process is run to
/// find it (no `fc-match`): this code runs inside the host, whose ProcessReaper owns the
/// process's children.
final class FontEngine: @unchecked Sendable {
    static let shared = FontEngine()

    static let debianFont = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    /// Faces kept open at once; beyond it all are closed (glyphs stay cached).
    private static let maxFaces = 16
    /// Glyphs kept; beyond it the cache starts again.
    private static let maxGlyphs = 20_000

    private struct Key: Hashable {
        var size: Int
        var scalar: UInt32
    }

    private let lock = NSLock()
    private var library: FT_Library?
    private var fontPath: String?
    private var faces: [Int: FT_Face] = [:]
    private var glyphs: [Key: Glyph] = [:]

    /// The glyphs of `text` (control characters dropped) at `pixelSize` pixels per em.
    func run(_ text: String, pixelSize: Int) throws -> GlyphRun {
        lock.lock()
        defer { lock.unlock() }
        let face = try face(pixelSize)
        var run: [Glyph] = []
        run.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars where !scalar.properties.generalCategory.isControlLike {
            let key = Key(size: pixelSize, scalar: scalar.value)
            if let glyph = glyphs[key] {
                run.append(glyph)
                continue
            }
            let glyph = render(face, scalar)
            if glyphs.count >= Self.maxGlyphs { glyphs.removeAll(keepingCapacity: true) }
            glyphs[key] = glyph
            run.append(glyph)
        }
        let metrics = face.pointee.size.pointee.metrics
        return GlyphRun(glyphs: run, ascender: (metrics.ascender + 63) >> 6, descender: (-metrics.descender + 63) >> 6)
    }

    /// The font file in use (locating it on first call).
    func fontFile() throws -> String {
        lock.lock()
        defer { lock.unlock() }
        return try openFont().path
    }

    // MARK: - Under the lock

    private func face(_ pixelSize: Int) throws -> FT_Face {
        if let face = faces[pixelSize] { return face }
        let (library, path) = try openFont()
        var opened: FT_Face?
        let rc = FT_New_Face(library, path, 0, &opened)
        guard rc == 0, let face = opened else {
            throw SnapshotError(.freeType, "FreeType cannot open \(path) (error \(rc))")
        }
        let sized = FT_Set_Pixel_Sizes(face, 0, FT_UInt(pixelSize))
        guard sized == 0 else {
            FT_Done_Face(face)
            throw SnapshotError(.freeType, "FreeType cannot size \(path) at \(pixelSize) px (error \(sized))")
        }
        if faces.count >= Self.maxFaces {
            for open in faces.values { FT_Done_Face(open) }
            faces.removeAll()
        }
        faces[pixelSize] = face
        return face
    }

    private func openFont() throws -> (library: FT_Library, path: String) {
        if library == nil {
            var lib: FT_Library?
            let rc = FT_Init_FreeType(&lib)
            guard rc == 0, let lib else { throw SnapshotError(.freeType, "FT_Init_FreeType failed (error \(rc))") }
            library = lib
        }
        guard let library else { throw SnapshotError(.freeType, "no FreeType library") }
        if let fontPath { return (library, fontPath) }
        var tried: [String] = []
        for (path, origin) in Self.candidates() {
            guard FileManager.default.isReadableFile(atPath: path) else {
                tried.append("\(path) (\(origin)): not a readable file")
                continue
            }
            var face: FT_Face?
            let rc = FT_New_Face(library, path, 0, &face)
            if rc == 0, let face {
                FT_Done_Face(face)
                fontPath = path
                return (library, path)
            }
            tried.append("\(path) (\(origin)): FreeType error \(rc)")
        }
        throw SnapshotError(.noFont, "no usable font for snapshot text; install one with `apt-get install fonts-dejavu-core` "
                            + "or set APPHOST_FONT to a TrueType file. Tried: " + (tried.isEmpty ? "nothing" : tried.joined(separator: "; ")))
    }

    private func render(_ face: FT_Face, _ scalar: Unicode.Scalar) -> Glyph {
        guard FT_Load_Char(face, FT_ULong(scalar.value), aph_ft_load_render) == 0, let slot = face.pointee.glyph else {
            return Glyph()
        }
        var glyph = Glyph(left: Int(slot.pointee.bitmap_left), top: Int(slot.pointee.bitmap_top), advance: slot.pointee.advance.x)
        let bitmap = slot.pointee.bitmap
        let width = Int(bitmap.width), rows = Int(bitmap.rows), pitch = Int(bitmap.pitch)
        guard width > 0, rows > 0, let buffer = bitmap.buffer else { return glyph }
        let gray = UInt32(bitmap.pixel_mode) == FT_PIXEL_MODE_GRAY.rawValue
        let mono = UInt32(bitmap.pixel_mode) == FT_PIXEL_MODE_MONO.rawValue
        guard gray || mono else { return glyph }
        var coverage = [UInt8](repeating: 0, count: width * rows)
        for y in 0..<rows {
            // A negative pitch stores rows bottom-up from the buffer's start.
            let row = buffer + (pitch >= 0 ? y * pitch : (rows - 1 - y) * -pitch)
            for x in 0..<width {
                coverage[y * width + x] = gray ? row[x] : ((row[x >> 3] >> (7 - UInt8(x & 7))) & 1) * 255
            }
        }
        glyph.width = width
        glyph.height = rows
        glyph.coverage = coverage
        return glyph
    }

    /// DejaVu Sans as distributions package it: Debian and Ubuntu (fonts-dejavu-core) first.
    private static let packagedFonts = [
        (debianFont, "fonts-dejavu-core"),
        ("/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf", "Fedora dejavu-sans-fonts"),
        ("/usr/share/fonts/TTF/DejaVuSans.ttf", "Arch ttf-dejavu"),
        ("/usr/share/fonts/dejavu/DejaVuSans.ttf", "Alpine font-dejavu"),
        ("/usr/share/fonts/truetype/DejaVuSans.ttf", "openSUSE dejavu-fonts"),
    ]

    /// Where to look for the font, in order, with how each was found.
    private static func candidates() -> [(String, String)] {
        var list: [(String, String)] = []
        if let env = ProcessInfo.processInfo.environment["APPHOST_FONT"], !env.isEmpty {
            list.append((env, "APPHOST_FONT"))
        }
        return list + packagedFonts
    }
}

extension Unicode.GeneralCategory {
    /// Control and format characters: nothing to draw on one line.
    var isControlLike: Bool { self == .control || self == .format || self == .lineSeparator || self == .paragraphSeparator }
}
