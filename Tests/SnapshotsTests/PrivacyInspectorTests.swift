import AppHostProtocol
import Foundation
import Testing
@testable import Snapshots

@Suite struct PrivacyInspectorTests {
    /// A bank screen: a title, a privacy-sensitive balance, a password field.
    static let bank = ViewTree(views: [
        label("My Bank", Rect(x: 10, y: 10, width: 150, height: 20), size: 16),
        ViewNode(frame: Rect(x: 10, y: 40, width: 150, height: 30), backgroundColor: RGBA(230, 240, 255), isPrivacySensitive: true,
                 subviews: [label("Balance: $9,876.54", Rect(x: 5, y: 5, width: 140, height: 20), size: 12)]),
        ViewNode(content: .secureTextField(text: "pa55word", fontSize: 14, color: .black), frame: Rect(x: 10, y: 80, width: 150, height: 30)),
    ])

    /// Under `default` the balance leaks (its text and its pixels); the password field is
    /// drawn as bullets, which stand for its text and are not it (issue 33, point 7).
    @Test func defaultPolicyLeaksTheSensitiveViewButNotTheSecureFieldsBullets() throws {
        let snapshot = try render(Self.bank)
        let leaks = PrivacyInspector.inspect(tree: Self.bank, snapshot: snapshot, screen: smallScreen)
        let text = leaks.filter { $0.kind == .text }
        #expect(text.count == 1)
        #expect(text.first?.view == "label \"Balance: $9,876.54\" at window/1/0")
        #expect(text.first?.detail.contains("\"Balance: $9,876.54\"") == true)
        let pixels = leaks.filter { $0.kind == .pixels }
        #expect(pixels.map(\.view) == ["view (privacy-sensitive) at window/1"])
        // A report never spells out a secure field's text.
        #expect(!leaks.contains { $0.view.contains("pa55word") || $0.detail.contains("pa55word") })
    }

    @Test func redactPasses() throws {
        let snapshot = try render(Self.bank, policy: .redact)
        #expect(PrivacyInspector.inspect(tree: Self.bank, snapshot: snapshot, screen: smallScreen) == [])
    }

    @Test func launchImagePasses() throws {
        let snapshot = try render(Self.bank, policy: .launchImage)
        #expect(PrivacyInspector.inspect(tree: Self.bank, snapshot: snapshot, screen: smallScreen) == [])
        // A launch image with a picture on it shows nothing of the tree either.
        let bundle = try TempBundle()
        defer { bundle.remove() }
        try bundle.write("Launch.png", quadrantPNG())
        let pictured = try render(Self.bank, policy: .launchImage, bundle: bundle.path, launchImage: "Launch.png")
        #expect(pictured.policy == .launchImage && pictured.warnings.isEmpty)
        #expect(PrivacyInspector.inspect(tree: Self.bank, snapshot: pictured, screen: smallScreen) == [])
    }

    @Test func anOpaqueCoverOnTopPassesUnderDefault() throws {
        var covered = Self.bank
        covered.views.append(ViewNode(frame: Rect(x: 0, y: 0, width: 200, height: 300), backgroundColor: RGBA(0, 122, 255)))
        let snapshot = try render(covered)
        #expect(snapshot.textLayer.isEmpty)
        #expect(PrivacyInspector.inspect(tree: covered, snapshot: snapshot, screen: smallScreen) == [])
    }

    @Test func aCoverWithAPictureOnTopPassesWhenTheInspectorCanDrawItAgain() throws {
        let bundle = try TempBundle()
        defer { bundle.remove() }
        try bundle.write("logo.png", quadrantPNG())
        var covered = Self.bank
        // An opaque cover with a logo across both sensitive frames (y 40–70 and 80–110).
        covered.views.append(ViewNode(frame: Rect(x: 0, y: 0, width: 200, height: 300), backgroundColor: RGBA(0, 122, 255),
                                      subviews: [ViewNode(content: .image(name: "logo.png"), frame: Rect(x: 20, y: 50, width: 100, height: 50))]))
        let snapshot = try render(covered, bundle: bundle.path)
        // Not one colour, and without the bundle the inspector cannot tell the logo from the content.
        #expect(PrivacyInspector.inspect(tree: covered, snapshot: snapshot, screen: smallScreen).map(\.kind) == [.pixels, .pixels])
        // Drawn again without each sensitive view's content, the frames come out the same: nothing shows.
        #expect(PrivacyInspector.inspect(tree: covered, snapshot: snapshot, screen: smallScreen, bundlePath: bundle.path) == [])
        // Uncovered, the balance's redraw differs: a pixel leak; the field's bullets are not one.
        let bare = try render(Self.bank, bundle: bundle.path)
        let leaks = PrivacyInspector.inspect(tree: Self.bank, snapshot: bare, screen: smallScreen, bundlePath: bundle.path)
        #expect(leaks.filter { $0.kind == .pixels }.map(\.view) == ["view (privacy-sensitive) at window/1"], "\(leaks)")
    }

    @Test func aSecureFieldsTextShownElsewhereIsATextLeak() throws {
        var echoed = Self.bank
        echoed.views.append(label("You typed pa55word", Rect(x: 10, y: 120, width: 180, height: 20)))
        let snapshot = try render(echoed, policy: .redact)
        let leaks = PrivacyInspector.inspect(tree: echoed, snapshot: snapshot, screen: smallScreen)
        #expect(leaks.count == 1)
        #expect(leaks.first?.kind == .text && leaks.first?.view == "secureTextField (8 characters) at window/2")
        #expect(leaks.first?.detail.contains("pa55word") == false)
    }

    @Test func hiddenSensitiveViewsHaveNoPixelsToCheck() throws {
        var hidden = Self.bank
        hidden.views[1].isHidden = true
        hidden.views[2].isHidden = true
        let snapshot = try render(hidden)
        #expect(PrivacyInspector.inspect(tree: hidden, snapshot: snapshot, screen: smallScreen) == [])
    }

    /// A one-character password is in most labels: only a label that is exactly it shows it.
    @Test func aShortSecretLeaksOnlyAsAWholeString() throws {
        let tree = ViewTree(views: [
            label("Bank account", Rect(x: 10, y: 10, width: 150, height: 20)),
            ViewNode(content: .secureTextField(text: "a", fontSize: 14, color: .black), frame: Rect(x: 10, y: 40, width: 150, height: 30)),
        ])
        let quiet = PrivacyInspector.inspect(tree: tree, snapshot: try render(tree, policy: .redact), screen: smallScreen)
        #expect(quiet.isEmpty, "\(quiet)")

        var shown = tree
        shown.views.append(label("a", Rect(x: 10, y: 80, width: 150, height: 20)))
        let leaks = PrivacyInspector.inspect(tree: shown, snapshot: try render(shown, policy: .redact), screen: smallScreen)
        #expect(leaks.map(\.kind) == [.text] && leaks.first?.view == "secureTextField (1 characters) at window/1", "\(leaks)")
    }

    @Test func aSecretOfFourCharactersOrMoreLeaksInsideALongerString() {
        #expect(PrivacyInspector.shortestFoundInside == 4)
        #expect(PrivacyInspector.shows("PIN 1234 saved", "1234"))
        #expect(!PrivacyInspector.shows("PIN 123 saved", "123"))
        #expect(PrivacyInspector.shows("123", "123"))
        #expect(!PrivacyInspector.shows("Total: 12", "1"))
    }

    // MARK: secure fields (issue 33, point 7)

    /// A field of bullets alone, under `default`: what iOS shows, and no leak, with or
    /// without the bundle (the tree reads no image, so the inspector draws it again).
    @Test func aSecureFieldDrawnAsBulletsIsNotALeak() throws {
        let tree = ViewTree(views: [
            label("Sign in", Rect(x: 10, y: 10, width: 150, height: 20)),
            ViewNode(content: .secureTextField(text: "correct horse", fontSize: 14, color: .black), frame: Rect(x: 10, y: 40, width: 180, height: 30),
                     backgroundColor: .white),
        ])
        let snapshot = try render(tree)
        #expect(snapshot.textLayer.contains { $0.kind == "secureTextField" && $0.text == String(repeating: "•", count: 13) })
        #expect(PrivacyInspector.inspect(tree: tree, snapshot: snapshot, screen: smallScreen) == [])
        let bundle = try TempBundle()
        defer { bundle.remove() }
        #expect(PrivacyInspector.inspect(tree: tree, snapshot: snapshot, screen: smallScreen, bundlePath: bundle.path) == [])
    }

    /// A field whose characters show (drawn as a label in its frame, as a broken renderer
    /// would) leaks in the text layer and in its pixels: it is the text that counts.
    @Test func aSecureFieldWhoseCharactersShowLeaksTextAndPixels() throws {
        let frame = Rect(x: 10, y: 40, width: 180, height: 30)
        let tree = ViewTree(views: [ViewNode(content: .secureTextField(text: "pa55word", fontSize: 14, color: .black), frame: frame)])
        let shown = ViewTree(views: [ViewNode(content: .label(text: "pa55word", fontSize: 14, color: .black), frame: frame)])
        let leaks = PrivacyInspector.inspect(tree: tree, snapshot: try render(shown), screen: smallScreen)
        #expect(leaks.map(\.kind) == [.text, .pixels], "\(leaks)")
        #expect(leaks.allSatisfy { $0.view == "secureTextField (8 characters) at window/0" && !$0.detail.contains("pa55word") })
    }

    /// A secret made of bullets is not shown by the field's own bullets (they stand for
    /// any text of that length), but it is by a label that spells it.
    @Test func aSecretOfBulletsIsShownOnlyByAnotherView() throws {
        let secret = String(repeating: "•", count: 6)
        let tree = ViewTree(views: [ViewNode(content: .secureTextField(text: secret, fontSize: 14, color: .black),
                                             frame: Rect(x: 10, y: 40, width: 180, height: 30))])
        #expect(PrivacyInspector.inspect(tree: tree, snapshot: try render(tree), screen: smallScreen) == [])
        var echoed = tree
        echoed.views.append(label(secret, Rect(x: 10, y: 80, width: 150, height: 20)))
        let leaks = PrivacyInspector.inspect(tree: echoed, snapshot: try render(echoed), screen: smallScreen)
        #expect(leaks.map(\.kind) == [.text], "\(leaks)")
    }

    /// Drawn again for a secure field, the field keeps as many bullets as it has characters.
    @Test func emptyingASecureFieldKeepsItsLengthInBullets() {
        let tree = ViewTree(views: [ViewNode(content: .secureTextField(text: "abc", fontSize: 14, color: .black),
                                             frame: Rect(x: 0, y: 0, width: 10, height: 10), subviews: [label("x", Rect(x: 0, y: 0, width: 5, height: 5))])])
        let emptied = PrivacyInspector.emptied(tree, [0])
        #expect(emptied.views[0].content == .secureTextField(text: "•••", fontSize: 14, color: .black))
        #expect(emptied.views[0].subviews.isEmpty)
    }
}
