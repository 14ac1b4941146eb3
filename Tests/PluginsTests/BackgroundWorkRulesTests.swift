import AppHostProtocol
import Foundation
import Testing
@testable import Plugins

/// Fetch scheduling, BGTaskScheduler and remote notifications through the hub,
/// without processes: what the plugins ask the host to do, on a clock the test moves.
@Suite("Background work rules")
struct BackgroundWorkRulesTests {
    func app(_ id: BundleID, modes: [BackgroundMode] = [], ids: [String] = [], entitlements: [String] = [],
             state: AppState = .suspended) -> ModeApp {
        modeApp(id, modes: modes, ids: ids, entitlements: entitlements, state: state)
    }

    func hub(_ apps: ModeApp...) -> ModeHub { makeHub(apps) }

    func delivered(_ fx: [ModeEffect]) -> [String] {
        fx.compactMap { if case .deliver(let a, let e, _, _) = $0 { "\(a) \(e.name)" } else { nil } }
    }
    func timers(_ fx: [ModeEffect]) -> [String: Duration] {
        var out: [String: Duration] = [:]
        for e in fx { if case .startTimer(_, let timer, let after) = e { out[timer.description] = after } }
        return out
    }
    func kills(_ fx: [ModeEffect]) -> [TerminationCode?] {
        fx.compactMap { if case .kill(_, _, let code, _) = $0 { code } else { nil } }
    }
    func notes(_ fx: [ModeEffect]) -> [String] {
        fx.compactMap {
            switch $0 {
            case .note(_, let t), .typedNote(_, let t, _): t
            default: nil
            }
        }
    }

    // MARK: fetch

    @Test func aFetchRunsAtTheIntervalAndItsResultSetsTheNext() throws {
        let h = hub(app("f", modes: [.fetch], state: .active))
        let (_, set) = h.request(.fetchSetMinimumInterval(.minimum), from: "f", at: .zero)
        #expect(timers(set)["fetch/tick"] == .seconds(900), "the minimum interval is 15 min")
        _ = h.appMoved("f", from: .inactive, to: .background, runningCode: true, at: .seconds(1))
        _ = h.appMoved("f", from: .background, to: .suspended, runningCode: false, at: .seconds(1))
        let run = h.timerFired(PluginTimer(.fetch, "tick"), app: nil, at: .seconds(900))
        #expect(delivered(run) == ["f performFetch"])
        #expect(run.contains(.beginActivity(app: "f", name: "background fetch")))
        #expect(timers(run)["fetch/budget"] == .seconds(30))
        guard case .deliver(_, .performFetch(let id), let wake, _)? = run.first(where: { if case .deliver = $0 { true } else { false } }) else {
            Issue.record("no performFetch"); return
        }
        #expect(wake == .launch(.backgroundFetch))
        // noData: the next one is twice as far.
        let (_, done) = h.request(.fetchCompleted(id: id, result: .noData), from: "f", at: .seconds(901))
        #expect(done.contains(.endActivity(app: "f", name: "background fetch")))
        #expect(timers(done)["fetch/tick"] == .seconds(1799), "900 + 900×2 from now (901)")
        let schedule = try h.command(.fetchSchedule, at: .seconds(901)).0.get()
        #expect(schedule.contains("backoff 2") && schedule.contains("last result noData"), "\(schedule)")
    }

    @Test func aFetchThatNeverCompletesIsKilledWith2182bad4() {
        let h = hub(app("f", modes: [.fetch]))
        _ = h.request(.fetchSetMinimumInterval(.minimum), from: "f", at: .zero)
        _ = h.timerFired(PluginTimer(.fetch, "tick"), app: nil, at: .seconds(900))
        let fx = h.timerFired(PluginTimer(.fetch, "budget"), app: "f", at: .seconds(930))
        #expect(kills(fx) == [.backgroundFetchTimeout])
    }

    @Test func fetchesDueWithinTheWindowRunTogetherWhenTheLastOfThemIsDue() {
        let h = hub(app("a", modes: [.fetch]), app("b", modes: [.fetch]), app("c", modes: [.fetch]))
        _ = h.request(.fetchSetMinimumInterval(.minimum), from: "a", at: .zero)
        let (_, armed) = h.request(.fetchSetMinimumInterval(.seconds(1000)), from: "b", at: .zero)
        _ = h.request(.fetchSetMinimumInterval(.seconds(1300)), from: "c", at: .zero)
        // a is due at 900, b at 1000 (inside a's 300 s window), c at 1300 (outside it): the
        // tick waits for b, so a runs 100 s late and b not 100 s early.
        #expect(timers(armed)["fetch/tick"] == .seconds(1000))
        let run = h.timerFired(PluginTimer(.fetch, "tick"), app: nil, at: .seconds(1000))
        #expect(delivered(run) == ["a performFetch", "b performFetch"], "c (due at 1300) is not run early")
        #expect(notes(run).contains { $0.contains("coalesced") })
    }

    @Test func aTickBeforeABatchIsDueRunsOnlyWhatIsDue() {
        let h = hub(app("a", modes: [.fetch]), app("b", modes: [.fetch]))
        _ = h.request(.fetchSetMinimumInterval(.minimum), from: "a", at: .zero)
        _ = h.request(.fetchSetMinimumInterval(.seconds(1000)), from: "b", at: .zero)
        // A tick at a's time (armed before b set its interval): a alone; b is never early.
        let run = h.timerFired(PluginTimer(.fetch, "tick"), app: nil, at: .seconds(900))
        #expect(delivered(run) == ["a performFetch"])
    }

    @Test func noFetchWithoutRefreshOrAfterAUserTerminate() throws {
        let h = hub(app("f", modes: [.fetch]))
        _ = h.request(.fetchSetMinimumInterval(.minimum), from: "f", at: .zero)
        let off = h.command(.settingsBackgroundRefresh(bundleIdentifier: "f", on: false), at: .zero).1
        #expect(off.contains(.cancelTimer(app: nil, timer: PluginTimer(.fetch, "tick"))))
        #expect(h.request(.backgroundRefreshStatus, from: "f", at: .zero).0 == .refreshStatus(.denied))
        _ = h.command(.settingsBackgroundRefresh(bundleIdentifier: "f", on: true), at: .zero)
        _ = h.command(.settingsLowPower(true), at: .zero)
        #expect(h.request(.backgroundRefreshStatus, from: "f", at: .zero).0 == .refreshStatus(.restricted))
        _ = h.command(.settingsLowPower(false), at: .zero)
        _ = h.appExited("f", byUser: true, at: .seconds(10))
        #expect(try h.command(.fetchSchedule, at: .seconds(10)).0.get().contains("terminated it"))
        let back = h.userLaunched("f", at: .seconds(20))
        #expect(timers(back)["fetch/tick"] != nil, "scheduled again once the user launched it")
    }

    // MARK: BGTaskScheduler

    @Test func registrationAndSubmissionFollowTheRules() {
        let h = hub(app("t", modes: [.processing], ids: ["t.clean", "t.refresh"], state: .active))
        #expect(h.request(.bgRegister(identifier: "t.other"), from: "t", at: .zero).0 == .failed(code: "notPermitted", reason: "\"t.other\" is not in BGTaskSchedulerPermittedIdentifiers"))
        #expect(h.request(.bgRegister(identifier: "t.clean"), from: "t", at: .zero).0 == .ok)
        let refresh = h.request(.bgSubmit(BGTaskRequestInfo(kind: .refresh, identifier: "t.refresh")), from: "t", at: .zero).0
        guard case .failed(let code, _) = refresh else { Issue.record("refresh without fetch: \(refresh)"); return }
        #expect(code == "notPermitted")
        #expect(h.request(.bgSubmit(BGTaskRequestInfo(kind: .processing, identifier: "t.clean")), from: "t", at: .zero).0 == .ok)
        #expect(h.request(.bgSubmit(BGTaskRequestInfo(kind: .processing, identifier: "t.clean", earliestBegin: 60)), from: "t", at: .zero).0 == .ok,
                "resubmitting replaces")
        #expect(h.request(.bgPending, from: "t", at: .zero).0 == .bgRequests([BGTaskRequestInfo(kind: .processing, identifier: "t.clean", earliestBegin: 60)]))
    }

    @Test func atMostOneRefreshRequestIsPending() {
        let h = hub(app("t", modes: [.fetch], ids: ["a", "b"], state: .active))
        #expect(h.request(.bgSubmit(BGTaskRequestInfo(kind: .refresh, identifier: "a")), from: "t", at: .zero).0 == .ok)
        guard case .failed("tooManyPendingTaskRequests", _) = h.request(.bgSubmit(BGTaskRequestInfo(kind: .refresh, identifier: "b")), from: "t", at: .zero).0 else {
            Issue.record("a second refresh request must be refused"); return
        }
    }

    @Test func aProcessingTaskWaitsForPowerThenExpiresAndKillsIfNotCompleted() throws {
        let h = hub(app("t", modes: [.processing], ids: ["t.clean"], state: .active))
        _ = h.command(.devicePower(plugged: false), at: .zero)
        _ = h.request(.bgRegister(identifier: "t.clean"), from: "t", at: .zero)
        let (_, submit) = h.request(.bgSubmit(BGTaskRequestInfo(kind: .processing, identifier: "t.clean", requiresExternalPower: true)),
                                    from: "t", at: .zero)
        #expect(timers(submit)["processing/tick"] == nil, "waits for power")
        _ = h.appMoved("t", from: .inactive, to: .background, runningCode: true, at: .zero)
        #expect(try h.command(.bgTaskList(bundleIdentifier: nil), at: .zero).0.get().contains("requires external power"))
        // Plugging in makes it due: it runs in that step (no timer armed for "now").
        let run = h.command(.devicePower(plugged: true), at: .seconds(5)).1
        #expect(delivered(run) == ["t BGTask launch(t.clean)"])
        #expect(timers(run)["processing/warn/t.clean"] == .seconds(295))
        let warn = h.timerFired(PluginTimer(.processing, "warn/t.clean"), app: "t", at: .seconds(300))
        #expect(delivered(warn) == ["t BGTask expiration(t.clean)"])
        let end = h.timerFired(PluginTimer(.processing, "end/t.clean"), app: "t", at: .seconds(305))
        #expect(kills(end) == [.backgroundTaskTimeout])
    }

    @Test func aCompletedTaskEndsItsActivityAndALaunchWithoutAHandlerKills() {
        let h = hub(app("t", modes: [.fetch], ids: ["t.r"], state: .active))
        _ = h.request(.bgRegister(identifier: "t.r"), from: "t", at: .zero)
        _ = h.request(.bgSubmit(BGTaskRequestInfo(kind: .refresh, identifier: "t.r")), from: "t", at: .zero)
        let (result, run) = h.command(.bgTaskRun(bundleIdentifier: "t", identifier: "t.r"), at: .zero)
        #expect((try? result.get()) != nil)
        #expect(delivered(run) == ["t BGTask launch(t.r)"])
        let (_, done) = h.request(.bgTaskCompleted(identifier: "t.r", success: true), from: "t", at: .seconds(1))
        #expect(done.contains(.endActivity(app: "t", name: "BGTask t.r")))

        // A new process that did not register t.r gets it: iOS's exception kills it.
        _ = h.appExited("t", byUser: false, at: .seconds(2))
        _ = h.request(.bgSubmit(BGTaskRequestInfo(kind: .refresh, identifier: "t.r")), from: "t", at: .seconds(3))
        _ = h.command(.bgTaskRun(bundleIdentifier: "t", identifier: "t.r"), at: .seconds(3))
        let returned = h.callbackReturned(.bgTaskLaunch(identifier: "t.r", kind: .refresh), app: "t", at: .seconds(4))
        #expect(kills(returned).count == 1)
    }

    // MARK: remote notifications

    let silent = #"{"aps":{"content-available":1},"id":7}"#

    @Test func silentPushesNeedTheModeAndAreThrottledHeldAndDeliveredInFront() throws {
        let h = hub(app("p", modes: [.remoteNotification], entitlements: ["aps-environment"]), app("n"))
        let refused = try h.command(.push(PushRequest(bundleIdentifier: "n", payload: silent)), at: .zero).0.get()
        #expect(refused.contains("no \"remote-notification\""), "\(refused)")
        for i in 1...3 {
            let (r, fx) = h.command(.push(PushRequest(bundleIdentifier: "p", payload: silent)), at: .seconds(i))
            #expect(delivered(fx) == ["p didReceiveRemoteNotification(background)"], "\(String(describing: try? r.get()))")
        }
        let (held, fx) = h.command(.push(PushRequest(bundleIdentifier: "p", payload: silent, apnsID: "A")), at: .seconds(10))
        #expect(delivered(fx).isEmpty)
        #expect(try held.get().contains("held"))
        let (_, again) = h.command(.push(PushRequest(bundleIdentifier: "p", payload: silent, apnsID: "B")), at: .seconds(11))
        #expect(notes(again).contains { $0.contains("replaces") && $0.contains("A") })
        let front = h.appMoved("p", from: .inactive, to: .active, runningCode: true, at: .seconds(20))
        #expect(delivered(front) == ["p didReceiveRemoteNotification(background)"], "the held push, on coming to the foreground")
        // An hour later the budget is free again.
        _ = h.appMoved("p", from: .active, to: .suspended, runningCode: false, at: .seconds(30))
        let later = h.command(.push(PushRequest(bundleIdentifier: "p", payload: silent)), at: .seconds(3700)).1
        #expect(delivered(later).count == 1)
    }

    @Test func heldPushesAreDroppedWhenTheUserTerminatesAndNoLaunchFollows() throws {
        let h = hub(app("p", modes: [.remoteNotification], state: .suspended))
        for i in 0..<4 { _ = h.command(.push(PushRequest(bundleIdentifier: "p", payload: silent)), at: .seconds(i)) }
        let exit = h.appExited("p", byUser: true, at: .seconds(5))
        #expect(notes(exit).contains { $0.contains("dropped") })
        let (r, fx) = h.command(.push(PushRequest(bundleIdentifier: "p", payload: silent)), at: .seconds(7200))
        #expect(delivered(fx).isEmpty)
        #expect(try r.get().contains("terminated"))
    }

    @Test func visiblePushesAreShownUnlessTheAppIsInFront() throws {
        let h = hub(app("p", state: .suspended), app("q", state: .active))
        let alert = #"{"aps":{"alert":{"title":"Hello"}}}"#
        let (r, fx) = h.command(.push(PushRequest(bundleIdentifier: "p", payload: alert)), at: .zero)
        #expect(try r.get().contains("shown"))
        #expect(notes(fx).contains { $0.contains("\"Hello\"") })
        let front = h.command(.push(PushRequest(bundleIdentifier: "q", payload: alert)), at: .zero).1
        #expect(delivered(front) == ["q didReceiveRemoteNotification"])
    }

    @Test func aSilentPushWhoseCompletionNeverComesKillsWithTheFetchCode() {
        let h = hub(app("p", modes: [.remoteNotification]))
        _ = h.command(.push(PushRequest(bundleIdentifier: "p", payload: silent)), at: .zero)
        let fx = h.timerFired(PluginTimer(.remoteNotification, "budget/1"), app: "p", at: .seconds(30))
        // One "Background Content Fetching" assertion for both: 0x2182bad4, as a fetch.
        #expect(kills(fx) == [.backgroundFetchTimeout])
    }

    @Test func refreshOffStopsSilentPushes() throws {
        let h = hub(app("p", modes: [.remoteNotification]))
        _ = h.command(.settingsBackgroundRefresh(bundleIdentifier: nil, on: false), at: .zero)
        let (r, fx) = h.command(.push(PushRequest(bundleIdentifier: "p", payload: silent)), at: .zero)
        #expect(delivered(fx).isEmpty)
        #expect(try r.get().contains("off for every app"))
    }

    @Test func tokensOfUninstalledAppsAreUnregistered() throws {
        let h = hub(app("p", entitlements: ["aps-environment"]))
        let (token, issued) = try #require(h.deviceToken(of: "p", .apns))
        #expect(issued == [.persistDeviceToken(DeviceTokenRecord(token: token, bundleIdentifier: "p", kind: .apns, retired: false))],
                "a new token is persisted before it is handed out")
        #expect(h.deviceTokenOwner(token) == .installed("p", .apns))
        let uninstalled = h.uninstall("p")
        #expect(uninstalled.contains(.persistDeviceToken(DeviceTokenRecord(token: token, bundleIdentifier: "p", kind: .apns, retired: true))))
        #expect(h.deviceTokenOwner(token) == .uninstalled("p"))
        #expect(h.deviceTokenOwner(String(repeating: "0", count: 64)) == .unknown)
    }

    @Test func tokensAreRandomPerInstallKeptOverUpdatesAndNewAfterAReinstall() throws {
        let h = hub(app("p", modes: [.voip], entitlements: ["aps-environment"]))
        let (apns, _) = try #require(h.deviceToken(of: "p", .apns))
        let (voip, _) = try #require(h.deviceToken(of: "p", .voip))
        #expect(apns != voip, "PushKit's token is not the APNs token")
        #expect(apns.count == 64 && apns.allSatisfy { $0.isHexDigit && !$0.isUppercase })
        #expect(h.deviceTokenOwner(voip) == .installed("p", .voip))
        #expect(try #require(h.deviceToken(of: "p", .apns)) == (apns, []), "asked again: the same token, nothing to persist")
        _ = h.install(app("p", modes: [.voip], entitlements: ["aps-environment"]))
        #expect(try #require(h.deviceToken(of: "p", .apns)).0 == apns, "an update keeps the token")
        _ = h.uninstall("p")
        _ = h.install(app("p", modes: [.voip], entitlements: ["aps-environment"]))
        let (again, _) = try #require(h.deviceToken(of: "p", .apns))
        #expect(again != apns, "a reinstalled app gets a new token, as on iOS")
        #expect(h.deviceTokenOwner(apns) == .uninstalled("p"))
        #expect(h.deviceTokenOwner(again) == .installed("p", .apns))
        // Another host (another hub) gives the same app another token.
        let other = hub(app("p", entitlements: ["aps-environment"]))
        #expect(try #require(other.deviceToken(of: "p", .apns)).0 != apns)
        #expect(h.deviceToken(of: "nobody", .apns) == nil, "only an installed app has a token")
    }

    @Test func retiredTokensAreBounded() throws {
        let h = hub()
        var first: String?
        var forgotten: [String] = []
        for _ in 0...DeviceTokens.maximumRetired {
            _ = h.install(app("p", entitlements: ["aps-environment"]))
            let (token, _) = try #require(h.deviceToken(of: "p", .apns))
            if first == nil { first = token }
            for case .forgetDeviceToken(let t) in h.uninstall("p") { forgotten.append(t) }
        }
        #expect(forgotten == [try #require(first)], "past the bound the oldest retired token is forgotten")
        #expect(h.deviceTokenOwner(try #require(first)) == .unknown)
    }
}
