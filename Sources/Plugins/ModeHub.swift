import AppHostProtocol
import Foundation

/// The registered plugins, one per background mode. Adding a mode: one file with a
/// ``BackgroundModePlugin`` and one line here.
public enum ModeRegistry {
    public static let all: [any BackgroundModePlugin] = [
        AudioPlugin(),
        LocationPlugin(),
        VoIPPlugin(),
        FetchPlugin(),
        RemoteNotificationPlugin(),
        ProcessingPlugin(),
        BluetoothCentralPlugin(),
        BluetoothPeripheralPlugin(),
        ExternalAccessoryPlugin(),
        NewsstandPlugin(),
        NetworkAuthenticationPlugin(),
        NearbyInteractionPlugin(),
        PushToTalkPlugin(),
    ]

    /// The plugin of `mode`.
    public static func plugin(for mode: BackgroundMode) -> (any BackgroundModePlugin)? {
        all.first { $0.mode == mode }
    }

    /// The kernel rules an app declaring `modes` runs under: everything some plugin
    /// grants, minus what the declared modes grant.
    public static func denials(for modes: [BackgroundMode]) -> (socketFamilies: [Int32], devicePaths: [String]) {
        let declared = Set(modes)
        var families: [Int32] = []
        var devices: [String] = []
        var grantedFamilies: Set<Int32> = []
        var grantedDevices: Set<String> = []
        for plugin in all where declared.contains(plugin.mode) {
            grantedFamilies.formUnion(plugin.sandbox.socketFamilies)
            grantedDevices.formUnion(plugin.sandbox.devicePaths)
        }
        for plugin in all {
            for f in plugin.sandbox.socketFamilies where !grantedFamilies.contains(f) && !families.contains(f) { families.append(f) }
            for d in plugin.sandbox.devicePaths where !grantedDevices.contains(d) && !devices.contains(d) { devices.append(d) }
        }
        return (families.sorted(), devices.sorted())
    }
}

/// The privacy decisions (`apphost privacy`), by app and service. Kept by the host
/// in its database; plugins read them (location reads `location`/`location-always`).
public struct PrivacyState: PluginState {
    /// app → service → decision (no entry: not determined).
    public var decisions: [BundleID: [PrivacyService: PrivacyDecision]] = [:]
    /// No decisions.
    public init() {}

    /// The app's decision for `service`; nil while not determined.
    public func value(_ app: BundleID, _ service: PrivacyService) -> PrivacyDecision? { decisions[app]?[service] }
}

/// The host side of all plugins: routes service requests, CLI commands, state
/// changes, callback returns and timers to the plugin concerned and collects the
/// effects they ask for. Owned by the supervisor actor (not thread-safe).
public final class ModeHub {
    public let plugins: [any BackgroundModePlugin]
    let ctx: ModeContext

    /// The privacy services `apphost privacy` accepts (as `simctl privacy`).
    public static var privacyServices: [String] { PrivacyScope.allCases.map(\.rawValue) }

    /// `makeToken` makes device tokens (random unless a test passes its own).
    public init(plugins: [any BackgroundModePlugin] = ModeRegistry.all, profile: BudgetProfile,
                makeToken: @escaping () -> String = DeviceTokenRecord.random) {
        self.plugins = plugins
        self.ctx = ModeContext(profile: profile, makeToken: makeToken)
    }

    // MARK: apps

    /// Adds or replaces an installed app (state notRunning); plugins forget what they knew of it.
    public func install(_ app: ModeApp) -> [ModeEffect] {
        ctx.apps[app.bundleIdentifier] = app
        return each { $0.appInstalled(app.bundleIdentifier, in: ctx) }
    }

    /// Forgets an uninstalled app.
    public func uninstall(_ id: BundleID) -> [ModeEffect] {
        DeviceTokens.retire(id, in: ctx)
        let fx = each { $0.appInstalled(id, in: ctx) }
        ctx.apps.removeValue(forKey: id)
        ctx.update(PrivacyState.self) { $0.decisions.removeValue(forKey: id) }
        return fx
    }

    /// The app as plugins see it.
    public func app(_ id: BundleID) -> ModeApp? { ctx.apps[id] }

    /// The simulated device and refresh settings.
    public var deviceState: DeviceState { ctx.state(DeviceState.self) }

    /// Who a device token (from `registerForRemoteNotifications` or PushKit) belongs to.
    public enum TokenOwner: Sendable, Equatable {
        case installed(BundleID, DeviceTokenKind)
        case uninstalled(BundleID)
        case unknown
    }

    /// The app a push token was issued to on this host: an installed app, or one since
    /// uninstalled (APNs answers 410 Unregistered). `token` is lowercase hex.
    public func deviceTokenOwner(_ token: String) -> TokenOwner {
        guard let record = ctx.state(DeviceTokens.self).records[token] else { return .unknown }
        if record.retired || ctx.apps[record.bundleIdentifier] == nil { return .uninstalled(record.bundleIdentifier) }
        return .installed(record.bundleIdentifier, record.kind)
    }

    /// The app's device token of `kind`, issued (effects: persist it) when it has none yet.
    /// What the app gets when it registers; nil for an app that is not installed.
    public func deviceToken(of id: BundleID, _ kind: DeviceTokenKind) -> (String, [ModeEffect])? {
        guard ctx.apps[id] != nil else { return nil }
        let token = DeviceTokens.token(for: id, kind, in: ctx)
        return (token, ctx.takeEffects())
    }

    /// Restores a device token kept by the host (at host start).
    public func restoreDeviceToken(_ record: DeviceTokenRecord) {
        ctx.update(DeviceTokens.self) { $0.restore(record) }
    }

    /// Updates whether the app is running code without telling plugins (a stop confirmed, a resume).
    public func setRunningCode(_ id: BundleID, _ running: Bool) {
        ctx.apps[id]?.isRunningCode = running
    }

    /// The app moved from one state to another.
    public func appMoved(_ id: BundleID, from: AppState, to: AppState, runningCode: Bool, at now: Duration) -> [ModeEffect] {
        ctx.now = now
        ctx.apps[id]?.state = to
        ctx.apps[id]?.isRunningCode = runningCode
        return each { $0.appMoved(id, from: from, to: to, in: ctx) }
    }

    /// The app's process is gone.
    public func appExited(_ id: BundleID, byUser: Bool, at now: Duration) -> [ModeEffect] {
        ctx.now = now
        ctx.apps[id]?.state = .notRunning
        ctx.apps[id]?.isRunningCode = false
        return each { $0.appExited(id, byUser: byUser, in: ctx) }
    }

    // MARK: inputs

    /// The grace after a lock ended (the host's timer from ``ModeEffect/lockGrace(_:)``):
    /// the files of the classes the lock closes are closed now.
    public func lockGraceEnded(at now: Duration) -> [ModeEffect] {
        ctx.now = now
        DataProtection.graceEnded(in: ctx)
        return ctx.takeEffects()
    }

    /// A service request from a running app.
    public func request(_ request: ServiceRequest, from id: BundleID, at now: Duration) -> (ServiceReply, [ModeEffect]) {
        ctx.now = now
        if request == .protectedDataAvailability { return (.protectedDataAvailable(deviceState.protectionLevel == .open), []) }
        for plugin in plugins {
            if let reply = plugin.handle(request, from: id, in: ctx) {
                return (reply, collect(plugin))
            }
        }
        return (.refused(reason: "\(request.apiName) is not offered by any AppHost plugin"), [])
    }

    /// A CLI command: the message for the user or why it was refused, and the
    /// effects (a refusal may still log).
    public func command(_ command: ModeCommand, at now: Duration) -> (Result<String, ModeCommandError>, [ModeEffect]) {
        ctx.now = now
        if let answer = device(command) {
            let fx = each { $0.conditionsChanged(in: ctx) }
            return (answer, fx)
        }
        if case .privacy(let action, let service, let id) = command {
            do throws(ModeCommandError) { try privacy(action, service, id) } catch { return (.failure(error), ctx.takeEffects()) }
        }
        for plugin in plugins {
            do {
                if let answer = try plugin.handle(command, in: ctx) { return (.success(answer), collect(plugin)) }
            } catch {
                return (.failure(error), collect(plugin))
            }
        }
        if case .privacy(let action, let service, let id) = command {
            let who = id?.rawValue ?? "every app"
            return (.success("\(action.rawValue) \(service.rawValue) for \(who) (kept; no AppHost service uses it yet)"), ctx.takeEffects())
        }
        return (.failure(ModeCommandError("no plugin handles \(command)")), ctx.takeEffects())
    }

    /// A question whose answer is data (`--json`): the settings and the device are the
    /// hub's (every background plugin reads them), the rest a plugin's.
    public func query(_ query: ModeQuery, at now: Duration) -> Result<ModeAnswer, ModeCommandError> {
        ctx.now = now
        switch query {
        case .settings: return .success(.settings(deviceState.settings))
        case .device: return .success(.device(deviceState.conditions))
        default: break
        }
        for plugin in plugins {
            do {
                if let answer = try plugin.answer(query, in: ctx) { return .success(answer) }
            } catch {
                return .failure(error)
            }
        }
        return .failure(ModeCommandError("no plugin answers \(query)"))
    }

    /// A service callback returned.
    public func callbackReturned(_ event: ServiceEvent, app id: BundleID, at now: Duration) -> [ModeEffect] {
        ctx.now = now
        return each { $0.callbackReturned(event, app: id, in: ctx) }
    }

    /// A plugin timer (as the host got it from ``ModeEffect/startTimer(app:timer:after:)``)
    /// fired: its plugin hears it by the plugin's own name for it.
    public func timerFired(_ timer: PluginTimer, app id: BundleID?, at now: Duration) -> [ModeEffect] {
        ctx.now = now
        guard let plugin = plugins.first(where: { $0.mode == timer.mode }) else { return [] }
        plugin.timerFired(timer.name, app: id, in: ctx)
        return collect(plugin)
    }

    /// The user launched `id` (not a launch for an event).
    public func userLaunched(_ id: BundleID, at now: Duration) -> [ModeEffect] {
        ctx.now = now
        return each { $0.userLaunched(id, in: ctx) }
    }

    /// Restores a persisted host setting (at host start).
    public func restoreSetting(key: String, value: String) {
        ctx.update(DeviceState.self) { _ = $0.restore(key, value) }
    }

    /// A configuration policy restricts background refresh for every app.
    public func setRefreshRestrictedByPolicy(_ restricted: Bool) {
        ctx.update(DeviceState.self) { $0.policyRestricted = restricted }
    }

    /// Settings and device commands, handled here since every background plugin reads them.
    private func device(_ command: ModeCommand) -> Result<String, ModeCommandError>? {
        func set(_ key: String, _ value: String?) { ctx.emit(.persistSetting(key: key, value: value)) }
        switch command {
        case .settingsBackgroundRefresh(let id?, let on):
            guard ctx.apps[id] != nil else { return .failure(ModeCommandError("unknown bundle id \"\(id)\"")) }
            ctx.update(DeviceState.self) { if on { $0.refreshOff.remove(id) } else { $0.refreshOff.insert(id) } }
            set("settings.backgroundRefresh.\(id)", on ? nil : "off")
            let state = ctx.state(DeviceState.self)
            return .success("background refresh \(on ? "on" : "off") for \(id); its status is now \(state.refreshStatus(id).rawValue)")
        case .settingsBackgroundRefresh(nil, let on):
            ctx.update(DeviceState.self) { $0.refreshOffGlobally = !on }
            set("settings.backgroundRefresh", on ? nil : "off")
            return .success("background refresh \(on ? "on" : "off") for every app")
        case .settingsLowPower(let on):
            ctx.update(DeviceState.self) { $0.lowPower = on }
            set("settings.lowPower", on ? "on" : nil)
            return .success("low power mode \(on ? "on: background refresh is restricted" : "off")")
        case .settingsShow:
            return .success(ctx.state(DeviceState.self).settings.text)
        case .devicePower(let plugged):
            ctx.update(DeviceState.self) { $0.pluggedIn = plugged }
            set("device.power", plugged ? nil : "battery")
            return .success("power: \(plugged ? "plugged in" : "on battery")")
        case .deviceNetwork(let network):
            ctx.update(DeviceState.self) { $0.network = network }
            set("device.network", network == .wifi ? nil : network.rawValue)
            return .success("network: \(network.rawValue)")
        case .deviceShow:
            return .success(ctx.state(DeviceState.self).conditions.text)
        case .deviceLock(let lock):
            return .success(DataProtection.lock(lock, in: ctx))
        default:
            return nil
        }
    }

    /// Restores a persisted privacy decision (at host start).
    public func restorePrivacy(app: BundleID, service: PrivacyService, value: PrivacyDecision) {
        ctx.update(PrivacyState.self) { $0.decisions[app, default: [:]][service] = value }
    }

    /// The profile in force changed (never during a run today; kept for tests).
    public func setProfile(_ profile: BudgetProfile) { ctx.profile = profile }

    // MARK: helpers

    private func privacy(_ action: PrivacyAction, _ scope: PrivacyScope, _ id: BundleID?) throws(ModeCommandError) {
        if action != .reset, id == nil {
            throw ModeCommandError("privacy \(action.rawValue) needs a bundle id (as simctl: \"Requires bundle identifier\")")
        }
        if let id, ctx.apps[id] == nil {
            throw ModeCommandError("unknown bundle id \"\(id)\"")
        }
        let targets = id.map { [$0] } ?? ctx.apps.keys.sorted()
        for app in targets {
            for s in scope.services {
                let value: PrivacyDecision? = switch action {
                case .grant: .granted
                case .revoke: .denied
                case .reset: nil
                }
                ctx.update(PrivacyState.self) { state in
                    if let value { state.decisions[app, default: [:]][s] = value } else { state.decisions[app]?.removeValue(forKey: s) }
                }
                ctx.emit(.persistPrivacy(app: app, service: s, value: value))
            }
        }
    }

    private func each(_ body: (any BackgroundModePlugin) -> Void) -> [ModeEffect] {
        var all: [ModeEffect] = ctx.takeEffects()
        for plugin in plugins {
            body(plugin)
            all += collect(plugin)
        }
        return all
    }

    /// Takes the effects a plugin asked for; its timers are its own (their mode is the plugin's).
    private func collect(_ plugin: any BackgroundModePlugin) -> [ModeEffect] {
        ctx.takeEffects().map { effect in
            switch effect {
            case .startTimer(let app, let timer, let after):
                .startTimer(app: app, timer: PluginTimer(plugin.mode, timer.name), after: after)
            case .cancelTimer(let app, let timer):
                .cancelTimer(app: app, timer: PluginTimer(plugin.mode, timer.name))
            default:
                effect
            }
        }
    }
}
