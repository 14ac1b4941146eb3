import AppHostProtocol
import Foundation
import Snapshots
import TestSupport
import Testing
@testable import Host

let bankBuilt = productBuilt("BankApp")

/// Snapshots taken by the host of the real BankApp samples (manifests/Bank*.app):
/// policies, the files kept, the switcher.
@Suite("App-switcher snapshots", .tags(.process), .timeLimit(.minutes(2)),
       .enabled(if: bankBuilt, "BankApp not built: run `swift build` first (scripts/test.sh does)"))
struct SnapshotHostTests {
    let balance = "$12,345.67"
    let password = "hunter2-Bank!"

    func install(_ host: TestHost, _ bundle: String) async throws -> BundleID {
        try await host.supervisor.install(path: packageRoot + "/manifests/\(bundle).app", settings: [:]).bundleIdentifier
    }

    /// Launch in front, then the home button: the snapshot taken after didEnterBackground.
    func leaveForeground(_ host: TestHost, _ id: BundleID) async throws -> TakenSnapshot? {
        _ = try await host.supervisor.launch(id, background: false, arguments: [])
        try await host.waitUntil(id, is: .active)
        try await host.supervisor.background(id)
        try await host.waitUntil(id, is: .suspended)
        await host.supervisor.waitForSnapshots()
        return await host.supervisor.takenSnapshots(id).last
    }

    /// An app already running (suspended) to the front and home again: its new snapshot.
    func homeAgain(_ host: TestHost, _ id: BundleID) async throws -> TakenSnapshot? {
        try await host.supervisor.foreground(id)
        try await host.waitUntil(id, is: .active)
        try await host.supervisor.background(id)
        try await host.waitUntil(id, is: .suspended)
        await host.supervisor.waitForSnapshots()
        return await host.supervisor.takenSnapshots(id).last
    }

    func texts(_ info: SnapshotInfo) throws -> [String] {
        let data = try Data(contentsOf: URL(fileURLWithPath: try #require(info.textLayer)))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return try #require(object["texts"] as? [[String: Any]]).compactMap { $0["text"] as? String }
    }

    @Test func redactBlanksTheBalanceAndThePasswordAndKeepsAPNGAndATextLayer() async throws {
        try await withHost(label: "snap") { host in
            let id = try await install(host, "Bank")
            let taken = try #require(try await leaveForeground(host, id))
            #expect(taken.info.reason == "didEnterBackground")
            #expect(taken.info.policy == .redact)
            #expect(taken.info.png == host.dir.path + "/snapshots/\(id)/switcher.png")
            let image = try PNGCodec.decode(try Data(contentsOf: URL(fileURLWithPath: try #require(taken.info.png))))
            #expect(image.width == 1170 && image.height == 2532)
            let shown = try texts(taken.info)
            #expect(shown.contains("Example Bank"))
            #expect(!shown.contains(balance), "\(shown)")
            #expect(!shown.joined().contains(password))
            #expect(PrivacyInspector.inspect(tree: taken.tree, snapshot: try #require(taken.rendered), screen: .default).isEmpty)
            let event = await host.waitForEvent(id) { $0.kind == .snapshot }
            #expect(event?.cause.contains("policy redact") == true)
        }
    }

    @Test func theLeakyVariantShowsItsBalanceAndTheInspectorNamesIt() async throws {
        try await withHost(label: "snap") { host in
            let id = try await install(host, "BankLeaky")
            let taken = try #require(try await leaveForeground(host, id))
            #expect(taken.info.policy == .default)
            #expect(try texts(taken.info).contains(balance))
            let leaks = PrivacyInspector.inspect(tree: taken.tree, snapshot: try #require(taken.rendered), screen: .default)
            #expect(leaks.contains { $0.kind == .text && ($0.view + $0.detail).contains(balance) }, "\(leaks)")
            #expect(leaks.contains { $0.kind == .pixels }, "\(leaks)")
        }
    }

    @Test func theCoverVariantIsCoveredUnderDefault() async throws {
        try await withHost(label: "snap") { host in
            let id = try await install(host, "BankCover")
            let taken = try #require(try await leaveForeground(host, id))
            #expect(taken.info.policy == .default)
            #expect(!(try texts(taken.info)).contains(balance))
            // The cover carries the bank's logo, so its frames are not one colour: the inspector
            // needs the bundle's images to draw them again without the sensitive content.
            let rendered = try #require(taken.rendered)
            let bundle = packageRoot + "/manifests/BankCover.app"
            let leaks = PrivacyInspector.inspect(tree: taken.tree, snapshot: rendered, screen: .default, bundlePath: bundle)
            #expect(leaks.isEmpty, "\(leaks)")
        }
    }

    @Test func aStricterHostPolicyWins() async throws {
        try await withHost(label: "snap", configure: { $0.snapshotPolicy = .redact }) { redacting in
            let leaky = try await install(redacting, "BankLeaky")
            let redacted = try #require(try await leaveForeground(redacting, leaky))
            #expect(redacted.info.policy == .redact)
            #expect(PrivacyInspector.inspect(tree: redacted.tree, snapshot: try #require(redacted.rendered), screen: .default).isEmpty)
        }

        try await withHost(label: "snap", configure: { $0.snapshotPolicy = .none }) { none in
            let bank = try await install(none, "Bank")
            let nothing = try #require(try await leaveForeground(none, bank))
            #expect(nothing.info.policy == .none && nothing.info.png == nil && nothing.rendered == nil)
            #expect(!FileManager.default.fileExists(atPath: none.dir.path + "/snapshots/\(bank)"))
        }
    }

    @Test func theSwitcherListsAppsMostRecentFirstAndATerminateRemovesOne() async throws {
        try await withHost(label: "snap") { host in
            let bank = try await install(host, "Bank")
            let cover = try await install(host, "BankCover")
            _ = try await leaveForeground(host, bank)
            _ = try await leaveForeground(host, cover)
            var entries = await host.supervisor.switcher()
            #expect(entries.map(\.bundleIdentifier) == [cover, bank])
            #expect(entries.allSatisfy { $0.snapshot?.png != nil })
            // On request, an app in front is a screenshot: not numbered, not the switcher's.
            try await host.supervisor.foreground(bank)
            try await host.waitUntil(bank, is: .active)
            let now = try await host.supervisor.snapshot(bank)
            #expect(now.reason == Supervisor.screenshotReason && now.number == 0 && now.textLayer == nil)
            #expect(await host.supervisor.switcher().first { $0.bundleIdentifier == bank }?.snapshot?.number == 1)
            try await host.supervisor.terminate(bank)
            entries = await host.supervisor.switcher()
            #expect(entries.map(\.bundleIdentifier) == [cover])
        }
    }
}

extension SnapshotHostTests {
    /// `apphost background` then `apphost snapshot` at once: the answer is the picture
    /// taken on the way home, even while it is still being drawn (not "no snapshot yet",
    /// not an older one).
    @Test func aSnapshotAskedForRightAfterHomeIsTheOneTakenOnTheWay() async throws {
        try await withHost(label: "snap") { host in
            let bank = try await install(host, "Bank")
            _ = try await host.supervisor.launch(bank, background: false, arguments: [])
            try await host.waitUntil(bank, is: .active)
            try await host.supervisor.background(bank)
            try await host.waitUntil(bank, is: .suspended)
            let info = try await host.supervisor.snapshot(bank)
            #expect(info.number == 1 && info.reason == "didEnterBackground")
            #expect(await host.supervisor.switcher().first?.snapshot == info)
        }
    }

    @Test func aSuspendedAppIsNotDrawnAgainAndTheSwitcherOutlivesTheHostUntilATerminate() async throws {
        try await withStateDirectory("snap") { dir in
            let (bank, taken) = try await withHost(directory: dir) { first in
                let bank = try await install(first, "Bank")
                let taken = try #require(try await leaveForeground(first, bank))
                // Suspended: what the switcher shows is the picture taken when it left.
                #expect(try await first.supervisor.snapshot(bank) == taken.info)
                return (bank, taken)
            }

            try await withHost(reopening: dir) { again in
                #expect(await again.supervisor.switcher().map(\.bundleIdentifier) == [bank], "pictured by the earlier host")
                #expect(try await again.supervisor.snapshot(bank).png == taken.info.png)
                _ = try await again.supervisor.launch(bank, background: false, arguments: [])
                try await again.waitUntil(bank, is: .active)
                try await again.supervisor.terminate(bank)
                #expect(await again.supervisor.switcher().isEmpty, "a terminated app leaves, even with pictures on disk")
            }
        }
    }
}

/// `apphost privacy-check` on the three samples, as a user runs it.
@Suite("privacy-check CLI", .tags(.process), .timeLimit(.minutes(2)),
       .enabled(if: bankBuilt, "BankApp not built: run `swift build` first (scripts/test.sh does)"))
struct PrivacyCheckCLITests {
    @Test func theLeakyBankFailsByNameAndTheOthersPassWithJUnit() async throws {
        let dir = try TempDir("pcheck")
        defer { dir.remove() }
        let junit = dir.path + "/report.xml"
        let r = await apphost(["privacy-check", packageRoot + "/manifests/Bank.app", packageRoot + "/manifests/BankLeaky.app",
                               packageRoot + "/manifests/BankCover.app", "--junit", junit])
        #expect(r.status == 1, "stdout: \(r.stdout)\nstderr: \(r.stderr)")
        #expect(r.stdout.contains("PASS com.example.bank ("), "\(r.stdout)")
        #expect(r.stdout.contains("FAIL com.example.bank.leaky"), "\(r.stdout)")
        #expect(r.stdout.contains("PASS com.example.bank.cover"), "\(r.stdout)")
        #expect(r.stdout.contains("$12,345.67"), "the leak is named: \(r.stdout)")
        // Issue 33: the password field is drawn as bullets under default, and they are not its text.
        #expect(!r.stdout.contains("secureTextField"), "the password's bullets are not a leak: \(r.stdout)")
        #expect(r.stdout.contains("after background fetch"), "fetch-capable apps are checked after a fetch too: \(r.stdout)")
        let xml = try String(contentsOfFile: junit, encoding: .utf8)
        #expect(xml.contains(#"<testsuite name="com.example.bank.leaky""#))
        #expect(xml.contains("<failure"))
        #expect(xml.hasPrefix("<?xml") && xml.hasSuffix("</testsuites>\n"))

        let pass = await apphost(["privacy-check", packageRoot + "/manifests/Bank.app"])
        #expect(pass.status == 0, "\(pass.stdout)\n\(pass.stderr)")
        let missing = await apphost(["privacy-check", dir.path + "/Nope.app"])
        #expect(missing.status == 2 && missing.stdout.contains("ERROR"), "\(missing.stdout)\n\(missing.stderr)")
    }
}

extension SnapshotHostTests {
    /// Issue 33: `apphost snapshot` of an app in front is a screenshot. BankCover covers
    /// itself only when it resigns, so a picture of it active shows its balance: that
    /// picture is written under screenshots/ and the switcher keeps the covered one taken
    /// on the way home (iOS: a screenshot the user takes is not a switcher snapshot).
    @Test func aScreenshotOfAnActiveAppNeverBecomesItsSwitcherSnapshot() async throws {
        try await withHost(label: "snap") { host in
            let cover = try await install(host, "BankCover")
            let home = try #require(try await leaveForeground(host, cover))
            try await host.supervisor.foreground(cover)
            try await host.waitUntil(cover, is: .active)
            let events = await host.events(cover).count { $0.kind == .snapshot }
            let shot = try await host.supervisor.snapshot(cover)
            let png = try #require(shot.png)
            #expect(png.hasPrefix(host.dir.path + "/screenshots/"), "\(png)")
            #expect(shot.reason == "screenshot" && shot.number == 0 && shot.policy == .default)
            // Drawn uncovered, as the screen shows it: not the switcher's picture.
            let pixels = try Data(contentsOf: URL(fileURLWithPath: png))
            #expect(pixels != (try Data(contentsOf: URL(fileURLWithPath: try #require(home.info.png)))))
            await host.supervisor.waitForSnapshots()
            #expect(await host.supervisor.takenSnapshots(cover).map(\.info.number) == [1], "no snapshot taken")
            #expect(await host.events(cover).count { $0.kind == .snapshot } == events)
            let entry = try #require(await host.supervisor.switcher().first)
            #expect(entry.bundleIdentifier == cover && entry.snapshot == home.info)
            #expect(!(try texts(home.info)).contains(balance))
            // Home again: the one switcher snapshot is replaced, still covered.
            try await host.supervisor.background(cover)
            try await host.waitUntil(cover, is: .suspended)
            let again = try await host.supervisor.snapshot(cover)
            #expect(again.number == 2 && again.reason == "didEnterBackground" && again.png == home.info.png)
            #expect(!(try texts(again)).contains(balance))
            let names = try FileManager.default.contentsOfDirectory(atPath: host.dir.path + "/snapshots/" + cover.rawValue).sorted()
            #expect(names == ["switcher.json", "switcher.png"])
        }
    }

    /// An earlier version numbered every picture (`1.png` ... and a spare text layer), the
    /// ones taken on request of an app in front among them. The newest taken on the way
    /// home becomes the switcher snapshot; every numbered file goes; later trips home
    /// replace that one picture.
    @Test func numberedPicturesOfAnEarlierVersionLeaveOneSwitcherSnapshot() async throws {
        try await withHost(label: "snap") { host in
            let bank = try await install(host, "Bank")
            let dir = host.dir.path + "/snapshots/" + bank.rawValue
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            func leave(_ n: Int, _ reason: String) throws {
                let layer = SnapshotTextLayerFile(bundleIdentifier: bank, number: n, reason: reason, policy: .redact,
                                                  time: Date(timeIntervalSince1970: Double(n)), screen: .default, texts: [], warnings: [])
                try WireJSON.encoder(pretty: true).encode(layer).write(to: URL(fileURLWithPath: dir + "/\(n).json"))
                try Data([UInt8(n)]).write(to: URL(fileURLWithPath: dir + "/\(n).png"))
            }
            try leave(6, "didEnterBackground")
            try leave(7, "background fetch")
            try leave(8, "requested")
            for leftover in [".spare.json", "9.png.tmp", "-3.png"] {
                FileManager.default.createFile(atPath: dir + "/" + leftover, contents: Data([1]))
            }
            // Read before the app runs: the fetch's picture, not the one taken on request.
            let adopted = try await host.supervisor.snapshot(bank)
            #expect(adopted.number == 7 && adopted.reason == "background fetch" && adopted.png == dir + "/switcher.png")
            #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/switcher.png")) == Data([7]))
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["switcher.json", "switcher.png"])
            // Numbers go on after it; each trip home replaces the one picture.
            for expected in 8...10 {
                let taken = try #require(try await (expected == 8 ? leaveForeground(host, bank) : homeAgain(host, bank)))
                #expect(taken.info.number == expected && taken.info.png == dir + "/switcher.png")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["switcher.json", "switcher.png"])
            // An older snapshot's pixels are no longer on disk: it reads as none, not as the newer picture.
            let taken = await host.supervisor.takenSnapshots(bank)
            #expect(taken.map { $0.rendered != nil } == [false, false, true])
        }
    }

    /// The text layer is one file written over on every trip home: no inode per picture
    /// (decision 0041), and it always reads as the newest, whole.
    @Test func theTextLayerIsOneFileWrittenOver() async throws {
        try await withHost(label: "snap") { host in
            let bank = try await install(host, "Bank")
            let json = host.dir.path + "/snapshots/" + bank.rawValue + "/switcher.json"
            let first = try #require(try await leaveForeground(host, bank))
            var before = stat()
            #expect(stat(json, &before) == 0)
            var last = first
            for _ in 0..<3 { last = try #require(try await homeAgain(host, bank)) }
            var after = stat()
            #expect(stat(json, &after) == 0)
            #expect(after.st_ino == before.st_ino, "written over, not made again")
            let layer = try WireJSON.decoder().decode(SnapshotTextLayerFile.self, from: Data(contentsOf: URL(fileURLWithPath: json)))
            #expect(layer.number == last.info.number && layer.number == first.info.number + 3)
        }
    }
}
