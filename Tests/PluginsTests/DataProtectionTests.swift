import AppHostProtocol
import Testing
@testable import Plugins

/// `apphost device lock|unlock` through the hub, without processes.
@Suite("Data protection")
struct DataProtectionTests {
    func delivered(_ fx: [ModeEffect]) -> [String] {
        fx.compactMap { if case .deliver(let a, let e, _, _) = $0 { "\(a):\(e.name)" } else { nil } }
    }

    @Test func lockingClosesCompleteFilesThenTellsTheAppsRunningCode() {
        let h = makeHub([modeApp("a", state: .active), modeApp("b", state: .suspended), modeApp("c", state: .notRunning)])
        let (result, fx) = h.command(.deviceLock(true), at: .zero)
        #expect((try? result.get())?.contains("device locked") == true)
        #expect(delivered(fx) == ["a:protectedDataWillBecomeUnavailable"], "a suspended app gets nothing, as on iOS")
        let order = fx.compactMap { effect -> String? in
            switch effect {
            case .deliver: "deliver"
            case .protectData(let level): "protect \(level.rawValue)"
            default: nil
            }
        }
        #expect(order == ["protect locked", "deliver"], "the files close, then the app hears of it (the same on every run)")
        #expect(fx.contains(.persistSetting(key: "device.locked", value: "on")))
        #expect(h.request(.protectedDataAvailability, from: "a", at: .zero).0 == .protectedDataAvailable(false))
        let (_, again) = h.command(.deviceLock(true), at: .zero)
        #expect(!again.contains { if case .protectData = $0 { true } else { false } }, "locking a locked device changes nothing")
        let (_, unlock) = h.command(.deviceLock(false), at: .seconds(1))
        #expect(delivered(unlock) == ["a:protectedDataDidBecomeAvailable"])
        #expect(unlock.contains(.protectData(.open)))
        #expect(unlock.contains(.persistSetting(key: "device.locked", value: nil)))
        #expect(h.request(.protectedDataAvailability, from: "a", at: .zero).0 == .protectedDataAvailable(true))
    }

    @Test func aHostThatStoppedLockedStartsLockedBeforeTheFirstUnlock() {
        let h = makeHub([modeApp("a", state: .active)])
        h.restoreSetting(key: "device.locked", value: "on")
        #expect(h.deviceState.protectionLevel == .lockedSinceBoot)
        let (_, unlock) = h.command(.deviceLock(false), at: .zero)
        #expect(unlock.contains(.protectData(.open)))
        let (_, lock) = h.command(.deviceLock(true), at: .seconds(1))
        #expect(lock.contains(.protectData(.locked)), "after the first unlock, only complete files close")
    }

    @Test(arguments: [
        (DataProtectionLevel.open, FileProtectionClass.complete, false),
        (.open, .completeUntilFirstUserAuthentication, false), (.open, .none, false),
        (.locked, .complete, true), (.locked, .completeUntilFirstUserAuthentication, false), (.locked, .none, false),
        (.lockedSinceBoot, .complete, true), (.lockedSinceBoot, .completeUntilFirstUserAuthentication, true),
        (.lockedSinceBoot, .none, false),
    ])
    func whichClassesCloseAtWhichLevel(level: DataProtectionLevel, protection: FileProtectionClass, closed: Bool) {
        #expect(level.closes(protection) == closed)
    }
}
