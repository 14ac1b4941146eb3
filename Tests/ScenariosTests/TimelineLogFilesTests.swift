import AppHostProtocol
import Foundation
@testable import Scenarios
import TestSupport
import Testing

@Suite("TimelineLogFiles")
struct TimelineLogFilesTests {
    static func writeLog(_ events: [HostEvent], to path: String, extra: String = "") throws {
        var bytes: [UInt8] = []
        for e in events { bytes += e.jsonBytes() + [0x0a] }
        bytes += Array(extra.utf8)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    @Test func readsRotatedFilesFirstSkipsWhatIsNotAnEventAndFilters() throws {
        let dir = try TempDir("log")
        defer { dir.remove() }
        let events = EventScript.twoApps.events
        try Self.writeLog(Array(events[0..<5]), to: dir.path + "/events.2.jsonl")
        try Self.writeLog(Array(events[5..<10]), to: dir.path + "/events.1.jsonl", extra: "not json\n")
        try Self.writeLog(Array(events[10...]), to: dir.path + "/events.jsonl", extra: "{\"cut\":")
        let all = try TimelineLogFiles.read(stateDirectory: dir.path)
        #expect(all.events == events)
        #expect(all.skippedLines == 1)
        #expect(all.bundleIdentifiers == ["com.example.mail", "com.example.news"])
        #expect(all.files.map { ($0 as NSString).lastPathComponent } == ["events.2.jsonl", "events.1.jsonl", "events.jsonl"])

        let news = try TimelineLogFiles.read(stateDirectory: dir.path, apps: ["com.example.news"], keepLast: 3)
        #expect(news.events == Array(events.filter { $0.bundleIdentifier == "com.example.news" }.suffix(3)))
        #expect(news.dropped == events.filter { $0.bundleIdentifier == "com.example.news" }.count - 3)
        #expect(news.bundleIdentifiers == ["com.example.mail", "com.example.news"])
    }

    @Test func aDirectoryWithoutALogIsRefusedWithWhatToDo() throws {
        let dir = try TempDir("log")
        defer { dir.remove() }
        #expect {
            try TimelineLogFiles.read(stateDirectory: dir.path)
        } throws: { error in
            "\(error)".contains("no event log in \(dir.path)") && "\(error)".contains("--state-dir")
        }
    }

    @Test func reportsGiveKillsTheirCodes() throws {
        let dir = try TempDir("log")
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.path + "/reports", withIntermediateDirectories: true)
        let report = EventScript.newsReport
        try WireJSON.encoder(pretty: true).encode(report).write(to: URL(fileURLWithPath: dir.path + "/reports/\(report.id).json"))
        #expect(FileManager.default.createFile(atPath: dir.path + "/reports/com.example.news-1-2.json", contents: Data("garbage".utf8)))
        let reports = TimelineLogFiles.reports(stateDirectory: dir.path, apps: ["com.example.news"])
        #expect(reports == [report])
        #expect(TimelineLogFiles.reports(stateDirectory: dir.path, apps: ["com.example.mail"]).isEmpty)
        // Written and read back through the log's millisecond timestamps, it still matches.
        try TimelineLogFilesTests.writeLog(EventScript.twoApps.events, to: dir.path + "/events.jsonl")
        let log = try TimelineLogFiles.read(stateDirectory: dir.path)
        #expect(Timeline.svg(TimelineInput(title: "t", events: log.events, reports: reports)).contains(">0x8badf00d</text>"))
    }
}
