import Foundation
import Snapshots
import TestSupport
import Testing

/// `apphost snapshot -o` and `apphost switcher --sheet` against a daemon: the file named
/// is written whole, and nothing is ever deleted to make room for it.
@Suite("snapshot and switcher CLI", .tags(.process), .timeLimit(.minutes(2)),
       .enabled(if: cliBuilt, "apphost and ProbeApp not built: run `swift build` first (scripts/test.sh does)"))
struct SnapshotCLITests {
    @Test func anOutputFileIsWrittenWholeAndADirectoryIsNeverTouched() async throws {
        try await withCLISession("snapcli") { s in
            _ = try await s.startDaemon()
            let id = "com.cli.snap"
            let bundle = try makeProbeBundle(in: s.stateDir, id: id)
            try #require(await s.run("install", bundle).status == 0)
            let follow = try s.start(["events", "--follow", id])
            try #require(await s.run("launch", id, "--", "--on", "launch", "window:hello").status == 0)
            try #require(await s.run("background", id).status == 0)
            try #require(await follow.line(containing: "background → suspended") != nil, "events: \(follow.lines)")
            let first = await s.run("snapshot", id)
            try #require(first.status == 0, "snapshot: \(first.stderr)")
            let kept = first.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            let original = try Data(contentsOf: URL(fileURLWithPath: kept))

            // A directory is refused by name, with a file name to use instead; nothing in it is touched.
            let folder = s.stateDir + "/pictures"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try Data("keep me".utf8).write(to: URL(fileURLWithPath: folder + "/notes.txt"))
            for args in [["snapshot", id, "-o", folder], ["switcher", "--sheet", folder + "/"]] {
                let r = await apphost(s.withStateDir(args))
                let shown = "\(args.joined(separator: " ")): exit \(r.status), stderr:\n\(r.stderr)"
                #expect(r.status == 64, "\(shown)")
                #expect(r.stderr.contains("cannot write \(args[args.count - 1]): it is a directory; name a file in it, e.g. \(folder)/"), "\(shown)")
                #expect(!r.stderr.contains("Domain="), "plain words, not an NSError: \(shown)")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["notes.txt"])
            #expect(try String(contentsOfFile: folder + "/notes.txt", encoding: .utf8) == "keep me")

            // The kept snapshot itself: read first, then replaced by the same bytes.
            let onto = await s.run("snapshot", id, "-o", kept)
            #expect(onto.status == 0, "snapshot -o KEPT: \(onto.stderr)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: kept)) == original)
            #expect(await s.run("snapshot", id).stdout.contains(kept))

            // A missing folder, in plain words.
            let missing = await s.run("snapshot", id, "-o", s.stateDir + "/nope/x.png")
            #expect(missing.status == 64, "\(missing.stderr)")
            #expect(missing.stderr.contains("cannot write \(s.stateDir)/nope/x.png: its folder \(s.stateDir)/nope: No such file or directory"),
                    "\(missing.stderr)")

            // Files are written, with no temporary file left beside them.
            #expect(await s.run("snapshot", id, "-o", folder + "/probe.png").status == 0)
            #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/probe.png")) == original)
            let sheet = await s.run("switcher", "--sheet", folder + "/sheet.png")
            #expect(sheet.status == 0, "switcher --sheet: \(sheet.stderr)")
            #expect(sheet.stdout.contains("contact sheet: \(folder)/sheet.png"), "\(sheet.stdout)")
            _ = try PNGCodec.decode(try Data(contentsOf: URL(fileURLWithPath: folder + "/sheet.png")))
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder).sorted() == ["notes.txt", "probe.png", "sheet.png"])
        }
    }
}

extension SnapshotCLITests {
    /// Issue 33: `apphost snapshot` of an app in front is a screenshot (written where the
    /// user asks, reason "screenshot"); `switcher` shows only the picture taken on the way
    /// home, in the one file the app keeps.
    @Test func aSnapshotOfAnAppInFrontIsAScreenshotAndTheSwitcherKeepsItsOwn() async throws {
        try await withCLISession("snapshot") { s in
            _ = try await s.startDaemon()
            let id = "com.cli.shot"
            let bundle = try makeProbeBundle(in: s.stateDir, id: id)
            try #require(await s.run("install", bundle).status == 0)
            let follow = try s.start(["events", "--follow", id])
            try #require(await s.run("launch", id, "--", "--on", "launch", "window:hello", "--on", "background", "window:Covered").status == 0)
            try #require(await follow.line(containing: "→ active") != nil, "events: \(follow.lines)")

            let file = s.stateDir + "/shot.png"
            let shot = await s.run("snapshot", id, "--json", "-o", file)
            try #require(shot.status == 0, "snapshot: \(shot.stderr)")
            let answer = try #require(try JSONSerialization.jsonObject(with: Data(shot.stdout.utf8)) as? [String: Any])
            let picture = try #require(answer["snapshot"] as? [String: Any])
            #expect(picture["reason"] as? String == "screenshot" && picture["number"] as? Int == 0, "\(shot.stdout)")
            #expect((picture["png"] as? String)?.hasPrefix(s.stateDir + "/screenshots/") == true, "\(shot.stdout)")
            #expect(picture["textLayer"] == nil)
            _ = try PNGCodec.decode(try Data(contentsOf: URL(fileURLWithPath: file)))
            let before = await s.run("switcher")
            #expect(before.stdout.contains("\(id)") && before.stdout.contains("no snapshot yet"), "\(before.stdout)")
            #expect(!FileManager.default.fileExists(atPath: s.stateDir + "/snapshots/" + id))

            try #require(await s.run("background", id).status == 0)
            try #require(await follow.line(containing: "background → suspended") != nil, "events: \(follow.lines)")
            let after = await s.run("switcher", "--json")
            try #require(after.status == 0, "switcher: \(after.stderr)")
            let listed = try #require(try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [String: Any])
            let entry = try #require((listed["apps"] as? [[String: Any]])?.first?["snapshot"] as? [String: Any], "\(after.stdout)")
            #expect(entry["reason"] as? String == "didEnterBackground" && entry["number"] as? Int == 1, "\(after.stdout)")
            #expect(entry["png"] as? String == s.stateDir + "/snapshots/\(id)/switcher.png", "\(after.stdout)")
            let layer = try String(contentsOfFile: try #require(entry["textLayer"] as? String), encoding: .utf8)
            #expect(layer.contains("Covered") && !layer.contains("hello"), "\(layer)")
        }
    }
}
