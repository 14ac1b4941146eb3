import AppHostProtocol
import Foundation
import Testing
@testable import Plugins

#if canImport(Glibc)
import Glibc
#endif

/// Each plugin's rules through the hub, without processes: what it asks the host to
/// do for an app that declares its mode and for one that does not.
@Suite("Plugin rules")
struct PluginRulesTests {
    func app(_ id: BundleID, modes: [BackgroundMode] = [], protocols: [String] = [], entitlements: [String] = [],
             state: AppState = .active) -> ModeApp {
        modeApp(id, modes: modes, protocols: protocols, entitlements: entitlements, state: state)
    }

    func hub(_ apps: ModeApp...) -> ModeHub { makeHub(apps) }

    func delivered(_ fx: [ModeEffect]) -> [(BundleID, String, WakePolicy)] {
        fx.compactMap { if case .deliver(let a, let e, let w, _) = $0 { (a, e.name, w) } else { nil } }
    }
    func refused(_ fx: [ModeEffect]) -> [String] {
        fx.compactMap { if case .refused(let a, let m, _) = $0 { "\(a):\(m.rawValue)" } else { nil } }
    }
    func kills(_ fx: [ModeEffect]) -> [TerminationCode?] {
        fx.compactMap { if case .kill(_, _, let code, _) = $0 { code } else { nil } }
    }

    // MARK: audio

    @Test func audioWithTheModeKeepsPlayingThenStopsKeepingTheAppAfterIdle() {
        let h = hub(app("a", modes: [.audio]))
        let (reply, fx) = h.request(.audioPlay(samples: Data(count: 16_000), sampleRate: 8000), from: "a", at: .zero)
        #expect(reply == .ok)
        #expect(fx.contains(.beginActivity(app: "a", name: AudioPlugin.activity)))
        #expect(fx.contains(.startTimer(app: "a", timer: PluginTimer(.audio, "idle"), after: .seconds(11))), "1 s of frames + 10 s idle")
        let home = h.appMoved("a", from: .inactive, to: .background, runningCode: true, at: .milliseconds(100))
        #expect(delivered(home).isEmpty, "no interruption with the mode")
        let fired = h.timerFired(PluginTimer(.audio, "idle"), app: "a", at: .seconds(11))
        #expect(fired.contains(.endActivity(app: "a", name: AudioPlugin.activity)))
    }

    @Test func audioWithoutTheModeIsInterruptedOnGoingHomeAndRefusedInTheBackground() {
        let h = hub(app("a"))
        let (_, fx) = h.request(.audioPlay(samples: Data(count: 16_000), sampleRate: 8000), from: "a", at: .zero)
        #expect(!fx.contains { if case .beginActivity = $0 { true } else { false } }, "nothing keeps it running")
        let home = h.appMoved("a", from: .inactive, to: .background, runningCode: true, at: .milliseconds(100))
        #expect(delivered(home).map(\.1) == ["audioInterruption(began)"])
        #expect(refused(home) == ["a:audio"])
        let (reply, _) = h.request(.audioPlay(samples: Data(count: 2), sampleRate: 8000), from: "a", at: .seconds(1))
        guard case .refused = reply else { Issue.record("background play without the mode: \(reply)"); return }
    }

    // MARK: location

    @Test func allowsBackgroundLocationUpdatesWithoutTheModeIsAnsweredWithIOSsException() {
        let h = hub(app("l"))
        let (reply, fx) = h.request(.locationAllowsBackgroundUpdates(true), from: "l", at: .zero)
        #expect(reply == .raise(exception: LocationPlugin.backgroundUpdatesWithoutMode))
        #expect(LocationPlugin.backgroundUpdatesWithoutMode.name == .internalInconsistency)
        #expect(kills(fx).isEmpty, "the app aborts itself, as on iOS")
        #expect(refused(fx) == ["l:location"])
        #expect(h.request(.locationAllowsBackgroundUpdates(false), from: "l", at: .zero).0 == .ok, "false is no error")
    }

    @Test func backgroundLocationNeedsModeAlwaysAuthorizationAndTheFlag() {
        let h = hub(app("l", modes: [.location]), app("w"))
        _ = h.command(.privacy(action: .grant, service: .service(.locationAlways), bundleIdentifier: "l"), at: .zero)
        _ = h.command(.privacy(action: .grant, service: .service(.location), bundleIdentifier: "w"), at: .zero)
        #expect(h.request(.locationRequestAuthorization(always: true), from: "l", at: .zero).0 == .authorization(.always))
        #expect(h.request(.locationRequestAuthorization(always: false), from: "w", at: .zero).0 == .authorization(.whenInUse))
        _ = h.request(.locationStart, from: "w", at: .zero)
        _ = h.request(.locationStart, from: "l", at: .zero)
        let (_, fx) = h.request(.locationAllowsBackgroundUpdates(true), from: "l", at: .zero)
        #expect(fx.contains(.beginActivity(app: "l", name: LocationPlugin.activity)))
        // Both go home; "w" is then suspended.
        _ = h.appMoved("l", from: .inactive, to: .background, runningCode: true, at: .zero)
        _ = h.appMoved("w", from: .inactive, to: .background, runningCode: true, at: .zero)
        _ = h.appMoved("w", from: .background, to: .suspended, runningCode: false, at: .zero)
        let (message, set) = h.command(.locationSet(LocationFix(latitude: 48.85, longitude: 2.35)), at: .seconds(1))
        #expect((try? message.get())?.contains("delivered to 1 app") == true)
        #expect(delivered(set).map(\.0) == ["l"])
        #expect(refused(set) == ["w:location"])
    }

    @Test func locationStartWithoutAuthorizationIsRefused() {
        let h = hub(app("l", modes: [.location]))
        guard case .refused = h.request(.locationStart, from: "l", at: .zero).0 else { Issue.record("expected refusal"); return }
    }

    @Test func aRouteIsPlayedOnTheHostClock() throws {
        let h = hub(app("l"))
        _ = h.command(.privacy(action: .grant, service: .service(.location), bundleIdentifier: "l"), at: .zero)
        _ = h.request(.locationStart, from: "l", at: .zero)
        let fixes = (0..<3).map { LocationFix(latitude: Double($0), longitude: 0) }
        let (_, fx) = h.command(.locationRoute(name: "r", fixes: fixes, interval: 2), at: .zero)
        #expect(delivered(fx).count == 1)
        #expect(fx.contains(.startTimer(app: nil, timer: PluginTimer(.location, "route"), after: .seconds(2))))
        let second = h.timerFired(PluginTimer(.location, "route"), app: nil, at: .seconds(2))
        #expect(delivered(second).count == 1)
        let third = h.timerFired(PluginTimer(.location, "route"), app: nil, at: .seconds(4))
        #expect(!third.contains { if case .startTimer = $0 { true } else { false } }, "the route is over")
    }

    // MARK: voip

    @Test func voipPushToAnAppWithoutTheModeIsRefused() {
        let h = hub(app("v"))
        let (result, _) = h.command(.voipPush(bundleIdentifier: "v", payload: "{}"), at: .zero)
        #expect((try? result.get()) == nil)
    }

    @Test func anUnreportedVoIPPushKillsWithBadCallAndRepeatedFailuresStopDelivery() {
        let h = hub(app("v", modes: [.voip], state: .notRunning))
        for n in 1...VoIPPlugin.maximumUnreported {
            let (result, fx) = h.command(.voipPush(bundleIdentifier: "v", payload: "{\"n\":\(n)}"), at: .zero)
            #expect((try? result.get()) != nil)
            #expect(delivered(fx).map(\.2) == [.launch(.voipPush)])
            let fired = h.timerFired(PluginTimer(.voip, "report"), app: "v", at: .seconds(7))
            #expect(kills(fired) == [.badCall])
            _ = h.appExited("v", byUser: false, at: .seconds(7))
        }
        let (result, fx) = h.command(.voipPush(bundleIdentifier: "v", payload: "{}"), at: .seconds(8))
        #expect((try? result.get()) == nil, "delivery stopped")
        #expect(delivered(fx).isEmpty)
        // A reinstall resets it.
        _ = h.install(app("v", modes: [.voip], state: .notRunning))
        #expect((try? h.command(.voipPush(bundleIdentifier: "v", payload: "{}"), at: .seconds(9)).0.get()) != nil)
    }

    @Test func aReportedCallKeepsTheAppRunningUntilItEnds() {
        let h = hub(app("v", modes: [.voip], state: .background))
        _ = h.command(.voipPush(bundleIdentifier: "v", payload: "{}"), at: .zero)
        let (_, fx) = h.request(.voipReportIncomingCall(uuid: "U", handle: "alice"), from: "v", at: .seconds(1))
        #expect(fx.contains(.beginActivity(app: "v", name: "VoIP call U")))
        #expect(fx.contains(.cancelTimer(app: "v", timer: PluginTimer(.voip, "report"))))
        #expect(kills(h.timerFired(PluginTimer(.voip, "report"), app: "v", at: .seconds(7))).isEmpty)
        let (_, end) = h.request(.voipEndCall(uuid: "U"), from: "v", at: .seconds(60))
        #expect(end.contains(.endActivity(app: "v", name: "VoIP call U")))
    }

    // MARK: bluetooth

    @Test func backgroundScansNeedTheModeAndAServiceFilter() {
        let h = hub(app("filtered", modes: [.bluetoothCentral]), app("nilfilter", modes: [.bluetoothCentral]), app("nomode"))
        _ = h.request(.bleScan(services: ["180d"]), from: "filtered", at: .zero)
        _ = h.request(.bleScan(services: nil), from: "nilfilter", at: .zero)
        _ = h.request(.bleScan(services: ["180D"]), from: "nomode", at: .zero)
        for id: BundleID in ["filtered", "nilfilter", "nomode"] {
            _ = h.appMoved(id, from: .inactive, to: .background, runningCode: true, at: .zero)
            _ = h.appMoved(id, from: .background, to: .suspended, runningCode: false, at: .zero)
        }
        let (_, fx) = h.command(.bleAdd(BLEPeripheral(id: "hr", services: ["180D"])), at: .seconds(1))
        #expect(delivered(fx).map { "\($0.0) \($0.2)" } == ["filtered wake"])
        #expect(refused(fx) == ["nomode:bluetooth-central"])
    }

    func discoveries(_ fx: [ModeEffect]) -> [String] {
        fx.compactMap { effect -> String? in
            guard case .deliver(let app, .bleDiscovered(let p), let wake, _) = effect else { return nil }
            return "\(app) \(p.id) \(wake)"
        }
    }

    func goHome(_ h: ModeHub, _ id: BundleID, at t: Duration = .zero) {
        _ = h.appMoved(id, from: .active, to: .inactive, runningCode: true, at: t)
        _ = h.appMoved(id, from: .inactive, to: .background, runningCode: true, at: t)
        _ = h.appMoved(id, from: .background, to: .suspended, runningCode: false, at: t)
    }

    func comeToFront(_ h: ModeHub, _ id: BundleID, at t: Duration) -> [ModeEffect] {
        h.appMoved(id, from: .suspended, to: .background, runningCode: true, at: t)
            + h.appMoved(id, from: .background, to: .inactive, runningCode: true, at: t)
            + h.appMoved(id, from: .inactive, to: .active, runningCode: true, at: t)
    }

    /// Issue 33, point 8: a foreground scan finds what is in range, peripherals that came
    /// while the app could not hear them included, and nothing it already found.
    @Test func peripheralsAddedWhileAtHomeAreDiscoveredOnComingToTheFront() {
        let h = hub(app("nomode"), app("nilfilter", modes: [.bluetoothCentral]), app("filtered", modes: [.bluetoothCentral]))
        _ = h.command(.bleAdd(BLEPeripheral(id: "early", services: ["180D"])), at: .zero)
        _ = h.request(.bleScan(services: ["180D"]), from: "nomode", at: .zero)
        _ = h.request(.bleScan(services: nil), from: "nilfilter", at: .zero)
        _ = h.request(.bleScan(services: ["180D"]), from: "filtered", at: .zero)
        for id: BundleID in ["nomode", "nilfilter", "filtered"] { goHome(h, id) }
        let (_, added) = h.command(.bleAdd(BLEPeripheral(id: "hrm", services: ["180D"])), at: .seconds(1))
        #expect(discoveries(added) == ["filtered hrm wake"], "only a filtered scan with the mode hears it at home")
        _ = h.command(.bleAdd(BLEPeripheral(id: "thermo", services: ["1809"])), at: .seconds(2))
        // Back in front: what is in range and matches, once; never "early" again.
        #expect(discoveries(comeToFront(h, "nomode", at: .seconds(3))) == ["nomode hrm ifRunning"])
        #expect(discoveries(comeToFront(h, "nilfilter", at: .seconds(3))) == ["nilfilter hrm ifRunning", "nilfilter thermo ifRunning"])
        #expect(discoveries(comeToFront(h, "filtered", at: .seconds(3))).isEmpty, "it discovered hrm at home already")
        // Added in front: discovered at once, once, even when announced again.
        let (_, later) = h.command(.bleAdd(BLEPeripheral(id: "late", services: ["180D"], rssi: -70)), at: .seconds(4))
        #expect(discoveries(later) == ["filtered late ifRunning", "nilfilter late ifRunning", "nomode late ifRunning"])
        let (_, again) = h.command(.bleAdd(BLEPeripheral(id: "late", services: ["180D"], rssi: -40)), at: .seconds(5))
        #expect(discoveries(again).isEmpty, "no duplicate discovery in the same scan")
        #expect(discoveries(h.command(.bleLoad([BLEPeripheral(id: "late", services: ["180D"])]), at: .seconds(6)).1).isEmpty)
    }

    @Test func aScanReportsAPeripheralOnceUntilANewScanStarts() {
        let h = hub(app("c"))
        _ = h.command(.bleAdd(BLEPeripheral(id: "hrm", services: ["180D"])), at: .zero)
        #expect(discoveries(h.request(.bleScan(services: nil), from: "c", at: .zero).1) == ["c hrm ifRunning"])
        let (reply, again) = h.command(.bleAdd(BLEPeripheral(id: "hrm", services: ["180D"], rssi: -45)), at: .milliseconds(500))
        #expect(discoveries(again).isEmpty, "announced again: coalesced into the discovery it had")
        #expect((try? reply.get())?.hasSuffix("discovered by 0 scanning app(s)") == true)
        goHome(h, "c")
        #expect(discoveries(comeToFront(h, "c", at: .seconds(1))).isEmpty, "nothing new came")
        #expect(discoveries(h.request(.bleScan(services: ["180d"]), from: "c", at: .seconds(2)).1) == ["c hrm ifRunning"], "a new scan starts afresh")
        _ = h.request(.bleStopScan, from: "c", at: .seconds(3))
        goHome(h, "c", at: .seconds(3))
        _ = h.command(.bleAdd(BLEPeripheral(id: "thermo", services: ["1809"])), at: .seconds(4))
        #expect(discoveries(comeToFront(h, "c", at: .seconds(5))).isEmpty, "a stopped scan finds nothing")
    }

    @Test func notificationsWakeASuspendedCentralOnlyWithTheMode() {
        let h = hub(app("c", modes: [.bluetoothCentral]), app("n"))
        _ = h.command(.bleAdd(BLEPeripheral(id: "hr", services: ["180D"])), at: .zero)
        #expect(h.request(.bleConnect(peripheral: "hr"), from: "c", at: .zero).0 == .ok)
        #expect(h.request(.bleConnect(peripheral: "hr"), from: "n", at: .zero).0 == .ok)
        for id: BundleID in ["c", "n"] {
            _ = h.appMoved(id, from: .inactive, to: .background, runningCode: true, at: .zero)
            _ = h.appMoved(id, from: .background, to: .suspended, runningCode: false, at: .zero)
        }
        let (_, fx) = h.command(.bleNotify(peripheral: "hr", characteristic: "2a37", value: Data([72])), at: .seconds(1))
        #expect(delivered(fx).map { "\($0.0) \($0.2)" } == ["c wake"])
        #expect(refused(fx) == ["n:bluetooth-central"])
    }

    /// A peripheral that goes away disconnects its apps in bundle-id order, and a world
    /// loaded without several peripherals drops them in id order: the tables are
    /// dictionaries and sets, whose order is the process's hash seed's.
    @Test func disconnectsComeInOneOrderWhateverTheHashSeed() throws {
        let ids: [BundleID] = ["e", "b", "d", "a", "c"]
        let h = makeHub(ids.map { app($0, modes: [.bluetoothCentral]) })
        for p in ["p1", "p4", "p2", "p5", "p3"] { _ = h.command(.bleAdd(BLEPeripheral(id: p, services: ["180D"])), at: .zero) }
        for id in ids {
            for p in ["p1", "p4", "p2", "p5", "p3"] { #expect(h.request(.bleConnect(peripheral: p), from: id, at: .zero).0 == .ok) }
        }
        let (_, removed) = h.command(.bleRemove(id: "p1"), at: .seconds(1))
        #expect(delivered(removed).map(\.0) == ["a", "b", "c", "d", "e"])
        let (_, loaded) = h.command(.bleLoad([BLEPeripheral(id: "p5", services: ["180D"])]), at: .seconds(2))
        let dropped = loaded.compactMap { effect -> String? in
            guard case .deliver(let app, .bleDisconnected(let peripheral), _, _) = effect else { return nil }
            return "\(peripheral) \(app)"
        }
        #expect(dropped == ["p2", "p3", "p4"].flatMap { p in ["a", "b", "c", "d", "e"].map { "\(p) \($0)" } })
    }

    @Test func advertisingContinuesInTheBackgroundOnlyWithTheMode() throws {
        let h = hub(app("p", modes: [.bluetoothPeripheral]), app("q"), app("scanner"))
        _ = h.request(.bleScan(services: nil), from: "scanner", at: .zero)
        let (_, started) = h.request(.bleStartAdvertising(services: ["FFF0"], localName: "P"), from: "p", at: .zero)
        #expect(delivered(started).map(\.0) == ["scanner"], "a foreground scanner discovers it")
        _ = h.request(.bleStartAdvertising(services: ["FFF1"], localName: "Q"), from: "q", at: .zero)
        _ = h.appMoved("p", from: .inactive, to: .background, runningCode: true, at: .zero)
        let q = h.appMoved("q", from: .inactive, to: .background, runningCode: true, at: .zero)
        #expect(refused(q) == ["q:bluetooth-peripheral"])
        let list = try h.command(.bleList, at: .zero).0.get()
        #expect(list.contains("app:p"))
        #expect(list.contains("app:q (advertising paused"))
    }

    // MARK: external accessory

    @Test func accessoryBytesLaunchOnlyAppsWithTheModeAndTheProtocol() {
        let h = hub(app("ea", modes: [.externalAccessory], protocols: ["com.acme.p"], state: .notRunning),
                    app("listed", protocols: ["com.acme.p"], state: .suspended),
                    app("other", modes: [.externalAccessory], protocols: ["com.other"], state: .notRunning))
        _ = h.command(.accessoryConnect(name: "Printer", protocols: ["com.acme.p"]), at: .zero)
        let (result, fx) = h.command(.accessorySend(protocolString: "com.acme.p", bytes: Data("hi".utf8)), at: .zero)
        #expect((try? result.get())?.contains("delivered to: ea") == true)
        #expect(delivered(fx).map { "\($0.0) \($0.2)" } == ["ea launch(AppHostProtocol.LaunchReason.externalAccessory)"])
        #expect(refused(fx) == ["listed:external-accessory"])
        #expect(h.request(.accessoryList, from: "listed", at: .zero).0 == .accessories([Accessory(id: 1, name: "Printer", protocols: ["com.acme.p"])]))
        #expect(h.request(.accessoryList, from: "other", at: .zero).0 == .accessories([]))
    }

    // MARK: remote notifications

    @Test func registrationNeedsTheApsEnvironmentEntitlement() {
        let h = hub(app("with", entitlements: ["aps-environment"]), app("without"))
        guard case .token(let token) = h.request(.registerForRemoteNotifications, from: "with", at: .zero).0 else {
            Issue.record("expected a token"); return
        }
        #expect(token.count == 64 && token.allSatisfy(\.isHexDigit))
        guard case .refused(let reason) = h.request(.registerForRemoteNotifications, from: "without", at: .zero).0 else {
            Issue.record("expected a refusal"); return
        }
        #expect(reason.contains("aps-environment"))
    }

    // MARK: kernel rules

    @Test func kernelDenialsFollowTheDeclaredModes() {
        let none = ModeRegistry.denials(for: [])
        #expect(none.socketFamilies == [Int32(AF_BLUETOOTH)])
        #expect(none.devicePaths.contains("/dev/snd") && none.devicePaths.contains("/dev/ttyUSB*"))
        let audio = ModeRegistry.denials(for: [.audio])
        #expect(!audio.devicePaths.contains("/dev/snd") && audio.devicePaths.contains("/dev/ttyACM*"))
        #expect(ModeRegistry.denials(for: [.bluetoothPeripheral]).socketFamilies.isEmpty)
        #expect(ModeRegistry.denials(for: [.externalAccessory]).devicePaths.allSatisfy { !$0.hasPrefix("/dev/tty") })
    }

    @Test func privacyNeedsAKnownServiceAndABundleToGrant() {
        let h = hub(app("a"))
        #expect((try? h.command(.privacy(action: .grant, service: .service(.location), bundleIdentifier: nil), at: .zero).0.get()) == nil)
        // An unknown service is not a value of the type any more: the CLI and the control
        // socket's decoder refuse it before the hub sees it.
        #expect(PrivacyScope(rawValue: "telepathy") == nil)
        let (ok, fx) = h.command(.privacy(action: .grant, service: .service(.location), bundleIdentifier: "a"), at: .zero)
        #expect((try? ok.get()) != nil)
        #expect(fx.contains(.persistPrivacy(app: "a", service: .location, value: .granted)))
    }
}
