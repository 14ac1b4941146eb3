/// Length-prefixed frames: a 4-byte big-endian payload length, then the payload
/// (one JSON-encoded message). Used on the app IPC socket and on the control socket.
public enum Frame {
    /// Bytes in the length prefix.
    public static let headerSize = 4
    /// The largest payload either side accepts. A peer that announces more is broken
    /// or hostile; the receiver drops the connection.
    public static let maximumPayload = 1 << 20

    /// Encodes one message as a frame.
    public static func encode<M: Encodable>(_ message: M) throws -> [UInt8] {
        try genericEncode(message)
    }

    static func genericEncode<M: Encodable>(_ message: M) throws -> [UInt8] {
        let payload = try [UInt8](WireJSON.encoder().encode(message))
        guard payload.count <= maximumPayload else {
            throw FrameError.oversized(length: payload.count, maximum: maximumPayload)
        }
        let n = UInt32(payload.count)
        var out: [UInt8] = [UInt8(n >> 24), UInt8((n >> 16) & 0xff), UInt8((n >> 8) & 0xff), UInt8(n & 0xff)]
        out.reserveCapacity(headerSize + payload.count)
        out.append(contentsOf: payload)
        return out
    }

    /// Decodes the payload of one frame into a message.
    public static func decode<M: Decodable>(_ type: M.Type, from payload: [UInt8]) throws(FrameError) -> M {
        // A `status` of every app is one frame per app: the reader of its exact shape
        // (``FastReader/appStatus()``) is taken by generic callers too (the CLI's and the
        // bench's frame readers). The generic decoder took about 7 µs a row, most of
        // `status` with 10,000 apps.
        if M.self == ControlResponse.self {
            var reader = FastReader(payload)
            if let status = reader.appStatus() as? M { return status }
        }
        return try genericDecode(type, from: payload)
    }

    static func genericDecode<M: Decodable>(_ type: M.Type, from payload: [UInt8]) throws(FrameError) -> M {
        do {
            return try WireJSON.decoder().decode(M.self, from: Data(payload))
        } catch {
            throw FrameError.malformed(reason: "\(error)".prefix(300).description)
        }
    }
}

import Foundation

/// Why a byte stream is not a valid sequence of frames.
public enum FrameError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The length prefix announces more than ``Frame/maximumPayload`` bytes.
    case oversized(length: Int, maximum: Int)
    /// The payload is not a message of the expected type.
    case malformed(reason: String)
    /// The stream ended in the middle of a frame.
    case truncated(buffered: Int)

    public var description: String {
        switch self {
        case .oversized(let length, let maximum): "frame of \(length) bytes exceeds the maximum of \(maximum)"
        case .malformed(let reason): "malformed message: \(reason)"
        case .truncated(let buffered): "stream ended inside a frame (\(buffered) bytes buffered)"
        }
    }
}

/// Splits a byte stream into frame payloads. Pure: no sockets, fed byte by byte or in chunks.
public struct FrameDecoder: Sendable {
    private var buffer: [UInt8] = []
    private var start = 0
    /// The maximum payload this decoder accepts.
    public let maximumPayload: Int

    /// Creates a decoder that rejects payloads above `maximumPayload` bytes.
    public init(maximumPayload: Int = Frame.maximumPayload) {
        self.maximumPayload = maximumPayload
    }

    /// Bytes received but not yet returned as a frame.
    public var bufferedCount: Int { buffer.count - start }

    /// Appends received bytes.
    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// Appends received bytes read into an array. (Not the generic one: unspecialized,
    /// its first call in a new app process looked up the slice's conformances at run
    /// time, a tenth of the app's handshake.)
    public mutating func append(_ bytes: ArraySlice<UInt8>) {
        compact()
        buffer.append(contentsOf: bytes)
    }

    private mutating func compact() {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 4096 && start * 2 > buffer.count {
            buffer.removeFirst(start)
            start = 0
        }
    }

    /// Returns the next complete payload, nil if more bytes are needed, or throws if the
    /// stream is invalid (the connection should then be closed).
    public mutating func next() throws(FrameError) -> [UInt8]? {
        let available = buffer.count - start
        guard available >= Frame.headerSize else { return nil }
        let length = Int(buffer[start]) << 24 | Int(buffer[start + 1]) << 16
            | Int(buffer[start + 2]) << 8 | Int(buffer[start + 3])
        guard length <= maximumPayload else {
            throw .oversized(length: length, maximum: maximumPayload)
        }
        guard available >= Frame.headerSize + length else { return nil }
        let from = start + Frame.headerSize
        let payload = Array(buffer[from..<(from + length)])
        start = from + length
        return payload
    }

    /// Call at end of stream: throws if a partial frame is left.
    public func finish() throws(FrameError) {
        if bufferedCount > 0 { throw .truncated(buffered: bufferedCount) }
    }
}

/// The JSON coders used on every AppHost wire and file: ISO 8601 dates with
/// fractional seconds, sorted keys so output is stable.
public enum WireJSON {
    /// An encoder for wire messages and JSON files.
    public static func encoder(pretty: Bool = false) -> JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = pretty ? [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        e.dateEncodingStrategy = .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode(Timestamp.format(date))
        }
        e.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return e
    }

    /// A decoder matching ``encoder(pretty:)``.
    public static func decoder() -> JSONDecoder {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .custom { decoder in
            let c = try decoder.singleValueContainer()
            let s = try c.decode(String.self)
            guard let date = Timestamp.parse(s) else {
                throw DecodingError.dataCorruptedError(in: c, debugDescription: "not an ISO 8601 date: \(s)")
            }
            return date
        }
        d.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return d
    }
}

/// ISO 8601 timestamps with millisecond precision, in UTC.
public enum Timestamp {
    /// Formats a date as `2026-11-21T21:35:06.123Z`.
    /// The milliseconds are rounded here, not left to the formatter, which truncates: a
    /// parsed date is a double a hair below its milliseconds far from 1970 (year 22025),
    /// and truncating again lost one each round trip (found by the `frame` fuzz target).
    /// Years 1583-9999 are written here, from the day count (the Gregorian calendar, UTC),
    /// as Foundation's ISO 8601 style writes them: Foundation's formatter went through its
    /// calendar for each date, about a tenth of the host's own time in a launch (every
    /// event line has a stamp). Other years are left to Foundation (which counts days
    /// before October 1582 in the Julian calendar).
    public static func format(_ date: Date) -> String {
        let t = date.timeIntervalSince1970
        guard t.isFinite, abs(t) < 9e12 else {
            return date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
        }
        let ms = Int64((t * 1000).rounded())
        let seconds = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000)
        let fraction = ms - seconds * 1000
        if let fast = civil(seconds: seconds, milliseconds: fraction) { return fast }
        return foundationFormat(seconds: seconds, milliseconds: fraction)
    }

    /// `seconds` since 1970 and `milliseconds` (0...999) as `YYYY-MM-DDTHH:MM:SS.mmmZ`,
    /// for years 1583-9999 (nil outside): Howard Hinnant's `civil_from_days`.
    static func civil(seconds: Int64, milliseconds: Int64) -> String? {
        // 1583-01-01T00:00:00Z ... 9999-12-31T23:59:59Z
        guard seconds >= -12_212_553_600, seconds <= 253_402_300_799, (0...999).contains(milliseconds) else { return nil }
        var days = seconds / 86_400
        var secondOfDay = seconds % 86_400
        if secondOfDay < 0 { secondOfDay += 86_400; days -= 1 }
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        var bytes = [UInt8](repeating: 0, count: 24)
        func put(_ value: Int64, _ at: Int, _ width: Int) {
            var v = value
            for i in stride(from: at + width - 1, through: at, by: -1) {
                bytes[i] = UInt8(truncatingIfNeeded: 48 + v % 10)
                v /= 10
            }
        }
        put(year, 0, 4); bytes[4] = 45 // -
        put(month, 5, 2); bytes[7] = 45
        put(day, 8, 2); bytes[10] = 84 // T
        put(secondOfDay / 3600, 11, 2); bytes[13] = 58 // :
        put(secondOfDay / 60 % 60, 14, 2); bytes[16] = 58
        put(secondOfDay % 60, 17, 2); bytes[19] = 46 // .
        put(milliseconds, 20, 3); bytes[23] = 90 // Z
        return String(decoding: bytes, as: UTF8.self)
    }

    /// What ``format(_:)`` wrote before ``civil(seconds:milliseconds:)``: Foundation's ISO
    /// 8601 style for the whole seconds, the milliseconds added (tests compare the two).
    static func foundationFormat(seconds: Int64, milliseconds fraction: Int64) -> String {
        let whole = Date(timeIntervalSince1970: Double(seconds))
            .formatted(.iso8601.year().month().day().time(includingFractionalSeconds: false).timeZone(separator: .omitted))
        guard whole.hasSuffix("Z") else { return whole }
        return String(whole.dropLast()) + "." + String(repeating: "0", count: 3 - String(fraction).count) + String(fraction) + "Z"
    }

    /// Parses what ``format(_:)`` writes (fractional seconds optional).
    public static func parse(_ s: String) -> Date? {
        if let fast = parseCivil(s) { return fast }
        return foundationParse(s)
    }

    /// Foundation's ISO 8601 parse: what ``parse(_:)`` did for every stamp before
    /// ``parseCivil(_:)`` (tests compare the two). It cost about 5 µs a date: most of a
    /// `status` row's decoding, 50 ms of `status` with 10,000 apps.
    static func foundationParse(_ s: String) -> Date? {
        if let d = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(s) { return d }
        return try? Date.ISO8601FormatStyle().parse(s)
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ` exactly as ``civil(seconds:milliseconds:)`` writes it, a
    /// real calendar date of years 1583-9999 (nil for anything else, left to Foundation):
    /// Howard Hinnant's `days_from_civil`. The date is built as Foundation builds it (from
    /// the reference date), so the two parse to the same `Date`, bit for bit.
    static func parseCivil(_ s: String) -> Date? {
        var s = s
        return s.withUTF8 { b -> Date? in
            guard b.count == 24, b[4] == 45, b[7] == 45, b[10] == 84, b[13] == 58, b[16] == 58, b[19] == 46, b[23] == 90 else { return nil }
            func number(_ at: Int, _ width: Int) -> Int64? {
                var v: Int64 = 0
                for i in at..<(at + width) {
                    let digit = b[i] &- 48
                    guard digit <= 9 else { return nil }
                    v = v * 10 + Int64(digit)
                }
                return v
            }
            guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2),
                  let hour = number(11, 2), let minute = number(14, 2), let second = number(17, 2),
                  let ms = number(20, 3) else { return nil }
            guard (1583...9999).contains(year), (1...12).contains(month), hour < 24, minute < 60, second < 60 else { return nil }
            let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
            let monthDays: [Int64] = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
            guard day >= 1, day <= monthDays[Int(month - 1)] else { return nil }
            let y = month <= 2 ? year - 1 : year
            let era = y / 400 // y ≥ 1582
            let yearOfEra = y - era * 400
            let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
            let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
            let days = era * 146_097 + dayOfEra - 719_468
            // As Foundation sums it: the midnight, then the time of day with its fraction.
            // Summed the other way (whole seconds, then the fraction) the two differed in
            // the last bit for about 3 % of times within a few weeks of 2001-01-01.
            let secondOfDay = Double(hour * 3600 + minute * 60 + second) + Double(ms) / 1000
            return Date(timeIntervalSinceReferenceDate: Double(days * 86_400 - 978_307_200) + secondOfDay)
        }
    }
}
