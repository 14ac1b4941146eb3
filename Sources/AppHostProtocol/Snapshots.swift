import Foundation

// App-switcher snapshots: what an app draws (a small view tree it sends to the host
// whenever it changed, before the callback that changed it returns), and the policies
// the host applies when it takes the picture.

/// An 8-bit RGBA colour.
public struct RGBA: Codable, Sendable, Equatable, Hashable {
    public var r: UInt8
    public var g: UInt8
    public var b: UInt8
    public var a: UInt8

    public init(_ r: UInt8, _ g: UInt8, _ b: UInt8, _ a: UInt8 = 255) {
        self.r = r
        self.g = g
        self.b = b
        self.a = a
    }

    public static let white = RGBA(255, 255, 255)
    public static let black = RGBA(0, 0, 0)
    public static let clear = RGBA(0, 0, 0, 0)
    /// What `redact` paints over a sensitive view (iOS's redaction grey).
    public static let redaction = RGBA(199, 199, 204)
    /// The plain launch image: a white screen.
    public static let launchBackground = RGBA(255, 255, 255)
}

/// A rectangle in points (UIKit's `CGRect`), relative to the parent view.
public struct Rect: Codable, Sendable, Equatable, Hashable {
    public var x: Double
    public var y: Double
    public var width: Double
    public var height: Double

    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }
}

/// One view of an app's window, with its subviews (later subviews draw on top).
public struct ViewNode: Codable, Sendable, Equatable {
    /// What the view draws over its background.
    public enum Content: Codable, Sendable, Equatable {
        /// A plain view or filled rectangle: only its background colour.
        case none
        /// `UILabel`: one line of text, left-aligned, vertically centred in the frame.
        case label(text: String, fontSize: Double, color: RGBA)
        /// `UITextField`: its text (or the placeholder in grey when empty).
        case textField(text: String, placeholder: String?, fontSize: Double, color: RGBA)
        /// `UITextField` with `isSecureTextEntry`: drawn as one bullet per character;
        /// the text is sent so a privacy check can find it anywhere else.
        case secureTextField(text: String, fontSize: Double, color: RGBA)
        /// `UIImageView` with a PNG from the app's bundle (a path relative to the bundle),
        /// scaled to fill the frame.
        case image(name: String)
    }

    public var content: Content
    public var frame: Rect
    /// Nil: transparent.
    public var backgroundColor: RGBA?
    /// SwiftUI's `privacySensitive()`: `redact` blanks it (and its subviews).
    public var isPrivacySensitive: Bool
    public var isHidden: Bool
    public var subviews: [ViewNode]

    public init(content: Content = .none, frame: Rect, backgroundColor: RGBA? = nil, isPrivacySensitive: Bool = false,
                isHidden: Bool = false, subviews: [ViewNode] = []) {
        self.content = content
        self.frame = frame
        self.backgroundColor = backgroundColor
        self.isPrivacySensitive = isPrivacySensitive
        self.isHidden = isHidden
        self.subviews = subviews
    }
}

/// An app's window: a background and its top-level views, bottom to top.
public struct ViewTree: Codable, Sendable, Equatable {
    public var backgroundColor: RGBA
    public var views: [ViewNode]

    public init(backgroundColor: RGBA = .white, views: [ViewNode] = []) {
        self.backgroundColor = backgroundColor
        self.views = views
    }
}

/// What the host keeps of an app when it leaves the foreground; stricter policies
/// come later in `allCases` (a host-wide policy wins when it is stricter).
public enum SnapshotPolicy: String, Codable, Sendable, CaseIterable, Comparable {
    /// The window as drawn.
    case `default` = "default"
    /// Every secure text field and every privacy-sensitive view blanked.
    case redact
    /// The app's launch image (`UILaunchImageFile`), or a plain default screen.
    case launchImage = "launch-image"
    /// No snapshot kept; earlier ones are deleted.
    case none

    public static func < (a: SnapshotPolicy, b: SnapshotPolicy) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }

    /// The stricter of two policies.
    public func stricter(_ other: SnapshotPolicy) -> SnapshotPolicy { max(self, other) }
}

/// The screen snapshots are rendered for: pixels and the points-to-pixels scale.
public struct ScreenSize: Codable, Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var scale: Double

    /// An iPhone 13 / 14: 390 × 844 points at 3×.
    public static let `default` = ScreenSize(width: 1170, height: 2532, scale: 3)

    public init(width: Int, height: Int, scale: Double) {
        self.width = width
        self.height = height
        self.scale = scale
    }
}

/// A snapshot the host keeps: the app's one switcher snapshot,
/// `snapshots/<bundle-id>/switcher.png` and `switcher.json` beside it (each new one
/// replaces both). `apphost snapshot` of an app in front answers with a screenshot in
/// this shape: number 0, reason `screenshot`, no text layer.
public struct SnapshotInfo: Codable, Sendable, Equatable {
    public var bundleIdentifier: BundleID
    /// The n-th picture taken of the app (1, 2, ...); 0 for a screenshot.
    public var number: Int
    /// Why it was taken: `didEnterBackground`, `background fetch`, `silent push` (with
    /// `; ignoreSnapshotOnNextApplicationLaunch` when that applied), or `screenshot`.
    public var reason: String
    /// The policy applied (the stricter of the app's and the host's).
    public var policy: SnapshotPolicy
    /// The PNG, nil under `none`.
    public var png: String?
    /// The text layer (every visible string with its frame, after the policy).
    public var textLayer: String?
    public var time: Date

    public init(bundleIdentifier: BundleID, number: Int, reason: String, policy: SnapshotPolicy, png: String?, textLayer: String?, time: Date) {
        self.bundleIdentifier = bundleIdentifier
        self.number = number
        self.reason = reason
        self.policy = policy
        self.png = png
        self.textLayer = textLayer
        self.time = time
    }
}

/// An app in the app switcher.
public struct SwitcherEntry: Codable, Sendable, Equatable {
    public var bundleIdentifier: BundleID
    public var name: String
    public var state: AppState
    /// Its switcher snapshot, if one is kept (never a screenshot).
    public var snapshot: SnapshotInfo?

    public init(bundleIdentifier: BundleID, name: String, state: AppState, snapshot: SnapshotInfo?) {
        self.bundleIdentifier = bundleIdentifier
        self.name = name
        self.state = state
        self.snapshot = snapshot
    }
}
