import AppHostProtocol
import Dispatch
import Foundation

/// One transfer of a ``BackgroundURLSession``, like `URLSessionDownloadTask` or
/// `URLSessionUploadTask`. Made suspended; ``resume()`` hands it to the host.
@MainActor
public final class BackgroundURLSessionTask: @MainActor CustomStringConvertible {
    /// Like `URLSessionTask.State`.
    public enum State: Int, Sendable, CustomStringConvertible {
        case running = 0
        case suspended = 1
        case canceling = 2
        case completed = 3

        public var description: String {
            switch self {
            case .running: "running"
            case .suspended: "suspended"
            case .canceling: "canceling"
            case .completed: "completed"
            }
        }
    }

    /// The session's number for the task, unique within the session; 0 until
    /// ``resume()`` has handed the task to the host (which numbers it), and for a
    /// task whose resume failed. Read before the host's answer to ``resume()`` has
    /// come, it waits for that answer.
    public var taskIdentifier: Int {
        session.settle(self)
        return identifier
    }
    private var identifier: Int
    /// Download or upload.
    public let kind: TransferKind
    /// The URL as given (or as the host listed it, for a task from an earlier launch).
    public let url: URL
    /// The request as given; for a task from an earlier launch, a GET of ``url``.
    public let originalRequest: BackgroundURLRequest
    /// The file an upload sends.
    public let uploadFile: URL?
    /// Where the task is (waits, as ``taskIdentifier`` does, for the answer to ``resume()``).
    public internal(set) var state: State {
        get {
            session.settle(self)
            return currentState
        }
        set { currentState = newValue }
    }
    private var currentState: State
    /// How it failed (set when it completes); nil while running or on success. Waits,
    /// as ``taskIdentifier`` does, for the answer to ``resume()``.
    public internal(set) var error: BackgroundURLSessionError? {
        get {
            session.settle(self)
            return currentError
        }
        set { currentError = newValue }
    }
    private var currentError: BackgroundURLSessionError?
    /// Bytes downloaded so far (`countOfBytesReceived`).
    public internal(set) var countOfBytesReceived: Int64 = 0
    /// Bytes the download will have, -1 while unknown (`countOfBytesExpectedToReceive`).
    public internal(set) var countOfBytesExpectedToReceive: Int64 = -1
    /// Bytes uploaded so far (`countOfBytesSent`).
    public internal(set) var countOfBytesSent: Int64 = 0
    /// Bytes the upload will send, -1 while unknown (`countOfBytesExpectedToSend`).
    public internal(set) var countOfBytesExpectedToSend: Int64 = -1
    /// The app's own label (`taskDescription`); not sent to the host.
    public var taskDescription: String?

    /// The session; kept strongly while the task lives, as Foundation does.
    let session: BackgroundURLSession
    /// `downloadTask(withResumeData:)`: what ``resume()`` hands to the host.
    let resumeData: Data?
    /// The completion of `cancel(byProducingResumeData:)`, until the host answers.
    var resumeDataCompletion: (@MainActor @Sendable (Data?) -> Void)?
    /// The host's answer to ``resume()`` while it has not been taken (the request is
    /// pipelined: ``resume()`` does not wait for it).
    var creation: (reply: PendingServiceReply, request: ServiceRequest)?

    init(session: BackgroundURLSession, kind: TransferKind, request: BackgroundURLRequest, uploadFile: URL?,
         taskIdentifier: Int = 0, state: State = .suspended, resumeData: Data? = nil) {
        self.session = session
        self.resumeData = resumeData
        self.kind = kind
        self.url = request.url ?? URL(string: "about:blank")!
        self.originalRequest = request
        self.uploadFile = uploadFile
        self.identifier = taskIdentifier
        self.currentState = state
    }

    /// Starts the task, like `resume()`: the host takes it over (and gives it its
    /// ``taskIdentifier``) and it runs in the transfer daemon from then on, whether
    /// the app runs or not. Does not wait for the host: the request is pipelined
    /// (ten thousand resumes cost about one round trip), and the task is `running`
    /// at once. A refusal (e.g. no http(s) URL, an upload file outside the container)
    /// or failure completes the task: the delegate hears `didCompleteWithError` on the
    /// main queue, and the reason is logged to stderr. Reading ``taskIdentifier``,
    /// ``state`` or ``error`` waits for the answer. Does nothing unless the task is
    /// suspended (tasks cannot be paused and resumed again in a background session).
    public func resume() {
        guard state == .suspended else { return }
        session.start(self)
    }

    /// Cancels the task, like `cancel()`: the delegate hears `didCompleteWithError`
    /// with `cancelled` when the host reports it (at once, on the main queue, for a
    /// task never resumed). Blocks until the host answers; a failure is logged.
    public func cancel() {
        session.cancel(self, produceResumeData: false, completion: nil)
    }

    /// Cancels a download keeping what it got so far, like
    /// `URLSessionDownloadTask.cancel(byProducingResumeData:)`: `completionHandler`
    /// gets the resume data (opaque; give it to
    /// ``BackgroundURLSession/downloadTask(withResumeData:)``) on the main queue once the
    /// transfer daemon has stopped the download, just before the delegate hears
    /// `didCompleteWithError` (`cancelled`). It gets nil when the download cannot be
    /// resumed: an upload, a task not started or already finished, a refusal, nothing
    /// received yet, or a server that gave no `ETag` or `Last-Modified`.
    public func cancel(byProducingResumeData completionHandler: @escaping @MainActor @Sendable (Data?) -> Void) {
        session.cancel(self, produceResumeData: true, completion: completionHandler)
    }

    /// The task's number, kind, state and URL.
    public var description: String {
        "BackgroundURLSessionTask \(taskIdentifier) \(kind.rawValue) \(state) \(url.absoluteString)"
    }

    /// Takes the state and counts of a host listing.
    func update(from snapshot: TransferTaskSnapshot) {
        state = snapshot.state == .completed ? .completed : .running
        switch kind {
        case .download:
            countOfBytesReceived = snapshot.bytesDone
            countOfBytesExpectedToReceive = snapshot.bytesExpected ?? -1
        case .upload:
            countOfBytesSent = snapshot.bytesDone
            countOfBytesExpectedToSend = snapshot.bytesExpected ?? -1
        }
    }

    func assignIdentifier(_ identifier: Int) {
        self.identifier = identifier
    }
}

/// A request for a background transfer, like Foundation's `URLRequest` (its URL, method
/// and headers: what a background session uses). Our own type, so apps do not load
/// FoundationNetworking and libcurl just to describe a request.
public struct BackgroundURLRequest: Sendable, Equatable {
    public var url: URL?
    /// `GET` when nil (`POST` for an upload).
    public var httpMethod: String?
    public var allHTTPHeaderFields: [String: String]?

    public init(url: URL) {
        self.url = url
    }

    /// Sets (or with nil removes) one header, like `URLRequest.setValue(_:forHTTPHeaderField:)`.
    public mutating func setValue(_ value: String?, forHTTPHeaderField field: String) {
        var headers = allHTTPHeaderFields ?? [:]
        headers[field] = value
        allHTTPHeaderFields = headers
    }
}

/// A service request sent without waiting (``ServiceRouter/startRequest(_:onReply:)``): its answer, once.
struct PendingServiceReply: Sendable {
    let application: Application
    let request: ServiceRequest
    let pending: PendingReply

    /// Blocks until the answer is there (at once if it is); call once.
    func wait() throws(ServiceError) -> ServiceReply {
        let reply: HostReply
        do {
            reply = try pending.wait()
        } catch {
            throw ServiceError(.connectionLost, reason: error.description)
        }
        return try application.serviceReply(reply, to: request)
    }
}

extension ServiceRouter {
    /// Sends `request` without waiting for the answer (see ``PendingServiceReply``):
    /// `onReply` runs on the connection's reader thread once the answer is there.
    func startRequest(_ request: ServiceRequest, onReply: @escaping @Sendable () -> Void) throws(ServiceError) -> PendingServiceReply {
        guard let application else {
            throw ServiceError(.connectionLost, reason: "\(request.apiName) was called before ApplicationMain(delegate:) connected to the host")
        }
        return try application.startServiceRequest(request, onReply: onReply)
    }
}
