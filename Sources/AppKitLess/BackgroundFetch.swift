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

// The application's fetch settings, as UIApplication has them.
extension Application {
    /// The interval that asks for fetches as often as the system allows, like
    /// `UIApplication.backgroundFetchIntervalMinimum` (0), for
    /// the `TimeInterval` overload of ``setMinimumBackgroundFetchInterval(_:)``.
    public nonisolated static let backgroundFetchIntervalMinimum: TimeInterval = 0
    /// The interval that turns background fetch off (the default), like
    /// `UIApplication.backgroundFetchIntervalNever` (`Double.greatestFiniteMagnitude`).
    public nonisolated static let backgroundFetchIntervalNever: TimeInterval = .greatestFiniteMagnitude

    /// Sets how often the app wants ``ApplicationDelegate/performFetch(_:completion:)``
    /// calls, like `UIApplication.setMinimumBackgroundFetchInterval(_:)`: `.never`
    /// (the default), `.minimum` or `.seconds(n)` (at most once per `n` seconds; the
    /// host decides when, within that bound). Fetches need `fetch` in
    /// `UIBackgroundModes`. Asks the host and blocks until it answers; callable from
    /// any thread.
    /// - Throws: ``ServiceError`` if the host refuses or cannot answer (iOS does not
    ///   report failures; this SDK does, so a test can see them).
    public nonisolated func setMinimumBackgroundFetchInterval(_ interval: FetchInterval) throws(ServiceError) {
        let request = ServiceRequest.fetchSetMinimumInterval(interval)
        let reply = try serviceRequest(request)
        guard case .ok = reply else { throw ServiceRouter.unexpected(reply, to: request) }
    }

    /// ``setMinimumBackgroundFetchInterval(_:)`` with seconds, as iOS
    /// takes it: 0 or less (``backgroundFetchIntervalMinimum``) is `.minimum`;
    /// ``backgroundFetchIntervalNever`` or infinity is `.never`; anything else is
    /// `.seconds(interval)`.
    /// - Throws: ``ServiceError`` as the other overload; a NaN interval fails
    ///   (`.failed`) without asking the host.
    public nonisolated func setMinimumBackgroundFetchInterval(_ interval: TimeInterval) throws(ServiceError) {
        let value: FetchInterval
        if interval.isNaN {
            throw ServiceError(.failed, reason: "setMinimumBackgroundFetchInterval: the interval is not a number")
        } else if interval <= Self.backgroundFetchIntervalMinimum {
            value = .minimum
        } else if interval >= Self.backgroundFetchIntervalNever {
            value = .never
        } else {
            value = .seconds(interval)
        }
        try setMinimumBackgroundFetchInterval(value)
    }

    /// Whether the app may run in the background for fetches, BGTaskScheduler
    /// tasks and silent pushes, like `UIApplication.backgroundRefreshStatus`:
    /// `available`, `denied` (turned off in the settings) or `restricted` (e.g.
    /// low-power mode). Asks the host each time and blocks until it answers;
    /// callable from any thread. A failure is logged to stderr and reads as `denied`.
    public nonisolated var backgroundRefreshStatus: BackgroundRefreshStatus {
        let request = ServiceRequest.backgroundRefreshStatus
        do throws(ServiceError) {
            let reply = try serviceRequest(request)
            guard case .refreshStatus(let status) = reply else { throw ServiceRouter.unexpected(reply, to: request) }
            return status
        } catch {
            effects.log(ServiceRouter.failureLine(of: request.apiName, error))
            return .denied
        }
    }
}
