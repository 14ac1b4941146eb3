import AppHostProtocol
@testable import Plugins

/// An installed app as the plugins see it, for hub tests.
func modeApp(_ id: BundleID, modes: [BackgroundMode] = [], protocols: [String] = [], ids: [String] = [],
             entitlements: [String] = [], state: AppState) -> ModeApp {
    var m = Manifest(bundleIdentifier: id.rawValue, executable: "X", name: "X", sourcePath: "/x/Info.plist")
    m.backgroundModes = modes
    m.externalAccessoryProtocols = protocols
    m.bgTaskIdentifiers = ids
    return ModeApp(bundleIdentifier: id, manifest: m, entitlements: entitlements, container: "/c/\(id)",
                   state: state, isRunningCode: state != .suspended && state != .notRunning)
}

/// A hub with `apps` installed and, unless not running, in their state.
func makeHub(_ apps: [ModeApp]) -> ModeHub {
    let h = ModeHub(profile: .default)
    for a in apps {
        _ = h.install(a)
        if a.state != .notRunning {
            _ = h.appMoved(a.bundleIdentifier, from: .notRunning, to: a.state, runningCode: a.isRunningCode, at: .zero)
        }
    }
    return h
}
