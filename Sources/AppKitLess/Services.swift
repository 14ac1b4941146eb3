import AppHostProtocol
import Dispatch
import Foundation

// The host services an app reaches through its background-mode plugins (audio,
// location, VoIP, BLE, external accessories, remote-notification registration),
// named after the iOS classes they model. Each call is one request to the host
// that blocks its caller until the host answers, like `backgroundTimeRemaining`;
// what the world does to the app arrives as a callback that ``ServiceRouter``
// hands to the live service object(s) of its kind on the main thread.

/// One location fix (latitude, longitude, optional altitude and time), as `CLLocation`.
public typealias LocationFix = AppHostProtocol.LocationFix
/// Location authorization, as `CLAuthorizationStatus`.
public typealias LocationAuthorization = AppHostProtocol.LocationAuthorization
/// A simulated BLE peripheral as a central sees it, as `CBPeripheral` plus its advertisement.
public typealias BLEPeripheral = AppHostProtocol.BLEPeripheral
/// A connected external accessory, as `EAAccessory`.
public typealias Accessory = AppHostProtocol.Accessory

/// Why a service call failed.
///
/// Most failures are refusals (``Kind-swift.enum/refused``): the host applied an
/// iOS rule, e.g. a missing background mode or entitlement, and ``reason`` says
/// which in a readable sentence. Some refusals also get the app killed by the host
/// (setting `allowsBackgroundLocationUpdates` without the `location` mode); that
/// kill arrives from outside, the call itself just fails.
public struct ServiceError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What kind of failure.
    public enum Kind: Sendable, Equatable {
        /// The host refused the call under an iOS rule.
        case refused
        /// The host could not answer, answered something that does not fit the
        /// call, or the call could not be sent (too large).
        case failed
        /// There is no connection to the host (it went away, or the call was made
        /// before ``ApplicationMain(delegate:)`` connected). The app is exiting.
        case connectionLost
    }

    /// What kind of failure.
    public let kind: Kind
    /// The host's reason (for a refusal, the iOS rule in a sentence).
    public let reason: String

    /// A failure of `kind` for `reason`.
    public init(_ kind: Kind, reason: String) {
        self.kind = kind
        self.reason = reason
    }

    /// A refusal by the host.
    public static func refused(_ reason: String) -> ServiceError {
        ServiceError(.refused, reason: reason)
    }

    /// The reason for a refusal; the reason with what failed otherwise.
    public var description: String {
        switch kind {
        case .refused: reason
        case .failed: "the host could not carry out the call: \(reason)"
        case .connectionLost: "no connection to the host: \(reason)"
        }
    }
}

/// Weak references, so a service object the app dropped stops receiving events.
struct WeakList<Object: AnyObject> {
    private var boxes: [Box] = []

    private struct Box {
        weak var object: Object?
    }

    /// Adds `object` (once).
    mutating func add(_ object: Object) {
        boxes.removeAll { $0.object == nil }
        guard !boxes.contains(where: { $0.object === object }) else { return }
        boxes.append(Box(object: object))
    }

    /// The objects still alive, in the order they were added.
    mutating func live() -> [Object] {
        boxes.removeAll { $0.object == nil }
        return boxes.compactMap(\.object)
    }
}

/// Sends the service objects' requests to the host and routes service events to
/// them. One per process (``shared``), bound to the ``Application`` when it is
/// created; service objects register on creation (they may be created before
/// ``ApplicationMain(delegate:)``, e.g. as stored properties of the delegate) and
/// are held weakly. Fetches and remote notifications go to the application
/// delegate, BGTaskScheduler launches and expirations to ``taskScheduler``; the
/// completion handlers they hand out answer the host only after the callback has
/// been acknowledged (``callbackAcknowledged()``). Tests make their own.
@MainActor
final class ServiceRouter {
    /// The process's router.
    static let shared = ServiceRouter(taskScheduler: .shared, timers: .shared)

    /// The application whose connection carries the requests; set by its init.
    weak var application: Application? {
        didSet {
            taskScheduler.bind(application)
            timers.bind(application)
        }
    }

    /// The BGTaskScheduler whose tasks this router runs (``BGTaskScheduler/shared``
    /// for the process's router); bound to ``application`` with it.
    nonisolated let taskScheduler: BGTaskScheduler

    /// The host timers whose fires this router runs (``HostTimerScheduler/shared`` for
    /// the process's router); bound to ``application`` with it.
    nonisolated let timers: HostTimerScheduler

    /// Completion handlers handed out by the callback now running, told once it has
    /// been acknowledged (so their answers never overtake the acknowledgement).
    private var awaitingAcknowledgement: [HostCompletion] = []

    /// The location authorization last heard from the host (process-wide, as on iOS).
    private(set) var locationAuthorization: LocationAuthorization = .notDetermined

    private weak var audioSession: AudioSession?
    private weak var accessoryManager: AccessoryManager?
    private var locationManagers = WeakList<LocationManager>()
    private var pushRegistries = WeakList<PushRegistry>()
    /// Incoming calls reported to CallKit so far (``CallProvider``): PushKit's check
    /// after a VoIP push's delegate returns.
    private(set) var callsReported = 0
    private var centralManagers = WeakList<CentralManager>()
    /// Background URL sessions by identifier (one live session per identifier).
    private var urlSessions: [String: WeakURLSession] = [:]
    /// Events for background sessions the app has not made (yet), by identifier, in order.
    private var heldURLSessionEvents: [String: [ServiceEvent]] = [:]

    private struct WeakURLSession {
        weak var session: BackgroundURLSession?
    }

    /// A router running `taskScheduler`'s tasks and `timers`' fires (new ones unless given).
    init(taskScheduler: BGTaskScheduler = BGTaskScheduler(), timers: HostTimerScheduler = HostTimerScheduler()) {
        self.taskScheduler = taskScheduler
        self.timers = timers
    }

    // MARK: Registration

    func register(_ session: AudioSession) { audioSession = session }
    func register(_ manager: AccessoryManager) { accessoryManager = manager }
    func register(_ manager: LocationManager) { locationManagers.add(manager) }
    func register(_ registry: PushRegistry) { pushRegistries.add(registry) }
    func callReported() { callsReported += 1 }
    func register(_ manager: CentralManager) { centralManagers.add(manager) }

    /// Routes `session`'s events to it, unless another live session has its
    /// identifier (false then). Events held for the identifier are delivered on the
    /// main queue after the current call (the session's init) returns, or before the
    /// next event for it, whichever comes first.
    func register(_ session: BackgroundURLSession) -> Bool {
        let identifier = session.identifier
        if let existing = urlSessions[identifier]?.session, existing !== session { return false }
        urlSessions[identifier] = WeakURLSession(session: session)
        if heldURLSessionEvents[identifier] != nil {
            DispatchQueue.main.async {
                MainActor.assumeIsolated { self.flushURLSessionEvents(identifier) }
            }
        }
        return true
    }

    /// The live session named `identifier`.
    func urlSession(_ identifier: String) -> BackgroundURLSession? {
        urlSessions[identifier]?.session
    }

    /// Hands the events held for session `identifier` to it, if it exists.
    private func flushURLSessionEvents(_ identifier: String) {
        while let session = urlSession(identifier), var held = heldURLSessionEvents[identifier], !held.isEmpty {
            let event = held.removeFirst()
            heldURLSessionEvents[identifier] = held.isEmpty ? nil : held
            session.handle(event)
        }
    }

    /// The session a background-session event is for (nil for other events).
    nonisolated static func urlSessionIdentifier(of event: ServiceEvent) -> String? {
        switch event {
        case .urlSessionHandleEvents(let session), .urlSessionProgress(let session, _, _, _),
             .urlSessionDidFinishDownloading(let session, _, _), .urlSessionDidComplete(let session, _, _, _, _),
             .urlSessionDidFinishEvents(let session), .urlSessionResumeData(let session, _, _):
            session.rawValue
        default:
            nil
        }
    }

    // MARK: Requests

    /// Sends `request` and blocks until the host answers.
    /// - Throws: ``ServiceError`` for a refusal, a reply that is not a service
    ///   reply, or no connection.
    func request(_ request: ServiceRequest) throws(ServiceError) -> ServiceReply {
        guard let application else {
            throw ServiceError(.connectionLost, reason: "\(request.apiName) was called before ApplicationMain(delegate:) connected to the host")
        }
        return try application.serviceRequest(request)
    }

    /// Sends `request` and expects `.ok`.
    func requestOK(_ request: ServiceRequest) throws(ServiceError) {
        let reply = try self.request(request)
        guard case .ok = reply else { throw Self.unexpected(reply, to: request) }
    }

    /// Sends `request` for a call that cannot fail on iOS: a failure is logged, not thrown.
    func requestLoggingFailure(_ request: ServiceRequest) {
        do {
            try requestOK(request)
        } catch {
            logFailure(of: request.apiName, error)
        }
    }

    /// Logs that `call` failed: "<call>: refused: <reason>" or "<call>: <error>".
    func logFailure(of call: String, _ error: ServiceError) {
        log(Self.failureLine(of: call, error))
    }

    /// "<call>: refused: <reason>" or "<call>: <error>".
    nonisolated static func failureLine(of call: String, _ error: ServiceError) -> String {
        "\(call): \(error.kind == .refused ? "refused: " : "")\(error)"
    }

    /// The failure for a reply that does not answer `request`.
    nonisolated static func unexpected(_ reply: ServiceReply, to request: ServiceRequest) -> ServiceError {
        ServiceError(.failed, reason: "the host answered \(request.apiName) with \(reply)")
    }

    /// Raises `exception` for a programmer error: the app ends with `SIGABRT` and the
    /// host's report names it (see ``Application/raise(_:)``); without a host, only the
    /// line and the abort.
    func raise(_ exception: UncaughtException) -> Never {
        if let application { application.raise(exception) }
        writeStandardError("\(programName): \(exception.bounded().terminationMessage)")
        abort()
    }

    /// Writes a diagnostic line (stderr in an app).
    func log(_ line: String) {
        if let application {
            application.effects.log(line)
        } else {
            writeStandardError("\(programName): \(line)")
        }
    }

    // MARK: Location authorization

    /// Records `status`; if it changed (or `always`), tells every location manager's
    /// delegate — later on the main queue when `deferred` (an answer to a request,
    /// delivered once the request has returned, like iOS), else at once (an event).
    func authorizationChanged(to status: LocationAuthorization, notifyAlways: Bool, deferred: Bool) {
        let changed = status != locationAuthorization
        locationAuthorization = status
        guard changed || notifyAlways else { return }
        let managers = locationManagers.live()
        if deferred {
            DispatchQueue.main.async {
                MainActor.assumeIsolated {
                    for manager in managers { manager.authorizationDidChange(status) }
                }
            }
        } else {
            for manager in managers { manager.authorizationDidChange(status) }
        }
    }

    // MARK: Events

    /// Hands `event` to the live object(s) of its kind, on the calling (main) thread.
    /// An event nobody can receive is dropped with a line to `log`.
    func deliver(_ event: ServiceEvent, log: (String) -> Void) {
        let receiver: String?
        switch event {
        case .audioInterruption(let began, let reason):
            if let audioSession {
                audioSession.interruption(began: began, reason: reason)
                receiver = nil
            } else {
                receiver = "AudioSession"
            }
        case .locationUpdate(let fixes):
            let managers = locationManagers.live()
            for manager in managers { manager.didUpdate(fixes) }
            receiver = managers.isEmpty ? "LocationManager" : nil
        case .locationRegionCrossed, .locationMonitoringFailed:
            let managers = locationManagers.live()
            for manager in managers { manager.monitoringEvent(event) }
            receiver = managers.isEmpty ? "LocationManager" : nil
        case .locationAuthorizationChanged(let status):
            // Recorded even with no manager alive, so one created later starts with it.
            let none = locationManagers.live().isEmpty
            authorizationChanged(to: status, notifyAlways: true, deferred: false)
            receiver = none ? "LocationManager" : nil
        case .voipPush(let payload):
            let registries = pushRegistries.live()
            let before = callsReported
            var handled = false
            for registry in registries { handled = registry.didReceive(PushPayload(json: payload)) || handled }
            receiver = registries.isEmpty ? "PushRegistry" : nil
            // PushKit checks, as soon as the delegate returns, that a call was reported
            // (iOS 13+; DTS, developer.apple.com/forums/thread/817976): if not, it raises
            // and the app dies. callservicesd's 0xbaadca11 (the host's) is the other
            // check, for an app with no delegate or one that blocks in it.
            if handled, callsReported == before {
                raise(UncaughtException(name: .internalInconsistency,
                    reason: "Killing app because it never posted an incoming call to the system after receiving a PushKit VoIP push."))
            }
        case .bleDiscovered, .bleConnected, .bleDisconnected, .bleNotification:
            let managers = centralManagers.live()
            for manager in managers { manager.handle(event) }
            receiver = managers.isEmpty ? "CentralManager" : nil
        case .accessoryConnected, .accessoryDisconnected, .accessoryData:
            if let accessoryManager {
                accessoryManager.handle(event)
                receiver = nil
            } else {
                receiver = "AccessoryManager"
            }
        case .protectedDataAvailability(let available):
            if let application {
                if available { application.delegate.protectedDataDidBecomeAvailable(application) }
                else { application.delegate.protectedDataWillBecomeUnavailable(application) }
                receiver = nil
            } else {
                receiver = "Application"
            }
        case .performFetch(let id):
            if let application {
                performFetch(id: id, application)
                receiver = nil
            } else {
                receiver = "Application"
            }
        case .remoteNotification(let id, let userInfo, let silent):
            if let application {
                receiveRemoteNotification(id: id, RemoteNotification(json: userInfo, isSilent: silent), application)
                receiver = nil
            } else {
                receiver = "Application"
            }
        case .bgTaskLaunch(let identifier, let kind):
            if let application {
                awaitingAcknowledgement.append(taskScheduler.launch(identifier, kind: kind, application: application))
                receiver = nil
            } else {
                receiver = "Application"
            }
        case .bgTaskExpire(let identifier):
            if let application {
                taskScheduler.expire(identifier, application: application)
                receiver = nil
            } else {
                receiver = "Application"
            }
        case .urlSessionHandleEvents(let identifier):
            if let application {
                handleURLSessionEvents(identifier.rawValue, application)
                receiver = nil
            } else {
                receiver = "Application"
            }
        case .urlSessionProgress(let identifier, _, _, _), .urlSessionDidFinishDownloading(let identifier, _, _),
             .urlSessionDidComplete(let identifier, _, _, _, _), .urlSessionDidFinishEvents(let identifier),
             .urlSessionResumeData(let identifier, _, _):
            // Held, in order, until the app makes the session (as iOS holds them
            // until it recreates it); the callback is acknowledged either way.
            if let session = urlSession(identifier.rawValue) {
                flushURLSessionEvents(identifier.rawValue)
                session.handle(event)
            } else {
                heldURLSessionEvents[identifier.rawValue, default: []].append(event)
                log("\(event.name): no BackgroundURLSession with identifier \(identifier) exists yet; the event is held until the app makes it")
            }
            receiver = nil
        case .timerFired(let id):
            // A timer invalidated meanwhile is not there: its fire is dropped, as expected.
            timers.fire(id.rawValue)
            receiver = nil
        }
        if let receiver {
            log("\(event.name): no \(receiver) exists in this app to receive it; the event is dropped")
        }
    }

    /// Calls the delegate's `performFetch` with a completion that answers fetch `id`.
    private func performFetch(id: UInt64, _ application: Application) {
        let completion = HostCompletion(name: "The performFetch completion handler (fetch \(id))", application: application)
        awaitingAcknowledgement.append(completion)
        application.backgroundEventIdentifier = id
        defer { application.backgroundEventIdentifier = nil }
        application.delegate.performFetch(application) { result in
            completion.complete(with: .fetchCompleted(id: id, result: result))
        }
    }

    /// Calls the delegate's `didReceiveRemoteNotification` with a completion that
    /// answers notification `id`.
    private func receiveRemoteNotification(id: UInt64, _ notification: RemoteNotification, _ application: Application) {
        let completion = HostCompletion(name: "The didReceiveRemoteNotification completion handler (notification \(id))", application: application)
        awaitingAcknowledgement.append(completion)
        application.backgroundEventIdentifier = id
        defer { application.backgroundEventIdentifier = nil }
        application.delegate.didReceiveRemoteNotification(application, userInfo: notification) { result in
            completion.complete(with: .remoteNotificationCompleted(id: id, result: result))
        }
    }

    /// Calls the delegate's `handleEventsForBackgroundURLSession` with a completion
    /// that answers `urlSessionEventsCompleted` for session `identifier`.
    private func handleURLSessionEvents(_ identifier: String, _ application: Application) {
        let completion = HostCompletion(name: "The handleEventsForBackgroundURLSession completion handler (session \(identifier))", application: application)
        awaitingAcknowledgement.append(completion)
        application.delegate.handleEventsForBackgroundURLSession(application, identifier: identifier) {
            completion.complete(with: .urlSessionEventsCompleted(session: SessionIdentifier(identifier)))
        }
    }

    /// The callback that just ran has been acknowledged: completion handlers it
    /// handed out may now send their answers (those already called do so at once).
    func callbackAcknowledged() {
        guard !awaitingAcknowledgement.isEmpty else { return }
        let completions = awaitingAcknowledgement
        awaitingAcknowledgement = []
        for completion in completions { completion.callbackAcknowledged() }
    }
}
