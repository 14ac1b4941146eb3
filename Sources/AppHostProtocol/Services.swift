import Foundation

// The services background-mode plugins offer an app (audio, location, VoIP, BLE,
// external accessories, remote-notification registration). An app calls them
// with ``AppRequest/service(_:)`` and gets a ``ServiceReply``; what the world does
// to the app (a fix, a VoIP push, a BLE notification, accessory bytes, an audio
// interruption) reaches it as ``LifecycleCallback/service(_:)``, a callback like
// any other: the app is woken (or launched) for it only when a plugin says so,
// and it is not suspended while the handler runs.

/// A call from the app to a host service. Named after the iOS API it models.
public enum ServiceRequest: Codable, Sendable, Equatable {
    // MARK: audio (AVAudioSession / AVAudioPlayer)
    /// `AVAudioSession.setActive(true)` with a category (`playback`, `ambient`, ...).
    case audioActivate(category: String)
    /// Plays 16-bit little-endian mono PCM `samples` at `sampleRate`; returns once queued.
    case audioPlay(samples: Data, sampleRate: Int)
    /// Stops playing (and deactivates the session).
    case audioStop

    // MARK: location (CLLocationManager)
    /// `requestWhenInUseAuthorization` / `requestAlwaysAuthorization`.
    case locationRequestAuthorization(always: Bool)
    /// `startUpdatingLocation`.
    case locationStart
    /// `stopUpdatingLocation`.
    case locationStop
    /// `allowsBackgroundLocationUpdates = value`.
    case locationAllowsBackgroundUpdates(Bool)
    /// `startMonitoringSignificantLocationChanges` (true) / `stopMonitoringSignificantLocationChanges` (false).
    case locationSignificantChanges(Bool)
    /// `startMonitoring(for:)` a circular region; a region that cannot be monitored is
    /// answered `.ok` and reported to the delegate (`monitoringDidFailFor`).
    case locationMonitorRegion(CircularRegion)
    /// `stopMonitoring(for:)` the region with this identifier.
    case locationStopMonitoringRegion(identifier: String)
    /// `monitoredRegions`: answered with ``ServiceReply/regions(_:)``.
    case locationMonitoredRegions

    // MARK: voip (PKPushRegistry / CXProvider)
    /// `PKPushRegistry.desiredPushTypes = [.voIP]`: asks for a VoIP push token.
    case voipRegister
    /// `CXProvider.reportNewIncomingCall(with:update:completion:)`.
    case voipReportIncomingCall(uuid: String, handle: String)
    /// `CXProvider.reportCall(with:endedAt:reason:)`.
    case voipEndCall(uuid: String)

    // MARK: bluetooth (CBCentralManager / CBPeripheralManager)
    /// `scanForPeripherals(withServices:)`; nil scans for everything (foreground only on iOS).
    case bleScan(services: [String]?)
    /// `stopScan()`.
    case bleStopScan
    /// `connect(_:)`.
    case bleConnect(peripheral: String)
    /// `cancelPeripheralConnection(_:)`.
    case bleDisconnect(peripheral: String)
    /// `CBPeripheralManager.startAdvertising` with service UUIDs and a local name.
    case bleStartAdvertising(services: [String], localName: String?)
    /// `stopAdvertising()`.
    case bleStopAdvertising

    // MARK: external accessory (EAAccessoryManager / EASession)
    /// `EAAccessoryManager.connectedAccessories` (only those speaking a protocol the app declared).
    case accessoryList

    // MARK: remote notifications (UIApplication)
    /// `registerForRemoteNotifications()`.
    case registerForRemoteNotifications
    /// The completion handler of `didReceiveRemoteNotification` for push `id` was called.
    case remoteNotificationCompleted(id: UInt64, result: FetchResult)

    // MARK: background fetch and refresh (UIApplication)
    /// `setMinimumBackgroundFetchInterval(_:)`.
    case fetchSetMinimumInterval(FetchInterval)
    /// The completion handler of `performFetch` number `id` was called.
    case fetchCompleted(id: UInt64, result: FetchResult)
    /// `backgroundRefreshStatus`.
    case backgroundRefreshStatus
    /// `isProtectedDataAvailable`: answered with ``ServiceReply/protectedDataAvailable(_:)``.
    case protectedDataAvailability

    // MARK: BGTaskScheduler
    /// `register(forTaskWithIdentifier:using:launchHandler:)`.
    case bgRegister(identifier: String)
    /// `submit(_:)`.
    case bgSubmit(BGTaskRequestInfo)
    /// `cancel(taskRequestWithIdentifier:)`; nil: `cancelAllTaskRequests()`.
    case bgCancel(identifier: String?)
    /// `getPendingTaskRequests`.
    case bgPending
    /// `BGTask.setTaskCompleted(success:)`.
    case bgTaskCompleted(identifier: String, success: Bool)

    // MARK: background URLSession
    /// `URLSession(configuration: .background(withIdentifier:), delegate:)`: (re)connects
    /// to the session; the reply lists its tasks (``ServiceReply/transferTasks(_:)``).
    case urlSessionCreate(BackgroundSessionConfig)
    /// `downloadTask(with:)` / `uploadTask(with:fromFile:)` then `resume()`: the reply
    /// gives the task identifier (``ServiceReply/transferTaskCreated(taskIdentifier:)``).
    case urlSessionStartTask(session: SessionIdentifier, kind: TransferKind, url: String, method: String,
                             headers: [String: String], uploadFile: String?)
    /// `cancel()` / `cancel(byProducingResumeData:)`. With `produceResumeData`, the
    /// resume data comes later, as ``ServiceEvent/urlSessionResumeData(session:taskIdentifier:data:)``
    /// just before the task's `didCompleteWithError`.
    case urlSessionCancel(session: SessionIdentifier, taskIdentifier: TransferTaskID, produceResumeData: Bool)
    /// `downloadTask(withResumeData:)` then `resume()`: a download that goes on from
    /// where a cancelled one stopped; the reply gives the task identifier.
    case urlSessionResumeTask(session: SessionIdentifier, resumeData: Data)
    /// `getAllTasks` / `getTasksWithCompletionHandler`.
    case urlSessionTasks(session: SessionIdentifier)
    /// The completion handler of `handleEventsForBackgroundURLSession` was called.
    case urlSessionEventsCompleted(session: SessionIdentifier)

    // MARK: host-clock timers (AppKitLess HostTimer)
    /// `HostTimer.scheduledTimer(withTimeInterval:repeats:block:)`: fire timer `id` (chosen
    /// by the app, unique among its live timers) `interval` seconds from now on the
    /// host's clock, and every `interval` after that when `repeats` (see
    /// ``HostTimerInterval`` for what the interval becomes). The host answers `.ok`, or
    /// `.refused` for an interval that is not a number (NaN, infinite), for a timer
    /// beyond the live timers it keeps per app (256 unless configured), or for an `id`
    /// already live. It fires the timer as ``ServiceEvent/timerFired(id:)``;
    /// `invalidate()` is ``AppMessage/invalidateTimer(id:)``.
    case timerSchedule(id: HostTimerID, interval: Double, repeats: Bool)

    /// The iOS API's name, for events and errors.
    public var apiName: String {
        switch self {
        case .audioActivate: "AVAudioSession.setActive"
        case .audioPlay: "AVAudioPlayer.play"
        case .audioStop: "AVAudioPlayer.stop"
        case .locationRequestAuthorization(let always): always ? "CLLocationManager.requestAlwaysAuthorization" : "CLLocationManager.requestWhenInUseAuthorization"
        case .locationStart: "CLLocationManager.startUpdatingLocation"
        case .locationStop: "CLLocationManager.stopUpdatingLocation"
        case .locationAllowsBackgroundUpdates: "CLLocationManager.allowsBackgroundLocationUpdates"
        case .locationSignificantChanges(let on): on ? "CLLocationManager.startMonitoringSignificantLocationChanges" : "CLLocationManager.stopMonitoringSignificantLocationChanges"
        case .locationMonitorRegion: "CLLocationManager.startMonitoring(for:)"
        case .locationStopMonitoringRegion: "CLLocationManager.stopMonitoring(for:)"
        case .locationMonitoredRegions: "CLLocationManager.monitoredRegions"
        case .voipRegister: "PKPushRegistry.desiredPushTypes"
        case .voipReportIncomingCall: "CXProvider.reportNewIncomingCall"
        case .voipEndCall: "CXProvider.reportCall(endedAt:)"
        case .bleScan: "CBCentralManager.scanForPeripherals"
        case .bleStopScan: "CBCentralManager.stopScan"
        case .bleConnect: "CBCentralManager.connect"
        case .bleDisconnect: "CBCentralManager.cancelPeripheralConnection"
        case .bleStartAdvertising: "CBPeripheralManager.startAdvertising"
        case .bleStopAdvertising: "CBPeripheralManager.stopAdvertising"
        case .accessoryList: "EAAccessoryManager.connectedAccessories"
        case .registerForRemoteNotifications: "UIApplication.registerForRemoteNotifications"
        case .remoteNotificationCompleted: "didReceiveRemoteNotification completion"
        case .fetchSetMinimumInterval: "UIApplication.setMinimumBackgroundFetchInterval"
        case .fetchCompleted: "performFetch completion"
        case .backgroundRefreshStatus: "UIApplication.backgroundRefreshStatus"
        case .protectedDataAvailability: "UIApplication.isProtectedDataAvailable"
        case .bgRegister: "BGTaskScheduler.register"
        case .bgSubmit: "BGTaskScheduler.submit"
        case .bgCancel: "BGTaskScheduler.cancel"
        case .bgPending: "BGTaskScheduler.getPendingTaskRequests"
        case .bgTaskCompleted: "BGTask.setTaskCompleted"
        case .urlSessionCreate: "URLSession(configuration: .background)"
        case .urlSessionStartTask(_, let kind, _, _, _, _): kind == .download ? "URLSession.downloadTask" : "URLSession.uploadTask"
        case .urlSessionCancel: "URLSessionTask.cancel"
        case .urlSessionResumeTask: "URLSession.downloadTask(withResumeData:)"
        case .urlSessionTasks: "URLSession.getAllTasks"
        case .urlSessionEventsCompleted: "handleEventsForBackgroundURLSession completion"
        case .timerSchedule: "HostTimer.scheduledTimer"
        }
    }
}

/// `URLSessionConfiguration.background(withIdentifier:)` and its settings.
public struct BackgroundSessionConfig: Codable, Sendable, Equatable {
    public var identifier: SessionIdentifier
    public var isDiscretionary: Bool
    public var sessionSendsLaunchEvents: Bool
    /// `timeoutIntervalForResource` in seconds (default 7 days).
    public var timeoutIntervalForResource: Double
    public var allowsCellularAccess: Bool

    public init(identifier: SessionIdentifier, isDiscretionary: Bool = false, sessionSendsLaunchEvents: Bool = true,
                timeoutIntervalForResource: Double = 7 * 86400, allowsCellularAccess: Bool = true) {
        self.identifier = identifier
        self.isDiscretionary = isDiscretionary
        self.sessionSendsLaunchEvents = sessionSendsLaunchEvents
        self.timeoutIntervalForResource = timeoutIntervalForResource
        self.allowsCellularAccess = allowsCellularAccess
    }
}

/// Where a background task is, as the host tells an app in `getAllTasks`. The raw
/// value is the string on the wire (unchanged from when this was a string); a string
/// this build does not know fails the decoding of the answer, naming the value.
public enum TransferTaskState: String, Codable, Sendable, CaseIterable {
    /// Handed to the transfer daemon, no attempt yet.
    case queued
    /// Waiting for the device conditions or for a retry.
    case waiting
    /// Transferring (progress has come).
    case running
    /// Ended: the outcome is delivered, or on its way, to the app.
    case completed
}

/// A background task as `getAllTasks` lists it.
public struct TransferTaskSnapshot: Codable, Sendable, Equatable {
    public var taskIdentifier: TransferTaskID
    public var kind: TransferKind
    public var url: String
    /// Where the task is.
    public var state: TransferTaskState
    /// Bytes transferred so far.
    public var bytesDone: Int64
    /// The size, once the server said it.
    public var bytesExpected: Int64?

    /// A task as the host lists it.
    public init(taskIdentifier: TransferTaskID, kind: TransferKind, url: String, state: TransferTaskState, bytesDone: Int64, bytesExpected: Int64?) {
        self.taskIdentifier = taskIdentifier
        self.kind = kind
        self.url = url
        self.state = state
        self.bytesDone = bytesDone
        self.bytesExpected = bytesExpected
    }
}

/// `UIBackgroundFetchResult`.
public enum FetchResult: String, Codable, Sendable, CaseIterable {
    case newData, noData, failed
}

/// `setMinimumBackgroundFetchInterval`'s argument.
public enum FetchInterval: Codable, Sendable, Equatable {
    /// `UIApplicationBackgroundFetchIntervalNever` (the default).
    case never
    /// `UIApplicationBackgroundFetchIntervalMinimum`: as often as the system allows.
    case minimum
    /// At most once per this many seconds.
    case seconds(Double)
}

/// `UIBackgroundRefreshStatus`.
public enum BackgroundRefreshStatus: String, Codable, Sendable, CaseIterable {
    /// Background refresh is on for the app.
    case available
    /// The user turned it off, for this app or for every app.
    case denied
    /// Low-power mode or a configuration policy: the user cannot turn it on.
    case restricted
}

/// A `BGTaskRequest`: `BGAppRefreshTaskRequest` or `BGProcessingTaskRequest`.
public struct BGTaskRequestInfo: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable { case refresh, processing }
    public var kind: Kind
    public var identifier: String
    /// `earliestBeginDate`, as seconds from when it was submitted (nil: as soon as possible).
    public var earliestBegin: Double?
    /// Processing only.
    public var requiresExternalPower: Bool
    /// Processing only.
    public var requiresNetworkConnectivity: Bool

    public init(kind: Kind, identifier: String, earliestBegin: Double? = nil,
                requiresExternalPower: Bool = false, requiresNetworkConnectivity: Bool = false) {
        self.kind = kind
        self.identifier = identifier
        self.earliestBegin = earliestBegin
        self.requiresExternalPower = requiresExternalPower
        self.requiresNetworkConnectivity = requiresNetworkConnectivity
    }
}

/// Location authorization, as `CLAuthorizationStatus`.
public enum LocationAuthorization: String, Codable, Sendable, CaseIterable {
    case notDetermined, denied, whenInUse, always
}

/// One location fix.
public struct LocationFix: Codable, Sendable, Equatable {
    public var latitude: Double
    public var longitude: Double
    public var altitude: Double?
    /// When it was taken (from a GPX `<time>`), if known.
    public var timestamp: Date?

    public init(latitude: Double, longitude: Double, altitude: Double? = nil, timestamp: Date? = nil) {
        self.latitude = latitude
        self.longitude = longitude
        self.altitude = altitude
        self.timestamp = timestamp
    }
}

/// A simulated BLE peripheral as a central sees it.
public struct BLEPeripheral: Codable, Sendable, Equatable {
    /// Its identifier (a UUID string, or any name the world file gives it).
    public var id: String
    public var name: String?
    /// Advertised service UUIDs (upper-case).
    public var services: [String]
    /// Signal strength in dBm.
    public var rssi: Int

    public init(id: String, name: String? = nil, services: [String], rssi: Int = -60) {
        self.id = id
        self.name = name
        self.services = services
        self.rssi = rssi
    }
}

/// A connected external accessory, as `EAAccessory`.
public struct Accessory: Codable, Sendable, Equatable {
    /// `connectionID`.
    public var id: Int
    public var name: String
    /// `protocolStrings` (reverse-DNS, e.g. `com.example.printer`).
    public var protocols: [String]

    public init(id: Int, name: String, protocols: [String]) {
        self.id = id
        self.name = name
        self.protocols = protocols
    }
}

/// The host's answer to a ``ServiceRequest``.
public enum ServiceReply: Codable, Sendable, Equatable {
    /// Done.
    case ok
    /// The location authorization now in force.
    case authorization(LocationAuthorization)
    /// The app's monitored regions (`monitoredRegions`), by identifier.
    case regions([CircularRegion])
    /// A push token, hex.
    case token(String)
    /// The connected accessories the app may talk to.
    case accessories([Accessory])
    /// `backgroundRefreshStatus`.
    case refreshStatus(BackgroundRefreshStatus)
    /// `isProtectedDataAvailable`: false while the device is locked.
    case protectedDataAvailable(Bool)
    /// Pending BGTaskScheduler requests.
    case bgRequests([BGTaskRequestInfo])
    /// A background session's tasks.
    case transferTasks([TransferTaskSnapshot])
    /// A task was created and resumed.
    case transferTaskCreated(taskIdentifier: TransferTaskID)
    /// A failure with an error code of the iOS API (e.g. BGTaskScheduler's
    /// `notPermitted`, `tooManyPendingTaskRequests`, `unavailable`).
    case failed(code: String, reason: String)
    /// Refused; `reason` says why in the terms of the iOS rule (e.g. a missing
    /// background mode or entitlement).
    case refused(reason: String)
    /// A programmer error iOS answers with an exception: the service is refused, and the
    /// app raises `exception` and aborts (AppKitLess does), ending with `SIGABRT`.
    case raise(exception: UncaughtException)
}

/// Something the world does to an app, delivered as a callback.
public enum ServiceEvent: Codable, Sendable, Equatable {
    /// `AVAudioSession.interruptionNotification` (began / ended).
    case audioInterruption(began: Bool, reason: String)
    /// `locationManager(_:didUpdateLocations:)`.
    case locationUpdate([LocationFix])
    /// `locationManagerDidChangeAuthorization(_:)`.
    case locationAuthorizationChanged(LocationAuthorization)
    /// `locationManager(_:didEnterRegion:)` (`entered`) / `didExitRegion` (not).
    case locationRegionCrossed(CircularRegion, entered: Bool)
    /// `locationManager(_:monitoringDidFailFor:withError:)`.
    case locationMonitoringFailed(region: CircularRegion?, code: LocationErrorCode, reason: String)
    /// `pushRegistry(_:didReceiveIncomingPushWith:for:completion:)`; `payload` is the JSON text.
    case voipPush(payload: String)
    /// `centralManager(_:didDiscover:advertisementData:rssi:)`.
    case bleDiscovered(BLEPeripheral)
    /// `centralManager(_:didConnect:)`.
    case bleConnected(peripheral: String)
    /// `centralManager(_:didDisconnectPeripheral:error:)`.
    case bleDisconnected(peripheral: String)
    /// `peripheral(_:didUpdateValueFor:error:)` for a notifying characteristic.
    case bleNotification(peripheral: String, characteristic: String, value: Data)
    /// `EAAccessoryDidConnect`.
    case accessoryConnected(Accessory)
    /// `EAAccessoryDidDisconnect`.
    case accessoryDisconnected(Accessory)
    /// Bytes on an `EASession`'s input stream.
    case accessoryData(accessory: Accessory, protocolString: String, bytes: Data)
    /// `protectedDataWillBecomeUnavailable` (false: the device locked; `complete` files
    /// are already closed) / `protectedDataDidBecomeAvailable` (true: they are open again).
    case protectedDataAvailability(Bool)
    /// `performFetch(completion:)`; answer with ``ServiceRequest/fetchCompleted(id:result:)``.
    case performFetch(id: UInt64)
    /// `didReceiveRemoteNotification(userInfo:completion:)` (`silent`: a content-available
    /// push delivered in the background; answer with ``ServiceRequest/remoteNotificationCompleted(id:result:)``).
    case remoteNotification(id: UInt64, userInfo: String, silent: Bool)
    /// A BGTaskScheduler launch handler for a registered identifier.
    case bgTaskLaunch(identifier: String, kind: BGTaskRequestInfo.Kind)
    /// The running task's `expirationHandler`.
    case bgTaskExpire(identifier: String)
    /// `handleEventsForBackgroundURLSession(identifier:completion:)`; the app answers
    /// with ``ServiceRequest/urlSessionEventsCompleted(session:)``.
    case urlSessionHandleEvents(session: SessionIdentifier)
    /// `urlSession(_:downloadTask:didWriteData:...)`.
    case urlSessionProgress(session: SessionIdentifier, taskIdentifier: TransferTaskID, bytesDone: Int64, bytesExpected: Int64?)
    /// `urlSession(_:downloadTask:didFinishDownloadingTo:)`: `location` is a temporary file
    /// in the container, deleted once the method returns.
    case urlSessionDidFinishDownloading(session: SessionIdentifier, taskIdentifier: TransferTaskID, location: String)
    /// `urlSession(_:task:didCompleteWithError:)`; nil code: success. `cancelledReason`:
    /// the system cancelled the task (code `cancelled`), as
    /// `NSURLErrorBackgroundTaskCancelledReasonKey` says.
    case urlSessionDidComplete(session: SessionIdentifier, taskIdentifier: TransferTaskID, errorCode: String?, errorReason: String?,
                               cancelledReason: BackgroundTaskCancelledReason? = nil)
    /// `urlSessionDidFinishEvents(forBackgroundURLSession:)`.
    case urlSessionDidFinishEvents(session: SessionIdentifier)
    /// The answer to `cancel(byProducingResumeData:)`: the resume data (a property list,
    /// opaque to the app), or nil when the download cannot be resumed (no validator
    /// from the server, nothing received yet).
    case urlSessionResumeData(session: SessionIdentifier, taskIdentifier: TransferTaskID, data: Data?)
    /// Host-clock timer `id` (``ServiceRequest/timerSchedule(id:interval:repeats:)``) fell
    /// due: run its block. Sent only while the app runs code; one that falls due while the
    /// app is suspended is sent once when it runs again.
    case timerFired(id: HostTimerID)

    /// The delegate method's name, for events and logs.
    public var name: String {
        switch self {
        case .audioInterruption(let began, _): began ? "audioInterruption(began)" : "audioInterruption(ended)"
        case .locationUpdate(let fixes): "didUpdateLocations(\(fixes.count))"
        case .locationAuthorizationChanged(let a): "didChangeAuthorization(\(a.rawValue))"
        case .locationRegionCrossed(let r, let entered): entered ? "didEnterRegion(\(r.identifier))" : "didExitRegion(\(r.identifier))"
        case .locationMonitoringFailed(let r, let code, _): "monitoringDidFailFor(\(r?.identifier ?? "nil"), \(code.rawValue))"
        case .voipPush: "didReceiveIncomingPush(voIP)"
        case .bleDiscovered(let p): "didDiscover(\(p.id))"
        case .bleConnected(let p): "didConnect(\(p))"
        case .bleDisconnected(let p): "didDisconnect(\(p))"
        case .bleNotification(let p, let c, _): "didUpdateValue(\(p) \(c))"
        case .accessoryConnected(let a): "accessoryDidConnect(\(a.name))"
        case .accessoryDisconnected(let a): "accessoryDidDisconnect(\(a.name))"
        case .accessoryData(let a, let proto, let bytes): "EASession(\(a.name) \(proto)) \(bytes.count) bytes"
        case .protectedDataAvailability(let available): available ? "protectedDataDidBecomeAvailable" : "protectedDataWillBecomeUnavailable"
        case .performFetch: "performFetch"
        case .remoteNotification(_, _, let silent): silent ? "didReceiveRemoteNotification(background)" : "didReceiveRemoteNotification"
        case .bgTaskLaunch(let identifier, _): "BGTask launch(\(identifier))"
        case .bgTaskExpire(let identifier): "BGTask expiration(\(identifier))"
        case .urlSessionHandleEvents(let session): "handleEventsForBackgroundURLSession(\(session))"
        case .urlSessionProgress(_, let task, _, _): "didWriteData(task \(task))"
        case .urlSessionDidFinishDownloading(_, let task, _): "didFinishDownloadingTo(task \(task))"
        case .urlSessionDidComplete(_, let task, let code, _, let why):
            "didCompleteWithError(task \(task), \(code ?? "nil")\(why.map { ", \($0.name)" } ?? ""))"
        case .urlSessionDidFinishEvents(let session): "urlSessionDidFinishEvents(\(session))"
        case .urlSessionResumeData(_, let task, let data): "cancel(byProducingResumeData:) completion(task \(task), \(data == nil ? "nil" : "data"))"
        case .timerFired(let id): "HostTimer(\(id)) fired"
        }
    }
}

/// A CLI command to the background-mode plugins: privacy, outside events, the
/// simulated worlds (location, BLE, accessories).
public enum ModeCommand: Codable, Sendable, Equatable {
    /// `apphost privacy grant|revoke|reset <service> [<id>]`.
    case privacy(action: PrivacyAction, service: PrivacyScope, bundleIdentifier: BundleID?)
    /// `apphost location set <lat>,<lon>`.
    case locationSet(LocationFix)
    /// `apphost location route <file.gpx>`: fixes played on the host clock, one every
    /// `interval` seconds unless their timestamps say otherwise.
    case locationRoute(name: String, fixes: [LocationFix], interval: Double)
    /// `apphost location clear`: no fix, stop a route.
    case locationClear
    /// `apphost push --type voip <id> <payload>`.
    case voipPush(bundleIdentifier: BundleID, payload: String)
    /// `apphost ble add`: a peripheral appears and advertises.
    case bleAdd(BLEPeripheral)
    /// `apphost ble load <world.json>`: replace the simulated peripherals.
    case bleLoad([BLEPeripheral])
    /// `apphost ble remove <id>`.
    case bleRemove(id: String)
    /// `apphost ble notify <id> <characteristic> <value>`.
    case bleNotify(peripheral: String, characteristic: String, value: Data)
    /// `apphost ble list`: peripherals, scanners, connections and advertisers.
    case bleList
    /// `apphost accessory connect <protocol>... --name N`.
    case accessoryConnect(name: String, protocols: [String])
    /// `apphost accessory disconnect <protocol|id>`.
    case accessoryDisconnect(String)
    /// `apphost accessory send <protocol> <bytes>`.
    case accessorySend(protocolString: String, bytes: Data)
    /// `apphost accessory list`.
    case accessoryList

    /// `apphost settings background-refresh [<id>] on|off` (nil: the global switch).
    case settingsBackgroundRefresh(bundleIdentifier: BundleID?, on: Bool)
    /// `apphost settings low-power on|off`.
    case settingsLowPower(Bool)
    /// `apphost settings show`.
    case settingsShow
    /// `apphost device power plugged|battery`.
    case devicePower(plugged: Bool)
    /// `apphost device network wifi|cellular|none`.
    case deviceNetwork(DeviceNetwork)
    /// `apphost device show`.
    case deviceShow
    /// `apphost device lock` (true) / `unlock` (false).
    case deviceLock(Bool)
    /// `apphost device memory normal|warning|critical`: force the memory pressure level,
    /// as the kernel would report it (`normal` hands it back to the computed level).
    case deviceMemory(MemoryPressureLevel)
    /// `apphost fetch <id>`: one background fetch now (Xcode's Simulate Background Fetch).
    case fetchNow(bundleIdentifier: BundleID)
    /// `apphost fetch schedule`: every app's next fetch and why.
    case fetchSchedule
    /// `apphost bgtask run <id> <identifier>` (`_simulateLaunchForTaskWithIdentifier`).
    case bgTaskRun(bundleIdentifier: BundleID, identifier: String)
    /// `apphost bgtask expire <id> <identifier>` (`_simulateExpirationForTaskWithIdentifier`).
    case bgTaskExpire(bundleIdentifier: BundleID, identifier: String)
    /// `apphost bgtask list [<id>]`: pending and running tasks and what they wait for.
    case bgTaskList(bundleIdentifier: BundleID?)
    /// `apphost push <id> <file>` and the push gateway: a remote notification.
    case push(PushRequest)
}

/// The simulated network (`apphost device network`).
public enum DeviceNetwork: String, Codable, Sendable, CaseIterable {
    case wifi, cellular, none
}

/// A remote notification on its way to an app, as APNs gets it.
public struct PushRequest: Codable, Sendable, Equatable {
    public var bundleIdentifier: BundleID
    /// The JSON payload (an object with `aps`).
    public var payload: String
    /// `apns-push-type`: `alert`, `background`, `voip`, ...; nil: inferred from the payload.
    public var pushType: String?
    /// `apns-priority` (5 or 10).
    public var priority: Int?
    /// `apns-collapse-id`.
    public var collapseID: String?
    /// `apns-id`.
    public var apnsID: String?
    /// `apns-expiration` (UNIX seconds; 0: deliver now or never).
    public var expiration: Int?
    /// Where it came from, for events (`cli`, `gateway`).
    public var source: String

    public init(bundleIdentifier: BundleID, payload: String, pushType: String? = nil, priority: Int? = nil,
                collapseID: String? = nil, apnsID: String? = nil, expiration: Int? = nil, source: String = "cli") {
        self.bundleIdentifier = bundleIdentifier
        self.payload = payload
        self.pushType = pushType
        self.priority = priority
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.expiration = expiration
        self.source = source
    }
}
