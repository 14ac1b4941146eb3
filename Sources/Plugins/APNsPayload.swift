import AppHostManifest
import AppHostProtocol
import Foundation

/// Why APNs (or `simctl push`) refuses a notification: one of the reasons of the
/// APNs provider API (``APNsReason``, with its status), with a sentence for people.
public struct APNsRejection: Error, Sendable, Equatable, CustomStringConvertible {
    /// The reason, from Apple's table.
    public var kind: APNsReason
    /// What is wrong, for a person.
    public var message: String

    /// The APNs `reason` string (`PayloadTooLarge`, `BadDeviceToken`, ...).
    public var reason: String { kind.rawValue }
    /// The HTTP status APNs answers with.
    public var status: Int { kind.status }

    public init(_ kind: APNsReason, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// A push payload as `simctl push` and APNs take it: a JSON object with an `aps`
/// dictionary, at most 4096 bytes, optionally naming its target with the top-level
/// `"Simulator Target Bundle"` key.
public struct APNsPayload: Sendable, Equatable {
    /// The most bytes a (non-VoIP) payload may have.
    public static let maximumSize = 4096
    /// The key `simctl` reads the target bundle from.
    public static let targetKey = "Simulator Target Bundle"

    /// The payload's text, as given.
    public var json: String
    /// `"Simulator Target Bundle"`, if present.
    public var target: String?
    /// `aps.content-available == 1`: the app may be woken in the background.
    public var contentAvailable: Bool
    /// `aps` has an alert, a badge or a sound: the user sees something.
    public var isVisible: Bool
    /// The alert's title (or body, or the alert string), for events.
    public var summary: String?
    /// What the payload says that APNs and iOS read otherwise than its writer likely
    /// meant: a number written as a string (`"content-available": "1"`), a misspelled
    /// key (`"Simulation Target Bundle"`, `"content_available"`). One sentence each,
    /// without the file name.
    public var warnings: [String] = []
    /// A top-level key that looks like a misspelled `"Simulator Target Bundle"`, when the
    /// payload has no such key (e.g. `"Simulation Target Bundle"`).
    public var misspelledTarget: String? = nil
    /// The push type APNs infers when none is given: `background` for a pure
    /// content-available push, else `alert`.
    public var inferredPushType: String { contentAvailable && !isVisible ? "background" : "alert" }

    /// Reads and checks a payload. `name` is used in messages (a file name, "standard input").
    public static func parse(_ data: Data, name: String = "payload") throws(APNsRejection) -> APNsPayload {
        if data.allSatisfy({ [0x20, 0x0A, 0x0D, 0x09].contains($0) }) {
            throw APNsRejection(.payloadEmpty, "\(name): the payload is empty; expected a JSON object with an \"aps\" dictionary")
        }
        guard data.count <= maximumSize else {
            throw APNsRejection(.payloadTooLarge,
                                "\(name): the payload is \(data.count) bytes; a push carries at most \(maximumSize)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw APNsRejection(.payloadEmpty, "\(name): the payload is not UTF-8 text")
        }
        // Foundation on Linux accepts trailing commas; APNs and simctl do not.
        if let problem = strictProblem(data) {
            throw APNsRejection(.payloadEmpty, "\(name): not valid JSON (\(problem)); simctl and APNs take strict JSON: no trailing commas or comments")
        }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw APNsRejection(.payloadEmpty, "\(name): not valid JSON (\(jsonProblem(data))); simctl and APNs take strict JSON: no trailing commas or comments")
        }
        guard let dictionary = object as? [String: Any] else {
            throw APNsRejection(.payloadEmpty, "\(name): the payload must be a JSON object ({...})")
        }
        guard let apsValue = dictionary["aps"] else {
            throw APNsRejection(.payloadEmpty, "\(name): no \"aps\" key; a push payload is {\"aps\": {...}, ...}")
        }
        guard let aps = apsValue as? [String: Any] else {
            throw APNsRejection(.payloadEmpty, "\(name): \"aps\" must be a dictionary")
        }
        var target: String?
        if let t = dictionary[targetKey] {
            guard let s = t as? String, !s.isEmpty else {
                throw APNsRejection(.badTopic, "\(name): \"\(targetKey)\" must be a bundle identifier string")
            }
            target = s
        }
        let contentAvailable = (aps["content-available"] as? NSNumber)?.intValue == 1
        let warnings = Self.warnings(top: dictionary, aps: aps, hasTarget: target != nil)
        let alert = aps["alert"]
        var summary: String?
        if let s = alert as? String {
            summary = s
        } else if let a = alert as? [String: Any] {
            summary = (a["title"] as? String) ?? (a["body"] as? String) ?? (a["title-loc-key"] as? String) ?? (a["loc-key"] as? String)
        }
        let visible = alert != nil || aps["badge"] != nil || aps["sound"] != nil
        let misspelled = target == nil ? dictionary.keys.sorted().first { $0 != "aps" && isNear($0, targetKey) } : nil
        return APNsPayload(json: text, target: target, contentAvailable: contentAvailable, isVisible: visible, summary: summary,
                           warnings: warnings, misspelledTarget: misspelled)
    }

    /// The `aps` keys APNs documents (Apple, "Generating a remote notification"; Live
    /// Activity keys included), for "did you mean".
    static let apsKeys = ["alert", "badge", "sound", "thread-id", "category", "content-available", "mutable-content",
                          "target-content-id", "interruption-level", "relevance-score", "filter-criteria", "stale-date",
                          "content-state", "timestamp", "event", "dismissal-date", "attributes-type", "attributes",
                          "input-push-channel", "input-push-token"]

    /// `aps` keys APNs documents as numbers where a string means something else to iOS,
    /// with what iOS then does.
    static let numericFlags: KeyValuePairs<String, String> = [
        "content-available": "this is not a background (silent) push: the app is not woken for it, and with nothing to show it does nothing",
        "mutable-content": "iOS does not pass the notification to the app's notification service extension; it is shown as sent",
    ]

    /// See ``warnings``. Keys are compared case-insensitively, `_` as `-`.
    static func warnings(top: [String: Any], aps: [String: Any], hasTarget: Bool) -> [String] {
        var out: [String] = []
        for (key, consequence) in numericFlags {
            guard let written = aps[key] as? String else { continue }
            let quoted = written.count > 20 ? String(written.prefix(20)) + "…" : written
            out.append("\"aps\".\"\(key)\" is the string \"\(quoted)\", not a number: APNs documents a number and iOS acts only on the number 1, so \(consequence) (write \"\(key)\": 1, without quotes)")
        }
        if !hasTarget {
            for key in top.keys.sorted() where key != "aps" && isNear(key, targetKey) {
                out.append("\"\(shortened(key))\" is not a key simctl reads (it is ignored): did you mean \"\(targetKey)\"?")
            }
        }
        for key in aps.keys.sorted() where !apsKeys.contains(key) {
            if let near = apsKeys.first(where: { isNear(key, $0) }) {
                out.append("\"aps\".\"\(shortened(key))\" is not a key APNs knows (iOS ignores it): did you mean \"\(near)\"?")
            }
        }
        return out
    }

    /// Whether `written` is a likely misspelling of `key`: not equal, and within an edit
    /// distance of 2 or a fifth of the key's length, comparing case-insensitively with `_` as `-`.
    static func isNear(_ written: String, _ key: String) -> Bool {
        guard written != key, written.count <= 2 * key.count else { return false }
        func normal(_ s: String) -> [Character] { Array(s.lowercased().replacingOccurrences(of: "_", with: "-")) }
        let a = normal(written), b = normal(key)
        if a == b { return true }
        return BackgroundMode.editDistance(a, b) <= max(2, b.count / 5)
    }

    private static func shortened(_ text: String) -> String {
        text.count > 60 ? String(text.prefix(60)) + "…" : text
    }

    /// Where strict parsing failed: "line L, column C" from a scan for the first
    /// trailing comma or comment, since Foundation's error says little on Linux.
    static func jsonProblem(_ data: Data) -> String {
        strictProblem(data) ?? "malformed JSON"
    }

    /// A trailing comma, a comment or an unterminated string, with where; nil if none.
    public static func strictProblem(_ data: Data) -> String? {
        let bytes = Array(data)
        var line = 1, column = 0
        var inString = false, escaped = false
        var lastSignificant: UInt8 = 0
        var lastLine = 1, lastColumn = 0
        for b in bytes {
            if b == 0x0A { line += 1; column = 0 } else { column += 1 }
            if inString {
                if escaped { escaped = false } else if b == 0x5C { escaped = true } else if b == 0x22 { inString = false }
                continue
            }
            switch b {
            case 0x22: inString = true
            case 0x7D, 0x5D:
                if lastSignificant == 0x2C { return "a trailing comma at line \(lastLine), column \(lastColumn)" }
            case 0x2F: return "a comment at line \(line), column \(column)"
            default: break
            }
            if ![0x20, 0x0A, 0x0D, 0x09].contains(b) {
                lastSignificant = b
                lastLine = line
                lastColumn = column
            }
        }
        return inString ? "an unterminated string" : nil
    }
}
