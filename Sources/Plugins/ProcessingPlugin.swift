import AppHostProtocol

/// `processing`: BGProcessingTask. Registered so the policy table is complete;
/// scheduling and delivery come with the BGTaskScheduler issue.
public struct ProcessingPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .processing }
    public var emulation: ModeEmulation { .registered("BGTaskScheduler scheduling and delivery are not built yet (the fetch/BGTaskScheduler issue)") }
    public var summary: String { "deferrable background processing (BGProcessingTask)" }
    public var wakeSources: [String] { ["the BGTaskScheduler (not built yet)"] }

    public func lint(_ app: LintSubject) -> [LintFinding] {
        guard app.manifest.bgTaskIdentifiers.isEmpty else { return [] }
        return [LintFinding(.error, file: app.manifestPath, key: "BGTaskSchedulerPermittedIdentifiers", mode: mode.rawValue,
            "background mode \"processing\" needs BGTaskSchedulerPermittedIdentifiers: without it every BGTaskScheduler.register fails (notPermitted)")]
    }
}
