import AppHostProtocol
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// Why a GPX file could not be read: the file, the line when the parser knows it,
/// and what is wrong. Printed as `file:line: message`, like a compiler diagnostic.
public struct GPXError: Error, CustomStringConvertible, Equatable, Sendable {
    /// The file (or the name given to ``GPX/parse(data:name:)``).
    public var file: String
    /// 1-based line of the problem, when known.
    public var line: Int?
    public var message: String

    public init(file: String, line: Int? = nil, _ message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    public var description: String {
        if let line { return "\(file):\(line): \(message)" }
        return "\(file): \(message)"
    }
}

/// Reads GPX 1.0/1.1 files (the format of Xcode's "Simulate Location" and of most
/// route exports) into location fixes for `apphost location route`.
///
/// Points are `<trkpt>` (track points), `<rtept>` (route points) and `<wpt>`
/// (waypoints), each with `lat` and `lon` attributes in degrees and optional
/// `<ele>` (metres) and `<time>` (ISO 8601, e.g. `2024-05-01T08:00:00Z` or with
/// fractional seconds `...T08:00:00.250Z`; a time without zone is taken as UTC).
/// A file with tracks plays its track points (all segments, in order); otherwise
/// its route points; otherwise its waypoints, in the order Xcode plays them. So a
/// track export that also marks a few waypoints plays the track.
public enum GPX {
    /// Reads the GPX file at `path`: its file name (e.g. `commute.gpx`, for messages)
    /// and its points. Errors name `path`.
    public static func read(path: String) throws(GPXError) -> (name: String, fixes: [LocationFix]) {
        let name = (path as NSString).lastPathComponent
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot read the file" : "no such file"
            throw GPXError(file: path, reason)
        }
        return (name, try parse(data: data, name: path))
    }

    /// Parses GPX `data`; `name` (usually the file's path) prefixes error messages.
    public static func parse(data: Data, name: String) throws(GPXError) -> [LocationFix] {
        if data.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            throw GPXError(file: name, "empty file: expected a GPX document (<gpx> with <trkpt>, <rtept> or <wpt> points)")
        }
        let parser = XMLParser(data: data)
        parser.shouldProcessNamespaces = false
        parser.shouldResolveExternalEntities = false
        let reader = Reader(file: name)
        parser.delegate = reader
        let ok = parser.parse()
        if let error = reader.error { throw error }
        // libxml2 recovers from some errors (parse() may still return true): any error fails.
        if !ok || parser.parserError != nil {
            let detail = parser.parserError.map(Self.describe) ?? "malformed XML"
            throw GPXError(file: name, line: parser.lineNumber > 0 ? parser.lineNumber : nil, "malformed XML: \(detail)")
        }
        guard reader.sawRoot else {
            throw GPXError(file: name, "not a GPX document: no <gpx> root element")
        }
        let fixes = !reader.track.isEmpty ? reader.track : !reader.route.isEmpty ? reader.route : reader.waypoints
        guard !fixes.isEmpty else {
            throw GPXError(file: name, "no points: expected <trkpt>, <rtept> or <wpt> elements with lat and lon")
        }
        return fixes
    }

    /// The parser's error in words. The codes are libxml2's (`xmlParserErrors`), which
    /// `NSXMLParserErrorCode` mirrors value for value; FoundationXML on Linux passes them
    /// through without a message (and its `XMLParser.ErrorCode` cases are numbered
    /// differently), so they are matched by number.
    static func describe(_ error: any Error) -> String {
        let ns = error as NSError
        switch ns.code {
        case 4: return "the document is empty"
        case 3, 72: return "the document does not start with an element"
        case 5: return "the document does not end properly (an element left open, or content after the root element)"
        case 6, 7, 8: return "an invalid character reference"
        case 9: return "an invalid character"
        case 22, 23, 68: return "a bad entity or name (write & as &amp; and < as &lt;)"
        case 26, 27: return "an undeclared entity (write & as &amp;)"
        case 31, 32, 79, 81: return "an unsupported or invalid text encoding"
        case 33, 34, 43, 44: return "an unterminated quoted string"
        case 38: return "'<' inside an attribute value (write &lt;)"
        case 39, 40, 41, 75: return "a malformed attribute (expected name=\"value\")"
        case 42: return "an attribute appears twice in one element"
        case 45, 80: return "a malformed comment"
        case 63: return "an unterminated CDATA section"
        case 64: return "an XML declaration that is not at the very start"
        case 65: return "a space is missing (e.g. between attributes)"
        case 73, 77: return "a tag is not closed with '>'"
        case 74: return "expected an end tag '</'"
        case 76: return "an end tag does not match the element it closes"
        case 85: return "elements are not properly nested"
        case 86: return "content after the root element"
        default: break
        }
        if let text = ns.userInfo[NSLocalizedDescriptionKey] as? String, !text.isEmpty, text != "(null)" { return text }
        return "XML parser error \(ns.code)"
    }

    /// Parses GPX `<time>` text: ISO 8601 with or without fractional seconds; UTC when
    /// no zone is given. One per parse (formatters are costly to make, not Sendable).
    final class TimeReader {
        private let plain = ISO8601DateFormatter()
        private let fractional = ISO8601DateFormatter()

        init() {
            plain.formatOptions = [.withInternetDateTime]
            fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        }

        func date(_ text: String) -> Date? {
            for candidate in [text, text + "Z"] {
                if let d = plain.date(from: candidate) ?? fractional.date(from: candidate) { return d }
            }
            return nil
        }
    }

    /// The SAX delegate: collects points by kind, records the first error and stops.
    private final class Reader: NSObject, XMLParserDelegate {
        let file: String
        let times = TimeReader()
        var error: GPXError?
        var sawRoot = false
        var track: [LocationFix] = []
        var route: [LocationFix] = []
        var waypoints: [LocationFix] = []

        /// The point being read, its kind, and the depth of its element.
        private var point: LocationFix?
        private var pointKind = ""
        private var pointDepth = 0
        /// `ele` or `time` being read directly inside the point, its text and line.
        private var field: String?
        private var fieldLine = 0
        private var text = ""
        private var depth = 0

        init(file: String) { self.file = file }

        private func fail(_ parser: XMLParser, _ message: String, line: Int? = nil) {
            guard error == nil else { return }
            error = GPXError(file: file, line: line ?? parser.lineNumber, message)
            parser.abortParsing()
        }

        /// `gpx:trkpt` → `trkpt`.
        private func local(_ name: String) -> String {
            name.split(separator: ":").last.map(String.init) ?? name
        }

        func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                    qualifiedName qName: String?, attributes: [String: String] = [:]) {
            guard error == nil else { return }
            depth += 1
            let name = local(elementName)
            if depth == 1 {
                guard name == "gpx" else {
                    return fail(parser, "not a GPX document: the root element is <\(elementName)>, expected <gpx>")
                }
                sawRoot = true
                return
            }
            if point == nil, ["trkpt", "rtept", "wpt"].contains(name) {
                guard let latText = attributes["lat"] else { return fail(parser, "<\(name)> has no lat attribute") }
                guard let lonText = attributes["lon"] else { return fail(parser, "<\(name)> has no lon attribute") }
                guard let lat = Double(latText.trimmingCharacters(in: .whitespaces)), (-90...90).contains(lat) else {
                    return fail(parser, "<\(name)> lat=\"\(latText)\" is not a latitude (degrees, -90...90)")
                }
                guard let lon = Double(lonText.trimmingCharacters(in: .whitespaces)), (-180...180).contains(lon) else {
                    return fail(parser, "<\(name)> lon=\"\(lonText)\" is not a longitude (degrees, -180...180)")
                }
                point = LocationFix(latitude: lat, longitude: lon)
                pointKind = name
                pointDepth = depth
                return
            }
            if point != nil, depth == pointDepth + 1, name == "ele" || name == "time" {
                field = name
                fieldLine = parser.lineNumber
                text = ""
            }
        }

        func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
            fail(parser, "malformed XML: \(GPX.describe(parseError))")
        }

        func parser(_ parser: XMLParser, validationErrorOccurred validationError: any Error) {
            fail(parser, "malformed XML: \(GPX.describe(validationError))")
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            if field != nil { text += string }
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
            guard error == nil else { return }
            defer { depth -= 1 }
            guard var p = point else { return }
            if let f = field, depth == pointDepth + 1 {
                field = nil
                let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
                if f == "ele" {
                    guard let ele = Double(value), ele.isFinite else {
                        return fail(parser, "<ele>\(value)</ele> is not an elevation in metres", line: fieldLine)
                    }
                    p.altitude = ele
                } else {
                    guard let date = times.date(value) else {
                        return fail(parser, "<time>\(value)</time> is not an ISO 8601 time (e.g. 2024-05-01T08:00:00Z)", line: fieldLine)
                    }
                    p.timestamp = date
                }
                point = p
                return
            }
            if depth == pointDepth {
                switch pointKind {
                case "trkpt": track.append(p)
                case "rtept": route.append(p)
                default: waypoints.append(p)
                }
                point = nil
            }
        }
    }
}
