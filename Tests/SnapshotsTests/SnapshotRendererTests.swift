import AppHostProtocol
import Foundation
import Testing
@testable import Snapshots

@Suite struct SnapshotRendererTests {
    @Test func noneKeepsNothing() throws {
        #expect(try SnapshotRenderer.render(ViewTree(), screen: smallScreen, policy: .none, bundlePath: "/", launchImage: nil) == nil)
    }

    @Test func windowBackgroundFillsTheScreen() throws {
        let snapshot = try render(ViewTree(backgroundColor: RGBA(1, 2, 3)))
        #expect(snapshot.image.width == 400 && snapshot.image.height == 600)
        #expect(Set(snapshot.image.allPixels) == [RGBA(1, 2, 3)])
        #expect(snapshot.textLayer.isEmpty)
    }

    @Test func labelDrawsDarkPixelsInsideItsFrameAndNoneOutside() throws {
        // (10, 20) 60×15 pt at 2× is x 20..<140, y 40..<70; the text is wider than the frame, so it is clipped.
        let tree = ViewTree(views: [label("Hello, clipped world of text", Rect(x: 10, y: 20, width: 60, height: 15), size: 12)])
        let snapshot = try render(tree)
        let inside = snapshot.image.pixels(inX: 20..<140, y: 40..<70)
        #expect(inside.filter { $0.r < 100 }.count > 50)
        #expect(snapshot.image.pixels(outsideX: 20..<140, y: 40..<70).allSatisfy { $0 == .white })
        // Text drawn up to the right edge: clipped there, not stopped short.
        #expect(snapshot.image.pixels(inX: 130..<140, y: 40..<70).contains { $0 != .white })
        #expect(snapshot.textLayer.count == 1)
        let item = try #require(snapshot.textLayer.first)
        #expect(item.kind == "label" && item.text == "Hello, clipped world of text")
        // The line box, clipped to the frame, in screen points.
        #expect(item.frame.x == 10 && item.frame.width == 60)
        #expect(item.frame.y >= 20 && item.frame.y + item.frame.height <= 35)
    }

    @Test func frameIsRelativeToTheParentAndScaled() throws {
        let child = ViewNode(frame: Rect(x: 5, y: 5, width: 10, height: 10), backgroundColor: RGBA(0, 0, 255))
        let parent = ViewNode(frame: Rect(x: 20, y: 30, width: 50, height: 50), backgroundColor: RGBA(255, 0, 0), subviews: [child])
        let image = try render(ViewTree(views: [parent])).image
        #expect(image.pixel(x: 40, y: 60) == RGBA(255, 0, 0))
        #expect(image.pixel(x: 50, y: 70) == RGBA(0, 0, 255))
        #expect(image.pixel(x: 69, y: 89) == RGBA(0, 0, 255))
        #expect(image.pixel(x: 70, y: 90) == RGBA(255, 0, 0))
        #expect(image.pixel(x: 139, y: 159) == RGBA(255, 0, 0))
        #expect(image.pixel(x: 140, y: 160) == .white)
    }

    @Test func backgroundsBlendSourceOver() throws {
        let half = ViewNode(frame: Rect(x: 0, y: 0, width: 10, height: 10), backgroundColor: RGBA(255, 0, 0, 128))
        let image = try render(ViewTree(backgroundColor: .white, views: [half])).image
        #expect(image.pixel(x: 5, y: 5) == RGBA(255, 127, 127, 255))
        // Over a transparent window: the colour stays, alpha adds up.
        let blue = ViewNode(frame: Rect(x: 0, y: 0, width: 10, height: 10), backgroundColor: RGBA(0, 0, 255, 128))
        let twice = ViewNode(frame: Rect(x: 0, y: 0, width: 10, height: 10), backgroundColor: RGBA(0, 0, 255, 128))
        let clear = try render(ViewTree(backgroundColor: .clear, views: [blue])).image
        #expect(clear.pixel(x: 5, y: 5) == RGBA(0, 0, 255, 128))
        #expect(clear.pixel(x: 50, y: 50) == .clear)
        let stacked = try render(ViewTree(backgroundColor: .clear, views: [blue, twice])).image
        #expect(stacked.pixel(x: 5, y: 5) == RGBA(0, 0, 255, 192))
        // A later sibling draws on top.
        let green = ViewNode(frame: Rect(x: 0, y: 0, width: 10, height: 10), backgroundColor: RGBA(0, 255, 0))
        #expect(try render(ViewTree(views: [half, green])).image.pixel(x: 5, y: 5) == RGBA(0, 255, 0))
    }

    @Test func hiddenViewsAndTheirSubviewsAreSkipped() throws {
        let inner = label("Inner", Rect(x: 0, y: 0, width: 50, height: 20))
        var box = ViewNode(frame: Rect(x: 0, y: 0, width: 60, height: 60), backgroundColor: .black, subviews: [inner])
        box.isHidden = true
        let snapshot = try render(ViewTree(views: [box]))
        #expect(snapshot.image.allPixels.allSatisfy { $0 == .white })
        #expect(snapshot.textLayer.isEmpty)
    }

    @Test func textFieldsShowTextOrPlaceholder() throws {
        let filled = ViewNode(content: .textField(text: "alice", placeholder: "Name", fontSize: 12, color: .black),
                              frame: Rect(x: 0, y: 0, width: 100, height: 20))
        let empty = ViewNode(content: .textField(text: "", placeholder: "Email", fontSize: 12, color: .black),
                             frame: Rect(x: 0, y: 30, width: 100, height: 20))
        let snapshot = try render(ViewTree(views: [filled, empty]))
        #expect(snapshot.textLayer.map(\.text) == ["alice", "Email"])
        #expect(snapshot.textLayer.map(\.kind) == ["textField", "placeholder"])
        // The inset: the text starts 8 pt in.
        #expect(snapshot.textLayer[0].frame.x == SnapshotRenderer.textFieldInset)
        // The placeholder is grey, never darker than the placeholder colour.
        let placeholderPixels = snapshot.image.pixels(inX: 0..<200, y: 60..<100)
        #expect(placeholderPixels.contains { $0 != .white })
        #expect(placeholderPixels.allSatisfy { $0.r >= SnapshotRenderer.placeholderColor.r })
    }

    @Test func secureFieldsDrawOneBulletPerCharacterAndNeverTheirText() throws {
        let secure = ViewNode(content: .secureTextField(text: "hunter2!", fontSize: 14, color: .black),
                              frame: Rect(x: 10, y: 10, width: 150, height: 30))
        let snapshot = try render(ViewTree(views: [secure]))
        #expect(snapshot.textLayer == [TextItem(text: String(repeating: "•", count: 8), frame: snapshot.textLayer.first?.frame ?? Rect(x: 0, y: 0, width: 0, height: 0), kind: "secureTextField")])
        #expect(!snapshot.textLayer.contains { $0.text.contains("hunter2") })
        #expect(snapshot.image.pixels(inX: 20..<320, y: 20..<80).contains { $0.r < 100 })
        // Bullets, not letters: the same picture as a field holding any other 8 characters.
        let other = ViewNode(content: .secureTextField(text: "abcdefgh", fontSize: 14, color: .black),
                             frame: Rect(x: 10, y: 10, width: 150, height: 30))
        #expect(try render(ViewTree(views: [other])).image == snapshot.image)
    }

    @Test func redactPaintsExactlyTheSensitiveFramesAndDropsTheirStrings() throws {
        let balance = label("$12,345.67", Rect(x: 0, y: 0, width: 80, height: 20), size: 14)
        let card = ViewNode(frame: Rect(x: 10, y: 10, width: 100, height: 40), backgroundColor: RGBA(240, 240, 255),
                            isPrivacySensitive: true, subviews: [balance])
        let password = ViewNode(content: .secureTextField(text: "s3cret", fontSize: 14, color: .black),
                                frame: Rect(x: 10, y: 60, width: 100, height: 30))
        let title = label("Accounts", Rect(x: 10, y: 100, width: 100, height: 20), size: 14)
        let tree = ViewTree(views: [card, password, title])

        let plain = try render(tree)
        #expect(Set(plain.textLayer.map(\.text)) == ["$12,345.67", "••••••", "Accounts"])

        let redacted = try render(tree, policy: .redact)
        #expect(redacted.textLayer.map(\.text) == ["Accounts"])
        let cardPixels = (x: 20..<220, y: 20..<100), fieldPixels = (x: 20..<220, y: 120..<180)
        #expect(redacted.image.pixels(inX: cardPixels.x, y: cardPixels.y).allSatisfy { $0 == .redaction })
        #expect(redacted.image.pixels(inX: fieldPixels.x, y: fieldPixels.y).allSatisfy { $0 == .redaction })
        // Everywhere else the redacted picture is the picture as drawn.
        for y in 0..<600 {
            for x in 0..<400 where !(cardPixels.x.contains(x) && cardPixels.y.contains(y)) && !(fieldPixels.x.contains(x) && fieldPixels.y.contains(y)) {
                #expect(redacted.image.pixel(x: x, y: y) == plain.image.pixel(x: x, y: y))
            }
        }
    }

    @Test func stringsCoveredByLaterOpaqueViewsLeaveTheTextLayer() throws {
        let secret = label("Covered", Rect(x: 10, y: 10, width: 100, height: 20))
        let partly = label("Partly", Rect(x: 10, y: 40, width: 100, height: 20))
        let glass = label("Glass", Rect(x: 10, y: 70, width: 100, height: 20))
        let cover = ViewNode(frame: Rect(x: 0, y: 0, width: 120, height: 35), backgroundColor: .white)
        let half = ViewNode(frame: Rect(x: 0, y: 40, width: 30, height: 20), backgroundColor: .black)
        let tinted = ViewNode(frame: Rect(x: 0, y: 65, width: 120, height: 30), backgroundColor: RGBA(0, 0, 0, 200))
        // A string drawn after the cover, on top of it, stays.
        let onTop = ViewNode(frame: Rect(x: 0, y: 100, width: 150, height: 50), backgroundColor: .black,
                             subviews: [label("On top", Rect(x: 5, y: 5, width: 100, height: 20), color: .white)])
        let snapshot = try render(ViewTree(views: [secret, partly, glass, cover, half, tinted, onTop]))
        #expect(snapshot.textLayer.map(\.text) == ["Partly", "Glass", "On top"])
    }

    @Test func opaqueImagesCoverTextAndTranslucentOnesDoNot() throws {
        let bundle = try TempBundle()
        defer { bundle.remove() }
        try bundle.write("solid.png", quadrantPNG())
        try bundle.write("see-through.png", PNGCodec.encode(RGBAImage(width: 2, height: 2, fill: RGBA(0, 0, 0, 10))))
        let a = label("Under solid", Rect(x: 0, y: 0, width: 80, height: 20))
        let b = label("Under glass", Rect(x: 0, y: 40, width: 80, height: 20))
        let solid = ViewNode(content: .image(name: "solid.png"), frame: Rect(x: 0, y: 0, width: 90, height: 30))
        let glass = ViewNode(content: .image(name: "see-through.png"), frame: Rect(x: 0, y: 40, width: 90, height: 30))
        let snapshot = try render(ViewTree(views: [a, b, solid, glass]), bundle: bundle.path)
        #expect(snapshot.textLayer.map(\.text) == ["Under glass"])
        #expect(snapshot.warnings.isEmpty)
    }

    @Test func imagesScaleToFillTheirFrame() throws {
        let bundle = try TempBundle()
        defer { bundle.remove() }
        try bundle.write("quad.png", quadrantPNG())
        // 10×10 pt at 2× from a 2×2 PNG: four 10×10-pixel quadrants at (40, 60).
        let view = ViewNode(content: .image(name: "quad.png"), frame: Rect(x: 20, y: 30, width: 10, height: 10))
        let snapshot = try render(ViewTree(views: [view]), bundle: bundle.path)
        let image = snapshot.image
        #expect(Set(image.pixels(inX: 40..<50, y: 60..<70)) == [RGBA(255, 0, 0)])
        #expect(Set(image.pixels(inX: 50..<60, y: 60..<70)) == [RGBA(0, 255, 0)])
        #expect(Set(image.pixels(inX: 40..<50, y: 70..<80)) == [RGBA(0, 0, 255)])
        #expect(Set(image.pixels(inX: 50..<60, y: 70..<80)) == [.white])
        #expect(image.pixels(outsideX: 40..<60, y: 60..<80).allSatisfy { $0 == .white })
        #expect(snapshot.warnings.isEmpty)
        // Non-uniform scaling: 30×5 pt is 60×10 px, still two columns and two rows of the source.
        let wide = ViewNode(content: .image(name: "quad.png"), frame: Rect(x: 0, y: 0, width: 30, height: 5))
        let widened = try render(ViewTree(views: [wide]), bundle: bundle.path).image
        #expect(widened.pixel(x: 29, y: 4) == RGBA(255, 0, 0) && widened.pixel(x: 30, y: 4) == RGBA(0, 255, 0))
        #expect(widened.pixel(x: 29, y: 5) == RGBA(0, 0, 255) && widened.pixel(x: 59, y: 9) == .white)
    }

    @Test func aMissingBrokenOrEscapingImageDrawsNothingAndWarns() throws {
        let bundle = try TempBundle()
        defer { bundle.remove() }
        try bundle.write("broken.png", Data("definitely not a PNG".utf8))
        let names = ["missing.png", "broken.png", "../outside.png", "/etc/hostname"]
        let views = names.enumerated().map { i, name in
            ViewNode(content: .image(name: name), frame: Rect(x: 0, y: Double(i) * 20, width: 50, height: 20))
        }
        let snapshot = try render(ViewTree(views: views), bundle: bundle.path)
        #expect(snapshot.image.allPixels.allSatisfy { $0 == .white })
        #expect(snapshot.warnings.count == 4)
        #expect(snapshot.warnings[0].contains("missing.png") && snapshot.warnings[0].contains("window/0"))
        #expect(snapshot.warnings[2].contains("inside the bundle"))
    }

    @Test func launchImagePolicyWithAndWithoutAFile() throws {
        let secretTree = ViewTree(views: [label("Secret", Rect(x: 0, y: 0, width: 100, height: 20))])
        let plain = try render(secretTree, policy: .launchImage)
        #expect(plain.textLayer.isEmpty && plain.warnings.isEmpty)
        #expect(Set(plain.image.allPixels) == [RGBA.launchBackground])

        let bundle = try TempBundle()
        defer { bundle.remove() }
        try bundle.write("Launch.png", quadrantPNG())
        let launched = try render(secretTree, policy: .launchImage, bundle: bundle.path, launchImage: "Launch.png")
        #expect(launched.textLayer.isEmpty && launched.warnings.isEmpty)
        #expect(Set(launched.image.pixels(inX: 0..<200, y: 0..<300)) == [RGBA(255, 0, 0)])
        #expect(Set(launched.image.pixels(inX: 200..<400, y: 300..<600)) == [.white])
        #expect(launched.image.pixel(x: 300, y: 10) == RGBA(0, 255, 0) && launched.image.pixel(x: 10, y: 590) == RGBA(0, 0, 255))

        let missing = try render(secretTree, policy: .launchImage, bundle: bundle.path, launchImage: "Nope.png")
        #expect(Set(missing.image.allPixels) == [RGBA.launchBackground])
        #expect(missing.warnings.count == 1 && missing.warnings[0].contains("Nope.png"))
    }

    @Test func nonsenseFramesAndSizesDoNotTrap() throws {
        let views = [
            ViewNode(frame: Rect(x: .nan, y: 0, width: 10, height: 10), backgroundColor: .black),
            ViewNode(frame: Rect(x: 0, y: 0, width: .infinity, height: 1e300), backgroundColor: RGBA(0, 0, 0, 1)),
            ViewNode(frame: Rect(x: -1e18, y: 0, width: -5, height: 10), backgroundColor: .black),
            label("zero", Rect(x: 0, y: 0, width: 50, height: 20), size: 0),
            label("huge", Rect(x: 0, y: 0, width: 50, height: 20), size: 1e12),
        ]
        let snapshot = try render(ViewTree(views: views))
        #expect(snapshot.warnings.count == 1)
        #expect(throws: SnapshotError.self) {
            try SnapshotRenderer.render(ViewTree(), screen: ScreenSize(width: 0, height: 10, scale: 1), policy: .default, bundlePath: "/", launchImage: nil)
        }
        #expect(throws: SnapshotError.self) {
            try SnapshotRenderer.render(ViewTree(), screen: ScreenSize(width: 10, height: 10, scale: .nan), policy: .default, bundlePath: "/", launchImage: nil)
        }
    }

    @Test func textLayerEncodesAsJSON() throws {
        let snapshot = try render(ViewTree(views: [label("Hi", Rect(x: 0, y: 0, width: 50, height: 20))]))
        let data = try JSONEncoder().encode(snapshot.textLayer)
        #expect(try JSONDecoder().decode([TextItem].self, from: data) == snapshot.textLayer)
    }
}
