import AppHostProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An entitlements file (`Name.entitlements`): a property list whose top-level keys
/// are the entitlements the app claims.
public struct Entitlements: Sendable, Equatable {
    /// The file's absolute path.
    public var path: String
    /// Every top-level key, sorted (e.g. `aps-environment`, `com.apple.developer.siri`).
    public var keys: [String]
    /// The file's bytes, so values can be re-read (see ``propertyList()``).
    public var data: Data

    /// Reads an entitlements file, XML or binary.
    public static func read(path: String) throws(ManifestError) -> Entitlements {
        let loaded = try PropertyListFile.load(path: path, display: path)
        return Entitlements(path: ManifestReader.absolutePath(path), keys: loaded.dictionary.keys.sorted(), data: loaded.data)
    }

    /// The file's whole top-level dictionary.
    public func propertyList() -> [String: Any] {
        PropertyListFile.dictionary(from: data)
    }

    /// The entitlement listing the App Groups the app belongs to.
    public static let applicationGroupsKey = "com.apple.security.application-groups"

    /// The App Group identifiers of `com.apple.security.application-groups`, in the
    /// file's order without repeats, build-setting references (`$(VAR)`) expanded
    /// with `settings`; empty without the key.
    ///
    /// Each must then be `group.` followed by letters, digits, `.`, `-` or `_` (at
    /// most 255 bytes in all), as Xcode requires on iOS: the identifier names the
    /// group's shared container, `<state>/groups/<identifier>`, so it must be a plain
    /// file name. Loading a bundle does not ask for them (entitlements files often
    /// hold references only a build fills in); installing one does.
    public func applicationGroups(settings: [String: String] = [:]) throws(ManifestError) -> [String] {
        let key = Self.applicationGroupsKey
        guard let value = propertyList()[key] else { return [] }
        guard let array = value as? [Any] else {
            throw ManifestError(.wrongType, file: path, key: key,
                                detail: "expected an array of App Group identifiers (strings)")
        }
        let expander = BuildSettingExpander(settings: settings)
        var groups: [String] = []
        for (index, element) in array.enumerated() {
            guard let written = element as? String else {
                throw ManifestError(.wrongType, file: path, key: key, index: index,
                                    detail: "expected a string (an App Group identifier such as group.com.example.shared)")
            }
            let (identifier, unresolved) = expander.expand(written)
            if let first = unresolved.first {
                throw ManifestError(.unresolvedBuildSetting, file: path, key: key, index: index, value: first.name,
                                    detail: "\(first.reference) has no value: pass it as a build setting (apphost install --setting \(first.name)=...) or write the group identifier")
            }
            guard Self.isApplicationGroupIdentifier(identifier) else {
                throw ManifestError(.invalidValue, file: path, key: key, index: index, value: identifier,
                                    detail: "\"\(identifier)\" is not an App Group identifier (expected group.<name>: letters, digits, '.', '-' and '_', at most 255 bytes)")
            }
            if !groups.contains(identifier) { groups.append(identifier) }
        }
        return groups
    }

    /// Whether `identifier` is `group.` plus letters, digits, `.`, `-` and `_`, at
    /// most 255 bytes: usable as a file name as it is.
    public static func isApplicationGroupIdentifier(_ identifier: String) -> Bool {
        let bytes = Array(identifier.utf8)
        guard identifier.hasPrefix("group."), bytes.count > 6, bytes.count <= 255 else { return false }
        return bytes.allSatisfy { byte in
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
    }
}

/// An app ready to launch: its manifest, the executable to run and its entitlements.
public struct AppBundle: Sendable, Equatable {
    /// The absolute path of the `.app` folder, or nil for a manifest outside one.
    public var bundlePath: String?
    /// The manifest, build settings expanded.
    public var manifest: Manifest
    /// The absolute path of the executable named by `CFBundleExecutable`.
    public var executablePath: String
    /// The entitlements file's top-level keys, sorted; empty if the bundle has none.
    public var entitlementKeys: [String]
    /// The absolute path of the entitlements file, if the bundle has one.
    public var entitlementsPath: String?
}

/// Loads app bundles: a folder `Name.app/` holding `Info.plist`, optionally
/// `Name.entitlements`, and the executable named by `CFBundleExecutable`.
public enum AppBundleLoader {
    /// Loads the bundle at `path`: a `.app` folder (or any folder holding `Info.plist`), or a
    /// manifest file of any name, whose folder then plays the bundle folder's part.
    ///
    /// The executable named by `CFBundleExecutable` (after expansion) is looked for, in order:
    /// 1. in the bundle folder (or the manifest's folder): `<folder>/<CFBundleExecutable>`;
    /// 2. in each of `productDirectories`, in the order given (see
    ///    ``defaultProductDirectories(forBundleAt:extra:)``).
    ///
    /// The first regular file the current user may execute wins. Wherever it is named
    /// from (`../x`, an absolute path, a symbolic link), the file must resolve to a place
    /// inside the bundle folder or one of `productDirectories`: the app's sandbox grants
    /// it the executable's folder, so a bundle naming a file elsewhere would widen its own
    /// grant (`.executableOutsideBundle`). The entitlements file is `entitlements` when
    /// given (an Xcode project keeps it anywhere, `CODE_SIGN_ENTITLEMENTS`; it must then
    /// exist), else `<folder>/<Name>.entitlements` if it exists, where `Name` is the bundle
    /// name (see ``ManifestReader/defaultBundleName(forManifestAt:)``).
    public static func load(path: String, settings: [String: String] = [:], productDirectories: [String] = [],
                            entitlements entitlementsFile: String? = nil)
        throws(ManifestError) -> AppBundle
    {
        let plistPath = ManifestReader.manifestPath(for: path)
        let folder = (plistPath as NSString).deletingLastPathComponent
        let bundleName = ManifestReader.defaultBundleName(forManifestAt: plistPath)
        let manifest = try ManifestReader.read(path: plistPath, settings: settings, bundleName: bundleName)
        let executablePath = try findExecutable(manifest.executable, in: [folder.isEmpty ? "." : folder] + productDirectories,
                                                manifestFile: plistPath)

        var entitlements: Entitlements?
        if let entitlementsFile {
            entitlements = try Entitlements.read(path: entitlementsFile)
        } else {
            let beside = defaultEntitlementsPath(forManifestAt: plistPath)
            if FileManager.default.fileExists(atPath: beside) {
                entitlements = try Entitlements.read(path: beside)
            }
        }
        let absoluteFolder = ManifestReader.absolutePath(folder)
        return AppBundle(
            bundlePath: (absoluteFolder as NSString).pathExtension == "app" ? absoluteFolder : nil,
            manifest: manifest,
            executablePath: executablePath,
            entitlementKeys: entitlements?.keys ?? [],
            entitlementsPath: entitlements?.path
        )
    }

    /// Where a bundle's entitlements are looked for when none is named:
    /// `<folder>/<BundleName>.entitlements` beside the manifest at `file`.
    public static func defaultEntitlementsPath(forManifestAt file: String) -> String {
        let folder = (file as NSString).deletingLastPathComponent
        let bundleName = ManifestReader.defaultBundleName(forManifestAt: file)
        return folder.isEmpty ? bundleName + ".entitlements"
            : (folder as NSString).appendingPathComponent(bundleName + ".entitlements")
    }

    /// The most `.entitlements` files ``misnamedEntitlements(forManifestAt:)`` names.
    public static let maximumMisnamedEntitlementsListed = 8

    /// `.entitlements` files beside the manifest at `file` when the one looked for
    /// (``defaultEntitlementsPath(forManifestAt:)``) is not there: a file under another
    /// name is not read, which a bundle's author rarely means. Sorted; at most
    /// ``maximumMisnamedEntitlementsListed``; empty when the expected file exists.
    public static func misnamedEntitlements(forManifestAt file: String) -> [String] {
        let expected = defaultEntitlementsPath(forManifestAt: file)
        guard !FileManager.default.fileExists(atPath: expected) else { return [] }
        let folder = (file as NSString).deletingLastPathComponent
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.isEmpty ? "." : folder) else { return [] }
        return names.filter { ($0 as NSString).pathExtension == "entitlements" }.sorted()
            .prefix(maximumMisnamedEntitlementsListed)
            .map { folder.isEmpty ? $0 : (folder as NSString).appendingPathComponent($0) }
    }

    /// The warning for ``misnamedEntitlements(forManifestAt:)``, naming both files; nil when there is none.
    public static func misnamedEntitlementsWarning(forManifestAt file: String) -> String? {
        let others = misnamedEntitlements(forManifestAt: file)
        guard let first = others.first else { return nil }
        let expected = defaultEntitlementsPath(forManifestAt: file)
        let listed = others.count == 1 ? first : others.joined(separator: ", ")
        return "\(listed) \(others.count == 1 ? "is" : "are") not read: AppHost looks for \(expected) (the bundle's name); rename it, or pass --entitlements \(first)"
    }

    /// Whether the file at `path` looks like an entitlements file rather than an Info.plist:
    /// named `.entitlements`, or a property list with entitlement keys (`aps-environment`,
    /// `com.apple.…`, `keychain-access-groups`) and no Info.plist key (`CFBundle…`, `UI…`, `NS…`, `LS…`).
    public static func isEntitlementsFile(_ path: String) -> Bool {
        if (path as NSString).pathExtension == "entitlements" { return true }
        guard (path as NSString).pathExtension == "plist",
              let raw = try? ManifestReader.readRaw(path: path), !raw.keys.isEmpty else { return false }
        let infoPrefixes = ["CFBundle", "UI", "NS", "LS", "BGTask", "DT", "MinimumOSVersion", "ITS"]
        let entitlementPrefixes = ["aps-environment", "com.apple.", "keychain-access-groups", "application-identifier"]
        let hasInfoKey = raw.keys.contains { key in infoPrefixes.contains { key.hasPrefix($0) } }
        let allEntitlements = raw.keys.allSatisfy { key in entitlementPrefixes.contains { key.hasPrefix($0) } }
        return !hasInfoKey && allEntitlements
    }

    /// The folders to search for executables built from source: `extra` (the caller passes
    /// `$APPHOST_PRODUCTS_DIR` if set and the folder holding the running `apphost`), then
    /// `.build/debug` and `.build/release` of the nearest folder at or above the bundle that
    /// holds a `Package.swift`, those two only if they exist. Duplicates are dropped.
    public static func defaultProductDirectories(forBundleAt path: String, extra: [String]) -> [String] {
        var result: [String] = []
        for dir in extra where !result.contains(dir) { result.append(dir) }
        guard let root = packageRoot(above: ManifestReader.absolutePath(path)) else { return result }
        for configuration in ["debug", "release"] {
            let dir = (root as NSString).appendingPathComponent(".build/" + configuration)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory), isDirectory.boolValue,
               !result.contains(dir) {
                result.append(dir)
            }
        }
        return result
    }

    /// `path` with every symbolic link, `.` and `..` resolved (realpath), or nil when it
    /// does not exist.
    static func resolved(_ path: String) -> String? {
        guard let real = realpath(path, nil) else { return nil }
        defer { free(real) }
        return String(cString: real)
    }

    /// The nearest folder at or above `path` holding a `Package.swift`.
    static func packageRoot(above path: String) -> String? {
        var dir = path
        while true {
            if FileManager.default.fileExists(atPath: (dir as NSString).appendingPathComponent("Package.swift")) {
                return dir
            }
            let parent = (dir as NSString).deletingLastPathComponent
            if parent == dir || parent.isEmpty { return nil }
            dir = parent
        }
    }

    /// A problem with how `CFBundleExecutable` is written that the loader refuses wherever
    /// the bundle lies (`..` components): nil when there is none. Shared with the linter.
    public static func executableNameProblem(_ name: String) -> String? {
        if name.split(separator: "/").contains("..") {
            return "\"\(name)\" climbs out of its folder (\"..\"): the executable must lie inside the bundle folder or a products directory"
        }
        return nil
    }

    private static func findExecutable(_ name: String, in directories: [String], manifestFile: String)
        throws(ManifestError) -> String
    {
        if let problem = executableNameProblem(name) {
            throw ManifestError(.executableOutsideBundle, file: manifestFile, key: ManifestReader.executableKey, value: name,
                                detail: problem)
        }
        // Where an executable may be: each folder searched, symbolic links resolved.
        let roots = directories.compactMap(resolved)
        func inside(_ path: String) -> Bool {
            roots.contains { $0 != "/" && (path == $0 || path.hasPrefix($0 + "/")) }
        }
        let candidates = name.hasPrefix("/") ? [name] : directories.map { ($0 as NSString).appendingPathComponent(name) }
        var notExecutable: [String] = []
        var outside: [(candidate: String, resolved: String)] = []
        for candidate in candidates {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory), !isDirectory.boolValue else {
                continue
            }
            guard let real = resolved(candidate), inside(real) else {
                outside.append((candidate, resolved(candidate) ?? candidate))
                continue
            }
            if access(candidate, X_OK) == 0 { return ManifestReader.absolutePath(candidate) }
            notExecutable.append(candidate)
        }
        if let first = outside.first, notExecutable.isEmpty {
            let shown = first.resolved == first.candidate ? first.candidate : "\(first.candidate), which is \(first.resolved)"
            throw ManifestError(.executableOutsideBundle, file: manifestFile, key: ManifestReader.executableKey, value: name,
                                detail: "executable \"\(name)\" is \(shown): outside the bundle folder and the products directories (\(directories.joined(separator: ", "))); put the executable inside one of them")
        }
        let looked = name.hasPrefix("/") ? "" : " (looked in: \(directories.joined(separator: ", ")))"
        let hint = notExecutable.isEmpty ? "" : "; \(notExecutable.joined(separator: ", ")) exists but is not executable (chmod +x)"
        throw ManifestError(.executableNotFound, file: manifestFile, key: ManifestReader.executableKey, value: name,
                            detail: "executable \"\(name)\" not found\(looked)\(hint)")
    }
}
