import AppHostProtocol
import Foundation
import Plugins
import TestSupport
import Testing
@testable import Host

/// Transfers the system cancels (a user terminate; Background App Refresh turned off)
/// reach the app as URLSession reports them: `didCompleteWithError` with the cancelled
/// error and `NSURLErrorBackgroundTaskCancelledReasonKey`, when it next makes the
/// session. The broker as a value, and the rows in `apphost.sqlite`.
@Suite("Transfers cancelled by the system")
struct TransferCancelledTests {
    typealias T = TransferBrokerTests
    static let app = T.app
    static let session = T.session

    static func cancelled(_ task: TransferTaskID, _ reason: BackgroundTaskCancelledReason = .userForceQuitApplication) -> ServiceEvent {
        .urlSessionDidComplete(session: session, taskIdentifier: task, errorCode: "cancelled",
                               errorReason: "cancelled by the system (\(reason.name))", cancelledReason: reason)
    }

    static func deliveredEvents(_ fx: [TransferBroker.Effect]) -> [ServiceEvent] {
        fx.compactMap { if case .mode(.deliver(_, let event, _, _)) = $0 { event } else { nil } }
    }

    /// The app makes its session again in a new process: the answer, then what it hears.
    static func makeSession(_ b: inout TransferBroker, id: UInt64 = 50) -> [TransferBroker.Effect] {
        T.settle(&b, b.request(.urlSessionCreate(BackgroundSessionConfig(identifier: session)), id: id, from: app, world: T.world(.active)))
    }

    @Test func aUserTerminateIsReportedAtTheNextSessionThenForgotten() {
        var (b, ids) = T.broker(tasks: 2)
        _ = b.appExited(Self.app, byUser: true)
        let made = Self.makeSession(&b)
        #expect(made.first == .reply(app: Self.app, request: 50, .transferTasks([])), "no task is listed: they ended")
        #expect(Self.deliveredEvents(made) == [Self.cancelled(1), Self.cancelled(2)])
        #expect(Self.deliveredEvents(made).first?.name == "didCompleteWithError(task 1, cancelled, userForceQuitApplication)")
        // Returned: forgotten, in memory and in the database.
        #expect(b.callbackReturned(Self.cancelled(1), app: Self.app, world: T.world(.active)) == [.deleteCancelled([ids.sorted()[0]])])
        #expect(b.callbackReturned(Self.cancelled(1), app: Self.app, world: T.world(.active)).isEmpty, "once")
        // The same process making the session again hears nothing twice.
        #expect(Self.deliveredEvents(Self.makeSession(&b, id: 51)).isEmpty)
        #expect(b.cancelled[Self.app]?.map(\.taskIdentifier) == [2])
        // New tasks are numbered after the cancelled ones.
        _ = T.settle(&b, b.request(.urlSessionStartTask(session: Self.session, kind: .download, url: "http://h/n", method: "GET", headers: [:], uploadFile: nil),
                                   id: 52, from: Self.app, world: T.world(.active)))
        #expect(b.id(app: Self.app, session: Self.session, task: 3) != nil)
    }

    @Test func aProcessThatEndsBeforeReturningHearsItAgain() {
        var (b, _) = T.broker(tasks: 1)
        _ = b.appExited(Self.app, byUser: true)
        #expect(Self.deliveredEvents(Self.makeSession(&b)).count == 1)
        _ = b.appExited(Self.app, byUser: false)
        #expect(Self.deliveredEvents(Self.makeSession(&b, id: 51)) == [Self.cancelled(1)])
    }

    @Test func finishedButUndeliveredTransfersAreCancelledTooAndTheirFilesRemoved() {
        var (b, ids) = T.broker(tasks: 2)
        _ = b.handle(.finished(id: ids[0], outcome: .completed(status: 200, bytes: 5)), world: T.world(.suspended))
        let fx = b.appExited(Self.app, byUser: true)
        #expect(fx.contains(.removeFile("/c/\(Self.app)/Library/Caches/com.apphost.transfers/CFNetworkDownload_\(ids[0]).tmp")))
        #expect(fx.contains(.daemon(.acknowledge(id: ids[0]))), "finished in the daemon: it may forget it")
        #expect(!fx.contains(.daemon(.acknowledge(id: ids[1]))))
        #expect(Self.deliveredEvents(Self.makeSession(&b)) == [Self.cancelled(1), Self.cancelled(2)])
    }

    @Test func atMostTheBoundIsRememberedPerAppTheOldestGo() {
        var (b, ids) = T.broker(tasks: 5)
        b.cancelledLimit = 3
        let fx = b.appExited(Self.app, byUser: true)
        let sorted = ids.sorted()
        guard case .saveCancelled(let kept, let transfers, let dropped)? = fx.first else { Issue.record("no saveCancelled: \(fx)"); return }
        #expect(transfers == sorted)
        #expect(kept.map(\.id) == Array(sorted.suffix(3)))
        #expect(dropped == Array(sorted.prefix(2)))
        #expect(fx.contains { if case .note(_, _, _, let f) = $0 { f.transfer == .cancelledForgotten } else { false } })
        #expect(Self.deliveredEvents(Self.makeSession(&b)) == [Self.cancelled(3), Self.cancelled(4), Self.cancelled(5)])
        #expect(TransferBroker.cancelledPerApp == 1_000)
    }

    @Test func backgroundRefreshOffCancelsOnlyWhatIsPickedAndARunningAppHearsAtOnce() {
        let discretionary = BackgroundSessionConfig(identifier: Self.session, isDiscretionary: true)
        var (b, ids) = T.broker(tasks: 2, config: discretionary)
        _ = b.handle(.finished(id: ids[1], outcome: .completed(status: 200, bytes: 5)), world: T.world(.active))
        let fx = b.systemCancelled(Self.app, reason: .backgroundUpdatesDisabled, only: { $0.discretionary }, world: T.world(.background))
        #expect(fx.contains(.daemon(.cancel(id: ids[0]))))
        #expect(!fx.contains(.daemon(.cancelApp(bundleIdentifier: Self.app))))
        #expect(Self.deliveredEvents(fx) == [Self.cancelled(1, .backgroundUpdatesDisabled)], "finished transfers are not cancelled")
        #expect(fx.contains { if case .note(_, _, _, let f) = $0 { f.transfer == .cancelledByRefreshOff } else { false } })
        #expect(b.records[ids[1]] != nil)
        // A suspended app hears of it when it makes the session again.
        var (c, _) = T.broker(tasks: 1, config: discretionary)
        #expect(Self.deliveredEvents(c.systemCancelled(Self.app, reason: .backgroundUpdatesDisabled, only: { $0.discretionary }, world: T.world(.suspended))).isEmpty)
        #expect(Self.deliveredEvents(Self.makeSession(&c)) == [Self.cancelled(1, .backgroundUpdatesDisabled)])
        // Nothing picked: nothing happens.
        var (d, _) = T.broker(tasks: 1)
        #expect(d.systemCancelled(Self.app, reason: .backgroundUpdatesDisabled, only: { $0.discretionary }, world: T.world(.active)).isEmpty)
    }

    @Test func aRestartedHostRestoresThemForInstalledAppsWithinTheBound() {
        func row(_ id: TransferID, _ app: BundleID, task: TransferTaskID) -> CancelledTransfer {
            CancelledTransfer(id: id, bundleIdentifier: app, session: Self.session, taskIdentifier: task, kind: .download, url: "http://h/\(task)",
                              reason: .userForceQuitApplication, sent: true)
        }
        var b = TransferBroker(firstID: 100)
        b.cancelledLimit = 2
        let orphans = b.restoreCancelled([row(3, Self.app, task: 7), row(1, Self.app, task: 5), row(2, Self.app, task: 6), row(4, "gone", task: 1)],
                                         installed: [Self.app])
        #expect(Set(orphans) == [4, 1])
        #expect(b.cancelled[Self.app]?.map(\.id) == [2, 3])
        #expect(b.cancelled[Self.app]?.allSatisfy { !$0.sent } == true)
        #expect(b.taskCounters[TransferBroker.counterKey(Self.app, Self.session)] == 7)
    }

    @Test func uninstallForgetsThem() {
        var (b, _) = T.broker(tasks: 1)
        _ = b.appExited(Self.app, byUser: true)
        #expect(b.appUninstalled(Self.app).first == .deleteAppState(app: Self.app))
        #expect(b.cancelled[Self.app] == nil)
    }

    @Test func theRowsSurviveInTheDatabaseAndGoWithTheApp() throws {
        let dir = try TempDir("cancelled")
        defer { dir.remove() }
        let path = dir.path + "/apphost.sqlite"
        let store = try Store(path: path)
        let job = TransferJob(id: 9, bundleIdentifier: Self.app, session: Self.session, taskIdentifier: 1, kind: .upload, url: "http://h/u",
                              destination: "/d", created: 1)
        try store.saveTransferBatch(sessions: [], jobs: [job])
        let entry = CancelledTransfer(job, reason: .backgroundUpdatesDisabled)
        try store.saveCancelledTransfers([entry], transfers: [9], dropped: [])
        let reopened = try Store(path: path)
        #expect(try reopened.transfers().isEmpty, "moved, in one transaction")
        #expect(try reopened.cancelledTransfers() == [entry])
        try reopened.saveCancelledTransfers([], transfers: [], dropped: [9])
        #expect(try reopened.cancelledTransfers().isEmpty)
        try reopened.saveCancelledTransfers([entry], transfers: [], dropped: [])
        try reopened.deleteTransferState(bundleIdentifier: Self.app)
        #expect(try reopened.cancelledTransfers().isEmpty)
    }

    @Test func theReasonSurvivesTheWire() throws {
        // What AppKitLess makes of it is in AppKitLessTests (URLSessionTests.cancelledBySystem).
        let message = HostMessage.callback(seq: 1, callback: .service(Self.cancelled(1)), state: .active)
        let frame = try Frame.encode(message)
        #expect(try Frame.decode(HostMessage.self, from: Array(frame.dropFirst(4))) == message)
        let plain = HostMessage.callback(seq: 2, callback: .service(T.finished(1)), state: .active)
        #expect(try Frame.decode(HostMessage.self, from: Array(try Frame.encode(plain).dropFirst(4))) == plain)
    }
}
