import AppHostProtocol
import Foundation

/// What kind of leak a ``Leak`` is. The raw value is what reports (JSON, JUnit) and the
/// `privacy-check` output say.
public enum LeakKind: String, Codable, Sendable, CaseIterable, CustomStringConvertible {
    /// A sensitive string is in the text layer.
    case text
    /// A sensitive view's frame is not blanked.
    case pixels

    /// The raw value.
    public var description: String { rawValue }
}

/// Something a snapshot shows that it should not.
public struct Leak: Codable, Equatable, Sendable {
    /// Text in the text layer, or pixels on the picture.
    public var kind: LeakKind
    /// The view: its kind, its text (never a secure field's), and its path, as `label "…" at window/2/0`.
    public var view: String
    /// What was found where.
    public var detail: String

    public init(kind: LeakKind, view: String, detail: String) {
        self.kind = kind
        self.view = view
        self.detail = detail
    }
}

/// Checks a snapshot against the tree it was taken of, for what iOS apps are asked to hide
/// in the app switcher: secure text fields and privacy-sensitive views.
public enum PrivacyInspector {
    /// The leaks of `snapshot`, taken of `tree` on `screen`, under whatever policy.
    ///
    /// Sensitive strings are, in the tree as the app drew it: the text of every secure
    /// text field, and every string (label, field text, placeholder) in a privacy-sensitive
    /// view or its subviews, hidden or not. A `text` leak: one of them (non-empty) occurs in
    /// a text-layer item (one shorter than ``shortestFoundInside`` characters only as the
    /// whole item, or any label with its letter would leak a one-character password); a
    /// secure field's own bullets are not its text, even for a secret made of bullets. A
    /// `pixels` leak: the frame of a visible privacy-sensitive view or secure field
    /// (outermost only; in pixels, clipped to the screen) is not one colour in the picture,
    /// and drawing the tree again with that view's content taken out (same policy, same
    /// screen) changes those pixels. The redaction colour and an opaque cover drawn on top
    /// both pass. A secure field's content is its text, not its bullets: drawn again with
    /// as many bullets in place of its text, a field that shows one bullet per character
    /// (what iOS shows, and what the `default` policy draws) comes out the same and passes;
    /// one whose characters show does not. A `launchImage` snapshot shows none of the tree,
    /// so only its text layer is checked.
    ///
    /// The tree is drawn again with `bundlePath` (where the app's images are); without it,
    /// only a tree that reads nothing from a bundle is, and a frame that is not one colour
    /// in any other is a leak (a cover with a logo on top passes only with the bundle).
    public static func inspect(tree: ViewTree, snapshot: RenderedSnapshot, screen: ScreenSize, bundlePath: String? = nil) -> [Leak] {
        var walker = Walker(scale: screen.scale.isFinite && screen.scale > 0 ? screen.scale : 1)
        for (i, view) in tree.views.enumerated() {
            walker.walk(view, x: 0, y: 0, path: "window/\(i)", sensitiveAncestor: false, hidden: false, depth: 1, indices: [i])
        }
        var leaks: [Leak] = []
        for secret in walker.strings where !secret.text.isEmpty {
            let hits = snapshot.textLayer.filter { !isBullets($0) && shows($0.text, secret.text) }
            guard let first = hits.first else { continue }
            let what = secret.isSecureText ? "the secure field's text" : "\"\(secret.text)\""
            var shown = "\(first.kind) at \(describe(first.frame))"
            if !secret.isSecureText { shown += " \"\(first.text)\"" }
            let more = hits.count > 1 ? " (and \(hits.count - 1) more)" : ""
            leaks.append(Leak(kind: .text, view: secret.view, detail: "\(what) is readable in the text layer: \(shown)\(more)"))
        }
        let image = snapshot.image
        let bounds = PixelRect(x0: 0, y0: 0, x1: Swift.min(image.width, screen.width), y1: Swift.min(image.height, screen.height))
        // Where the tree is drawn again from: no images read, no bundle needed.
        let redrawFrom = bundlePath ?? (tree.views.contains { readsBundle($0) } ? nil : "")
        if image.isConsistent && snapshot.policy != .launchImage {
            for region in walker.regions {
                let area = region.frame.intersection(bounds)
                guard !area.isEmpty else { continue }
                let (differing, reference) = nonUniform(image, area)
                guard differing > 0 else { continue }
                if let redrawFrom, let again = try? SnapshotRenderer.render(
                    emptied(tree, region.indices), screen: screen, policy: snapshot.policy, bundlePath: redrawFrom, launchImage: nil),
                   sameRegion(image, again.image, area) {
                    continue
                }
                let c = unpackPixel(reference)
                leaks.append(Leak(kind: .pixels, view: region.view,
                                  detail: "\(differing) of \(area.pixelCount) pixels in its frame \(area) differ from the colour at its "
                                      + "top-left (\(c.r), \(c.g), \(c.b), \(c.a)): not blanked"))
            }
        }
        return leaks
    }

    /// Secrets shorter than this count as shown only by a text-layer string that is
    /// exactly them: a one-letter password is in most labels.
    public static let shortestFoundInside = 4

    /// Whether `text` (a text-layer string) shows `secret`: it contains it, when the secret
    /// is at least ``shortestFoundInside`` characters long, or it is exactly it.
    static func shows(_ text: String, _ secret: String) -> Bool {
        secret.count >= shortestFoundInside ? text.contains(secret) : text == secret
    }

    /// Whether a text-layer item is a secure field's bullets: what stands for its text, not
    /// the text (a secret made of bullets is not shown by them).
    static func isBullets(_ item: TextItem) -> Bool {
        item.kind == "secureTextField" && item.text.allSatisfy { $0 == SnapshotRenderer.bullet }
    }

    /// Whether drawing the view (or a visible subview) reads an image from the bundle.
    static func readsBundle(_ view: ViewNode) -> Bool {
        if view.isHidden { return false }
        if case .image = view.content { return true }
        return view.subviews.contains { readsBundle($0) }
    }

    /// `tree` with the view at `indices` (top-level index first) drawing no content: no
    /// text, no image, no subviews. A secure field keeps one bullet per character in place
    /// of its text: its length shows on iOS too, and only its characters are its content.
    static func emptied(_ tree: ViewTree, _ indices: [Int]) -> ViewTree {
        func empty(_ node: ViewNode, _ rest: ArraySlice<Int>) -> ViewNode {
            var node = node
            guard let i = rest.first else {
                if case .secureTextField(let text, let size, let color) = node.content {
                    let stand = String(repeating: SnapshotRenderer.bullet, count: text.count)
                    node.content = .secureTextField(text: stand, fontSize: size, color: color)
                } else {
                    node.content = .none
                }
                node.subviews = []
                return node
            }
            if node.subviews.indices.contains(i) { node.subviews[i] = empty(node.subviews[i], rest.dropFirst()) }
            return node
        }
        var tree = tree
        if let first = indices.first, tree.views.indices.contains(first) {
            tree.views[first] = empty(tree.views[first], indices.dropFirst())
        }
        return tree
    }

    /// Whether two images have the same pixels in `area`.
    static func sameRegion(_ a: RGBAImage, _ b: RGBAImage, _ area: PixelRect) -> Bool {
        guard a.width == b.width, a.height == b.height else { return false }
        for y in area.y0..<area.y1 {
            let start = (y * a.width + area.x0) * 4
            let end = (y * a.width + area.x1) * 4
            if a.pixels[start..<end] != b.pixels[start..<end] { return false }
        }
        return true
    }

    /// How many pixels of `area` differ from its first pixel, and that pixel.
    static func nonUniform(_ image: RGBAImage, _ area: PixelRect) -> (Int, UInt32) {
        image.pixels.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: UInt32.self) { px in
                let reference = px[area.y0 * image.width + area.x0]
                var differing = 0
                for y in area.y0..<area.y1 {
                    let row = y * image.width
                    for x in area.x0..<area.x1 where px[row + x] != reference { differing += 1 }
                }
                return (differing, reference)
            }
        }
    }

    static func describe(_ r: Rect) -> String {
        func f(_ v: Double) -> String { v == v.rounded() && abs(v) < 1e9 ? String(Int(v)) : String(format: "%.1f", v) }
        return "(\(f(r.x)), \(f(r.y))) \(f(r.width))×\(f(r.height)) pt"
    }

    /// A view's kind, text (a secure field's length only) and path.
    static func describe(_ view: ViewNode, path: String) -> String {
        var text: String
        switch view.content {
        case .none: text = "view"
        case .label(let s, _, _): text = "label \"\(s)\""
        case .textField(let s, let placeholder, _, _):
            text = s.isEmpty ? "textField (empty\(placeholder.map { ", placeholder \"\($0)\"" } ?? ""))" : "textField \"\(s)\""
        case .secureTextField(let s, _, _): text = "secureTextField (\(s.count) characters)"
        case .image(let name): text = "image \"\(name)\""
        }
        if view.isPrivacySensitive { text += " (privacy-sensitive)" }
        if view.isHidden { text += " (hidden)" }
        return text + " at " + path
    }

    private struct Walker {
        struct Secret {
            var text: String
            var view: String
            var isSecureText: Bool
        }
        struct Region {
            var frame: PixelRect
            var view: String
            var indices: [Int]
        }

        let scale: Double
        var strings: [Secret] = []
        var regions: [Region] = []

        mutating func walk(_ view: ViewNode, x: Double, y: Double, path: String, sensitiveAncestor: Bool, hidden: Bool, depth: Int,
                           indices: [Int] = []) {
            guard depth <= 512 else { return }
            let sensitive = sensitiveAncestor || view.isPrivacySensitive
            let hidden = hidden || view.isHidden
            let description = Self.describe(view, path: path)
            switch view.content {
            case .label(let text, _, _) where sensitive:
                strings.append(Secret(text: text, view: description, isSecureText: false))
            case .textField(let text, let placeholder, _, _) where sensitive:
                strings.append(Secret(text: text, view: description, isSecureText: false))
                if let placeholder { strings.append(Secret(text: placeholder, view: description, isSecureText: false)) }
            case .secureTextField(let text, _, _):
                strings.append(Secret(text: text, view: description, isSecureText: true))
            default:
                break
            }
            let absolute = Rect(x: x + view.frame.x, y: y + view.frame.y, width: view.frame.width, height: view.frame.height)
            // The outermost sensitive view's frame is the one a policy blanks; its subviews are not drawn.
            if !hidden && !sensitiveAncestor && (view.isPrivacySensitive || view.content.isSecure) {
                regions.append(Region(frame: PixelRect(points: absolute, scale: scale), view: description, indices: indices))
            }
            for (i, subview) in view.subviews.enumerated() {
                walk(subview, x: absolute.x, y: absolute.y, path: "\(path)/\(i)", sensitiveAncestor: sensitive, hidden: hidden, depth: depth + 1,
                     indices: indices + [i])
            }
        }

        private static func describe(_ view: ViewNode, path: String) -> String { PrivacyInspector.describe(view, path: path) }
    }
}
