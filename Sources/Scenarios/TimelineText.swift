import AppHostProtocol
import Foundation

/// Text for XML and HTML: cut, cleaned and escaped. Much of what a picture shows (causes,
/// task names, bundle identifiers) is written by apps, so none of it reaches the page
/// unescaped, and none of it is long.
public enum Escape {
    /// ``text(_:limit:)`` uncut: for reports (JUnit) whose every word counts.
    public static func xml(_ s: String) -> String {
        text(s, limit: .max)
    }

    /// `s` cut to `limit` Unicode scalars (counted as scalars, not characters: a million
    /// combining marks are one character), without the characters XML 1.0 forbids
    /// (controls other than tab, newline and return; U+FFFE, U+FFFF) dropped, and with `& < > " '`
    /// escaped: fit for element text and attribute values alike.
    static func text(_ s: String, limit: Int = Timeline.maximumTextLength) -> String {
        var out = ""
        out.reserveCapacity(min(s.utf8.count, limit))
        var count = 0
        var cut = false
        for scalar in s.unicodeScalars {
            if count == limit {
                cut = true
                break
            }
            count += 1
            switch scalar.value {
            case 0x26: out += "&amp;"
            case 0x3C: out += "&lt;"
            case 0x3E: out += "&gt;"
            case 0x22: out += "&quot;"
            case 0x27: out += "&#39;"
            case 0x09, 0x0A, 0x0D: out.unicodeScalars.append(scalar)
            case 0..<0x20, 0xFFFE, 0xFFFF: break
            default: out.unicodeScalars.append(scalar)
            }
        }
        if cut { out += "…" }
        return out
    }

    /// ``text(_:limit:)`` on one line: tabs, newlines and returns become spaces.
    static func line(_ s: String, limit: Int = Timeline.maximumTextLength) -> String {
        text(s, limit: limit).replacingOccurrences(of: "\n", with: " ")
            .replacingOccurrences(of: "\r", with: " ").replacingOccurrences(of: "\t", with: " ")
    }

    /// `2025-01-01T00:00:05.250Z (+5.25 s)`.
    static func timeLine(_ time: Date, start: Date) -> String {
        "\(Timestamp.format(time)) (+\(TimeText.offset(time.timeIntervalSince(start))))"
    }
}

/// Numbers as the picture writes them: fixed, short, the same on every machine.
enum Num {
    /// One decimal at most (`12`, `12.5`, `-3.1`), clamped to ±10⁷ (non-finite → 0).
    static func f(_ x: Double) -> String {
        guard x.isFinite else { return "0" }
        let tenths = Int((min(max(x, -1e7), 1e7) * 10).rounded())
        let whole = tenths / 10, fraction = abs(tenths % 10)
        let sign = tenths < 0 && whole == 0 ? "-" : ""
        return fraction == 0 ? "\(sign)\(whole)" : "\(sign)\(whole).\(fraction)"
    }

    /// `x` with at most `digits` decimals, trailing zeros dropped (`1.25`, `3`).
    static func decimals(_ x: Double, _ digits: Int) -> String {
        guard x.isFinite else { return "0" }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let n = Int64((min(max(x, -1e12), 1e12) * scale).rounded())
        let s = Int64(scale)
        let whole = n / s
        var fraction = String(abs(n % s))
        guard digits > 0, fraction != "0" else { return "\(n < 0 && whole == 0 ? "-" : "")\(whole)" }
        fraction = String(repeating: "0", count: digits - fraction.count) + fraction
        while fraction.hasSuffix("0") { fraction.removeLast() }
        return "\(n < 0 && whole == 0 ? "-" : "")\(whole).\(fraction)"
    }
}

/// Durations on the time axis and in tooltips.
enum TimeText {
    /// An offset from the start: `0`, `250 ms`, `1.5 s`, `2 min 30 s`, `1 h 5 min`, `2 d 3 h`.
    static func offset(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "?" }
        if seconds < 0 { return "-" + offset(-seconds) }
        if seconds == 0 { return "0" }
        if seconds < 1 { return Num.decimals(seconds * 1000, 3) + " ms" }
        if seconds < 60 { return Num.decimals(seconds, 3) + " s" }
        let total = Int64(min(seconds.rounded(.down), 9e15))
        let rest = seconds - Double(total)
        if seconds < 3600 {
            let s = Double(total % 60) + rest
            return "\(total / 60) min" + (s > 0.0005 ? " \(Num.decimals(s, 3)) s" : "")
        }
        if seconds < 86400 {
            let m = (total % 3600) / 60, s = total % 60
            return "\(total / 3600) h" + (m > 0 ? " \(m) min" : "") + (s > 0 ? " \(s) s" : "")
        }
        let h = (total % 86400) / 3600, m = (total % 3600) / 60
        return "\(total / 86400) d" + (h > 0 ? " \(h) h" : "") + (m > 0 ? " \(m) min" : "")
    }
}

/// The ticks of a linear time axis: a step from 1, 2, 5 (and 15, 30 for minutes and
/// hours) times a unit, the smallest that gives at most `maximumTicks` ticks over the span.
enum TimeAxis {
    static let maximumTicks = 10

    /// Steps in seconds, smallest first: 1 ms … 12 h, then days by 1, 2, 5 × 10ⁿ.
    static let steps: [Double] = [
        0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5,
        1, 2, 5, 10, 15, 30,
        60, 120, 300, 600, 900, 1800,
        3600, 7200, 10800, 21600, 43200,
    ]

    /// The step for a span of `span` seconds.
    static func step(for span: Double) -> Double {
        guard span.isFinite, span > 0 else { return 1 }
        for step in steps where span / step <= Double(maximumTicks) { return step }
        var day = 86400.0
        while true {
            for m in [1.0, 2, 5] where span / (day * m) <= Double(maximumTicks) { return day * m }
            day *= 10
            if !day.isFinite || day > 1e300 { return span }
        }
    }

    /// Offsets (seconds from the start) of the ticks in [0, span]: 0, step, 2 step, ….
    static func ticks(span: Double) -> [Double] {
        let step = step(for: span)
        let n = span.isFinite && span > 0 ? Int(min((span / step).rounded(.down), Double(maximumTicks * 2))) : 0
        return (0...n).map { Double($0) * step }
    }
}
