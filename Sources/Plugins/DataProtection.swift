import AppHostProtocol

/// Device lock and data protection (`apphost device lock|unlock`): the apps running
/// code hear `protectedDataWillBecomeUnavailable` / `protectedDataDidBecomeAvailable`,
/// and the host closes or opens the files written with protection (``ModeEffect/protectData(_:)``:
/// the host takes a closed file from the app's uid, which has no capability to take it
/// back). Handled by the hub, since no background mode owns it.
enum DataProtection {
    /// Locks (`lock`) or unlocks the device; the message for the user.
    static func lock(_ lock: Bool, in ctx: ModeContext) -> String {
        let before = ctx.state(DeviceState.self)
        guard before.locked != lock else { return "the device is already \(lock ? "locked" : "unlocked")" }
        ctx.update(DeviceState.self) { state in
            state.locked = lock
            if !lock { state.unlockedSinceBoot = true }
        }
        ctx.emit(.persistSetting(key: "device.locked", value: lock ? "on" : nil))
        // The files change first, then the apps hear of it: what a handler does then sees
        // the new state on every run (the app runs in parallel with the host). iOS keeps
        // complete files readable a few seconds after the lock; AppHost gives no grace.
        ctx.emit(.protectData(ctx.state(DeviceState.self).protectionLevel))
        for app in ctx.sortedApps where app.isRunningCode {
            ctx.emit(.deliver(app: app.bundleIdentifier, .protectedDataAvailability(!lock), wake: .ifRunning,
                              because: lock ? "the device locked" : "the device unlocked"))
        }
        return lock ? "device locked: files with complete protection are closed to their apps until `apphost device unlock`"
            : "device unlocked: protected files are open again"
    }
}
