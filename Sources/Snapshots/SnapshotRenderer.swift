import AppHostProtocol
import Foundation

/// One string of a snapshot's text layer: what someone looking at the picture can read.
public struct TextItem: Codable, Equatable, Sendable {
    /// The string as drawn: a secure field's bullets, never its text.
    public var text: String
    /// Where it is drawn, in absolute screen points: the line box of the text clipped to its view.
    public var frame: Rect
    /// `label`, `textField`, `placeholder` or `secureTextField`.
    public var kind: String

    public init(text: String, frame: Rect, kind: String) {
        self.text = text
        self.frame = frame
        self.kind = kind
    }
}

/// A snapshot as taken: the picture, its text layer, and what could not be drawn.
public struct RenderedSnapshot: Sendable, Equatable {
    public var image: RGBAImage
    /// Every visible string after the policy, in draw order.
    public var textLayer: [TextItem]
    /// Images that could not be read, text that could not be drawn; the rest was drawn.
    public var warnings: [String]
    /// The policy it was rendered under (`launchImage`: the picture is not of the view tree).
    public var policy: SnapshotPolicy

    public init(image: RGBAImage, textLayer: [TextItem], warnings: [String], policy: SnapshotPolicy = .default) {
        self.image = image
        self.textLayer = textLayer
        self.warnings = warnings
        self.policy = policy
    }
}

/// Renders an app's view tree the way the app switcher shows it, under a snapshot policy.
public enum SnapshotRenderer {
    /// Horizontal inset of a text field's text, in points.
    public static let textFieldInset = 8.0
    /// The colour of a text field's placeholder (iOS's system grey).
    public static let placeholderColor = RGBA(142, 142, 147)
    /// Views nested deeper than this are not drawn (and a warning says so).
    public static let maxDepth = 64
    /// The bullet a secure text field shows for each character.
    public static let bullet: Character = "\u{2022}"

    /// Renders `tree` on `screen` under `policy`; nil for `.none` (nothing is kept).
    ///
    /// Frames are points relative to the parent, drawn at `screen.scale`: the window
    /// background, then each view depth-first (parent, then its subviews; later siblings
    /// on top), hidden views and their subviews skipped. `.redact` paints every secure
    /// text field and every privacy-sensitive view (with its subviews) solid
    /// `RGBA.redaction`. `.launchImage` draws the PNG `bundlePath/launchImage` scaled to
    /// the screen, or a plain `RGBA.launchBackground` screen. Images are PNGs relative to
    /// `bundlePath`; one that cannot be read draws nothing and adds a warning.
    /// Throws when the screen size is out of range or text must be drawn and no font is found.
    public static func render(_ tree: ViewTree, screen: ScreenSize, policy: SnapshotPolicy, bundlePath: String,
                              launchImage: String?) throws -> RenderedSnapshot? {
        try validate(screen)
        switch policy {
        case .none:
            return nil
        case .launchImage:
            var canvas = Canvas(width: screen.width, height: screen.height, fill: .launchBackground)
            var warnings: [String] = []
            if let launchImage {
                switch BundleImage.load(launchImage, bundlePath: bundlePath) {
                case .success(let image):
                    canvas.draw(image.image, opaque: image.opaque, in: canvas.bounds, clip: canvas.bounds)
                case .failure(let reason):
                    warnings.append("launch image \"\(launchImage)\": \(reason.text); drew the plain launch screen")
                }
            }
            return RenderedSnapshot(image: canvas.image, textLayer: [], warnings: warnings, policy: .launchImage)
        case .default, .redact:
            var renderer = TreeRenderer(screen: screen, redact: policy == .redact, bundlePath: bundlePath, background: tree.backgroundColor)
            for (i, view) in tree.views.enumerated() {
                try renderer.draw(view, x: 0, y: 0, path: "window/\(i)", depth: 1)
            }
            return renderer.finish()
        }
    }

    static func validate(_ screen: ScreenSize) throws {
        guard screen.width > 0, screen.height > 0, screen.width <= 16384, screen.height <= 16384 else {
            throw SnapshotError(.invalidArgument, "screen \(screen.width)×\(screen.height) px out of range (1–16384 each)")
        }
        guard screen.scale.isFinite, screen.scale > 0, screen.scale <= 16 else {
            throw SnapshotError(.invalidArgument, "screen scale \(screen.scale) out of range (above 0, at most 16)")
        }
    }
}

extension ViewNode.Content {
    var isSecure: Bool {
        if case .secureTextField = self { return true }
        return false
    }
}

/// One render of a view tree: the canvas, and in draw order the text drawn and the opaque
/// areas painted, from which the visible text layer is worked out at the end.
struct TreeRenderer {
    private enum Op {
        /// An opaque area: a view's opaque background, an opaque image, a redaction.
        case cover(PixelRect)
        /// Text drawn inside this box (clipped to its view and the screen).
        case text(TextItem, PixelRect)
    }

    private var canvas: Canvas
    private let scale: Double
    private let redact: Bool
    private let bundlePath: String
    private var ops: [Op] = []
    private var warnings: [String] = []

    init(screen: ScreenSize, redact: Bool, bundlePath: String, background: RGBA) {
        canvas = Canvas(width: screen.width, height: screen.height, fill: background)
        scale = screen.scale
        self.redact = redact
        self.bundlePath = bundlePath
    }

    mutating func draw(_ view: ViewNode, x: Double, y: Double, path: String, depth: Int) throws {
        guard !view.isHidden else { return }
        guard depth <= SnapshotRenderer.maxDepth else {
            warnings.append("\(path): views nested deeper than \(SnapshotRenderer.maxDepth) levels were not drawn")
            return
        }
        let absolute = Rect(x: x + view.frame.x, y: y + view.frame.y, width: view.frame.width, height: view.frame.height)
        let frame = PixelRect(points: absolute, scale: scale)
        if redact && (view.isPrivacySensitive || view.content.isSecure) {
            canvas.fill(frame, .redaction)
            cover(frame)
            return
        }
        if let background = view.backgroundColor {
            canvas.fill(frame, background)
            if background.a == 255 { cover(frame) }
        }
        switch view.content {
        case .none:
            break
        case .label(let text, let fontSize, let color):
            try drawText(text, kind: "label", fontSize: fontSize, color: color, frame: frame, inset: 0, path: path)
        case .textField(let text, let placeholder, let fontSize, let color):
            let inset = Int((SnapshotRenderer.textFieldInset * scale).rounded())
            if !text.isEmpty {
                try drawText(text, kind: "textField", fontSize: fontSize, color: color, frame: frame, inset: inset, path: path)
            } else if let placeholder, !placeholder.isEmpty {
                try drawText(placeholder, kind: "placeholder", fontSize: fontSize, color: SnapshotRenderer.placeholderColor,
                             frame: frame, inset: inset, path: path)
            }
        case .secureTextField(let text, let fontSize, let color):
            let bullets = String(repeating: SnapshotRenderer.bullet, count: text.count)
            let inset = Int((SnapshotRenderer.textFieldInset * scale).rounded())
            try drawText(bullets, kind: "secureTextField", fontSize: fontSize, color: color, frame: frame, inset: inset, path: path)
        case .image(let name):
            if !frame.intersection(canvas.bounds).isEmpty {
                switch BundleImage.load(name, bundlePath: bundlePath) {
                case .success(let image):
                    canvas.draw(image.image, opaque: image.opaque, in: frame, clip: canvas.bounds)
                    if image.opaque { cover(frame) }
                case .failure(let reason):
                    warnings.append("image \"\(name)\" at \(path): \(reason.text); drew nothing")
                }
            }
        }
        for (i, subview) in view.subviews.enumerated() {
            try draw(subview, x: absolute.x, y: absolute.y, path: "\(path)/\(i)", depth: depth + 1)
        }
    }

    /// The picture and the text nothing opaque was drawn over afterwards.
    mutating func finish() -> RenderedSnapshot {
        var visible: [TextItem] = []
        for (i, op) in ops.enumerated() {
            guard case .text(let item, let box) = op else { continue }
            let covered = ops[(i + 1)...].contains { later in
                if case .cover(let area) = later { return area.contains(box) }
                return false
            }
            if !covered { visible.append(item) }
        }
        return RenderedSnapshot(image: canvas.image, textLayer: visible, warnings: warnings, policy: redact ? .redact : .default)
    }

    private mutating func cover(_ frame: PixelRect) {
        let area = frame.intersection(canvas.bounds)
        if !area.isEmpty { ops.append(.cover(area)) }
    }

    /// One line, left-aligned at `inset` pixels, vertically centred, clipped to `frame`.
    private mutating func drawText(_ text: String, kind: String, fontSize: Double, color: RGBA, frame: PixelRect,
                                   inset: Int, path: String) throws {
        guard !text.isEmpty else { return }
        guard fontSize.isFinite, fontSize > 0 else {
            warnings.append("\(kind) at \(path): font size \(fontSize) is not a positive number; its text was not drawn")
            return
        }
        let clip = frame.intersection(canvas.bounds)
        guard !clip.isEmpty else { return }
        let pixelSize = Swift.max(1, Int(Swift.min(fontSize * scale, 1024).rounded()))
        let run = try FontEngine.shared.run(text, pixelSize: pixelSize)
        let top = frame.y0 + (frame.height - run.lineHeight) / 2
        let x = frame.x0 + inset
        canvas.draw(run, x: x, baseline: top + run.ascender, color: color, clip: clip)
        let box = PixelRect(x0: x, y0: top, x1: x + Swift.max(1, run.advance), y1: top + run.lineHeight).intersection(clip)
        guard !box.isEmpty else { return }
        ops.append(.text(TextItem(text: text, frame: box.points(scale: scale), kind: kind), box))
    }
}

/// A PNG from an app's bundle, decoded, and whether every pixel of it is opaque.
struct BundleImage {
    /// Why an image could not be used; goes into a warning.
    struct Failure: Error {
        var text: String
    }

    var image: RGBAImage
    var opaque: Bool

    /// Larger files are not read.
    static let maxFileBytes = 64 * 1024 * 1024

    /// Reads `bundlePath/name`. The name must stay inside the bundle (relative, no `..`):
    /// the host reads it with its own rights, and an app must not get other files drawn.
    static func load(_ name: String, bundlePath: String) -> Result<BundleImage, Failure> {
        guard !name.isEmpty, !name.hasPrefix("/"), !name.split(separator: "/").contains("..") else {
            return .failure(Failure(text: "not a path inside the bundle (relative, without \"..\")"))
        }
        let path = bundlePath + "/" + name
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else {
            return .failure(Failure(text: "\(path) does not exist or cannot be read"))
        }
        if let size = attributes[.size] as? Int, size > maxFileBytes {
            return .failure(Failure(text: "\(path) is larger than \(maxFileBytes / 1024 / 1024) MiB"))
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            return .failure(Failure(text: "\(path) cannot be read: \(error.localizedDescription)"))
        }
        do {
            let image = try PNGCodec.decode(data)
            return .success(BundleImage(image: image, opaque: image.isOpaque))
        } catch {
            return .failure(Failure(text: "\(path): \(error)"))
        }
    }
}
