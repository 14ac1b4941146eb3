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
    /// The device is short of memory, like `applicationDidReceiveMemoryWarning(_:)`: free
    /// caches and anything else that can be made again, or jetsam may end the app (a
    /// suspended app first, then the others). Sent only while the app runs code; a
    /// suspended app gets none. ``Application/didReceiveMemoryWarningNotification`` is
    /// posted after it returns.
    func applicationDidReceiveMemoryWarning(_ application: Application)
    /// The device locked (`applicationProtectedDataWillBecomeUnavailable(_:)`): files
    /// written with `.completeFileProtection` are closed to the app (opening one fails
    /// with `EACCES`; already when this runs: iOS's grace of a few seconds is not given)
    /// until ``protectedDataDidBecomeAvailable(_:)``.
    func protectedDataWillBecomeUnavailable(_ application: Application)
    /// The device was unlocked (`applicationProtectedDataDidBecomeAvailable(_:)`): protected files open again.
    func protectedDataDidBecomeAvailable(_ application: Application)
    /// The host issued a device token (hex) after
    /// ``Application/registerForRemoteNotifications()``.
    func didRegisterForRemoteNotifications(_ application: Application, deviceToken: String)
    /// ``Application/registerForRemoteNotifications()`` failed: the host refused
    /// (e.g. no `aps-environment` entitlement) or could not answer.
    func didFailToRegisterForRemoteNotifications(_ application: Application, error: ServiceError)
    /// The host gives the app a chance to fetch new content in the background
    /// (`application(_:performFetchWithCompletionHandler:)`), after
    /// ``Application/setMinimumBackgroundFetchInterval(_:)`` asked for fetches.
    ///
    /// Call `completion` once, with what the fetch found, as soon as it is done: at
    /// once or later, from any thread. The host keeps the app running until then
    /// (within the fetch budget; after it the app is killed), and a fetch that finds
    /// `newData` quickly is scheduled more often. The callback is acknowledged when
    /// this method returns; the completion reaches the host after that. A second
    /// call is logged to stderr and ignored.
    func performFetch(_ application: Application, completion: @escaping @Sendable (FetchResult) -> Void)
    /// A remote notification arrived
    /// (`application(_:didReceiveRemoteNotification:fetchCompletionHandler:)`):
    /// a silent (`content-available`) push delivered in the background, which the
    /// host keeps the app running for until `completion` is called (within the
    /// budget), or a notification that arrived while the app was in front.
    ///
    /// Call `completion` once, at once or later, from any thread; a second call is
    /// logged to stderr and ignored. The callback is acknowledged when this method
    /// returns; the completion reaches the host after that.
    func didReceiveRemoteNotification(_ application: Application, userInfo: RemoteNotification,
                                      completion: @escaping @Sendable (FetchResult) -> Void)
    /// Events are waiting for background session `identifier`
    /// (`application(_:handleEventsForBackgroundURLSession:completionHandler:)`): the
    /// app was launched or woken in the background because the session's tasks
    /// finished.
    ///
    /// Make the ``BackgroundURLSession`` with that identifier here if the app has not
    /// yet (events for it are held until it exists) and keep `completion`; the
    /// session's delegate then gets the task events, and
    /// ``BackgroundURLSessionDelegate/urlSessionDidFinishEvents(forBackgroundURLSession:)``
    /// when they are all delivered: call `completion` there (once, from any thread).
    /// The host keeps the app running until then (within the budget) and may
    /// suspend it right after. A second call is logged to stderr and ignored.
    func handleEventsForBackgroundURLSession(_ application: Application, identifier: String,
                                             completion: @escaping @Sendable () -> Void)
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
    public func applicationDidReceiveMemoryWarning(_ application: Application) {}
    /// Default: does nothing.
    public func protectedDataWillBecomeUnavailable(_ application: Application) {}
    /// Default: does nothing.
    public func protectedDataDidBecomeAvailable(_ application: Application) {}
    /// Default: does nothing.
    public func didRegisterForRemoteNotifications(_ application: Application, deviceToken: String) {}
    /// Default: does nothing.
    public func didFailToRegisterForRemoteNotifications(_ application: Application, error: ServiceError) {}
    /// Default: calls `completion(.noData)` at once.
    public func performFetch(_ application: Application, completion: @escaping @Sendable (FetchResult) -> Void) {
        completion(.noData)
    }
    /// Default: calls `completion(.noData)` at once.
    public func didReceiveRemoteNotification(_ application: Application, userInfo: RemoteNotification,
                                             completion: @escaping @Sendable (FetchResult) -> Void) {
        completion(.noData)
    }
    /// Default: calls `completion` at once.
    public func handleEventsForBackgroundURLSession(_ application: Application, identifier: String,
                                                    completion: @escaping @Sendable () -> Void) {
        completion()
    }
}
