import AppHostProtocol

/// What a ``LocationManager`` tells its delegate, like `CLLocationManagerDelegate`.
/// Methods run on the main queue and have empty defaults.
@MainActor
public protocol LocationManagerDelegate: AnyObject {
    /// New fixes, oldest first (`locationManager(_:didUpdateLocations:)`).
    func didUpdateLocations(_ manager: LocationManager, _ locations: [LocationFix])
    /// The app's location authorization changed (`locationManagerDidChangeAuthorization(_:)`).
    func didChangeAuthorization(_ manager: LocationManager, _ status: LocationAuthorization)
    /// The device entered a monitored region (`locationManager(_:didEnterRegion:)`).
    func didEnterRegion(_ manager: LocationManager, _ region: CircularRegion)
    /// The device left a monitored region (`locationManager(_:didExitRegion:)`).
    func didExitRegion(_ manager: LocationManager, _ region: CircularRegion)
    /// A region could not be monitored (`locationManager(_:monitoringDidFailFor:withError:)`).
    func monitoringDidFail(_ manager: LocationManager, for region: CircularRegion?, error: LocationError)
}

extension LocationManagerDelegate {
    /// Default: does nothing.
    public func didUpdateLocations(_ manager: LocationManager, _ locations: [LocationFix]) {}
    /// Default: does nothing.
    public func didChangeAuthorization(_ manager: LocationManager, _ status: LocationAuthorization) {}
}

/// Location updates, like `CLLocationManager`. Fixes come from `apphost location
/// set|route`; authorization from `apphost privacy`. Updates reach a backgrounded
/// app only while it runs, unless it declares the `location` background mode, is
/// always-authorized and sets ``allowsBackgroundLocationUpdates``, in which case
/// they keep it running.
///
/// Create managers on the main actor (before ``ApplicationMain(delegate:)`` too,
/// e.g. as a stored property of the app delegate); every live manager receives the
/// app's fixes and authorization changes. Calls ask the host and block until it answers.
@MainActor
public final class LocationManager {
    /// Receives fixes and authorization changes; held weakly.
    public weak var delegate: (any LocationManagerDelegate)?

    /// The app's location authorization as last heard from the host (shared by
    /// all managers); `notDetermined` until a request or a change says otherwise.
    public var authorizationStatus: LocationAuthorization { router.locationAuthorization }

    /// The most recent fix received, if any.
    public private(set) var location: LocationFix?

    /// Whether ``startUpdatingLocation()`` succeeded and ``stopUpdatingLocation()`` was not called since.
    public private(set) var isUpdatingLocation = false

    private var allowsBackground = false
    let router: ServiceRouter

    /// A manager with no delegate yet.
    public convenience init() {
        self.init(router: .shared)
    }

    init(router: ServiceRouter) {
        self.router = router
        router.register(self)
    }

    // MARK: Authorization

    /// Asks for when-in-use authorization (`requestWhenInUseAuthorization()`);
    /// ``authorizationStatus`` holds the host's answer when this returns, and the
    /// delegates hear of a change afterwards on the main queue. The host never
    /// prompts: `apphost privacy grant location <id>` decides.
    public func requestWhenInUseAuthorization() {
        requestAuthorization(always: false)
    }

    /// Asks for always authorization (`requestAlwaysAuthorization()`); see
    /// ``requestWhenInUseAuthorization()`` (`apphost privacy grant location-always <id>`).
    public func requestAlwaysAuthorization() {
        requestAuthorization(always: true)
    }

    private func requestAuthorization(always: Bool) {
        let request = ServiceRequest.locationRequestAuthorization(always: always)
        do throws(ServiceError) {
            let reply = try router.request(request)
            guard case .authorization(let status) = reply else {
                throw ServiceRouter.unexpected(reply, to: request)
            }
            router.authorizationChanged(to: status, notifyAlways: false, deferred: true)
        } catch {
            router.logFailure(of: request.apiName, error)
        }
    }

    // MARK: Updates

    /// Starts location updates (`startUpdatingLocation()`); the current fix, if
    /// any, follows as a delegate call.
    /// - Throws: ``ServiceError`` when the app is not authorized.
    public func startUpdatingLocation() throws(ServiceError) {
        try router.requestOK(.locationStart)
        isUpdatingLocation = true
    }

    /// Stops location updates (`stopUpdatingLocation()`); a failure is logged to stderr.
    public func stopUpdatingLocation() {
        router.requestLoggingFailure(.locationStop)
        isUpdatingLocation = false
    }

    /// Whether updates may continue in the background
    /// (`allowsBackgroundLocationUpdates`). Setting it asks the host; setting it to
    /// true without `location` in `UIBackgroundModes` is a programmer error: as on
    /// iOS, it raises `NSInternalInconsistencyException` and the app aborts
    /// (`EXC_CRASH (SIGABRT)`; the host's report names the exception). The value
    /// changes only when the host accepts it. Use
    /// ``setAllowsBackgroundLocationUpdates(_:)`` to see the outcome of other failures.
    public var allowsBackgroundLocationUpdates: Bool {
        get { allowsBackground }
        set { try? setAllowsBackgroundLocationUpdates(newValue) }
    }

    /// Sets ``allowsBackgroundLocationUpdates`` and throws what the host refuses (a
    /// lost connection, say). True without the `location` mode does not return: the
    /// host answers with iOS's exception and the app aborts.
    public func setAllowsBackgroundLocationUpdates(_ value: Bool) throws(ServiceError) {
        let request = ServiceRequest.locationAllowsBackgroundUpdates(value)
        do {
            try router.requestOK(request)
        } catch {
            router.logFailure(of: "\(request.apiName) = \(value)", error)
            throw error
        }
        allowsBackground = value
    }

    // MARK: Events

    /// Fixes from the host.
    func didUpdate(_ fixes: [LocationFix]) {
        if let last = fixes.last { location = last }
        delegate?.didUpdateLocations(self, fixes)
    }

    /// The authorization changed (already recorded in the router).
    func authorizationDidChange(_ status: LocationAuthorization) {
        delegate?.didChangeAuthorization(self, status)
    }
}
