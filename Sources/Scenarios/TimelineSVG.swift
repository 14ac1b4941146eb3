import AppHostProtocol
import Foundation

extension AppState {
    /// The band colour of the state (also what the browser test looks for).
    var colour: String {
        switch self {
        case .notRunning: "#e6e6e6"
        case .inactive: "#f2c94c"
        case .active: "#27ae60"
        case .background: "#2f80ed"
        case .suspended: "#b39ddb"
        }
    }
}

/// One state band: an app in `state` from `from` to `to`.
struct Band {
    var lane: Int
    var state: AppState
    var from: Date
    var to: Date
    var cause: String
}

/// A background task held from `from` to `to` (or to the end of the picture).
struct TaskSpan {
    var lane: Int
    var from: Date
    var to: Date
    var tooltip: String
}

/// The picture: layout, then one pass writing SVG.
struct TimelineDrawing {
    // Layout (SVG user units).
    static let width = 1200.0
    static let plotLeft = 230.0
    static let plotRight = 1160.0
    static let laneHeight = 72.0
    static let rowY: [Double] = [10, 24, 62]
    static let bandTop = 33.0
    static let bandHeight = 18.0

    let input: TimelineInput
    let lanes: [TimelineLane]
    let events: [HostEvent]
    let start: Date
    let span: Double
    var bands: [Band] = []
    var marks: [Mark] = []
    var spans: [TaskSpan] = []
    var notes: [String] = []

    init(_ input: TimelineInput) {
        self.input = input
        lanes = Array(input.lanes.prefix(Timeline.maximumLanes))
        var laneOf: [BundleID: Int] = [:]
        for (i, lane) in lanes.enumerated() where laneOf[lane.bundleIdentifier] == nil { laneOf[lane.bundleIdentifier] = i }
        // By time, then by sequence number; the sort is stable for equal pairs.
        let drawn = input.events.enumerated()
            .filter { $0.element.bundleIdentifier.map { laneOf[$0] != nil } ?? false }
            .sorted { a, b in
                if a.element.time != b.element.time { return a.element.time < b.element.time }
                if a.element.seq != b.element.seq { return a.element.seq < b.element.seq }
                return a.offset < b.offset
            }
            .map(\.element)
        events = drawn
        // The axis spans every event given (a scenario's starts at its host's start), and the markers.
        let times = input.events.map(\.time) + input.markers.map(\.time)
        let first = times.min() ?? Date(timeIntervalSince1970: 0)
        let last = times.max() ?? first
        start = first
        let s = last.timeIntervalSince(first)
        span = s.isFinite && s > 0 ? s : 1

        notes = input.notes
        if input.lanes.count > lanes.count {
            notes.append("\(input.lanes.count - lanes.count) more apps not drawn (at most \(Timeline.maximumLanes) lanes)")
        }
        if input.markers.count > 100 { notes.append("\(input.markers.count - 100) more markers not drawn (at most 100)") }
        if lanes.isEmpty { notes.append("no apps: the log names none") } else if drawn.isEmpty { notes.append("no events of these apps") }
        layOut(laneOf)
    }

    /// Bands from transitions, marks from the rest, spans from begun and ended tasks; the
    /// latest ``Timeline/maximumMarks`` of each are kept.
    private mutating func layOut(_ laneOf: [BundleID: Int]) {
        var current: [Int: (state: AppState, since: Date, cause: String)] = [:]
        var open: [Int: [BackgroundTaskID: (Date, String)]] = [:]
        let end = start.addingTimeInterval(span)
        for e in events {
            guard let lane = e.bundleIdentifier.flatMap({ laneOf[$0] }) else { continue }
            if e.kind == .transition, let to = e.to {
                let before = current[lane] ?? (e.from ?? .notRunning, start, "state before the first transition in the log")
                bands.append(Band(lane: lane, state: before.state, from: before.since, to: e.time, cause: before.cause))
                current[lane] = (to, e.time, e.cause)
                if to == .notRunning {
                    // The process is gone, and its tasks with it.
                    for (_, (from, what)) in (open[lane] ?? [:]).sorted(by: { $0.key < $1.key }) {
                        spans.append(TaskSpan(lane: lane, from: from, to: e.time,
                                              tooltip: "\(what) held \(TimeText.offset(e.time.timeIntervalSince(from))), until the app ended"))
                    }
                    open[lane] = nil
                }
            }
            if e.kind == .backgroundTask, let task = e.task {
                let name = e.taskName.map { " \"\($0)\"" } ?? ""
                if e.began == true {
                    open[lane, default: [:]][task] = (e.time, "task \(task)\(name)")
                } else if let (from, what) = open[lane]?.removeValue(forKey: task) {
                    spans.append(TaskSpan(lane: lane, from: from, to: e.time,
                                          tooltip: "\(what) held \(TimeText.offset(e.time.timeIntervalSince(from)))"))
                }
            }
        }
        for lane in current.keys.sorted() {
            guard let c = current[lane] else { continue }
            bands.append(Band(lane: lane, state: c.state, from: c.since, to: end, cause: c.cause))
        }
        for lane in open.keys.sorted() {
            for (_, (from, what)) in (open[lane] ?? [:]).sorted(by: { $0.key < $1.key }) {
                spans.append(TaskSpan(lane: lane, from: from, to: end, tooltip: "\(what) still held at the end of the log"))
            }
        }
        marks = Timeline.marks(events, laneOf: laneOf, reports: input.reports, start: start)

        let limit = Timeline.maximumMarks
        if bands.count > limit {
            notes.append("\(bands.count - limit) earlier state bands not drawn (at most \(limit))")
            bands.sort { $0.to < $1.to }
            bands.removeFirst(bands.count - limit)
        }
        if marks.count + spans.count > limit {
            let over = marks.count + spans.count - limit
            notes.append("\(over) earlier marks not drawn (at most \(limit))")
            let fromSpans = min(over, spans.count)
            spans.sort { $0.to < $1.to }
            spans.removeFirst(fromSpans)
            marks.removeFirst(over - fromSpans)
        }
    }

    func x(_ t: Date) -> Double {
        Self.plotLeft + t.timeIntervalSince(start) / span * (Self.plotRight - Self.plotLeft)
    }

    // MARK: - Writing

    func svg() -> String {
        var body = ""
        var y = 22.0
        body += "<text x=\"10\" y=\"\(Num.f(y))\" font-size=\"16\" font-weight=\"bold\">\(Escape.line(input.title))</text>\n"
        y += 18
        body += "<text x=\"10\" y=\"\(Num.f(y))\" fill=\"#555\">time 0 = \(Timestamp.format(start)); \(lanes.count) app\(lanes.count == 1 ? "" : "s"), \(events.count) event\(events.count == 1 ? "" : "s")</text>\n"
        for note in notes.prefix(12) {
            y += 15
            body += "<text x=\"10\" y=\"\(Num.f(y))\" fill=\"#a04000\">\(Escape.line(note))</text>\n"
        }
        y += 20
        body += legend(&y)
        let lanesTop = y + 8
        let axisY = lanesTop + Double(lanes.count) * Self.laneHeight + 6
        body += grid(top: lanesTop, bottom: axisY)
        for (i, lane) in lanes.enumerated() {
            let top = lanesTop + Double(i) * Self.laneHeight
            body += "<g class=\"lane\"><text x=\"10\" y=\"\(Num.f(top + Self.bandTop + 13))\" font-size=\"12\">"
                + "<title>\(Escape.line(lane.bundleIdentifier.rawValue))</title>\(Escape.line(lane.label, limit: 32))</text>\n"
            body += "<line x1=\"0\" y1=\"\(Num.f(top + Self.laneHeight))\" x2=\"\(Num.f(Self.width))\" y2=\"\(Num.f(top + Self.laneHeight))\" stroke=\"#dddddd\"/></g>\n"
        }
        for band in bands {
            let top = lanesTop + Double(band.lane) * Self.laneHeight + Self.bandTop
            let x0 = x(band.from), x1 = x(band.to)
            body += "<rect x=\"\(Num.f(x0))\" y=\"\(Num.f(top))\" width=\"\(Num.f(max(x1 - x0, 0.3)))\" height=\"\(Num.f(Self.bandHeight))\" fill=\"\(band.state.colour)\">"
                + "<title>\(band.state.rawValue): \(Escape.timeLine(band.from, start: start)) for \(TimeText.offset(band.to.timeIntervalSince(band.from)))\n\(Escape.text(band.cause))</title></rect>\n"
        }
        for s in spans {
            let yy = lanesTop + Double(s.lane) * Self.laneHeight + Self.rowY[1] + 5
            let x0 = x(s.from), x1 = x(s.to)
            body += "<rect x=\"\(Num.f(x0))\" y=\"\(Num.f(yy))\" width=\"\(Num.f(max(x1 - x0, 0.5)))\" height=\"2.5\" fill=\"\(MarkKind.taskBegan.colour)\" fill-opacity=\"0.45\">"
                + "<title>\(Escape.text(s.tooltip))</title></rect>\n"
        }
        for m in marks {
            let yy = lanesTop + Double(m.lane) * Self.laneHeight + Self.rowY[m.kind.row]
            let tip = m.tooltip.map { Escape.text($0) }.joined(separator: "\n")
            body += Self.shape(m.kind, x: x(m.time), y: yy, title: tip)
            if let caption = m.caption {
                body += "<text x=\"\(Num.f(x(m.time) + 7))\" y=\"\(Num.f(yy + 4))\" font-size=\"10\" fill=\"\(m.kind.colour)\">\(Escape.line(caption, limit: 40))</text>\n"
            }
        }
        var bottom = axisY + 34
        body += axis(axisY)
        body += markers(top: lanesTop, axisY: axisY, bottom: &bottom)
        let height = bottom + 10
        let h = Num.f(height)
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Num.f(Self.width))\" height=\"\(h)\" viewBox=\"0 0 \(Num.f(Self.width)) \(h)\" "
            + "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"11\" role=\"img\">\n"
            + "<title>\(Escape.line(input.title))</title>\n"
            + "<rect x=\"0\" y=\"0\" width=\"\(Num.f(Self.width))\" height=\"\(h)\" fill=\"#ffffff\"/>\n"
            + body + "</svg>"
    }

    /// The state colours, then the kinds of mark this picture has, wrapped to the width.
    private func legend(_ y: inout Double) -> String {
        var out = "<g class=\"legend\">\n"
        var x = 10.0
        for state in AppState.allCases {
            out += "<rect x=\"\(Num.f(x))\" y=\"\(Num.f(y - 9))\" width=\"14\" height=\"10\" fill=\"\(state.colour)\" stroke=\"#999999\" stroke-width=\"0.5\"/>"
                + "<text x=\"\(Num.f(x + 18))\" y=\"\(Num.f(y))\">\(state.rawValue)</text>\n"
            x += 110
        }
        let kinds = Set(marks.map(\.kind)).sorted()
        x = 10
        if !kinds.isEmpty { y += 18 }
        for kind in kinds {
            let w = 26 + Double(kind.name.count) * 6.2
            if x + w > Self.width - 10 {
                x = 10
                y += 18
            }
            out += Self.shape(kind, x: x + 6, y: y - 4, title: kind.name)
            out += "<text x=\"\(Num.f(x + 16))\" y=\"\(Num.f(y))\">\(kind.name)</text>\n"
            x += w
        }
        return out + "</g>\n"
    }

    private func grid(top: Double, bottom: Double) -> String {
        var out = "<g class=\"grid\" stroke=\"#eeeeee\">\n"
        for t in TimeAxis.ticks(span: span) {
            let xx = Num.f(Self.plotLeft + t / span * (Self.plotRight - Self.plotLeft))
            out += "<line x1=\"\(xx)\" y1=\"\(Num.f(top))\" x2=\"\(xx)\" y2=\"\(Num.f(bottom))\"/>\n"
        }
        return out + "</g>\n"
    }

    private func axis(_ y: Double) -> String {
        var out = "<g class=\"axis\">\n<line x1=\"\(Num.f(Self.plotLeft))\" y1=\"\(Num.f(y))\" x2=\"\(Num.f(Self.plotRight))\" y2=\"\(Num.f(y))\" stroke=\"#333333\"/>\n"
        for t in TimeAxis.ticks(span: span) {
            let xx = Self.plotLeft + t / span * (Self.plotRight - Self.plotLeft)
            out += "<line x1=\"\(Num.f(xx))\" y1=\"\(Num.f(y))\" x2=\"\(Num.f(xx))\" y2=\"\(Num.f(y + 5))\" stroke=\"#333333\"/>"
                + "<text x=\"\(Num.f(xx))\" y=\"\(Num.f(y + 17))\" text-anchor=\"middle\">\(TimeText.offset(t))</text>\n"
        }
        out += "<text x=\"10\" y=\"\(Num.f(y + 17))\" fill=\"#555555\">time since \(Timestamp.format(start))</text>\n"
        return out + "</g>\n"
    }

    /// A line across the lanes for each marker, its label under the axis (three rows, so
    /// that near ones do not overprint).
    private func markers(top: Double, axisY: Double, bottom: inout Double) -> String {
        var out = ""
        for (i, m) in input.markers.prefix(100).enumerated() {
            let xx = x(m.time)
            let colour = m.isFailure ? "#d50000" : "#757575"
            let labelY = axisY + 34 + Double(i % 3) * 14
            bottom = max(bottom, labelY + 4)
            let anchor = xx > Self.plotRight - 250 ? "end" : "start"
            let text = (m.isFailure ? "✗ " : "") + Escape.line(m.label, limit: 120)
            out += "<g class=\"\(m.isFailure ? "failure" : "marker")\"><title>\(Escape.timeLine(m.time, start: start))\n\(Escape.text(m.label))</title>"
                + "<line x1=\"\(Num.f(xx))\" y1=\"\(Num.f(top - 4))\" x2=\"\(Num.f(xx))\" y2=\"\(Num.f(labelY - 10))\" stroke=\"\(colour)\" stroke-width=\"2\"\(m.isFailure ? "" : " stroke-dasharray=\"4 3\"")/>"
                + "<path d=\"M\(Num.f(xx - 5)) \(Num.f(axisY)) L\(Num.f(xx + 5)) \(Num.f(axisY)) L\(Num.f(xx)) \(Num.f(axisY - 8)) Z\" fill=\"\(colour)\"/>"
                + "<text x=\"\(Num.f(xx + (anchor == "end" ? -4 : 4)))\" y=\"\(Num.f(labelY))\" text-anchor=\"\(anchor)\" fill=\"\(colour)\" font-weight=\"bold\">\(text)</text></g>\n"
        }
        return out
    }

    /// The mark of `kind` centred on (x, y), its tooltip `title` (already escaped).
    static func shape(_ kind: MarkKind, x: Double, y: Double, title: String) -> String {
        let c = kind.colour
        func p(_ dx: Double, _ dy: Double) -> String { "\(Num.f(x + dx)) \(Num.f(y + dy))" }
        let t = "<title>\(title)</title>"
        switch kind {
        case .stop:
            return "<path d=\"M\(p(-5, -4)) L\(p(5, -4)) L\(p(0, 5)) Z\" fill=\"\(c)\">\(t)</path>\n"
        case .cont, .warning:
            return "<path d=\"M\(p(-5, 4)) L\(p(5, 4)) L\(p(0, -5)) Z\" fill=\"\(c)\">\(t)</path>\n"
        case .kill, .modeRefused:
            let r = kind == .kill ? 5.0 : 3.5
            return "<path d=\"M\(p(-r, -r)) L\(p(r, r)) M\(p(-r, r)) L\(p(r, -r))\" stroke=\"\(c)\" stroke-width=\"\(kind == .kill ? "2.5" : "1.8")\" fill=\"none\">\(t)</path>\n"
        case .spawned:
            return "<circle cx=\"\(Num.f(x))\" cy=\"\(Num.f(y))\" r=\"4\" fill=\"#ffffff\" stroke=\"\(c)\" stroke-width=\"1.5\">\(t)</circle>\n"
        case .exited:
            return "<rect x=\"\(Num.f(x - 4))\" y=\"\(Num.f(y - 4))\" width=\"8\" height=\"8\" fill=\"#ffffff\" stroke=\"\(c)\" stroke-width=\"1.5\">\(t)</rect>\n"
        case .report:
            return "<path d=\"M\(p(0, -6)) L\(p(6, 0)) L\(p(0, 6)) L\(p(-6, 0)) Z\" fill=\"\(c)\">\(t)</path>\n"
        case .callback, .modeUsed, .service:
            let r = kind == .callback ? 3.5 : kind == .modeUsed ? 3 : 2.5
            return "<circle cx=\"\(Num.f(x))\" cy=\"\(Num.f(y))\" r=\"\(Num.f(r))\" fill=\"\(c)\">\(t)</circle>\n"
        case .deadline:
            return "<path d=\"M\(p(-5, -5)) L\(p(5, -5)) L\(p(-5, 5)) L\(p(5, 5)) Z\" fill=\"\(c)\">\(t)</path>\n"
        case .taskBegan:
            return "<path d=\"M\(p(3, -6)) L\(p(0, -6)) L\(p(0, 6)) L\(p(3, 6))\" stroke=\"\(c)\" stroke-width=\"2\" fill=\"none\">\(t)</path>\n"
        case .taskEnded:
            return "<path d=\"M\(p(-3, -6)) L\(p(0, -6)) L\(p(0, 6)) L\(p(-3, 6))\" stroke=\"\(c)\" stroke-width=\"2\" fill=\"none\">\(t)</path>\n"
        case .push:
            return "<rect x=\"\(Num.f(x - 4))\" y=\"\(Num.f(y - 4))\" width=\"8\" height=\"8\" fill=\"\(c)\">\(t)</rect>\n"
        case .fetch:
            return "<path d=\"M\(p(-4, -5)) L\(p(5, 0)) L\(p(-4, 5)) Z\" fill=\"\(c)\">\(t)</path>\n"
        case .snapshot:
            return "<rect x=\"\(Num.f(x - 3))\" y=\"\(Num.f(y - 3))\" width=\"6\" height=\"6\" fill=\"none\" stroke=\"\(c)\">\(t)</rect>\n"
        }
    }
}
