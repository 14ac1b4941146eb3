import AppHostProtocol
@testable import AppKitLess
import Dispatch
import Synchronization
import Testing

/// The in-process app harness the AppKitLess suites share: an `Application` of
/// `Delegate` over a socketpair whose host end (`host`) the test drives, with the
/// process effects it asks for recorded. `Extra` holds what a suite keeps beside it
/// (a service router, a task scheduler), read as the harness's own members.
@dynamicMemberLookup
struct AppHarness<Delegate: ApplicationDelegate & Sendable, Extra: Sendable> {
    let host: TestHost
    let recorder = RecordedEffects()
    let delegate: Delegate
    let application: Application
    let extra: Extra

    /// `make` builds the delegate, the application (over `connection`, with `effects`)
    /// and the extras on the main actor; the application then starts receiving callbacks.
    init(building make: @escaping @MainActor @Sendable (_ connection: Connection, _ effects: ProcessEffects) -> (Delegate, Application, Extra)) async throws {
        host = try TestHost()
        let connection = Connection(descriptor: host.appDescriptor)
        let effects = recorder.effects
        (delegate, application, extra) = await MainActor.run { make(connection, effects) }
        application.startReceivingCallbacks()
    }

    subscript<T>(dynamicMember keyPath: KeyPath<Extra, T>) -> T { extra[keyPath: keyPath] }

    /// Ends the host side; the reader thread then stops. (The app's descriptor is
    /// left open: the reader may still be returning from its last read.)
    func tearDown() {
        host.closeHostEnd()
    }

    /// Sends a callback of no consequence (the expiration of a background task that
    /// cannot exist, in the app's current state) and expects its return to be the next
    /// message: proof that nothing else was sent meanwhile, and that what the host sent
    /// before it has been read and its main-queue work has run (the app reads frames in
    /// order and runs callbacks on the main queue, as the heartbeat did until issue 18
    /// removed it). The line the app logs for the unknown task is taken out of the log.
    ///
    /// Async, and never `DispatchQueue.main.sync`: a test that blocks a cooperative-pool
    /// thread on the main queue while the main queue runs another test's service call,
    /// whose reply needs a pool thread, deadlocks the suite on a 2-core machine (seen:
    /// both pool threads here, the main queue in `Connection.request`).
    func expectQuiet(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let seq = quietSequence.add(1, ordering: .relaxed).newValue
        let app = application
        let state: AppState = await MainActor.run {
            switch app.applicationState {
            case .active: .active
            case .inactive: .inactive
            case .background: .background
            }
        }
        try host.send(.callback(seq: seq, callback: .backgroundTaskExpiration(taskID: BackgroundTaskID(quietTaskID)), state: state))
        #expect(try await host.receive() == .callbackReturned(seq: seq), sourceLocation: sourceLocation)
        recorder.forget(where: { $0.hasPrefix("Expiration of BackgroundTask \(quietTaskID) ") })
    }
}

/// Sequence numbers of `expectQuiet`'s callbacks, far above any a test sends.
private let quietSequence = Atomic<UInt64>(1 << 40)
/// A background task id AppKitLess never hands out.
private let quietTaskID = Int.min + 7

/// Runs `body` on the main queue at once and lets the test await its result after
/// playing the host's part on the socket (a service call that waits for its reply).
final class MainQueueCall<T: Sendable>: Sendable {
    private let state = Mutex<(result: T?, waiter: CheckedContinuation<T, Never>?)>((nil, nil))

    init(_ body: @escaping @MainActor @Sendable () -> T) {
        DispatchQueue.main.async {
            let result = MainActor.assumeIsolated { body() }
            let waiter = self.state.withLock { s -> CheckedContinuation<T, Never>? in
                s.result = result
                defer { s.waiter = nil }
                return s.waiter
            }
            waiter?.resume(returning: result)
        }
    }

    var value: T {
        get async {
            await withCheckedContinuation { c in
                let done = state.withLock { s -> T? in
                    if s.result == nil { s.waiter = c }
                    return s.result
                }
                if let done { c.resume(returning: done) }
            }
        }
    }
}

/// No extras.
struct NoExtras: Sendable {}
