import AppHostProtocol
import Foundation

/// One lane of a timeline: an app, under a label.
public struct TimelineLane: Sendable, Equatable {
    /// What the lane is called in the picture (an alias, or the bundle identifier).
    public var label: String
    /// The app whose events the lane draws.
    public var bundleIdentifier: BundleID

    /// A lane for `bundleIdentifier`, called `label`.
    public init(label: String, bundleIdentifier: BundleID) {
        self.label = label
        self.bundleIdentifier = bundleIdentifier
    }
}

/// A vertical line across every lane at one time, labelled on the time axis: the
/// failing expectation (red), or any other moment worth pointing at (grey).
public struct TimelineMarker: Sendable, Equatable {
    /// Where on the time axis (host time); the axis widens to take it in.
    public var time: Date
    /// What happened then (`step 4 (line 14): expected suspended, seen background`).
    public var label: String
    /// Drawn red, as the reason the scenario failed.
    public var isFailure: Bool

    /// A marker at `time`, labelled `label`, red if `isFailure`.
    public init(time: Date, label: String, isFailure: Bool) {
        self.time = time
        self.label = label
        self.isFailure = isFailure
    }
}

/// What a timeline is drawn from.
public struct TimelineInput: Sendable {
    /// The picture's heading (a scenario's name, or the state directory).
    public var title: String
    /// The host's events, in the order they were written (sorted by time and `seq` to draw).
    public var events: [HostEvent]
    /// The lanes, top to bottom. Events of apps without a lane are not drawn.
    public var lanes: [TimelineLane]
    /// Lines across the lanes (at most 100 are drawn).
    public var markers: [TimelineMarker]
    /// Termination reports: a `report` event of the same app at the same time shows the
    /// report's termination code (the event itself does not carry it).
    public var reports: [TerminationReport]
    /// Lines printed under the title (e.g. that older events were not read).
    public var notes: [String]

    /// `lanes` nil: one lane per bundle identifier, in the order the events first name them.
    public init(title: String, events: [HostEvent], lanes: [TimelineLane]? = nil, markers: [TimelineMarker] = [],
                reports: [TerminationReport] = [], notes: [String] = []) {
        self.title = title
        self.events = events
        self.lanes = lanes ?? Self.defaultLanes(events)
        self.markers = markers
        self.reports = reports
        self.notes = notes
    }

    /// One lane per bundle identifier in `events`, in order of first appearance, labelled
    /// with the identifier.
    public static func defaultLanes(_ events: [HostEvent]) -> [TimelineLane] {
        var seen = Set<BundleID>()
        var lanes: [TimelineLane] = []
        for e in events {
            guard let id = e.bundleIdentifier, seen.insert(id).inserted else { continue }
            lanes.append(TimelineLane(label: id.rawValue, bundleIdentifier: id))
        }
        return lanes
    }
}

/// Timelines of a host's event log, drawn as SVG: one lane per app, its states as
/// coloured bands, and a mark with a tooltip for each signal, callback, background task,
/// push, fetch, deadline, kill and warning. The output depends on the input alone (same
/// events, same bytes) and is bounded whatever the log holds.
public enum Timeline {
    /// At most this many marks (and as many state bands) are drawn; the picture says how
    /// many more there were. The latest are kept: a failure is usually at the end.
    public static let maximumMarks = 20_000
    /// At most this many lanes are drawn.
    public static let maximumLanes = 64
    /// Text taken from an event (a cause, a task name, a label) is cut to this many
    /// characters: much of it is written by the app.
    public static let maximumTextLength = 300

    /// The timeline as a standalone SVG document (`<svg>` with its namespace, no XML
    /// declaration needed), also fit to be placed inline in HTML.
    public static func svg(_ input: TimelineInput) -> String {
        TimelineDrawing(input).svg()
    }

    /// An HTML page around ``svg(_:)``, with the title and a table of the events:
    /// self-contained (inline CSS, no script, nothing fetched).
    public static func html(_ input: TimelineInput) -> String {
        var page = HTMLPage(title: input.title)
        page.body += "<h1>\(Escape.text(input.title))</h1>\n"
        for note in input.notes { page.body += "<p class=\"note\">\(Escape.text(note))</p>\n" }
        page.body += "<div class=\"timeline\">\n\(svg(input))\n</div>\n"
        let lanes = Set(input.lanes.map(\.bundleIdentifier))
        let events = input.events.filter { $0.bundleIdentifier.map(lanes.contains) ?? true }
        page.body += "<h2>Events</h2>\n" + HTMLPage.eventsTable(events)
        return page.html()
    }
}

// MARK: - Marks

/// What a mark stands for: its shape, colour, row in the lane and name in the legend.
enum MarkKind: Int, CaseIterable, Comparable {
    // Row 0: the process.
    case spawned, stop, cont, kill, exited, report
    // Row 1: the app's code.
    case callback, deadline, taskBegan, taskEnded
    // Row 2: background modes and the host's notes.
    case push, fetch, modeUsed, modeRefused, service, snapshot, warning

    static func < (a: MarkKind, b: MarkKind) -> Bool { a.rawValue < b.rawValue }

    var row: Int {
        switch self {
        case .spawned, .stop, .cont, .kill, .exited, .report: 0
        case .callback, .deadline, .taskBegan, .taskEnded: 1
        case .push, .fetch, .modeUsed, .modeRefused, .service, .snapshot, .warning: 2
        }
    }

    var name: String {
        switch self {
        case .spawned: "spawned"
        case .stop: "SIGSTOP"
        case .cont: "SIGCONT"
        case .kill: "SIGKILL"
        case .exited: "exited"
        case .report: "kill report"
        case .callback: "callback"
        case .deadline: "deadline (expiration)"
        case .taskBegan: "task begun"
        case .taskEnded: "task ended"
        case .push: "push"
        case .fetch: "fetch"
        case .modeUsed: "mode used"
        case .modeRefused: "mode refused"
        case .service: "service note"
        case .snapshot: "snapshot"
        case .warning: "warning"
        }
    }

    var colour: String {
        switch self {
        case .spawned: "#555555"
        case .stop: "#34495e"
        case .cont: "#16a085"
        case .kill: "#c0392b"
        case .exited: "#555555"
        case .report: "#7b1fa2"
        case .callback: "#5d6d7e"
        case .deadline: "#e67e22"
        case .taskBegan, .taskEnded: "#1a237e"
        case .push: "#d35400"
        case .fetch: "#00838f"
        case .modeUsed: "#607d8b"
        case .modeRefused: "#e74c3c"
        case .service: "#90a4ae"
        case .snapshot: "#9e9e9e"
        case .warning: "#b7950b"
        }
    }
}

/// One mark to draw: where, what, and the tooltip's lines.
struct Mark {
    var time: Date
    var lane: Int
    var kind: MarkKind
    /// Drawn beside the mark (a kill's termination code).
    var caption: String?
    var tooltip: [String]
}

extension MarkKind {
    /// The mark an event makes, and its caption; nil for events drawn otherwise
    /// (transitions are bands) or not at all. Typed fields first; where the host records
    /// only a cause (service notes), pushes and fetches are told by their words.
    static func of(_ e: HostEvent) -> MarkKind? {
        switch e.kind {
        case .transition, .hostStarted, .hostStopping, .hostStopped, .installed, .uninstalled:
            return nil
        case .spawned: return .spawned
        case .exited: return .exited
        case .report: return .report
        case .warning: return .warning
        case .snapshot: return .snapshot
        case .signal:
            switch e.signal {
            case .stop?: return .stop
            case .cont?: return .cont
            case .kill?: return .kill
            // The same signal to the app's other processes: a note, not a second mark.
            default: return .service
            }
        case .callback:
            let name = e.callback ?? ""
            if name.hasPrefix("expirationHandler") || name.hasPrefix("BGTask expiration") { return .deadline }
            if name.hasPrefix("performFetch") { return .fetch }
            if name.hasPrefix("didReceiveRemoteNotification") || name.hasPrefix("didReceiveIncomingPush") { return .push }
            return .callback
        case .backgroundTask:
            return e.began == false ? .taskEnded : .taskBegan
        case .modeUsed:
            switch e.mode {
            case .fetch?: return .fetch
            case .remoteNotification?, .voip?: return .push
            default: return .modeUsed
            }
        case .modeRefused:
            return .modeRefused
        case .memory:
            // A jetsam decision is drawn by its SIGKILL and report; warnings and levels are notes.
            return .service
        case .service:
            if e.transfer != nil { return .service }
            // The first words (by scalars: a cause may be one enormous character).
            let cause = String(String.UnicodeScalarView(e.cause.unicodeScalars.prefix(200))).lowercased()
            if cause.contains("push") || cause.contains("didreceiveremotenotification") { return .push }
            if cause.contains("fetch") { return .fetch }
            return .service
        }
    }
}

extension Timeline {
    /// The marks of `events` (sorted) in lanes `laneOf`, with their captions and tooltips.
    static func marks(_ events: [HostEvent], laneOf: [BundleID: Int], reports: [TerminationReport], start: Date) -> [Mark] {
        let reportIndex = ReportIndex(reports)
        var marks: [Mark] = []
        for e in events {
            guard let id = e.bundleIdentifier, let lane = laneOf[id], let kind = MarkKind.of(e) else { continue }
            var caption: String?
            var tooltip = [Escape.timeLine(e.time, start: start) + (e.pid.map { "  pid \($0)" } ?? ""),
                           "\(kind.name) (\(e.kind.rawValue))"]
            switch kind {
            case .report:
                if let r = reportIndex.report(for: e) {
                    caption = r.terminationCode ?? r.exceptionType
                    var what = r.exceptionType
                    if let ns = r.terminationNamespace { what += ", namespace \(ns)" }
                    if let code = r.terminationCode { what += ", code \(code)" }
                    tooltip.append(what)
                    if let explanation = r.explanation { tooltip.append(explanation) }
                }
            case .taskBegan, .taskEnded:
                var what = "task \(e.task.map(String.init) ?? "?")"
                if let name = e.taskName { what += " \"\(name)\"" }
                tooltip.append(what)
            default:
                // A callback's name is in its cause (`performFetch returned`).
                if let mode = e.mode { tooltip.append("mode \(mode.rawValue)") }
            }
            tooltip.append(e.cause)
            marks.append(Mark(time: e.time, lane: lane, kind: kind, caption: caption, tooltip: tooltip))
        }
        return marks
    }
}

/// Termination reports by app and millisecond: the report a `report` event announced has
/// the same app and time (the log keeps milliseconds, and a parsed time may be a hair off).
struct ReportIndex {
    private var byKey: [String: TerminationReport] = [:]

    init(_ reports: [TerminationReport]) {
        for r in reports { byKey[Self.key(r.bundleIdentifier, r.time)] = r }
    }

    func report(for e: HostEvent) -> TerminationReport? {
        guard !byKey.isEmpty, let id = e.bundleIdentifier else { return nil }
        let ms = Self.milliseconds(e.time)
        for m in [ms, ms - 1, ms + 1] {
            if let r = byKey["\(id) \(m)"] { return r }
        }
        return nil
    }

    private static func key(_ id: BundleID, _ time: Date) -> String { "\(id) \(milliseconds(time))" }

    private static func milliseconds(_ time: Date) -> Int64 {
        let ms = (time.timeIntervalSince1970 * 1000).rounded()
        return ms.isFinite && abs(ms) < 9e15 ? Int64(ms) : 0
    }
}
