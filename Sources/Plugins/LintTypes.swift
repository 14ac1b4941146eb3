import AppHostProtocol

/// What `apphost lint` checks: a bundle's manifest as written and as read.
public struct LintSubject: Sendable {
    /// The Info.plist's path.
    public var manifestPath: String
    /// The manifest, build settings expanded.
    public var manifest: Manifest
    /// The entitlements file's path, if the bundle has one.
    public var entitlementsPath: String?
    /// Its top-level keys.
    public var entitlementKeys: [String]

    public init(manifestPath: String, manifest: Manifest, entitlementsPath: String?, entitlementKeys: [String]) {
        self.manifestPath = manifestPath
        self.manifest = manifest
        self.entitlementsPath = entitlementsPath
        self.entitlementKeys = entitlementKeys
    }
}

/// One finding, printed like a compiler diagnostic: `file: severity: message`.
public struct LintFinding: Codable, Sendable, Equatable {
    public enum Severity: String, Codable, Sendable, Comparable {
        case error, warning, note
        private var rank: Int { self == .error ? 0 : self == .warning ? 1 : 2 }
        public static func < (a: Severity, b: Severity) -> Bool { a.rank < b.rank }
    }
    public var severity: Severity
    /// The file the finding is about (Info.plist, the entitlements, or the trace).
    public var file: String
    /// The key concerned, if any (e.g. `UIBackgroundModes`).
    public var key: String?
    /// The mode concerned, if any.
    public var mode: String?
    public var message: String

    public init(_ severity: Severity, file: String, key: String? = nil, mode: String? = nil, _ message: String) {
        self.severity = severity
        self.file = file
        self.key = key
        self.mode = mode
        self.message = message
    }

    /// `file: warning: message [key]`.
    public var line: String {
        "\(file): \(severity.rawValue): \(message)"
    }
}
