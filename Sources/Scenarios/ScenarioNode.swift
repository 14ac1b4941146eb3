import Foundation
import Yams

/// Why a scenario file could not be read: file, line and column, and what to do.
public struct ScenarioError: Error, Sendable, Equatable, CustomStringConvertible {
    public var file: String
    public var line: Int?
    public var column: Int?
    public var message: String

    public init(file: String, line: Int? = nil, column: Int? = nil, _ message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
    }

    public var description: String {
        var where_ = file
        if let line { where_ += ":\(line)" }
        if let column { where_ += ":\(column)" }
        return "\(where_): \(message)"
    }
}

/// A YAML node with the file it came from, for errors that say where.
struct Located {
    let node: Node
    let file: String

    var line: Int? { node.mark?.line }
    var column: Int? { node.mark?.column }

    func error(_ message: String) -> ScenarioError {
        ScenarioError(file: file, line: line, column: column, message)
    }

    /// A scalar's text (strings, numbers and booleans alike), else an error naming `what`.
    func scalar(_ what: String) throws(ScenarioError) -> String {
        guard case .scalar(let s) = node else { throw error("\(what): expected a single value, got \(kindName)") }
        return s.string
    }

    func string(_ what: String) throws(ScenarioError) -> String {
        let s = try scalar(what)
        guard !s.isEmpty else { throw error("\(what): expected a value, got an empty one") }
        guard s.utf8.count <= ScenarioReader.maximumStringBytes else {
            throw error("\(what): \(s.utf8.count) bytes; at most \(ScenarioReader.maximumStringBytes)")
        }
        return s
    }

    func int(_ what: String, in range: ClosedRange<Int>) throws(ScenarioError) -> Int {
        let s = try scalar(what)
        guard let n = Int(s), range.contains(n) else {
            throw error("\(what): expected a whole number from \(range.lowerBound) to \(range.upperBound), got \"\(s)\"")
        }
        return n
    }

    func double(_ what: String) throws(ScenarioError) -> Double {
        let s = try scalar(what)
        guard let d = Double(s), d.isFinite else { throw error("\(what): expected a number, got \"\(s)\"") }
        return d
    }

    func bool(_ what: String) throws(ScenarioError) -> Bool {
        let s = try scalar(what).lowercased()
        switch s {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default: throw error("\(what): expected true or false (yes/no, on/off), got \"\(s)\"")
        }
    }

    func strings(_ what: String) throws(ScenarioError) -> [String] {
        switch node {
        case .scalar:
            return [try string(what)]
        case .sequence(let seq):
            guard seq.count <= ScenarioReader.maximumListCount else {
                throw error("\(what): \(seq.count) items; at most \(ScenarioReader.maximumListCount)")
            }
            var out: [String] = []
            for item in seq {
                let l = Located(node: item, file: file)
                out.append(try l.scalar(what))
            }
            return out
        default:
            throw error("\(what): expected a list of values, got \(kindName)")
        }
    }

    func duration(_ what: String) throws(ScenarioError) -> Duration {
        let s = try scalar(what)
        guard let d = ScenarioDuration.parse(s) else {
            throw error("\(what): \"\(s)\" is not a duration (e.g. 30s, 1.5s, 250ms, 2m, 1h30m; a bare number is seconds)")
        }
        return d
    }

    /// The mapping's pairs in file order, keys as text; an error if this is not a mapping.
    func mapping(_ what: String) throws(ScenarioError) -> [(key: String, keyNode: Located, value: Located)] {
        guard case .mapping(let m) = node else { throw error("\(what): expected a mapping (key: value), got \(kindName)") }
        var out: [(key: String, keyNode: Located, value: Located)] = []
        var seen = Set<String>()
        for (k, v) in m {
            let keyNode = Located(node: k, file: file)
            let key = try keyNode.scalar("a key in \(what)")
            guard seen.insert(key).inserted else { throw keyNode.error("\(what): \"\(key)\" given twice") }
            out.append((key, keyNode, Located(node: v, file: file)))
        }
        return out
    }

    var isMapping: Bool { if case .mapping = node { return true } else { return false } }
    var isSequence: Bool { if case .sequence = node { return true } else { return false } }

    var kindName: String {
        switch node {
        case .scalar: return "a single value"
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .alias: return "an alias"
        }
    }

    /// The node as a JSON-ready value (an inline push payload).
    func jsonValue() throws(ScenarioError) -> Any {
        switch node {
        case .scalar(let s):
            if s.style == .plain {
                if s.string == "null" || s.string == "~" { return NSNull() }
                if let n = Int(s.string) { return n }
                if let d = Double(s.string), d.isFinite, s.string.contains(where: { $0.isNumber }) { return d }
                if s.string == "true" { return true }
                if s.string == "false" { return false }
            }
            return s.string
        case .sequence(let seq):
            var out: [Any] = []
            for item in seq { out.append(try Located(node: item, file: file).jsonValue()) }
            return out
        case .mapping:
            var out: [String: Any] = [:]
            for (k, _, v) in try mapping("the payload") { out[k] = try v.jsonValue() }
            return out
        case .alias:
            throw error("aliases are not supported here")
        }
    }
}

/// Durations as scenario files write them.
public enum ScenarioDuration {
    /// "30s", "1.5s", "250ms", "2m", "1h30m", "1d", or a bare number of seconds; nil if
    /// it does not parse, is negative, or is over ten years.
    public static func parse(_ text: String) -> Duration? {
        let t = text.trimmingCharacters(in: .whitespaces)
        guard !t.isEmpty, t.count <= 64 else { return nil }
        if let seconds = Double(t) { return checked(seconds) }
        var total = 0.0
        var number = ""
        var unit = ""
        var parts = 0
        func flush() -> Bool {
            guard let n = Double(number), n.isFinite, n >= 0 else { return false }
            let scale: Double
            switch unit {
            case "ms": scale = 0.001
            case "s": scale = 1
            case "m", "min": scale = 60
            case "h": scale = 3600
            case "d": scale = 86_400
            default: return false
            }
            total += n * scale
            parts += 1
            number = ""
            unit = ""
            return true
        }
        for c in t where c != " " {
            if c.isNumber || c == "." {
                if !unit.isEmpty { guard flush() else { return nil } }
                number.append(c)
            } else if c.isLetter {
                guard !number.isEmpty else { return nil }
                unit.append(c)
            } else {
                return nil
            }
        }
        guard !number.isEmpty, flush(), parts > 0 else { return nil }
        return checked(total)
    }

    private static func checked(_ seconds: Double) -> Duration? {
        guard seconds.isFinite, seconds >= 0, seconds <= 10 * 365 * 86_400 else { return nil }
        return .nanoseconds(Int64((seconds * 1e9).rounded()))
    }

    /// "29s", "1.5s", "250ms", "2h" (for messages).
    public static func format(_ d: Duration) -> String {
        let (s, atto) = d.components
        let seconds = Double(s) + Double(atto) / 1e18
        if seconds < 1, seconds > 0 { return "\(trim(seconds * 1000))ms" }
        if seconds >= 3600, seconds.truncatingRemainder(dividingBy: 3600) == 0 { return "\(Int(seconds / 3600))h" }
        if seconds >= 60, seconds.truncatingRemainder(dividingBy: 60) == 0 { return "\(Int(seconds / 60))m" }
        return "\(trim(seconds))s"
    }

    private static func trim(_ v: Double) -> String {
        v == v.rounded() ? String(Int(v)) : String(format: "%.3f", v).replacingOccurrences(of: #"0+$"#, with: "", options: .regularExpression)
    }
}

/// The nearest of `known` to `word` (edit distance at most a third of its length, at
/// least 2), for "did you mean".
func nearest(_ word: String, in known: [String]) -> String? {
    let w = Array(word.lowercased())
    var best: (String, Int)?
    for k in known {
        let d = editDistance(w, Array(k.lowercased()))
        if d <= max(2, w.count / 3), best == nil || d < best!.1 { best = (k, d) }
    }
    return best?.0
}

private func editDistance(_ a: [Character], _ b: [Character]) -> Int {
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    for i in 1...a.count {
        var current = [i] + Array(repeating: 0, count: b.count)
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        previous = current
    }
    return previous[b.count]
}

/// "unknown X "y" (did you mean "z"?); known: a, b, c".
func unknown(_ what: String, _ word: String, known: [String]) -> String {
    var s = "unknown \(what) \"\(word)\""
    if let n = nearest(word, in: known) { s += " (did you mean \"\(n)\"?)" }
    return s + "; known: " + known.joined(separator: ", ")
}
