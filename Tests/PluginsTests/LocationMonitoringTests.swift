import AppHostProtocol
import Foundation
import Testing
@testable import Plugins

/// Significant-change location and region monitoring through the hub, without processes.
@Suite("Location monitoring")
struct LocationMonitoringTests {
    /// Stockholm's centre, and points about 1.1 km and 2.2 km north of it.
    let home = LocationFix(latitude: 59.3293, longitude: 18.0686)
    let near = LocationFix(latitude: 59.3393, longitude: 18.0686)
    let far = LocationFix(latitude: 59.3493, longitude: 18.0686)

    func hub(_ state: AppState = .active, auth: PrivacyService? = .locationAlways) -> ModeHub {
        let h = makeHub([modeApp("a", state: state)])
        if let auth { _ = h.command(.privacy(action: .grant, service: .service(auth), bundleIdentifier: "a"), at: .zero) }
        return h
    }

    func delivered(_ fx: [ModeEffect]) -> [(String, WakePolicy)] {
        fx.compactMap { if case .deliver(_, let e, let w, _) = $0 { (e.name, w) } else { nil } }
    }

    func failures(_ fx: [ModeEffect]) -> [(String?, LocationErrorCode)] {
        fx.compactMap {
            if case .deliver(_, .locationMonitoringFailed(let r, let code, _), let w, _) = $0, w == .ifRunning { (r?.identifier, code) } else { nil }
        }
    }

    func region(_ id: String = "office", radius: Double = 200, at fix: LocationFix? = nil) -> CircularRegion {
        let c = fix ?? near
        return CircularRegion(identifier: id, latitude: c.latitude, longitude: c.longitude, radius: radius)
    }

    // MARK: regions

    @Test func crossingARegionEntersThenExitsAndWakesASuspendedApp() {
        let h = hub()
        _ = h.command(.locationSet(home), at: .zero)
        #expect(h.request(.locationMonitorRegion(region()), from: "a", at: .zero).0 == .ok)
        _ = h.appMoved("a", from: .active, to: .suspended, runningCode: false, at: .seconds(1))
        let (_, enter) = h.command(.locationSet(near), at: .seconds(2))
        #expect(delivered(enter).map(\.0) == ["didEnterRegion(office)"])
        #expect(delivered(enter).map(\.1) == [.wake])
        let (_, stay) = h.command(.locationSet(LocationFix(latitude: 59.3394, longitude: 18.0686)), at: .seconds(3))
        #expect(delivered(stay).isEmpty, "moving inside crosses nothing")
        let (_, exit) = h.command(.locationSet(far), at: .seconds(4))
        #expect(delivered(exit).map(\.0) == ["didExitRegion(office)"])
    }

    @Test func theAnswerCountsAnAppWokenForARegionCrossing() throws {
        let h = hub()
        _ = h.command(.locationSet(home), at: .zero)
        _ = h.request(.locationMonitorRegion(region()), from: "a", at: .zero)
        _ = h.appMoved("a", from: .active, to: .suspended, runningCode: false, at: .seconds(1))
        let (answer, fx) = h.command(.locationSet(near), at: .seconds(2))
        #expect(delivered(fx).map(\.0) == ["didEnterRegion(office)"])
        #expect(try answer.get().contains("delivered to 1 app(s)"), "the woken app is counted: \(answer)")
    }

    @Test func registeringInsideARegionSendsNoEntry() {
        let h = hub()
        _ = h.command(.locationSet(near), at: .zero)
        _ = h.request(.locationMonitorRegion(region()), from: "a", at: .zero)
        let (_, fx) = h.command(.locationSet(LocationFix(latitude: 59.3392, longitude: 18.0686)), at: .seconds(1))
        #expect(delivered(fx).isEmpty)
        let (_, out) = h.command(.locationSet(far), at: .seconds(2))
        #expect(delivered(out).map(\.0) == ["didExitRegion(office)"])
    }

    @Test func notifyOnEntryFalseSendsOnlyExits() {
        let h = hub()
        _ = h.command(.locationSet(home), at: .zero)
        var r = region()
        r.notifyOnEntry = false
        _ = h.request(.locationMonitorRegion(r), from: "a", at: .zero)
        #expect(delivered(h.command(.locationSet(near), at: .seconds(1)).1).isEmpty)
        #expect(delivered(h.command(.locationSet(far), at: .seconds(2)).1).map(\.0) == ["didExitRegion(office)"])
    }

    @Test func aTerminatedAppIsRelaunchedForACrossingUnlessTheUserForceQuitIt() {
        let h = hub()
        _ = h.command(.locationSet(home), at: .zero)
        _ = h.request(.locationMonitorRegion(region()), from: "a", at: .zero)
        _ = h.appExited("a", byUser: false, at: .seconds(1))
        let (_, fx) = h.command(.locationSet(near), at: .seconds(2))
        #expect(delivered(fx).map(\.1) == [.launch(.location)], "a system kill keeps the relaunch")
        _ = h.appExited("a", byUser: true, at: .seconds(3))
        let (_, quit) = h.command(.locationSet(far), at: .seconds(4))
        #expect(delivered(quit).isEmpty, "after a force-quit, nothing until the user opens it")
        _ = h.userLaunched("a", at: .seconds(5))
        _ = h.appExited("a", byUser: false, at: .seconds(6))
        #expect(delivered(h.command(.locationSet(near), at: .seconds(7)).1).map(\.1) == [.launch(.location)])
    }

    @Test func whenInUseAuthorizationReachesTheAppOnlyInTheForeground() {
        let h = hub(auth: .location)
        _ = h.command(.locationSet(home), at: .zero)
        #expect(h.request(.locationMonitorRegion(region()), from: "a", at: .zero).0 == .ok)
        #expect(delivered(h.command(.locationSet(near), at: .seconds(1)).1).map(\.1) == [.ifRunning])
        _ = h.appMoved("a", from: .active, to: .background, runningCode: true, at: .seconds(2))
        #expect(delivered(h.command(.locationSet(far), at: .seconds(3)).1).isEmpty)
    }

    @Test func noAuthorizationFailsWithRegionMonitoringDenied() {
        let h = hub(auth: nil)
        let (reply, fx) = h.request(.locationMonitorRegion(region()), from: "a", at: .zero)
        #expect(reply == .ok, "a failure goes to the delegate, not to the call")
        #expect(failures(fx).map(\.1) == [.regionMonitoringDenied])
        #expect(h.request(.locationMonitoredRegions, from: "a", at: .zero).0 == .regions([]))
    }

    @Test func aReusedIdentifierReplacesTheRegion() {
        let h = hub()
        _ = h.request(.locationMonitorRegion(region(radius: 100)), from: "a", at: .zero)
        let (_, fx) = h.request(.locationMonitorRegion(region(radius: 300)), from: "a", at: .zero)
        #expect(failures(fx).isEmpty)
        #expect(h.request(.locationMonitoredRegions, from: "a", at: .zero).0 == .regions([region(radius: 300)]))
    }

    @Test func theTwentyFirstRegionFailsAndAReplacementStillSucceeds() {
        let h = hub()
        for i in 0..<LocationMonitoringBounds.maximumRegions {
            let (_, fx) = h.request(.locationMonitorRegion(region("r\(i)")), from: "a", at: .zero)
            #expect(failures(fx).isEmpty)
        }
        let (_, fx) = h.request(.locationMonitorRegion(region("r20")), from: "a", at: .zero)
        #expect(failures(fx).map(\.0) == ["r20"])
        #expect(failures(fx).map(\.1) == [.regionMonitoringFailure])
        #expect(failures(h.request(.locationMonitorRegion(region("r3", radius: 50)), from: "a", at: .zero).1).isEmpty)
        _ = h.request(.locationStopMonitoringRegion(identifier: "r0"), from: "a", at: .zero)
        #expect(failures(h.request(.locationMonitorRegion(region("r20")), from: "a", at: .zero).1).isEmpty)
        guard case .regions(let all) = h.request(.locationMonitoredRegions, from: "a", at: .zero).0 else { Issue.record("no list"); return }
        #expect(all.count == 20)
    }

    @Test(arguments: [
        (LocationMonitoringBounds.maximumRadius + 1, "larger than maximumRegionMonitoringDistance"),
        (0, "not a positive distance"), (-5, "not a positive distance"),
        (Double.nan, "not a positive distance"), (Double.infinity, "not a positive distance"),
    ])
    func aRadiusOutOfRangeFails(radius: Double, why: String) {
        let h = hub()
        let (reply, fx) = h.request(.locationMonitorRegion(region(radius: radius)), from: "a", at: .zero)
        #expect(reply == .ok)
        #expect(failures(fx).map(\.1) == [.regionMonitoringFailure])
        let reason = fx.compactMap { if case .deliver(_, .locationMonitoringFailed(_, _, let r), _, _) = $0 { r } else { nil } }
        #expect(reason.first?.contains(why) == true, "\(reason)")
    }

    @Test func theLargestRadiusIsAccepted() {
        let h = hub()
        #expect(failures(h.request(.locationMonitorRegion(region(radius: LocationMonitoringBounds.maximumRadius)), from: "a", at: .zero).1).isEmpty)
    }

    @Test func aCentreThatIsNotACoordinateFails() {
        let h = hub()
        for (lat, lon) in [(91.0, 0.0), (0.0, -181.0), (Double.nan, 0.0)] {
            let r = CircularRegion(identifier: "x", latitude: lat, longitude: lon, radius: 10)
            #expect(failures(h.request(.locationMonitorRegion(r), from: "a", at: .zero).1).map(\.1) == [.regionMonitoringFailure])
        }
    }

    @Test func identifiersAreBoundedAndAFailureNamesAtMostTheBound() {
        let h = hub()
        let limit = LocationMonitoringBounds.maximumIdentifierBytes
        #expect(failures(h.request(.locationMonitorRegion(region(String(repeating: "é", count: limit / 2))), from: "a", at: .zero).1).isEmpty)
        let (_, fx) = h.request(.locationMonitorRegion(region(String(repeating: "é", count: 100_000))), from: "a", at: .zero)
        let named = failures(fx)
        #expect(named.map(\.1) == [.regionMonitoringFailure])
        #expect(named.first?.0?.utf8.count == limit)
        #expect(failures(h.request(.locationMonitorRegion(region("")), from: "a", at: .zero).1).count == 1)
    }

    // MARK: significant changes

    @Test func significantChangesNeedAuthorizationButNoMode() {
        #expect(hub(auth: nil).request(.locationSignificantChanges(true), from: "a", at: .zero).0 != .ok)
        #expect(hub().request(.locationSignificantChanges(true), from: "a", at: .zero).0 == .ok, "no location mode declared")
    }

    @Test func significantChangesComeAfter500MetresAndFiveMinutes() {
        let h = hub()
        _ = h.command(.locationSet(home), at: .zero)
        let (_, start) = h.request(.locationSignificantChanges(true), from: "a", at: .zero)
        #expect(delivered(start).map(\.0) == ["didUpdateLocations(1)"], "the current fix first")
        _ = h.appMoved("a", from: .active, to: .suspended, runningCode: false, at: .seconds(1))
        let small = LocationFix(latitude: 59.3320, longitude: 18.0686) // ~300 m
        #expect(delivered(h.command(.locationSet(small), at: .seconds(400)).1).isEmpty)
        let (_, moved) = h.command(.locationSet(near), at: .seconds(401))
        #expect(delivered(moved).map(\.1) == [.wake], "always-authorized: wakes the suspended app")
        // Far enough again, but too soon: waits out the five minutes.
        let (_, soon) = h.command(.locationSet(far), at: .seconds(460))
        #expect(delivered(soon).isEmpty)
        #expect(soon.contains(.startTimer(app: "a", timer: PluginTimer(.location, LocationPlugin.significantTimer), after: .seconds(241))))
        let fired = h.timerFired(PluginTimer(.location, LocationPlugin.significantTimer), app: "a", at: .seconds(701))
        #expect(delivered(fired).map(\.0) == ["didUpdateLocations(1)"])
    }

    @Test func significantChangesRelaunchATerminatedAppButNotAfterAForceQuit() {
        let h = hub()
        _ = h.command(.locationSet(home), at: .zero)
        _ = h.request(.locationSignificantChanges(true), from: "a", at: .zero)
        _ = h.appExited("a", byUser: true, at: .seconds(1))
        #expect(delivered(h.command(.locationSet(near), at: .seconds(600)).1).isEmpty)
        _ = h.userLaunched("a", at: .seconds(601))
        _ = h.appExited("a", byUser: false, at: .seconds(602))
        #expect(delivered(h.command(.locationSet(far), at: .seconds(1200)).1).map(\.1) == [.launch(.location)])
    }

    @Test func stoppingEndsUpdatesAndReinstallingForgetsEverything() {
        let h = hub()
        _ = h.command(.locationSet(home), at: .zero)
        _ = h.request(.locationSignificantChanges(true), from: "a", at: .zero)
        _ = h.request(.locationMonitorRegion(region()), from: "a", at: .zero)
        _ = h.request(.locationSignificantChanges(false), from: "a", at: .zero)
        let (_, fx) = h.command(.locationSet(near), at: .seconds(600))
        #expect(delivered(fx).map(\.0) == ["didEnterRegion(office)"], "the region stays")
        _ = h.install(modeApp("a", state: .notRunning))
        #expect(delivered(h.command(.locationSet(far), at: .seconds(1200)).1).isEmpty)
        #expect(h.request(.locationMonitoredRegions, from: "a", at: .seconds(1200)).0 == .regions([]))
    }

    @Test func distanceIsTheGreatCircle() {
        let d = LocationMonitoringBounds.distance(home, near)
        #expect(abs(d - 1112) < 2, "0.01° of latitude is about 1.11 km, got \(d)")
        #expect(LocationMonitoringBounds.distance(home, home) == 0)
    }
}
