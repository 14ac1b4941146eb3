import AppHostProtocol
import Foundation

/// An Info.plist as written: the keys AppHost reads, type-checked, with build-setting
/// references left unexpanded and no key required. Every other key is kept in ``data``.
public struct RawManifest: Sendable, Equatable {
    /// The file, as the caller named it (used in error messages).
    public var displayPath: String
    /// The file's absolute path.
    public var sourcePath: String
    /// How the file was encoded.
    public var format: PropertyListFileFormat
    /// `CFBundleIdentifier` as written, if present.
    public var rawBundleIdentifier: String?
    /// `CFBundleExecutable` as written, if present.
    public var rawExecutable: String?
    /// `CFBundleName` as written, if present.
    public var rawName: String?
    /// `CFBundleDisplayName` as written, if present.
    public var rawDisplayName: String?
    /// `UIBackgroundModes`, validated, in file order (empty if absent).
    public var backgroundModes: [BackgroundMode]
    /// Whether the file has a `UIBackgroundModes` key at all.
    public var declaresBackgroundModes: Bool
    /// `BGTaskSchedulerPermittedIdentifiers` as written, in file order (empty if absent).
    public var rawBGTaskIdentifiers: [String]
    /// `UIApplicationExitsOnSuspend`, if present.
    public var exitsOnSuspend: Bool?
    /// `UISupportedExternalAccessoryProtocols` as written (empty if absent).
    public var rawExternalAccessoryProtocols: [String]
    /// Every top-level key in the file, sorted, including those AppHost ignores.
    public var keys: [String]
    /// The file's bytes, so the whole dictionary can be re-read (see ``propertyList()``).
    public var data: Data
    /// `AppHost` → `SnapshotPolicy`, if present.
    public var snapshotPolicy: SnapshotPolicy? = nil
    /// `UILaunchImageFile`, if present.
    public var launchImageFile: String? = nil

    /// The file's whole top-level dictionary, unknown keys included.
    public func propertyList() -> [String: Any] {
        PropertyListFile.dictionary(from: data)
    }
}

/// Reads app manifests (Info.plist files, XML or binary) with Foundation's property list
/// support, expands Xcode build-setting references and validates what AppHost relies on.
///
/// Build settings come from the caller (`apphost --setting KEY=VALUE`) on top of defaults
/// derived from the bundle name: `TARGET_NAME` is the bundle name, `PRODUCT_NAME` defaults
/// to `$(TARGET_NAME)` and `EXECUTABLE_NAME` to `$(PRODUCT_NAME)`, as in Xcode.
/// A missing `CFBundleIdentifier`, `CFBundleExecutable` or `CFBundleName` takes the reference
/// Xcode fills it from (``generatedIdentityKeys``). An unresolved reference is an error in
/// `CFBundleIdentifier`, `CFBundleExecutable` and each `BGTaskSchedulerPermittedIdentifiers`
/// entry; elsewhere it is left as written (a warning in the name and display name).
public enum ManifestReader {
    /// A property-list boolean, or one of the strings `YES`/`NO`/`true`/`false` (any case).
    static func boolValue(_ value: Any) -> Bool? {
        if let b = PropertyListFile.bool(value) { return b }
        switch (value as? String)?.lowercased() {
        case "yes"?, "true"?: return true
        case "no"?, "false"?: return false
        default: return nil
        }
    }

    /// `CFBundleIdentifier`.
    public static let bundleIdentifierKey = "CFBundleIdentifier"
    /// `CFBundleExecutable`.
    public static let executableKey = "CFBundleExecutable"
    /// `CFBundleName`.
    public static let nameKey = "CFBundleName"
    /// `CFBundleDisplayName`.
    public static let displayNameKey = "CFBundleDisplayName"
    /// `UIBackgroundModes`.
    public static let backgroundModesKey = "UIBackgroundModes"
    /// `BGTaskSchedulerPermittedIdentifiers`.
    public static let bgTaskIdentifiersKey = "BGTaskSchedulerPermittedIdentifiers"
    /// `UIApplicationExitsOnSuspend`.
    public static let exitsOnSuspendKey = "UIApplicationExitsOnSuspend"
    /// `UISupportedExternalAccessoryProtocols`.
    public static let externalAccessoryProtocolsKey = "UISupportedExternalAccessoryProtocols"
    /// `AppHost`: a dictionary of AppHost's own per-app settings (`SnapshotPolicy`).
    public static let appHostKey = "AppHost"
    /// `UILaunchImageFile`: a PNG in the bundle shown while the app launches.
    public static let launchImageFileKey = "UILaunchImageFile"

    /// Reads and validates a manifest. `path` is an Info.plist (or a plist of any name) or a
    /// folder holding `Info.plist`, such as `Foo.app`. `bundleName` defaults to
    /// ``defaultBundleName(forManifestAt:)``.
    public static func read(path: String, settings: [String: String] = [:], bundleName: String? = nil)
        throws(ManifestError) -> Manifest
    {
        try readWithWarnings(path: path, settings: settings, bundleName: bundleName).manifest
    }

    /// ``read(path:settings:bundleName:)``, with what reads but is likely not meant:
    /// references left unexpanded in `CFBundleName` and `CFBundleDisplayName`.
    public static func readWithWarnings(path: String, settings: [String: String] = [:], bundleName: String? = nil)
        throws(ManifestError) -> (manifest: Manifest, warnings: [ManifestWarning])
    {
        let plistPath = manifestPath(for: path)
        let raw = try readRaw(path: plistPath)
        return try resolveWithWarnings(raw, settings: settings,
                                       bundleName: bundleName ?? defaultBundleName(forManifestAt: plistPath))
    }

    /// Reads a manifest as written: types and background modes are checked, build settings
    /// are not expanded and no key is required. `path` is as in ``read(path:settings:bundleName:)``.
    public static func readRaw(path: String) throws(ManifestError) -> RawManifest {
        let display = manifestPath(for: path)
        return try readRaw(PropertyListFile.load(path: display, display: display), displayPath: display)
    }

    /// Reads a manifest from bytes already read (the file's contents), as
    /// ``readRaw(path:)`` reads a file; `displayPath` names it in errors.
    static func readRaw(data: Data, displayPath: String) throws(ManifestError) -> RawManifest {
        try readRaw(PropertyListFile.parse(data, display: displayPath), displayPath: displayPath)
    }

    private static func readRaw(
        _ loaded: (dictionary: [String: Any], data: Data, format: PropertyListFileFormat), displayPath display: String
    ) throws(ManifestError) -> RawManifest {
        let fields = Fields(dictionary: loaded.dictionary, file: display)
        let bundleIdentifier = try fields.string(bundleIdentifierKey)
        let executable = try fields.string(executableKey)
        let modes = try fields.backgroundModes()
        var raw = RawManifest(
            displayPath: display,
            sourcePath: absolutePath(display),
            format: loaded.format,
            rawBundleIdentifier: bundleIdentifier,
            rawExecutable: executable,
            rawName: try fields.string(nameKey),
            rawDisplayName: try fields.string(displayNameKey),
            backgroundModes: modes ?? [],
            declaresBackgroundModes: modes != nil,
            rawBGTaskIdentifiers: try fields.strings(bgTaskIdentifiersKey) ?? [],
            exitsOnSuspend: try fields.bool(exitsOnSuspendKey),
            rawExternalAccessoryProtocols: try fields.strings(externalAccessoryProtocolsKey) ?? [],
            keys: loaded.dictionary.keys.sorted(),
            data: loaded.data
        )
        raw.snapshotPolicy = try fields.snapshotPolicy()
        raw.launchImageFile = try fields.string(launchImageFileKey)
        return raw
    }

    /// The build settings Xcode fills identity keys from when an Info.plist leaves them
    /// out (projects with `GENERATE_INFOPLIST_FILE` keep such a partial Info.plist):
    /// `CFBundleIdentifier` = `$(PRODUCT_BUNDLE_IDENTIFIER)`, `CFBundleExecutable` =
    /// `$(EXECUTABLE_NAME)`, `CFBundleName` = `$(PRODUCT_NAME)`.
    public static let generatedIdentityKeys: KeyValuePairs<String, String> = [
        bundleIdentifierKey: "PRODUCT_BUNDLE_IDENTIFIER",
        executableKey: "EXECUTABLE_NAME",
        nameKey: "PRODUCT_NAME",
    ]

    /// The setting Xcode fills a missing `key` from, if it is an identity key.
    public static func generatingSetting(for key: String) -> String? {
        generatedIdentityKeys.first { $0.key == key }?.value
    }

    /// Whether `GENERATE_INFOPLIST_FILE` is on in `settings`: Xcode then also takes
    /// Info.plist keys from `INFOPLIST_KEY_<key>` build settings.
    public static func generatesInfoPlist(_ settings: [String: String]) -> Bool {
        boolValue(settings["GENERATE_INFOPLIST_FILE"] ?? "") == true
    }

    /// The `INFOPLIST_KEY_<key>` build setting that supplies `key` when Xcode generates
    /// the Info.plist (`GENERATE_INFOPLIST_FILE = YES`), expanded; nil otherwise.
    public static func generatedValue(_ key: String, settings: [String: String], bundleName: String) -> String? {
        guard generatesInfoPlist(settings), let written = settings["INFOPLIST_KEY_" + key] else { return nil }
        return expander(settings: settings, bundleName: bundleName).expand(written).value
    }

    /// Expands and checks a raw manifest: identity keys present, references in required keys
    /// resolved, the bundle identifier well formed.
    public static func resolve(_ raw: RawManifest, settings: [String: String] = [:], bundleName: String)
        throws(ManifestError) -> Manifest
    {
        try resolveWithWarnings(raw, settings: settings, bundleName: bundleName).manifest
    }

    /// ``resolve(_:settings:bundleName:)``, with warnings.
    ///
    /// A missing `CFBundleIdentifier`, `CFBundleExecutable` or `CFBundleName` takes the
    /// reference Xcode puts there (``generatedIdentityKeys``), expanded like one written;
    /// only when that leaves the identifier or executable unresolved is it an error,
    /// naming the setting to pass. With `GENERATE_INFOPLIST_FILE = YES` a missing
    /// `CFBundleDisplayName` comes from `INFOPLIST_KEY_CFBundleDisplayName`. References
    /// left unresolved in the name or the display name are kept as written and warned about.
    public static func resolveWithWarnings(_ raw: RawManifest, settings: [String: String] = [:], bundleName: String)
        throws(ManifestError) -> (manifest: Manifest, warnings: [ManifestWarning])
    {
        let file = raw.displayPath
        let expander = Self.expander(settings: settings, bundleName: bundleName)
        var warnings: [ManifestWarning] = []

        func required(_ key: String, _ value: String?, index: Int? = nil) throws(ManifestError) -> String {
            guard let value else {
                guard let setting = generatingSetting(for: key) else {
                    throw ManifestError(.missingKey, file: file, key: key, detail: "required key is missing")
                }
                let expansion = expander.expand("$(\(setting))")
                guard let first = expansion.unresolved.first else { return expansion.value }
                let needs = first.name == setting ? "\(setting) has no value"
                    : "\(setting) needs \(shortened(first.reference)), which has no value"
                throw ManifestError(.missingKey, file: file, key: key, value: first.name,
                                    detail: "missing, and Xcode fills it from $(\(setting)), but \(needs) (pass --setting \(shortened(first.name))=... or an --xcconfig file that sets it)")
            }
            return try expandRequired(value, expander: expander, file: file, key: key, index: index)
        }

        /// A display string: expanded, unresolved references kept as written and warned about.
        func display(_ key: String, _ value: String) -> String {
            let expansion = expander.expand(value)
            let names = expansion.unresolved.map(\.reference).reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
            if !names.isEmpty {
                let settingNames = expansion.unresolved.map(\.name).reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
                warnings.append(ManifestWarning(file: file, key: key, value: expansion.value,
                    detail: "\(names.map(shortened).joined(separator: ", ")) \(names.count == 1 ? "has" : "have") no value, so it reads \"\(shortened(expansion.value))\" (pass \(settingNames.map { "--setting \(shortened($0))=..." }.joined(separator: " ")) or an --xcconfig file that sets \(names.count == 1 ? "it" : "them"))"))
            }
            return expansion.value
        }

        let bundleIdentifier = try required(bundleIdentifierKey, raw.rawBundleIdentifier)
        try checkBundleIdentifier(bundleIdentifier, file: file)
        let executable = try required(executableKey, raw.rawExecutable)
        if executable.isEmpty {
            throw ManifestError(.invalidValue, file: file, key: executableKey, detail: "is empty (name the app's executable)")
        }
        var bgTaskIdentifiers: [String] = []
        for (i, id) in raw.rawBGTaskIdentifiers.enumerated() {
            bgTaskIdentifiers.append(try required(bgTaskIdentifiersKey, id, index: i))
        }
        let name = display(nameKey, raw.rawName ?? "$(PRODUCT_NAME)")
        let generatedDisplayName = generatesInfoPlist(settings) ? settings["INFOPLIST_KEY_" + displayNameKey] : nil
        let displayName = (raw.rawDisplayName ?? generatedDisplayName).map { display(displayNameKey, $0) }
        let manifest = Manifest(
            bundleIdentifier: bundleIdentifier,
            executable: executable,
            name: name.isEmpty ? bundleName : name,
            displayName: displayName,
            backgroundModes: raw.backgroundModes,
            bgTaskIdentifiers: bgTaskIdentifiers,
            exitsOnSuspend: raw.exitsOnSuspend ?? false,
            externalAccessoryProtocols: raw.rawExternalAccessoryProtocols.map { expander.expand($0).value },
            sourcePath: raw.sourcePath,
            snapshotPolicy: raw.snapshotPolicy,
            launchImageFile: raw.launchImageFile.map { expander.expand($0).value }
        )
        return (manifest, warnings)
    }

    /// The expander ``resolve(_:settings:bundleName:)`` uses: `settings` over the defaults.
    static func expander(settings: [String: String], bundleName: String) -> BuildSettingExpander {
        BuildSettingExpander(settings: defaultSettings(bundleName: bundleName).merging(settings) { $1 })
    }

    /// `value` of a key AppHost needs, expanded; its first unresolved reference is an error.
    static func expandRequired(_ value: String, expander: BuildSettingExpander, file: String, key: String, index: Int?)
        throws(ManifestError) -> String
    {
        let expansion = expander.expand(value)
        if let first = expansion.unresolved.first {
            throw unresolvedError(first, file: file, key: key, index: index)
        }
        return expansion.value
    }

    /// The settings every manifest can use: `TARGET_NAME` = `bundleName`,
    /// `PRODUCT_NAME` = `$(TARGET_NAME)`, `EXECUTABLE_NAME` = `$(PRODUCT_NAME)`.
    public static func defaultSettings(bundleName: String) -> [String: String] {
        ["TARGET_NAME": bundleName, "PRODUCT_NAME": "$(TARGET_NAME)", "EXECUTABLE_NAME": "$(PRODUCT_NAME)"]
    }

    /// The bundle name of a manifest: `Foo` for `Foo.app/Info.plist`; the folder's name for an
    /// `Info.plist` outside a `.app`; otherwise the file's name without its extension and
    /// without an Xcode-style `-Info` suffix (`Foo-Info.plist` → `Foo`).
    public static func defaultBundleName(forManifestAt path: String) -> String {
        let plist = manifestPath(for: path) as NSString
        let folder = plist.deletingLastPathComponent as NSString
        let folderName = (absolutePath(folder as String) as NSString).lastPathComponent
        if folder.pathExtension == "app" || plist.lastPathComponent == "Info.plist" {
            return (folderName as NSString).deletingPathExtension
        }
        let stem = (plist.lastPathComponent as NSString).deletingPathExtension
        return stem.hasSuffix("-Info") && stem.count > 5 ? String(stem.dropLast(5)) : stem
    }

    /// `path` itself for a file, `path/Info.plist` for a folder.
    public static func manifestPath(for path: String) -> String {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            return (path as NSString).appendingPathComponent("Info.plist")
        }
        return path
    }

    /// `path` made absolute against the current directory, with `.` and `..` removed.
    static func absolutePath(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path
            : (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(path)
        return (absolute as NSString).standardizingPath
    }

    private static func unresolvedError(_ u: BuildSettingExpander.Unresolved, file: String, key: String, index: Int?)
        -> ManifestError
    {
        let reference = shortened(u.reference)
        switch u.problem {
        case .undefined:
            return ManifestError(.unresolvedBuildSetting, file: file, key: key, index: index, value: u.name,
                                 detail: "unresolved build setting \(reference) (pass --setting \(shortened(u.name))=...)")
        case .unknownOperator(let op):
            let known = (BuildSettingExpander.operators.keys.sorted() + ["default=VALUE"]).joined(separator: ", ")
            return ManifestError(.unknownBuildSettingOperator, file: file, key: key, index: index, value: op,
                                 detail: "unknown build setting operator \"\(shortened(op))\" in \(reference) (known: \(known))")
        case .nestedTooDeep:
            return ManifestError(.unresolvedBuildSetting, file: file, key: key, index: index,
                                 detail: "build setting references nested more than \(BuildSettingExpander.maximumDepth) deep at \(reference)")
        }
    }

    /// Text from the file as an error message quotes it: at most 80 characters.
    static func shortened(_ text: String) -> String {
        text.count > 80 ? String(text.prefix(80)) + "…" : text
    }

    /// The longest bundle identifier: ``BundleID/maximumLength`` (155, App Store Connect's limit).
    public static let maximumBundleIdentifierLength = BundleID.maximumLength

    /// A bundle identifier names the app's container folder, so it must be a plain
    /// reverse-DNS string: the rule is ``BundleID``'s (``BundleID/problem(with:)``); this
    /// only words the error for a manifest.
    private static func checkBundleIdentifier(_ id: String, file: String) throws(ManifestError) {
        switch BundleID.problem(with: id) {
        case nil:
            return
        case .tooLong:
            throw ManifestError(.invalidValue, file: file, key: bundleIdentifierKey, value: id,
                                detail: "bundle identifier \"\(shortened(id))\" is \(id.count) characters long, over the limit of \(maximumBundleIdentifierLength) (App Store Connect's)")
        case .malformed:
            throw ManifestError(.invalidValue, file: file, key: bundleIdentifierKey, value: id,
                                detail: "invalid bundle identifier \"\(shortened(id))\" (use reverse-DNS form with only A-Z, a-z, 0-9, '-' and '.', e.g. com.example.App)")
        }
    }
}

/// Something in a manifest that reads but is likely not what was meant, e.g. a
/// build-setting reference left as written in `CFBundleName`.
public struct ManifestWarning: Sendable, Equatable, CustomStringConvertible {
    /// The Info.plist, as the caller named it.
    public var file: String
    /// The key concerned.
    public var key: String?
    /// The value as it now reads.
    public var value: String?
    /// What is off and what to do.
    public var detail: String

    /// Creates a warning.
    public init(file: String, key: String? = nil, value: String? = nil, detail: String) {
        self.file = file
        self.key = key
        self.value = value
        self.detail = detail
    }

    /// `file: key: detail`.
    public var description: String {
        ([file] + (key.map { [$0] } ?? []) + [detail]).joined(separator: ": ")
    }
}

/// Typed access to the top-level dictionary, throwing errors that name the key and index.
/// The strict reader's typed access to a manifest's keys (the lenient reader borrows it).
struct Fields {
    let dictionary: [String: Any]
    let file: String

    func string(_ key: String) throws(ManifestError) -> String? {
        guard let value = dictionary[key] else { return nil }
        guard let s = value as? String else { throw wrongType(key, nil, "a string", value) }
        return s
    }

    func strings(_ key: String) throws(ManifestError) -> [String]? {
        guard let value = dictionary[key] else { return nil }
        guard let array = value as? [Any] else { throw wrongType(key, nil, "an array of strings", value) }
        var out: [String] = []
        for (i, element) in array.enumerated() {
            guard let s = element as? String else { throw wrongType(key, i, "a string", element) }
            out.append(s)
        }
        return out
    }

    /// `<true/>`/`<false/>`, or the strings `YES`/`NO`/`true`/`false` (any case).
    func bool(_ key: String) throws(ManifestError) -> Bool? {
        guard let value = dictionary[key] else { return nil }
        if let b = ManifestReader.boolValue(value) { return b }
        throw wrongType(key, nil, "a boolean (<true/> or <false/>)", value)
    }


    /// `AppHost` → `SnapshotPolicy`: one of default, redact, launch-image, none.
    func snapshotPolicy() throws(ManifestError) -> SnapshotPolicy? {
        let key = ManifestReader.appHostKey
        guard let value = dictionary[key] else { return nil }
        guard let dict = value as? [String: Any] else { throw wrongType(key, nil, "a dictionary", value) }
        guard let raw = dict["SnapshotPolicy"] else { return nil }
        guard let text = raw as? String else { throw wrongType(key + ".SnapshotPolicy", nil, "a string", raw) }
        guard let policy = SnapshotPolicy(rawValue: text) else {
            throw ManifestError(.invalidValue, file: file, key: key + ".SnapshotPolicy", value: text,
                                detail: "unknown snapshot policy \"\(text)\" (known: \(SnapshotPolicy.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        return policy
    }

    func backgroundModes() throws(ManifestError) -> [BackgroundMode]? {
        let key = ManifestReader.backgroundModesKey
        guard let strings = try strings(key) else { return nil }
        var modes: [BackgroundMode] = []
        for (i, s) in strings.enumerated() {
            guard let mode = BackgroundMode(rawValue: s) else {
                let hint = BackgroundMode.suggestion(for: s).map { "did you mean \"\($0.rawValue)\"?" }
                    ?? "known modes: " + BackgroundMode.allCases.map(\.rawValue).joined(separator: ", ")
                throw ManifestError(.unknownBackgroundMode, file: file, key: key, index: i, value: s,
                                    detail: "unknown mode \"\(s)\" (\(hint))")
            }
            modes.append(mode)
        }
        return modes
    }

    private func wrongType(_ key: String, _ index: Int?, _ expected: String, _ value: Any) -> ManifestError {
        ManifestError(.wrongType, file: file, key: key, index: index,
                      detail: "expected \(expected), found \(PropertyListFile.typeName(value))")
    }
}

extension BackgroundMode {
    /// The documented mode closest to a misspelling, if one is close enough to be a likely
    /// typo (an edit distance of at most 2, or a third of the word's length).
    public static func suggestion(for text: String) -> BackgroundMode? {
        let word = Array(text.lowercased())
        let scored = allCases.map { ($0, editDistance(word, Array($0.rawValue))) }
        guard let best = scored.min(by: { $0.1 < $1.1 }) else { return nil }
        return best.1 <= max(2, word.count / 3) ? best.0 : nil
    }

    /// Optimal-string-alignment distance: insertions, deletions, substitutions and
    /// adjacent transpositions each cost 1 (so "audoi" is 1 from "audio").
    public static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = Array(repeating: Array(repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = Swift.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = Swift.min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }
}
