import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A problem in a file the user named (an `.xcconfig`, a trace), or a warning about one:
/// the file as named and the 1-based line, as a compiler names them
/// (`Config/Base.xcconfig:12: ...`).
public struct FileLineError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The file, as named (by the user, or by an `#include` joined to its folder).
    public var file: String
    /// The 1-based line, or nil when the file itself is the problem.
    public var line: Int?
    /// What is wrong and, where possible, what to do.
    public var detail: String

    /// Creates an error.
    public init(file: String, line: Int? = nil, detail: String) {
        self.file = file
        self.line = line
        self.detail = detail
    }

    /// `file:line: detail`.
    public var description: String {
        line.map { "\(file):\($0): \(detail)" } ?? "\(file): \(detail)"
    }
}

/// A problem in an `.xcconfig` file, or a warning about one.
public typealias XCConfigError = FileLineError

/// Build settings read from `.xcconfig` files.
public struct XCConfigSettings: Sendable, Equatable {
    /// Each setting's value after the last assignment that applies, `$(inherited)` and
    /// self-references replaced; other references (`$(PRODUCT_NAME)`) are left for the
    /// manifest's expansion, as Xcode resolves them at use.
    public var settings: [String: String]
    /// What was read but not applied (a condition AppHost does not evaluate, settings
    /// conditioned on a configuration when none was named).
    public var warnings: [XCConfigError]
    /// Every file read, in order (a file included twice is listed twice).
    public var files: [String]
}

/// Xcode's configuration settings files (`.xcconfig`), as Xcode reads them:
///
/// - one `SETTING = value` a line; a `;` ending the line is dropped; `//` starts a
///   comment wherever it is (Xcode's rule: a URL is written `https:/$()/host`);
/// - `#include "path"` reads another file there (a path relative to the including
///   file's folder, or absolute); `#include? "path"` does the same if the file exists
///   and is skipped silently if not;
/// - conditional settings `SETTING[sdk=iphoneos*][arch=arm64][config=Debug] = value`
///   (also `[sdk=iphoneos*,arch=arm64]`), each value a pattern with `*`: applied when
///   every condition matches ``Conditions``;
/// - `$(inherited)` (and `$(SETTING)` in SETTING's own value) is the value from the
///   assignments before, in this file, the files it included and the files read
///   before it (Xcode 10's rule); nothing at a first assignment.
///
/// Later assignments win. What a user gives is bounded: each file at most
/// ``maximumFileSize`` bytes, includes nested at most ``maximumIncludeDepth`` deep and
/// at most ``maximumFilesRead`` files read in all (a file included from two places
/// counts twice), a value at most ``maximumValueLength`` characters after
/// `$(inherited)`; an include cycle is an error naming the chain.
public enum XCConfig {
    /// The largest `.xcconfig` file read: 1 MiB (real ones are a few KiB).
    public static let maximumFileSize = 1 << 20
    /// How deep `#include`s may nest (the first file is depth 1). CocoaPods nests 2 or 3.
    public static let maximumIncludeDepth = 16
    /// How many files one load may read, counting each `#include` of a file again.
    public static let maximumFilesRead = 256
    /// The longest value a setting may reach (`A = $(inherited) $(inherited)` doubles it).
    public static let maximumValueLength = 65_536

    /// What conditional settings are matched against: the platform, architecture and
    /// build configuration of the build being described.
    public struct Conditions: Sendable, Equatable {
        /// The SDK name, `iphoneos` by default (a device build; `iphonesimulator` for a simulator's).
        public var sdk: String
        /// The architecture, `arm64` by default (every iOS device since 2017).
        public var arch: String
        /// The build configuration (`Debug`, `Release`), if one was named.
        public var config: String?

        /// Creates conditions.
        public init(sdk: String = "iphoneos", arch: String = "arm64", config: String? = nil) {
            self.sdk = sdk
            self.arch = arch
            self.config = config
        }

        /// Conditions named by build settings, as Xcode names them: `SDK_NAME`,
        /// `CURRENT_ARCH` (or the first of `ARCHS`), `CONFIGURATION`.
        public init(settings: [String: String]) {
            self.init()
            if let sdk = settings["SDK_NAME"], !sdk.isEmpty { self.sdk = sdk }
            if let arch = settings["CURRENT_ARCH"] ?? settings["ARCHS"]?.split(separator: " ").first.map(String.init),
               !arch.isEmpty {
                self.arch = arch
            }
            if let config = settings["CONFIGURATION"], !config.isEmpty { self.config = config }
        }
    }

    /// Reads `files` in order (each as if it included the ones before) and returns the
    /// settings they define. Throws the first problem, naming its file and line.
    public static func load(files: [String], conditions: Conditions = Conditions()) throws(XCConfigError) -> XCConfigSettings {
        var reader = Reader(conditions: conditions)
        for file in files {
            try reader.read(file: file, display: file, chain: [], includedFrom: nil)
        }
        if let first = reader.skippedForConfig {
            reader.warnings.append(XCConfigError(file: first.file, line: first.line,
                detail: "settings conditioned on [config=...] were skipped: no configuration is named (pass --setting CONFIGURATION=Debug, or Release, to apply them)"))
        }
        return XCConfigSettings(settings: reader.values, warnings: reader.warnings, files: reader.filesRead)
    }

    /// Whether `value` matches the condition pattern `pattern` (`*` any run of characters).
    static func matches(_ pattern: String, _ value: String) -> Bool {
        fnmatch(pattern, value, 0) == 0
    }

    private struct Reader {
        let conditions: Conditions
        var values: [String: String] = [:]
        var warnings: [XCConfigError] = []
        var filesRead: [String] = []
        var skippedForConfig: (file: String, line: Int)?

        init(conditions: Conditions) {
            self.conditions = conditions
        }

        /// Reads one file. `chain` holds the real paths of the files including it.
        mutating func read(file path: String, display: String, chain: [String], includedFrom: (file: String, line: Int)?)
            throws(XCConfigError)
        {
            func fail(_ detail: String) -> XCConfigError {
                if let includedFrom { return XCConfigError(file: includedFrom.file, line: includedFrom.line, detail: detail) }
                return XCConfigError(file: display, detail: detail)
            }
            guard filesRead.count < XCConfig.maximumFilesRead else {
                throw fail("more than \(XCConfig.maximumFilesRead) files read through #include (a file included from several places counts each time); not read further")
            }
            let data: Data
            switch BoundedFile.read(path: path, limit: XCConfig.maximumFileSize) {
            case .success(let d): data = d
            case .failure(.notFound): throw fail(includedFrom == nil ? "file not found" : "#include \"\(display)\": file not found")
            case .failure(.directory): throw fail("\(display) is a directory, not an .xcconfig file")
            case .failure(.notRegularFile): throw fail("\(display) is not a regular file")
            case .failure(.unreadable(let why)): throw fail("\(display) cannot be read (\(why))")
            case .failure(.tooLarge(let size)):
                throw fail("\(display) is \(size) bytes, over the limit of \(XCConfig.maximumFileSize) bytes (1 MiB) for an .xcconfig file; not read")
            }
            guard var text = String(data: data, encoding: .utf8) else {
                throw XCConfigError(file: display, detail: "is not UTF-8 text")
            }
            if text.hasPrefix("\u{FEFF}") { text.removeFirst() }
            let real = AppBundleLoader.resolved(path) ?? ManifestReader.absolutePath(path)
            let chain = chain + [real]
            filesRead.append(display)
            let folder = (display as NSString).deletingLastPathComponent

            // "\r\n" is one Character in Swift: split on it too (a file saved on Windows).
            let lines = text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
            for (index, rawLine) in lines.enumerated() {
                let number = index + 1
                var line = Substring(rawLine)
                if line.hasSuffix("\r") { line = line.dropLast() }
                if let comment = line.range(of: "//") { line = line[..<comment.lowerBound] }
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.isEmpty { continue }
                if trimmed.hasPrefix("#") {
                    try include(trimmed, file: display, line: number, folder: folder, chain: chain)
                    continue
                }
                try assign(trimmed, file: display, line: number)
            }
        }

        /// `#include "path"` or `#include? "path"`.
        mutating func include(_ text: String, file: String, line: Int, folder: String, chain: [String]) throws(XCConfigError) {
            func error(_ detail: String) -> XCConfigError { XCConfigError(file: file, line: line, detail: detail) }
            var rest = Substring(text)
            let optional: Bool
            if rest.hasPrefix("#include?") {
                optional = true
                rest = rest.dropFirst("#include?".count)
            } else if rest.hasPrefix("#include") {
                optional = false
                rest = rest.dropFirst("#include".count)
            } else {
                throw error("unknown directive \"\(shortened(String(text)))\" (an .xcconfig file knows #include \"file\" and #include? \"file\")")
            }
            let operand = rest.trimmingCharacters(in: .whitespaces)
            guard operand.count >= 2, operand.hasPrefix("\""), operand.hasSuffix("\""),
                  !operand.dropFirst().dropLast().contains("\"") else {
                throw error("#include needs a file name in double quotes, e.g. #include \"Base.xcconfig\"")
            }
            let name = String(operand.dropFirst().dropLast())
            guard !name.isEmpty else { throw error("#include \"\" names no file") }
            if name.hasPrefix("<") {
                // `<DEVELOPER_DIR>/...`: Xcode's own files, which this host does not have.
                if optional { return }
                throw error("#include \"\(shortened(name))\" names a file inside Xcode, which is not on this host (use #include? to skip it where it is missing)")
            }
            let path = name.hasPrefix("/") ? name : (folder.isEmpty ? name : (folder as NSString).appendingPathComponent(name))
            if optional, !FileManager.default.fileExists(atPath: path) { return }
            if let real = AppBundleLoader.resolved(path), let start = chain.firstIndex(of: real) {
                let cycle = (chain[start...] + [real]).map { ($0 as NSString).lastPathComponent }.joined(separator: " → ")
                throw error("#include \"\(shortened(name))\" makes an include cycle (\(cycle))")
            }
            guard chain.count < XCConfig.maximumIncludeDepth else {
                throw error("#include \"\(shortened(name))\" nests includes more than \(XCConfig.maximumIncludeDepth) deep")
            }
            try read(file: path, display: path, chain: chain, includedFrom: (file, line))
        }

        /// `SETTING[cond=pattern]... = value`.
        mutating func assign(_ text: String, file: String, line: Int) throws(XCConfigError) {
            func error(_ detail: String) -> XCConfigError { XCConfigError(file: file, line: line, detail: detail) }
            guard let firstEquals = text.firstIndex(of: "=") else {
                throw error("expected SETTING = value, #include \"file\" or a // comment; found \"\(shortened(text))\"")
            }
            let nameEnd = text.firstIndex { !($0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_")) } ?? text.endIndex
            let name = String(text[..<nameEnd])
            var conditions: [(key: String, pattern: String)] = []
            var rest = text[nameEnd...]
            while rest.first == "[" {
                guard let close = rest.firstIndex(of: "]") else {
                    throw error("\(name): a condition is written [key=pattern], e.g. \(name)[sdk=iphoneos*]")
                }
                for part in rest[rest.index(after: rest.startIndex)..<close].split(separator: ",", omittingEmptySubsequences: false) {
                    let kv = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                    let key = kv[0].trimmingCharacters(in: .whitespaces)
                    guard kv.count == 2, !key.isEmpty else {
                        throw error("\(name): condition \"[\(shortened(String(part)))]\" is not key=pattern (sdk, arch or config)")
                    }
                    conditions.append((key, kv[1].trimmingCharacters(in: .whitespaces)))
                }
                rest = rest[rest.index(after: close)...]
            }
            rest = rest.drop { $0 == " " || $0 == "\t" }
            guard rest.first == "=", Self.isSettingName(name) else {
                let left = text[..<firstEquals].trimmingCharacters(in: .whitespaces)
                throw error("\"\(shortened(left))\" is not a build setting name (letters, digits and _, not starting with a digit)")
            }
            var value = rest.dropFirst().trimmingCharacters(in: .whitespaces)
            if value.hasSuffix(";") { value = String(value.dropLast()).trimmingCharacters(in: .whitespaces) }

            for condition in conditions {
                switch condition.key {
                case "sdk":
                    if !XCConfig.matches(condition.pattern, self.conditions.sdk) { return }
                case "arch":
                    if !XCConfig.matches(condition.pattern, self.conditions.arch) { return }
                case "config":
                    guard let config = self.conditions.config else {
                        if skippedForConfig == nil { skippedForConfig = (file, line) }
                        return
                    }
                    if !XCConfig.matches(condition.pattern, config) { return }
                default:
                    warnings.append(error("\(name)[\(condition.key)=\(condition.pattern)]: AppHost evaluates sdk, arch and config conditions only; this setting is skipped"))
                    return
                }
            }

            let previous = values[name] ?? ""
            var expanded = value
            for reference in ["$(inherited)", "${inherited}", "$(\(name))", "${\(name)}"] where expanded.contains(reference) {
                expanded = expanded.replacingOccurrences(of: reference, with: previous)
                guard expanded.count <= XCConfig.maximumValueLength else { break }
            }
            guard expanded.count <= XCConfig.maximumValueLength else {
                throw error("\(name): the value grows past \(XCConfig.maximumValueLength) characters with $(inherited); not read further")
            }
            values[name] = expanded
        }

        static func isSettingName(_ name: String) -> Bool {
            guard let first = name.unicodeScalars.first, !("0"..."9").contains(first) else { return false }
            return name.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "_") }
        }

        func shortened(_ text: String) -> String {
            text.count > 80 ? String(text.prefix(80)) + "…" : text
        }
    }
}
