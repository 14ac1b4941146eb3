import AppHostProtocol
import ArgumentParser
import Foundation
import Snapshots

#if canImport(Glibc)
import Glibc
#endif

/// Issue 7: render + redact + PNG encode of a full-screen app-switcher snapshot, against
/// filling the same buffer (the least any render does) and libpng's simplified writer.
struct SnapshotBench {
    let iterations: Int
    let warmup: Int
    let screen: ScreenSize
    /// Where to leave default.png, redact.png and sheet.png, if anywhere.
    let writeDirectory: String?

    func run() throws -> Section {
        let bundle = try TempDir("snap")
        defer { bundle.remove() }
        try PNGCodec.encode(Self.heroImage(), compressionLevel: 6).write(to: URL(fileURLWithPath: bundle.path + "/hero.png"))
        let tree = Self.bankScreen()
        let clock = ContinuousClock()
        let loadBefore = Self.loadAverage()

        // The first render pays for FreeType faces and glyph bitmaps; later renders hit the caches.
        let coldStart = clock.now
        guard let first = try SnapshotRenderer.render(tree, screen: screen, policy: .redact, bundlePath: bundle.path, launchImage: nil) else {
            throw BenchError("redact gave no snapshot")
        }
        let cold = clock.now - coldStart
        guard first.warnings.isEmpty else { throw BenchError("snapshot warnings: \(first.warnings)") }

        var fill = Samples(), freshFill = Samples(), render = Samples(), redact = Samples(), encode = Samples(), whole = Samples()
        var simplified = Samples(), simplifiedFast = Samples()
        // Minor page faults per call: a fresh 11.8 MB buffer costs about 2,900 of them when the
        // allocator hands back new pages instead of recycled ones, which is most of a render's spread.
        var renderFaults = Samples(), redactFaults = Samples(), wholeFaults = Samples()
        var pngBytes = 0, simplifiedBytes = 0, simplifiedFastBytes = 0
        var textItems = (plain: 0, redacted: 0)
        for i in 0..<(warmup + iterations) {
            let keep = i >= warmup
            var t0 = clock.now
            let blank = RGBAImage(width: screen.width, height: screen.height, fill: .white)
            var t1 = clock.now
            if keep { fill.add(t1 - t0) }
            guard blank.width == screen.width else { throw BenchError("fill") }

            // The same fill into pages never touched before: what a new buffer costs when the
            // allocator cannot recycle one (mmap, memset, munmap).
            let bytes = screen.width * screen.height * 4
            t0 = clock.now
            guard let fresh = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), fresh != MAP_FAILED else {
                throw BenchError("mmap of \(bytes) bytes failed")
            }
            memset(fresh, 0xFF, bytes)
            t1 = clock.now
            munmap(fresh, bytes)
            if keep { freshFill.add(t1 - t0) }

            var f0 = minorFaults()
            t0 = clock.now
            let plain = try SnapshotRenderer.render(tree, screen: screen, policy: .default, bundlePath: bundle.path, launchImage: nil)
            t1 = clock.now
            if keep { render.add(t1 - t0); renderFaults.add(Int64(minorFaults() - f0)) }

            f0 = minorFaults()
            t0 = clock.now
            let redacted = try SnapshotRenderer.render(tree, screen: screen, policy: .redact, bundlePath: bundle.path, launchImage: nil)
            t1 = clock.now
            if keep { redact.add(t1 - t0); redactFaults.add(Int64(minorFaults() - f0)) }
            guard let plain, let redacted else { throw BenchError("no snapshot") }
            textItems = (plain.textLayer.count, redacted.textLayer.count)

            t0 = clock.now
            let png = try PNGCodec.encode(redacted.image)
            t1 = clock.now
            if keep { encode.add(t1 - t0) }
            pngBytes = png.count

            f0 = minorFaults()
            t0 = clock.now
            guard let snapshot = try SnapshotRenderer.render(tree, screen: screen, policy: .redact, bundlePath: bundle.path, launchImage: nil) else {
                throw BenchError("no snapshot")
            }
            let stored = try PNGCodec.encode(snapshot.image)
            t1 = clock.now
            if keep { whole.add(t1 - t0); wholeFaults.add(Int64(minorFaults() - f0)) }
            guard stored.count == pngBytes else { throw BenchError("the same snapshot encoded to \(stored.count) and \(pngBytes) bytes") }

            t0 = clock.now
            let slow = try SimplifiedPNGWriter.encode(redacted.image, fast: false)
            t1 = clock.now
            if keep { simplified.add(t1 - t0) }
            simplifiedBytes = slow.count

            t0 = clock.now
            let fast = try SimplifiedPNGWriter.encode(redacted.image, fast: true)
            t1 = clock.now
            if keep { simplifiedFast.add(t1 - t0) }
            simplifiedFastBytes = fast.count

            if i == 0, let dir = writeDirectory {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
                try PNGCodec.encode(plain.image).write(to: URL(fileURLWithPath: dir + "/default.png"))
                try stored.write(to: URL(fileURLWithPath: dir + "/redact.png"))
                let sheet = try ContactSheet.make([(label: "default", image: plain.image), (label: "redact", image: redacted.image)])
                try PNGCodec.encode(sheet).write(to: URL(fileURLWithPath: dir + "/sheet.png"))
                let leaks = PrivacyInspector.inspect(tree: tree, snapshot: plain, screen: screen).count
                progress("wrote default.png, redact.png, sheet.png to \(dir); inspector: \(leaks) leaks in default, "
                         + "\(PrivacyInspector.inspect(tree: tree, snapshot: redacted, screen: screen).count) in redact")
            }
        }

        let fillRow = Row("baseline: allocate + fill the RGBA buffer (white)", fill, note: "memory the allocator recycled")
        let freshRow = Row("baseline: fill a fresh mmap of the same size", freshFill, note: "first touch of every page")
        let simplifiedRow = Row("baseline: libpng png_image writer, defaults", simplified,
                                note: "\(simplifiedBytes) bytes (zlib default level 6, adaptive filters)")
        let wholeRow = Row("render (redact) + PNG encode", whole, against: freshRow,
                           note: String(format: "target median ≤ 30 ms: %@ (%.1f ms)", whole.median <= 30e6 ? "met" : "NOT met", whole.median / 1e6))
        let pixels = screen.width * screen.height
        return Section(
            title: "Snapshots (\(screen.width)×\(screen.height) px at \(formatScale(screen.scale))×, \(Self.viewCount(tree)) views; \(buildConfiguration) build)",
            rows: [
                fillRow,
                freshRow,
                Row("render, default policy", render, against: fillRow, note: "\(textItems.plain) strings in the text layer"),
                Row("render, redact policy", redact, against: freshRow, note: "\(textItems.redacted) strings left after redaction"),
                Row("PNG encode (PNGCodec, zlib 1, Up filter)", encode, against: simplifiedRow,
                    note: "\(pngBytes) bytes, \(String(format: "%.2f", Double(pngBytes * 8) / Double(pixels))) bits per pixel"),
                wholeRow,
                Row("  against the libpng simplified writer alone", whole, against: simplifiedRow),
                simplifiedRow,
                Row("libpng png_image writer, PNG_IMAGE_FLAG_FAST", simplifiedFast, against: simplifiedRow,
                    note: "\(simplifiedFastBytes) bytes (zlib level 3, no filter)"),
            ],
            notes: ["first render (cold FreeType faces and glyph cache): \(formatDuration(Double(cold.nanoseconds)))",
                    "minor page faults per call, median (min–max): render \(faults(renderFaults)), redact render \(faults(redactFaults)), "
                        + "render + encode \(faults(wholeFaults)); a fresh \(String(format: "%.1f", Double(pixels * 4) / 1e6)) MB buffer is \(pixels * 4 / 4096) pages",
                    "intervals interleaved in every iteration; \(iterations) kept after \(warmup) warm-up; "
                        + "1-minute load average \(loadBefore) before, \(Self.loadAverage()) after (other work on the machine slows every row alike)"])
    }

    private func faults(_ s: Samples) -> String { String(format: "%.0f (%.0f–%.0f)", s.median, s.min, s.max) }

    private func minorFaults() -> Int {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return usage.ru_minflt
    }

    private func formatScale(_ s: Double) -> String { s == s.rounded() ? String(Int(s)) : String(s) }

    static func loadAverage() -> String {
        (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").first.map(String.init) ?? "?"
    }

    static func viewCount(_ tree: ViewTree) -> Int {
        func count(_ v: ViewNode) -> Int { 1 + v.subviews.map(count).reduce(0, +) }
        return tree.views.map(count).reduce(0, +)
    }

    /// A 390×220 photo-like picture (gradient and noise), drawn 3× on screen.
    static func heroImage() throws -> RGBAImage {
        let w = 390, h = 220
        var pixels = [UInt8](repeating: 255, count: w * h * 4)
        var seed: UInt32 = 12345
        for y in 0..<h {
            for x in 0..<w {
                seed = seed &* 1_103_515_245 &+ 12345
                let noise = Int(seed >> 27)
                let i = (y * w + x) * 4
                pixels[i] = UInt8(min(255, 40 + x * 180 / w + noise))
                pixels[i + 1] = UInt8(min(255, 90 + y * 120 / h + noise))
                pixels[i + 2] = UInt8(min(255, 160 + (x + y) * 60 / (w + h) + noise))
            }
        }
        return try RGBAImage(width: w, height: h, pixels: pixels)
    }

    /// A banking app's home screen in points (390 × 844): bars, a hero image, two privacy-sensitive
    /// account cards, a transfer form with a secure PIN field, a button, a tab bar, a badge.
    static func bankScreen() -> ViewTree {
        func label(_ text: String, _ x: Double, _ y: Double, _ w: Double, _ h: Double, _ size: Double,
                   _ color: RGBA = .black) -> ViewNode {
            ViewNode(content: .label(text: text, fontSize: size, color: color), frame: Rect(x: x, y: y, width: w, height: h))
        }
        let grey = RGBA(142, 142, 147), bar = RGBA(248, 248, 248), field = RGBA(242, 242, 247), blue = RGBA(0, 122, 255)
        func card(_ y: Double, _ name: String, _ balance: String) -> ViewNode {
            ViewNode(frame: Rect(x: 16, y: y, width: 358, height: 96), backgroundColor: .white, isPrivacySensitive: true, subviews: [
                label(name, 16, 10, 300, 22, 15),
                label(balance, 16, 34, 300, 36, 28),
                label("Available balance", 16, 70, 300, 18, 13, grey),
            ])
        }
        func tab(_ text: String, _ i: Double) -> ViewNode { label(text, 20 + i * 95, 8, 80, 20, 11, i == 0 ? blue : grey) }
        return ViewTree(backgroundColor: field, views: [
            ViewNode(frame: Rect(x: 0, y: 0, width: 390, height: 47), backgroundColor: bar,
                     subviews: [label("9:41", 24, 14, 60, 20, 15), label("5G  100%", 300, 14, 80, 20, 13)]),
            ViewNode(frame: Rect(x: 0, y: 47, width: 390, height: 52), backgroundColor: .white,
                     subviews: [label("Accounts", 16, 4, 300, 44, 30)]),
            ViewNode(content: .image(name: "hero.png"), frame: Rect(x: 0, y: 99, width: 390, height: 220)),
            card(335, "Checking ••4821", "$12,480.33"),
            card(443, "Savings ••0077", "$48,210.00"),
            label("TRANSFER", 32, 550, 200, 20, 13, grey),
            ViewNode(content: .textField(text: "", placeholder: "Amount", fontSize: 17, color: .black),
                     frame: Rect(x: 16, y: 576, width: 358, height: 44), backgroundColor: .white),
            ViewNode(content: .textField(text: "Rent for May", placeholder: "Memo", fontSize: 17, color: .black),
                     frame: Rect(x: 16, y: 628, width: 358, height: 44), backgroundColor: .white),
            ViewNode(content: .secureTextField(text: "482913", fontSize: 17, color: .black),
                     frame: Rect(x: 16, y: 680, width: 358, height: 44), backgroundColor: .white),
            ViewNode(frame: Rect(x: 16, y: 735, width: 358, height: 50), backgroundColor: blue,
                     subviews: [label("Send", 155, 12, 60, 26, 17, .white)]),
            ViewNode(frame: Rect(x: 0, y: 795, width: 390, height: 49), backgroundColor: bar, subviews: [
                ViewNode(frame: Rect(x: 0, y: 0, width: 390, height: 0.34), backgroundColor: RGBA(0, 0, 0, 76)),
                tab("Home", 0), tab("Cards", 1), tab("Pay", 2), tab("More", 3),
            ]),
            ViewNode(frame: Rect(x: 340, y: 58, width: 26, height: 26), backgroundColor: RGBA(255, 59, 48, 230),
                     subviews: [label("3", 8, 3, 14, 20, 15, .white)]),
        ])
    }
}

extension AppHostBench {
    struct SnapshotCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "snapshot",
            abstract: "Render + redact + PNG encode of a full-screen app-switcher snapshot vs a buffer fill and libpng's simplified writer.")
        @OptionGroup var common: CommonOptions

        @Option(help: "Screen width in pixels.")
        var width = ScreenSize.default.width
        @Option(help: "Screen height in pixels.")
        var height = ScreenSize.default.height
        @Option(help: "Points-to-pixels scale.")
        var scale = ScreenSize.default.scale
        @Option(help: "Write default.png, redact.png and sheet.png of the first iteration to this directory.")
        var writePng: String?

        func validate() throws {
            guard width > 0, height > 0, width <= 16384, height <= 16384 else { throw ValidationError("--width and --height must be 1...16384") }
            guard scale > 0, scale <= 16 else { throw ValidationError("--scale must be above 0, at most 16") }
        }

        func run() throws {
            var report = Report()
            progress("snapshot: \(common.iterations) iterations after \(common.warmup) warm-up")
            report.sections = [try SnapshotBench(iterations: common.iterations, warmup: common.warmup,
                                                 screen: ScreenSize(width: width, height: height, scale: scale),
                                                 writeDirectory: writePng).run()]
            try report.emit(json: common.json)
        }
    }
}
