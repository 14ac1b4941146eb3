import Foundation

/// The control socket's file name inside the state directory.
public enum ControlSocket {
    /// `control.sock`.
    public static let fileName = "control.sock"
    /// Version announced by clients; the daemon refuses others.
    /// 2: `list`, `status` and `reports` are streamed, one frame per app or report, then `end`.
    public static let version = 2
}

/// A request from the CLI to the daemon, one per connection (``events`` may stream).
public enum ControlRequest: Codable, Sendable, Equatable {
    /// Liveness check; answered with ``ControlResponse/pong(pid:stateDirectory:)``.
    case ping(version: Int)
    /// Install (or update) the bundle at `path`; `settings` expand build-setting references;
    /// `entitlements` names the entitlements file when it is not `Name.entitlements` beside Info.plist.
    case install(path: String, settings: [String: String], entitlements: String? = nil)
    /// Remove an installed app (terminating it first if it runs).
    case uninstall(bundleIdentifier: BundleID)
    /// The installed apps: one ``ControlResponse/app(_:)`` each, then ``ControlResponse/end``.
    case list
    /// Launch an installed app; with `terminateRunning` a running one is terminated first.
    case launch(bundleIdentifier: BundleID, background: Bool, arguments: [String], terminateRunning: Bool = false)
    /// Make an app the active app; the previously active app goes home.
    case foreground(bundleIdentifier: BundleID)
    /// Home button for this app.
    case background(bundleIdentifier: BundleID)
    /// Terminate an app, as a swipe in the app switcher.
    case terminate(bundleIdentifier: BundleID)
    /// Status of one app or of all installed apps: one ``ControlResponse/appStatus(_:)``
    /// per app, then ``ControlResponse/end``.
    case status(bundleIdentifier: BundleID?)
    /// Past events; with `follow`, new ones as they happen until the client hangs up.
    case events(follow: Bool, bundleIdentifier: BundleID?)
    /// Termination reports, newest last: one ``ControlResponse/report(_:)`` each, then ``ControlResponse/end``.
    case reports(bundleIdentifier: BundleID?)
    /// Ask the daemon to shut down gracefully.
    case shutdown
    /// Virtual clock: move time forward, firing every deadline inside, in order.
    case clockAdvance(seconds: Double)
    /// The host clock's reading.
    case clockNow
    /// The budget table in force.
    case profile
    /// A command to the background-mode plugins (privacy, location, VoIP push, BLE, accessories).
    case mode(ModeCommand)
    /// Take an app's snapshot now (a running app with a window), else its latest one.
    case snapshot(bundleIdentifier: BundleID)
    /// The apps in the app switcher, most recent first.
    case switcher
    /// A question for the background-mode plugins whose answer is data (`--json` of
    /// `settings show`, `device show`, `fetch schedule`, `bgtask list`); answered with
    /// ``ControlResponse/modeAnswer(_:)``.
    case modeQuery(ModeQuery)
    /// `apphost io screenshot`: the screen now, the app in front as it is drawn (no
    /// snapshot policy: the user sees the screen), written to a file in the state directory.
    case screenshot
}

/// The daemon's answer.
public enum ControlResponse: Codable, Sendable, Equatable {
    case pong(pid: Int32, stateDirectory: String)
    case ok(message: String)
    case installed(InstalledApp)
    /// One app of a ``ControlRequest/list`` answer.
    case app(InstalledApp)
    /// `wasRunning`: the app was already running, so it kept its process (and arguments).
    case launched(bundleIdentifier: BundleID, pid: Int32, wasRunning: Bool)
    /// One app of a ``ControlRequest/status(bundleIdentifier:)`` answer.
    case appStatus(AppStatus)
    case event(HostEvent)
    /// One report of a ``ControlRequest/reports(bundleIdentifier:)`` answer.
    case report(TerminationReport)
    /// Ends a streamed answer: after the last ``event(_:)`` of a non-following
    /// ``ControlRequest/events(follow:bundleIdentifier:)``, the last ``appStatus(_:)``, the last ``report(_:)``.
    case end
    /// Clock mode (`real`/`virtual`), host time in seconds since the host started, and that time as a date.
    case clock(mode: String, seconds: Double, date: Date)
    /// The budgets in force.
    case profile(BudgetProfile)
    case snapshot(SnapshotInfo)
    case switcher([SwitcherEntry])
    /// The answer to a ``ControlRequest/modeQuery(_:)``.
    case modeAnswer(ModeAnswer)
    case screenshot(ScreenshotInfo)
    case error(ControlError)
}

/// A request the daemon could not carry out, with what to do about it.
public struct ControlError: Error, Codable, Sendable, Equatable, CustomStringConvertible {
    /// Machine-readable kinds, room to add more.
    public enum Code: String, Codable, Sendable {
        case unknownBundle, invalidManifest, notRunning, alreadyRunning, spawnFailed, badRequest, internalError, shuttingDown
        /// A background-mode rule refused the command (e.g. a VoIP push to an app without the mode).
        case refused
        /// Virtual clock: the machine did not let an app answer (or block) within the host's
        /// safety net of real time; the run no longer depends only on its inputs.
        case safetyNet
    }
    public var code: Code
    public var message: String
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
    public var description: String { message }
}

/// An installed app as the daemon knows it.
public struct InstalledApp: Codable, Sendable, Equatable {
    /// The app with its manifest's and entitlements' lists cut as a status is (see
    /// ``AppStatus/bounded(_:)``), for an answer that would not fit a control frame.
    public func boundedForWire() -> InstalledApp {
        var app = self
        app.manifest.bgTaskIdentifiers = AppStatus.bounded(manifest.bgTaskIdentifiers)
        app.manifest.externalAccessoryProtocols = AppStatus.bounded(manifest.externalAccessoryProtocols)
        app.entitlements = entitlements.map(AppStatus.bounded)
        app.applicationGroups = applicationGroups.map(AppStatus.bounded)
        return app
    }

    public var bundleIdentifier: BundleID
    public var name: String
    public var bundlePath: String
    public var executablePath: String
    public var backgroundModes: [BackgroundMode]
    public var installedAt: Date
    public var manifest: Manifest
    /// Top-level keys of the bundle's entitlements file (nil: none, or installed before they were kept).
    public var entitlements: [String]?
    /// The App Groups of its `com.apple.security.application-groups` entitlement, whose
    /// shared containers it may read and write (nil: none, or installed before they were kept).
    public var applicationGroups: [String]?

    public init(bundleIdentifier: BundleID, name: String, bundlePath: String, executablePath: String,
                backgroundModes: [BackgroundMode], installedAt: Date, manifest: Manifest, entitlements: [String]? = nil,
                applicationGroups: [String]? = nil) {
        self.entitlements = entitlements
        self.applicationGroups = applicationGroups
        self.bundleIdentifier = bundleIdentifier
        self.name = name
        self.bundlePath = bundlePath
        self.executablePath = executablePath
        self.backgroundModes = backgroundModes
        self.installedAt = installedAt
        self.manifest = manifest
    }
}

/// One app's current state (`apphost status --json` prints an array of these).
public struct AppStatus: Codable, Sendable, Equatable {
    public var bundleIdentifier: BundleID
    public var state: AppState
    public var pid: Int32?
    public var since: Date
    /// Background tasks the app holds (by name, `nil` names shown as `#id`).
    public var backgroundTasks: [String]
    /// Whether this is the one active (foreground) app.
    public var isFrontmost: Bool
    /// Background-mode activities keeping it running (audio playback, location updates, a VoIP call).
    public var activities: [String]
    /// Its memory footprint in bytes as the host last read it from the kernel (its memory
    /// cgroup's `memory.current`, else `/proc/<pid>/smaps_rollup`'s Pss); nil when it does
    /// not run or has not been read yet.
    public var footprint: UInt64?

    /// At most this many background tasks (or activities) are listed; the rest are counted.
    public static let maximumListed = 64
    /// Longer task names (and activities) are cut to this many characters.
    public static let maximumNameLength = 256

    /// `names` cut to ``maximumListed`` entries of at most ``maximumNameLength`` characters,
    /// the rest counted in a last entry (`… and 236 more`): what one app puts in a status
    /// answer is bounded (about 17 KiB), whatever it holds.
    public static func bounded(_ names: [String]) -> [String] {
        var out = names.prefix(maximumListed).map { name in
            name.count > maximumNameLength ? String(name.prefix(maximumNameLength)) + "…" : name
        }
        if names.count > maximumListed { out.append("… and \(names.count - maximumListed) more") }
        return out
    }

    public init(bundleIdentifier: BundleID, state: AppState, pid: Int32?, since: Date, backgroundTasks: [String],
                activities: [String] = [], isFrontmost: Bool, footprint: UInt64? = nil) {
        self.footprint = footprint
        self.activities = activities
        self.bundleIdentifier = bundleIdentifier
        self.state = state
        self.pid = pid
        self.since = since
        self.backgroundTasks = backgroundTasks
        self.isFrontmost = isFrontmost
    }

    // `pid` is written as null when absent (the JSON contract says "pid (or null)").
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(bundleIdentifier, forKey: .bundleIdentifier)
        try c.encode(state, forKey: .state)
        try c.encode(pid, forKey: .pid)
        try c.encode(since, forKey: .since)
        try c.encode(backgroundTasks, forKey: .backgroundTasks)
        try c.encode(activities, forKey: .activities)
        try c.encode(isFrontmost, forKey: .isFrontmost)
        try c.encode(footprint, forKey: .footprint)
    }
}

/// What happened in the host. Transitions carry `from`, `to` and `cause`.
public struct HostEvent: Codable, Sendable, Equatable {
    /// Kinds of events.
    public enum Kind: String, Codable, Sendable, CaseIterable {
        case hostStarted, hostStopping, hostStopped
        case installed, uninstalled
        case spawned, transition, callback, backgroundTask, signal, exited, report, warning
        /// A service used under a background mode (`mode` names it).
        case modeUsed
        /// A service or event refused for lack of a background mode (`mode` names it).
        case modeRefused
        /// A background-mode plugin's note (a fix delivered, a push dropped, ...).
        case service
        /// An app-switcher snapshot taken (or deleted under the `none` policy).
        case snapshot
        /// Device memory: the pressure level changed (`pressure`, `footprint` the sum of
        /// the apps' footprints), a memory warning sent to an app, a jetsam decision
        /// (`footprint` the app's, `band` its jetsam band).
        case memory
    }
    /// Increasing number, unique within one events.jsonl.
    public var seq: UInt64
    public var time: Date
    public var kind: Kind
    public var bundleIdentifier: BundleID?
    public var pid: Int32?
    public var from: AppState?
    public var to: AppState?
    public var cause: String
    /// The background mode concerned (modeUsed, modeRefused).
    public var mode: BackgroundMode?
    /// The delegate method (`callback` events: "didEnterBackground", "expirationHandler", ...).
    public var callback: String?
    /// The signal (`signal` events): SIGSTOP, SIGCONT or SIGKILL.
    public var signal: AppSignal?
    /// A `signal` event that is the kernel's confirmation (the app runs again), not a send.
    public var confirmed: Bool?
    /// The background task (`backgroundTask` events): its id, its name, and whether it
    /// began (true) or ended (false).
    public var task: BackgroundTaskID?
    public var taskName: String?
    public var began: Bool?
    /// What a background transfer's `service` event says (queued, waiting, finished, ...),
    /// with its session and task where it is about one.
    public var transfer: TransferNote?
    public var session: SessionIdentifier?
    public var transferTask: TransferTaskID?
    /// A push's number on this host and its `apns-id` (pushes delivered, completed), a
    /// background fetch's number, and the result an app's completion handler gave
    /// (`newData`, `noData`, `failed`).
    public var push: UInt64?
    public var apnsID: String?
    public var fetch: UInt64?
    public var result: FetchResult?
    /// Device memory (`memory` events): bytes (an app's footprint, or the sum of every
    /// app's at a pressure change), the pressure level (`normal`, `warning`, `critical`),
    /// and a jetsam decision's band (`suspended`, `background`, `backgroundActivity`, `foreground`).
    public var footprint: UInt64?
    public var pressure: MemoryPressureLevel?
    public var band: JetsamBand?
    /// The device token `registerForRemoteNotifications` gave the app (the `service`
    /// event of a registration).
    public var deviceToken: String?
    /// A BGTaskScheduler task's identifier (launched, expired, completed) and, when it
    /// completed, what `setTaskCompleted(success:)` said.
    public var bgTask: String?
    public var success: Bool?

    /// The typed fields an event may carry beside its kind (see the properties).
    public struct Fields: Sendable, Equatable {
        public var callback: String?
        public var signal: AppSignal?
        public var confirmed: Bool?
        public var task: BackgroundTaskID?
        public var taskName: String?
        public var began: Bool?
        public var transfer: TransferNote?
        public var session: SessionIdentifier?
        public var transferTask: TransferTaskID?
        public var push: UInt64?
        public var apnsID: String?
        public var fetch: UInt64?
        public var result: FetchResult?
        public var footprint: UInt64?
        public var pressure: MemoryPressureLevel?
        public var band: JetsamBand?
        public var deviceToken: String?
        public var bgTask: String?
        public var success: Bool?

        public init(callback: String? = nil, signal: AppSignal? = nil, confirmed: Bool? = nil,
                    task: BackgroundTaskID? = nil, taskName: String? = nil, began: Bool? = nil,
                    transfer: TransferNote? = nil, session: SessionIdentifier? = nil, transferTask: TransferTaskID? = nil,
                    push: UInt64? = nil, apnsID: String? = nil, fetch: UInt64? = nil, result: FetchResult? = nil,
                    footprint: UInt64? = nil, pressure: MemoryPressureLevel? = nil, band: JetsamBand? = nil,
                    deviceToken: String? = nil, bgTask: String? = nil, success: Bool? = nil) {
            self.deviceToken = deviceToken
            self.bgTask = bgTask
            self.success = success
            self.footprint = footprint
            self.pressure = pressure
            self.band = band
            self.push = push
            self.apnsID = apnsID
            self.fetch = fetch
            self.result = result
            self.transfer = transfer
            self.session = session
            self.transferTask = transferTask
            self.callback = callback
            self.signal = signal
            self.confirmed = confirmed
            self.task = task
            self.taskName = taskName
            self.began = began
        }
    }

    public init(seq: UInt64, time: Date, kind: Kind, bundleIdentifier: BundleID? = nil, pid: Int32? = nil,
                from: AppState? = nil, to: AppState? = nil, cause: String, mode: BackgroundMode? = nil, fields: Fields = Fields()) {
        self.callback = fields.callback
        self.signal = fields.signal
        self.confirmed = fields.confirmed
        self.task = fields.task
        self.taskName = fields.taskName
        self.began = fields.began
        self.transfer = fields.transfer
        self.session = fields.session
        self.transferTask = fields.transferTask
        self.push = fields.push
        self.apnsID = fields.apnsID
        self.fetch = fields.fetch
        self.result = fields.result
        self.footprint = fields.footprint
        self.pressure = fields.pressure
        self.band = fields.band
        self.deviceToken = fields.deviceToken
        self.bgTask = fields.bgTask
        self.success = fields.success
        self.mode = mode
        self.seq = seq
        self.time = time
        self.kind = kind
        self.bundleIdentifier = bundleIdentifier
        self.pid = pid
        self.from = from
        self.to = to
        self.cause = cause
    }

    /// Reads an event as the synthesized decoder would, with one leniency: a field whose
    /// text names nothing this build knows (a state, mode, signal, transfer note, result,
    /// pressure level or band that a newer host wrote) reads as absent, and the event is
    /// kept: one new word must not cost a reader the line, and the line's `cause` still
    /// says it. The wrong JSON type (a number for a mode), a bundle identifier that is not
    /// one, or a kind this build does not know still fail the line, as they did; the log's
    /// readers skip such lines.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func known<T: RawRepresentable>(_ key: CodingKeys) throws -> T? where T.RawValue == String {
            try c.decodeIfPresent(String.self, forKey: key).flatMap(T.init(rawValue:))
        }
        seq = try c.decode(UInt64.self, forKey: .seq)
        time = try c.decode(Date.self, forKey: .time)
        kind = try c.decode(Kind.self, forKey: .kind)
        bundleIdentifier = try c.decodeIfPresent(BundleID.self, forKey: .bundleIdentifier)
        pid = try c.decodeIfPresent(Int32.self, forKey: .pid)
        from = try known(.from)
        to = try known(.to)
        cause = try c.decode(String.self, forKey: .cause)
        mode = try known(.mode)
        callback = try c.decodeIfPresent(String.self, forKey: .callback)
        signal = try known(.signal)
        confirmed = try c.decodeIfPresent(Bool.self, forKey: .confirmed)
        task = try c.decodeIfPresent(BackgroundTaskID.self, forKey: .task)
        taskName = try c.decodeIfPresent(String.self, forKey: .taskName)
        began = try c.decodeIfPresent(Bool.self, forKey: .began)
        transfer = try known(.transfer)
        session = try c.decodeIfPresent(SessionIdentifier.self, forKey: .session)
        transferTask = try c.decodeIfPresent(TransferTaskID.self, forKey: .transferTask)
        push = try c.decodeIfPresent(UInt64.self, forKey: .push)
        apnsID = try c.decodeIfPresent(String.self, forKey: .apnsID)
        fetch = try c.decodeIfPresent(UInt64.self, forKey: .fetch)
        result = try known(.result)
        footprint = try c.decodeIfPresent(UInt64.self, forKey: .footprint)
        pressure = try known(.pressure)
        band = try known(.band)
        deviceToken = try c.decodeIfPresent(String.self, forKey: .deviceToken)
        bgTask = try c.decodeIfPresent(String.self, forKey: .bgTask)
        success = try c.decodeIfPresent(Bool.self, forKey: .success)
    }
}

/// A signal the host sends an app's process, as `signal` events name it (and as it
/// prints: `SIGSTOP`, not `stop`).
public enum AppSignal: String, Codable, Sendable, CaseIterable, CustomStringConvertible {
    /// Suspend (no assertion left).
    case stop = "SIGSTOP"
    /// Resume (woken, or brought to the foreground).
    case cont = "SIGCONT"
    /// Kill (a watchdog, a terminate, jetsam, a protocol violation).
    case kill = "SIGKILL"

    /// `SIGSTOP`, `SIGCONT`, `SIGKILL`.
    public var description: String { rawValue }
}

/// What a background transfer's event in the host's log is about (`HostEvent.transfer`).
public enum TransferNote: String, Codable, Sendable, CaseIterable {
    /// The transfer daemon said it is ready (host-wide).
    case daemonReady
    /// A task was recorded and handed to the daemon.
    case queued
    /// The daemon waits for a condition (network, power).
    case waiting
    /// The daemon finished it (completed or failed).
    case finished
    /// Finished while the app is not running and its session does not send launch
    /// events: its events wait for the app's next launch.
    case heldForNextLaunch
    /// Finished while the app is suspended and its session does not send launch events:
    /// the app is not resumed for them; they reach it when it next runs.
    case heldUntilResumed
    /// The user terminated the app: its transfers were cancelled.
    case cancelledByUser
    /// The app was uninstalled: its transfers were cancelled.
    case cancelledByUninstall
    /// Background App Refresh was turned off for the app: its transfers were cancelled
    /// (`NSURLErrorCancelledReasonBackgroundUpdatesDisabled`).
    case cancelledByRefreshOff
    /// Transfers the system cancelled are remembered, to be reported when the app makes
    /// their session again, up to a bound per app; past it the oldest are forgotten.
    case cancelledForgotten
}

/// A picture of the screen (`apphost io screenshot`): the app in front, drawn as it is.
public struct ScreenshotInfo: Codable, Sendable, Equatable {
    /// The app pictured.
    public var bundleIdentifier: BundleID
    /// The PNG, in the state directory's `screenshots/` (the latest few are kept).
    public var png: String
    public var time: Date
    public var width: Int
    public var height: Int

    public init(bundleIdentifier: BundleID, png: String, time: Date, width: Int, height: Int) {
        self.bundleIdentifier = bundleIdentifier
        self.png = png
        self.time = time
        self.width = width
        self.height = height
    }
}
