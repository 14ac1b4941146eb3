import Foundation

// The shared transfer daemon (iOS's background URLSession): the host talks to it over
// a socketpair it creates at spawn (descriptor 3 in the daemon), with the same
// length-prefixed JSON frames as apps. Apps never talk to it: they ask the host.

/// What kind of transfer.
public enum TransferKind: String, Codable, Sendable {
    case download, upload
}

/// One transfer as the host hands it to the daemon.
public struct TransferJob: Codable, Sendable, Equatable {
    /// Unique across the host's life (the daemon's primary key).
    public var id: TransferID
    public var bundleIdentifier: BundleID
    /// The background session's identifier.
    public var session: SessionIdentifier
    /// `URLSessionTask.taskIdentifier` within the session.
    public var taskIdentifier: TransferTaskID
    public var kind: TransferKind
    /// http or https only.
    public var url: String
    public var method: String
    public var headers: [String: String]
    /// Upload body: an absolute path inside the app's container.
    public var uploadFile: String?
    /// Where the daemon writes the download (an absolute path inside the app's
    /// container); the file appears there complete or not at all.
    public var destination: String
    /// `isDiscretionary`: wait until plugged in and on Wi-Fi.
    public var discretionary: Bool
    /// `allowsCellularAccess`; false waits for Wi-Fi.
    public var allowsCellularAccess: Bool
    /// `timeoutIntervalForResource` in seconds (default 7 days).
    public var timeoutForResource: Double
    /// When the job was created (UNIX seconds), for the resource timeout.
    public var created: Double
    /// A download that goes on from a cancelled one's partial file (`downloadTask(withResumeData:)`).
    public var resume: TransferResume?

    public init(id: TransferID, bundleIdentifier: BundleID, session: SessionIdentifier, taskIdentifier: TransferTaskID, kind: TransferKind,
                url: String, method: String = "GET", headers: [String: String] = [:], uploadFile: String? = nil,
                destination: String, discretionary: Bool = false, allowsCellularAccess: Bool = true,
                timeoutForResource: Double = 7 * 86400, created: Double, resume: TransferResume? = nil) {
        self.id = id
        self.bundleIdentifier = bundleIdentifier
        self.session = session
        self.taskIdentifier = taskIdentifier
        self.kind = kind
        self.url = url
        self.method = method
        self.headers = headers
        self.uploadFile = uploadFile
        self.destination = destination
        self.discretionary = discretionary
        self.allowsCellularAccess = allowsCellularAccess
        self.timeoutForResource = timeoutForResource
        self.created = created
        self.resume = resume
    }
}

/// Where a cancelled download stopped: its partial file (in the app's container) and
/// the validator that makes a `Range`/`If-Range` request safe.
public struct TransferResume: Codable, Sendable, Equatable {
    public var partialFile: String
    public var bytes: Int64
    public var etag: String?
    public var lastModified: String?

    public init(partialFile: String, bytes: Int64, etag: String?, lastModified: String?) {
        self.partialFile = partialFile
        self.bytes = bytes
        self.etag = etag
        self.lastModified = lastModified
    }
}

/// How a transfer ended.
public enum TransferOutcome: Codable, Sendable, Equatable {
    /// Done: the HTTP status, the bytes transferred, and for a download the file at the job's destination.
    case completed(status: Int, bytes: Int64)
    /// Failed for good (after retries), with a URLError-like code and a readable reason.
    case failed(code: String, reason: String)
    /// Cancelled by the host (the user terminated the app, or the app cancelled it).
    case cancelled
    /// Cancelled with `cancel(byProducingResumeData:)`: the partial file is kept for a resume.
    case cancelledResumable(TransferResume)
}

/// Host → daemon.
public enum TransferRequest: Codable, Sendable, Equatable {
    /// Queue a transfer (committed to the daemon's database before `accepted` is sent).
    case enqueue(TransferJob)
    /// Cancel one transfer.
    case cancel(id: TransferID)
    /// Cancel a download keeping its partial file: it finishes `cancelledResumable`
    /// when the server gave a validator and bytes arrived, else plain `cancelled`.
    case cancelProducingResumeData(id: TransferID)
    /// Cancel every transfer of an app (a user terminate).
    case cancelApp(bundleIdentifier: BundleID)
    /// Device conditions for discretionary and cellular rules.
    case conditions(pluggedIn: Bool, network: DeviceNetwork)
    /// Every transfer the daemon knows that has not been reported finished and acknowledged.
    case list
    /// The host has recorded a finished transfer: the daemon may forget it.
    case acknowledge(id: TransferID)
}

/// Where a transfer is in the daemon's queue. The raw value is what the daemon's
/// database (`transfer.state` in `transfers.sqlite`) and its `list` answer hold, so
/// the strings written before this type existed read back unchanged.
public enum TransferState: String, Codable, Sendable, CaseIterable {
    /// Waiting for its turn on its host (or for its first attempt).
    case queued
    /// Waiting for the device conditions (power, Wi-Fi) or for a retry after an error.
    case waiting
    /// An attempt is under way.
    case running
    /// Ended; the outcome is kept (and reported again) until the host acknowledges it.
    case finished

    /// The state a transfer resumes in when the daemon reads `stored` back from its
    /// database at start: `finished` stays finished; everything else is queued again —
    /// `running` and `waiting` are not trusted after a restart, and a string this build
    /// does not know (a newer daemon's, a damaged row) is attempted again rather than
    /// lost or crashing the daemon.
    public init(restoring stored: String) {
        self = TransferState(rawValue: stored) == .finished ? .finished : .queued
    }
}

/// A transfer as the daemon reports it in `list`.
public struct TransferStatus: Codable, Sendable, Equatable {
    /// The transfer as the host enqueued it.
    public var job: TransferJob
    /// Where it is in the daemon's queue.
    public var state: TransferState
    /// Bytes transferred so far.
    public var bytesDone: Int64
    /// The size, once the server said it.
    public var bytesExpected: Int64?
    /// How it ended, once ``state`` is ``TransferState/finished``.
    public var outcome: TransferOutcome?

    /// A status as the daemon lists it.
    public init(job: TransferJob, state: TransferState, bytesDone: Int64, bytesExpected: Int64?, outcome: TransferOutcome?) {
        self.job = job
        self.state = state
        self.bytesDone = bytesDone
        self.bytesExpected = bytesExpected
        self.outcome = outcome
    }
}

/// Daemon → host.
public enum TransferEvent: Codable, Sendable, Equatable {
    /// The daemon is up (after a restart too) with this many unfinished transfers.
    case ready(pid: Int32, unfinished: Int)
    /// An `enqueue` is durable.
    case accepted(id: TransferID)
    /// Progress (throttled by the daemon).
    case progress(id: TransferID, bytesDone: Int64, bytesExpected: Int64?)
    /// A transfer is waiting (conditions, a retry after an error) — why, for events.
    case waiting(id: TransferID, reason: String)
    /// A transfer ended; reported until acknowledged (again after a daemon restart).
    case finished(id: TransferID, outcome: TransferOutcome)
    /// The answer to `list`.
    case transfers([TransferStatus])
    /// A request the daemon could not carry out.
    case error(String)
}
