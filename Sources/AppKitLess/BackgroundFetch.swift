import AppHostProtocol
import Foundation
import Synchronization

// Background fetch (`setMinimumBackgroundFetchInterval` / `performFetch`) and the
// completion handlers the host waits for: a fetch's, a remote notification's and a
// BGTask's. Each is answered by one request (`fetchCompleted`,
// `remoteNotificationCompleted`, `bgTaskCompleted`), sent when the handler is called —
// inside the callback too, so the host hears of a completion made in the handler
// before the callback's acknowledgement and suspends the app as soon as it returns
// (deterministic on the virtual clock).

/// What a fetch found, like `UIBackgroundFetchResult`: `newData`, `noData` or `failed`.
public typealias FetchResult = AppHostProtocol.FetchResult
/// `setMinimumBackgroundFetchInterval`'s argument: `never` (the default), `minimum`,
/// or `seconds(n)`.
public typealias FetchInterval = AppHostProtocol.FetchInterval
/// Whether background refresh is on for the app, like `UIBackgroundRefreshStatus`:
/// `available`, `denied` or `restricted`.
public typealias BackgroundRefreshStatus = AppHostProtocol.BackgroundRefreshStatus

/// A completion handler the host waits for. The first call sends its request (on
/// the calling thread, blocking it until the host answers); later calls are logged
/// and ignored.
final class HostCompletion: Sendable {
    private struct State {
        var acknowledged = false
        var called = false
        var held: ServiceRequest?
    }

    private let state = Mutex(State())
    /// What the handler is, for the line a second call logs.
    private let name: String
    private let send: @Sendable (ServiceRequest) -> Void
    private let log: @Sendable (String) -> Void

    /// A handler named `name` whose request goes out through `send`.
    init(name: String, send: @escaping @Sendable (ServiceRequest) -> Void, log: @escaping @Sendable (String) -> Void) {
        self.name = name
        self.send = send
        self.log = log
    }

    /// A handler of `application`'s.
    convenience init(name: String, application: Application) {
        self.init(name: name, send: application.sendCompletion, log: application.effects.log)
    }

    /// Whether the handler has been called.
    var isCalled: Bool { state.withLock { $0.called } }

    /// The handler was called with `request` as its answer: sends it (or holds it
    /// until the acknowledgement). A second call logs and sends nothing.
    /// - Returns: false for a second call.
    @discardableResult
    func complete(with request: ServiceRequest) -> Bool {
        let sendNow: Bool? = state.withLock { s in
            guard !s.called else { return nil }
            s.called = true
            return true
        }
        switch sendNow {
        case nil:
            log("\(name) was called more than once; the call is ignored")
            return false
        case true?:
            send(request)
        case false?:
            break
        }
        return true
    }

    /// The callback that created the handler has been acknowledged: a held answer goes out now.
    func callbackAcknowledged() {
        let held = state.withLock { s -> ServiceRequest? in
            s.acknowledged = true
            defer { s.held = nil }
            return s.held
        }
        if let held { send(held) }
    }
}
