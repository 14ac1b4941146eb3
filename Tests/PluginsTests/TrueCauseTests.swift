import AppHostProtocol
import Foundation
import Testing
@testable import Plugins

/// Issue 18 (fidelity): a refusal names its true cause, and a device change that makes
/// work due runs it in the same step. Through the hub, without processes.
@Suite("True causes and due work")
struct TrueCauseTests {
    func app(_ id: BundleID, modes: [BackgroundMode] = [], ids: [String] = [], state: AppState = .suspended) -> ModeApp {
        modeApp(id, modes: modes, ids: ids, state: state)
    }
    func delivered(_ fx: [ModeEffect]) -> [String] {
        fx.compactMap { if case .deliver(let a, let e, _, _) = $0 { "\(a) \(e.name)" } else { nil } }
    }
    func refusalReason(_ reply: ServiceReply) -> String {
        if case .refused(let reason) = reply { reason } else { "not refused: \(reply)" }
    }

    // MARK: location

    @Test func aFixWithheldFromAWhenInUseAppWithTheModeSaysSo() {
        let h = makeHub([app("w", modes: [.location], state: .active), app("n", state: .active)])
        for id: BundleID in ["w", "n"] {
            _ = h.command(.privacy(action: .grant, service: .service(.location), bundleIdentifier: id), at: .zero)
            _ = h.request(.locationStart, from: id, at: .zero)
            _ = h.request(.locationAllowsBackgroundUpdates(id == "w"), from: id, at: .zero)
            _ = h.appMoved(id, from: .active, to: .background, runningCode: true, at: .zero)
            _ = h.appMoved(id, from: .background, to: .suspended, runningCode: false, at: .zero)
        }
        let fx = h.command(.locationSet(LocationFix(latitude: 1, longitude: 2)), at: .seconds(1)).1
        #expect(delivered(fx).isEmpty)
        // With the mode: the authorization, never the mode.
        let because = fx.compactMap { e -> String? in
            if case .refusedBecause("w", .location, _, let because) = e { because } else { nil }
        }
        #expect(because.count == 1)
        #expect(because.first?.contains("only when-in-use authorized") == true, "\(because)")
        #expect(!fx.contains { if case .refused("w", _, _) = $0 { true } else { false } })
        // Without it: the mode is what is missing.
        #expect(fx.contains { if case .refused("n", .location, _) = $0 { true } else { false } })
    }

    @Test func aFixWithheldForTheFlagNamesTheFlag() {
        let h = makeHub([app("a", modes: [.location], state: .active)])
        _ = h.command(.privacy(action: .grant, service: .service(.locationAlways), bundleIdentifier: "a"), at: .zero)
        _ = h.request(.locationStart, from: "a", at: .zero)
        _ = h.appMoved("a", from: .active, to: .background, runningCode: true, at: .zero)
        _ = h.appMoved("a", from: .background, to: .suspended, runningCode: false, at: .zero)
        let fx = h.command(.locationSet(LocationFix(latitude: 1, longitude: 2)), at: .seconds(1)).1
        #expect(fx.contains { if case .refusedBecause("a", .location, _, let b) = $0 { b.contains("allowsBackgroundLocationUpdates is false") } else { false } })
    }

    // MARK: pushes

    let alert = #"{"aps":{"alert":{"title":"Hi"}}}"#

    @Test func aVisiblePushCompletedOnceIsAcceptedAndASecondCallIsCalledTwice() throws {
        let h = makeHub([app("p", state: .active)])
        let fx = h.command(.push(PushRequest(bundleIdentifier: "p", payload: alert)), at: .zero).1
        #expect(delivered(fx) == ["p didReceiveRemoteNotification"])
        let (once, done) = h.request(.remoteNotificationCompleted(id: 1, result: .noData), from: "p", at: .seconds(1))
        #expect(once == .ok)
        #expect(done.contains { if case .typedNote("p", let text, _) = $0 { text == "push 1 completed: noData" } else { false } })
        let twice = h.request(.remoteNotificationCompleted(id: 1, result: .noData), from: "p", at: .seconds(2)).0
        #expect(refusalReason(twice) == "push 1 was completed already: its completion handler was called twice")
        let unknown = h.request(.remoteNotificationCompleted(id: 9, result: .noData), from: "p", at: .seconds(2)).0
        #expect(refusalReason(unknown) == "no push 9 was delivered to this app")
    }

    @Test func aSilentPushCompletedAfterItsBudgetSaysSo() {
        let h = makeHub([modeApp("p", modes: [.remoteNotification], state: .suspended)])
        _ = h.command(.push(PushRequest(bundleIdentifier: "p", payload: #"{"aps":{"content-available":1}}"#)), at: .zero)
        _ = h.timerFired(PluginTimer(.remoteNotification, "budget/1"), app: "p", at: .seconds(30))
        let late = h.request(.remoteNotificationCompleted(id: 1, result: .newData), from: "p", at: .seconds(31)).0
        #expect(refusalReason(late) == "push 1's completion came after its budget of 30s ran out")
    }

    @Test func visiblePushesAwaitingCompletionAreBoundedAndTheForgottenOnesSaySo() {
        let h = makeHub([app("p", state: .active)])
        let n = RemoteNotificationPlugin.maximumAwaitingVisible
        for i in 0...n { _ = h.command(.push(PushRequest(bundleIdentifier: "p", payload: alert)), at: .seconds(i)) }
        // Push 1 fell out when push n+1 came; push 2 is still awaited.
        let first = h.request(.remoteNotificationCompleted(id: 1, result: .noData), from: "p", at: .seconds(n + 1)).0
        #expect(refusalReason(first).contains("no longer awaited"), "\(first)")
        #expect(h.request(.remoteNotificationCompleted(id: 2, result: .noData), from: "p", at: .seconds(n + 1)).0 == .ok)
        #expect(h.request(.remoteNotificationCompleted(id: UInt64(n + 1), result: .noData), from: "p", at: .seconds(n + 1)).0 == .ok)
    }

    @Test func endedPushesAreRememberedUpToTheBound() {
        let h = makeHub([app("p", state: .active)])
        let n = RemoteNotificationPlugin.rememberedEnds
        for i in 1...(n + 1) {
            _ = h.command(.push(PushRequest(bundleIdentifier: "p", payload: alert)), at: .seconds(i))
            _ = h.request(.remoteNotificationCompleted(id: UInt64(i), result: .noData), from: "p", at: .seconds(i))
        }
        let oldest = h.request(.remoteNotificationCompleted(id: 1, result: .noData), from: "p", at: .seconds(n + 2)).0
        #expect(refusalReason(oldest) == "no push 1 was delivered to this app", "the oldest end is forgotten past the bound")
        let second = h.request(.remoteNotificationCompleted(id: 2, result: .noData), from: "p", at: .seconds(n + 2)).0
        #expect(refusalReason(second).contains("called twice"))
    }

    // MARK: fetch and BGTask completions

    @Test func lateFetchAndTaskCompletionsNameTheirCause() {
        let h = makeHub([app("f", modes: [.fetch, .processing], ids: ["f.clean"], state: .active)])
        _ = h.request(.fetchSetMinimumInterval(.minimum), from: "f", at: .zero)
        _ = h.appMoved("f", from: .active, to: .background, runningCode: true, at: .zero)
        _ = h.timerFired(PluginTimer(.fetch, "tick"), app: nil, at: .seconds(900))
        #expect(h.request(.fetchCompleted(id: 1, result: .newData), from: "f", at: .seconds(901)).0 == .ok)
        #expect(refusalReason(h.request(.fetchCompleted(id: 1, result: .newData), from: "f", at: .seconds(902)).0).contains("called twice"))
        _ = h.command(.fetchNow(bundleIdentifier: "f"), at: .seconds(1000))
        _ = h.timerFired(PluginTimer(.fetch, "budget"), app: "f", at: .seconds(1030))
        #expect(refusalReason(h.request(.fetchCompleted(id: 2, result: .newData), from: "f", at: .seconds(1031)).0).contains("after the fetch budget"))

        _ = h.request(.bgRegister(identifier: "f.clean"), from: "f", at: .seconds(1100))
        #expect(refusalReason(h.request(.bgTaskCompleted(identifier: "f.clean", success: true), from: "f", at: .seconds(1100)).0)
                == "no task f.clean is running in this app")
        _ = h.request(.bgSubmit(BGTaskRequestInfo(kind: .processing, identifier: "f.clean")), from: "f", at: .seconds(1100))
        _ = h.command(.bgTaskRun(bundleIdentifier: "f", identifier: "f.clean"), at: .seconds(1100))
        _ = h.timerFired(PluginTimer(.processing, "end/f.clean"), app: "f", at: .seconds(1400))
        #expect(refusalReason(h.request(.bgTaskCompleted(identifier: "f.clean", success: true), from: "f", at: .seconds(1401)).0)
                .contains("after its budget"))
    }

    // MARK: due work runs at once

    @Test func pluggingInRunsAProcessingTaskInTheSameStep() {
        let h = makeHub([app("t", modes: [.processing], ids: ["t.clean"], state: .active)])
        _ = h.command(.devicePower(plugged: false), at: .zero)
        _ = h.request(.bgRegister(identifier: "t.clean"), from: "t", at: .zero)
        _ = h.request(.bgSubmit(BGTaskRequestInfo(kind: .processing, identifier: "t.clean", requiresExternalPower: true)), from: "t", at: .zero)
        _ = h.appMoved("t", from: .active, to: .background, runningCode: true, at: .zero)
        let plugged = h.command(.devicePower(plugged: true), at: .seconds(3600)).1
        #expect(delivered(plugged) == ["t BGTask launch(t.clean)"], "no timer to wait for: it runs now")
    }

    @Test func goingOnlineRunsANetworkTaskInTheSameStep() {
        let h = makeHub([app("t", modes: [.processing], ids: ["t.sync"], state: .active)])
        _ = h.command(.deviceNetwork(.none), at: .zero)
        _ = h.request(.bgRegister(identifier: "t.sync"), from: "t", at: .zero)
        _ = h.request(.bgSubmit(BGTaskRequestInfo(kind: .processing, identifier: "t.sync", requiresNetworkConnectivity: true)), from: "t", at: .zero)
        _ = h.appMoved("t", from: .active, to: .background, runningCode: true, at: .zero)
        #expect(delivered(h.command(.deviceNetwork(.cellular), at: .seconds(60)).1) == ["t BGTask launch(t.sync)"])
    }

    @Test func aTaskNotYetDueIsArmedNotRun() {
        let h = makeHub([app("t", modes: [.processing], ids: ["t.clean"], state: .active)])
        _ = h.command(.devicePower(plugged: false), at: .zero)
        _ = h.request(.bgRegister(identifier: "t.clean"), from: "t", at: .zero)
        _ = h.request(.bgSubmit(BGTaskRequestInfo(kind: .processing, identifier: "t.clean", earliestBegin: 600, requiresExternalPower: true)),
                      from: "t", at: .zero)
        _ = h.appMoved("t", from: .active, to: .background, runningCode: true, at: .zero)
        let plugged = h.command(.devicePower(plugged: true), at: .seconds(60)).1
        #expect(delivered(plugged).isEmpty)
        #expect(plugged.contains(.startTimer(app: nil, timer: PluginTimer(.processing, "tick"), after: .seconds(540))))
    }

    @Test func refreshBackOnRunsAnOverdueFetchInTheSameStep() {
        let h = makeHub([app("f", modes: [.fetch])])
        _ = h.request(.fetchSetMinimumInterval(.minimum), from: "f", at: .zero)
        _ = h.command(.settingsLowPower(true), at: .zero)
        #expect(delivered(h.command(.settingsLowPower(false), at: .seconds(1000)).1) == ["f performFetch"])
    }
}
