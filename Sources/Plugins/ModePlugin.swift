import AppHostProtocol
import Foundation

/// How far AppHost emulates a background mode.
public enum ModeEmulation: Sendable, Equatable {
    /// Services, background rules and outside events are emulated.
    case emulated
    /// Known and part of the policy table; its scheduling and delivery come later
    /// (the text says where).
    case registered(String)
    /// Known, accepted in a manifest, not emulated (the text says what iOS does).
    case notEmulated(String)
}

/// What declaring a mode lets the app's process do at the kernel level. Everything
/// any plugin grants is denied to apps that do not declare that plugin's mode.
public struct SandboxGrant: Sendable, Equatable {
    /// Socket address families (`AF_*`) the seccomp filter lets through.
    public var socketFamilies: [Int32]
    /// Device paths (a `*` allowed in the last component) the file rules let the app open.
    public var devicePaths: [String]

    public init(socketFamilies: [Int32] = [], devicePaths: [String] = []) {
        self.socketFamilies = socketFamilies
        self.devicePaths = devicePaths
    }

    public static let none = SandboxGrant()
}

/// An app as the plugins see it.
public struct ModeApp: Sendable, Equatable {
    public var bundleIdentifier: BundleID
    public var manifest: Manifest
    /// Top-level keys of the app's entitlements file (empty without one).
    public var entitlements: [String]
    /// Its container (the only place the host writes for it).
    public var container: String
    /// Current state; `notRunning` when no process exists.
    public var state: AppState
    /// The app has finished launching and is running code now (not suspended, not stopping).
    public var isRunningCode: Bool

    public init(bundleIdentifier: BundleID, manifest: Manifest, entitlements: [String], container: String,
                state: AppState = .notRunning, isRunningCode: Bool = false) {
        self.bundleIdentifier = bundleIdentifier
        self.manifest = manifest
        self.entitlements = entitlements
        self.container = container
        self.state = state
        self.isRunningCode = isRunningCode
    }

    /// Whether `UIBackgroundModes` lists `mode`.
    public func declares(_ mode: BackgroundMode) -> Bool { manifest.backgroundModes.contains(mode) }
    /// In the foreground (active or inactive).
    public var isForeground: Bool { state == .active || state == .inactive }
}

/// When an event may reach an app that is not running code.
public enum WakePolicy: Sendable, Equatable {
    /// Only if it is running code now (foreground, or background and not yet suspended).
    case ifRunning
    /// Also wake it if it is suspended (SIGCONT, background).
    case wake
    /// Also launch it in the background if it is not running.
    case launch(LaunchReason)
}

/// Audio output the host performs for an app.
public enum AudioOutput: Sendable, Equatable {
    case open(category: String)
    case write(samples: Data, sampleRate: Int)
    case close
}

/// A plugin's timer as the host keeps it: the mode of the plugin it belongs to (the
/// host hands it back to that plugin when it fires) and the plugin's own name for it,
/// which only the plugin reads (`tick`, `budget/<id>`, ...).
public struct PluginTimer: Hashable, Sendable, CustomStringConvertible {
    /// The plugin's mode. ``ModeHub`` sets it to the emitting plugin's, so a plugin
    /// only ever starts and cancels timers of its own.
    public var mode: BackgroundMode
    /// The plugin's name for the timer.
    public var name: String

    /// A timer of the plugin of `mode`, named `name`.
    public init(_ mode: BackgroundMode, _ name: String) {
        self.mode = mode
        self.name = name
    }

    /// `mode/name`, for logs.
    public var description: String { "\(mode.rawValue)/\(name)" }
}

/// What a plugin asks the host to do.
public enum ModeEffect: Sendable, Equatable {
    /// Deliver a service event as a callback, subject to `wake`; `because` says why
    /// it was (or was not) allowed, for the event log.
    case deliver(app: BundleID, ServiceEvent, wake: WakePolicy, because: String)
    /// A mode activity that keeps a backgrounded app running begins / ends.
    case beginActivity(app: BundleID, name: String)
    case endActivity(app: BundleID, name: String)
    /// Kill the app with a report (a programmer error, a VoIP push not reported).
    case kill(app: BundleID, namespace: String, code: TerminationCode?, reason: String)
    /// A plugin timer on the host clock; fires ``BackgroundModePlugin/timerFired(_:app:in:)``.
    /// `app` is nil for world timers (a GPX route).
    case startTimer(app: BundleID?, timer: PluginTimer, after: Duration)
    case cancelTimer(app: BundleID?, timer: PluginTimer)
    /// A service was used under a mode (`used`) or refused for lack of one (`refused`):
    /// written to the event log, where `apphost lint --trace` reads them.
    case used(app: BundleID, mode: BackgroundMode, String)
    case refused(app: BundleID, mode: BackgroundMode, String)
    /// Refused under a mode the app declares, for another reason (`because`: the true
    /// cause, e.g. "only when-in-use authorized"). Written as a `modeRefused` event whose
    /// cause is "WHAT: BECAUSE", not "needs MODE in UIBackgroundModes".
    case refusedBecause(app: BundleID, mode: BackgroundMode, String, because: String)
    /// Anything else worth a line in the event log.
    case note(app: BundleID?, String)
    /// A line with typed fields (a push's or a fetch's number, its apns-id, the result
    /// its completion gave), which expectations match instead of the text.
    case typedNote(app: BundleID?, String, HostEvent.Fields)
    /// `used`, with typed fields.
    case typedUse(app: BundleID, mode: BackgroundMode, String, HostEvent.Fields)
    /// Audio to the host's sink.
    case audio(app: BundleID, AudioOutput)
    /// A privacy decision to persist (nil: reset to not determined).
    case persistPrivacy(app: BundleID, service: PrivacyService, value: PrivacyDecision?)
    /// A host setting or device condition to persist (nil: back to the default).
    case persistSetting(key: String, value: String?)
    /// Close (or open again) the apps' protected files for the device's lock state.
    case protectData(DataProtectionLevel)
    /// A device token issued or retired, to persist before the token is handed out.
    case persistDeviceToken(DeviceTokenRecord)
    /// A retired device token past the bound of those kept, to delete.
    case forgetDeviceToken(String)
    /// Start the grace after a lock (nil: cancel it, the device was unlocked); when it
    /// ends the host calls ``ModeHub/lockGraceEnded(at:)``.
    case lockGrace(Duration?)
}

extension ModeEffect {
    /// A line for the event log and nothing else (`note`, `typedNote`): the host may write
    /// it ahead of the effects after it without changing what they do.
    public var isLogLine: Bool {
        switch self {
        case .note, .typedNote: true
        default: false
        }
    }
}

/// A command from the CLI to a plugin could not be carried out.
public struct ModeCommandError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// What plugins share with the host while handling one input: the apps, the clock,
/// the budgets, per-plugin state, and the effects they ask for.
public final class ModeContext {
    /// Host time.
    public internal(set) var now: Duration = .zero
    /// The budgets in force.
    public internal(set) var profile: BudgetProfile
    /// Installed apps by bundle id (state kept current by the host).
    public internal(set) var apps: [BundleID: ModeApp] = [:]
    /// Effects asked for so far; the host takes them after each call.
    public private(set) var effects: [ModeEffect] = []

    /// Whether `app` lists `mode` in `UIBackgroundModes` (nil: not installed), read in
    /// place: a copy of its ``ModeApp`` retains and releases every string and array of
    /// its manifest, and a fetch reschedule asks this of every app that fetches.
    public func declares(_ app: BundleID, _ mode: BackgroundMode) -> Bool? {
        guard let index = apps.index(forKey: app) else { return nil }
        return apps.values[index].manifest.backgroundModes.contains(mode)
    }

    private var shared: [ObjectIdentifier: any Sendable] = [:]

    /// Makes a new device token (random; tests may pass their own).
    var makeToken: () -> String
    /// Makes a new `apns-id` (a lowercase UUID; seeded for scenarios).
    var makeMessageID: () -> String = APNsRequest.makeID

    init(profile: BudgetProfile, makeToken: @escaping () -> String = DeviceTokenRecord.random) {
        self.profile = profile
        self.makeToken = makeToken
    }

    /// Asks the host for an effect.
    public func emit(_ effect: ModeEffect) { effects.append(effect) }

    func takeEffects() -> [ModeEffect] {
        defer { effects.removeAll() }
        return effects
    }

    /// A plugin's own state (world-wide and per app), created on first use.
    public func state<S: PluginState>(_ type: S.Type) -> S {
        (shared[ObjectIdentifier(type)] as? S) ?? S()
    }

    /// Replaces a plugin's state.
    public func setState<S: PluginState>(_ value: S) {
        shared[ObjectIdentifier(S.self)] = value
    }

    /// Changes a plugin's state in place. The value is taken out of the table while it
    /// changes, so that its collections are not shared and change in place: a copy left
    /// in the table made every change copy them (a plugin's per-app tables, at every
    /// launch and event).
    @discardableResult
    public func update<S: PluginState, R>(_ type: S.Type, _ body: (inout S) throws -> R) rethrows -> R {
        let key = ObjectIdentifier(type)
        var s = (shared.removeValue(forKey: key) as? S) ?? S()
        defer { shared[key] = s }
        return try body(&s)
    }

    /// Apps in id order.
    public var sortedApps: [ModeApp] { apps.values.sorted { $0.bundleIdentifier < $1.bundleIdentifier } }
}

/// A plugin's state, kept by the ``ModeContext`` (one value per type).
public protocol PluginState: Sendable {
    init()
}

/// One background mode: what it requires of the manifest, which services it offers,
/// what keeps a backgrounded app running, which sandbox rules it adds, and which
/// outside events wake or launch an app. Adding a mode is one file with a type
/// conforming to this and one line in ``ModeRegistry/all``.
public protocol BackgroundModePlugin: Sendable {
    /// The `UIBackgroundModes` value.
    var mode: BackgroundMode { get }
    /// How far it is emulated.
    var emulation: ModeEmulation { get }
    /// One line for `apphost lint` and docs: what the mode is for.
    var summary: String { get }
    /// The services it offers an app (the AppKitLess API names).
    var services: [String] { get }
    /// What keeps a backgrounded app with this mode running (empty: nothing).
    var keepsRunning: [String] { get }
    /// The outside events that can wake or launch an app with this mode (CLI verbs).
    var wakeSources: [String] { get }
    /// What declaring the mode lets the process do.
    var sandbox: SandboxGrant { get }

    /// Manifest and entitlement checks for an app that declares this mode.
    func lint(_ app: LintSubject) -> [LintFinding]
    /// Handles a service request; nil if the request is not this plugin's.
    func handle(_ request: ServiceRequest, from app: BundleID, in ctx: ModeContext) -> ServiceReply?
    /// Handles a CLI command; nil if it is not this plugin's. Returns a message for the user.
    func handle(_ command: ModeCommand, in ctx: ModeContext) throws(ModeCommandError) -> String?
    /// Answers a question with data (`--json`); nil if it is not this plugin's. The text
    /// its command prints should be rendered from the same value.
    func answer(_ query: ModeQuery, in ctx: ModeContext) throws(ModeCommandError) -> ModeAnswer?
    /// The app changed state.
    func appMoved(_ app: BundleID, from: AppState, to: AppState, in ctx: ModeContext)
    /// A service callback the app was sent has returned.
    func callbackReturned(_ event: ServiceEvent, app: BundleID, in ctx: ModeContext)
    /// A timer this plugin started ran out.
    func timerFired(_ name: String, app: BundleID?, in ctx: ModeContext)
    /// The app's process is gone (`byUser`: terminated from the switcher).
    func appExited(_ app: BundleID, byUser: Bool, in ctx: ModeContext)
    /// The app was (re)installed or uninstalled: forget what was learnt about it.
    func appInstalled(_ app: BundleID, in ctx: ModeContext)
    /// The user launched the app (`apphost launch`, `run`): what waited for that may go on.
    func userLaunched(_ app: BundleID, in ctx: ModeContext)
    /// Device conditions or refresh settings changed (``DeviceState``).
    func conditionsChanged(in ctx: ModeContext)
}

extension BackgroundModePlugin {
    public var services: [String] { [] }
    public var keepsRunning: [String] { [] }
    public var wakeSources: [String] { [] }
    public var sandbox: SandboxGrant { .none }
    public func lint(_ app: LintSubject) -> [LintFinding] { [] }
    public func handle(_ request: ServiceRequest, from app: BundleID, in ctx: ModeContext) -> ServiceReply? { nil }
    public func handle(_ command: ModeCommand, in ctx: ModeContext) throws(ModeCommandError) -> String? { nil }
    public func answer(_ query: ModeQuery, in ctx: ModeContext) throws(ModeCommandError) -> ModeAnswer? { nil }
    public func appMoved(_ app: BundleID, from: AppState, to: AppState, in ctx: ModeContext) {}
    public func callbackReturned(_ event: ServiceEvent, app: BundleID, in ctx: ModeContext) {}
    public func timerFired(_ name: String, app: BundleID?, in ctx: ModeContext) {}
    public func appExited(_ app: BundleID, byUser: Bool, in ctx: ModeContext) {}
    public func appInstalled(_ app: BundleID, in ctx: ModeContext) {}
    public func userLaunched(_ app: BundleID, in ctx: ModeContext) {}
    public func conditionsChanged(in ctx: ModeContext) {}
}
