import AppHostProtocol

/// `fetch`: background app refresh. Registered so the policy table is complete;
/// the scheduler and `performFetch` delivery come with the fetch issue.
public struct FetchPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .fetch }
    public var emulation: ModeEmulation { .registered("the fetch scheduler and performFetch delivery are not built yet (the fetch/BGTaskScheduler issue)") }
    public var summary: String { "periodic background fetch (performFetch)" }
    public var wakeSources: [String] { ["the fetch scheduler (not built yet)"] }

    public func lint(_ app: LintSubject) -> [LintFinding] {
        var out: [LintFinding] = []
        if app.manifest.bgTaskIdentifiers.isEmpty {
            out.append(LintFinding(.warning, file: app.manifestPath, key: "UIBackgroundModes", mode: mode.rawValue,
                "background mode \"fetch\" is deprecated since iOS 13 (setMinimumBackgroundFetchInterval); schedule a BGAppRefreshTask and list its identifier in BGTaskSchedulerPermittedIdentifiers"))
        }
        return out
    }
}
