import AppHostProtocol
import Foundation

/// A manifest read as far as it goes, for `apphost lint`: every problem found (not only
/// the first, as ``ManifestReader/read(path:settings:bundleName:)`` throws), and the
/// manifest made of what was valid.
public struct LenientManifest: Sendable {
    /// The Info.plist, as the caller named it (`Foo.app` becomes `Foo.app/Info.plist`).
    public var displayPath: String
    /// Every problem, in the order a strict read meets them: the first one is the error
    /// ``ManifestReader/read(path:settings:bundleName:)`` throws for the same file.
    public var problems: [ManifestError]
    /// The manifest built from the valid parts; nil only when the file could not be read
    /// as a property list dictionary (``problems`` then says why).
    ///
    /// Where a key has a problem the value is a stand-in: an unknown or mistyped
    /// `UIBackgroundModes` entry is left out, a mistyped optional key is absent, an
    /// unresolved `BGTaskSchedulerPermittedIdentifiers` entry is kept as written, and a
    /// missing, unresolved or invalid `CFBundleIdentifier` / `CFBundleExecutable` is the text
    /// as written (`""` when missing): see ``bundleIdentifierResolved``.
    public var manifest: Manifest?
    /// `UIBackgroundModes` entries as written (strings only), in file order; nil when the
    /// key is absent or not an array.
    public var writtenBackgroundModes: [String]?
    /// Whether `CFBundleIdentifier` is present, resolved and well formed, so that
    /// `manifest.bundleIdentifier` is the id the host would install the app under.
    public var bundleIdentifierResolved: Bool
    /// What reads but is likely not meant (see ``ManifestReader/resolveWithWarnings(_:settings:bundleName:)``).
    public var warnings: [ManifestWarning] = []
}

extension ManifestReader {
    /// Reads a manifest without stopping at the first problem: each key is checked on its
    /// own and every problem is collected, each worded as the strict reader words it
    /// (every unknown background mode, with its "did you mean", not only the first).
    /// `path` and `bundleName` are as in ``read(path:settings:bundleName:)``.
    public static func readLenient(path: String, settings: [String: String] = [:], bundleName: String? = nil)
        -> LenientManifest
    {
        let display = manifestPath(for: path)
        return readLenient(settings: settings, bundleName: bundleName, displayPath: display) { () throws(ManifestError) in
            try PropertyListFile.load(path: display, display: display)
        }
    }

    /// Reads a manifest from bytes already read, as ``readLenient(path:settings:bundleName:)``
    /// reads a file; `displayPath` names it in problems and gives the default bundle name.
    static func readLenient(data: Data, displayPath: String, settings: [String: String] = [:], bundleName: String? = nil)
        -> LenientManifest
    {
        readLenient(settings: settings, bundleName: bundleName, displayPath: displayPath) { () throws(ManifestError) in
            try PropertyListFile.parse(data, display: displayPath)
        }
    }

    private static func readLenient(
        settings: [String: String], bundleName: String?, displayPath display: String,
        load: () throws(ManifestError) -> (dictionary: [String: Any], data: Data, format: PropertyListFileFormat)
    ) -> LenientManifest {
        let loaded: (dictionary: [String: Any], data: Data, format: PropertyListFileFormat)
        do {
            loaded = try load()
        } catch {
            return LenientManifest(displayPath: display, problems: [error], manifest: nil,
                                   writtenBackgroundModes: nil, bundleIdentifierResolved: false)
        }
        var fields = LenientFields(dictionary: loaded.dictionary, file: display)

        // Types, in the order `readRaw` checks them.
        let bundleIdentifier = fields.string(bundleIdentifierKey)
        let executable = fields.string(executableKey)
        let (modes, written) = fields.backgroundModes()
        let name = fields.string(nameKey)
        let displayName = fields.string(displayNameKey)
        let bgTasks = fields.strings(bgTaskIdentifiersKey)
        let exitsOnSuspend = fields.bool(exitsOnSuspendKey)
        let protocols = fields.strings(externalAccessoryProtocolsKey)
        // AppHost's own keys, as `readRaw` reads them last.
        var snapshotPolicy: SnapshotPolicy?
        do {
            snapshotPolicy = try Fields(dictionary: loaded.dictionary, file: display).snapshotPolicy()
        } catch {
            fields.problems.append(error)
        }
        let launchImageFile = fields.string(launchImageFileKey)
        var problems = fields.problems

        // A mistyped identity key is already reported: give resolve a stand-in so it does
        // not report it again as missing.
        let idMistyped = problems.contains { $0.key == bundleIdentifierKey }
        let executableMistyped = problems.contains { $0.key == executableKey }
        let placeholderID = "apphost.lint.placeholder"
        let placeholderText = "apphost-lint-placeholder"
        var raw = RawManifest(
            displayPath: display,
            sourcePath: absolutePath(display),
            format: loaded.format,
            rawBundleIdentifier: idMistyped ? placeholderID : bundleIdentifier,
            rawExecutable: executableMistyped ? placeholderText : executable,
            rawName: name,
            rawDisplayName: displayName,
            backgroundModes: modes,
            declaresBackgroundModes: loaded.dictionary[backgroundModesKey] != nil,
            rawBGTaskIdentifiers: bgTasks.values.map { $0 ?? placeholderText },
            exitsOnSuspend: exitsOnSuspend,
            rawExternalAccessoryProtocols: protocols.values.compactMap { $0 },
            keys: loaded.dictionary.keys.sorted(),
            data: loaded.data
        )
        raw.snapshotPolicy = snapshotPolicy
        raw.launchImageFile = launchImageFile

        let bundle = bundleName ?? defaultBundleName(forManifestAt: display)

        // `BGTaskSchedulerPermittedIdentifiers` entries are checked here, one pass over
        // them (as `resolve` checks them, after the identity keys): an unresolved one is
        // replaced by a stand-in and kept as written in the manifest.
        let expander = Self.expander(settings: settings, bundleName: bundle)
        var keptAsWritten: [Int: String] = [:]
        var taskProblems: [ManifestError] = []
        for (i, id) in raw.rawBGTaskIdentifiers.enumerated() {
            do {
                _ = try expandRequired(id, expander: expander, file: display, key: bgTaskIdentifiersKey, index: i)
            } catch {
                taskProblems.append(error)
                keptAsWritten[i] = id
                raw.rawBGTaskIdentifiers[i] = placeholderText
            }
        }

        // `resolve` stops at its first problem: record it, put a stand-in in its place, go
        // again. Each round fixes one identity key, so this ends within three rounds.
        var idResolved = !idMistyped
        var executableResolved = !executableMistyped
        var manifest: Manifest?
        var warnings: [ManifestWarning] = []
        for _ in 0..<3 {
            do {
                var m: Manifest
                (m, warnings) = try resolveWithWarnings(raw, settings: settings, bundleName: bundle)
                if !idResolved { m.bundleIdentifier = idMistyped ? "" : bundleIdentifier ?? "" }
                if !executableResolved { m.executable = executableMistyped ? "" : executable ?? "" }
                for (i, text) in keptAsWritten { m.bgTaskIdentifiers[i] = text }
                // Mistyped entries are left out (from the end, so indices hold).
                for i in bgTasks.values.indices.reversed() where bgTasks.values[i] == nil {
                    m.bgTaskIdentifiers.remove(at: i)
                }
                manifest = m
                break
            } catch {
                problems.append(error)
                if error.key == bundleIdentifierKey, idResolved {
                    idResolved = false
                    raw.rawBundleIdentifier = placeholderID
                } else if error.key == executableKey, executableResolved {
                    executableResolved = false
                    raw.rawExecutable = placeholderText
                } else {
                    break  // not a problem a stand-in can route around (never expected)
                }
            }
        }
        problems += taskProblems
        return LenientManifest(displayPath: display, problems: problems, manifest: manifest,
                               writtenBackgroundModes: written, bundleIdentifierResolved: idResolved && manifest != nil,
                               warnings: warnings)
    }
}

/// Typed access to the top-level dictionary that records problems instead of throwing
/// (worded as the strict reader's `Fields`).
private struct LenientFields {
    let dictionary: [String: Any]
    let file: String
    var problems: [ManifestError] = []

    init(dictionary: [String: Any], file: String) {
        self.dictionary = dictionary
        self.file = file
    }

    mutating func string(_ key: String) -> String? {
        guard let value = dictionary[key] else { return nil }
        guard let s = value as? String else {
            problems.append(wrongType(key, nil, "a string", value))
            return nil
        }
        return s
    }

    /// The array's elements, nil for each element that is not a string (reported).
    mutating func strings(_ key: String) -> (values: [String?], present: Bool) {
        guard let value = dictionary[key] else { return ([], false) }
        guard let array = value as? [Any] else {
            problems.append(wrongType(key, nil, "an array of strings", value))
            return ([], true)
        }
        var out: [String?] = []
        for (i, element) in array.enumerated() {
            if let s = element as? String {
                out.append(s)
            } else {
                problems.append(wrongType(key, i, "a string", element))
                out.append(nil)
            }
        }
        return (out, true)
    }

    mutating func bool(_ key: String) -> Bool? {
        guard let value = dictionary[key] else { return nil }
        if let b = ManifestReader.boolValue(value) { return b }
        problems.append(wrongType(key, nil, "a boolean (<true/> or <false/>)", value))
        return nil
    }

    /// The known modes in file order, and the entries as written (strings only). Type
    /// problems come first, then every unknown mode, as the strict reader meets them.
    mutating func backgroundModes() -> (known: [BackgroundMode], written: [String]?) {
        let key = ManifestReader.backgroundModesKey
        let (values, present) = strings(key)
        guard present, dictionary[key] is [Any] else { return ([], nil) }
        var modes: [BackgroundMode] = []
        for (i, s) in values.enumerated() {
            guard let s else { continue }
            guard let mode = BackgroundMode(rawValue: s) else {
                let hint = BackgroundMode.suggestion(for: s).map { "did you mean \"\($0.rawValue)\"?" }
                    ?? "known modes: " + BackgroundMode.allCases.map(\.rawValue).joined(separator: ", ")
                problems.append(ManifestError(.unknownBackgroundMode, file: file, key: key, index: i, value: s,
                                              detail: "unknown mode \"\(s)\" (\(hint))"))
                continue
            }
            modes.append(mode)
        }
        return (modes, values.compactMap { $0 })
    }

    private func wrongType(_ key: String, _ index: Int?, _ expected: String, _ value: Any) -> ManifestError {
        ManifestError(.wrongType, file: file, key: key, index: index,
                      detail: "expected \(expected), found \(PropertyListFile.typeName(value))")
    }
}
