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
            #expect(taken.info.png == host.dir.path + "/snapshots/\(id)/1.png")
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
            // A snapshot on request of a running app is taken now.
            try await host.supervisor.foreground(bank)
            try await host.waitUntil(bank, is: .active)
            let now = try await host.supervisor.snapshot(bank)
            #expect(now.reason == "requested" && now.number == 2)
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
    /// On disk an app keeps its last `snapshotsKept` pictures: what an earlier host left
    /// goes at the first prune, then each picture that falls out of the window.
    @Test func theLastTenPicturesAreKeptOnDisk() async throws {
        try await withHost(label: "snap") { host in
            let bank = try await install(host, "Bank")
            let dir = host.dir.path + "/snapshots/" + bank.rawValue
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            for leftover in ["0.png", "0.json", "-3.png"] {
                FileManager.default.createFile(atPath: dir + "/" + leftover, contents: Data([1]))
            }
            _ = try await host.supervisor.launch(bank, background: false, arguments: [])
            try await host.waitUntil(bank, is: .active)
            var numbers: [Int] = []
            for _ in 0..<(SnapshotKeeper.snapshotsKept + 3) {
                numbers.append(try await host.supervisor.snapshot(bank).number)
            }
            await host.supervisor.waitForSnapshots()
            let kept = Array(numbers.suffix(SnapshotKeeper.snapshotsKept))
            let names = Set(try FileManager.default.contentsOfDirectory(atPath: dir)).subtracting([Supervisor.spareTextLayer])
            #expect(names == Set(kept.flatMap { ["\($0).png", "\($0).json"] }), "\(names.sorted())")
        }
    }

    /// A pruned text layer's file is used again for the next snapshot's (renamed in, written
    /// over), not unlinked while a new one is made: no inode is allocated per trip home.
    @Test func aPrunedTextLayerIsTheNextOnesFile() async throws {
        try await withHost(label: "snap") { host in
            let bank = try await install(host, "Bank")
            let dir = host.dir.path + "/snapshots/" + bank.rawValue
            _ = try await host.supervisor.launch(bank, background: false, arguments: [])
            try await host.waitUntil(bank, is: .active)
            let first = try await host.supervisor.snapshot(bank).number
            // Held open: unlinked, its inode could not be handed to a new file while we hold it.
            let held = open(dir + "/\(first).json", O_RDONLY | O_CLOEXEC)
            #expect(held >= 0)
            defer { close(held) }
            var heldStat = stat()
            #expect(fstat(held, &heldStat) == 0)
            var last = first
            for _ in 0..<(SnapshotKeeper.snapshotsKept + 1) {
                last = try await host.supervisor.snapshot(bank).number
            }
            await host.supervisor.waitForSnapshots()
            #expect(!FileManager.default.fileExists(atPath: dir + "/\(first).json"), "snapshot \(first) was pruned")
            var lastStat = stat()
            #expect(stat(dir + "/\(last).json", &lastStat) == 0)
            #expect(lastStat.st_ino == heldStat.st_ino, "snapshot \(last)'s text layer is snapshot \(first)'s file, written over")
            // And it reads as the new one, whole.
            let layer = try WireJSON.decoder().decode(SnapshotTextLayerFile.self, from: Data(contentsOf: URL(fileURLWithPath: dir + "/\(last).json")))
            #expect(layer.number == last)
        }
    }
}
