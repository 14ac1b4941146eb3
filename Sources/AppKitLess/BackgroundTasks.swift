import AppHostProtocol
import Dispatch
import Foundation
import Synchronization

// BGTaskScheduler, as in Apple's BackgroundTasks framework: launch handlers
// registered while launching, requests submitted for later, and the tasks the host
// runs for them. Identifiers must be listed in `BGTaskSchedulerPermittedIdentifiers`;
// app-refresh tasks need the `fetch` background mode, processing tasks `processing`.

/// A request to run a task later, like `BGTaskRequest`: create a
/// ``BGAppRefreshTaskRequest`` or a ``BGProcessingTaskRequest`` and
/// ``BGTaskScheduler/submit(_:)`` it.
public class BGTaskRequest: CustomStringConvertible {
    /// The task identifier, one of `BGTaskSchedulerPermittedIdentifiers`.
    public let identifier: String
    /// The task runs no earlier than this (nil: as soon as the host sees fit). It
    /// travels to the host as seconds from the submission, to the millisecond (a
    /// date in the past is 0).
    public var earliestBeginDate: Date?
    /// Which kind of task.
    let kind: BGTaskRequestInfo.Kind

    init(kind: BGTaskRequestInfo.Kind, identifier: String) {
        self.kind = kind
        self.identifier = identifier
    }

    /// The request as the host takes it, with the earliest begin counted from `now`.
    func info(now: Date = Date()) -> BGTaskRequestInfo {
        // Whole milliseconds, so a date made as "now + 60 s" travels as 60, not 59.99998.
        BGTaskRequestInfo(kind: kind, identifier: identifier,
                          earliestBegin: earliestBeginDate.map { (max(0, $0.timeIntervalSince(now)) * 1000).rounded() / 1000 })
    }

    /// A request for a pending one the host reported.
    static func make(_ info: BGTaskRequestInfo, earliestBeginDate: Date?) -> BGTaskRequest {
        let request: BGTaskRequest
        switch info.kind {
        case .refresh:
            request = BGAppRefreshTaskRequest(identifier: info.identifier)
        case .processing:
            let processing = BGProcessingTaskRequest(identifier: info.identifier)
            processing.requiresExternalPower = info.requiresExternalPower
            processing.requiresNetworkConnectivity = info.requiresNetworkConnectivity
            request = processing
        }
        request.earliestBeginDate = earliestBeginDate
        return request
    }

    /// The class name, identifier and earliest begin date.
    public var description: String {
        "\(type(of: self)) Identifier: \(identifier) EarliestBeginDate: \(earliestBeginDate.map { "\($0)" } ?? "(null)")"
    }
}

/// A request for a short refresh of the app's content (about 30 s of background
/// time), like `BGAppRefreshTaskRequest`. Needs `fetch` in `UIBackgroundModes`.
public final class BGAppRefreshTaskRequest: BGTaskRequest {
    /// A request for task `identifier`.
    public init(identifier: String) {
        super.init(kind: .refresh, identifier: identifier)
    }
}

/// A request for deferrable maintenance work (minutes, while the device is idle),
/// like `BGProcessingTaskRequest`. Needs `processing` in `UIBackgroundModes`.
public final class BGProcessingTaskRequest: BGTaskRequest {
    /// Run only while the device has network connectivity.
    public var requiresNetworkConnectivity = false
    /// Run only while the device is on external power.
    public var requiresExternalPower = false

    /// A request for task `identifier`.
    public init(identifier: String) {
        super.init(kind: .processing, identifier: identifier)
    }

    override func info(now: Date = Date()) -> BGTaskRequestInfo {
        var info = super.info(now: now)
        info.requiresExternalPower = requiresExternalPower
        info.requiresNetworkConnectivity = requiresNetworkConnectivity
        return info
    }
}

/// A task the host runs for a submitted request, handed to the launch handler,
/// like `BGTask`: set an ``expirationHandler`` and call ``setTaskCompleted(success:)``
/// when the work is done. The host keeps the app running until then, within the
/// task's time; shortly before that runs out the expiration handler runs, and it
/// should stop the work and complete the task. Thread-safe.
public class BGTask: @unchecked Sendable, CustomStringConvertible {
    /// The task identifier the launch handler was registered for.
    public let identifier: String

    private let handler = Mutex<(@Sendable () -> Void)?>(nil)
    private let completion: HostCompletion
    private let finished: @Sendable () -> Void

    init(identifier: String, completion: HostCompletion, finished: @escaping @Sendable () -> Void) {
        self.identifier = identifier
        self.completion = completion
        self.finished = finished
    }

    /// Runs (on the main queue) when the task's time is about to run out; it should
    /// stop the work and call ``setTaskCompleted(success:)``.
    public var expirationHandler: (@Sendable () -> Void)? {
        get { handler.withLock { $0 } }
        set { handler.withLock { $0 = newValue } }
    }

    /// Tells the host the work is done, like `BGTask.setTaskCompleted(success:)`;
    /// from any thread, once (a second call is logged to stderr and ignored). The
    /// app may be suspended soon after. Called while the launch callback still runs,
    /// it reaches the host after that callback's acknowledgement.
    public func setTaskCompleted(success: Bool) {
        if completion.complete(with: .bgTaskCompleted(identifier: identifier, success: success)) {
            finished()
        }
    }

    /// The class name and identifier.
    public var description: String { "\(type(of: self)) Identifier: \(identifier)" }
}

/// A task run for a ``BGAppRefreshTaskRequest``, like `BGAppRefreshTask`.
public final class BGAppRefreshTask: BGTask, @unchecked Sendable {}

/// A task run for a ``BGProcessingTaskRequest``, like `BGProcessingTask`.
public final class BGProcessingTask: BGTask, @unchecked Sendable {}

/// Schedules background work, like `BGTaskScheduler`. One per process, ``shared``;
/// every method is callable from any thread and asks the host, blocking until it
/// answers.
///
/// Register a launch handler for each identifier while launching (in
/// ``ApplicationDelegate/didFinishLaunching(_:options:)``), then ``submit(_:)``
/// requests. When the host runs a task (`apphost bgtask run`, or when its
/// conditions are met) the handler is called with a ``BGAppRefreshTask`` or
/// ``BGProcessingTask``.
public final class BGTaskScheduler: Sendable {
    /// The process's scheduler.
    public static let shared = BGTaskScheduler()

    /// Why a submission failed, like `BGTaskScheduler.Error`.
    public struct Error: Swift.Error, Equatable, Sendable, CustomStringConvertible {
        /// The error codes of `BGTaskScheduler.Error.Code`.
        public enum Code: String, Sendable, Equatable, CaseIterable {
            /// Background refresh is off (settings, low-power mode), or the host
            /// could not take the request.
            case unavailable
            /// Too many requests of this kind are pending.
            case tooManyPendingTaskRequests
            /// The identifier is not permitted, or the app lacks the background mode
            /// the request kind needs; also a refusal by the host.
            case notPermitted
        }

        /// The code.
        public let code: Code
        /// The host's reason.
        public let reason: String
        /// The service failure behind the error when it is no BGTaskScheduler error
        /// code: a refusal (code `notPermitted`), a lost connection or a reply that
        /// does not fit (code `unavailable`); nil for a code from the host.
        public let serviceError: ServiceError?

        /// An error with `code` for `reason`.
        public init(_ code: Code, reason: String, serviceError: ServiceError? = nil) {
            self.code = code
            self.reason = reason
            self.serviceError = serviceError
        }

        /// "CODE: REASON".
        public var description: String { "\(code.rawValue): \(reason)" }
    }

    /// A launch handler as registered.
    private struct Registration: Sendable {
        var queue: DispatchQueue?
        var handler: @Sendable (BGTask) -> Void
    }

    private struct State {
        weak var application: Application?
        var registrations: [String: Registration] = [:]
        var running: [String: BGTask] = [:]
        /// What this process submitted, to give pending requests their dates back.
        var submitted: [String: (info: BGTaskRequestInfo, date: Date?)] = [:]
    }

    private let state = Mutex(State())

    /// A scheduler bound to no application yet (``ServiceRouter`` binds it).
    init() {}

    /// Sends later requests over `application`'s connection.
    func bind(_ application: Application?) {
        state.withLock { $0.application = application }
    }

    private var application: Application? {
        state.withLock { $0.application }
    }

    /// Writes a diagnostic line (stderr in an app).
    private func log(_ line: String, _ application: Application?) {
        if let application {
            application.effects.log(line)
        } else {
            writeStandardError("\(programName): \(line)")
        }
    }

    /// Sends `request` and blocks for the reply.
    private func request(_ request: ServiceRequest) throws(ServiceError) -> ServiceReply {
        guard let application else {
            throw ServiceError(.connectionLost, reason: "\(request.apiName) was called before ApplicationMain(delegate:) connected to the host")
        }
        return try application.serviceRequest(request)
    }

    // MARK: Registering

    /// Registers the handler that runs task `identifier`, like
    /// `register(forTaskWithIdentifier:using:launchHandler:)`. Call it before
    /// ``ApplicationDelegate/didFinishLaunching(_:options:)`` returns.
    ///
    /// - Parameters:
    ///   - identifier: One of `BGTaskSchedulerPermittedIdentifiers`.
    ///   - queue: Where `launchHandler` runs; nil (or `.main`): the main queue,
    ///     inside the launch callback.
    ///   - launchHandler: Called with a new ``BGAppRefreshTask`` or
    ///     ``BGProcessingTask`` each time the host runs the task. It is `@Sendable`
    ///     because it may run on `queue`; on the main queue (no `queue`) it may use
    ///     main-actor state through `MainActor.assumeIsolated`. (A closure that is
    ///     not `@Sendable` written on the main actor is isolated to it, and Swift 6
    ///     traps when such a closure runs on another queue.)
    /// - Returns: false when the host refuses (the identifier is not permitted:
    ///   `notPermitted`) or without a host; the reason is logged to stderr. Called
    ///   after launching has finished, or a second time for one identifier, it raises
    ///   `NSInternalInconsistencyException` as iOS does ("All launch handlers must be
    ///   registered before application finishes launching", "Launch handler for task
    ///   with identifier … has already been registered") and the app aborts.
    @discardableResult
    public func register(forTaskWithIdentifier identifier: String, using queue: DispatchQueue? = nil,
                         launchHandler: @escaping @Sendable (BGTask) -> Void) -> Bool {
        let call = "BGTaskScheduler.register(forTaskWithIdentifier: \"\(identifier)\")"
        let application = self.application
        guard let application else {
            log("\(call): called before ApplicationMain(delegate:) connected to the host; not registered", nil)
            return false
        }
        // Both misuses are programmer errors iOS raises (NSInternalInconsistencyException)
        // and the app dies of: EXC_CRASH (SIGABRT), the exception in the report.
        guard !application.hasFinishedLaunching else {
            application.raise(UncaughtException(name: .internalInconsistency,
                                                reason: "All launch handlers must be registered before application finishes launching"))
        }
        // Recorded before asking, so a launch the host sends right after its answer finds it.
        let fresh = state.withLock { s in
            guard s.registrations[identifier] == nil else { return false }
            s.registrations[identifier] = Registration(queue: queue, handler: launchHandler)
            return true
        }
        guard fresh else {
            application.raise(UncaughtException(name: .internalInconsistency,
                                                reason: "Launch handler for task with identifier \(identifier) has already been registered"))
        }
        let request = ServiceRequest.bgRegister(identifier: identifier)
        let failure: String
        do throws(ServiceError) {
            switch try application.serviceRequest(request) {
            case .ok:
                return true
            case .failed(let code, let reason):
                failure = "\(code): \(reason)"
            case let other:
                failure = ServiceRouter.unexpected(other, to: request).description
            }
        } catch {
            failure = ServiceRouter.failureLine(of: call, error)
        }
        state.withLock { _ = $0.registrations.removeValue(forKey: identifier) }
        log(failure.hasPrefix(call) ? failure : "\(call): \(failure)", application)
        return false
    }

    // MARK: Requests

    /// Submits a request to run a task later, like `submit(_:)`; a pending request
    /// with the same identifier is replaced.
    /// - Throws: ``Error`` with the host's code: `notPermitted` (identifier not
    ///   permitted, or the background mode missing), `unavailable` (background
    ///   refresh off, low-power mode), `tooManyPendingTaskRequests`; a refusal or a
    ///   lost connection also throws (see ``Error/serviceError``).
    public func submit(_ taskRequest: BGTaskRequest) throws(BGTaskScheduler.Error) {
        let now = Date()
        let info = taskRequest.info(now: now)
        let request = ServiceRequest.bgSubmit(info)
        let reply: ServiceReply
        do throws(ServiceError) {
            reply = try self.request(request)
        } catch {
            throw Error(error.kind == .refused ? .notPermitted : .unavailable, reason: error.reason, serviceError: error)
        }
        switch reply {
        case .ok:
            let date = taskRequest.earliestBeginDate
            state.withLock { $0.submitted[info.identifier] = (info, date) }
        case .failed(let code, let reason):
            if let known = Error.Code(rawValue: code) {
                throw Error(known, reason: reason)
            }
            throw Error(.unavailable, reason: "\(code): \(reason)")
        case let other:
            let error = ServiceRouter.unexpected(other, to: request)
            throw Error(.unavailable, reason: error.reason, serviceError: error)
        }
    }

    /// Cancels the pending request for `identifier`, like
    /// `cancel(taskRequestWithIdentifier:)`; a failure is logged to stderr.
    public func cancel(taskRequestWithIdentifier identifier: String) {
        cancel(identifier)
    }

    /// Cancels every pending request, like `cancelAllTaskRequests()`; a failure is
    /// logged to stderr.
    public func cancelAllTaskRequests() {
        cancel(nil)
    }

    private func cancel(_ identifier: String?) {
        let request = ServiceRequest.bgCancel(identifier: identifier)
        do throws(ServiceError) {
            let reply = try self.request(request)
            guard case .ok = reply else { throw ServiceRouter.unexpected(reply, to: request) }
            state.withLock { s in
                if let identifier { s.submitted.removeValue(forKey: identifier) } else { s.submitted = [:] }
            }
        } catch {
            log(ServiceRouter.failureLine(of: request.apiName, error), application)
        }
    }

    /// The requests submitted and not yet run or cancelled, like
    /// `getPendingTaskRequests(completionHandler:)` (synchronous here). A request
    /// this process submitted keeps its ``BGTaskRequest/earliestBeginDate``;
    /// another one's is counted from now. A failure is logged to stderr and gives
    /// an empty list.
    public func pendingTaskRequests() -> [BGTaskRequest] {
        let request = ServiceRequest.bgPending
        do throws(ServiceError) {
            let reply = try self.request(request)
            guard case .bgRequests(let infos) = reply else { throw ServiceRouter.unexpected(reply, to: request) }
            let submitted = state.withLock { $0.submitted }
            let now = Date()
            return infos.map { info in
                let date: Date?
                if let mine = submitted[info.identifier], mine.info == info {
                    date = mine.date
                } else {
                    date = info.earliestBegin.map { now.addingTimeInterval($0) }
                }
                return BGTaskRequest.make(info, earliestBeginDate: date)
            }
        } catch {
            log(ServiceRouter.failureLine(of: request.apiName, error), application)
            return []
        }
    }

    // MARK: Tasks (from the host, on the main queue)

    /// The host runs task `identifier`: calls its launch handler with a new task,
    /// on the main queue (inside the callback) or on the queue it was registered
    /// with. A task with no handler is logged and completed as failed.
    /// - Returns: The task's completion, to be told when the callback is acknowledged.
    func launch(_ identifier: String, kind: BGTaskRequestInfo.Kind, application: Application) -> HostCompletion {
        let completion = HostCompletion(name: "setTaskCompleted(success:) of BGTask \(identifier)", application: application)
        let task: BGTask
        let finished: @Sendable () -> Void = { [weak self] in
            self?.state.withLock { s in
                if let running = s.running[identifier], running.completionIs(completion) {
                    s.running.removeValue(forKey: identifier)
                }
            }
        }
        switch kind {
        case .refresh: task = BGAppRefreshTask(identifier: identifier, completion: completion, finished: finished)
        case .processing: task = BGProcessingTask(identifier: identifier, completion: completion, finished: finished)
        }
        let registration = state.withLock { s -> Registration? in
            guard let registration = s.registrations[identifier] else { return nil }
            s.running[identifier] = task
            return registration
        }
        guard let registration else {
            // iOS raises and the app dies (the host kills an app that returns instead).
            application.raise(UncaughtException(name: .internalInconsistency,
                                                reason: "No launch handler registered for task with identifier \(identifier)"))
        }
        if let queue = registration.queue, queue !== DispatchQueue.main {
            queue.async { registration.handler(task) }
        } else {
            registration.handler(task)
        }
        return completion
    }

    /// The host says task `identifier` is about to run out of time: runs its
    /// expiration handler here (the main queue). A task not running, or with no
    /// handler, is logged.
    func expire(_ identifier: String, application: Application) {
        guard let task = state.withLock({ $0.running[identifier] }) else {
            application.effects.log("BGTask \(identifier) expired, but no such task is running (already completed?); no expiration handler to run")
            return
        }
        guard let handler = task.expirationHandler else {
            application.effects.log("BGTask \(identifier) expired with no expirationHandler set; call setTaskCompleted(success:) or the app is killed")
            return
        }
        handler()
    }
}

extension BGTask {
    /// Whether `completion` is this task's (a newer launch may have replaced it).
    fileprivate func completionIs(_ other: HostCompletion) -> Bool {
        completion === other
    }
}
