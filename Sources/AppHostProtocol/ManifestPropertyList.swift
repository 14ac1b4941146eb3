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
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ManifestError(.fileNotFound, file: display, detail: "file not found")
        }
        if isDirectory.boolValue {
            throw ManifestError(.unreadable, file: display, detail: "is a directory, not a property list file")
        }
        // Opened without blocking (a FIFO would wait for a writer), then sized with
        // fstat on that descriptor, so the size checked is the size of what is read.
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            throw ManifestError(.unreadable, file: display, detail: "cannot be read (\(String(cString: strerror(errno))))")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            throw ManifestError(.unreadable, file: display, detail: "cannot be read (\(String(cString: strerror(errno))))")
        }
        guard (st.st_mode & mode_t(S_IFMT)) == mode_t(S_IFREG) else {
            throw ManifestError(.unreadable, file: display, detail: "is not a regular file")
        }
        let limit = maximumFileSize
        guard Int64(st.st_size) <= Int64(limit) else {
            throw tooLarge(display, size: Int64(st.st_size))
        }
        // Read at most one byte past the limit: a file growing meanwhile is refused too.
        var data = Data(count: Int(st.st_size) + 1)
        var got = 0
        while got < data.count {
            let n = data.withUnsafeMutableBytes { raw in
                readBytes(fd, raw.baseAddress! + got, raw.count - got)
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 {
                throw ManifestError(.unreadable, file: display, detail: "cannot be read (\(String(cString: strerror(errno))))")
            }
            if n == 0 { break }
            got += n
            if got > limit { throw tooLarge(display, size: Int64(got)) }
            if got == data.count { data.count += 4096 }
        }
        data.count = got
        return data
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

/// read(2), out of reach of ``PropertyListFile``'s own `read`.
private func readBytes(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
    read(fd, buffer, count)
}
