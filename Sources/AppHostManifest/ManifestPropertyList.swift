import AppHostProtocol
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The encoding a property list file was written in.
public enum PropertyListFileFormat: String, Codable, Sendable, Equatable {
    /// `<?xml … <plist>` text.
    case xml
    /// `bplist00` binary.
    case binary
    /// The old NeXTSTEP `{ key = value; }` text form.
    case openStep
}

/// Reads property list files with Foundation and describes their values. Internal:
/// the manifest, entitlements and bundle readers share it.
enum PropertyListFile {
    /// The largest property list file read (Info.plist, entitlements): 1 MiB. A real
    /// Info.plist is a few KiB; a larger file is refused from its size alone, unread.
    static let maximumFileSize = 1 << 20

    /// Reads `path` (shown in errors as `display`) and returns its top-level dictionary,
    /// the bytes read and their format.
    static func load(path: String, display: String) throws(ManifestError)
        -> (dictionary: [String: Any], data: Data, format: PropertyListFileFormat)
    {
        try parse(try read(path: path, display: display), display: display)
    }

    /// Parses bytes read from a file (shown in errors as `display`): the top-level
    /// dictionary, the bytes and their format. Any bytes give a value or a ``ManifestError``.
    static func parse(_ data: Data, display: String) throws(ManifestError)
        -> (dictionary: [String: Any], data: Data, format: PropertyListFileFormat)
    {
        let object: Any
        let format: PropertyListSerialization.PropertyListFormat
        do {
            (object, format) = try UntrustedPropertyList.object(from: data)
        } catch {
            throw ManifestError(.malformedPropertyList, file: display,
                                detail: "not a valid property list (\(reason(error)))")
        }
        guard let dictionary = object as? [String: Any] else {
            throw ManifestError(.notADictionary, file: display,
                                detail: "top level is \(typeName(object)), not a dictionary")
        }
        let fileFormat: PropertyListFileFormat = switch format {
        case .binary: .binary
        case .openStep: .openStep
        default: .xml
        }
        return (dictionary, data, fileFormat)
    }

    /// Parses bytes already read and validated by ``load(path:display:)``.
    static func dictionary(from data: Data) -> [String: Any] {
        (try? UntrustedPropertyList.object(from: data).object) as? [String: Any] ?? [:]
    }

    private static func read(path: String, display: String) throws(ManifestError) -> Data {
        switch BoundedFile.read(path: path, limit: maximumFileSize) {
        case .success(let data):
            return data
        case .failure(let problem):
            switch problem {
            case .notFound:
                throw ManifestError(.fileNotFound, file: display, detail: "file not found")
            case .directory:
                throw ManifestError(.unreadable, file: display, detail: "is a directory, not a property list file")
            case .notRegularFile:
                throw ManifestError(.unreadable, file: display, detail: "is not a regular file")
            case .unreadable(let reason):
                throw ManifestError(.unreadable, file: display, detail: "cannot be read (\(reason))")
            case .tooLarge(let size):
                throw tooLarge(display, size: size)
            }
        }
    }

    private static func tooLarge(_ display: String, size: Int64) -> ManifestError {
        ManifestError(.fileTooLarge, file: display, value: String(size),
                      detail: "is \(size) bytes, over the limit of \(maximumFileSize) bytes (1 MiB) for a property list; not read")
    }

    /// Foundation's own explanation of a parse or read failure, on one line.
    private static func reason(_ error: any Error) -> String {
        if let refusal = error as? UntrustedPropertyList.Refusal { return refusal.reason }
        let ns = error as NSError
        let text = (ns.userInfo[NSDebugDescriptionErrorKey] as? String)
            ?? (ns.userInfo[NSUnderlyingErrorKey] as? NSError)?.localizedDescription
            ?? ns.localizedDescription
        let oneLine = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        return oneLine.count > 200 ? String(oneLine.prefix(200)) + "…" : oneLine
    }

    /// The value as a boolean if it is a property list `<true/>` or `<false/>`
    /// (and not an `<integer>`, which Foundation also lets cast to `Bool`).
    static func bool(_ value: Any) -> Bool? {
        if let b = value as? Bool, type(of: value) == Bool.self { return b }
        if let n = value as? NSNumber, String(cString: n.objCType) == "c" { return n.boolValue }
        return nil
    }

    /// "a string", "an integer", …: the property list type of a value, for error messages.
    static func typeName(_ value: Any) -> String {
        if bool(value) != nil { return "a boolean" }
        switch value {
        case is String: return "a string"
        case let n as NSNumber:
            return ["d", "f"].contains(String(cString: n.objCType)) ? "a real number" : "an integer"
        case is Date: return "a date"
        case is Data: return "data"
        case is [Any]: return "an array"
        case is [AnyHashable: Any]: return "a dictionary"
        default: return "a \(type(of: value))"
        }
    }
}
