import AppHostManifest
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
    /// The build settings the manifest was read with (`--setting`, `--xcconfig`).
    public var settings: [String: String]

    public init(manifestPath: String, manifest: Manifest, entitlementsPath: String?, entitlementKeys: [String],
                settings: [String: String] = [:]) {
        self.manifestPath = manifestPath
        self.manifest = manifest
        self.entitlementsPath = entitlementsPath
        self.entitlementKeys = entitlementKeys
        self.settings = settings
    }

    /// The non-empty string the app's Info.plist gives `key`: written in the file, or, when
    /// Xcode generates the Info.plist (`GENERATE_INFOPLIST_FILE = YES`), the
    /// `INFOPLIST_KEY_<key>` build setting it takes it from. Nil when absent or empty.
    public func infoPlistString(_ key: String) -> String? {
        if let raw = try? ManifestReader.readRaw(path: manifestPath),
           let value = raw.propertyList()[key] as? String, !value.isEmpty {
            return value
        }
        let generated = ManifestReader.generatedValue(key, settings: settings,
                                                      bundleName: ManifestReader.defaultBundleName(forManifestAt: manifestPath))
        return generated?.isEmpty == false ? generated : nil
    }

    /// A finding for each of `keys` the app lacks (see ``infoPlistString(_:)``), saying
    /// what iOS then does; used by the modes whose APIs need a usage description.
    func missingUsageDescriptions(_ keys: [String], mode: BackgroundMode, severity: LintFinding.Severity,
                                  consequence: (String) -> String) -> [LintFinding] {
        keys.filter { infoPlistString($0) == nil }.map { key in
            LintFinding(severity, file: manifestPath, key: key, mode: mode.rawValue,
                        "background mode \"\(mode.rawValue)\" without \(key): \(consequence(key))")
        }
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
