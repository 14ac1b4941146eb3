import Foundation

// Significant-change location and region (geofence) monitoring, as Core Location has
// them: `CLCircularRegion`, `CLError`'s codes for a region that cannot be monitored,
// and the bounds an app's values are held to.

/// A circular geographic region, as `CLCircularRegion`: a centre, a radius in metres
/// and an identifier unique among the app's regions.
public struct CircularRegion: Codable, Sendable, Hashable {
    /// `identifier`: a second region with the same one replaces the first.
    public var identifier: String
    /// The centre's latitude, degrees.
    public var latitude: Double
    /// The centre's longitude, degrees.
    public var longitude: Double
    /// `radius`, metres.
    public var radius: Double
    /// `notifyOnEntry` (default true).
    public var notifyOnEntry: Bool
    /// `notifyOnExit` (default true).
    public var notifyOnExit: Bool

    /// A region centred on `latitude`,`longitude` with `radius` metres.
    public init(identifier: String, latitude: Double, longitude: Double, radius: Double,
                notifyOnEntry: Bool = true, notifyOnExit: Bool = true) {
        self.identifier = identifier
        self.latitude = latitude
        self.longitude = longitude
        self.radius = radius
        self.notifyOnEntry = notifyOnEntry
        self.notifyOnExit = notifyOnExit
    }

    /// Whether `fix` lies inside (on the boundary counts as inside).
    public func contains(_ fix: LocationFix) -> Bool {
        LocationMonitoringBounds.distance(fromLatitude: latitude, longitude: longitude,
                                          toLatitude: fix.latitude, longitude: fix.longitude) <= radius
    }
}

/// `CLError.Code` values a location manager reports to its delegate, on the wire by name.
public enum LocationErrorCode: String, Codable, Sendable, CaseIterable {
    /// `kCLErrorDenied`: the app is not authorized for the service.
    case denied
    /// `kCLErrorRegionMonitoringDenied`: the user denied region monitoring for the app.
    case regionMonitoringDenied
    /// `kCLErrorRegionMonitoringFailure`: too many regions, or a radius too large (Apple,
    /// `CLError.Code.regionMonitoringFailure`), or (AppHost) a region no device could monitor.
    case regionMonitoringFailure
}

/// The bounds on what an app asks of region and significant-change monitoring.
public enum LocationMonitoringBounds {
    /// Regions one app may monitor at once (Core Location's limit of 20 per app).
    public static let maximumRegions = 20
    /// `maximumRegionMonitoringDistance`, metres. Apple documents the property, not its
    /// value on a device; AppHost's own figure (UNCONFIRMED), larger than any region an
    /// app has cause to ask for.
    public static let maximumRadius: Double = 1_000_000
    /// A region identifier's length in UTF-8 bytes (AppHost's own bound; iOS names none).
    public static let maximumIdentifierBytes = 256
    /// Distance the device must move before the next significant-change update, metres
    /// (Apple: "as soon as the device moves 500 meters or more from its previous notification").
    public static let significantDistance: Double = 500
    /// Least time between two significant-change updates (Apple: "should not expect
    /// notifications more frequently than once every five minutes").
    public static let significantInterval: Duration = .seconds(300)

    /// Mean Earth radius, metres (IUGG).
    static let earthRadius = 6_371_008.8

    /// Great-circle distance in metres (haversine).
    public static func distance(fromLatitude lat1: Double, longitude lon1: Double,
                                toLatitude lat2: Double, longitude lon2: Double) -> Double {
        let φ1 = lat1 * .pi / 180, φ2 = lat2 * .pi / 180
        let Δφ = (lat2 - lat1) * .pi / 180, Δλ = (lon2 - lon1) * .pi / 180
        let a = sin(Δφ / 2) * sin(Δφ / 2) + cos(φ1) * cos(φ2) * sin(Δλ / 2) * sin(Δλ / 2)
        return 2 * earthRadius * asin(min(1, a.squareRoot()))
    }

    /// Distance in metres between two fixes.
    public static func distance(_ a: LocationFix, _ b: LocationFix) -> Double {
        distance(fromLatitude: a.latitude, longitude: a.longitude, toLatitude: b.latitude, longitude: b.longitude)
    }

    /// Why `region` cannot be monitored, in iOS's terms; nil when it can.
    public static func problem(with region: CircularRegion) -> String? {
        if region.identifier.isEmpty { return "the region's identifier is empty" }
        if region.identifier.utf8.count > maximumIdentifierBytes {
            return "the region's identifier is \(region.identifier.utf8.count) bytes (at most \(maximumIdentifierBytes))"
        }
        guard region.latitude.isFinite, region.longitude.isFinite, (-90...90).contains(region.latitude),
              (-180...180).contains(region.longitude) else {
            return "the region's centre \(region.latitude),\(region.longitude) is not a coordinate (latitude -90...90, longitude -180...180)"
        }
        guard region.radius.isFinite, region.radius > 0 else {
            return "the region's radius \(region.radius) m is not a positive distance"
        }
        if region.radius > maximumRadius {
            return "the region's radius \(region.radius) m is larger than maximumRegionMonitoringDistance (\(Int(maximumRadius)) m)"
        }
        return nil
    }
}
