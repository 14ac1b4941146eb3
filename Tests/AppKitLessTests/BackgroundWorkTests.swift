import AppHostProtocol
@testable import AppKitLess
import Dispatch
import Foundation
import Synchronization
import Testing

/// Marks the main queue so a handler can tell it runs there.
private let workMainQueueKey: DispatchSpecificKey<Bool> = {
    let key = DispatchSpecificKey<Bool>()
    DispatchQueue.main.setSpecific(key: key, value: true)
    return key
}()

private func onMainQueue() -> Bool {
    DispatchQueue.getSpecific(key: workMainQueueKey) == true
}

/// An application delegate that records fetches and notifications, answers them
/// as told, and runs hooks while launching.
@MainActor
private final class WorkDelegate: ApplicationDelegate {
    /// Run inside `didFinishLaunching`, in order.
    var launchHooks: [@MainActor (Application) -> Void] = []
    /// Results to call a completion with at once, in order (none: keep it for later).
    var answers: [FetchResult] = []
    /// Completions kept for later.
    var completions: [@Sendable (FetchResult) -> Void] = []
    /// One line per delegate call.
    var calls: [String] = []

    func didFinishLaunching(_ application: Application, options: LaunchOptions) -> Bool {
        for hook in launchHooks { hook(application) }
        return true
    }

    func performFetch(_ application: Application, completion: @escaping @Sendable (FetchResult) -> Void) {
        calls.append("performFetch id=\(application.backgroundEventIdentifier.map { "\($0)" } ?? "nil") state=\(application.applicationState) main=\(onMainQueue())")
        answer(completion)
    }

    func didReceiveRemoteNotification(_ application: Application, userInfo: RemoteNotification,
                                      completion: @escaping @Sendable (FetchResult) -> Void) {
        let aps = userInfo["aps"] as? [String: Any]
        calls.append("push id=\(application.backgroundEventIdentifier.map { "\($0)" } ?? "nil") silent=\(userInfo.isSilent) k=\(userInfo["k"] as? String ?? "-") content-available=\(aps?["content-available"] as? Int ?? 0)")
        answer(completion)
    }

    private func answer(_ completion: @escaping @Sendable (FetchResult) -> Void) {
        if answers.isEmpty {
            completions.append(completion)
        } else {
            for result in answers { completion(result) }
        }
    }
}

/// A delegate with every default.
@MainActor
private final class DefaultsDelegate: ApplicationDelegate {}

/// An application with its own service router and BGTaskScheduler over a
/// socketpair whose host end the test drives.
private typealias Fixture<D: ApplicationDelegate & Sendable> = AppHarness<D, WorkExtras>

private struct WorkExtras: Sendable {
    let scheduler: BGTaskScheduler
}

private extension AppHarness where Extra == WorkExtras {
    init(_ make: @escaping @MainActor @Sendable () -> Delegate) async throws {
        _ = workMainQueueKey
        let scheduler = BGTaskScheduler()
        try await self.init { connection, effects in
            let delegate = make()
            let router = ServiceRouter(taskScheduler: scheduler)
            let app = Application(bundleIdentifier: "com.example.work", delegate: delegate, connection: connection,
                                  effects: effects, services: router)
            return (delegate, app, WorkExtras(scheduler: scheduler))
        }
    }
}

/// What BGTask launch handlers and expiration handlers saw.
@MainActor private final class TaskLog {
    var lines: [String] = []
    var tasks: [BGTask] = []
    var results: [Bool] = []
}

/// A line-safe box for what a handler on another queue saw.
private final class QueueLog: Sendable {
    let lines = Mutex<[String]>([])
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}

private let launchOptions = LaunchOptions(reason: .backgroundTask)

/// A pending request, as plain values.
private struct PendingSummary: Sendable, Equatable {
    var kind: String
    var identifier: String
    var date: Date?
    var power: Bool
    var network: Bool

    init(kind: String, identifier: String, date: Date?, power: Bool, network: Bool) {
        (self.kind, self.identifier, self.date, self.power, self.network) = (kind, identifier, date, power, network)
    }

    init(_ request: BGTaskRequest) {
        let processing = request as? BGProcessingTaskRequest
        self.init(kind: "\(type(of: request))", identifier: request.identifier, date: request.earliestBeginDate,
                  power: processing?.requiresExternalPower ?? false, network: processing?.requiresNetworkConnectivity ?? false)
    }
}

@Suite("Background work", .serialized, .timeLimit(.minutes(3)))
struct BackgroundWorkTests {
    // MARK: Background fetch

    @Test("setMinimumBackgroundFetchInterval sends the interval (TimeInterval overload mapped as on iOS); backgroundRefreshStatus asks the host")
    func fetchInterval() async throws {
        let fixture = try await Fixture { WorkDelegate() }
        defer { fixture.tearDown() }
        let host = fixture.host, app = fixture.application

        let cases: [(FetchInterval, @Sendable () throws(ServiceError) -> Void)] = [
            (.minimum, { () throws(ServiceError) in try app.setMinimumBackgroundFetchInterval(.minimum) }),
            (.seconds(900), { () throws(ServiceError) in try app.setMinimumBackgroundFetchInterval(.seconds(900)) }),
            (.never, { () throws(ServiceError) in try app.setMinimumBackgroundFetchInterval(.never) }),
            (.minimum, { () throws(ServiceError) in try app.setMinimumBackgroundFetchInterval(Application.backgroundFetchIntervalMinimum) }),
            (.minimum, { () throws(ServiceError) in try app.setMinimumBackgroundFetchInterval(-5) }),
            (.seconds(3600), { () throws(ServiceError) in try app.setMinimumBackgroundFetchInterval(3600) }),
            (.never, { () throws(ServiceError) in try app.setMinimumBackgroundFetchInterval(Application.backgroundFetchIntervalNever) }),
            (.never, { () throws(ServiceError) in try app.setMinimumBackgroundFetchInterval(.infinity) }),
        ]
        var id: UInt64 = 0
        for (expected, call) in cases {
            id += 1
            let pending = StartedThread { Result { () throws(ServiceError) in try call() } }
            #expect(try await host.receive(replying: .reply(id: id, reply: .service(.ok))) == .request(id: id, request: .service(.fetchSetMinimumInterval(expected))))
            #expect(try await pending.value.failure == nil)
        }

        // A refusal is thrown; NaN fails without asking.
        let refused = StartedThread { Result { () throws(ServiceError) in try app.setMinimumBackgroundFetchInterval(.minimum) } }
        #expect(try await host.receive(replying: .reply(id: id + 1, reply: .service(.refused(reason: "no fetch mode")))) == .request(id: id + 1, request: .service(.fetchSetMinimumInterval(.minimum))))
        #expect(try await refused.value.failure == .refused("no fetch mode"))
        let nan = Result { () throws(ServiceError) in try app.setMinimumBackgroundFetchInterval(.nan) }
        #expect(nan.failure?.kind == .failed)

        let status = StartedThread { app.backgroundRefreshStatus }
        #expect(try await host.receive(replying: .reply(id: id + 2, reply: .service(.refreshStatus(.restricted)))) == .request(id: id + 2, request: .service(.backgroundRefreshStatus)))
        #expect(try await status.value == .restricted)
        let odd = StartedThread { app.backgroundRefreshStatus }
        #expect(try await host.receive(replying: .reply(id: id + 3, reply: .service(.ok))) == .request(id: id + 3, request: .service(.backgroundRefreshStatus)))
        #expect(try await odd.value == .denied)
        try await fixture.expectQuiet()
        #expect(fixture.recorder.log.count == 1)
        #expect(fixture.recorder.log.first?.hasPrefix("UIApplication.backgroundRefreshStatus: the host could not carry out the call") == true)
    }

    @Test("performFetch reaches the delegate on the main queue; a completion called inside it is sent before the acknowledgement, once")
    func fetchCompletedAtOnce() async throws {
        let fixture = try await Fixture { WorkDelegate() }
        defer { fixture.tearDown() }
        let host = fixture.host, delegate = fixture.delegate
        // Called twice inside the method: the second call is logged and dropped.
        await MainActor.run { delegate.answers = [.newData, .failed] }

        try host.send(.callback(seq: 1, callback: .service(.performFetch(id: 7)), state: .background))
        #expect(try await host.receive(replying: .reply(id: 1, reply: .service(.ok))) == .request(id: 1, request: .service(.fetchCompleted(id: 7, result: .newData))))
        #expect(try await host.receive() == .callbackReturned(seq: 1))
        try await fixture.expectQuiet()

        let app = fixture.application
        let (calls, current) = await MainActor.run { (delegate.calls, app.backgroundEventIdentifier) }
        #expect(calls == ["performFetch id=7 state=background main=true"])
        #expect(current == nil, "the identifier is cleared once the method returned")
        #expect(fixture.recorder.log == ["The performFetch completion handler (fetch 7) was called more than once; the call is ignored"])
    }

    @Test("a completion kept for later is sent from the thread that calls it; a second call sends nothing; a refusal is logged")
    func fetchCompletedLater() async throws {
        let fixture = try await Fixture { WorkDelegate() }
        defer { fixture.tearDown() }
        let host = fixture.host, delegate = fixture.delegate

        try host.send(.callback(seq: 1, callback: .service(.performFetch(id: 8)), state: .background))
        #expect(try await host.receive() == .callbackReturned(seq: 1))
        let completion = try #require(await MainActor.run { delegate.completions.first })

        let later = StartedThread { completion(.failed) }
        #expect(try await host.receive(replying: .reply(id: 1, reply: .service(.ok))) == .request(id: 1, request: .service(.fetchCompleted(id: 8, result: .failed))))
        try await later.value
        completion(.newData)
        try await fixture.expectQuiet()

        // The host no longer waits for fetch 9 when its completion comes: logged.
        try host.send(.callback(seq: 3, callback: .service(.performFetch(id: 9)), state: .background))
        #expect(try await host.receive() == .callbackReturned(seq: 3))
        let late = try #require(await MainActor.run { delegate.completions.last })
        let call = StartedThread { late(.noData) }
        #expect(try await host.receive(replying: .reply(id: 2, reply: .service(.refused(reason: "performFetch 9 is not running")))) == .request(id: 2, request: .service(.fetchCompleted(id: 9, result: .noData))))
        try await call.value

        #expect(fixture.recorder.log == [
            "The performFetch completion handler (fetch 8) was called more than once; the call is ignored",
            "performFetch completion: refused: performFetch 9 is not running",
        ])
    }

    @Test("the default delegate methods answer .noData at once, before the acknowledgement")
    func defaults() async throws {
        let fixture = try await Fixture { DefaultsDelegate() }
        defer { fixture.tearDown() }
        let host = fixture.host

        try host.send(.callback(seq: 1, callback: .service(.performFetch(id: 2)), state: .background))
        #expect(try await host.receive(replying: .reply(id: 1, reply: .service(.ok))) == .request(id: 1, request: .service(.fetchCompleted(id: 2, result: .noData))))
        #expect(try await host.receive() == .callbackReturned(seq: 1))

        try host.send(.callback(seq: 2, callback: .service(.remoteNotification(id: 3, userInfo: "{}", silent: true)), state: .background))
        #expect(try await host.receive(replying: .reply(id: 2, reply: .service(.ok))) == .request(id: 2, request: .service(.remoteNotificationCompleted(id: 3, result: .noData))))
        #expect(try await host.receive() == .callbackReturned(seq: 2))
        try await fixture.expectQuiet()
        #expect(fixture.recorder.log.isEmpty)
    }

    // MARK: Remote notifications

    @Test("a remote notification reaches didReceiveRemoteNotification with its payload; its completion sends remoteNotificationCompleted, once")
    func remoteNotification() async throws {
        let fixture = try await Fixture { WorkDelegate() }
        defer { fixture.tearDown() }
        let host = fixture.host, delegate = fixture.delegate
        let payload = #"{"aps":{"content-available":1},"k":"v"}"#

        try host.send(.callback(seq: 1, callback: .service(.remoteNotification(id: 5, userInfo: payload, silent: true)), state: .background))
        #expect(try await host.receive() == .callbackReturned(seq: 1))
        let completion = try #require(await MainActor.run { delegate.completions.first })
        let later = StartedThread { completion(.newData) }
        #expect(try await host.receive(replying: .reply(id: 1, reply: .service(.ok))) == .request(id: 1, request: .service(.remoteNotificationCompleted(id: 5, result: .newData))))
        try await later.value
        completion(.noData)

        // One in the foreground goes to the same method; answered inside it.
        await MainActor.run { delegate.answers = [.noData] }
        try host.send(.callback(seq: 2, callback: .service(.remoteNotification(id: 6, userInfo: #"{"aps":{"alert":"hi"}}"#, silent: false)), state: .active))
        #expect(try await host.receive(replying: .reply(id: 2, reply: .service(.ok))) == .request(id: 2, request: .service(.remoteNotificationCompleted(id: 6, result: .noData))))
        #expect(try await host.receive() == .callbackReturned(seq: 2))
        try await fixture.expectQuiet()

        #expect(await MainActor.run { delegate.calls } == [
            "push id=5 silent=true k=v content-available=1",
            "push id=6 silent=false k=- content-available=0",
        ])
        #expect(fixture.recorder.log == ["The didReceiveRemoteNotification completion handler (notification 5) was called more than once; the call is ignored"])
        #expect(RemoteNotification(json: "[1]").dictionary.isEmpty)
    }

    // MARK: BGTaskScheduler

    @Test("register while launching sends bgRegister: ok is true, notPermitted is false (a second registration and one after launching abort: FidelityTests)")
    func register() async throws {
        let fixture = try await Fixture { WorkDelegate() }
        defer { fixture.tearDown() }
        let host = fixture.host, delegate = fixture.delegate, scheduler = fixture.scheduler
        let results = await MainActor.run { TaskLog() }
        await MainActor.run {
            delegate.launchHooks = [{ _ in
                results.results.append(scheduler.register(forTaskWithIdentifier: "com.x.refresh") { _ in })
                results.results.append(scheduler.register(forTaskWithIdentifier: "com.x.denied") { _ in })
            }]
        }

        try host.send(.callback(seq: 1, callback: .didFinishLaunching(options: launchOptions), state: .background))
        #expect(try await host.receive(replying: .reply(id: 1, reply: .service(.ok))) == .request(id: 1, request: .service(.bgRegister(identifier: "com.x.refresh"))))
        #expect(try await host.receive(replying: .reply(id: 2, reply: .service(.failed(code: "notPermitted", reason: "\"com.x.denied\" is not in BGTaskSchedulerPermittedIdentifiers")))) == .request(id: 2, request: .service(.bgRegister(identifier: "com.x.denied"))))
        #expect(try await host.receive() == .callbackReturned(seq: 1))
        #expect(await MainActor.run { results.results } == [true, false])
        try await fixture.expectQuiet()

        #expect(fixture.recorder.log == [
            #"BGTaskScheduler.register(forTaskWithIdentifier: "com.x.denied"): notPermitted: "com.x.denied" is not in BGTaskSchedulerPermittedIdentifiers"#,
        ])
    }

    @Test("submit sends the request (earliest begin as seconds from now, at least 0) and maps failed codes and refusals to BGTaskScheduler.Error")
    func submit() async throws {
        let fixture = try await Fixture { WorkDelegate() }
        defer { fixture.tearDown() }
        let host = fixture.host, scheduler = fixture.scheduler

        let submitRefresh = StartedThread {
            let request = BGAppRefreshTaskRequest(identifier: "com.x.refresh")
            request.earliestBeginDate = Date(timeIntervalSinceNow: 60)
            return Result { () throws(BGTaskScheduler.Error) in try scheduler.submit(request) }
        }
        guard case .request(1, .service(.bgSubmit(let info))) = try await host.receive() else {
            Issue.record("expected a bgSubmit request")
            return
        }
        #expect(info.kind == .refresh && info.identifier == "com.x.refresh")
        #expect(!info.requiresExternalPower && !info.requiresNetworkConnectivity)
        let earliest = try #require(info.earliestBegin)
        #expect(earliest > 55 && earliest <= 60)
        try host.send(.reply(id: 1, reply: .service(.ok)))
        #expect(try await submitRefresh.value.failure == nil)

        let submitProcessing = StartedThread {
            let request = BGProcessingTaskRequest(identifier: "com.x.clean")
            request.requiresExternalPower = true
            request.requiresNetworkConnectivity = true
            request.earliestBeginDate = Date(timeIntervalSinceNow: -30)
            return Result { () throws(BGTaskScheduler.Error) in try scheduler.submit(request) }
        }
        let processing = BGTaskRequestInfo(kind: .processing, identifier: "com.x.clean", earliestBegin: 0,
                                           requiresExternalPower: true, requiresNetworkConnectivity: true)
        #expect(try await host.receive(replying: .reply(id: 2, reply: .service(.ok))) == .request(id: 2, request: .service(.bgSubmit(processing))))
        #expect(try await submitProcessing.value.failure == nil)

        let failures: [(ServiceReply, BGTaskScheduler.Error)] = [
            (.failed(code: "tooManyPendingTaskRequests", reason: "at most 1"), .init(.tooManyPendingTaskRequests, reason: "at most 1")),
            (.failed(code: "unavailable", reason: "Background App Refresh is off"), .init(.unavailable, reason: "Background App Refresh is off")),
            (.failed(code: "notPermitted", reason: "not permitted"), .init(.notPermitted, reason: "not permitted")),
            (.failed(code: "immediateRunIneligible", reason: "odd"), .init(.unavailable, reason: "immediateRunIneligible: odd")),
            (.refused(reason: "no processing mode"), .init(.notPermitted, reason: "no processing mode", serviceError: .refused("no processing mode"))),
        ]
        var id: UInt64 = 2
        for (reply, expected) in failures {
            id += 1
            let pending = StartedThread {
                Result { () throws(BGTaskScheduler.Error) in try scheduler.submit(BGAppRefreshTaskRequest(identifier: "com.x.refresh")) }
            }
            #expect(try await host.receive(replying: .reply(id: id, reply: .service(reply))) == .request(id: id, request: .service(.bgSubmit(BGTaskRequestInfo(kind: .refresh, identifier: "com.x.refresh")))))
            #expect(try await pending.value.failure == expected)
        }
        #expect(BGTaskScheduler.Error(.notPermitted, reason: "r").description == "notPermitted: r")
        try await fixture.expectQuiet()
        #expect(fixture.recorder.log.isEmpty)
    }

    @Test("cancel and cancelAll send bgCancel; pendingTaskRequests turns the host's list into requests, keeping the dates this process gave")
    func cancelAndPending() async throws {
        let fixture = try await Fixture { WorkDelegate() }
        defer { fixture.tearDown() }
        let host = fixture.host, scheduler = fixture.scheduler
        let date = Date(timeIntervalSinceNow: 120)

        let submit = StartedThread {
            let request = BGAppRefreshTaskRequest(identifier: "com.x.refresh")
            request.earliestBeginDate = date
            return Result { () throws(BGTaskScheduler.Error) in try scheduler.submit(request) }
        }
        guard case .request(1, .service(.bgSubmit(let submitted))) = try await host.receive() else {
            Issue.record("expected a bgSubmit request")
            return
        }
        try host.send(.reply(id: 1, reply: .service(.ok)))
        #expect(try await submit.value.failure == nil)

        let cancel = StartedThread { scheduler.cancel(taskRequestWithIdentifier: "com.x.old") }
        #expect(try await host.receive(replying: .reply(id: 2, reply: .service(.ok))) == .request(id: 2, request: .service(.bgCancel(identifier: "com.x.old"))))
        try await cancel.value

        let clean = BGTaskRequestInfo(kind: .processing, identifier: "com.x.clean", earliestBegin: 30, requiresExternalPower: true)
        let pending = StartedThread { scheduler.pendingTaskRequests().map(PendingSummary.init) }
        #expect(try await host.receive() == .request(id: 3, request: .service(.bgPending)))
        let before = Date()
        try host.send(.reply(id: 3, reply: .service(.bgRequests([submitted, clean]))))
        let requests = try await pending.value
        let after = Date()
        #expect(requests.count == 2)
        if requests.count == 2 {
            #expect(requests[0] == PendingSummary(kind: "BGAppRefreshTaskRequest", identifier: "com.x.refresh", date: date, power: false, network: false),
                    "the date this process submitted")
            #expect(requests[1].kind == "BGProcessingTaskRequest" && requests[1].identifier == "com.x.clean")
            #expect(requests[1].power && !requests[1].network)
            let begin = try #require(requests[1].date)
            #expect(begin >= before.addingTimeInterval(30) && begin <= after.addingTimeInterval(30))
        }

        let cancelAll = StartedThread { scheduler.cancelAllTaskRequests() }
        #expect(try await host.receive(replying: .reply(id: 4, reply: .service(.refused(reason: "no")))) == .request(id: 4, request: .service(.bgCancel(identifier: nil))))
        try await cancelAll.value

        let failed = StartedThread { scheduler.pendingTaskRequests().count }
        #expect(try await host.receive(replying: .reply(id: 5, reply: .service(.ok))) == .request(id: 5, request: .service(.bgPending)))
        #expect(try await failed.value == 0)
        #expect(fixture.recorder.log.count == 2)
        #expect(fixture.recorder.log.first == "BGTaskScheduler.cancel: refused: no")
    }

    /// Launches the fixture's app after `hook` set its delegate up to register
    /// `identifier` inside didFinishLaunching; answers the registration with ok.
    private func launch<D: ApplicationDelegate & Sendable>(
        _ fixture: Fixture<D>, registering identifier: String,
        hook: @escaping @MainActor (D) -> Void
    ) async throws {
        let host = fixture.host, delegate = fixture.delegate
        await MainActor.run { hook(delegate) }
        try host.send(.callback(seq: 1, callback: .didFinishLaunching(options: launchOptions), state: .background))
        #expect(try await host.receive(replying: .reply(id: 1, reply: .service(.ok))) == .request(id: 1, request: .service(.bgRegister(identifier: identifier))))
        #expect(try await host.receive() == .callbackReturned(seq: 1))
    }

    @Test("a launch runs the handler on the main queue with a task of the right kind; setTaskCompleted sends bgTaskCompleted after the acknowledgement, once")
    func launchAndComplete() async throws {
        let fixture = try await Fixture { WorkDelegate() }
        defer { fixture.tearDown() }
        let host = fixture.host, scheduler = fixture.scheduler
        let log = await MainActor.run { TaskLog() }
        try await launch(fixture, registering: "com.x.clean") { delegate in
            delegate.launchHooks = [{ _ in
                scheduler.register(forTaskWithIdentifier: "com.x.clean") { task in
                    let main = onMainQueue()
                    MainActor.assumeIsolated { log.lines.append("launch \(task.identifier) \(type(of: task)) main=\(main)") }
                    task.setTaskCompleted(success: true)
                    task.setTaskCompleted(success: false)
                }
            }]
        }

        try host.send(.callback(seq: 2, callback: .service(.bgTaskLaunch(identifier: "com.x.clean", kind: .processing)), state: .background))
        #expect(try await host.receive(replying: .reply(id: 2, reply: .service(.ok))) == .request(id: 2, request: .service(.bgTaskCompleted(identifier: "com.x.clean", success: true))))
        #expect(try await host.receive() == .callbackReturned(seq: 2))
        try await fixture.expectQuiet()
        #expect(await MainActor.run { log.lines } == ["launch com.x.clean BGProcessingTask main=true"])
        #expect(fixture.recorder.log == ["setTaskCompleted(success:) of BGTask com.x.clean was called more than once; the call is ignored"])
    }

    @Test("bgTaskExpire runs the running task's expirationHandler on the main queue; its setTaskCompleted reaches the host")
    func expire() async throws {
        let fixture = try await Fixture { WorkDelegate() }
        defer { fixture.tearDown() }
        let host = fixture.host, scheduler = fixture.scheduler
        let log = await MainActor.run { TaskLog() }
        try await launch(fixture, registering: "com.x.refresh") { delegate in
            delegate.launchHooks = [{ _ in
                scheduler.register(forTaskWithIdentifier: "com.x.refresh") { task in
                    MainActor.assumeIsolated {
                        log.lines.append("launch \(task.identifier) \(type(of: task))")
                        log.tasks.append(task)
                    }
                    task.expirationHandler = {
                        MainActor.assumeIsolated {
                            log.lines.append("expired \(task.identifier) main=\(onMainQueue())")
                        }
                        task.setTaskCompleted(success: false)
                    }
                }
            }]
        }

        try host.send(.callback(seq: 2, callback: .service(.bgTaskLaunch(identifier: "com.x.refresh", kind: .refresh)), state: .background))
        #expect(try await host.receive() == .callbackReturned(seq: 2))
        try await fixture.expectQuiet()

        try host.send(.callback(seq: 4, callback: .service(.bgTaskExpire(identifier: "com.x.refresh")), state: .background))
        #expect(try await host.receive(replying: .reply(id: 2, reply: .service(.ok))) == .request(id: 2, request: .service(.bgTaskCompleted(identifier: "com.x.refresh", success: false))))
        #expect(try await host.receive() == .callbackReturned(seq: 4))

        // Completed: a second expiration finds no task.
        try host.send(.callback(seq: 5, callback: .service(.bgTaskExpire(identifier: "com.x.refresh")), state: .background))
        #expect(try await host.receive() == .callbackReturned(seq: 5))
        #expect(await MainActor.run { log.lines } == ["launch com.x.refresh BGAppRefreshTask", "expired com.x.refresh main=true"])
        #expect(fixture.recorder.log == ["BGTask com.x.refresh expired, but no such task is running (already completed?); no expiration handler to run"])
    }

    @Test("a handler registered with a queue runs there; an expiration with no handler is logged")
    func queuesAndStrays() async throws {
        let fixture = try await Fixture { WorkDelegate() }
        defer { fixture.tearDown() }
        let host = fixture.host, scheduler = fixture.scheduler
        let seen = QueueLog()
        let (tasks, stream) = AsyncStream.makeStream(of: BGTask.self)
        let queue = DispatchQueue(label: "com.example.work.bgtasks")
        try await launch(fixture, registering: "com.x.sync") { delegate in
            delegate.launchHooks = [{ _ in
                scheduler.register(forTaskWithIdentifier: "com.x.sync", using: queue) { task in
                    seen.lines.withLock { $0.append("launch \(task.identifier) main=\(onMainQueue())") }
                    stream.yield(task)
                }
            }]
        }

        try host.send(.callback(seq: 2, callback: .service(.bgTaskLaunch(identifier: "com.x.sync", kind: .refresh)), state: .background))
        #expect(try await host.receive() == .callbackReturned(seq: 2))
        var iterator = tasks.makeAsyncIterator()
        let task = try #require(await iterator.next())
        #expect(seen.lines.withLock { $0 } == ["launch com.x.sync main=false"])

        // No expiration handler set: logged, nothing sent.
        try host.send(.callback(seq: 3, callback: .service(.bgTaskExpire(identifier: "com.x.sync")), state: .background))
        #expect(try await host.receive() == .callbackReturned(seq: 3))
        let complete = StartedThread { task.setTaskCompleted(success: true) }
        #expect(try await host.receive(replying: .reply(id: 2, reply: .service(.ok))) == .request(id: 2, request: .service(.bgTaskCompleted(identifier: "com.x.sync", success: true))))
        try await complete.value
        // (A launch for an identifier nobody registered raises and aborts: ProgrammerErrorTests
        // try that with a real process.)
        try await fixture.expectQuiet()
        #expect(fixture.recorder.log == [
            "BGTask com.x.sync expired with no expirationHandler set; call setTaskCompleted(success:) or the app is killed",
        ])
    }
}
