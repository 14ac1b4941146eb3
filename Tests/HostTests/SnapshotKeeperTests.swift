import AppHostProtocol
import Foundation
import Snapshots
import Testing
@testable import Host

/// The switcher and snapshot bookkeeping, without a process, a renderer or a disk.
@Suite("SnapshotKeeper")
struct SnapshotKeeperTests {
    let t0 = Date(timeIntervalSince1970: 1_000_000)

    func subject(_ app: BundleID = "com.a", label: String = "x", policy: SnapshotPolicy = .default, ignore: Bool = false,
                 onDisk: Int? = nil, at seconds: Double = 0) -> SnapshotKeeper.Subject {
        let tree = ViewTree(views: [ViewNode(content: .label(text: label, fontSize: 17, color: RGBA(0, 0, 0)), frame: Rect(x: 0, y: 0, width: 10, height: 10))])
        return SnapshotKeeper.Subject(app: app, tree: tree, policy: policy, ignoreUntilActive: ignore, time: t0 + seconds,
                                      bundlePath: "/apps/\(app)", launchImage: nil, highestOnDisk: onDisk)
    }

    func jobs(_ effects: [SnapshotKeeper.Effect]) -> [SnapshotKeeper.Job] {
        effects.compactMap { if case .render(let job) = $0 { return job } else { return nil } }
    }

    func logs(_ effects: [SnapshotKeeper.Effect]) -> [String] {
        effects.compactMap { if case .log(_, _, let cause, _) = $0 { return cause } else { return nil } }
    }

    /// Written over the app's one switcher snapshot, as the supervisor writes it.
    func written(_ job: SnapshotKeeper.Job) -> SnapshotKeeper.RenderOutcome {
        .written(SnapshotDrawing(RenderedSnapshot(image: RGBAImage(width: 1, height: 1), textLayer: [], warnings: [], policy: job.policy)),
                 png: "/s/\(job.app)/switcher.png", textLayer: "/s/\(job.app)/switcher.json")
    }

    func finish(_ k: inout SnapshotKeeper, _ job: SnapshotKeeper.Job) -> [SnapshotKeeper.Effect] {
        k.handle(.renderFinished(app: job.app, number: job.number, written(job), time: job.time))
    }

    @Test func didEnterBackgroundAloneIsPictured() throws {
        var k = SnapshotKeeper()
        #expect(k.handle(.callbackReturned(.willResignActive, subject())).isEmpty)
        let fx = k.handle(.callbackReturned(.didEnterBackground, subject()))
        let job = try #require(jobs(fx).first)
        #expect(job.number == 1 && job.serial == 1 && job.reason == "didEnterBackground" && job.policy == .default)
        #expect(!k.isIdle)
        let done = finish(&k, job)
        #expect(done == [.log(.snapshot, app: "com.a", cause: "snapshot 1 taken (didEnterBackground), policy default: /s/com.a/switcher.png", time: t0), .idle],
                "nothing to prune: the picture replaced the last")
        #expect(k.latest["com.a"]?.png == "/s/com.a/switcher.png")
        #expect(k.taken["com.a"]?.map(\.serial) == [1])
        #expect(k.isIdle)
    }

    @Test func completionsPictureOnlyInTheBackgroundAndOnlyWhenAccepted() {
        var k = SnapshotKeeper()
        let fetch = ServiceRequest.fetchCompleted(id: 1, result: .newData)
        let push = ServiceRequest.remoteNotificationCompleted(id: 2, result: .noData)
        #expect(jobs(k.handle(.completionReturned(fetch, reply: .ok, state: .active, subject()))).isEmpty, "in front: none")
        #expect(jobs(k.handle(.completionReturned(fetch, reply: .refused(reason: "late"), state: .background, subject()))).isEmpty)
        #expect(jobs(k.handle(.completionReturned(.backgroundRefreshStatus, reply: .ok, state: .background, subject()))).isEmpty)
        #expect(jobs(k.handle(.completionReturned(fetch, reply: .ok, state: .background, subject()))).map(\.reason) == ["background fetch"])
        var other = SnapshotKeeper()
        #expect(jobs(other.handle(.completionReturned(push, reply: .ok, state: .background, subject()))).map(\.reason) == ["silent push"])
    }

    @Test func numberingGoesOnAfterWhatIsOnDisk() throws {
        var k = SnapshotKeeper()
        #expect(!k.numbers("com.a"))
        let first = try #require(jobs(k.handle(.callbackReturned(.didEnterBackground, subject(onDisk: 7)))).first)
        #expect(first.number == 8)
        #expect(k.numbers("com.a"))
        _ = finish(&k, first)
        // Once numbered, what the disk says is not read again.
        let second = try #require(jobs(k.handle(.callbackReturned(.didEnterBackground, subject(onDisk: 100)))).first)
        #expect(second.number == 9 && second.serial == 2)
    }

    @Test func ignoreSnapshotOnNextLaunchDrawsTheLaunchImage() throws {
        var k = SnapshotKeeper()
        let job = try #require(jobs(k.handle(.callbackReturned(.didEnterBackground, subject(policy: .redact, ignore: true)))).first)
        #expect(job.policy == .launchImage)
        #expect(job.reason == "didEnterBackground; ignoreSnapshotOnNextApplicationLaunch")
        var strict = SnapshotKeeper()
        #expect(strict.handle(.callbackReturned(.didEnterBackground, subject(policy: .none, ignore: true))).contains(.deleteAll("com.a")),
                "none stays none")
    }

    @Test func policyNoneDeletesEverythingAtOnce() {
        var k = SnapshotKeeper()
        let job = jobs(k.handle(.callbackReturned(.didEnterBackground, subject())))[0]
        _ = finish(&k, job)
        let fx = k.handle(.callbackReturned(.didEnterBackground, subject(policy: .none)))
        #expect(jobs(fx).isEmpty)
        #expect(fx.contains(.deleteAll("com.a")))
        #expect(logs(fx) == ["snapshot 2 not kept (didEnterBackground): policy none; the earlier one deleted"])
        #expect(k.latest["com.a"] == nil)
        #expect(k.taken["com.a"]?.last?.drawing == nil && k.taken["com.a"]?.count == 2)
        #expect(k.isIdle)
    }

    @Test func oneRenderPerAppAndOnlyTheNewestWaits() throws {
        var k = SnapshotKeeper()
        let first = try #require(jobs(k.handle(.callbackReturned(.didEnterBackground, subject(label: "1")))).first)
        // While it is drawn, two more: the second is superseded by the third.
        #expect(jobs(k.handle(.callbackReturned(.didEnterBackground, subject(label: "2", at: 1)))).isEmpty)
        let fx = k.handle(.callbackReturned(.didEnterBackground, subject(label: "3", at: 2)))
        #expect(jobs(fx).isEmpty)
        #expect(logs(fx) == ["snapshot 2 not drawn (didEnterBackground): superseded by snapshot 3 (didEnterBackground) before its turn"])
        #expect(k.rendering("com.a").inFlight?.number == 1 && k.rendering("com.a").pending?.number == 3)
        // Another app is not held up.
        #expect(jobs(k.handle(.callbackReturned(.didEnterBackground, subject("com.b")))).count == 1)
        // The first ends: the newest starts; not idle yet.
        let after = finish(&k, first)
        let third = try #require(jobs(after).first)
        #expect(third.number == 3 && third.tree == subject(label: "3").tree)
        #expect(!after.contains(.idle))
        _ = finish(&k, third)
        // Every snapshot taken is recorded with its tree, in order; the superseded one drew nothing.
        let taken = try #require(k.taken["com.a"])
        #expect(taken.map(\.info.number) == [1, 2, 3])
        #expect(taken.map(\.tree.views.count) == [1, 1, 1])
        #expect(taken[1].supersededBy == 3 && taken[1].drawing == nil && taken[1].info.png == nil)
        #expect(taken[0].drawing != nil && taken[2].drawing != nil)
        #expect(k.latest["com.a"]?.number == 3)
        #expect(!k.isIdle, "com.b is still drawn")
        let b = try #require(k.rendering("com.b").inFlight)
        #expect(finish(&k, b).last == .idle)
    }

    @Test func aFailedRenderWarnsAndKeepsNothing() {
        var k = SnapshotKeeper()
        let job = jobs(k.handle(.callbackReturned(.didEnterBackground, subject())))[0]
        let fx = k.handle(.renderFinished(app: "com.a", number: 1, .failed("disk full"), time: t0 + 5))
        #expect(fx == [.log(.warning, app: "com.a", cause: "snapshot 1 failed (didEnterBackground): disk full", time: t0 + 5), .idle])
        #expect(k.taken["com.a"] == nil && k.latest["com.a"] == nil)
        #expect(job.number == 1)
    }

    @Test func noneWaitingBehindARenderWinsWhenItEnds() throws {
        // A `none` request while a picture is drawn: the picture lands, then everything goes.
        var k = SnapshotKeeper()
        let job = jobs(k.handle(.callbackReturned(.didEnterBackground, subject())))[0]
        #expect(!k.handle(.callbackReturned(.didEnterBackground, subject(policy: .none))).contains(.deleteAll("com.a")))
        let fx = finish(&k, job)
        let landed = try #require(fx.firstIndex { if case .log(.snapshot, _, let cause, _) = $0 { cause.contains("taken") } else { false } })
        let delete = try #require(fx.firstIndex(of: .deleteAll("com.a")))
        #expect(landed < delete)
        #expect(k.latest["com.a"] == nil)
        #expect(fx.last == .idle)
    }

    @Test func uninstallMidRenderDeletesWhatTheRenderWrites() throws {
        var k = SnapshotKeeper()
        _ = k.handle(.activated("com.a"))
        let job = jobs(k.handle(.callbackReturned(.didEnterBackground, subject())))[0]
        _ = k.handle(.callbackReturned(.didEnterBackground, subject()))
        let fx = k.handle(.removed("com.a", uninstalled: true))
        #expect(fx == [.deleteAll("com.a")])
        #expect(k.switcher.isEmpty && k.taken["com.a"] == nil && !k.numbers("com.a"))
        let done = finish(&k, job)
        #expect(done == [.deleteAll("com.a"), .idle])
        #expect(k.latest["com.a"] == nil)
    }

    @Test func reinstalledMidRenderTheOldPictureGoesBeforeTheNewIsDrawn() throws {
        var k = SnapshotKeeper()
        let old = jobs(k.handle(.callbackReturned(.didEnterBackground, subject(onDisk: 4))))[0]
        _ = k.handle(.removed("com.a", uninstalled: true))
        // Back, and pictured again before the old render ends: it waits behind it.
        #expect(jobs(k.handle(.callbackReturned(.didEnterBackground, subject(onDisk: 0)))).isEmpty)
        let fx = finish(&k, old)
        #expect(fx.first == .deleteAll("com.a"))
        let fresh = try #require(jobs(fx).first)
        #expect(fresh.number == 1)
        _ = finish(&k, fresh)
        #expect(k.taken["com.a"]?.map(\.info.number) == [1])
    }

    @Test func switcherOrderAndSeed() {
        var k = SnapshotKeeper()
        _ = k.handle(.activated("a"))
        _ = k.handle(.activated("b"))
        _ = k.handle(.seed(["c", "a", "d"]))
        #expect(k.switcher == ["b", "a", "c", "d"])
        _ = k.handle(.seed(["e"]))
        #expect(k.switcher == ["b", "a", "c", "d"], "seeded once")
        _ = k.handle(.activated("d"))
        #expect(k.switcher == ["d", "b", "a", "c"])
        #expect(k.handle(.removed("a", uninstalled: false)).isEmpty, "a swipe deletes no picture")
        #expect(k.switcher == ["d", "b", "c"])
    }

    @Test func takenIsBoundedPerApp() {
        var k = SnapshotKeeper()
        for i in 0..<(SnapshotKeeper.takenKept + 5) {
            _ = k.handle(.callbackReturned(.didEnterBackground, subject(policy: .none, at: Double(i))))
        }
        #expect(k.taken["com.a"]?.count == SnapshotKeeper.takenKept)
        #expect(k.taken["com.a"]?.first?.serial == 6)
        #expect(k.serial == UInt64(SnapshotKeeper.takenKept + 5))
    }

    @Test func theSameInputsCopyTheLastPictureInsteadOfDrawingIt() throws {
        var k = SnapshotKeeper()
        let first = jobs(k.handle(.callbackReturned(.didEnterBackground, subject())))[0]
        #expect(first.copy == nil)
        _ = finish(&k, first)
        let again = try #require(jobs(k.handle(.callbackReturned(.didEnterBackground, subject(at: 1)))).first)
        #expect(again.copy?.png == "/s/com.a/switcher.png", "the file in place is the picture")
        _ = k.handle(.renderFinished(app: "com.a", number: again.number,
                                     .written(try #require(again.copy).drawing, png: "/s/com.a/switcher.png", textLayer: "/s/com.a/switcher.json"), time: t0))
        // A changed window, or another policy, is drawn.
        let changed = jobs(k.handle(.callbackReturned(.didEnterBackground, subject(label: "new"))))[0]
        #expect(changed.copy == nil)
        _ = finish(&k, changed)
        #expect(jobs(k.handle(.callbackReturned(.didEnterBackground, subject(label: "new", policy: .redact))))[0].copy == nil)
    }

    @Test func picturesThatReadTheBundleAreAlwaysDrawn() throws {
        // The bundle's files may change between two pictures of the same tree.
        var k = SnapshotKeeper()
        var s = subject()
        s.tree.views.append(ViewNode(content: .image(name: "hero.png"), frame: Rect(x: 0, y: 0, width: 5, height: 5)))
        _ = finish(&k, jobs(k.handle(.callbackReturned(.didEnterBackground, s)))[0])
        #expect(jobs(k.handle(.callbackReturned(.didEnterBackground, s)))[0].copy == nil)
        var launch = subject(policy: .launchImage)
        launch.launchImage = "Launch.png"
        var l = SnapshotKeeper()
        _ = finish(&l, jobs(l.handle(.callbackReturned(.didEnterBackground, launch)))[0])
        #expect(jobs(l.handle(.callbackReturned(.didEnterBackground, launch)))[0].copy == nil)
    }

    @Test func anotherAppWithTheSameWindowCopiesThePictureAndSharesItsPixels() throws {
        var k = SnapshotKeeper()
        let first = jobs(k.handle(.callbackReturned(.didEnterBackground, subject("com.a"))))[0]
        _ = finish(&k, first)
        let other = try #require(jobs(k.handle(.callbackReturned(.didEnterBackground, subject("com.b")))).first)
        #expect(other.copy?.png == "/s/com.a/switcher.png", "drawn once for both")
        // Not when the picture may read its own bundle, or under another policy.
        var imaged = subject("com.c")
        imaged.tree.views.append(ViewNode(content: .image(name: "hero.png"), frame: Rect(x: 0, y: 0, width: 5, height: 5)))
        #expect(jobs(k.handle(.callbackReturned(.didEnterBackground, imaged)))[0].copy == nil)
        #expect(jobs(k.handle(.callbackReturned(.didEnterBackground, subject("com.d", policy: .launchImage))))[0].copy == nil)
        #expect(jobs(k.handle(.callbackReturned(.didEnterBackground, subject("com.e", label: "other"))))[0].copy == nil)
        // Once com.a's files are gone (uninstalled), nobody copies them.
        _ = k.handle(.removed("com.a", uninstalled: true))
        #expect(jobs(k.handle(.callbackReturned(.didEnterBackground, subject("com.f"))))[0].copy == nil)
    }

    @Test func nothingIsCopiedAfterTheFilesWentAway() throws {
        var k = SnapshotKeeper()
        _ = finish(&k, jobs(k.handle(.callbackReturned(.didEnterBackground, subject())))[0])
        _ = k.handle(.callbackReturned(.didEnterBackground, subject(policy: .none)))
        #expect(jobs(k.handle(.callbackReturned(.didEnterBackground, subject())))[0].copy == nil)
    }
}
