import Foundation

/// Why the system cancelled a background transfer, as the value of
/// `NSURLErrorBackgroundTaskCancelledReasonKey` in the cancelled error's `userInfo`
/// (`URLError.BackgroundTaskCancelledReason`). The raw values are Foundation's
/// `NSURLErrorCancelledReason…` numbers (`NSURLError.h`). iOS's third reason,
/// `insufficientSystemResources` (2), is not produced by AppHost.
public enum BackgroundTaskCancelledReason: Int, Codable, Sendable, CaseIterable {
    /// `NSURLErrorCancelledReasonUserForceQuitApplication`: the user terminated the app
    /// from the app switcher.
    case userForceQuitApplication = 0
    /// `NSURLErrorCancelledReasonBackgroundUpdatesDisabled`: Background App Refresh was
    /// turned off for the app.
    case backgroundUpdatesDisabled = 1

    /// The case's name (`userForceQuitApplication`), for events and logs.
    public var name: String {
        switch self {
        case .userForceQuitApplication: "userForceQuitApplication"
        case .backgroundUpdatesDisabled: "backgroundUpdatesDisabled"
        }
    }
}
