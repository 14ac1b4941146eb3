import AppHostProtocol

// Significant-change location and region monitoring, the location plugin's services
// that need no background mode (docs/decisions/0021-significant-change-and-regions.md: "Significant-change location and region
// monitoring"). iOS keeps both for the app across its process's end: a move that
// crosses a region or travels far enough wakes a suspended app and relaunches a
// terminated one in the background (`LaunchOptions.reason == .location`), with
// always authorization, unless the user force-quit it (then nothing until the user
// opens it again). With when-in-use authorization the events reach it only in the
// foreground. Regions and the service last until the app stops them, is reinstalled
// or uninstalled, or the host restarts (iOS: "until the device reboots").

extension LocationPlugin {
    /// One monitored region and which side of it the device was last on (nil: not known yet).
    struct WatchedRegion: Sendable, Equatable {
        var region: CircularRegion
        var inside: Bool?
    }

    /// An app's significant-change service and regions; kept when its process ends.
    struct Monitoring: Sendable, Equatable {
        var significant = false
        /// The fix the last significant-change update carried, and when (host time).
        var lastSignificant: LocationFix?
        var lastSignificantAt: Duration?
        /// A move of the distance came too soon after the last update: a timer waits out the interval.
        var significantTimer = false
        var regions: [String: WatchedRegion] = [:]
        /// The user terminated it from the switcher: no relaunch until the user launches it.
        var userTerminated = false

        var isEmpty: Bool { !significant && regions.isEmpty }
    }

    struct MonitoringState: PluginState {
        var apps: [BundleID: Monitoring] = [:]
        init() {}
    }

    static let significantTimer = "significant"

    // MARK: requests

    /// The monitoring requests; nil for any other.
    func handleMonitoring(_ request: ServiceRequest, from app: BundleID, in ctx: ModeContext) -> ServiceReply? {
        switch request {
        case .locationSignificantChanges(true):
            let auth = Self.authorization(app, ctx)
            guard auth == .always || auth == .whenInUse else {
                ctx.emit(.note(app: app, "startMonitoringSignificantLocationChanges without authorization (\(auth.rawValue)): no updates"))
                return .refused(reason: "significant-change updates need location authorization (now \(auth.rawValue)); grant it with `apphost privacy grant location-always \(app)`")
            }
            let already = ctx.state(MonitoringState.self).apps[app]?.significant == true
            ctx.update(MonitoringState.self) { $0.apps[app, default: Monitoring()].significant = true }
            ctx.emit(.note(app: app, "significant-change location updates on (\(auth == .always ? "wakes or relaunches the app" : "when-in-use: only while in use"))"))
            // As iOS: the first event is the most recent fix; starting again while on sends none.
            if !already, let fix = ctx.state(State.self).current {
                recordSignificant(fix, app, ctx)
                ctx.emit(.deliver(app: app, .locationUpdate([fix]), wake: .ifRunning, because: "significant-change updates started: the current fix"))
            }
            return .ok
        case .locationSignificantChanges(false):
            if ctx.state(MonitoringState.self).apps[app]?.significantTimer == true {
                ctx.emit(.cancelTimer(app: app, timer: PluginTimer(mode, Self.significantTimer)))
            }
            ctx.update(MonitoringState.self) { state in
                state.apps[app]?.significant = false
                state.apps[app]?.lastSignificant = nil
                state.apps[app]?.lastSignificantAt = nil
                state.apps[app]?.significantTimer = false
            }
            return .ok
        case .locationMonitorRegion(let region):
            startMonitoring(region, app, ctx)
            return .ok
        case .locationStopMonitoringRegion(let identifier):
            ctx.update(MonitoringState.self) { _ = $0.apps[app]?.regions.removeValue(forKey: identifier) }
            return .ok
        case .locationMonitoredRegions:
            let regions = ctx.state(MonitoringState.self).apps[app]?.regions.values.map(\.region) ?? []
            return .regions(regions.sorted { $0.identifier < $1.identifier })
        default:
            return nil
        }
    }

    /// `startMonitoring(for:)`: every failure goes to the app's delegate, as iOS reports it.
    private func startMonitoring(_ region: CircularRegion, _ app: BundleID, _ ctx: ModeContext) {
        func fail(_ code: LocationErrorCode, _ reason: String) {
            ctx.emit(.note(app: app, "region monitoring refused (\(code.rawValue)): \(reason)"))
            ctx.emit(.deliver(app: app, .locationMonitoringFailed(region: Self.reported(region), code: code, reason: reason),
                              wake: .ifRunning, because: "startMonitoring(for:) failed"))
        }
        if let problem = LocationMonitoringBounds.problem(with: region) {
            return fail(.regionMonitoringFailure, problem)
        }
        let auth = Self.authorization(app, ctx)
        guard auth == .always || auth == .whenInUse else {
            return fail(.regionMonitoringDenied, "region monitoring needs location authorization (now \(auth.rawValue)); grant it with `apphost privacy grant location-always \(app)`")
        }
        let regions = ctx.state(MonitoringState.self).apps[app]?.regions ?? [:]
        // Apple: "If an existing region with the same identifier is already being monitored
        // by the app, the old region is replaced by the new one."
        if regions[region.identifier] == nil, regions.count >= LocationMonitoringBounds.maximumRegions {
            return fail(.regionMonitoringFailure, "the app already monitors \(regions.count) regions (at most \(LocationMonitoringBounds.maximumRegions) per app)")
        }
        let inside = ctx.state(State.self).current.map(region.contains)
        ctx.update(MonitoringState.self) { $0.apps[app, default: Monitoring()].regions[region.identifier] = WatchedRegion(region: region, inside: inside) }
        let side = inside.map { $0 ? "inside" : "outside" } ?? "position unknown"
        ctx.emit(.note(app: app, "monitoring region \(region.identifier) (\(region.radius) m; \(side))\(regions[region.identifier] != nil ? ", replacing the region of that identifier" : "")"))
    }

    /// The region as a failure names it: an identifier past the bound is cut to it, so
    /// the answer never grows with what the app sent.
    static func reported(_ region: CircularRegion) -> CircularRegion {
        var region = region
        let limit = LocationMonitoringBounds.maximumIdentifierBytes
        if region.identifier.utf8.count > limit {
            var cut = ""
            for c in region.identifier {
                if cut.utf8.count + String(c).utf8.count > limit { break }
                cut.append(c)
            }
            region.identifier = cut
        }
        return region
    }

    // MARK: the world moves

    /// A new position: region crossings and significant changes for every monitoring app.
    /// `updated` holds the apps the fix already reached as a standard update.
    /// Returns the apps a region or significant-change event was sent to (woken or
    /// launched for it, or running).
    @discardableResult
    func monitoringMoved(to fix: LocationFix, updated: Set<BundleID>, in ctx: ModeContext) -> Set<BundleID> {
        var reached: Set<BundleID> = []
        for (app, m) in ctx.state(MonitoringState.self).apps.sorted(by: { $0.key < $1.key }) where ctx.apps[app] != nil {
            for watched in m.regions.values.sorted(by: { $0.region.identifier < $1.region.identifier }) {
                let inside = watched.region.contains(fix)
                guard watched.inside != inside else { continue }
                ctx.update(MonitoringState.self) { $0.apps[app]?.regions[watched.region.identifier]?.inside = inside }
                // A first position only tells the side: iOS reports crossings, not where the device is.
                guard watched.inside != nil else { continue }
                guard inside ? watched.region.notifyOnEntry : watched.region.notifyOnExit else { continue }
                if deliverMonitored(.locationRegionCrossed(watched.region, entered: inside), to: app, ctx) { reached.insert(app) }
            }
            if m.significant, significantMove(fix, app, alreadyDelivered: updated.contains(app), ctx) { reached.insert(app) }
        }
        return reached
    }

    /// True if the fix was sent for a significant change.
    @discardableResult
    private func significantMove(_ fix: LocationFix, _ app: BundleID, alreadyDelivered: Bool, _ ctx: ModeContext) -> Bool {
        guard let m = ctx.state(MonitoringState.self).apps[app] else { return false }
        if let last = m.lastSignificant, LocationMonitoringBounds.distance(last, fix) < LocationMonitoringBounds.significantDistance { return false }
        if let at = m.lastSignificantAt, ctx.now - at < LocationMonitoringBounds.significantInterval {
            guard !m.significantTimer else { return false }
            ctx.update(MonitoringState.self) { $0.apps[app]?.significantTimer = true }
            ctx.emit(.startTimer(app: app, timer: PluginTimer(mode, Self.significantTimer),
                                 after: LocationMonitoringBounds.significantInterval - (ctx.now - at)))
            return false
        }
        recordSignificant(fix, app, ctx)
        if alreadyDelivered { return false }
        return deliverMonitored(.locationUpdate([fix]), to: app, ctx)
    }

    /// The interval since the last significant-change update has passed: the fix now, if
    /// it is still far enough from that update's.
    func significantTimerFired(app: BundleID, in ctx: ModeContext) {
        ctx.update(MonitoringState.self) { $0.apps[app]?.significantTimer = false }
        guard ctx.state(MonitoringState.self).apps[app]?.significant == true, let fix = ctx.state(State.self).current else { return }
        significantMove(fix, app, alreadyDelivered: false, ctx)
    }

    private func recordSignificant(_ fix: LocationFix, _ app: BundleID, _ ctx: ModeContext) {
        ctx.update(MonitoringState.self) { state in
            state.apps[app]?.lastSignificant = fix
            state.apps[app]?.lastSignificantAt = ctx.now
        }
    }

    /// Delivers a monitoring event under iOS's conditions: always authorization wakes a
    /// suspended app and relaunches a terminated one (not one the user force-quit);
    /// when-in-use reaches it only in the foreground.
    /// True if the event was sent (to a running app, or one woken or launched for it).
    @discardableResult
    private func deliverMonitored(_ event: ServiceEvent, to app: BundleID, _ ctx: ModeContext) -> Bool {
        guard let info = ctx.apps[app] else { return false }
        let auth = Self.authorization(app, ctx)
        switch auth {
        case .always:
            if info.state != .notRunning {
                ctx.emit(.deliver(app: app, event, wake: .wake, because: "region or significant-change monitoring (always-authorized)"))
                return true
            } else if ctx.state(MonitoringState.self).apps[app]?.userTerminated == true, !ctx.profile.locationRelaunchAfterUserTerminate {
                ctx.emit(.note(app: app, "\(event.name) not delivered: the user terminated the app; location events relaunch it only after the user opens it again (profile \(ctx.profile.name))"))
                return false
            } else {
                ctx.emit(.deliver(app: app, event, wake: .launch(.location), because: "region or significant-change monitoring (always-authorized)"))
                return true
            }
        case .whenInUse where info.isForeground:
            ctx.emit(.deliver(app: app, event, wake: .ifRunning, because: "in the foreground (when-in-use)"))
            return true
        default:
            ctx.emit(.note(app: app, "\(event.name) not delivered: \(auth == .whenInUse ? "when-in-use authorization reaches the app only while it is in use" : "no location authorization (\(auth.rawValue))")"))
            return false
        }
    }

    // MARK: the app's life

    func monitoringExited(_ app: BundleID, byUser: Bool, in ctx: ModeContext) {
        guard byUser, ctx.state(MonitoringState.self).apps[app].map({ !$0.isEmpty }) == true else { return }
        ctx.update(MonitoringState.self) { $0.apps[app]?.userTerminated = true }
    }

    func monitoringUserLaunched(_ app: BundleID, in ctx: ModeContext) {
        // Read first: most launches change nothing (an update writes the state back).
        guard ctx.state(MonitoringState.self).apps[app]?.userTerminated == true else { return }
        ctx.update(MonitoringState.self) { $0.apps[app]?.userTerminated = false }
    }

    func monitoringInstalled(_ app: BundleID, in ctx: ModeContext) {
        if ctx.state(MonitoringState.self).apps[app]?.significantTimer == true {
            ctx.emit(.cancelTimer(app: app, timer: PluginTimer(mode, Self.significantTimer)))
        }
        ctx.update(MonitoringState.self) { _ = $0.apps.removeValue(forKey: app) }
    }
}
