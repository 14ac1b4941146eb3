import AppHostProtocol
import Testing
@testable import Plugins

/// `apphost device lock|unlock` through the hub, without processes.
@Suite("Data protection")
struct DataProtectionTests {
    func delivered(_ fx: [ModeEffect]) -> [String] {
        fx.compactMap { if case .deliver(let a, let e, _, _) = $0 { "\(a):\(e.name)" } else { nil } }
    }

    @Test func lockingTellsTheAppsRunningCodeAndClosesCompleteFilesWhenTheGraceEnds() {
        let h = makeHub([modeApp("a", state: .active), modeApp("b", state: .suspended), modeApp("c", state: .notRunning)])
        let (result, fx) = h.command(.deviceLock(true), at: .zero)
        #expect((try? result.get())?.contains("device locked") == true)
        #expect(delivered(fx) == ["a:protectedDataWillBecomeUnavailable"], "a suspended app gets nothing, as on iOS")
        #expect(fx.contains(.lockGrace(.seconds(10))), "Apple: the class key is discarded 10 s after the lock")
        #expect(!fx.contains { if case .protectData = $0 { true } else { false } }, "nothing closes during the grace")
        #expect(fx.contains(.persistSetting(key: "device.locked", value: "on")))
        #expect(h.request(.protectedDataAvailability, from: "a", at: .zero).0 == .protectedDataAvailable(true))
        let (_, again) = h.command(.deviceLock(true), at: .zero)
        #expect(!again.contains { if case .lockGrace = $0 { true } else { false } }, "locking a locked device changes nothing")

        #expect(h.lockGraceEnded(at: .seconds(10)) == [.protectData(.locked)])
        #expect(h.request(.protectedDataAvailability, from: "a", at: .seconds(10)).0 == .protectedDataAvailable(false))
        #expect(h.lockGraceEnded(at: .seconds(11)).isEmpty, "a late second end changes nothing")

        let (_, unlock) = h.command(.deviceLock(false), at: .seconds(12))
        let order = unlock.compactMap { effect -> String? in
            switch effect {
            case .deliver: "deliver"
            case .protectData(let level): "protect \(level.rawValue)"
            case .lockGrace(nil): "cancel grace"
            default: nil
            }
        }
        #expect(order == ["cancel grace", "protect open", "deliver"], "the files open, then the app hears of it (the same on every run)")
        #expect(delivered(unlock) == ["a:protectedDataDidBecomeAvailable"])
        #expect(unlock.contains(.persistSetting(key: "device.locked", value: nil)))
        #expect(h.request(.protectedDataAvailability, from: "a", at: .seconds(12)).0 == .protectedDataAvailable(true))
    }

    @Test func anUnlockWithinTheGraceClosesNothing() {
        let h = makeHub([modeApp("a", state: .active)])
        _ = h.command(.deviceLock(true), at: .zero)
        let (_, unlock) = h.command(.deviceLock(false), at: .seconds(3))
        #expect(unlock.contains(.lockGrace(nil)))
        #expect(h.lockGraceEnded(at: .seconds(10)).isEmpty, "a grace timer that fired anyway closes nothing")
        #expect(h.deviceState.protectionLevel == .open)
    }

    @Test func aHostThatStoppedLockedStartsLockedBeforeTheFirstUnlock() {
        let h = makeHub([modeApp("a", state: .active)])
        h.restoreSetting(key: "device.locked", value: "on")
        #expect(h.deviceState.protectionLevel == .lockedSinceBoot, "a boot has no grace: the files are closed from the start")
        let (_, unlock) = h.command(.deviceLock(false), at: .zero)
        #expect(unlock.contains(.protectData(.open)))
        _ = h.command(.deviceLock(true), at: .seconds(1))
        #expect(h.lockGraceEnded(at: .seconds(11)) == [.protectData(.locked)], "after the first unlock, only complete files close")
    }

    @Test(arguments: [
        (DataProtectionLevel.open, FileProtectionClass.complete, false),
        (.open, .completeUntilFirstUserAuthentication, false), (.open, .none, false),
        (.locked, .complete, true), (.locked, .completeUntilFirstUserAuthentication, false), (.locked, .none, false),
        (.open, .completeUnlessOpen, false), (.locked, .completeUnlessOpen, true), (.lockedSinceBoot, .completeUnlessOpen, true),
        (.lockedSinceBoot, .complete, true), (.lockedSinceBoot, .completeUntilFirstUserAuthentication, true),
        (.lockedSinceBoot, .none, false),
    ])
    func whichClassesCloseAtWhichLevel(level: DataProtectionLevel, protection: FileProtectionClass, closed: Bool) {
        #expect(level.closes(protection) == closed)
    }
}
