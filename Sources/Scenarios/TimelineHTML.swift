import AppHostProtocol
import Foundation

/// A self-contained HTML page: inline style, no script.
struct HTMLPage {
    var title: String
    var body = ""

    init(title: String) { self.title = title }

    func html() -> String {
        """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(Escape.line(title))</title>
        <style>\(Self.style)</style>
        </head>
        <body>
        \(body)</body>
        </html>

        """
    }

    static let style = """

        body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; font-size: 14px; margin: 16px 20px; color: #222; }
        h1 { font-size: 20px; margin: 4px 0 10px; } h2 { font-size: 16px; margin: 18px 0 6px; }
        a { color: #1565c0; text-decoration: none; } a:hover { text-decoration: underline; }
        code, pre { font-family: "DejaVu Sans Mono", Menlo, monospace; font-size: 12px; }
        pre { white-space: pre-wrap; word-break: break-all; margin: 0; }
        table { border-collapse: collapse; }
        table.list, table.events { width: 100%; }
        table.list td, table.list th, table.events td, table.events th { border-bottom: 1px solid #e0e0e0; padding: 5px 8px; text-align: left; vertical-align: top; }
        table.events td { font-size: 12px; } table.events td:nth-child(2) { white-space: nowrap; } td.num { text-align: right; white-space: nowrap; }
        table.meta th { text-align: left; padding: 2px 12px 2px 0; color: #555; font-weight: normal; }
        .badge { display: inline-block; border-radius: 4px; padding: 1px 7px; color: #fff; font-size: 12px; font-weight: bold; }
        .badge.passed { background: #2e7d32; } .badge.failed { background: #c62828; } .badge.error { background: #ef6c00; } .badge.skipped { background: #757575; }
        .failure { border-left: 4px solid #c62828; background: #fff5f5; padding: 6px 10px; margin: 10px 0; }
        .failure th { text-align: left; vertical-align: top; padding: 2px 12px 2px 0; }
        .source, .where, .note { color: #666; }
        .timeline { overflow-x: auto; } .timeline svg { max-width: 100%; height: auto; }
        pre.recent { background: #f6f8fa; padding: 8px; }

        """

    /// At most this many events are listed in a page's table (the latest; the timeline
    /// draws the rest).
    static let maximumTableRows = 2_000

    /// The latest ``maximumTableRows`` events as a table (seq, time, app, kind,
    /// what, cause), every cell escaped and cut.
    static func eventsTable(_ events: [HostEvent]) -> String {
        guard let first = events.map(\.time).min() else { return "<p class=\"note\">no events</p>\n" }
        var out = ""
        let shown = events.suffix(maximumTableRows)
        if shown.count < events.count {
            out += "<p class=\"note\">\(events.count - shown.count) earlier events not listed (the latest \(maximumTableRows) are)</p>\n"
        }
        out += "<table class=\"events\">\n<tr><th>#</th><th>Time</th><th>+</th><th>App</th><th>Kind</th><th>What</th><th>Cause</th></tr>\n"
        for e in shown {
            out += "<tr><td class=\"num\">\(e.seq)</td><td>\(Timestamp.format(e.time))</td><td class=\"num\">\(TimeText.offset(e.time.timeIntervalSince(first)))</td>"
                + "<td>\(Escape.line(e.bundleIdentifier?.rawValue ?? "host", limit: 160))\(e.pid.map { " [\($0)]" } ?? "")</td><td>\(e.kind.rawValue)</td>"
                + "<td>\(Escape.line(what(e), limit: 160))</td><td>\(Escape.line(e.cause))</td></tr>\n"
        }
        return out + "</table>\n"
    }

    /// The typed fields of an event in a few words.
    static func what(_ e: HostEvent) -> String {
        var parts: [String] = []
        if e.from != nil || e.to != nil { parts.append("\(e.from?.rawValue ?? "?") → \(e.to?.rawValue ?? "?")") }
        if let s = e.signal { parts.append(s.rawValue + (e.confirmed == true ? " (confirmed)" : "")) }
        if let c = e.callback { parts.append(c) }
        if let t = e.task { parts.append("task \(t)\(e.taskName.map { " \"\($0)\"" } ?? "")\(e.began.map { $0 ? " begun" : " ended" } ?? "")") }
        if let m = e.mode { parts.append("mode \(m.rawValue)") }
        if let t = e.transfer { parts.append("transfer \(t.rawValue)\(e.transferTask.map { " task \($0)" } ?? "")") }
        return parts.joined(separator: ", ")
    }
}
