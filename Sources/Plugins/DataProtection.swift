import AppHostProtocol
import HostConfig

/// Device lock and data protection (`apphost device lock|unlock`): the apps running
/// code hear `protectedDataWillBecomeUnavailable` / `protectedDataDidBecomeAvailable`,
/// and the host closes or opens the files written with protection (``ModeEffect/protectData(_:)``:
/// the host takes a closed file from the app's uid, which has no capability to take it
/// back). Handled by the hub, since no background mode owns it.
enum DataProtection {
    /// How long after a lock the files close: Apple Platform Security, "Data Protection
    /// classes": "Shortly after the user locks a device (10 seconds, if the Require
    /// Password setting is Immediately), the decrypted class key is discarded".
    static let lockGrace: Duration = .seconds(10)

    /// Locks (`lock`) or unlocks the device; the message for the user.
    static func lock(_ lock: Bool, in ctx: ModeContext) -> String {
        let before = ctx.state(DeviceState.self)
        guard before.locked != lock else { return "the device is already \(lock ? "locked" : "unlocked")" }
        ctx.update(DeviceState.self) { state in
            state.locked = lock
            state.lockGraceOver = false
            if !lock { state.unlockedSinceBoot = true }
        }
        ctx.emit(.persistSetting(key: "device.locked", value: lock ? "on" : nil))
        // A lock: the apps hear of it at once and have the grace to finish with their
        // files, which close when it ends (``graceEnded(in:)``). An unlock: the files open
        // first, then the apps hear of it, so what a handler does sees them open on every
        // run (the app runs in parallel with the host).
        if lock {
            ctx.emit(.lockGrace(lockGrace))
        } else {
            ctx.emit(.lockGrace(nil))
            ctx.emit(.protectData(.open))
        }
        for app in ctx.sortedApps where app.isRunningCode {
            ctx.emit(.deliver(app: app.bundleIdentifier, .protectedDataAvailability(!lock), wake: .ifRunning,
                              because: lock ? "the device locked" : "the device unlocked"))
        }
        return lock ? "device locked: files with complete protection close to their apps \(DurationText.format(Double(lockGrace.components.seconds))) after the lock, until `apphost device unlock`"
            : "device unlocked: protected files are open again"
    }

    /// The grace after a lock is over: the complete class's files close.
    static func graceEnded(in ctx: ModeContext) {
        guard ctx.state(DeviceState.self).locked, !ctx.state(DeviceState.self).lockGraceOver else { return }
        ctx.update(DeviceState.self) { $0.lockGraceOver = true }
        ctx.emit(.protectData(ctx.state(DeviceState.self).protectionLevel))
    }
}
