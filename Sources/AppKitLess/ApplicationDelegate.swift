import AppHostProtocol

/// What an app implements to take part in the iOS lifecycle, like
/// `UIApplicationDelegate`. Every method runs on the main queue (the main actor)
/// and has an empty default, so an app implements only what it needs.
///
/// The host waits for each method to return before it moves the app on; a method
/// that does not return in time breaks a watchdog rule and gets the app killed.
@MainActor
public protocol ApplicationDelegate: AnyObject {
    /// The app has launched (into `.inactive`, or `.background` for a background launch).
    /// The result is accepted for UIKit parity and otherwise ignored.
    func didFinishLaunching(_ application: Application, options: LaunchOptions) -> Bool
    /// The app is about to leave `.active` (home button, interruption).
    func willResignActive(_ application: Application)
    /// The app is now in the background. Begin a background task here to keep
    /// running after this method returns; without one the app is suspended.
    func didEnterBackground(_ application: Application)
    /// The app is about to come back from the background to `.inactive`.
    func willEnterForeground(_ application: Application)
    /// The app is now `.active`.
    func didBecomeActive(_ application: Application)
    /// The app is about to be terminated; the process exits when this returns.
    func willTerminate(_ application: Application)
    /// The host issued a device token (hex) after
    /// ``Application/registerForRemoteNotifications()``.
    func didRegisterForRemoteNotifications(_ application: Application, deviceToken: String)
    /// ``Application/registerForRemoteNotifications()`` failed: the host refused
    /// (e.g. no `aps-environment` entitlement) or could not answer.
    func didFailToRegisterForRemoteNotifications(_ application: Application, error: ServiceError)
}

extension ApplicationDelegate {
    /// Default: returns `true`.
    public func didFinishLaunching(_ application: Application, options: LaunchOptions) -> Bool { true }
    /// Default: does nothing.
    public func willResignActive(_ application: Application) {}
    /// Default: does nothing.
    public func didEnterBackground(_ application: Application) {}
    /// Default: does nothing.
    public func willEnterForeground(_ application: Application) {}
    /// Default: does nothing.
    public func didBecomeActive(_ application: Application) {}
    /// Default: does nothing.
    public func willTerminate(_ application: Application) {}
    /// Default: does nothing.
    public func didRegisterForRemoteNotifications(_ application: Application, deviceToken: String) {}
    /// Default: does nothing.
    public func didFailToRegisterForRemoteNotifications(_ application: Application, error: ServiceError) {}
}
