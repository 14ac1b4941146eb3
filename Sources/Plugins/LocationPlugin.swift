import AppHostProtocol
import Foundation

/// `location`: a location manager with authorization from `apphost privacy`, and fixes
/// from `apphost location set|route`. With the mode, updates on,
/// `allowsBackgroundLocationUpdates` and always authorization (or when-in-use
/// authorization and updates started while the app was in front, as Apple documents for
/// the background location indicator), a backgrounded app keeps running and gets fixes; otherwise fixes reach it only while it runs (foreground, or background
/// until it is suspended). Setting `allowsBackgroundLocationUpdates` without the mode
/// is a programmer error: the host answers with iOS's exception, and the app raises it and
/// aborts (`EXC_CRASH (SIGABRT)`).
public struct LocationPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .location }
    public var emulation: ModeEmulation { .emulated }
    public var summary: String { "receive location updates in the background (CLLocationManager)" }
    public var services: [String] {
        ["LocationManager.requestWhenInUseAuthorization", "LocationManager.requestAlwaysAuthorization",
         "LocationManager.startUpdatingLocation", "LocationManager.stopUpdatingLocation",
         "LocationManager.allowsBackgroundLocationUpdates",
         "LocationManager.startMonitoringSignificantLocationChanges (no mode needed)",
         "LocationManager.startMonitoring(for:) regions (no mode needed)"]
    }
    public var keepsRunning: [String] { ["updating location with allowsBackgroundLocationUpdates, and always authorization or when-in-use updates started in front"] }
    public var wakeSources: [String] { ["apphost location set", "apphost location route (also region crossings and significant changes, which wake or relaunch apps without the mode)"] }

    /// The usage strings iOS requires before it asks for location authorization.
    static let usageKeys = ["NSLocationWhenInUseUsageDescription", "NSLocationAlwaysAndWhenInUseUsageDescription"]

    /// Background location needs both usage strings (Apple, "Requesting authorization to
    /// use location services": an app that asks for Always authorization must carry both,
    /// since iOS 11). Without one, the request it guards does nothing: no prompt, no
    /// error. A warning: iOS does not terminate the app, it only never gets the fixes.
    public func lint(_ app: LintSubject) -> [LintFinding] {
        app.missingUsageDescriptions(Self.usageKeys, mode: mode, severity: .warning) { key in
            key == "NSLocationWhenInUseUsageDescription"
                ? "iOS never shows a location prompt (requestWhenInUseAuthorization and requestAlwaysAuthorization both do nothing), so the app never gets the authorization background updates need (AppHost takes it from `apphost privacy grant location-always`)"
                : "requestAlwaysAuthorization does nothing: the app gets When In Use authorization at most: updates go on in the background only if it started them in front, and region monitoring and significant-change updates never relaunch it (AppHost takes Always from `apphost privacy grant location-always`)"
        }
    }

    static let activity = "location updates"

    struct Manager: Sendable {
        var updating = false
        /// The updates ran while the app was in use (in front): with when-in-use
        /// authorization they may go on in the background (Apple's background location
        /// indicator). Cleared when they stop, or when the app is suspended without them.
        var startedInUse = false
        var allowsBackground = false
        var keptRunning = false
        var lastAuthorization: LocationAuthorization = .notDetermined
    }
    struct Route: Sendable {
        var name: String
        var fixes: [LocationFix]
        var next: Int
        var interval: Double
    }
    struct State: PluginState {
        var managers: [BundleID: Manager] = [:]
        var current: LocationFix?
        var route: Route?
        init() {}
    }

    /// The app's authorization from the privacy decisions.
    static func authorization(_ app: BundleID, _ ctx: ModeContext) -> LocationAuthorization {
        let privacy = ctx.state(PrivacyState.self)
        let always = privacy.value(app, .locationAlways)
        let inUse = privacy.value(app, .location)
        if always == .granted { return .always }
        if always == .denied || inUse == .denied { return .denied }
        if inUse == .granted { return .whenInUse }
        return .notDetermined
    }

    /// What iOS raises for `allowsBackgroundLocationUpdates = true` without the mode
    /// (Core Location's assertion, as crash logs quote it).
    public static let backgroundUpdatesWithoutMode = UncaughtException(
        name: .internalInconsistency,
        reason: "Invalid parameter not satisfying: !stayUp || CLClientIsBackgroundable(internal->fClient)")

    public func handle(_ request: ServiceRequest, from app: BundleID, in ctx: ModeContext) -> ServiceReply? {
        guard let info = ctx.apps[app] else { return nil }
        if let reply = handleMonitoring(request, from: app, in: ctx) { return reply }
        switch request {
        case .locationRequestAuthorization(let always):
            let auth = Self.authorization(app, ctx)
            ctx.update(State.self) { $0.managers[app, default: Manager()].lastAuthorization = auth }
            if auth == .notDetermined {
                ctx.emit(.note(app: app, "asked for \(always ? "always" : "when-in-use") location authorization; grant it with `apphost privacy grant \(always ? "location-always" : "location") \(app)`"))
            }
            return .authorization(auth)
        case .locationAllowsBackgroundUpdates(let value):
            if value && !info.declares(.location) {
                // A programmer error: iOS raises in the app's process and it aborts. The app
                // (AppKitLess) raises on this answer; the host gives nothing either way.
                ctx.emit(.refused(app: app, mode: mode, "allowsBackgroundLocationUpdates = true"))
                return .raise(exception: Self.backgroundUpdatesWithoutMode)
            }
            ctx.update(State.self) { $0.managers[app, default: Manager()].allowsBackground = value }
            reevaluate(app, ctx)
            return .ok
        case .locationStart:
            let auth = Self.authorization(app, ctx)
            guard auth == .always || auth == .whenInUse else {
                ctx.emit(.note(app: app, "startUpdatingLocation without authorization (\(auth.rawValue)): no updates"))
                return .refused(reason: "location updates need authorization (now \(auth.rawValue)); grant it with `apphost privacy grant location \(app)`")
            }
            if !info.isForeground && !info.declares(.location) {
                ctx.emit(.refused(app: app, mode: mode, "startUpdatingLocation in the background"))
            }
            ctx.update(State.self) { state in
                state.managers[app, default: Manager()].updating = true
                if info.isForeground { state.managers[app]?.startedInUse = true }
            }
            reevaluate(app, ctx)
            if let fix = ctx.state(State.self).current { deliver(fix, to: app, ctx) }
            return .ok
        case .locationStop:
            ctx.update(State.self) { $0.managers[app]?.updating = false; $0.managers[app]?.startedInUse = false }
            reevaluate(app, ctx)
            return .ok
        default:
            return nil
        }
    }

    public func handle(_ command: ModeCommand, in ctx: ModeContext) throws(ModeCommandError) -> String? {
        switch command {
        case .privacy(_, let scope, let id) where scope.services.contains(.location) || scope.services.contains(.locationAlways):
            for app in id.map({ [$0] }) ?? ctx.apps.keys.sorted() {
                let auth = Self.authorization(app, ctx)
                let before = ctx.state(State.self).managers[app]?.lastAuthorization
                ctx.update(State.self) { $0.managers[app, default: Manager()].lastAuthorization = auth }
                if let before, before != auth, ctx.apps[app]?.isRunningCode == true {
                    ctx.emit(.deliver(app: app, .locationAuthorizationChanged(auth), wake: .ifRunning, because: "location authorization changed"))
                }
                reevaluate(app, ctx)
            }
            let target = id?.rawValue ?? "every app"
            return "\(target): location authorization is now \(id.map { Self.authorization($0, ctx).rawValue } ?? "as set")"
        case .locationSet(let fix):
            guard (-90...90).contains(fix.latitude), (-180...180).contains(fix.longitude) else {
                throw ModeCommandError("latitude must be -90...90 and longitude -180...180, got \(fix.latitude),\(fix.longitude)")
            }
            ctx.update(State.self) { $0.route = nil; $0.current = fix }
            ctx.emit(.cancelTimer(app: nil, timer: PluginTimer(mode, "route")))
            let n = broadcast(fix, ctx)
            return "location set to \(fix.latitude),\(fix.longitude); delivered to \(n) app(s)"
        case .locationRoute(let name, let fixes, let interval):
            guard let first = fixes.first else { throw ModeCommandError("the route \(name) has no points") }
            guard interval > 0 else { throw ModeCommandError("the interval between points must be positive") }
            ctx.update(State.self) { $0.route = Route(name: name, fixes: fixes, next: 1, interval: interval); $0.current = first }
            let n = broadcast(first, ctx)
            scheduleNext(ctx)
            return "playing route \(name): \(fixes.count) point(s) on the host clock; first delivered to \(n) app(s)"
        case .locationClear:
            ctx.update(State.self) { $0.route = nil; $0.current = nil }
            ctx.emit(.cancelTimer(app: nil, timer: PluginTimer(mode, "route")))
            return "location cleared (no fix, no route)"
        default:
            return nil
        }
    }

    public func timerFired(_ name: String, app: BundleID?, in ctx: ModeContext) {
        if name == Self.significantTimer, let app { return significantTimerFired(app: app, in: ctx) }
        guard name == "route", var route = ctx.state(State.self).route, route.next < route.fixes.count else { return }
        let fix = route.fixes[route.next]
        route.next += 1
        ctx.update(State.self) { $0.route = route; $0.current = fix }
        _ = broadcast(fix, ctx)
        if route.next >= route.fixes.count {
            ctx.emit(.note(app: nil, "route \(route.name) finished (\(route.fixes.count) point(s))"))
            ctx.update(State.self) { $0.route = nil }
        } else {
            scheduleNext(ctx)
        }
    }

    public func appMoved(_ app: BundleID, from: AppState, to: AppState, in ctx: ModeContext) {
        guard var m = ctx.state(State.self).managers[app], m.updating else { return }
        // Updates running while the app is in use are "started in use"; a suspension
        // ends that (they did not keep the app running).
        let inUse = to == .active || to == .inactive
        if inUse != m.startedInUse, inUse || to == .suspended {
            ctx.update(State.self) { $0.managers[app]?.startedInUse = inUse }
            m.startedInUse = inUse
            reevaluate(app, ctx)
            m = ctx.state(State.self).managers[app] ?? m
        }
        if to == .background, from != .suspended {
            if m.keptRunning {
                ctx.emit(.used(app: app, mode: mode, "location updates keep the app running in the background"))
            } else if ctx.apps[app]?.declares(.location) != true {
                ctx.emit(.refused(app: app, mode: mode, "location updates in the background"))
            }
        }
    }

    public func appExited(_ app: BundleID, byUser: Bool, in ctx: ModeContext) {
        ctx.update(State.self) { state in
            let auth = state.managers[app]?.lastAuthorization ?? .notDetermined
            state.managers[app] = Manager(lastAuthorization: auth)
        }
        monitoringExited(app, byUser: byUser, in: ctx)
    }

    public func appInstalled(_ app: BundleID, in ctx: ModeContext) {
        ctx.update(State.self) { $0.managers.removeValue(forKey: app) }
        monitoringInstalled(app, in: ctx)
    }

    public func userLaunched(_ app: BundleID, in ctx: ModeContext) {
        monitoringUserLaunched(app, in: ctx)
    }

    // MARK: helpers

    private func scheduleNext(_ ctx: ModeContext) {
        guard let route = ctx.state(State.self).route, route.next < route.fixes.count else { return }
        var seconds = route.interval
        if let a = route.fixes[route.next - 1].timestamp, let b = route.fixes[route.next].timestamp, b > a {
            seconds = b.timeIntervalSince(a)
        }
        ctx.emit(.startTimer(app: nil, timer: PluginTimer(mode, "route"), after: Duration(clampingSeconds: seconds)))
    }

    /// Whether location keeps the app running in the background: updates on, the mode
    /// declared, `allowsBackgroundLocationUpdates`, and always authorization, or
    /// when-in-use authorization with updates started while the app was in use.
    private func keepsRunning(_ app: BundleID, _ m: Manager, _ ctx: ModeContext) -> Bool {
        guard m.updating && m.allowsBackground && ctx.apps[app]?.declares(.location) == true else { return false }
        switch Self.authorization(app, ctx) {
        case .always: return true
        case .whenInUse: return m.startedInUse
        default: return false
        }
    }

    private func reevaluate(_ app: BundleID, _ ctx: ModeContext) {
        guard let m = ctx.state(State.self).managers[app] else { return }
        let keep = keepsRunning(app, m, ctx)
        guard keep != m.keptRunning else { return }
        ctx.update(State.self) { $0.managers[app]?.keptRunning = keep }
        ctx.emit(keep ? .beginActivity(app: app, name: Self.activity) : .endActivity(app: app, name: Self.activity))
    }

    /// Sends a new position to the updating apps, then to region and significant-change
    /// monitoring; the number of apps that got it as a standard update.
    @discardableResult
    private func broadcast(_ fix: LocationFix, _ ctx: ModeContext) -> Int {
        var updated: Set<BundleID> = []
        for app in ctx.sortedApps.map(\.bundleIdentifier) where ctx.state(State.self).managers[app]?.updating == true {
            if deliver(fix, to: app, ctx) { updated.insert(app) }
        }
        // Apps woken or launched for a region crossing or a significant change count too.
        return updated.union(monitoringMoved(to: fix, updated: updated, in: ctx)).count
    }

    /// Delivers a fix to an updating, authorized app if the rules allow; true if sent.
    @discardableResult
    private func deliver(_ fix: LocationFix, to app: BundleID, _ ctx: ModeContext) -> Bool {
        guard let info = ctx.apps[app], let m = ctx.state(State.self).managers[app] else { return false }
        let auth = Self.authorization(app, ctx)
        guard auth == .always || auth == .whenInUse else { return false }
        if info.isForeground {
            ctx.emit(.deliver(app: app, .locationUpdate([fix]), wake: .ifRunning, because: "in the foreground"))
            return true
        }
        if keepsRunning(app, m, ctx) {
            let why = auth == .always ? "always-authorized" : "when-in-use, updates started in use"
            ctx.emit(.deliver(app: app, .locationUpdate([fix]), wake: .wake, because: "background location updates (mode declared, \(why))"))
            return true
        }
        if info.isRunningCode {
            // As iOS: without background updates, fixes stop only when the app is suspended.
            ctx.emit(.deliver(app: app, .locationUpdate([fix]), wake: .ifRunning, because: "still running in the background"))
            return true
        }
        let what = "location fix not delivered while suspended"
        guard info.declares(.location) else {
            ctx.emit(.refused(app: app, mode: mode, what))
            return false
        }
        // The mode is there: the refusal names what else is missing, never the mode.
        let because = !m.allowsBackground ? "allowsBackgroundLocationUpdates is false (updates stop when the app is suspended)"
            : auth != .always
            ? "the app is only when-in-use authorized and its updates did not start while it was in use; background fixes need updates started in front, or always authorization (`apphost privacy grant location-always \(app)`)"
            : "the app is suspended"
        ctx.emit(.refusedBecause(app: app, mode: mode, what, because: because))
        return false
    }
}
