import AppHostProtocol
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
@testable import Scenarios
import TestSupport
import Testing

/// Events written by hand, as the host writes them: the timeline needs no host.
struct EventScript {
    var events: [HostEvent] = []
    var start = ScenarioDefaults.epoch
    private var seq: UInt64 = 0

    mutating func add(_ at: Double, _ kind: HostEvent.Kind, _ app: BundleID?, from: AppState? = nil, to: AppState? = nil,
                      cause: String = "", mode: BackgroundMode? = nil, fields: HostEvent.Fields = .init()) {
        seq += 1
        events.append(HostEvent(seq: seq, time: start.addingTimeInterval(at), kind: kind, bundleIdentifier: app, pid: app == nil ? nil : 4242,
                                from: from, to: to, cause: cause, mode: mode, fields: fields))
    }

    mutating func move(_ at: Double, _ app: BundleID, _ from: AppState, _ to: AppState, _ cause: String = "") {
        add(at, .transition, app, from: from, to: to, cause: cause.isEmpty ? "\(from.rawValue) to \(to.rawValue)" : cause)
    }

    /// Two apps through launch, background, suspension, a push, a fetch, a task and a kill.
    static let twoApps: EventScript = {
        var s = EventScript()
        s.add(0, .hostStarted, nil, cause: "host started")
        s.add(0.1, .spawned, "com.example.mail", cause: "spawned /apps/Mail")
        s.move(0.2, "com.example.mail", .notRunning, .inactive)
        s.move(0.3, "com.example.mail", .inactive, .active)
        s.add(0.3, .callback, "com.example.mail", cause: "didBecomeActive returned", fields: .init(callback: "didBecomeActive"))
        s.add(1, .spawned, "com.example.news", cause: "spawned /apps/News")
        s.move(1.1, "com.example.news", .notRunning, .background, "launched in the background")
        s.move(2, "com.example.mail", .active, .inactive, "home button")
        s.move(2.1, "com.example.mail", .inactive, .background, "home button")
        s.add(2.2, .backgroundTask, "com.example.mail", cause: "beginBackgroundTask \"upload\" id 1",
              fields: .init(task: 1, taskName: "upload", began: true))
        s.add(3, .modeUsed, "com.example.news", cause: "background fetch 1 (interval)", mode: .fetch)
        s.add(3.1, .callback, "com.example.news", cause: "performFetch returned", fields: .init(callback: "performFetch"))
        s.add(4, .service, "com.example.news", cause: "didReceiveRemoteNotification(background) (silent push 7 (apns))")
        s.add(10, .callback, "com.example.mail", cause: "expirationHandler(task 1) returned", fields: .init(callback: "expirationHandler(task 1)"))
        s.add(12, .backgroundTask, "com.example.mail", cause: "endBackgroundTask id 1", fields: .init(task: 1, began: false))
        s.add(12.1, .signal, "com.example.mail", cause: "SIGSTOP: no assertion left", fields: .init(signal: .stop))
        s.move(12.1, "com.example.mail", .background, .suspended, "no assertion left")
        s.add(20, .signal, "com.example.mail", cause: "SIGCONT: resume", fields: .init(signal: .cont))
        s.move(20, "com.example.mail", .suspended, .background, "resume")
        s.add(40, .warning, "com.example.news", cause: "killing: watchdog")
        s.add(40, .signal, "com.example.news", cause: "SIGKILL: watchdog: background time of 30 s used up", fields: .init(signal: .kill))
        s.add(40.01, .exited, "com.example.news", cause: "SIGKILL")
        s.move(40.01, "com.example.news", .background, .notRunning, "killed: background time of 30 s used up")
        s.add(40.01, .report, "com.example.news", cause: "termination report com.example.news-1735689640010-4242: background time used up")
        s.move(60, "com.example.mail", .background, .active, "foreground")
        return s
    }()

    /// The report the `report` event of ``twoApps`` announces.
    static let newsReport = TerminationReport(
        id: "com.example.news-1735689640010-4242", bundleIdentifier: "com.example.news", pid: 4242,
        time: ScenarioDefaults.epoch.addingTimeInterval(40.01), exceptionType: "EXC_CRASH (SIGKILL)", exitStatus: nil,
        signal: 9, signalName: "SIGKILL", terminationNamespace: "RUNNINGBOARD", terminationCode: "0x8badf00d",
        reason: "background time used up", explanation: "watchdog", lastStates: [])
}

/// Whether `text` parses as XML, and the parser's error if not.
func xmlError(_ text: String) -> String? {
    let parser = XMLParser(data: Data(text.utf8))
    let ok = parser.parse()
    return ok ? nil : "\(parser.parserError.map { "\($0)" } ?? "unknown error") at line \(parser.lineNumber)"
}

func occurrences(_ needle: String, in text: String) -> Int {
    text.components(separatedBy: needle).count - 1
}

@Suite("Timeline")
struct TimelineTests {
    @Test func oneLanePerAppInOrderOfFirstAppearance() {
        let input = TimelineInput(title: "two apps", events: EventScript.twoApps.events)
        #expect(input.lanes.map(\.bundleIdentifier) == ["com.example.mail", "com.example.news"])
        let svg = Timeline.svg(input)
        #expect(occurrences("<g class=\"lane\">", in: svg) == 2)
        #expect(svg.contains(">com.example.mail</text>"))
        #expect(svg.contains(">com.example.news</text>"))
        #expect(xmlError(svg) == nil)
    }

    @Test func givenLanesAreDrawnWithTheirLabelsAndOthersLeftOut() {
        let input = TimelineInput(title: "t", events: EventScript.twoApps.events,
                                  lanes: [TimelineLane(label: "news", bundleIdentifier: "com.example.news")])
        let svg = Timeline.svg(input)
        #expect(occurrences("<g class=\"lane\">", in: svg) == 1)
        #expect(svg.contains("<title>com.example.news</title>news</text>"))
        #expect(!svg.contains("didBecomeActive returned"))
    }

    @Test func stateBandsAreColouredByStateWithTheirCause() {
        let svg = Timeline.svg(TimelineInput(title: "t", events: EventScript.twoApps.events))
        for state in [AppState.notRunning, .inactive, .active, .background, .suspended] {
            #expect(svg.contains("height=\"18\" fill=\"\(state.colour)\"><title>\(state.rawValue): "), "no band for \(state)")
        }
        // The suspension lasts from 12.1 s to 20 s; its tooltip says so, with its cause.
        #expect(svg.contains("<title>suspended: 2025-01-01T00:00:12.100Z (+12.1 s) for 7.9 s\nno assertion left</title>"))
        // Bands start where the transition's x is: 12.1 s of 60 s on a 930-wide plot.
        #expect(svg.contains("<rect x=\"417.5\"") || svg.contains("<rect x=\"417.6\""))
    }

    @Test func marksForSignalsCallbacksTasksPushesFetchesDeadlinesAndKills() {
        let svg = Timeline.svg(TimelineInput(title: "t", events: EventScript.twoApps.events, reports: [EventScript.newsReport]))
        for name in ["SIGSTOP", "SIGCONT", "SIGKILL", "callback", "task begun", "task ended", "push", "fetch",
                     "deadline (expiration)", "kill report", "warning", "spawned", "exited"] {
            #expect(svg.contains("<title>\(name)</title>"), "no \(name) in the legend")
        }
        // Each mark's tooltip: time, kind, cause.
        #expect(svg.contains("<title>2025-01-01T00:00:12.100Z (+12.1 s)  pid 4242\nSIGSTOP (signal)\nSIGSTOP: no assertion left</title>"))
        #expect(svg.contains("push (service)\ndidReceiveRemoteNotification(background) (silent push 7 (apns))"))
        #expect(svg.contains("fetch (modeUsed)\nmode fetch\nbackground fetch 1 (interval)"))
        #expect(svg.contains("task begun (backgroundTask)\ntask 1 &quot;upload&quot;"))
        #expect(svg.contains("deadline (expiration) (callback)\nexpirationHandler(task 1) returned"))
        // The kill's report gives its code, beside the mark and in its tooltip.
        #expect(svg.contains(">0x8badf00d</text>"))
        #expect(svg.contains("EXC_CRASH (SIGKILL), namespace RUNNINGBOARD, code 0x8badf00d"))
        // The task is drawn held from 2.2 s to 12 s.
        #expect(svg.contains("<title>task 1 &quot;upload&quot; held 9.8 s</title>"))
    }

    @Test func aKillWithoutItsReportHasNoCode() {
        let svg = Timeline.svg(TimelineInput(title: "t", events: EventScript.twoApps.events))
        #expect(svg.contains("kill report (report)"))
        #expect(!svg.contains("0x8badf00d"))
    }

    @Test func theFailureIsARedLineLabelledOnTheAxis() {
        let when = ScenarioDefaults.epoch.addingTimeInterval(30)
        let svg = Timeline.svg(TimelineInput(title: "t", events: EventScript.twoApps.events,
                                             markers: [TimelineMarker(time: when, label: "expected news suspended, seen background", isFailure: true)]))
        #expect(occurrences("<g class=\"failure\">", in: svg) == 1)
        #expect(svg.contains("stroke=\"#d50000\""))
        #expect(svg.contains("✗ expected news suspended, seen background</text>"))
        // 30 s of 60 s: the middle of the plot.
        #expect(svg.contains("x1=\"695\""))
        #expect(xmlError(svg) == nil)
    }

    @Test func aMarkerOutsideTheEventsWidensTheAxis() {
        let late = ScenarioDefaults.epoch.addingTimeInterval(120)
        let svg = Timeline.svg(TimelineInput(title: "t", events: EventScript.twoApps.events,
                                             markers: [TimelineMarker(time: late, label: "checked", isFailure: false)]))
        #expect(svg.contains(">2 min</text>"))
        #expect(svg.contains("<g class=\"marker\">"))
    }

    @Test func hostileCausesAreEscapedCutAndCleaned() throws {
        var s = EventScript()
        let huge = String(repeating: "A", count: 1 << 20)
        let hostile = ["<script>alert(1)</script>", "]]><x>", "bell\u{07}escape\u{1B}nul\u{0}", "\"quoted' & amp", huge,
                       String(repeating: "e\u{301}", count: 400_000)]
        s.move(0, "com.example.evil", .notRunning, .active, hostile[0])
        for (i, cause) in hostile.enumerated() {
            s.add(Double(i + 1), .warning, "com.example.evil", cause: cause)
            s.add(Double(i + 1), .backgroundTask, "com.example.evil", cause: "begin", fields: .init(task: BackgroundTaskID(i), taskName: cause, began: true))
        }
        s.move(9, "com.example.evil", .active, .background, hostile[1])
        let lanes = [TimelineLane(label: "<b>evil</b>\u{1}", bundleIdentifier: "com.example.evil")]
        let svg = Timeline.svg(TimelineInput(title: "<title>\u{0}", events: s.events, lanes: lanes,
                                             markers: [TimelineMarker(time: s.start, label: "]]>&<", isFailure: true)]))
        #expect(xmlError(svg) == nil)
        #expect(!svg.contains("<script>"))
        #expect(svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        #expect(!svg.contains("]]>"))
        #expect(svg.contains("&lt;b&gt;evil&lt;/b&gt;"))
        #expect(svg.contains("&quot;quoted&#39; &amp; amp"))
        #expect(svg.contains("bellescapenul"))
        #expect(!svg.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" && $0 != "\t" && $0 != "\r" })
        // Cut: 1 MiB of cause and 800,000 scalars of one-character accents take at most
        // 300 scalars each (twice: as a cause and as a task name).
        #expect(!svg.contains(String(repeating: "A", count: Timeline.maximumTextLength + 1)))
        #expect(svg.contains(String(repeating: "A", count: Timeline.maximumTextLength) + "…"))
        #expect(svg.utf8.count < 64 * 1024)
    }

    @Test func marksAreBoundedAndThePictureSaysHowManyWereLeftOut() {
        var s = EventScript()
        s.move(0, "com.example.busy", .notRunning, .active)
        let count = Timeline.maximumMarks + 5_000
        for i in 0..<count {
            s.add(Double(i) / 100, .callback, "com.example.busy", cause: "tick \(i) returned", fields: .init(callback: "tick"))
        }
        let svg = Timeline.svg(TimelineInput(title: "busy", events: s.events))
        // One circle per mark kept, one in the legend.
        #expect(occurrences("<circle", in: svg) == Timeline.maximumMarks + 1)
        #expect(svg.contains("5000 earlier marks not drawn (at most \(Timeline.maximumMarks))"))
        // The latest are kept.
        #expect(svg.contains("tick \(count - 1) returned"))
        #expect(!svg.contains("tick 4999 returned"))
        #expect(xmlError(svg) == nil)
    }

    @Test func stateBandsAreBoundedToo() {
        var s = EventScript()
        let count = Timeline.maximumMarks + 10
        for i in 0..<count {
            let (from, to): (AppState, AppState) = i % 2 == 0 ? (.background, .suspended) : (.suspended, .background)
            s.move(Double(i), "com.example.flappy", from, to)
        }
        let svg = Timeline.svg(TimelineInput(title: "t", events: s.events))
        #expect(occurrences("height=\"18\" fill=", in: svg) == Timeline.maximumMarks)
        #expect(svg.contains("11 earlier state bands not drawn"))
    }

    @Test func sameInputSameBytesWhateverTheOrderOfEvents() {
        let events = EventScript.twoApps.events
        let input = TimelineInput(title: "t", events: events, reports: [EventScript.newsReport])
        let first = Timeline.svg(input)
        #expect(Timeline.svg(input) == first)
        var shuffled = input
        var generator = SplitMix(seed: 7)
        shuffled.events = events.shuffled(using: &generator)
        shuffled.lanes = input.lanes
        #expect(Timeline.svg(shuffled) == first)
    }

    @Test func noEventsStillMakesAWellFormedPicture() {
        let svg = Timeline.svg(TimelineInput(title: "empty", events: []))
        #expect(svg.contains("no apps: the log names none"))
        #expect(xmlError(svg) == nil)
        let page = Timeline.html(TimelineInput(title: "empty", events: []))
        #expect(page.contains("no events"))
    }

    @Test func theHTMLPageHoldsThePictureAndTheEvents() {
        let page = Timeline.html(TimelineInput(title: "two <apps>", events: EventScript.twoApps.events, notes: ["a note"]))
        #expect(page.hasPrefix("<!DOCTYPE html>"))
        #expect(page.contains("<h1>two &lt;apps&gt;</h1>"))
        #expect(page.contains("<svg xmlns=\"http://www.w3.org/2000/svg\""))
        #expect(page.contains("<p class=\"note\">a note</p>"))
        #expect(page.contains("<td>SIGSTOP</td>") || page.contains("<td>signal</td>"))
        #expect(!page.contains("<script"))
        // Self-contained: nothing fetched.
        #expect(!page.contains("src=") && !page.contains("<link"))
    }
}

@Suite("Timeline axis and text")
struct TimelineAxisTests {
    @Test(arguments: [
        (0.004, 0.001, "1 ms"), (0.05, 0.005, "5 ms"), (1.0, 0.1, "100 ms"), (90.0, 10.0, "10 s"),
        (600.0, 60.0, "1 min"), (3_600.0, 600.0, "10 min"), (86_400.0, 10_800.0, "3 h"), (30 * 86_400.0, 432_000.0, "5 d"),
    ])
    func ticksAreNiceSteps(span: Double, step: Double, label: String) {
        #expect(TimeAxis.step(for: span) == step)
        let ticks = TimeAxis.ticks(span: span)
        #expect(ticks.count <= TimeAxis.maximumTicks + 1)
        #expect(ticks.first == 0)
        #expect(TimeText.offset(ticks[1]) == label)
    }

    @Test func offsetsReadAsDurations() {
        #expect(TimeText.offset(0) == "0")
        #expect(TimeText.offset(0.25) == "250 ms")
        #expect(TimeText.offset(12.1) == "12.1 s")
        #expect(TimeText.offset(150) == "2 min 30 s")
        #expect(TimeText.offset(3_900) == "1 h 5 min")
        #expect(TimeText.offset(2 * 86_400 + 3 * 3_600) == "2 d 3 h")
        #expect(TimeText.offset(.infinity) == "?")
    }

    @Test func textIsEscapedAndCut() {
        #expect(Escape.text("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#39;")
        #expect(Escape.text("x\u{0}\u{8}\u{FFFE}y\tz\n") == "xy\tz\n")
        #expect(Escape.text("abcdef", limit: 3) == "abc…")
        #expect(Escape.line("a\nb\tc") == "a b c")
        #expect(Num.f(12.04) == "12")
        #expect(Num.f(-0.25) == "-0.3" || Num.f(-0.25) == "-0.2")
        #expect(Num.f(.nan) == "0")
    }
}

