import AppHostProtocol
@testable import AppKitLess
import Dispatch
import Foundation
import Synchronization
import Testing

/// A delegate whose methods run the test's hooks (and answer fetches with `.newData`
/// after the fetch hook).
@MainActor
private final class HookDelegate: ApplicationDelegate {
    var hooks: [String: @MainActor (Application) -> Void] = [:]

    func didFinishLaunching(_ application: Application, options: LaunchOptions) -> Bool {
        hooks["didFinishLaunching"]?(application)
        return true
    }
    func willResignActive(_ application: Application) { hooks["willResignActive"]?(application) }
    func didEnterBackground(_ application: Application) { hooks["didEnterBackground"]?(application) }
    func willEnterForeground(_ application: Application) { hooks["willEnterForeground"]?(application) }
    func didBecomeActive(_ application: Application) { hooks["didBecomeActive"]?(application) }
    func performFetch(_ application: Application, completion: @escaping @Sendable (FetchResult) -> Void) {
        hooks["performFetch"]?(application)
        completion(.newData)
    }
}

/// An application with its own service router over a socketpair whose host end the test drives.
private typealias Fixture = AppHarness<HookDelegate, NoExtras>

private extension AppHarness where Delegate == HookDelegate, Extra == NoExtras {
    init(hooks: [String: @MainActor (Application) -> Void] = [:]) async throws {
        try await self.init { connection, effects in
            let delegate = HookDelegate()
            delegate.hooks = hooks
            return (delegate, Application(bundleIdentifier: "com.example.views", delegate: delegate, connection: connection,
                                          effects: effects, services: ServiceRouter(taskScheduler: BGTaskScheduler())), NoExtras())
        }
    }
}

private func rect(_ x: Double, _ y: Double, _ w: Double, _ h: Double) -> Rect {
    Rect(x: x, y: y, width: w, height: h)
}

/// The window the sequencing tests draw: a header and a balance.
@MainActor
private final class Screen {
    let window = Window(backgroundColor: RGBA(242, 242, 247))
    let header = View(frame: rect(0, 0, 390, 100), backgroundColor: RGBA(0, 82, 147))
    let balance = Label(text: "$100.00", frame: rect(20, 120, 350, 40), fontSize: 34)
    var cover: View?

    init() {
        balance.isPrivacySensitive = true
        window.addSubview(header)
        window.addSubview(balance)
    }

    func addCover() {
        let cover = View(frame: Window.bounds, backgroundColor: RGBA(0, 82, 147))
        window.addSubview(cover)
        self.cover = cover
    }
}

/// Keeps the screen a hook made, for later hooks and the test.
@MainActor
private final class ScreenBox {
    var screen: Screen?
}

@Suite("Views", .serialized, .timeLimit(.minutes(3)))
struct ViewTests {
    // MARK: Conversion

    @Test("a window converts to a tree: frames, colours, flags, content of each kind, subviews bottom to top")
    @MainActor
    func conversion() {
        let window = Window(backgroundColor: RGBA(10, 20, 30))
        let card = View(frame: rect(16, 140, 358, 160), backgroundColor: .white)
        let name = Label(text: "Everyday", frame: rect(16, 16, 326, 24), fontSize: 15, textColor: RGBA(60, 60, 67))
        let balance = Label(text: "$1.00", frame: rect(16, 84, 326, 48))
        balance.isPrivacySensitive = true
        card.addSubview(name)
        card.addSubview(balance)
        let field = TextField(placeholder: "User", frame: rect(16, 320, 358, 44), backgroundColor: .white)
        let password = SecureTextField(text: "hunter2", frame: rect(16, 380, 358, 44), fontSize: 20, textColor: RGBA(1, 2, 3))
        let logo = ImageView(named: "Images/logo.png", frame: rect(300, 40, 60, 60))
        let hidden = View(frame: rect(0, 0, 10, 10), backgroundColor: .black)
        hidden.isHidden = true
        window.addSubview(card)
        window.addSubview(field)
        window.addSubview(password)
        window.insertSubview(logo, at: 0)
        window.addSubview(hidden)

        #expect(window.viewTree() == ViewTree(backgroundColor: RGBA(10, 20, 30), views: [
            ViewNode(content: .image(name: "Images/logo.png"), frame: rect(300, 40, 60, 60)),
            ViewNode(frame: rect(16, 140, 358, 160), backgroundColor: .white, subviews: [
                ViewNode(content: .label(text: "Everyday", fontSize: 15, color: RGBA(60, 60, 67)), frame: rect(16, 16, 326, 24)),
                ViewNode(content: .label(text: "$1.00", fontSize: 17, color: .black), frame: rect(16, 84, 326, 48),
                         isPrivacySensitive: true),
            ]),
            ViewNode(content: .textField(text: "", placeholder: "User", fontSize: 17, color: .black), frame: rect(16, 320, 358, 44),
                     backgroundColor: .white),
            ViewNode(content: .secureTextField(text: "hunter2", fontSize: 20, color: RGBA(1, 2, 3)), frame: rect(16, 380, 358, 44)),
            ViewNode(frame: rect(0, 0, 10, 10), backgroundColor: .black, isHidden: true),
        ]))
        #expect(name.window === window && card.window === window && name.superview === card && card.superview == nil)

        // A text field turned secure is drawn as one; a placeholder is kept but not sent for it.
        field.text = "ada"
        field.isSecureTextEntry = true
        #expect(field.viewNode().content == .secureTextField(text: "ada", fontSize: 17, color: .black))
    }

    @Test("insertSubview clamps and moves; a view added elsewhere leaves its old parent; removeFromSuperview works at both levels; loops are refused")
    @MainActor
    func hierarchy() {
        let window = Window()
        let a = View(), b = View(), c = View(), d = View()
        for (view, x) in [(a, 1.0), (b, 2), (c, 3), (d, 4)] { view.frame = rect(x, 0, 1, 1) }
        func xs(_ views: [View]) -> [Double] { views.map(\.frame.x) }

        a.addSubview(b)
        a.insertSubview(c, at: 0)
        a.insertSubview(d, at: 99)
        #expect(xs(a.subviews) == [3, 2, 4])
        a.insertSubview(d, at: -5)
        #expect(xs(a.subviews) == [4, 3, 2])

        window.addSubview(a)
        window.addSubview(c)  // moved out of a, to the top of the window
        #expect(xs(a.subviews) == [4, 2])
        #expect(xs(window.subviews) == [1, 3])
        #expect(c.superview == nil && c.window === window)

        b.removeFromSuperview()
        #expect(xs(a.subviews) == [4] && b.superview == nil && b.window == nil)
        c.removeFromSuperview()
        #expect(xs(window.subviews) == [1] && c.window == nil)
        c.removeFromSuperview()  // in nothing: nothing happens

        // A view into itself or its own subview: refused, the tree unchanged.
        a.addSubview(a)
        d.addSubview(a)
        #expect(xs(a.subviews) == [4] && a.superview == nil && xs(window.subviews) == [1])

        // rootView replaces every top-level view.
        window.rootView = b
        #expect(xs(window.subviews) == [2] && a.window == nil && b.window === window)
        window.rootView = nil
        #expect(window.subviews.isEmpty && b.window == nil)
        #expect(Window.bounds == rect(0, 0, 390, 844))
        // The host's screen, in points: what a full-screen cover must span.
        #expect(Window.bounds(of: ScreenSize(width: 1500, height: 3000, scale: 2)) == rect(0, 0, 750, 1500))
    }

    // MARK: When the tree is sent

    @Test("the tree arrives before the acknowledgement of the callback that changed it, and not at all when nothing changed")
    func sentBeforeAcknowledgement() async throws {
        let box = await MainActor.run { ScreenBox() }
        let fixture = try await Fixture(hooks: [
            "didFinishLaunching": { app in
                let screen = Screen()
                box.screen = screen
                app.window = screen.window
            },
            // Same value: no change.
            "didBecomeActive": { _ in box.screen?.balance.text = "$100.00" },
            "willResignActive": { _ in box.screen?.addCover() },
            "didEnterBackground": { _ in },
            "willEnterForeground": { _ in box.screen?.balance.text = "$250.00" },
        ])
        defer { fixture.tearDown() }
        let host = fixture.host
        let launched = await MainActor.run { Screen().window.viewTree() }

        try host.send(.callback(seq: 1, callback: .didFinishLaunching(options: LaunchOptions(reason: .user)), state: .inactive))
        #expect(try await host.receive() == .viewTree(launched))
        #expect(try await host.receive() == .callbackReturned(seq: 1))

        try host.send(.callback(seq: 2, callback: .didBecomeActive, state: .active))
        #expect(try await host.receive() == .callbackReturned(seq: 2))

        try host.send(.callback(seq: 3, callback: .willResignActive, state: .inactive))
        var covered = launched
        covered.views.append(ViewNode(frame: rect(0, 0, 390, 844), backgroundColor: RGBA(0, 82, 147)))
        #expect(try await host.receive() == .viewTree(covered))
        #expect(try await host.receive() == .callbackReturned(seq: 3))

        try host.send(.callback(seq: 4, callback: .didEnterBackground, state: .background))
        #expect(try await host.receive() == .callbackReturned(seq: 4))

        // Several changes in one callback: one tree, the last state.
        try host.send(.callback(seq: 5, callback: .willEnterForeground, state: .inactive))
        guard case .viewTree(let tree) = try await host.receive() else {
            Issue.record("expected a view tree")
            return
        }
        #expect(tree.views[1].content == .label(text: "$250.00", fontSize: 34, color: .black))
        #expect(try await host.receive() == .callbackReturned(seq: 5))
        try await fixture.expectQuiet()
    }

    @Test("a change outside callbacks is sent once at the end of its main-queue turn; a window no longer shown sends nothing")
    func sentAfterMainQueueTurn() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        let host = fixture.host, app = fixture.application

        // Set and changed in one main-queue turn: one tree, with both.
        let (screen, expected) = await MainActor.run {
            let screen = Screen()
            app.window = screen.window
            screen.balance.text = "$7.00"
            screen.header.backgroundColor = .black
            return (screen, screen.window.viewTree())
        }
        #expect(try await host.receive() == .viewTree(expected))
        try await fixture.expectQuiet()

        // A later change in a main-queue block.
        await MainActor.run { screen.balance.isHidden = true }
        guard case .viewTree(let tree) = try await host.receive() else {
            Issue.record("expected a view tree")
            return
        }
        #expect(tree.views[1].isHidden)
        try await fixture.expectQuiet()

        // Another window replaces it: its tree goes; the old one's changes do not.
        let other = await MainActor.run {
            let other = Window(backgroundColor: .black, rootView: Label(text: "other"))
            app.window = other
            screen.balance.text = "$8.00"
            return other.viewTree()
        }
        #expect(try await host.receive() == .viewTree(other))
        await MainActor.run { screen.balance.text = "$9.00" }
        try await fixture.expectQuiet()
        #expect(await MainActor.run { screen.window.application == nil })

        // No window: an empty tree.
        await MainActor.run { app.window = nil }
        #expect(try await host.receive() == .viewTree(ViewTree()))
        try await fixture.expectQuiet()
    }

    @Test("a change made in performFetch goes before the completion it calls, and that before the acknowledgement")
    func sentBeforeCompletion() async throws {
        let box = await MainActor.run { ScreenBox() }
        let fixture = try await Fixture(hooks: [
            "didFinishLaunching": { app in
                let screen = Screen()
                box.screen = screen
                app.window = screen.window
            },
            "performFetch": { _ in box.screen?.balance.text = "$110.00" },
        ])
        defer { fixture.tearDown() }
        let host = fixture.host

        try host.send(.callback(seq: 1, callback: .didFinishLaunching(options: LaunchOptions(reason: .backgroundFetch)), state: .background))
        guard case .viewTree = try await host.receive() else {
            Issue.record("expected a view tree")
            return
        }
        #expect(try await host.receive() == .callbackReturned(seq: 1))

        try host.send(.callback(seq: 2, callback: .service(.performFetch(id: 3)), state: .background))
        guard case .viewTree(let tree) = try await host.receive() else {
            Issue.record("expected a view tree")
            return
        }
        #expect(tree.views[1].content == .label(text: "$110.00", fontSize: 34, color: .black))
        #expect(try await host.receive(replying: .reply(id: 1, reply: .service(.ok))) == .request(id: 1, request: .service(.fetchCompleted(id: 3, result: .newData))))
        #expect(try await host.receive() == .callbackReturned(seq: 2))
        try await fixture.expectQuiet()
    }

    @Test("ignoreSnapshotOnNextApplicationLaunch sends its message, from any thread")
    func ignoreSnapshot() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        fixture.application.ignoreSnapshotOnNextApplicationLaunch()
        #expect(try await fixture.host.receive() == .ignoreSnapshotOnNextApplicationLaunch)
        let app = fixture.application
        await MainActor.run { app.ignoreSnapshotOnNextApplicationLaunch() }
        #expect(try await fixture.host.receive() == .ignoreSnapshotOnNextApplicationLaunch)
        try await fixture.expectQuiet()
    }
}
