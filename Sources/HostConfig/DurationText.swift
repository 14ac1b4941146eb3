import Foundation

/// Durations written as `31s`, `10m`, `1h`, `250ms`, `1.5s`, `1h30m` or bare seconds.
public enum DurationText {
    /// Parses to seconds.
    public static func seconds(_ text: String) throws(BudgetError) -> Double {
        let s = text.trimmingCharacters(in: .whitespaces)
        if let bare = Double(s), bare.isFinite, bare >= 0 { return bare }
        var total = 0.0
        var number = ""
        var unit = ""
        var parts: [(Double, String)] = []
        func flush() throws(BudgetError) {
            guard let n = Double(number), n.isFinite, n >= 0, !unit.isEmpty else {
                throw BudgetError(message: "not a duration: \"\(text)\" (examples: 31s, 10m, 1h, 250ms, 1h30m)")
            }
            parts.append((n, unit))
            number = ""
            unit = ""
        }
        for ch in s {
            if ch.isNumber || ch == "." {
                if !unit.isEmpty { try flush() }
                number.append(ch)
            } else if ch.isLetter {
                unit.append(ch)
            } else {
                throw BudgetError(message: "not a duration: \"\(text)\" (examples: 31s, 10m, 1h, 250ms, 1h30m)")
            }
        }
        try flush()
        for (n, u) in parts {
            switch u {
            case "ms": total += n / 1000
            case "s": total += n
            case "m", "min": total += n * 60
            case "h": total += n * 3600
            case "d": total += n * 86400
            default: throw BudgetError(message: "unknown unit \"\(u)\" in \"\(text)\" (use ms, s, m, h or d)")
            }
        }
        return total
    }

    /// `31s`, `2m30s`, `1h`, `250ms`.
    public static func format(_ seconds: Double) -> String {
        if seconds < 1 { return "\(Int((seconds * 1000).rounded()))ms" }
        if seconds < 60 {
            let r = (seconds * 1000).rounded() / 1000
            return r == r.rounded() ? "\(Int(r))s" : "\(r)s"
        }
        var rest = Int(seconds.rounded())
        var out = ""
        if rest >= 3600 { out += "\(rest / 3600)h"; rest %= 3600 }
        if rest >= 60 { out += "\(rest / 60)m"; rest %= 60 }
        if rest > 0 { out += "\(rest)s" }
        return out
    }
}
