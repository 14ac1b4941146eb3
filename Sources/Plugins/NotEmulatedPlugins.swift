import AppHostProtocol

// Modes AppHost knows and accepts in a manifest but does not emulate. Each is a
// plugin so the table is complete and `apphost lint` can say so.

private func notEmulatedFinding(_ mode: BackgroundMode, _ app: LintSubject, _ why: String, deprecated: Bool = false) -> [LintFinding] {
    var out = [LintFinding(.warning, file: app.manifestPath, key: "UIBackgroundModes", mode: mode.rawValue,
                           "background mode \"\(mode.rawValue)\" is not emulated by AppHost: \(why)")]
    if deprecated {
        out.append(LintFinding(.warning, file: app.manifestPath, key: "UIBackgroundModes", mode: mode.rawValue,
                               "background mode \"\(mode.rawValue)\" is deprecated: iOS no longer honours it"))
    }
    return out
}

/// `newsstand-content`: Newsstand downloads (deprecated with Newsstand, iOS 9).
public struct NewsstandPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .newsstandContent }
    public var emulation: ModeEmulation { .notEmulated("Newsstand was removed in iOS 9; use background URLSession transfers") }
    public var summary: String { "Newsstand issue downloads" }
    public func lint(_ app: LintSubject) -> [LintFinding] {
        notEmulatedFinding(mode, app, "Newsstand was removed in iOS 9; use background transfers", deprecated: true)
    }
}

/// `network-authentication`: hotspot helpers (NEHotspotHelper).
public struct NetworkAuthenticationPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .networkAuthentication }
    public var emulation: ModeEmulation { .notEmulated("NEHotspotHelper needs a special entitlement and Wi-Fi hardware") }
    public var summary: String { "Wi-Fi hotspot authentication (NEHotspotHelper)" }
    public func lint(_ app: LintSubject) -> [LintFinding] {
        notEmulatedFinding(mode, app, "NEHotspotHelper needs the com.apple.developer.networking.HotspotHelper entitlement and Wi-Fi hardware")
    }
}

/// `nearby-interaction`: UWB sessions with accessories.
public struct NearbyInteractionPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .nearbyInteraction }
    public var emulation: ModeEmulation { .notEmulated("Nearby Interaction needs UWB hardware") }
    public var summary: String { "UWB ranging with accessories (Nearby Interaction)" }
    /// `NSNearbyInteractionUsageDescription` (iOS 15): the text of the prompt iOS shows
    /// before the first session; Apple's key reference names it for every session.
    public func lint(_ app: LintSubject) -> [LintFinding] {
        notEmulatedFinding(mode, app, "Nearby Interaction ranging needs UWB hardware")
            + app.missingUsageDescriptions(["NSNearbyInteractionUsageDescription"], mode: mode, severity: .warning) { _ in
                "iOS has no text for the permission prompt it shows before an interaction session starts; add it"
            }
    }
}

/// `push-to-talk`: PushToTalk framework channels.
public struct PushToTalkPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .pushToTalk }
    public var emulation: ModeEmulation { .notEmulated("the PushToTalk framework's channel manager is not modelled") }
    public var summary: String { "walkie-talkie channels (PushToTalk framework)" }
    public func lint(_ app: LintSubject) -> [LintFinding] {
        notEmulatedFinding(mode, app, "the PushToTalk framework's channel manager and its pushes are not modelled")
    }
}
