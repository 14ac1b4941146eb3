import AppHostProtocol
import Foundation
import Snapshots
import TestSupport
import Testing
@testable import Host

/// When the host takes snapshots besides didEnterBackground (a fetch's or a silent
/// push's completion), the `launch-image` policy and `ignoreSnapshotOnNextApplicationLaunch`,
/// and the screen the app is told: probes (ProbeApp's `window:TEXT` shows a label) and
/// BankCover, on hosts of their own.
@Suite("App-switcher snapshot refreshes and launch images", .tags(.process), .timeLimit(.minutes(2)),
       .enabled(if: bankBuilt && probeBuilt, "sample apps not built: run `swift build` first (scripts/test.sh does)"))
struct SnapshotRefreshTests {
    /// Launches in front with `arguments`, sends it home; returns the didEnterBackground snapshot.
    func launchAndSendHome(_ host: TestHost, _ id: BundleID, _ arguments: [String]) async throws -> TakenSnapshot {
        _ = try await host.supervisor.launch(id, background: false, arguments: arguments)
        try await host.waitUntil(id, is: .active)
        let mark = await host.supervisor.snapshotMark()
        try await host.supervisor.background(id)
        try await host.waitUntil(id, is: .suspended)
        await host.supervisor.waitForSnapshots()
        return try #require(await host.supervisor.takenSnapshots(id, since: mark).last)
    }

    /// The strings of a snapshot's text layer file.
    func texts(_ info: SnapshotInfo) throws -> [String] {
        let data = try Data(contentsOf: URL(fileURLWithPath: try #require(info.textLayer)))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return try #require(object["texts"] as? [[String: Any]]).compactMap { $0["text"] as? String }
    }

    /// Waits for a `snapshot` event of `id` whose cause contains `reason`, after `mark`;
    /// returns the snapshots taken since `mark`.
    func snapshots(_ host: TestHost, _ id: BundleID, since mark: UInt64, reason: String) async -> [TakenSnapshot] {
        _ = await host.waitForEvent(id) { $0.kind == .snapshot && $0.cause.contains("(\(reason)") }
        await host.supervisor.waitForSnapshots()
        return await host.supervisor.takenSnapshots(id, since: mark)
    }

    // MARK: - Refreshes on completion

    /// iOS updates the snapshot when the app calls performFetch's completion handler, not
    /// when the method returns: an app that completes later is pictured then, once.
    /// On the virtual clock: the completion's host timer falls due only when the test moves
    /// time, so "not yet" is decided by the host, not by how fast the machine ran.
    @Test func aFetchIsPicturedWhenTheAppCompletesItNotWhenPerformFetchReturns() async throws {
        try await withHost(label: "snap", clock: .virtual) { host in
            let id = try await host.installProbe("com.snap.fetch", extra: ["UIBackgroundModes": ["fetch"]])
            let home = try await launchAndSendHome(host, id, [
                "--on", "launch", "window:launched", "--on", "fetch", "window:fetched", "--fetch-result", "after:2:newData",
            ])
            #expect(try texts(home.info) == ["launched"])
            let mark = await host.supervisor.snapshotMark()
            _ = try await host.supervisor.modeCommand(.fetchNow(bundleIdentifier: id))
            _ = await host.waitForEvent(id) { $0.callback == "performFetch" }
            await host.supervisor.waitForSnapshots()
            #expect(await host.supervisor.takenSnapshots(id, since: mark).isEmpty, "returned, but the fetch is still out: no picture yet")

            _ = try await host.supervisor.advanceClock(by: .seconds(2))
            let taken = await snapshots(host, id, since: mark, reason: "background fetch")
            #expect(taken.map(\.info.reason) == ["background fetch"])
            #expect(try texts(try #require(taken.first).info) == ["fetched"])
            let completed = try #require(await host.events(id).first { $0.kind == .service && $0.cause.contains("completed: newData") })
            let pictured = try #require(await host.events(id).first { $0.kind == .snapshot && $0.cause.contains("(background fetch)") })
            #expect(completed.seq < pictured.seq)
            try await host.waitUntil(id, is: .suspended)
            #expect(await host.supervisor.takenSnapshots(id, since: mark).count == 1, "one picture per fetch")
        }
    }

    /// A silent push is pictured when its completion comes in the background; one to the
    /// app in front is not.
    @Test func aSilentPushIsPicturedWhenCompletedInTheBackgroundAndNotInFront() async throws {
        try await withHost(label: "snap") { host in
            let id = try await host.installProbe("com.snap.push", extra: ["UIBackgroundModes": ["remote-notification"]])
            func push() async throws {
                _ = try await host.supervisor.modeCommand(.push(PushRequest(
                    bundleIdentifier: id, payload: #"{"aps": {"content-available": 1}}"#, pushType: "background", priority: 5, source: "test")))
            }
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "window:inbox", "--on", "push", "window:pushed",
            ])
            try await host.waitUntil(id, is: .active)
            let inFront = await host.supervisor.snapshotMark()
            try await push()
            _ = await host.waitForEvent(id) { $0.kind == .service && $0.cause.hasPrefix("push ") && $0.cause.contains(" completed: ") }
            await host.supervisor.waitForSnapshots()
            #expect(await host.supervisor.takenSnapshots(id, since: inFront).isEmpty, "completed in front: no picture")

            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .suspended)
            await host.supervisor.waitForSnapshots()
            let mark = await host.supervisor.snapshotMark()
            try await push()
            let taken = await snapshots(host, id, since: mark, reason: "silent push")
            #expect(taken.map(\.info.reason) == ["silent push"])
            #expect(taken.first?.info.policy == .default)
            #expect(try texts(try #require(taken.first).info) == ["pushed"])
        }
    }

    // MARK: - ignoreSnapshotOnNextApplicationLaunch

    /// The launch image stands for every snapshot until the app is next active: a fetch's
    /// refresh does not replace it.
    @Test func ignoreSnapshotHoldsUntilTheAppIsNextActive() async throws {
        try await withHost(label: "snap") { host in
            let id = try await host.installProbe("com.snap.ignore", extra: ["UIBackgroundModes": ["fetch"]])
            let home = try await launchAndSendHome(host, id, [
                "--on", "launch", "window:balance 42", "--on", "background", "ignore-snapshot",
            ])
            #expect(home.info.policy == .launchImage)
            #expect(home.info.reason == "didEnterBackground; ignoreSnapshotOnNextApplicationLaunch")
            #expect(try texts(home.info).isEmpty)
            let image = try PNGCodec.decode(try Data(contentsOf: URL(fileURLWithPath: try #require(home.info.png))))
            #expect(image.pixel(x: 600, y: 300) == .launchBackground, "the plain launch screen")

            let mark = await host.supervisor.snapshotMark()
            _ = try await host.supervisor.modeCommand(.fetchNow(bundleIdentifier: id))
            let fetched = try #require(await snapshots(host, id, since: mark, reason: "background fetch").first)
            #expect(fetched.info.policy == .launchImage, "the fetch's refresh still shows the launch image")
            #expect(fetched.info.reason == "background fetch; ignoreSnapshotOnNextApplicationLaunch")
            #expect(await host.supervisor.switcher().first?.snapshot?.policy == .launchImage)

            // Active again: a screenshot shows the window as it is, and the switcher keeps
            // the launch image (a screenshot is not a switcher snapshot).
            try await host.supervisor.foreground(id)
            try await host.waitUntil(id, is: .active)
            let now = try await host.supervisor.snapshot(id)
            #expect(now.reason == Supervisor.screenshotReason && now.policy == .default)
            let shot = try Data(contentsOf: URL(fileURLWithPath: try #require(now.png)))
            #expect(shot != (try Data(contentsOf: URL(fileURLWithPath: try #require(fetched.info.png)))), "the window, not the launch screen")
            #expect(await host.supervisor.switcher().first?.snapshot == fetched.info)
        }
    }

    // MARK: - launch-image end to end

    /// `AppHost.SnapshotPolicy` launch-image with a `UILaunchImageFile`: that picture, no text.
    /// A window unchanged since the last picture is a copy of its PNG, not a new render;
    /// with the last PNG gone, it is drawn again.
    @Test func anUnchangedWindowIsACopyOfTheLastPicture() async throws {
        try await withHost(label: "snap") { host in
            let id = try await host.installProbe("com.snap.same")
            let first = try await launchAndSendHome(host, id, ["--on", "launch", "window:same"])
            func homeAgain() async throws -> TakenSnapshot {
                try await host.supervisor.foreground(id)
                try await host.waitUntil(id, is: .active)
                let mark = await host.supervisor.snapshotMark()
                try await host.supervisor.background(id)
                try await host.waitUntil(id, is: .suspended)
                await host.supervisor.waitForSnapshots()
                return try #require(await host.supervisor.takenSnapshots(id, since: mark).last)
            }
            let second = try await homeAgain()
            #expect(first.info.number == 1 && second.info.number == 2)
            let firstPNG = try Data(contentsOf: URL(fileURLWithPath: try #require(first.info.png)))
            #expect(try Data(contentsOf: URL(fileURLWithPath: try #require(second.info.png))) == firstPNG)
            #expect(second.rendered != nil && first.rendered == nil, "one picture per app: the first's file is the second's")
            #expect(try texts(second.info) == ["same"])
            #expect(second.info.textLayer?.hasSuffix("/switcher.json") == true)

            try FileManager.default.removeItem(atPath: try #require(second.info.png))
            let third = try await homeAgain()
            let drawn = try PNGCodec.decode(try Data(contentsOf: URL(fileURLWithPath: try #require(third.info.png))))
            #expect(drawn == (try PNGCodec.decode(firstPNG)), "drawn again, the same pixels")
            #expect(try texts(third.info) == ["same"])
        }
    }

    @Test func anAppsLaunchImagePolicyShowsItsLaunchImageFile() async throws {
        try await withHost(label: "snap") { host in
            let bundle = try makeProbeBundle(in: host.dir.path, id: "com.snap.launch", extra: [
                "AppHost": ["SnapshotPolicy": "launch-image"], "UILaunchImageFile": "Launch.png",
            ])
            let orange = RGBA(255, 149, 0)
            try PNGCodec.encode(RGBAImage(width: 39, height: 84, fill: orange)).write(to: URL(fileURLWithPath: bundle + "/Launch.png"))
            let id = try await host.supervisor.install(path: bundle, settings: [:]).bundleIdentifier
            let taken = try await launchAndSendHome(host, id, ["--on", "launch", "window:secret"])
            #expect(taken.info.policy == .launchImage && taken.info.reason == "didEnterBackground")
            #expect(try texts(taken.info).isEmpty)
            #expect(taken.rendered?.warnings == [])
            let image = try PNGCodec.decode(try Data(contentsOf: URL(fileURLWithPath: try #require(taken.info.png))))
            #expect(image.width == 1170 && image.height == 2532)
            #expect(image.pixel(x: 585, y: 1266) == orange && image.pixel(x: 1169, y: 2531) == orange)
        }
    }

    /// The host-wide launch-image policy wins over Bank's own redact: the plain launch
    /// screen (Bank has no UILaunchImageFile), nothing of the window.
    @Test func aHostWideLaunchImagePolicyShowsThePlainLaunchScreen() async throws {
        try await withHost(label: "snap", configure: { $0.snapshotPolicy = .launchImage }) { host in
            let id = try await host.supervisor.install(path: packageRoot + "/manifests/Bank.app", settings: [:]).bundleIdentifier
            let taken = try await launchAndSendHome(host, id, [])
            #expect(taken.info.policy == .launchImage)
            #expect(try texts(taken.info).isEmpty)
            let image = try PNGCodec.decode(try Data(contentsOf: URL(fileURLWithPath: try #require(taken.info.png))))
            #expect(image.pixel(x: 100, y: 100) == .launchBackground && image.pixel(x: 585, y: 800) == .launchBackground)
            #expect(PrivacyInspector.inspect(tree: taken.tree, snapshot: try #require(taken.rendered), screen: .default).isEmpty)
        }
    }

    // MARK: - The screen

    /// The app is told the configured screen: BankCover's cover (Window.bounds) spans a
    /// larger screen than the default, and its snapshot passes the inspector there.
    @Test func theCoverSpansAConfiguredScreenLargerThanTheDefault() async throws {
        let screen = ScreenSize(width: 1500, height: 3000, scale: 2)
        try await withHost(label: "snap", configure: { $0.screen = screen }) { host in
            let id = try await host.supervisor.install(path: packageRoot + "/manifests/BankCover.app", settings: [:]).bundleIdentifier
            let taken = try await launchAndSendHome(host, id, [])
            let cover = try #require(taken.tree.views.last)
            #expect(cover.frame == Rect(x: 0, y: 0, width: 750, height: 1500))
            let rendered = try #require(taken.rendered)
            #expect(rendered.image.width == 1500 && rendered.image.height == 3000)
            let brand = RGBA(0, 82, 147)
            #expect(rendered.image.pixel(x: 1499, y: 2999) == brand && rendered.image.pixel(x: 1400, y: 50) == brand)
            let leaks = PrivacyInspector.inspect(tree: taken.tree, snapshot: rendered, screen: screen,
                                                 bundlePath: packageRoot + "/manifests/BankCover.app")
            #expect(leaks.isEmpty, "\(leaks)")
        }
    }

    // MARK: - The text layer

    @Test func theTextLayersTimeKeepsItsMilliseconds() async throws {
        try await withStateDirectory("snap") { dir in
            let (id, taken) = try await withHost(directory: dir) { host in
                let id = try await host.installProbe("com.snap.time")
                return (id, try await launchAndSendHome(host, id, ["--on", "launch", "window:hello"]))
            }
            // A later host reads the time back from the file, to the millisecond.
            try await withHost(reopening: dir) { again in
                let data = try Data(contentsOf: URL(fileURLWithPath: try #require(taken.info.textLayer)))
                let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
                let time = try #require(object["time"] as? String)
                #expect(time.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil, "\(time)")
                let read = try await again.supervisor.snapshot(id)
                #expect(read.number == taken.info.number)
                #expect(abs(read.time.timeIntervalSince(taken.info.time)) < 0.001, "\(read.time) vs \(taken.info.time)")
            }
        }
    }
}
