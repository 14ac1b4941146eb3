import AppHostProtocol
@testable import AppKitLess
import Dispatch
import Foundation
import Synchronization
import Testing

/// Marks the main queue so a delegate can tell it runs there.
private let mainQueueKey: DispatchSpecificKey<Bool> = {
    let key = DispatchSpecificKey<Bool>()
    DispatchQueue.main.setSpecific(key: key, value: true)
    return key
}()

/// Records each callback as "<name> state=<state>", notes whether it ran on the
/// main queue, and runs an optional hook per callback.
@MainActor
private final class RecordingDelegate: ApplicationDelegate {
    var calls: [String] = []
    var offMainQueue: [String] = []
    var hooks: [String: @MainActor (Application) -> Void] = [:]

    private func record(_ name: String, _ application: Application) {
        calls.append("\(name) state=\(application.applicationState)")
        if DispatchQueue.getSpecific(key: mainQueueKey) != true { offMainQueue.append(name) }
        hooks[name]?(application)
    }

    func didFinishLaunching(_ application: Application, options: LaunchOptions) -> Bool {
        record("didFinishLaunching", application)
        return true
    }
    func willResignActive(_ application: Application) { record("willResignActive", application) }
    func didEnterBackground(_ application: Application) { record("didEnterBackground", application) }
    func willEnterForeground(_ application: Application) { record("willEnterForeground", application) }
    func didBecomeActive(_ application: Application) { record("didBecomeActive", application) }
    func willTerminate(_ application: Application) { record("willTerminate", application) }
}

/// An application over a socketpair whose host end the test drives.
private typealias Fixture = AppHarness<RecordingDelegate, NoExtras>

private extension AppHarness where Delegate == RecordingDelegate, Extra == NoExtras {
    init(hooks: [String: @MainActor (Application) -> Void] = [:]) async throws {
        _ = mainQueueKey
        try await self.init { connection, effects in
            let delegate = RecordingDelegate()
            delegate.hooks = hooks
            return (delegate, Application(bundleIdentifier: "com.example.test", delegate: delegate, connection: connection, effects: effects), NoExtras())
        }
    }
}

@Suite("Application", .serialized, .timeLimit(.minutes(3)))
struct ApplicationTests {
    @Test("callbacks run on the main queue in order, with the host's state, and are acknowledged in order")
    func callbacksInOrder() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        let options = LaunchOptions(reason: .user, arguments: ["--hold", "5"])
        let script: [(LifecycleCallback, AppState)] = [
            (.didFinishLaunching(options: options), .inactive),
            (.didBecomeActive, .active),
            (.willResignActive, .inactive),
            (.didEnterBackground, .background),
            (.willEnterForeground, .inactive),
            (.didBecomeActive, .active),
        ]
        for (index, (callback, state)) in script.enumerated() {
            try fixture.host.send(.callback(seq: UInt64(index + 1), callback: callback, state: state))
        }
        for index in script.indices {
            #expect(try await fixture.host.receive() == .callbackReturned(seq: UInt64(index + 1)))
        }

        let delegate = fixture.delegate, app = fixture.application
        let (calls, offMain, launchOptions, state) = await MainActor.run {
            (delegate.calls, delegate.offMainQueue, app.launchOptions, app.applicationState)
        }
        #expect(calls == [
            "didFinishLaunching state=inactive",
            "didBecomeActive state=active",
            "willResignActive state=inactive",
            "didEnterBackground state=background",
            "willEnterForeground state=inactive",
            "didBecomeActive state=active",
        ])
        #expect(offMain.isEmpty)
        #expect(launchOptions == options)
        #expect(state == .active)
        #expect(fixture.application.bundleIdentifier == "com.example.test")
    }

    @Test("willTerminate is acknowledged, then the process exits with status 0")
    func willTerminate() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        try fixture.host.send(.callback(seq: 7, callback: .willTerminate, state: .background))

        #expect(try await fixture.host.receive() == .callbackReturned(seq: 7))
        #expect(await fixture.recorder.firstExit() == 0)
        let delegate = fixture.delegate
        #expect(await MainActor.run { delegate.calls } == ["willTerminate state=background"])
    }

    @Test("a task begun in didEnterBackground is announced before the callback returns; ends are sent, bad ends logged")
    func backgroundTasks() async throws {
        let fixture = try await Fixture(hooks: [
            "didEnterBackground": { app in _ = app.beginBackgroundTask(withName: "upload") },
        ])
        defer { fixture.tearDown() }
        let host = fixture.host, app = fixture.application
        try host.send(.callback(seq: 1, callback: .didEnterBackground, state: .background))

        #expect(try await host.receive() == .beginBackgroundTask(id: 1, name: "upload"))
        #expect(try await host.receive() == .callbackReturned(seq: 1))

        // From a thread other than main, as UIKit allows.
        try await onThread { app.endBackgroundTask(BackgroundTaskIdentifier(rawValue: 1)) }
        #expect(try await host.receive() == .endBackgroundTask(id: 1))
        #expect(fixture.recorder.log.isEmpty)

        // Ending it again is logged like iOS does and still reported to the host.
        app.endBackgroundTask(BackgroundTaskIdentifier(rawValue: 1))
        #expect(try await host.receive() == .endBackgroundTask(id: 1))
        // The invalid id is logged but names nothing, so nothing is sent: the next
        // message the host sees is the next begin.
        app.endBackgroundTask(.invalid)
        #expect(app.beginBackgroundTask() == BackgroundTaskIdentifier(rawValue: 2))
        #expect(try await host.receive() == .beginBackgroundTask(id: 2, name: nil))

        let log = fixture.recorder.log
        #expect(log.count == 2)
        #expect(log.first?.hasPrefix("Can't end BackgroundTask: no background task exists with identifier 1 (0x1)") == true)
        #expect(log.last?.contains("identifier 0 (0x0)") == true)
    }

    @Test("backgroundTimeRemaining works on the main queue inside a callback")
    func timeRemainingInsideCallback() async throws {
        let seen = TimeBox()
        let fixture = try await Fixture(hooks: [
            "didBecomeActive": { app in seen.value = app.backgroundTimeRemaining },
            "didEnterBackground": { app in seen.value = app.backgroundTimeRemaining },
        ])
        defer { fixture.tearDown() }
        let host = fixture.host

        try host.send(.callback(seq: 1, callback: .didBecomeActive, state: .active))
        #expect(try await host.receive(replying: .reply(id: 1, reply: .backgroundTimeRemaining(seconds: .greatestFiniteMagnitude))) == .request(id: 1, request: .backgroundTimeRemaining))
        #expect(try await host.receive() == .callbackReturned(seq: 1))
        #expect(await MainActor.run { seen.value } == .greatestFiniteMagnitude)

        try host.send(.callback(seq: 2, callback: .didEnterBackground, state: .background))
        #expect(try await host.receive(replying: .reply(id: 2, reply: .backgroundTimeRemaining(seconds: 29.75))) == .request(id: 2, request: .backgroundTimeRemaining))
        #expect(try await host.receive() == .callbackReturned(seq: 2))
        #expect(await MainActor.run { seen.value } == 29.75)
    }

    @Test("the host going away ends the process with status 1 and a message")
    func hostGone() async throws {
        let fixture = try await Fixture()
        fixture.host.closeHostEnd()

        #expect(await fixture.recorder.firstExit() == 1)
        #expect(fixture.recorder.log == ["the host closed the connection; exiting"])
    }

    @Test("a malformed frame from the host ends the process with status 1 and a message")
    func malformedFromHost() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        try fixture.host.sendRaw([0, 0, 0, 3] + Array("{{{".utf8))

        #expect(await fixture.recorder.firstExit() == 1)
        #expect(fixture.recorder.log.first?.hasPrefix("the host sent an invalid frame: malformed message") == true)
    }

    @Test("an expiration handler runs on the main queue while its task is open, and not after it ends")
    func expiration() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        let app = fixture.application
        let count = CountBox()
        let id = app.beginBackgroundTask(withName: "sync") { count.value += 1 }
        #expect(try await fixture.host.receive() == .beginBackgroundTask(id: 1, name: "sync"))

        #expect(await MainActor.run { app.expireBackgroundTask(id) })
        #expect(await MainActor.run { count.value } == 1)
        app.endBackgroundTask(id)
        #expect(await MainActor.run { app.expireBackgroundTask(id) } == false)
        #expect(await MainActor.run { count.value } == 1)
    }

    @Test("an expiration callback runs the task's handler on the main queue, and what the handler sends precedes the acknowledgement")
    func expirationCallback() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        let host = fixture.host, app = fixture.application
        let seen = HandlerRecord()
        await MainActor.run {
            let ref = TaskIDBox()
            ref.id = app.beginBackgroundTask(withName: "upload") {
                seen.runs += 1
                seen.onMainQueue = DispatchQueue.getSpecific(key: mainQueueKey) == true
                seen.state = app.applicationState
                // Blocks the handler until the host answers: the acknowledgement must wait too.
                seen.remaining = app.backgroundTimeRemaining
                app.endBackgroundTask(ref.id)
                // The handler's last act, so the acknowledgement must come after it.
                _ = app.beginBackgroundTask(withName: "last-word")
            }
        }
        #expect(try await host.receive() == .beginBackgroundTask(id: 1, name: "upload"))

        try host.send(.callback(seq: 1, callback: .backgroundTaskExpiration(taskID: 1), state: .background))
        #expect(try await host.receive(replying: .reply(id: 1, reply: .backgroundTimeRemaining(seconds: 4.5))) == .request(id: 1, request: .backgroundTimeRemaining))
        #expect(try await host.receive() == .endBackgroundTask(id: 1))
        #expect(try await host.receive() == .beginBackgroundTask(id: 2, name: "last-word"))
        #expect(try await host.receive() == .callbackReturned(seq: 1))

        let delegate = fixture.delegate
        let (runs, onMain, state, remaining, calls) = await MainActor.run {
            (seen.runs, seen.onMainQueue, seen.state, seen.remaining, delegate.calls)
        }
        #expect(runs == 1)
        #expect(onMain)
        #expect(state == .background)
        #expect(remaining == 4.5)
        #expect(calls.isEmpty, "an expiration calls no delegate method")
        #expect(fixture.recorder.log.isEmpty)

        // The handler ended its task, so a second expiration of it runs nothing.
        try host.send(.callback(seq: 2, callback: .backgroundTaskExpiration(taskID: 1), state: .background))
        #expect(try await host.receive() == .callbackReturned(seq: 2))
        #expect(await MainActor.run { seen.runs } == 1)
        #expect(fixture.recorder.log.count == 1)
    }

    @Test("an expiration of an ended or unknown task runs nothing, is logged, and is still acknowledged")
    func expirationOfEndedOrUnknownTask() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        let host = fixture.host, app = fixture.application
        let count = CountBox()
        let ended = await MainActor.run { app.beginBackgroundTask(withName: "done") { count.value += 1 } }
        #expect(try await host.receive() == .beginBackgroundTask(id: 1, name: "done"))
        app.endBackgroundTask(ended)
        #expect(try await host.receive() == .endBackgroundTask(id: 1))
        // An open task without a handler: nothing to run, nothing to log.
        let quiet = app.beginBackgroundTask(withName: "quiet")
        #expect(try await host.receive() == .beginBackgroundTask(id: 2, name: "quiet"))

        try host.send(.callback(seq: 1, callback: .backgroundTaskExpiration(taskID: BackgroundTaskID(ended.rawValue)), state: .background))
        #expect(try await host.receive() == .callbackReturned(seq: 1))
        try host.send(.callback(seq: 2, callback: .backgroundTaskExpiration(taskID: 42), state: .inactive))
        #expect(try await host.receive() == .callbackReturned(seq: 2))
        try host.send(.callback(seq: 3, callback: .backgroundTaskExpiration(taskID: BackgroundTaskID(quiet.rawValue)), state: .background))
        #expect(try await host.receive() == .callbackReturned(seq: 3))

        let delegate = fixture.delegate
        let (runs, calls, state) = await MainActor.run { (count.value, delegate.calls, app.applicationState) }
        #expect(runs == 0)
        #expect(calls.isEmpty)
        #expect(state == .background)
        let log = fixture.recorder.log
        #expect(log.count == 2, "\(log)")
        #expect(log.first?.hasPrefix("Expiration of BackgroundTask 1 (0x1): no background task exists") == true)
        #expect(log.last?.hasPrefix("Expiration of BackgroundTask 42 (0x2a): no background task exists") == true)
    }

    @Test("the host's states map to the app's three", arguments: [
        (AppState.active, Application.State.active),
        (.inactive, .inactive),
        (.background, .background),
        (.suspended, .background),
        (.notRunning, .background),
    ])
    func stateMapping(_ host: AppState, _ app: Application.State) {
        #expect(Application.State(host) == app)
    }

    @Test("Application.State raw values and names match UIKit's")
    func stateNames() {
        #expect(Application.State.allCasesForTest.map(\.rawValue) == [0, 1, 2])
        #expect(Application.State.allCasesForTest.map(\.description) == ["active", "inactive", "background"])
    }
}

extension Application.State {
    fileprivate static let allCasesForTest: [Application.State] = [.active, .inactive, .background]
}

/// A value a main-actor hook writes and the test reads.
@MainActor private final class TimeBox {
    var value: Double?
}

/// A counter a main-actor handler bumps.
@MainActor private final class CountBox {
    var value = 0
}

/// A task id known only after `beginBackgroundTask` returns, for its own handler.
@MainActor private final class TaskIDBox {
    var id = BackgroundTaskIdentifier.invalid
}

/// What an expiration handler saw.
@MainActor private final class HandlerRecord {
    var runs = 0
    var onMainQueue = false
    var state: Application.State?
    var remaining: Double?
}
