import AppHostProtocol

/// A circular geographic region to monitor, as `CLCircularRegion`.
public typealias CircularRegion = AppHostProtocol.CircularRegion

/// A Core Location error as the delegate receives it (`CLError`): its code and the
/// host's reason in words.
public struct LocationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `CLError.Code`.
    public typealias Code = LocationErrorCode
    /// `CLError.code`.
    public let code: Code
    /// Why, in the terms of the iOS rule.
    public let reason: String

    /// An error with `code` for `reason`.
    public init(_ code: Code, reason: String) {
        self.code = code
        self.reason = reason
    }

    /// `CODE: reason`.
    public var description: String { "\(code.rawValue): \(reason)" }
}

extension LocationManagerDelegate {
    /// Default: does nothing.
    public func didEnterRegion(_ manager: LocationManager, _ region: CircularRegion) {}
    /// Default: does nothing.
    public func didExitRegion(_ manager: LocationManager, _ region: CircularRegion) {}
    /// Default: does nothing.
    public func monitoringDidFail(_ manager: LocationManager, for region: CircularRegion?, error: LocationError) {}
}

extension LocationManager {
    /// `maximumRegionMonitoringDistance`: the largest radius a region may have, metres.
    public var maximumRegionMonitoringDistance: Double { LocationMonitoringBounds.maximumRadius }

    /// Starts significant-change updates (`startMonitoringSignificantLocationChanges()`):
    /// fixes arrive through ``LocationManagerDelegate/didUpdateLocations(_:_:)`` when the
    /// device has moved about 500 m, at most once every five minutes; the current fix, if
    /// any, comes first. No background mode is needed: with always authorization a
    /// suspended app is woken and a terminated one relaunched in the background
    /// (`LaunchOptions.reason == .location`; start the service again there), unless the
    /// user terminated it from the app switcher. With when-in-use authorization updates
    /// arrive only in the foreground.
    /// - Throws: ``ServiceError`` when the app has no location authorization.
    public func startMonitoringSignificantLocationChanges() throws(ServiceError) {
        try router.requestOK(.locationSignificantChanges(true))
    }

    /// Stops significant-change updates (`stopMonitoringSignificantLocationChanges()`);
    /// a failure is logged to stderr.
    public func stopMonitoringSignificantLocationChanges() {
        router.requestLoggingFailure(.locationSignificantChanges(false))
    }

    /// Starts monitoring `region` (`startMonitoring(for:)`): crossings arrive through
    /// ``LocationManagerDelegate/didEnterRegion(_:_:)`` and
    /// ``LocationManagerDelegate/didExitRegion(_:_:)``, waking or relaunching the app as
    /// significant-change updates do. A region of an identifier already monitored
    /// replaces it. A region that cannot be monitored (a radius above
    /// ``maximumRegionMonitoringDistance``, more than 20 regions, no authorization) is
    /// reported to ``LocationManagerDelegate/monitoringDidFail(_:for:error:)``, as iOS does.
    public func startMonitoring(for region: CircularRegion) {
        router.requestLoggingFailure(.locationMonitorRegion(region))
    }

    /// Stops monitoring `region` (`stopMonitoring(for:)`), matched by identifier.
    public func stopMonitoring(for region: CircularRegion) {
        router.requestLoggingFailure(.locationStopMonitoringRegion(identifier: region.identifier))
    }

    /// The regions the app monitors (`monitoredRegions`), shared by all its managers and
    /// kept across its launches; asks the host (empty if it cannot answer, logged).
    public var monitoredRegions: Set<CircularRegion> {
        let request = ServiceRequest.locationMonitoredRegions
        do throws(ServiceError) {
            let reply = try router.request(request)
            guard case .regions(let regions) = reply else { throw ServiceRouter.unexpected(reply, to: request) }
            return Set(regions)
        } catch {
            router.logFailure(of: request.apiName, error)
            return []
        }
    }

    /// A region crossing or a monitoring failure from the host.
    func monitoringEvent(_ event: ServiceEvent) {
        switch event {
        case .locationRegionCrossed(let region, let entered):
            if entered { delegate?.didEnterRegion(self, region) } else { delegate?.didExitRegion(self, region) }
        case .locationMonitoringFailed(let region, let code, let reason):
            delegate?.monitoringDidFail(self, for: region, error: LocationError(code, reason: reason))
        default:
            break
        }
    }
}
