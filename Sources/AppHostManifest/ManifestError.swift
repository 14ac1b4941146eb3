/// Why a manifest, an entitlements file or an app bundle could not be read.
///
/// The description is one line naming the file, the key (with an array index where
/// one applies) and what is wrong, e.g.
/// `manifests/Foo.app/Info.plist: UIBackgroundModes[2]: unknown mode "audoi" (did you mean "audio"?)`.
public struct ManifestError: Error, CustomStringConvertible, Sendable, Equatable {
    /// What kind of problem this is.
    public enum Code: String, Sendable, Equatable, CaseIterable {
        /// The file does not exist.
        case fileNotFound
        /// The file exists but could not be read (permissions, a directory, I/O).
        case unreadable
        /// The file is larger than AppHost reads (1 MiB for a property list).
        case fileTooLarge
        /// Foundation could not parse the file as a property list.
        case malformedPropertyList
        /// The property list's top level is not a dictionary.
        case notADictionary
        /// A key AppHost needs is absent.
        case missingKey
        /// A key's value (or an array element) has the wrong property list type.
        case wrongType
        /// A key's value has the right type but is not acceptable (e.g. an empty executable name).
        case invalidValue
        /// A `UIBackgroundModes` entry is not one of the 13 documented modes.
        case unknownBackgroundMode
        /// A `$(VAR)` reference in a key AppHost needs has no value.
        case unresolvedBuildSetting
        /// A `$(VAR:op)` reference uses an operator AppHost does not know.
        case unknownBuildSettingOperator
        /// The executable named by `CFBundleExecutable` was not found in any searched folder.
        case executableNotFound
        /// `CFBundleExecutable` names a file outside the bundle folder and the host's
        /// products directories (`../x`, an absolute path elsewhere, a symbolic link out).
        case executableOutsideBundle
    }

    /// What kind of problem this is.
    public var code: Code
    /// The file, as the caller named it.
    public var file: String
    /// The top-level key concerned, if any.
    public var key: String?
    /// The array index within `key`, if any.
    public var index: Int?
    /// The offending value (a mode, a build setting name, an executable name), if any.
    public var value: String?
    /// What is wrong and, where possible, what to do about it.
    public var detail: String

    /// Creates an error.
    public init(_ code: Code, file: String, key: String? = nil, index: Int? = nil, value: String? = nil, detail: String) {
        self.code = code
        self.file = file
        self.key = key
        self.index = index
        self.value = value
        self.detail = detail
    }

    /// `file: key[index]: detail`, leaving out the parts that do not apply.
    public var description: String {
        var parts = [file]
        if let key {
            parts.append(index.map { "\(key)[\($0)]" } ?? key)
        }
        parts.append(detail)
        return parts.joined(separator: ": ")
    }
}
