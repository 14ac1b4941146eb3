import AppHostProtocol
import Foundation

/// A directory that could not be written as an HTML report.
public struct HTMLReportError: Error, Sendable, CustomStringConvertible {
    /// `cannot write the HTML report to out: it is a file; name a directory`.
    public let description: String
}

/// `apphost test --html DIR`: a report in the manner of Playwright's HTML reporter.
/// `index.html` lists the scenarios (status, name, file, rule, duration, what failed), each
/// linking to a page of its own with its timeline (``Timeline``), the failing expectation
/// marked on it, the expectation's expected and seen, the recent events and a table of all
/// events. Every page is self-contained: inline CSS, no script, nothing fetched.
public enum HTMLReport {
    /// Writes `index.html` and one page per scenario into `directory` (made if missing).
    /// Files of the same names are replaced whole; other files there are left alone.
    public static func write(_ results: [ScenarioResult], to directory: String) throws(HTMLReportError) {
        try makeDirectory(directory)
        let names = pageNames(results)
        for (result, name) in zip(results, names) {
            try save(page(result), to: directory + "/" + name)
        }
        try save(index(results, names: names), to: directory + "/index.html")
    }

    /// The page file name of each result, in order: its name reduced to letters, digits,
    /// `-`, `_` and `.`, at most 64 of them, made unique (`-2`, `-3`, … compared without
    /// case, and never `index`).
    static func pageNames(_ results: [ScenarioResult]) -> [String] {
        var used: Set<String> = ["index"]
        var names: [String] = []
        for r in results {
            let base = safeName(r.name)
            var name = base
            var n = 2
            while used.contains(name.lowercased()) {
                name = "\(base)-\(n)"
                n += 1
            }
            used.insert(name.lowercased())
            names.append(name + ".html")
        }
        return names
    }

    static func safeName(_ s: String) -> String {
        var out = ""
        for scalar in s.unicodeScalars {
            if out.count == 64 { break }
            let c = Character(scalar)
            if scalar.isASCII, c.isLetter || c.isNumber || c == "_" || c == "." || c == "-" {
                out.append(c)
            } else if !out.hasSuffix("-") {
                out.append("-")
            }
        }
        while let f = out.first, f == "-" || f == "." { out.removeFirst() }
        while let l = out.last, l == "-" || l == "." { out.removeLast() }
        return out.isEmpty ? "scenario" : out
    }

    // MARK: - Pages

    static func index(_ results: [ScenarioResult], names: [String]) -> String {
        var page = HTMLPage(title: "AppHost scenarios")
        let counts = ScenarioResult.Status.allOrdered.map { s in (s, results.filter { $0.status == s }.count) }
        page.body += "<h1>AppHost scenarios</h1>\n<p class=\"counts\">\(results.count) scenario\(results.count == 1 ? "" : "s"): "
            + counts.map { "<span class=\"badge \($0.0.rawValue)\">\($0.1) \($0.0.rawValue)</span>" }.joined(separator: " ")
            + " in \(Num.decimals(results.reduce(0) { $0 + $1.seconds }, 2)) s</p>\n"
        page.body += "<table class=\"list\">\n<tr><th>Status</th><th>Scenario</th><th>File</th><th>Rule</th><th>Duration</th><th>What failed</th></tr>\n"
        for (r, name) in zip(results, names) {
            let rule = [r.rule.map { Escape.text($0) }, r.source.map { "<span class=\"source\">\(Escape.text($0))</span>" }]
                .compactMap { $0 }.joined(separator: "<br>")
            page.body += "<tr class=\"\(r.status.rawValue)\"><td><span class=\"badge \(r.status.rawValue)\">\(r.status.rawValue)</span></td>"
                + "<td><a href=\"\(Escape.text(name))\">\(Escape.text(r.name))</a></td><td><code>\(Escape.text(r.file))</code></td>"
                + "<td>\(rule)</td><td class=\"num\">\(Num.decimals(r.seconds, 2)) s</td><td>\(summary(r))</td></tr>\n"
        }
        page.body += "</table>\n"
        return page.html()
    }

    /// What failed, in a line or two: expected vs seen, or the error.
    static func summary(_ r: ScenarioResult) -> String {
        if let f = r.failure {
            return "<span class=\"where\">line \(f.line): \(Escape.line(f.stepText, limit: 120))</span><br>"
                + "expected <code>\(Escape.line(f.expected, limit: 160))</code>, seen <code>\(Escape.line(f.seen, limit: 160))</code>"
        }
        if let e = r.error { return "<code>\(Escape.line(e, limit: 300))</code>" }
        return ""
    }

    static func page(_ r: ScenarioResult) -> String {
        var page = HTMLPage(title: r.name)
        page.body += "<p class=\"crumbs\"><a href=\"index.html\">← all scenarios</a></p>\n"
        page.body += "<h1><span class=\"badge \(r.status.rawValue)\">\(r.status.rawValue)</span> \(Escape.text(r.name))</h1>\n"
        var meta = [("File", "<code>\(Escape.text(r.file))</code>")]
        if let rule = r.rule { meta.append(("Rule", Escape.text(rule))) }
        if let source = r.source { meta.append(("Source", link(source))) }
        meta.append(("Duration", "\(Num.decimals(r.seconds, 3)) s real; host clock \(Timestamp.format(r.start)) to \(Timestamp.format(r.end))"))
        if !r.apps.isEmpty {
            meta.append(("Apps", r.apps.map { "\(Escape.text($0.alias)) = <code>\(Escape.text($0.bundleIdentifier))</code>" }.joined(separator: ", ")))
        }
        page.body += "<table class=\"meta\">\n" + meta.map { "<tr><th>\($0.0)</th><td>\($0.1)</td></tr>\n" }.joined() + "</table>\n"
        if let f = r.failure {
            page.body += "<div class=\"failure\"><p><b>Step \(f.step + 1)</b>, line \(f.line), column \(f.column): <code>\(Escape.text(f.stepText))</code>"
                + (f.time.map { " (checked at \(Timestamp.format($0)))" } ?? "") + "</p>\n"
                + "<table><tr><th>Expected</th><td><pre>\(Escape.text(f.expected, limit: 2_000))</pre></td></tr>\n"
                + "<tr><th>Seen</th><td><pre>\(Escape.text(f.seen, limit: 2_000))</pre></td></tr></table></div>\n"
        }
        if let e = r.error {
            page.body += "<div class=\"failure\"><pre>\(Escape.text(e, limit: 4_000))</pre></div>\n"
        }
        page.body += "<h2>Timeline</h2>\n<div class=\"timeline\">\n\(Timeline.svg(r.timelineInput))\n</div>\n"
        if let f = r.failure, !f.recentEvents.isEmpty {
            page.body += "<h2>Recent events</h2>\n<pre class=\"recent\">"
                + f.recentEvents.suffix(200).map { Escape.line($0) }.joined(separator: "\n") + "</pre>\n"
        }
        page.body += "<h2>Events</h2>\n" + HTMLPage.eventsTable(r.events)
        return page.html()
    }

    /// A source as a link when it is an http(s) address, else as text.
    static func link(_ source: String) -> String {
        let text = Escape.text(source)
        guard source.hasPrefix("https://") || source.hasPrefix("http://"), !source.contains(where: \.isWhitespace) else { return text }
        return "<a href=\"\(text)\">\(text)</a>"
    }

    // MARK: - Files

    private static func makeDirectory(_ directory: String) throws(HTMLReportError) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw HTMLReportError(description: "cannot write the HTML report to \(directory): it is a file; name a directory")
            }
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw HTMLReportError(description: "cannot make the HTML report's directory \(directory): \(error.localizedDescription)")
        }
    }

    private static func save(_ text: String, to path: String) throws(HTMLReportError) {
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw HTMLReportError(description: "cannot write \(path): \(error.localizedDescription)")
        }
    }
}

extension ScenarioResult.Status {
    /// Passed, failed, error: the order the index counts them in.
    static let allOrdered: [Self] = [.passed, .failed, .error, .skipped]
}

extension ScenarioResult {
    /// What the scenario's page draws: a lane per app of the file (its alias, in the
    /// file's order), then any other app the log names; the failing check marked.
    var timelineInput: TimelineInput {
        // An app the run never installed has no id, and no events to draw.
        var lanes = apps.compactMap { a in BundleID(a.bundleIdentifier).map { TimelineLane(label: a.alias, bundleIdentifier: $0) } }
        var seen = Set(lanes.map(\.bundleIdentifier))
        for lane in TimelineInput.defaultLanes(events) where seen.insert(lane.bundleIdentifier).inserted {
            lanes.append(lane)
        }
        var markers: [TimelineMarker] = []
        if let f = failure, let time = f.time {
            markers.append(TimelineMarker(time: time, label: "step \(f.step + 1) (line \(f.line)): expected \(f.expected), seen \(f.seen)",
                                          isFailure: true))
        }
        return TimelineInput(title: name, events: events, lanes: lanes, markers: markers, reports: reports)
    }
}
