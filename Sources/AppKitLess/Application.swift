import AppHostProtocol
import Dispatch
import Foundation
import Synchronization

/// The running app, like `UIApplication`: its state, its identity, and background
/// tasks. One instance per process, ``Application/shared``, created by
/// ``ApplicationMain(delegate:)``.
///
/// The main run loop is the main dispatch queue (driven on the main thread by
/// `RunLoop.main`). To run work later on it, use a ``HostTimer``, which follows the
/// host's clock (virtual in policy tests: it fires when the clock is advanced past it);
/// `DispatchQueue.main.asyncAfter(deadline:execute:)`, a `Timer` scheduled on
/// `RunLoop.main` and `Task.sleep` keep real time whatever the host's clock. All run on
/// the main thread between delegate callbacks. While the app is suspended (SIGSTOP)
/// nothing runs; deadlines that passed meanwhile fire on resume.
///
/// The run loop stamps each of its turns on a page the host reads (no message is
/// exchanged): a main thread kept in one turn (blocked or busy in a delegate
/// method, an expiration handler or any main-queue block) for `foregroundHang`
/// (10 s) while active is killed, as on iOS. Do slow work on another queue.
@MainActor
public final class Application {
    /// The app's state as the app sees it, like `UIApplication.State`. The host's
    /// `suspended` and `notRunning` states are never observed by running code.
    public enum State: Int, Sendable, CustomStringConvertible {
        /// In the foreground and receiving events.
        case active = 0
        /// In the foreground but not receiving events (launching, or being interrupted).
        case inactive = 1
        /// In the background, running only while it holds a background task or mode activity.
        case background = 2

        /// Maps the host's state to the app's view of it.
        init(_ state: AppState) {
            switch state {
            case .active: self = .active
            case .inactive: self = .inactive
            // The app never runs code while suspended or not running; a host that
            // says so anyway (e.g. willTerminate while suspended) means "not in front".
            case .background, .suspended, .notRunning: self = .background
            }
        }

        /// `active`, `inactive` or `background`.
        public var description: String {
            switch self {
            case .active: "active"
            case .inactive: "inactive"
            case .background: "background"
            }
        }
    }

    private nonisolated static let current = Mutex<Application?>(nil)

    /// The running app. Available from any thread once ``ApplicationMain(delegate:)``
    /// has connected to the host (so from `didFinishLaunching` on).
    public nonisolated static var shared: Application {
        guard let app = current.withLock({ $0 }) else {
            preconditionFailure("Application.shared is used before ApplicationMain(delegate:) connected to the host")
        }
        return app
    }

    /// Makes `app` the one ``shared`` returns.
    nonisolated static func install(_ app: Application) {
        current.withLock { $0 = app }
    }

    /// The state given with the most recent delegate callback (`.inactive` before the first).
    public private(set) var applicationState: State = .inactive

    /// The bundle identifier the host launched this app as (`CFBundleIdentifier`).
    public nonisolated let bundleIdentifier: String

    /// The options of `didFinishLaunching`; nil until that callback runs.
    public private(set) var launchOptions: LaunchOptions?

    /// The delegate; kept for the life of the process.
    let delegate: any ApplicationDelegate
    /// The socket to the host.
    nonisolated let connection: Connection
    /// Process-level effects (exit, stderr), replaced in tests.
    nonisolated let effects: ProcessEffects
    /// Background tasks begun and not yet ended.
    private nonisolated let tasks = Mutex(BackgroundTaskTable())
    /// Set by whoever first decides the process ends (willTerminate or a lost host),
    /// so two threads never race to `exit` with different statuses.
    private nonisolated let ending = Mutex(false)
    /// Routes service events to the service objects and carries their requests.
    let services: ServiceRouter
    /// Set once `didFinishLaunching` has returned (BGTaskScheduler registrations end then).
    private nonisolated let finishedLaunching = Mutex(false)

    /// The window the app shows, like `UIApplication.shared.delegate.window` /
    /// `UIWindowScene.keyWindow`; nil (the default) draws nothing. The host keeps
    /// the last tree it was sent and takes the app-switcher snapshot from it.
    ///
    /// When the tree goes to the host: a change (setting this property to another
    /// window, or any change to the window or a view in it) marks the window dirty,
    /// and a dirty window is sent whole, once, at the first of these:
    /// - before the acknowledgement of the callback during which it changed
    ///   (`didFinishLaunching`, `willResignActive`, `didEnterBackground`, ...,
    ///   `performFetch` and the other service events), so when the host takes a
    ///   snapshot after `willResignActive` or `didEnterBackground` has returned it
    ///   already has the window as it was then: a cover added there is in it;
    /// - before a completion handler the host waits for (`performFetch`'s, a remote
    ///   notification's, a BGTask's, ...) is sent, when it is called on the main
    ///   queue, so a change made just before completing is in the snapshot taken
    ///   after the completion;
    /// - otherwise (a change in a main-queue block, a timer or a main-actor task)
    ///   at the end of that main-queue turn: the first change schedules one
    ///   `DispatchQueue.main.async` flush, which runs after the blocks queued
    ///   before it.
    /// Nothing is encoded or sent while nothing changed; setting a property to the
    /// value it has is no change. Setting this to nil after a window was shown sends
    /// an empty tree (a white screen).
    public var window: Window? {
        didSet {
            guard window !== oldValue else { return }
            if let oldValue, oldValue.application === self { oldValue.application = nil }
            if let window {
                // A window shows in one application at a time (a test may run several).
                if let other = window.application, other !== self { other.window = nil }
                window.application = self
            }
            markViewTreeDirty()
        }
    }
    /// The window changed since the host was last sent its tree.
    private var viewTreeDirty = false
    /// A main-queue flush is queued (for a change made outside a callback).
    private var viewTreeFlushScheduled = false
    /// A callback is running; it sends a dirty tree before its acknowledgement.
    private var isRunningCallback = false

    /// Creates the application over an already-welcomed connection, and binds
    /// `services` (the process's router unless given) to it.
    init(
        bundleIdentifier: String,
        delegate: any ApplicationDelegate,
        connection: Connection,
        effects: ProcessEffects = .live,
        services: ServiceRouter? = nil
    ) {
        self.bundleIdentifier = bundleIdentifier
        self.delegate = delegate
        self.connection = connection
        self.effects = effects
        self.services = services ?? .shared
        self.services.application = self
        Self.markMainQueue()
    }

    // MARK: Background tasks

    /// Asks to keep running in the background until ``endBackgroundTask(_:)``, like
    /// `UIApplication.beginBackgroundTask(withName:expirationHandler:)`. Callable from
    /// any thread. The host grants a limited time (see ``backgroundTimeRemaining``);
    /// shortly before it runs out, `handler` runs on the main queue and must end the
    /// task, or the app is killed. The host hears that the handler ran only after it
    /// returns, so an `endBackgroundTask` called inside it reaches the host first.
    /// A task ended before its expiration gets no handler call.
    /// - Returns: A new identifier (1, 2, 3, ...), never ``BackgroundTaskIdentifier/invalid``.
    @discardableResult
    public nonisolated func beginBackgroundTask(
        withName name: String? = nil,
        expirationHandler handler: (@MainActor @Sendable () -> Void)? = nil
    ) -> BackgroundTaskIdentifier {
        let id = tasks.withLock { $0.begin(name: name, expirationHandler: handler) }
        do {
            try connection.send(.beginBackgroundTask(id: BackgroundTaskID(id), name: name))
        } catch {
            connectionFailed(error)
        }
        return BackgroundTaskIdentifier(rawValue: id)
    }

    /// Ends a background task, like `UIApplication.endBackgroundTask(_:)`. Callable from
    /// any thread. Ending an unknown or already-ended task logs an error to stderr
    /// (as iOS does) and is otherwise harmless.
    public nonisolated func endBackgroundTask(_ identifier: BackgroundTaskIdentifier) {
        let id = identifier.rawValue
        let known = tasks.withLock { $0.end(id) } != nil
        if !known {
            effects.log("Can't end BackgroundTask: no background task exists with identifier \(id) (0x\(String(id, radix: 16))), or it may have already been ended.")
        }
        // The invalid id names no task, so the host has nothing to hear; any other
        // id is reported, even a stale one, so the host sees the app's misuse too.
        guard identifier != .invalid else { return }
        do {
            try connection.send(.endBackgroundTask(id: BackgroundTaskID(id)))
        } catch {
            connectionFailed(error)
        }
    }

    /// Seconds the app may still run in the background before its tasks expire, like
    /// `UIApplication.backgroundTimeRemaining`; `Double.greatestFiniteMagnitude` while
    /// in the foreground. Asks the host and blocks until it answers; callable from any
    /// thread, including the main queue inside a delegate callback.
    public nonisolated var backgroundTimeRemaining: TimeInterval {
        do {
            switch try connection.request(.backgroundTimeRemaining) {
            case .backgroundTimeRemaining(let seconds):
                return seconds
            case .failed(let reason):
                effects.log("backgroundTimeRemaining: the host could not answer: \(reason)")
                return 0
            case .service(let reply):
                effects.log("backgroundTimeRemaining: the host answered with a service reply (\(reply))")
                return 0
            }
        } catch {
            connectionFailed(error)
            return 0
        }
    }

    /// Runs the expiration handler of open task `id`, if it has one (on the main queue).
    /// The handler is called outside the table's lock, so it may end (or begin) tasks.
    /// - Returns: false if `id` names no open task (never begun, or already ended);
    ///   nothing runs then.
    @discardableResult
    func expireBackgroundTask(_ id: BackgroundTaskIdentifier) -> Bool {
        guard let entry = tasks.withLock({ $0.entry(of: id.rawValue) }) else { return false }
        entry.expirationHandler?()
        return true
    }

    // MARK: Services

    /// Asks the host for a device token for remote (APNs) notifications, like
    /// `UIApplication.registerForRemoteNotifications()`. The answer reaches the
    /// delegate on the main queue after this call returns, as on iOS:
    /// ``ApplicationDelegate/didRegisterForRemoteNotifications(_:deviceToken:)`` with
    /// the token (hex), or ``ApplicationDelegate/didFailToRegisterForRemoteNotifications(_:error:)``
    /// when the host refuses (no `aps-environment` entitlement) or cannot answer.
    public func registerForRemoteNotifications() {
        let request = ServiceRequest.registerForRemoteNotifications
        let outcome: Result<String, ServiceError>
        do {
            switch try serviceRequest(request) {
            case .token(let hex): outcome = .success(hex)
            case let other: outcome = .failure(ServiceRouter.unexpected(other, to: request))
            }
        } catch {
            outcome = .failure(error)
        }
        DispatchQueue.main.async {
            MainActor.assumeIsolated {
                switch outcome {
                case .success(let token): self.delegate.didRegisterForRemoteNotifications(self, deviceToken: token)
                case .failure(let error): self.delegate.didFailToRegisterForRemoteNotifications(self, error: error)
                }
            }
        }
    }

    /// Sends a service request and blocks until the host answers; callable from any
    /// thread. A refusal or a reply that is no service reply is thrown; a lost
    /// connection ends the process (as for any request) and is thrown too.
    nonisolated func serviceRequest(_ request: ServiceRequest) throws(ServiceError) -> ServiceReply {
        let reply: HostReply
        do {
            reply = try connection.request(.service(request))
        } catch .frame(let error) where error.isOversized {
            // Too large to send: nothing was written, so the connection is fine.
            throw ServiceError(.failed, reason: "\(request.apiName) could not be sent: \(error)")
        } catch {
            connectionFailed(error)
            throw ServiceError(.connectionLost, reason: error.description)
        }
        return try serviceReply(reply, to: request)
    }

    /// Sends a service request without waiting for its reply (pipelined): `onReply`
    /// runs on the reader thread once it is there; ``PendingServiceReply/wait()`` takes it.
    nonisolated func startServiceRequest(_ request: ServiceRequest, onReply: @escaping @Sendable () -> Void) throws(ServiceError) -> PendingServiceReply {
        do {
            return PendingServiceReply(application: self, request: request,
                                       pending: try connection.startRequest(.service(request), onReply: onReply))
        } catch .frame(let error) where error.isOversized {
            throw ServiceError(.failed, reason: "\(request.apiName) could not be sent: \(error)")
        } catch {
            connectionFailed(error)
            throw ServiceError(.connectionLost, reason: error.description)
        }
    }

    /// The service answer in a host reply, or the error it stands for.
    nonisolated func serviceReply(_ reply: HostReply, to request: ServiceRequest) throws(ServiceError) -> ServiceReply {
        switch reply {
        case .service(.refused(let reason)):
            throw .refused(reason)
        case .service(.raise(let exception)):
            raise(exception)
        case .service(let reply):
            return reply
        case .failed(let reason):
            throw ServiceError(.failed, reason: reason)
        case .backgroundTimeRemaining:
            throw ServiceError(.failed, reason: "the host answered \(request.apiName) with a time-remaining reply")
        }
    }

    /// Raises `exception` as iOS raises one for a programmer error and nothing catches
    /// it: tells the host (its termination report carries the name and reason), writes
    /// iOS's "*** Terminating app due to uncaught exception" line to stderr and aborts,
    /// so the process ends with `SIGABRT` (`EXC_CRASH (SIGABRT)`). Callable from any thread.
    nonisolated func raise(_ exception: UncaughtException) -> Never {
        let exception = exception.bounded()
        effects.log(exception.terminationMessage)
        // Written before the abort: the host reads the socket to its end before it takes
        // the exit, so the report has it. A host gone already changes nothing.
        try? connection.send(.uncaughtException(exception: exception))
        effects.abort()
    }

    // MARK: Background fetch and refresh

    /// While ``ApplicationDelegate/performFetch(_:completion:)`` or
    /// ``ApplicationDelegate/didReceiveRemoteNotification(_:userInfo:completion:)``
    /// runs, the host's number for that fetch or notification (what its completion
    /// reports); nil otherwise. For logs and test fixtures; iOS has no equivalent.
    public internal(set) var backgroundEventIdentifier: UInt64?

    /// Whether `didFinishLaunching` has returned; from then on BGTaskScheduler
    /// refuses new launch handlers, as on iOS.
    nonisolated var hasFinishedLaunching: Bool {
        finishedLaunching.withLock { $0 }
    }

    /// Sends a completion the host waits for (`fetchCompleted`, `bgTaskCompleted`,
    /// ...) and blocks until it answers; a refusal (e.g. the fetch is no longer
    /// running) or failure is logged to stderr.
    nonisolated func sendCompletion(_ request: ServiceRequest) {
        // A window changed on the main queue just before completing goes first, so
        // the host's snapshot after the completion shows it. (Off the main queue the
        // views cannot be read; their own flush follows.)
        if Self.isOnMainQueue {
            MainActor.assumeIsolated { sendViewTreeIfNeeded() }
        }
        do throws(ServiceError) {
            let reply = try serviceRequest(request)
            guard case .ok = reply else { throw ServiceRouter.unexpected(reply, to: request) }
        } catch {
            effects.log(ServiceRouter.failureLine(of: request.apiName, error))
        }
    }

    // MARK: Callbacks

    /// Runs one callback from the host: updates the state, calls the delegate (or,
    /// for an expiration, the task's handler; for a service event, the service
    /// object(s) it is for), acknowledges once that has
    /// returned, and for `willTerminate` exits with status 0.
    ///
    /// Everything the delegate or handler sends (task ends, requests) is written
    /// before the acknowledgement, on the same ordered socket, so the host sees it first.
    ///
    /// `holdingReturn`: one of a batch (see ``startReceivingCallbacks()``), acknowledged
    /// with the others of the batch (``Connection/holdReturn(seq:)``).
    func perform(seq: UInt64, callback: LifecycleCallback, state: AppState, holdingReturn: Bool = false) {
        applicationState = State(state)
        isRunningCallback = true
        switch callback {
        case .didFinishLaunching(let options):
            launchOptions = options
            _ = delegate.didFinishLaunching(self, options: options)
            finishedLaunching.withLock { $0 = true }
        case .willResignActive:
            delegate.willResignActive(self)
        case .didEnterBackground:
            delegate.didEnterBackground(self)
        case .willEnterForeground:
            delegate.willEnterForeground(self)
        case .didBecomeActive:
            delegate.didBecomeActive(self)
        case .willTerminate:
            delegate.willTerminate(self)
        case .backgroundTaskExpiration(let taskID):
            if !expireBackgroundTask(BackgroundTaskIdentifier(rawValue: taskID.rawValue)) {
                effects.log("Expiration of BackgroundTask \(taskID) (0x\(String(taskID.rawValue, radix: 16))): no background task exists with that identifier, or it has already been ended; no handler to run.")
            }
        case .service(let event):
            // To the live service objects of its kind (their delegates or handlers);
            // an event nobody can receive is logged and dropped, and still acknowledged.
            services.deliver(event, log: effects.log)
        case .didReceiveMemoryWarning:
            delegate.applicationDidReceiveMemoryWarning(self)
            NotificationCenter.default.post(name: Application.didReceiveMemoryWarningNotification, object: self)
        }
        // What the callback drew reaches the host before it hears the callback returned.
        isRunningCallback = false
        sendViewTreeIfNeeded()
        if case .willTerminate = callback {
            // Claim the exit before acknowledging: the host closes the socket once it
            // has the acknowledgement, and the reader must not then exit with 1.
            guard claimExit() else { return }
            try? connection.send(.callbackReturned(seq: seq))
            effects.exit(0)
            return
        }
        do {
            if holdingReturn {
                try connection.holdReturn(seq: seq)
            } else {
                try connection.send(.callbackReturned(seq: seq))
            }
        } catch {
            connectionFailed(error)
        }
        // Completion handlers called while the callback ran (performFetch, a remote
        // notification, a BGTask) are sent now, after the acknowledgement.
        services.callbackAcknowledged()
    }

    // MARK: Window

    /// `UIApplication.ignoreSnapshotOnNextApplicationLaunch()`: the app switcher (and
    /// the next launch) shows the launch image instead of the app's window, e.g. while
    /// the app shows content about to go stale. It holds for every snapshot the host
    /// takes until the app is next active (a fetch's or a silent push's refresh
    /// included), or until it is launched again. Callable from any thread; a lost host
    /// ends the process as usual.
    public nonisolated func ignoreSnapshotOnNextApplicationLaunch() {
        do {
            try connection.send(.ignoreSnapshotOnNextApplicationLaunch)
        } catch {
            connectionFailed(error)
        }
    }

    /// Tells the host this app's memory footprint changed a lot (it allocated or freed a
    /// large buffer), so the host reads it again from the kernel now rather than at the
    /// app's next state change. AppHost's own call: on iOS the kernel sees every page an
    /// app touches; a Linux host reads footprints only at moments it chooses (reading one
    /// walks the app's page tables). The host acts on a few dozen cues a second and drops
    /// the rest. Callable from any thread; sends no number (the host trusts the kernel's).
    public nonisolated func footprintDidChange() {
        do {
            try connection.send(.memoryFootprintChanged)
        } catch {
            connectionFailed(error)
        }
    }

    /// Posted on `NotificationCenter.default` (object: the ``Application``), on the main
    /// thread, after ``ApplicationDelegate/applicationDidReceiveMemoryWarning(_:)``
    /// returned, like `UIApplication.didReceiveMemoryWarningNotification`.
    public nonisolated static let didReceiveMemoryWarningNotification = Notification.Name("AppKitLessApplicationDidReceiveMemoryWarningNotification")

    /// `window` (the one this application shows) changed: the tree is sent at the
    /// next point ``window`` describes.
    func windowDidChange(_ changed: Window) {
        guard changed === window else { return }
        markViewTreeDirty()
    }

    private func markViewTreeDirty() {
        viewTreeDirty = true
        guard !isRunningCallback, !viewTreeFlushScheduled else { return }
        viewTreeFlushScheduled = true
        DispatchQueue.main.async {
            MainActor.assumeIsolated {
                self.viewTreeFlushScheduled = false
                self.sendViewTreeIfNeeded()
            }
        }
    }

    /// Sends the window's tree if it changed since it was last sent. A tree too large
    /// for one frame is logged and dropped (the host keeps the previous one).
    func sendViewTreeIfNeeded() {
        guard viewTreeDirty else { return }
        viewTreeDirty = false
        let tree = window?.viewTree() ?? ViewTree()
        do {
            try connection.send(.viewTree(tree))
        } catch .frame(let error) where error.isOversized {
            effects.log("the window's view tree was not sent: \(error)")
        } catch {
            connectionFailed(error)
        }
    }

    /// Set on the main queue so ``isOnMainQueue`` can tell it apart on any thread
    /// (on Linux the main queue is not always drained by the main thread).
    private nonisolated static let mainQueueKey = DispatchSpecificKey<Bool>()

    private static func markMainQueue() {
        DispatchQueue.main.setSpecific(key: mainQueueKey, value: true)
    }

    /// True when running a block of the main queue (so on the main actor).
    nonisolated static var isOnMainQueue: Bool {
        DispatchQueue.getSpecific(key: mainQueueKey) == true
    }

    /// Runs the host's first message after the welcome, read on the main thread by
    /// ``ApplicationMain(delegate:)``: a callback at once, anything else as the reader
    /// would take it (no request is waiting yet, so only a rejection makes sense: the
    /// app ends).
    func runFirst(_ message: HostMessage) {
        switch message {
        case .callback(let seq, let callback, let state):
            perform(seq: seq, callback: callback, state: state)
        case .rejected(let reason):
            connectionFailed(.rejected(reason: reason))
        case .welcome:
            connectionFailed(.unexpected("a second welcome"))
        case .reply(let id, _):
            connectionFailed(.unexpected("reply to request \(id), which is not waiting"))
        }
    }

    /// Starts the reader thread; each callback is run on the main queue in arrival order.
    /// The callbacks of one read run in one main-queue block, one after the other: one
    /// wake of the main thread for a batch the host sent together (10,000 transfers'
    /// completions are not 20,000 wakes). Work a callback queues on the main queue runs
    /// after the rest of its batch. Their returns are written together at the end of the
    /// batch (or before anything else the app sends, or 1 ms after the first of them at
    /// the latest, written by the reader thread): one `send(2)` and one wake of the host's
    /// reader for the batch.
    nonisolated func startReceivingCallbacks() {
        let gathered = GatheredCallbacks()
        connection.startReader(
            deliver: { seq, callback, state in
                gathered.add((seq, callback, state))
            },
            endOfBatch: {
                guard let batch = gathered.take() else { return }
                let holding = batch.count > 1
                if holding { self.connection.beginHoldingReturns() }
                DispatchQueue.main.async {
                    MainActor.assumeIsolated {
                        for (seq, callback, state) in batch {
                            self.perform(seq: seq, callback: callback, state: state, holdingReturn: holding)
                        }
                        if holding { self.connection.endHoldingReturns() }
                    }
                }
            },
            onFailure: { error in
                self.connectionFailed(error)
            }
        )
    }

    /// The host is gone or broke the protocol: say so on stderr and exit.
    nonisolated func connectionFailed(_ error: ConnectionError) {
        guard claimExit() else { return }
        effects.log("\(error); exiting")
        effects.exit(1)
    }

    /// True for the first caller only: that caller ends the process.
    private nonisolated func claimExit() -> Bool {
        ending.withLock { ending in
            defer { ending = true }
            return !ending
        }
    }
}

extension FrameError {
    /// A frame larger than ``Frame/maximumPayload``.
    fileprivate var isOversized: Bool {
        if case .oversized = self { true } else { false }
    }
}

/// Callbacks the reader thread has read and not yet handed to the main queue.
private final class GatheredCallbacks: Sendable {
    typealias Item = (seq: UInt64, callback: LifecycleCallback, state: AppState)
    private let items = Mutex<[Item]>([])

    func add(_ item: Item) {
        items.withLock { $0.append(item) }
    }

    /// What was gathered, nil if nothing.
    func take() -> [Item]? {
        items.withLock { items in
            guard !items.isEmpty else { return nil }
            defer { items = [] }
            return items
        }
    }
}
