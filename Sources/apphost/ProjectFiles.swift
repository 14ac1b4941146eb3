import AppHostManifest
import AppHostProtocol
import ArgumentParser
import Foundation
import Plugins

// A project's own files for `manifest show`, `lint`, `install` and `run`: build settings
// from `.xcconfig` files, and an entitlements file kept anywhere in the tree.

extension SettingOptions {
    /// The build settings to read manifests with: each `--xcconfig` file's (in order, as
    /// Xcode reads them), then `--setting` over them, as `xcodebuild KEY=VALUE` wins over
    /// every level. Conditions (`[sdk=...]`, `[config=...]`) are matched against the
    /// `--setting` values of SDK_NAME, CURRENT_ARCH and CONFIGURATION (iphoneos, arm64,
    /// none by default). Warnings go to standard error; a file that cannot be read is a
    /// ``CLIError`` with exit status 65 naming its file and line.
    func resolved() throws(CLIError) -> [String: String] {
        let given = dictionary
        guard !xcconfigs.isEmpty else { return given }
        let loaded: XCConfigSettings
        do {
            loaded = try XCConfig.load(files: xcconfigs, conditions: XCConfig.Conditions(settings: given))
        } catch {
            throw CLIError(description: error.description, exitCode: 65)
        }
        for warning in loaded.warnings {
            FileHandle.standardError.write(Data("apphost: warning: \(warning.description)\n".utf8))
        }
        return loaded.settings.merging(given) { $1 }
    }

    /// ``resolved()``, or the error on standard error and its exit status.
    func resolvedOrExit() throws -> [String: String] {
        do {
            return try resolved()
        } catch {
            FileHandle.standardError.write(Data("apphost: \(error.description)\n".utf8))
            throw ExitCode(error.exitCode)
        }
    }
}

/// `--entitlements FILE`: the app's entitlements file, where an Xcode project keeps it.
struct EntitlementsOption: ParsableArguments {
    @Option(name: .customLong("entitlements"), help: ArgumentHelp(
        "The app's entitlements file (Xcode's CODE_SIGN_ENTITLEMENTS, anywhere in the project), instead of Name.entitlements beside Info.plist.",
        valueName: "file"))
    var path: String?

    /// The file made absolute, if one was named.
    var absolutePath: String? { path.map(absolute) }
}

/// Warnings about a manifest and its bundle that do not stop it from being used: build
/// settings left unexpanded in the name or display name, an entitlements file under
/// another name than the one looked for. Printed to standard error as `apphost: warning:`.
enum ManifestWarnings {
    /// The warnings for the manifest at `path` read with `settings`; none when it does not
    /// read (the reader's error is reported where it is used).
    static func lines(path: String, settings: [String: String], entitlements: String?) -> [String] {
        let file = ManifestReader.manifestPath(for: path)
        var lines: [String] = []
        if let read = try? ManifestReader.readWithWarnings(path: file, settings: settings) {
            lines += read.warnings.map(\.description)
        }
        if entitlements == nil, let misnamed = AppBundleLoader.misnamedEntitlementsWarning(forManifestAt: file) {
            lines.append("\(file): \(misnamed)")
        }
        return lines
    }

    /// Prints ``lines(path:settings:entitlements:)`` to standard error.
    static func print(path: String, settings: [String: String], entitlements: String?) {
        for line in lines(path: path, settings: settings, entitlements: entitlements) {
            FileHandle.standardError.write(Data("apphost: warning: \(line)\n".utf8))
        }
    }

    /// The error for an entitlements file given where a bundle or Info.plist is expected.
    static func entitlementsGivenAsManifest(_ file: String, verb: String) -> CLIError {
        CLIError(description: "\(file): this is an entitlements file, not an app bundle or Info.plist: name the app's bundle or Info.plist and pass this file with --entitlements (apphost \(verb) --entitlements \(file) App.app)",
                 exitCode: 65)
    }
}

/// An entitlements file as `manifest show --json` prints it: where it is, its keys, and
/// every value (data as base64, dates as ISO 8601).
struct EntitlementsJSON: Encodable {
    var file: String
    var keys: [String]
    var values: [String: JSONValue]

    init(_ entitlements: Entitlements) {
        file = entitlements.path
        keys = entitlements.keys
        let dictionary = entitlements.propertyList()
        values = dictionary.mapValues(JSONValue.init)
    }
}

/// A property list value as JSON.
enum JSONValue: Encodable {
    case string(String), bool(Bool), integer(Int64), real(Double), array([JSONValue]), object([String: JSONValue])

    init(_ value: Any) {
        if let b = value as? Bool, type(of: value) == Bool.self { self = .bool(b); return }
        switch value {
        case let s as String: self = .string(s)
        case let n as NSNumber:
            let kind = String(cString: n.objCType)
            if kind == "c" { self = .bool(n.boolValue) } else if ["d", "f"].contains(kind) { self = .real(n.doubleValue) } else { self = .integer(n.int64Value) }
        case let a as [Any]: self = .array(a.map(JSONValue.init))
        case let d as [String: Any]: self = .object(d.mapValues(JSONValue.init))
        case let date as Date: self = .string(ISO8601DateFormatter().string(from: date))
        case let data as Data: self = .string(data.base64EncodedString())
        default: self = .string("\(value)")
        }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let s): try c.encode(s)
        case .bool(let b): try c.encode(b)
        case .integer(let i): try c.encode(i)
        case .real(let d): try c.encode(d)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }
}

/// `manifest show --json`: the manifest's fields, and `entitlements` (null without a file).
struct ManifestShowJSON: Encodable {
    var manifest: Manifest
    var entitlements: EntitlementsJSON?

    private enum Key: String, CodingKey { case entitlements }

    func encode(to encoder: any Encoder) throws {
        try manifest.encode(to: encoder)
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(entitlements, forKey: .entitlements)
    }
}
