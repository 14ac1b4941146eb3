import AppHostProtocol
import Foundation

/// What must repeat from one run of a scenario to the next: every event, the host's and
/// each app's, in one order, with its host time and typed fields, even where two apps
/// (or an app and the transfer daemon) answer at the same virtual instant. Normalised
/// away, as measurements of the machine rather than outcomes: pids (in the field and in
/// causes), the temporary state directory, report ids (which hold a pid and the wall
/// clock), and memory footprints (what the kernel counted).
public enum EventComparison {
    /// One line per event, comparable across runs.
    public static func comparable(_ events: [HostEvent]) -> [String] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .millisecondsSince1970
        return events.map { e in
            var e = e
            e.pid = nil
            e.footprint = nil
            e.cause = normalized(e.cause)
            return (try? encoder.encode(e)).map { String(decoding: $0, as: UTF8.self) } ?? "\(e)"
        }
    }

    static func normalized(_ cause: String) -> String {
        var cause = cause.replacingOccurrences(of: #"pid \d+"#, with: "pid N", options: .regularExpression)
        cause = cause.replacingOccurrences(of: #"pids? [\d, ]+\d"#, with: "pids N", options: .regularExpression)
        cause = cause.replacingOccurrences(of: #"/[^ ]*/apphost-scenario-[0-9a-f]+"#, with: "STATE", options: .regularExpression)
        cause = cause.replacingOccurrences(of: #"-\d{13}-\d+"#, with: "-REPORT", options: .regularExpression)
        return cause
    }

    /// Where two runs' events first differ: the index and each side's line ("end" past
    /// its last), or nil when they are the same.
    public static func firstDifference(_ a: [HostEvent], _ b: [HostEvent]) -> (index: Int, left: String, right: String)? {
        let (l, r) = (comparable(a), comparable(b))
        guard l != r else { return nil }
        let at = (0..<min(l.count, r.count)).first { l[$0] != r[$0] } ?? min(l.count, r.count)
        return (at, at < l.count ? l[at] : "end", at < r.count ? r[at] : "end")
    }
}
