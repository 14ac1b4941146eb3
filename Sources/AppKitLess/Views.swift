import AppHostProtocol
import Synchronization

// What an app draws, like a very small UIKit: a `Window` with stacked `View`s
// (filled rectangles, labels, text fields, secure text fields, images from the
// bundle). The host never sees these objects, only the `ViewTree` they convert to,
// which AppKitLess sends whenever the window changed (see `Application.window` for
// when). The host renders it for the app switcher and applies the snapshot policy.

/// The colour of an app's drawing, 8-bit RGBA (`UIColor`).
public typealias RGBA = AppHostProtocol.RGBA
/// A rectangle in points relative to the parent view (`CGRect`).
public typealias Rect = AppHostProtocol.Rect
/// One view as the host sees it (what ``View/viewNode()`` returns).
public typealias ViewNode = AppHostProtocol.ViewNode
/// A window as the host sees it (what ``Window/viewTree()`` returns).
public typealias ViewTree = AppHostProtocol.ViewTree

/// A rectangular area of the window, like `UIView`: a frame relative to its
/// superview (or to the window for a top-level view), an optional background
/// colour, and subviews drawn on top of it in order (later ones on top).
///
/// Every change to a view that is in the window ``Application/window`` (a property
/// whose value changes, a subview added, inserted or removed) marks the window
/// dirty; AppKitLess then sends the window's tree to the host once, at the time
/// ``Application/window`` describes. Views not in that window cost nothing.
@MainActor
open class View {
    /// Where the view is, in points relative to its superview (or the window).
    public var frame: Rect {
        didSet { if frame != oldValue { setNeedsSend() } }
    }
    /// The fill behind the view's content; nil is transparent.
    public var backgroundColor: RGBA? {
        didSet { if backgroundColor != oldValue { setNeedsSend() } }
    }
    /// A hidden view is not drawn, nor are its subviews.
    public var isHidden: Bool = false {
        didSet { if isHidden != oldValue { setNeedsSend() } }
    }
    /// SwiftUI's `privacySensitive()`: under the `redact` snapshot policy the view and
    /// everything inside it are blanked in the app switcher, and a privacy check
    /// fails if its text shows in any snapshot.
    public var isPrivacySensitive: Bool = false {
        didSet { if isPrivacySensitive != oldValue { setNeedsSend() } }
    }
    /// The subviews, bottom to top.
    public private(set) var subviews: [View] = []
    /// The view this one is a subview of; nil for a top-level view of a window and
    /// for a view in no hierarchy.
    public private(set) weak var superview: View?
    /// Set on a top-level view only: the window it is in.
    fileprivate weak var containingWindow: Window?

    /// A view at `frame` with an optional background colour.
    public init(frame: Rect = Rect(x: 0, y: 0, width: 0, height: 0), backgroundColor: RGBA? = nil) {
        self.frame = frame
        self.backgroundColor = backgroundColor
    }

    /// The window the view is in, through its superviews; nil if none.
    public var window: Window? {
        var view = self
        while let parent = view.superview { view = parent }
        return view.containingWindow
    }

    /// Adds `view` on top of the other subviews, like `UIView.addSubview(_:)`. A view
    /// that is already somewhere else is moved here; adding a view to itself or
    /// into its own subviews is refused (logged to stderr), as it would make a loop.
    public func addSubview(_ view: View) {
        insertSubview(view, at: subviews.count)
    }

    /// Inserts `view` at `index` among the subviews (0 is the bottom), like
    /// `UIView.insertSubview(_:at:)`; an index past either end is clamped. A view
    /// already here is moved to `index` (counted without it).
    public func insertSubview(_ view: View, at index: Int) {
        guard !view.isAncestor(of: self) else {
            writeStandardError("\(programName): insertSubview: a view cannot be inserted into itself or its own subviews; ignored")
            return
        }
        view.detach()
        subviews.insert(view, at: max(0, min(index, subviews.count)))
        view.superview = self
        setNeedsSend()
    }

    /// Takes the view out of its superview (or, for a top-level view, out of its
    /// window), like `UIView.removeFromSuperview()`. Nothing happens if it is in neither.
    public func removeFromSuperview() {
        let window = self.window
        detach()
        window?.setNeedsSend()
    }

    /// Unlinks the view from its parent without marking anything; the caller does.
    fileprivate func detach() {
        if let parent = superview {
            parent.subviews.removeAll { $0 === self }
            superview = nil
            parent.setNeedsSend()
        } else if let window = containingWindow {
            window.removeTopLevel(self)
        }
    }

    /// True if `other` is this view or one of its subviews, at any depth.
    private func isAncestor(of other: View) -> Bool {
        var view: View? = other
        while let current = view {
            if current === self { return true }
            view = current.superview
        }
        return false
    }

    /// Tells the window this view is in that it changed.
    public func setNeedsSend() {
        window?.setNeedsSend()
    }

    /// What the view draws over its background; subclasses say.
    var content: ViewNode.Content { .none }

    /// The view and its subviews as the host sees them.
    public func viewNode() -> ViewNode {
        ViewNode(content: content, frame: frame, backgroundColor: backgroundColor,
                 isPrivacySensitive: isPrivacySensitive, isHidden: isHidden,
                 subviews: subviews.map { $0.viewNode() })
    }
}

/// One line of text, like `UILabel`: left-aligned, vertically centred in the frame.
@MainActor
open class Label: View {
    public var text: String {
        didSet { if text != oldValue { setNeedsSend() } }
    }
    /// Points; 17 by default (UIKit's body size).
    public var fontSize: Double {
        didSet { if fontSize != oldValue { setNeedsSend() } }
    }
    public var textColor: RGBA {
        didSet { if textColor != oldValue { setNeedsSend() } }
    }

    public init(text: String = "", frame: Rect = Rect(x: 0, y: 0, width: 0, height: 0), fontSize: Double = 17,
                textColor: RGBA = .black, backgroundColor: RGBA? = nil) {
        self.text = text
        self.fontSize = fontSize
        self.textColor = textColor
        super.init(frame: frame, backgroundColor: backgroundColor)
    }

    override var content: ViewNode.Content {
        .label(text: text, fontSize: fontSize, color: textColor)
    }
}

/// An editable line of text, like `UITextField`: its text, or the placeholder (in
/// grey) while the text is empty. With ``isSecureTextEntry`` it is drawn as one
/// bullet per character (see ``SecureTextField``).
@MainActor
open class TextField: View {
    public var text: String {
        didSet { if text != oldValue { setNeedsSend() } }
    }
    public var placeholder: String? {
        didSet { if placeholder != oldValue { setNeedsSend() } }
    }
    /// Points; 17 by default.
    public var fontSize: Double {
        didSet { if fontSize != oldValue { setNeedsSend() } }
    }
    public var textColor: RGBA {
        didSet { if textColor != oldValue { setNeedsSend() } }
    }
    /// `UITextField.isSecureTextEntry`: a password field. The host draws bullets,
    /// and the `redact` policy blanks the field.
    public var isSecureTextEntry: Bool {
        didSet { if isSecureTextEntry != oldValue { setNeedsSend() } }
    }

    public init(text: String = "", placeholder: String? = nil, frame: Rect = Rect(x: 0, y: 0, width: 0, height: 0),
                fontSize: Double = 17, textColor: RGBA = .black, backgroundColor: RGBA? = nil,
                isSecureTextEntry: Bool = false) {
        self.text = text
        self.placeholder = placeholder
        self.fontSize = fontSize
        self.textColor = textColor
        self.isSecureTextEntry = isSecureTextEntry
        super.init(frame: frame, backgroundColor: backgroundColor)
    }

    override var content: ViewNode.Content {
        isSecureTextEntry
            ? .secureTextField(text: text, fontSize: fontSize, color: textColor)
            : .textField(text: text, placeholder: placeholder, fontSize: fontSize, color: textColor)
    }
}

/// A password field: a ``TextField`` with ``TextField/isSecureTextEntry`` on.
@MainActor
open class SecureTextField: TextField {
    public init(text: String = "", frame: Rect = Rect(x: 0, y: 0, width: 0, height: 0), fontSize: Double = 17,
                textColor: RGBA = .black, backgroundColor: RGBA? = nil) {
        super.init(text: text, placeholder: nil, frame: frame, fontSize: fontSize, textColor: textColor,
                   backgroundColor: backgroundColor, isSecureTextEntry: true)
    }
}

/// A PNG from the app's bundle, scaled to fill the frame, like `UIImageView` with
/// `UIImage(named:)`. The name is a path relative to the bundle folder (the one
/// holding Info.plist), e.g. `"logo.png"` or `"Images/logo.png"`; the host reads the
/// file when it renders, and draws nothing there if it cannot.
@MainActor
open class ImageView: View {
    public var imageName: String {
        didSet { if imageName != oldValue { setNeedsSend() } }
    }

    public init(named name: String, frame: Rect = Rect(x: 0, y: 0, width: 0, height: 0), backgroundColor: RGBA? = nil) {
        self.imageName = name
        super.init(frame: frame, backgroundColor: backgroundColor)
    }

    override var content: ViewNode.Content { .image(name: imageName) }
}

/// The app's window, like `UIWindow`: a background colour filling the screen and
/// the top-level views on it, bottom to top. Show it by setting
/// ``Application/window``.
@MainActor
public final class Window {
    /// What shows where no view draws; white by default.
    public var backgroundColor: RGBA {
        didSet { if backgroundColor != oldValue { setNeedsSend() } }
    }
    /// The top-level views, bottom to top (frames relative to the window).
    public private(set) var subviews: [View] = []
    /// The application showing this window, which sends its tree when it changes.
    weak var application: Application?

    /// The screen the host draws snapshots for (its `snapshots.screen`, told in the
    /// handshake), in pixels with its scale; ``ScreenSize/default`` (an iPhone 13 / 14)
    /// until then.
    public nonisolated static var screen: ScreenSize { currentScreen.withLock { $0 } }

    /// The screen in points (390 × 844 on the default screen), which the host renders:
    /// a view with this frame covers the whole snapshot.
    public nonisolated static var bounds: Rect { bounds(of: screen) }

    private nonisolated static let currentScreen = Mutex(ScreenSize.default)

    /// `screen` in points.
    nonisolated static func bounds(of screen: ScreenSize) -> Rect {
        Rect(x: 0, y: 0, width: Double(screen.width) / screen.scale, height: Double(screen.height) / screen.scale)
    }

    /// Takes the host's screen (from the handshake).
    nonisolated static func useScreen(_ screen: ScreenSize) {
        currentScreen.withLock { $0 = screen }
    }

    /// The window's bounds: ``Window/bounds``.
    public var bounds: Rect { Self.bounds }

    /// A window with `backgroundColor` and, optionally, one root view.
    public init(backgroundColor: RGBA = .white, rootView: View? = nil) {
        self.backgroundColor = backgroundColor
        if let rootView { addSubview(rootView) }
    }

    /// The bottom-most top-level view; setting it replaces all top-level views with
    /// that one (nil removes them all), like `UIWindow.rootViewController`'s view.
    public var rootView: View? {
        get { subviews.first }
        set {
            for view in subviews { view.containingWindow = nil }
            subviews = []
            if let newValue { addSubview(newValue) }
            setNeedsSend()
        }
    }

    /// Adds `view` on top of the other top-level views; a view that is somewhere
    /// else is moved here.
    public func addSubview(_ view: View) {
        insertSubview(view, at: subviews.count)
    }

    /// Inserts `view` at `index` among the top-level views (0 is the bottom; clamped).
    public func insertSubview(_ view: View, at index: Int) {
        view.detach()
        subviews.insert(view, at: max(0, min(index, subviews.count)))
        view.containingWindow = self
        setNeedsSend()
    }

    fileprivate func removeTopLevel(_ view: View) {
        subviews.removeAll { $0 === view }
        view.containingWindow = nil
        setNeedsSend()
    }

    /// Marks the window changed: its application sends the tree (once) at the next
    /// point ``Application/window`` describes. A window no application shows ignores it.
    public func setNeedsSend() {
        application?.windowDidChange(self)
    }

    /// The window as the host sees it.
    public func viewTree() -> ViewTree {
        ViewTree(backgroundColor: backgroundColor, views: subviews.map { $0.viewNode() })
    }
}
