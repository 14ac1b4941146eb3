import Foundation

/// The version both sides announce in the handshake. The host refuses an app
/// that speaks another version.
public enum IPCProtocol {
    /// Current wire version. 2: no `heartbeat` callback; the main run loop stamps its
    /// turns on the page at ``stampDescriptor`` instead (issue 18). 3: an app says the
    /// uncaught exception it aborts for (``AppMessage/uncaughtException(exception:)``), and
    /// a service request may be answered ``ServiceReply/raise(exception:)``.
    public static let version = 3
    /// The descriptor on which an app finds its IPC socket.
    public static let descriptor: Int32 = 3
    /// The environment variable that names that descriptor (set by the host).
    public static let descriptorEnvironmentKey = "APPHOST_IPC_FD"
    /// The environment variable holding the app's bundle identifier.
    public static let bundleIdentifierEnvironmentKey = "APPHOST_BUNDLE_ID"
    /// The environment variable holding the absolute path of the app's bundle
    /// (readable by the app, not writable).
    public static let bundlePathEnvironmentKey = "APPHOST_BUNDLE_PATH"
    /// The environment variable holding the app's App Group containers: a JSON
    /// object from group identifier to the container's absolute path. Absent
    /// when the app belongs to no group.
    public static let applicationGroupContainersEnvironmentKey = "APPHOST_APP_GROUP_CONTAINERS"
    /// The descriptor on which an app finds its run-loop stamp page: a sealed memfd
    /// of ``stampPageSize`` bytes the host made for this process. The app's main run
    /// loop stores, at byte 0, a counter of its turns (UInt64, +1 when a turn begins)
    /// and, at byte 8, the CLOCK_MONOTONIC nanoseconds at which the current turn began
    /// (UInt64, 0 while it waits for work), both little-endian, with release stores.
    /// The host reads them at its hang-check deadline: nothing crosses the socket.
    public static let stampDescriptor: Int32 = 4
    /// The environment variable that names that descriptor (set by the host when it
    /// made a page; absent otherwise).
    public static let stampDescriptorEnvironmentKey = "APPHOST_STAMP_FD"
    /// Size of the stamp page (the first 16 bytes are used).
    public static let stampPageSize = 4096
}

/// The iOS application states.
public enum AppState: String, Codable, Sendable, CaseIterable {
    case notRunning, inactive, active, background, suspended
}

/// Why an app was launched; passed to `didFinishLaunching(options:)`.
public enum LaunchReason: String, Codable, Sendable {
    /// The user launched it (CLI `launch`, `run`, `foreground`).
    case user
    /// Launched straight into the background (`launch --background`).
    case background
    /// Launched in the background for a location fix (`UIApplication.LaunchOptionsKey.location`).
    case location
    /// Launched in the background for a VoIP push (PushKit).
    case voipPush
    /// Launched in the background for a BLE event (`.bluetoothCentrals`).
    case bluetoothCentral
    /// Launched in the background for a BLE peripheral-manager event (`.bluetoothPeripherals`).
    case bluetoothPeripheral
    /// Launched in the background for an external accessory.
    case externalAccessory
    /// Launched in the background for a background fetch.
    case backgroundFetch
    /// Launched in the background for a silent remote notification (`.remoteNotification`).
    case remoteNotification
    /// Launched in the background for a BGTaskScheduler task.
    case backgroundTask
    /// Launched in the background for background URLSession events.
    case urlSessionEvents

    /// Whether the app was launched into the background rather than by the user.
    public var isBackground: Bool { self != .user }
}

/// Options handed to `didFinishLaunching`.
public struct LaunchOptions: Codable, Sendable, Equatable {
    /// Why the app is being launched.
    public var reason: LaunchReason
    /// Arguments given after `--` on `apphost launch`.
    public var arguments: [String]
    /// The app's last process was ended by jetsam (memory pressure) and the user brought
    /// it back from the app switcher: a cold launch where the user expects the app as
    /// they left it (iOS apps restore their state here). Written only when true, so the
    /// frame of every other launch is the same bytes as before it existed.
    public var afterJetsam: Bool

    public init(reason: LaunchReason, arguments: [String] = [], afterJetsam: Bool = false) {
        self.reason = reason
        self.arguments = arguments
        self.afterJetsam = afterJetsam
    }

    private enum CodingKeys: String, CodingKey { case reason, arguments, afterJetsam }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        reason = try c.decode(LaunchReason.self, forKey: .reason)
        arguments = try c.decode([String].self, forKey: .arguments)
        afterJetsam = try c.decodeIfPresent(Bool.self, forKey: .afterJetsam) ?? false
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        if afterJetsam { try c.encode(true, forKey: .afterJetsam) }
        try c.encode(arguments, forKey: .arguments)
        try c.encode(reason, forKey: .reason)
    }
}

/// The delegate callbacks the host asks an app to run, in iOS order.
public enum LifecycleCallback: Codable, Sendable, Equatable {
    case didFinishLaunching(options: LaunchOptions)
    case willResignActive
    case didEnterBackground
    case willEnterForeground
    case didBecomeActive
    case willTerminate
    /// The background time is about to run out: run the expiration handler of task
    /// `taskID` (if it is still open), on the main thread, then return.
    case backgroundTaskExpiration(taskID: BackgroundTaskID)
    /// A service event (a location fix, a VoIP push, BLE or accessory data, an
    /// audio interruption), run by the service's delegate on the main thread.
    case service(ServiceEvent)
    /// The device is short of memory (`applicationDidReceiveMemoryWarning(_:)`): free
    /// what can be made again. Sent to apps running code when the pressure rises to
    /// `warning` or `critical`; suspended apps get none, as on iOS.
    case didReceiveMemoryWarning

    /// The delegate method's name, for events and logs.
    public var name: String {
        switch self {
        case .didFinishLaunching: "didFinishLaunching"
        case .willResignActive: "willResignActive"
        case .didEnterBackground: "didEnterBackground"
        case .willEnterForeground: "willEnterForeground"
        case .didBecomeActive: "didBecomeActive"
        case .willTerminate: "willTerminate"
        case .backgroundTaskExpiration(let id): "expirationHandler(task \(id))"
        case .service(let event): event.name
        case .didReceiveMemoryWarning: "didReceiveMemoryWarning"
        }
    }
}

/// A question an app asks the host and waits for.
public enum AppRequest: Codable, Sendable, Equatable {
    /// How long the app may still run in the background.
    case backgroundTimeRemaining
    /// A call to a host service (audio, location, VoIP, BLE, accessories, push registration).
    case service(ServiceRequest)
}

/// The host's answer to an ``AppRequest``.
public enum HostReply: Codable, Sendable, Equatable {
    /// Seconds left; `Double.greatestFiniteMagnitude` in the foreground (iOS's DBL_MAX).
    case backgroundTimeRemaining(seconds: Double)
    /// The answer to a ``AppRequest/service(_:)``.
    case service(ServiceReply)
    /// The request could not be answered.
    case failed(reason: String)
}

/// App → host.
public enum AppMessage: Codable, Sendable, Equatable {
    /// First message on the socket.
    case hello(version: Int, pid: Int32)
    /// The delegate method for callback `seq` has returned.
    case callbackReturned(seq: UInt64)
    /// `beginBackgroundTask(name:expirationHandler:)`; ids are chosen by the app, unique per process.
    case beginBackgroundTask(id: BackgroundTaskID, name: String?)
    /// `endBackgroundTask(_:)`.
    case endBackgroundTask(id: BackgroundTaskID)
    /// A request the app waits on; answered by ``HostMessage/reply(id:reply:)``.
    case request(id: UInt64, request: AppRequest)
    /// The app's window changed: its whole view tree (sent before the callbackReturned of
    /// the callback that changed it, so the host has it when it takes a snapshot).
    case viewTree(ViewTree)
    /// `ignoreSnapshotOnNextApplicationLaunch()`: until the app is next active, its
    /// snapshots are not of its window; the switcher shows the launch image instead.
    case ignoreSnapshotOnNextApplicationLaunch
    /// `HostTimer.invalidate()`: the host forgets timer `id` (scheduled with
    /// ``ServiceRequest/timerSchedule(id:interval:repeats:)``) and fires it no more. Not
    /// answered, so it does not wait for the host; an id the host does not know (never
    /// scheduled, a one-shot that fired) is ignored.
    case invalidateTimer(id: HostTimerID)
    /// The app's memory footprint changed (it allocated or freed a lot): a cue for the
    /// host to read it again from the kernel (the app says no number; the host does not
    /// take an app's word for its size). Not answered. The host reads on these cues at
    /// most ``AppBounds`` `footprintCues` a second per app; the rest wait for its next reading.
    case memoryFootprintChanged
    /// The app is about to abort for an uncaught exception (a programmer error, as iOS
    /// raises it): the host puts it in the report of the exit that follows. Not answered;
    /// the first one of a process is kept, cut to ``UncaughtException/bounded()``.
    case uncaughtException(exception: UncaughtException)
}

/// Host → app.
public enum HostMessage: Codable, Sendable, Equatable {
    /// Answer to `hello`: the handshake succeeded. `screen` is the screen the host draws
    /// snapshots for (its `snapshots.screen`), so the app can lay its window out for it
    /// (`Window.bounds`); nil from a host that does not say (the app assumes
    /// ``ScreenSize/default``).
    case welcome(version: Int, bundleIdentifier: String, screen: ScreenSize? = nil)
    /// Run a delegate callback with the application now in `state`; answer with
    /// ``AppMessage/callbackReturned(seq:)`` once it returns.
    case callback(seq: UInt64, callback: LifecycleCallback, state: AppState)
    /// Answer to ``AppMessage/request(id:request:)``.
    case reply(id: UInt64, reply: HostReply)
    /// The handshake failed; the app should exit.
    case rejected(reason: String)
}
