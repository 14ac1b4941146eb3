import AppHostProtocol
import Foundation

/// Why a BLE world file could not be read: the file, where in it (a JSON path such
/// as `peripherals[1].services[0]`) and what is wrong.
public struct BLEWorldFileError: Error, CustomStringConvertible, Equatable, Sendable {
    public var file: String
    /// Where in the document, e.g. `peripherals[1].rssi`; nil for the whole file.
    public var path: String?
    public var message: String

    public init(file: String, path: String? = nil, _ message: String) {
        self.file = file
        self.path = path
        self.message = message
    }

    public var description: String {
        if let path { return "\(file): \(path): \(message)" }
        return "\(file): \(message)"
    }
}

/// Reads a BLE world file for `apphost ble load`: the simulated peripherals in range.
///
/// ```json
/// {
///   "peripherals": [
///     {"id": "hrm-1", "name": "Polar H10", "services": ["180D", "180F"], "rssi": -58},
///     {"id": "thermo", "services": ["1809"]}
///   ]
/// }
/// ```
///
/// `id` (required, unique, not starting with `app:`, which names apps advertising),
/// `services` (required, at least one service UUID: 16-bit `180D`, 32-bit, or
/// 128-bit `0000180D-0000-1000-8000-00805F9B34FB`; stored upper-case), `name`
/// (optional local name) and `rssi` (optional, dBm, -127...0, default -60). Any
/// other key is an error, so a typo (`"service"`) is not silently ignored.
public enum BLEWorldFile {
    /// The keys a peripheral may have.
    public static let peripheralKeys = ["id", "name", "services", "rssi"]
    /// The default signal strength, as ``BLEPeripheral``'s.
    public static let defaultRSSI = -60
    /// The accepted RSSI range in dBm.
    public static let rssiRange = -127...0

    /// Reads and checks the world file at `path`.
    public static func read(path: String) throws(BLEWorldFileError) -> [BLEPeripheral] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot read the file" : "no such file"
            throw BLEWorldFileError(file: path, reason)
        }
        return try parse(data: data, name: path)
    }

    /// Parses and checks a world file's `data`; `name` prefixes error messages.
    public static func parse(data: Data, name: String) throws(BLEWorldFileError) -> [BLEPeripheral] {
        func fail(_ path: String?, _ message: String) -> BLEWorldFileError { BLEWorldFileError(file: name, path: path, message) }
        if data.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            throw fail(nil, "empty file: expected {\"peripherals\": [{\"id\": ..., \"services\": [...]}]}")
        }
        do {
            _ = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw fail(nil, "not valid JSON: \(jsonProblem(error, in: data))")
        }
        let root: JSONValue
        do {
            root = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            throw fail(nil, "not valid JSON: \(error)")
        }
        guard case .object(let top) = root else {
            throw fail(nil, "expected a JSON object {\"peripherals\": [...]} at the top level")
        }
        for key in top.keys.sorted() where key != "peripherals" {
            throw fail(key, "unknown key (the top level has only \"peripherals\")")
        }
        guard let value = top["peripherals"] else { throw fail(nil, "missing \"peripherals\" (a list of peripherals)") }
        guard case .array(let list) = value else { throw fail("peripherals", "expected a list of peripherals") }

        var out: [BLEPeripheral] = []
        var seen: [String: Int] = [:]
        for (i, item) in list.enumerated() {
            let at = "peripherals[\(i)]"
            guard case .object(let p) = item else { throw fail(at, "expected an object {\"id\": ..., \"services\": [...]}") }
            for key in p.keys.sorted() where !peripheralKeys.contains(key) {
                throw fail(at, "unknown key \"\(key)\" (a peripheral has \(peripheralKeys.map { "\"\($0)\"" }.joined(separator: ", ")))")
            }
            guard let rawID = p["id"] else { throw fail(at, "missing \"id\"") }
            guard case .string(let id) = rawID, !id.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw fail("\(at).id", "expected a non-empty string")
            }
            guard !id.hasPrefix("app:") else {
                throw fail("\(at).id", "\"\(id)\": ids starting with \"app:\" are reserved for apps advertising as peripherals")
            }
            if let first = seen[id] {
                throw fail("\(at).id", "duplicate id \"\(id)\" (also peripherals[\(first)])")
            }
            seen[id] = i

            var name: String?
            if let raw = p["name"], raw != .null {
                guard case .string(let s) = raw else { throw fail("\(at).name", "expected a string") }
                name = s
            }

            guard let rawServices = p["services"] else { throw fail(at, "missing \"services\" (advertised service UUIDs, e.g. [\"180D\"])") }
            guard case .array(let serviceList) = rawServices else { throw fail("\(at).services", "expected a list of service UUIDs") }
            guard !serviceList.isEmpty else {
                throw fail("\(at).services", "empty: a peripheral advertises at least one service UUID (e.g. \"180D\")")
            }
            var services: [String] = []
            for (j, raw) in serviceList.enumerated() {
                guard case .string(let text) = raw, let uuid = normalizedUUID(text) else {
                    throw fail("\(at).services[\(j)]", "\(describe(raw)) is not a Bluetooth UUID (16-bit \"180D\", 32-bit \"0000180D\" or 128-bit \"0000180D-0000-1000-8000-00805F9B34FB\")")
                }
                services.append(uuid)
            }

            var rssi = defaultRSSI
            if let raw = p["rssi"] {
                guard let n = integer(raw), rssiRange.contains(n) else {
                    throw fail("\(at).rssi", "\(describe(raw)) is not a signal strength (an integer in dBm, \(rssiRange.lowerBound)...\(rssiRange.upperBound))")
                }
                rssi = n
            }
            out.append(BLEPeripheral(id: id, name: name, services: services, rssi: rssi))
        }
        return out
    }

    /// A Bluetooth UUID as CoreBluetooth's `CBUUID` accepts it (16-bit `180D`, 32-bit
    /// `0000180D`, or 128-bit `0000180D-0000-1000-8000-00805F9B34FB`), upper-cased;
    /// nil if `text` is none of these.
    public static func normalizedUUID(_ text: String) -> String? {
        let t = text.trimmingCharacters(in: .whitespaces).uppercased()
        let hex = Set("0123456789ABCDEF")
        func isHex<S: StringProtocol>(_ s: S, count: Int) -> Bool { s.count == count && s.allSatisfy(hex.contains) }
        if isHex(t, count: 4) || isHex(t, count: 8) { return t }
        let groups = t.split(separator: "-", omittingEmptySubsequences: false)
        if groups.count == 5, zip(groups, [8, 4, 4, 4, 12]).allSatisfy({ isHex($0, count: $1) }) { return t }
        return nil
    }

    /// What `JSONSerialization` found wrong with `data`, its "around character N" turned
    /// into a line and column (also used for `apphost push` payloads).
    public static func jsonProblem(_ error: any Error, in data: Data) -> String {
        let text = ((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String) ?? "\(error)"
        guard let range = text.range(of: "character "),
              let offset = Int(text[range.upperBound...].prefix { $0.isNumber }), offset <= data.count else { return text }
        let before = data.prefix(offset)
        let line = before.filter { $0 == 0x0A }.count + 1
        let column = before.count - (before.lastIndex(of: 0x0A).map { $0 + 1 } ?? 0) + 1
        let what = text[..<range.lowerBound].replacingOccurrences(of: " around ", with: "").trimmingCharacters(in: .whitespaces)
        return "line \(line), column \(column): \(what.isEmpty ? "unexpected input" : what.prefix(1).lowercased() + what.dropFirst())"
    }

    /// An integral JSON number (not a boolean, not a fraction).
    private static func integer(_ value: JSONValue) -> Int? {
        guard case .number(let d) = value else { return nil }
        return Int(exactly: d)
    }

    private static func describe(_ value: JSONValue) -> String {
        switch value {
        case .string(let s): "\"\(s)\""
        case .number(let d): Int(exactly: d).map(String.init) ?? String(d)
        case .bool(let b): String(b)
        case .null: "null"
        case .array: "a list"
        case .object: "an object"
        }
    }
}

/// A JSON document as written, so that types are checked exactly (a boolean is not a number).
enum JSONValue: Decodable, Equatable {
    case string(String), number(Double), bool(Bool), null
    case array([JSONValue]), object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let d = try? c.decode(Double.self) { self = .number(d) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }
}
