import AppHostProtocol
import Foundation
@testable import Scenarios
import TestSupport
import Testing

extension ScenarioResult {
    /// A failing scenario over ``EventScript/twoApps``: the news app was expected suspended at 30 s.
    static func failingTwoApps(name: String = "news is suspended after a fetch") -> ScenarioResult {
        ScenarioResult(
            name: name, file: "scenarios/news.yaml", rule: "An app in the background is suspended once it has no assertion",
            source: "https://developer.apple.com/documentation/uikit/app_and_environment/managing_your_app_s_life_cycle",
            status: .failed,
            failure: .init(step: 3, line: 14, column: 5, stepText: "expect: {news: {state: suspended}}", expected: "suspended",
                           seen: "background", time: ScenarioDefaults.epoch.addingTimeInterval(30),
                           recentEvents: ["00:00:20.000  com.example.mail  suspended → background  (resume)", "<script>alert(1)</script>"]),
            seconds: 0.42, start: ScenarioDefaults.epoch, end: ScenarioDefaults.epoch.addingTimeInterval(60),
            apps: [.init(alias: "mail", bundleIdentifier: "com.example.mail"), .init(alias: "news", bundleIdentifier: "com.example.news")],
            events: EventScript.twoApps.events)
    }
}

/// The inline `<svg>…</svg>` of a page.
func inlineSVG(_ page: String) -> String? {
    guard let start = page.range(of: "<svg "), let end = page.range(of: "</svg>", range: start.upperBound..<page.endIndex) else { return nil }
    return String(page[start.lowerBound..<end.upperBound])
}

@Suite("HTMLReport")
struct HTMLReportTests {
    @Test func writesAnIndexLinkingAPageForEveryScenario() throws {
        let dir = try TempDir("html")
        defer { dir.remove() }
        let results = [
            ScenarioResult.failingTwoApps(),
            ScenarioResult(name: "news is suspended after a fetch", file: "scenarios/again.yaml", status: .passed, seconds: 0.1),
            ScenarioResult(name: "../../etc/passwd <b>", file: "bad.yaml", status: .error, error: "bad.yaml:3:1: unknown step \"frobnicate\""),
            ScenarioResult(name: "index", file: "index.yaml", status: .passed),
        ]
        let out = dir.path + "/report"
        try HTMLReport.write(results, to: out)

        let names = HTMLReport.pageNames(results)
        #expect(names == ["news-is-suspended-after-a-fetch.html", "news-is-suspended-after-a-fetch-2.html", "etc-passwd-b.html", "index-2.html"])
        let index = try String(contentsOfFile: out + "/index.html", encoding: .utf8)
        for (result, name) in zip(results, names) {
            #expect(index.contains("<a href=\"\(name)\">"), "index does not link \(name)")
            #expect(FileManager.default.fileExists(atPath: out + "/" + name))
            #expect(index.contains(Escape.text(result.name)))
        }
        #expect(index.contains("<span class=\"badge passed\">2 passed</span>"))
        #expect(index.contains("<span class=\"badge failed\">1 failed</span>"))
        #expect(index.contains("<span class=\"badge error\">1 error</span>"))
        #expect(index.contains("expected <code>suspended</code>, seen <code>background</code>"))
        #expect(index.contains("unknown step &quot;frobnicate&quot;"))
        #expect(!index.contains("<b>"))
        let files = try FileManager.default.contentsOfDirectory(atPath: out).sorted()
        #expect(files == (names + ["index.html"]).sorted())
    }

    @Test func aScenarioPageHasItsTimelineWithTheFailureMarked() throws {
        let page = HTMLReport.page(.failingTwoApps())
        #expect(page.contains("<a href=\"index.html\">"))
        #expect(page.contains("<span class=\"badge failed\">failed</span>"))
        #expect(page.contains("<b>Step 4</b>, line 14, column 5"))
        #expect(page.contains("<th>Expected</th><td><pre>suspended</pre>"))
        #expect(page.contains("<th>Seen</th><td><pre>background</pre>"))
        #expect(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        #expect(!page.contains("<script"))
        #expect(page.contains("<a href=\"https://developer.apple.com/"))
        let svg = try #require(inlineSVG(page))
        #expect(xmlError(svg) == nil)
        // Lanes are the file's aliases; the failing check is the red line.
        #expect(svg.contains("<title>com.example.mail</title>mail</text>"))
        #expect(svg.contains("<title>com.example.news</title>news</text>"))
        #expect(svg.contains("<g class=\"failure\">"))
        #expect(svg.contains("✗ step 4 (line 14): expected suspended, seen background"))
        // The table of events.
        #expect(page.contains("<td>suspended → background</td>"))
    }

    @Test func aPageOfAScenarioThatCouldNotRunSaysWhy() {
        let page = HTMLReport.page(ScenarioResult(name: "broken", file: "b.yaml", status: .error, error: "b.yaml:2:7: not a duration: \"soon\""))
        #expect(page.contains("b.yaml:2:7: not a duration: &quot;soon&quot;"))
        #expect(page.contains("no events"))
    }

    @Test func refusesAFileWhereTheDirectoryShouldBe() throws {
        let dir = try TempDir("html")
        defer { dir.remove() }
        let file = dir.path + "/report"
        #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        #expect(throws: HTMLReportError.self) { try HTMLReport.write([.failingTwoApps()], to: file) }
    }

    @Test func safeNamesKeepLettersDigitsAndLittleElse() {
        #expect(HTMLReport.safeName("A b/c\\d:é") == "A-b-c-d")
        #expect(HTMLReport.safeName("...") == "scenario")
        #expect(HTMLReport.safeName(String(repeating: "x", count: 500)).count == 64)
    }
}
