import AppHostProtocol
import Dispatch
import Foundation

// Background transfers, like a `URLSession` made with
// `URLSessionConfiguration.background(withIdentifier:)`. The transfers run in the
// host's transfer daemon, not in the app: they go on while the app is suspended or
// not running, and their events reach the app later (relaunching it in the
// background when the session says `sessionSendsLaunchEvents`).
//
// The names map onto Foundation's (FoundationNetworking has its own `URLSession`
// on Linux, so these types carry a `Background` prefix):
//
//   URLSessionConfiguration.background(withIdentifier:)  BackgroundURLSessionConfiguration.background(withIdentifier:)
//   URLSession(configuration:delegate:delegateQueue:)    BackgroundURLSession(configuration:delegate:) (delegate queue: main)
//   URLSessionDownloadTask / URLSessionUploadTask        BackgroundURLSessionTask (``BackgroundURLSessionTask/kind``)
//   URLSessionDownloadDelegate / URLSessionTaskDelegate  BackgroundURLSessionDelegate
//   URLError (in didCompleteWithError)                   BackgroundURLSessionError
//   application(_:handleEventsForBackgroundURLSession:completionHandler:)
//                                                        ApplicationDelegate.handleEventsForBackgroundURLSession

/// What ``BackgroundURLSessionTask`` a transfer is: `download` or `upload`.
public typealias TransferKind = AppHostProtocol.TransferKind
/// Why the system cancelled a background task, like `URLError.BackgroundTaskCancelledReason`
/// (raw values: `NSURLErrorCancelledReasonUserForceQuitApplication` 0,
/// `NSURLErrorCancelledReasonBackgroundUpdatesDisabled` 1).
public typealias BackgroundTaskCancelledReason = AppHostProtocol.BackgroundTaskCancelledReason

/// The settings of a background session, like a `URLSessionConfiguration` made
/// with `background(withIdentifier:)`.
public struct BackgroundURLSessionConfiguration: Sendable, Equatable {
    /// The session's identifier: a session made again with it (after a relaunch
    /// too) reconnects to its transfers.
    public let identifier: String
    /// Let the system pick when to transfer (the host waits for power and Wi-Fi). Default false.
    public var isDiscretionary = false
    /// Relaunch (or resume) the app in the background when the session's tasks
    /// finish or need it. Default true.
    public var sessionSendsLaunchEvents = true
    /// How long a task may take, retries and waiting included, before it fails with
    /// `timedOut`, in seconds. Default 7 days.
    public var timeoutIntervalForResource: TimeInterval = 7 * 86400
    /// Transfer over cellular too; false waits for Wi-Fi. Default true.
    public var allowsCellularAccess = true

    private init(identifier: String) {
        self.identifier = identifier
    }

    /// A background configuration named `identifier` (unique within the app),
    /// like `URLSessionConfiguration.background(withIdentifier:)`.
    public static func background(withIdentifier identifier: String) -> BackgroundURLSessionConfiguration {
        BackgroundURLSessionConfiguration(identifier: identifier)
    }

    /// As the host takes it.
    var protocolValue: BackgroundSessionConfig {
        BackgroundSessionConfig(identifier: SessionIdentifier(identifier), isDiscretionary: isDiscretionary,
                                sessionSendsLaunchEvents: sessionSendsLaunchEvents,
                                timeoutIntervalForResource: timeoutIntervalForResource,
                                allowsCellularAccess: allowsCellularAccess)
    }
}

/// Why a background task failed, like the `URLError` handed to
/// `urlSession(_:task:didCompleteWithError:)`, or why a session call failed.
public struct BackgroundURLSessionError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A `URLError.Code` name as the host reports it (`cancelled`, `timedOut`,
    /// `notConnectedToInternet`, `badServerResponse`, ...), or one of this SDK's.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The task was cancelled (`URLError.cancelled`).
        public static let cancelled = Code(rawValue: "cancelled")
        /// The resource timeout ran out (`URLError.timedOut`).
        public static let timedOut = Code(rawValue: "timedOut")
        /// The host refused the call under an iOS rule (see ``BackgroundURLSessionError/serviceError``).
        public static let refused = Code(rawValue: "refused")
        /// The call could not reach the host, or its answer did not fit.
        public static let failed = Code(rawValue: "failed")
    }

    /// The code.
    public let code: Code
    /// A readable reason.
    public let reason: String
    /// The service failure behind a `refused` or `failed` code; nil otherwise.
    public let serviceError: ServiceError?
    /// Why the system cancelled the task (code `cancelled`), like
    /// `URLError.backgroundTaskCancelledReason`: the user terminated the app
    /// (`userForceQuitApplication`) or Background App Refresh was turned off
    /// (`backgroundUpdatesDisabled`); nil when the app cancelled it, or for any other error.
    public let backgroundTaskCancelledReason: BackgroundTaskCancelledReason?

    /// An error with `code` for `reason`.
    public init(_ code: Code, reason: String, serviceError: ServiceError? = nil,
                backgroundTaskCancelledReason: BackgroundTaskCancelledReason? = nil) {
        self.code = code
        self.reason = reason
        self.serviceError = serviceError
        self.backgroundTaskCancelledReason = backgroundTaskCancelledReason
    }

    /// The `NSURLErrorDomain` number of the code, like `URLError.Code.rawValue`
    /// (`cancelled`: `NSURLErrorCancelled`, -999); `NSURLErrorUnknown` (-1) for a code
    /// of this SDK's own or one it does not know.
    public var errorCode: Int {
        Self.urlErrorNumbers[code.rawValue] ?? NSURLErrorUnknown
    }

    /// The error's `userInfo` as Foundation's `URLError` has it: the reason
    /// (`NSLocalizedDescriptionKey`) and, for a task the system cancelled,
    /// `NSURLErrorBackgroundTaskCancelledReasonKey` with the reason's number.
    public var userInfo: [String: Any] {
        var info: [String: Any] = [NSLocalizedDescriptionKey: reason]
        if let why = backgroundTaskCancelledReason { info[NSURLErrorBackgroundTaskCancelledReasonKey] = why.rawValue }
        return info
    }

    /// The same error as Foundation's `URLError` (`NSURLErrorDomain`, ``errorCode``, ``userInfo``).
    public var urlError: URLError {
        URLError(URLError.Code(rawValue: errorCode) ?? .unknown, userInfo: userInfo)
    }

    /// `URLError.Code` names the host reports, and their `NSURLErrorDomain` numbers.
    static let urlErrorNumbers: [String: Int] = [
        "cancelled": NSURLErrorCancelled, "timedOut": NSURLErrorTimedOut, "badURL": NSURLErrorBadURL,
        "unsupportedURL": NSURLErrorUnsupportedURL, "cannotFindHost": NSURLErrorCannotFindHost,
        "cannotConnectToHost": NSURLErrorCannotConnectToHost, "networkConnectionLost": NSURLErrorNetworkConnectionLost,
        "notConnectedToInternet": NSURLErrorNotConnectedToInternet, "badServerResponse": NSURLErrorBadServerResponse,
        "cannotDecodeRawData": NSURLErrorCannotDecodeRawData, "cannotWriteToFile": NSURLErrorCannotWriteToFile,
        "cannotCreateFile": NSURLErrorCannotCreateFile, "cannotOpenFile": NSURLErrorCannotOpenFile,
        "cannotMoveFile": NSURLErrorCannotMoveFile, "fileDoesNotExist": NSURLErrorFileDoesNotExist,
        "noPermissionsToReadFile": NSURLErrorNoPermissionsToReadFile, "secureConnectionFailed": NSURLErrorSecureConnectionFailed,
        "serverCertificateUntrusted": NSURLErrorServerCertificateUntrusted,
        "backgroundSessionWasDisconnected": NSURLErrorBackgroundSessionWasDisconnected,
    ]

    /// The error for a failed service call.
    init(_ error: ServiceError) {
        self.init(error.kind == .refused ? .refused : .failed, reason: error.reason, serviceError: error)
    }

    /// "CODE: REASON".
    public var description: String { "\(code.rawValue): \(reason)" }
}

/// What a ``BackgroundURLSession`` tells its delegate, like
/// `URLSessionDownloadDelegate` (with the `URLSessionTaskDelegate` and
/// `URLSessionDelegate` methods a background session uses). Every method runs on
/// the main queue and has an empty default.
@MainActor
public protocol BackgroundURLSessionDelegate: AnyObject {
    /// Download progress, like `urlSession(_:downloadTask:didWriteData:totalBytesWritten:totalBytesExpectedToWrite:)`;
    /// `totalBytesExpectedToWrite` is -1 (`NSURLSessionTransferSizeUnknown`) when
    /// the server did not say.
    func urlSession(_ session: BackgroundURLSession, downloadTask: BackgroundURLSessionTask, didWriteData bytesWritten: Int64,
                    totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64)
    /// Upload progress, like `urlSession(_:task:didSendBodyData:totalBytesSent:totalBytesExpectedToSend:)`.
    func urlSession(_ session: BackgroundURLSession, task: BackgroundURLSessionTask, didSendBodyData bytesSent: Int64,
                    totalBytesSent: Int64, totalBytesExpectedToSend: Int64)
    /// A download finished, like `urlSession(_:downloadTask:didFinishDownloadingTo:)`:
    /// `location` is a temporary file in the app's container. Move (or read) it
    /// before returning: it is deleted once this method returns.
    func urlSession(_ session: BackgroundURLSession, downloadTask: BackgroundURLSessionTask, didFinishDownloadingTo location: URL)
    /// A task ended, like `urlSession(_:task:didCompleteWithError:)`: nil for
    /// success (for a download, after `didFinishDownloadingTo`), else why (`cancelled`
    /// after ``BackgroundURLSessionTask/cancel()``).
    func urlSession(_ session: BackgroundURLSession, task: BackgroundURLSessionTask, didCompleteWithError error: BackgroundURLSessionError?)
    /// Every event queued for the session has been delivered, like
    /// `urlSessionDidFinishEvents(forBackgroundURLSession:)`: call the completion
    /// handler ``ApplicationDelegate/handleEventsForBackgroundURLSession(_:identifier:completion:)``
    /// was given, if it has not been called yet.
    func urlSessionDidFinishEvents(forBackgroundURLSession session: BackgroundURLSession)
}

extension BackgroundURLSessionDelegate {
    /// Default: does nothing.
    public func urlSession(_ session: BackgroundURLSession, downloadTask: BackgroundURLSessionTask, didWriteData bytesWritten: Int64,
                           totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {}
    /// Default: does nothing.
    public func urlSession(_ session: BackgroundURLSession, task: BackgroundURLSessionTask, didSendBodyData bytesSent: Int64,
                           totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {}
    /// Default: does nothing (the file is deleted).
    public func urlSession(_ session: BackgroundURLSession, downloadTask: BackgroundURLSessionTask, didFinishDownloadingTo location: URL) {}
    /// Default: does nothing.
    public func urlSession(_ session: BackgroundURLSession, task: BackgroundURLSessionTask, didCompleteWithError error: BackgroundURLSessionError?) {}
    /// Default: does nothing.
    public func urlSessionDidFinishEvents(forBackgroundURLSession session: BackgroundURLSession) {}
}

/// A background session, like `URLSession(configuration: .background(withIdentifier:), delegate:, delegateQueue: .main)`.
///
/// Making one connects to the host's session of that identifier: after a relaunch,
/// the tasks that session still has come back (``getAllTasks()``), and events
/// the host held for it are delivered. Keep one session per identifier for the
/// life of the process (a second live one with the same identifier logs iOS's
/// warning and receives no events); the session keeps its delegate (strongly, as
/// Foundation does) and its unfinished tasks.
///
/// When the app is launched or woken for a session's events,
/// ``ApplicationDelegate/handleEventsForBackgroundURLSession(_:identifier:completion:)``
/// runs first: make the session there (if it does not exist yet) and keep the
/// completion; the task events follow, then
/// ``BackgroundURLSessionDelegate/urlSessionDidFinishEvents(forBackgroundURLSession:)``,
/// where the completion is called. Events that arrive before the app has made the
/// session are held and delivered (on the main queue, in order) once it does.
///
/// Create sessions on the main actor, after ``ApplicationMain(delegate:)`` has
/// connected (from `didFinishLaunching` on). Calls ask the host and block until it answers.
@MainActor
public final class BackgroundURLSession {
    /// The configuration it was made with.
    public nonisolated let configuration: BackgroundURLSessionConfiguration
    /// Receives the task events; kept strongly.
    public let delegate: (any BackgroundURLSessionDelegate)?
    /// The app's label (`sessionDescription`).
    public var sessionDescription: String?

    /// Unfinished tasks by identifier (those resumed, or listed by the host).
    private var tasks: [Int: BackgroundURLSessionTask] = [:]
    /// Tasks made and not yet resumed (or cancelled).
    private var suspended: [ObjectIdentifier: BackgroundURLSessionTask] = [:]
    /// Tasks resumed whose answer from the host has not been taken, oldest first.
    private var starting: [BackgroundURLSessionTask] = []
    /// Where the first unsettled task of `starting` may be (settled ones before it are dropped in bulk).
    private var startingHead = 0
    private let router: ServiceRouter
    /// Whether the router routes this session's events here.
    private(set) var isRegistered = false

    /// Connects to background session `configuration.identifier`, like
    /// `URLSession(configuration:delegate:delegateQueue:)` with the main queue.
    /// Blocks until the host answers; its tasks are then in ``getAllTasks()``. A
    /// refusal (e.g. an empty identifier) or failure is logged to stderr, and the session has no
    /// tasks (later calls ask the host again).
    public convenience init(configuration: BackgroundURLSessionConfiguration, delegate: (any BackgroundURLSessionDelegate)?) {
        self.init(configuration: configuration, delegate: delegate, router: .shared)
    }

    init(configuration: BackgroundURLSessionConfiguration, delegate: (any BackgroundURLSessionDelegate)?, router: ServiceRouter) {
        self.configuration = configuration
        self.delegate = delegate
        self.router = router
        let request = ServiceRequest.urlSessionCreate(configuration.protocolValue)
        do throws(ServiceError) {
            let reply = try router.request(request)
            switch reply {
            case .transferTasks(let snapshots):
                adopt(snapshots)
            case .ok:
                break
            case .failed(let code, let reason):
                router.log("\(request.apiName) (\(configuration.identifier)): \(code): \(reason)")
            case let other:
                throw ServiceRouter.unexpected(other, to: request)
            }
        } catch {
            router.logFailure(of: "\(request.apiName) (\(configuration.identifier))", error)
        }
        isRegistered = router.register(self)
        if !isRegistered {
            router.log("A background URLSession with identifier \(configuration.identifier) already exists! This one receives no events.")
        }
    }

    /// The session's identifier.
    public nonisolated var identifier: String { configuration.identifier }

    // MARK: Tasks

    /// A suspended download of `url`, like `downloadTask(with:)`; ``BackgroundURLSessionTask/resume()`` starts it.
    public func downloadTask(with url: URL) -> BackgroundURLSessionTask {
        downloadTask(with: BackgroundURLRequest(url: url))
    }

    /// A suspended download for `request` (its URL, method and headers), like `downloadTask(with:)`.
    public func downloadTask(with request: BackgroundURLRequest) -> BackgroundURLSessionTask {
        make(.download, request, uploadFile: nil)
    }

    /// A suspended download that goes on from where a cancelled one stopped, like
    /// `downloadTask(withResumeData:)`: `resumeData` is what
    /// ``BackgroundURLSessionTask/cancel(byProducingResumeData:)`` gave. The transfer
    /// daemon asks the server for the rest (`Range`, `If-Range`); if the resource has
    /// changed since, it starts again from the beginning. Resume data the host cannot
    /// read completes the task with `cannotDecodeRawData` once it is resumed.
    public func downloadTask(withResumeData resumeData: Data) -> BackgroundURLSessionTask {
        let plist = (try? UntrustedPropertyList.object(from: resumeData).object) as? [String: Any]
        let url = (plist?["NSURLSessionDownloadURL"] as? String).flatMap(URL.init(string:)) ?? URL(string: "about:blank")!
        let task = BackgroundURLSessionTask(session: self, kind: .download, request: BackgroundURLRequest(url: url),
                                            uploadFile: nil, resumeData: resumeData)
        suspended[ObjectIdentifier(task)] = task
        return task
    }

    /// A suspended upload of `fileURL`'s contents for `request`, like
    /// `uploadTask(with:fromFile:)`. The file must be in the app's container; the
    /// host reads it when the transfer runs.
    public func uploadTask(with request: BackgroundURLRequest, fromFile fileURL: URL) -> BackgroundURLSessionTask {
        make(.upload, request, uploadFile: fileURL)
    }

    /// Data tasks are not supported in background sessions: as iOS does, this raises
    /// `NSGenericException` and the app aborts (`EXC_CRASH (SIGABRT)`; the host's
    /// report names the exception). It never returns.
    public func dataTask(with url: URL) -> BackgroundURLSessionTask {
        dataTask(with: BackgroundURLRequest(url: url))
    }

    /// Data tasks are not supported in background sessions: as iOS does, this raises
    /// `NSGenericException` and the app aborts. It never returns.
    public func dataTask(with request: BackgroundURLRequest) -> BackgroundURLSessionTask {
        router.raise(UncaughtException(name: .generic, reason: "Data tasks are not supported in background sessions"))
    }

    /// The session's unfinished tasks, like `getAllTasks(completionHandler:)`
    /// (synchronous here): asks the host, so tasks from an earlier launch are
    /// included; tasks made and not yet resumed too. The same task object comes
    /// back each time. A failure is logged to stderr and gives the tasks known here.
    public func getAllTasks() -> [BackgroundURLSessionTask] {
        let request = ServiceRequest.urlSessionTasks(session: SessionIdentifier(identifier))
        do throws(ServiceError) {
            let reply = try router.request(request)
            // The resumes sent before were answered before this.
            settleStarting()
            guard case .transferTasks(let snapshots) = reply else { throw ServiceRouter.unexpected(reply, to: request) }
            let listed = adopt(snapshots)
            // Tasks the host no longer lists have ended; their completion event is on its way.
            return listed + suspendedTasks
        } catch {
            router.logFailure(of: request.apiName, error)
            settleStarting()
            return tasks.keys.sorted().compactMap { tasks[$0] } + suspendedTasks
        }
    }

    /// Like ``getAllTasks()``, with the list handed to `completionHandler` on the main queue afterwards.
    public func getAllTasks(completionHandler: @escaping @MainActor @Sendable ([BackgroundURLSessionTask]) -> Void) {
        let list = getAllTasks()
        let box = UncheckedBox(list)
        DispatchQueue.main.async {
            MainActor.assumeIsolated { completionHandler(box.value) }
        }
    }

    private var suspendedTasks: [BackgroundURLSessionTask] {
        suspended.values.sorted { ObjectIdentifier($0) < ObjectIdentifier($1) }
    }

    private func make(_ kind: TransferKind, _ request: BackgroundURLRequest, uploadFile: URL?) -> BackgroundURLSessionTask {
        let task = BackgroundURLSessionTask(session: self, kind: kind, request: request, uploadFile: uploadFile)
        suspended[ObjectIdentifier(task)] = task
        return task
    }

    /// Task objects for the host's list (the same objects for tasks known here).
    @discardableResult
    private func adopt(_ snapshots: [TransferTaskSnapshot]) -> [BackgroundURLSessionTask] {
        snapshots.map { snapshot in
            let task = tasks[snapshot.taskIdentifier.rawValue] ?? {
                let url = URL(string: snapshot.url) ?? URL(string: "about:blank")!
                let task = BackgroundURLSessionTask(session: self, kind: snapshot.kind, request: BackgroundURLRequest(url: url),
                                                    uploadFile: nil, taskIdentifier: snapshot.taskIdentifier.rawValue, state: .running)
                return task
            }()
            task.update(from: snapshot)
            if task.state == .completed {
                tasks.removeValue(forKey: snapshot.taskIdentifier.rawValue)
            } else {
                tasks[snapshot.taskIdentifier.rawValue] = task
            }
            return task
        }
    }

    /// ``BackgroundURLSessionTask/resume()``: sends the request and returns; the
    /// answer is taken by ``settle(_:)`` (on the main queue once it is there, or
    /// sooner when the task is looked at).
    func start(_ task: BackgroundURLSessionTask) {
        suspended.removeValue(forKey: ObjectIdentifier(task))
        let request = task.originalRequest
        let method = request.httpMethod ?? (task.kind == .upload ? "POST" : "GET")
        let serviceRequest = task.resumeData.map { ServiceRequest.urlSessionResumeTask(session: SessionIdentifier(identifier), resumeData: $0) }
            ?? ServiceRequest.urlSessionStartTask(
                session: SessionIdentifier(identifier), kind: task.kind, url: task.url.absoluteString, method: method,
                headers: request.allHTTPHeaderFields ?? [:], uploadFile: task.uploadFile?.path)
        task.state = .running
        do throws(ServiceError) {
            let reply = try router.startRequest(serviceRequest) {
                DispatchQueue.main.async { MainActor.assumeIsolated { self.settle(task) } }
            }
            task.creation = (reply, serviceRequest)
            starting.append(task)
        } catch {
            failed(task, serviceRequest, BackgroundURLSessionError(error))
        }
    }

    /// Takes the host's answer to `task`'s resume, if it has not been taken yet
    /// (waiting for it if it has not come).
    func settle(_ task: BackgroundURLSessionTask) {
        guard let creation = task.creation else { return }
        task.creation = nil
        while startingHead < starting.count, starting[startingHead].creation == nil { startingHead += 1 }
        if startingHead == starting.count {
            starting.removeAll(keepingCapacity: true)
            startingHead = 0
        }
        let failure: BackgroundURLSessionError
        do throws(ServiceError) {
            switch try creation.reply.wait() {
            case .transferTaskCreated(let identifier):
                task.assignIdentifier(identifier.rawValue)
                tasks[identifier.rawValue] = task
                return
            case .failed(let code, let reason):
                failure = BackgroundURLSessionError(.init(rawValue: code), reason: reason)
            case let other:
                throw ServiceRouter.unexpected(other, to: creation.request)
            }
        } catch {
            failure = BackgroundURLSessionError(error)
        }
        failed(task, creation.request, failure)
    }

    /// Every resume whose answer has not been taken (their answers came before any later one).
    private func settleStarting() {
        for task in starting[startingHead...] { settle(task) }
    }

    /// A resume the host did not take: the task completes with `failure`.
    private func failed(_ task: BackgroundURLSessionTask, _ request: ServiceRequest, _ failure: BackgroundURLSessionError) {
        router.log("\(request.apiName) (\(task.url.absoluteString)): \(failure)")
        task.state = .completed
        task.error = failure
        completeLater(task, failure)
    }

    /// ``BackgroundURLSessionTask/cancel()`` and `cancel(byProducingResumeData:)`.
    func cancel(_ task: BackgroundURLSessionTask, produceResumeData: Bool,
                completion: (@MainActor @Sendable (Data?) -> Void)?) {
        // Unless the host takes the request (then its answer comes as an event), the
        // completion hears nil on the main queue after this returns.
        var answerLater = false
        defer {
            if let completion, !answerLater {
                DispatchQueue.main.async { MainActor.assumeIsolated { completion(nil) } }
            }
        }
        switch task.state {
        case .suspended:
            // Never reached the host: cancelled here, as Foundation does.
            suspended.removeValue(forKey: ObjectIdentifier(task))
            let error = BackgroundURLSessionError(.cancelled, reason: "cancelled before it was resumed")
            task.state = .completed
            task.error = error
            completeLater(task, error)
            return
        case .canceling, .completed:
            return
        case .running:
            break
        }
        let request = ServiceRequest.urlSessionCancel(session: SessionIdentifier(identifier), taskIdentifier: TransferTaskID(task.taskIdentifier),
                                                      produceResumeData: produceResumeData)
        do throws(ServiceError) {
            switch try router.request(request) {
            case .ok:
                task.state = .canceling
                if produceResumeData, let completion {
                    task.resumeDataCompletion = completion
                    answerLater = true
                }
            case .failed(let code, let reason):
                router.log("\(request.apiName) (task \(task.taskIdentifier)): \(code): \(reason)")
            case let other:
                throw ServiceRouter.unexpected(other, to: request)
            }
        } catch {
            router.logFailure(of: "\(request.apiName) (task \(task.taskIdentifier))", error)
        }
    }

    /// Tells the delegate that `task` completed with `error`, on the main queue after the current call returns.
    private func completeLater(_ task: BackgroundURLSessionTask, _ error: BackgroundURLSessionError) {
        DispatchQueue.main.async {
            MainActor.assumeIsolated {
                self.delegate?.urlSession(self, task: task, didCompleteWithError: error)
            }
        }
    }

    // MARK: Events (from the router, on the main queue)

    /// The task numbered `identifier`; one the host knows but this process did not
    /// (e.g. a listing that raced its end) is made from the event.
    private func task(_ identifier: Int, kind: TransferKind) -> BackgroundURLSessionTask {
        if let task = tasks[identifier] { return task }
        let task = BackgroundURLSessionTask(session: self, kind: kind, request: BackgroundURLRequest(url: URL(string: "about:blank")!),
                                            uploadFile: nil, taskIdentifier: identifier, state: .running)
        tasks[identifier] = task
        return task
    }

    /// Hands one of this session's events to the delegate.
    func handle(_ event: ServiceEvent) {
        switch event {
        case .urlSessionProgress(_, let identifier, let done, let expected):
            let task = task(identifier.rawValue, kind: .download)
            let total = expected ?? -1
            switch task.kind {
            case .download:
                let delta = max(0, done - task.countOfBytesReceived)
                task.countOfBytesReceived = done
                task.countOfBytesExpectedToReceive = total
                delegate?.urlSession(self, downloadTask: task, didWriteData: delta, totalBytesWritten: done, totalBytesExpectedToWrite: total)
            case .upload:
                let delta = max(0, done - task.countOfBytesSent)
                task.countOfBytesSent = done
                task.countOfBytesExpectedToSend = total
                delegate?.urlSession(self, task: task, didSendBodyData: delta, totalBytesSent: done, totalBytesExpectedToSend: total)
            }
        case .urlSessionDidFinishDownloading(_, let identifier, let location):
            let task = task(identifier.rawValue, kind: .download)
            // A file, as the host says: `URL(fileURLWithPath:)` without `isDirectory`
            // would stat(2) the path to find out, for every download.
            let url = URL(fileURLWithPath: location, isDirectory: false)
            delegate?.urlSession(self, downloadTask: task, didFinishDownloadingTo: url)
            // As on iOS, the file is gone once the method returns (the host deletes it too).
            // One lstat(2) (FileManager's fileExists made two stat calls, for every download).
            var info = stat()
            if lstat(location, &info) == 0 {
                router.log("urlSession(_:downloadTask:didFinishDownloadingTo:) returned without moving \(location) (task \(identifier), session \(self.identifier)); the file is deleted")
                try? FileManager.default.removeItem(atPath: location)
            }
        case .urlSessionResumeData(_, let identifier, let data):
            let task = task(identifier.rawValue, kind: .download)
            let completion = task.resumeDataCompletion
            task.resumeDataCompletion = nil
            completion?(data)
        case .urlSessionDidComplete(_, let identifier, let code, let reason, let cancelledReason):
            let task = task(identifier.rawValue, kind: .download)
            tasks.removeValue(forKey: identifier.rawValue)
            // A cancel(byProducingResumeData:) the host did not answer (e.g. the task ended first).
            if let completion = task.resumeDataCompletion {
                task.resumeDataCompletion = nil
                completion(nil)
            }
            let error = code.map { BackgroundURLSessionError(.init(rawValue: $0), reason: reason ?? $0, backgroundTaskCancelledReason: cancelledReason) }
            task.state = .completed
            task.error = error
            delegate?.urlSession(self, task: task, didCompleteWithError: error)
        case .urlSessionDidFinishEvents:
            delegate?.urlSessionDidFinishEvents(forBackgroundURLSession: self)
        default:
            break
        }
    }
}

/// Carries a main-actor value into a main-queue block.
private struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
