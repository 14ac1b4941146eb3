import AppHostProtocol
import Foundation
import Plugins
import Testing
@testable import Host

/// The transfer broker as a value: requests, daemon events and callbacks in, effects
/// out; no process, no database, no daemon.
@Suite("Transfer broker")
struct TransferBrokerTests {
    static let app: BundleID = "com.example.app"
    static let session: SessionIdentifier = "s"

    /// A world in which the app is in `state` (running code unless not running or suspended).
    static func world(_ state: AppState, installed: Bool = true) -> TransferBroker.World {
        TransferBroker.World(isInstalled: { _ in installed }, state: { _ in state },
                             isRunningCode: { _ in state != .notRunning && state != .suspended },
                             containersDirectory: "/c", wallClock: { 1_000 })
    }

    /// Carries out `.save` as the supervisor would (the batch is written) and returns every effect.
    static func settle(_ broker: inout TransferBroker, _ effects: [TransferBroker.Effect]) -> [TransferBroker.Effect] {
        var all = effects.filter { $0 != .save }
        if effects.contains(.save) { all += broker.saved(broker.takeUnsaved()) }
        return all
    }

    /// A broker with a session and `count` downloads, the daemon ready and every job accepted.
    static func broker(tasks count: Int, config: BackgroundSessionConfig = BackgroundSessionConfig(identifier: session)) -> (TransferBroker, [TransferID]) {
        var b = TransferBroker(firstID: 100)
        _ = b.handle(.ready(pid: 9, unfinished: 0), world: world(.active))
        _ = settle(&b, b.request(.urlSessionCreate(config), id: 1, from: app, world: world(.active)))
        var ids: [TransferID] = []
        for n in 1...count {
            _ = settle(&b, b.request(.urlSessionStartTask(session: session, kind: .download, url: "http://h/f/\(n)", method: "GET", headers: [:], uploadFile: nil),
                                     id: UInt64(1 + n), from: app, world: world(.active)))
            let id = b.id(app: app, session: session, task: TransferTaskID(n))!
            _ = b.handle(.accepted(id: id), world: world(.active))
            ids.append(id)
        }
        return (b, ids)
    }

    static func delivered(_ effects: [TransferBroker.Effect]) -> [String] {
        effects.compactMap {
            guard case .mode(.deliver(_, let event, let wake, _)) = $0 else { return nil }
            let name = event.name.prefix { $0 != "(" }
            switch wake {
            case .ifRunning: return "\(name)/ifRunning"
            case .wake: return "\(name)/wake"
            case .launch(let reason): return "\(name)/launch(\(reason.rawValue))"
            }
        }
    }

    static func finished(_ task: TransferTaskID) -> ServiceEvent {
        .urlSessionDidComplete(session: session, taskIdentifier: task, errorCode: nil, errorReason: nil)
    }

    @Test func aNewTaskIsAnsweredAndSentOnlyOnceItsRowIsWritten() {
        var b = TransferBroker(firstID: 100)
        _ = b.handle(.ready(pid: 9, unfinished: 0), world: Self.world(.active))
        let create = b.request(.urlSessionCreate(BackgroundSessionConfig(identifier: Self.session)), id: 1, from: Self.app, world: Self.world(.active))
        #expect(create == [.save], "no answer before the session is written")
        let start = b.request(.urlSessionStartTask(session: Self.session, kind: .download, url: "http://h/1", method: "GET", headers: [:], uploadFile: nil),
                              id: 2, from: Self.app, world: Self.world(.active))
        #expect(start == [.prepareDirectory(app: Self.app)], "one save is already asked for; nothing is answered yet")
        let batch = b.takeUnsaved()
        #expect(batch.sessions.count == 1 && batch.jobs.count == 1)
        let job = batch.jobs[0].job
        #expect(job.taskIdentifier == 1 && job.destination == "/c/\(Self.app)/Library/Caches/com.apphost.transfers/CFNetworkDownload_101.tmp")
        let after = b.saved(batch)
        #expect(after.first == .reply(app: Self.app, request: 1, .transferTasks([])))
        #expect(after.contains(.daemon(.enqueue(job))))
        #expect(after.last == .reply(app: Self.app, request: 2, .transferTaskCreated(taskIdentifier: 1)))
    }

    @Test func aFailedWriteFailsTheRequestAndDropsTheTask() {
        var (b, _) = Self.broker(tasks: 1)
        _ = b.request(.urlSessionStartTask(session: Self.session, kind: .download, url: "http://h/2", method: "GET", headers: [:], uploadFile: nil),
                      id: 9, from: Self.app, world: Self.world(.active))
        let effects = b.saveFailed(b.takeUnsaved(), reason: "disk full")
        #expect(effects == [.reply(app: Self.app, request: 9, .failed(code: "cannotWriteToFile", reason: "the host could not record the task: disk full"))])
        #expect(b.id(app: Self.app, session: Self.session, task: 2) == nil)
        #expect(b.snapshots(Self.app, Self.session).map(\.taskIdentifier) == [1])
    }

    static func download(_ n: Int) -> ServiceRequest {
        .urlSessionStartTask(session: session, kind: .download, url: "http://h/f/\(n)", method: "GET", headers: [:], uploadFile: nil)
    }

    static let ok = TransferOutcome.completed(status: 200, bytes: 10)

    /// Issue 33, point 4: iOS resumes (or relaunches) the app for a background session
    /// "when all of the tasks associated with a session are complete" (Apple, "Downloading
    /// files in the background"; Quinn, developer.apple.com/forums/thread/14854: "Eventually
    /// all the tasks complete and nsurlsessiond resumes your app"), not per transfer.
    @Test func aSuspendedAppIsWokenOnceWhenTheSessionsTasksAreAllComplete() {
        var (b, ids) = Self.broker(tasks: 3)
        let suspended = Self.world(.suspended)
        var fx = b.handle(.finished(id: ids[0], outcome: Self.ok), world: suspended)
        #expect(Self.delivered(fx).isEmpty, "two tasks still run: no wake")
        #expect(!fx.contains { if case .handOver = $0 { true } else { false } })
        fx = b.handle(.finished(id: ids[1], outcome: .failed(code: "timedOut", reason: "slow")), world: suspended)
        #expect(Self.delivered(fx).isEmpty)
        #expect(b.records[ids[0]]?.stage == .waitingForSession && b.rounds.isEmpty)
        fx = b.handle(.finished(id: ids[2], outcome: Self.ok), world: suspended)
        #expect(fx.contains(.handOver(path: b.records[ids[0]]!.job.destination, app: Self.app)))
        #expect(Self.delivered(fx) == ["handleEventsForBackgroundURLSession/launch(urlSessionEvents)",
                                       "didFinishDownloadingTo/wake", "didCompleteWithError/wake", "didCompleteWithError/wake",
                                       "didFinishDownloadingTo/wake", "didCompleteWithError/wake"], "one wake, every transfer's events, in task order")
        #expect(fx.contains(.mode(.beginActivity(app: Self.app, name: "URLSession events s"))))
        let background = Self.world(.background)
        fx = b.callbackReturned(Self.finished(1), app: Self.app, world: background)
        #expect(fx == [.deleteTransfers([ids[0]]), .daemon(.acknowledge(id: ids[0]))], "the round still waits for tasks 2 and 3")
        _ = b.callbackReturned(.urlSessionDidComplete(session: Self.session, taskIdentifier: 2, errorCode: "timedOut", errorReason: "slow"),
                               app: Self.app, world: background)
        fx = b.callbackReturned(Self.finished(3), app: Self.app, world: background)
        #expect(Self.delivered(fx) == ["urlSessionDidFinishEvents/wake"])
        #expect(fx.last == .startRoundTimer(app: Self.app, session: Self.session))
        // A task made during the wake, finished after urlSessionDidFinishEvents: it waits for
        // the completion, then (its session's tasks all complete) opens the next round.
        _ = Self.settle(&b, b.request(Self.download(4), id: 60, from: Self.app, world: background))
        let fourth = b.id(app: Self.app, session: Self.session, task: 4)!
        fx = b.handle(.finished(id: fourth, outcome: Self.ok), world: background)
        #expect(Self.delivered(fx).isEmpty)
        fx = b.request(.urlSessionEventsCompleted(session: Self.session), id: 50, from: Self.app, world: Self.world(.suspended))
        #expect(fx.prefix(3) == [.reply(app: Self.app, request: 50, .ok), .cancelRoundTimer(app: Self.app, session: Self.session),
                                 .mode(.endActivity(app: Self.app, name: "URLSession events s"))])
        #expect(Self.delivered(fx) == ["handleEventsForBackgroundURLSession/launch(urlSessionEvents)", "didFinishDownloadingTo/wake", "didCompleteWithError/wake"])
    }

    /// A round of many transfers puts at most ``TransferBroker/roundWindow`` transfers'
    /// events in the app's hands, and sends the next as each is returned.
    @Test func aLargeRoundIsSentAWindowAtATime() {
        let count = TransferBroker.roundWindow + 44
        var (b, ids) = Self.broker(tasks: count)
        var wakes = 0
        var sent = 0
        for id in ids {
            let fx = b.handle(.finished(id: id, outcome: .failed(code: "timedOut", reason: "slow")), world: Self.world(.suspended))
            wakes += Self.delivered(fx).filter { $0.hasPrefix("handleEvents") }.count
            sent += Self.delivered(fx).filter { $0.hasPrefix("didComplete") }.count
        }
        #expect(wakes == 1 && sent == TransferBroker.roundWindow)
        var finishEvents = 0
        for n in 1...count {
            let fx = b.callbackReturned(.urlSessionDidComplete(session: Self.session, taskIdentifier: TransferTaskID(n), errorCode: "timedOut", errorReason: "slow"),
                                        app: Self.app, world: Self.world(.background))
            sent += Self.delivered(fx).filter { $0.hasPrefix("didComplete") }.count
            finishEvents += Self.delivered(fx).filter { $0.hasPrefix("urlSessionDidFinishEvents") }.count
            #expect(sent - n <= TransferBroker.roundWindow)
            #expect(!Self.delivered(fx).contains { $0.hasPrefix("handleEvents") })
        }
        #expect(sent == count && finishEvents == 1)
    }

    /// Events that waited while the app was away reach it when it comes to the front,
    /// with no wake and no handleEvents…; those not sent yet when it leaves again wait for
    /// the session's tasks to be complete.
    @Test func eventsThatWaitedGoToTheAppInFrontAndWaitAgainWhenItLeaves() {
        let count = TransferBroker.roundWindow + 10
        var (b, ids) = Self.broker(tasks: count + 1)
        for id in ids.prefix(count) { _ = b.handle(.finished(id: id, outcome: Self.ok), world: Self.world(.suspended)) }
        var fx = b.appCameToFront(Self.app, world: Self.world(.active))
        #expect(Self.delivered(fx).count == 2 * TransferBroker.roundWindow)
        #expect(Set(Self.delivered(fx).map { $0.split(separator: "/").last! }) == ["ifRunning"])
        #expect(b.callbackReturned(Self.finished(1), app: Self.app, world: Self.world(.active)).filter { if case .mode = $0 { true } else { false } }.count == 2,
                "one returned, the next sent")
        fx = b.appLeftFront(Self.app, world: Self.world(.background))
        #expect(fx.isEmpty && b.rounds.isEmpty, "task \(count + 1) still runs")
        #expect(b.records.values.filter { $0.stage == .waitingForSession }.count == count - TransferBroker.roundWindow - 1)
        fx = b.handle(.finished(id: ids[count], outcome: Self.ok), world: Self.world(.suspended))
        #expect(Self.delivered(fx).first == "handleEventsForBackgroundURLSession/launch(urlSessionEvents)")
        #expect(Self.delivered(fx).count == 1 + 2 * (count - TransferBroker.roundWindow))
    }

    /// A system kill with tasks still running: the finished ones wait on, and the
    /// session's end launches the app for all of them.
    @Test func anAppEndedBySystemIsLaunchedOnceTheSessionsTasksAreComplete() {
        var (b, ids) = Self.broker(tasks: 2)
        _ = b.handle(.finished(id: ids[0], outcome: Self.ok), world: Self.world(.suspended))
        #expect(b.appExited(Self.app, byUser: false).isEmpty)
        #expect(b.records[ids[0]]?.stage == .waitingForSession)
        let fx = b.handle(.finished(id: ids[1], outcome: Self.ok), world: Self.world(.notRunning))
        #expect(Self.delivered(fx) == ["handleEventsForBackgroundURLSession/launch(urlSessionEvents)"]
                + Array(repeating: ["didFinishDownloadingTo/wake", "didCompleteWithError/wake"], count: 2).flatMap { $0 })
    }

    /// Background App Refresh turned off cancels the last running (discretionary) task:
    /// the session's tasks are complete, and the app is woken for those that finished.
    @Test func aSystemCancelOfTheLastRunningTaskReleasesTheOthers() {
        var (b, ids) = Self.broker(tasks: 2)
        _ = b.handle(.finished(id: ids[0], outcome: Self.ok), world: Self.world(.suspended))
        let fx = b.systemCancelled(Self.app, reason: .backgroundUpdatesDisabled, only: { $0.id == ids[1] }, world: Self.world(.suspended))
        #expect(Self.delivered(fx).first == "handleEventsForBackgroundURLSession/launch(urlSessionEvents)")
    }

    @Test func anAppInFrontHearsAtOnceWithoutARound() {
        var (b, ids) = Self.broker(tasks: 1)
        let fx = b.handle(.finished(id: ids[0], outcome: .completed(status: 200, bytes: 10)), world: Self.world(.active))
        #expect(Self.delivered(fx) == ["didFinishDownloadingTo/ifRunning", "didCompleteWithError/ifRunning"])
        #expect(b.rounds.isEmpty)
        #expect(b.callbackReturned(Self.finished(1), app: Self.app, world: Self.world(.active)) == [.deleteTransfers(ids), .daemon(.acknowledge(id: ids[0]))])
    }

    @Test func progressIsCoalescedWhileTheAppHasACallbackInFlight() {
        var (b, ids) = Self.broker(tasks: 1)
        let running = Self.world(.active)
        func progress(_ done: Int64) -> ServiceEvent {
            .urlSessionProgress(session: Self.session, taskIdentifier: 1, bytesDone: done, bytesExpected: 100)
        }
        #expect(b.handle(.progress(id: ids[0], bytesDone: 10, bytesExpected: 100), world: running) == [.progress(app: Self.app, progress(10))])
        #expect(b.handle(.progress(id: ids[0], bytesDone: 20, bytesExpected: 100), world: running).isEmpty)
        #expect(b.handle(.progress(id: ids[0], bytesDone: 30, bytesExpected: 100), world: running).isEmpty)
        #expect(b.callbackReturned(progress(10), app: Self.app, world: running) == [.progress(app: Self.app, progress(30))], "the newest, not a backlog")
        #expect(b.callbackReturned(progress(30), app: Self.app, world: running).isEmpty)
        // Not running code (suspended): no progress at all, but the record follows.
        #expect(b.handle(.progress(id: ids[0], bytesDone: 40, bytesExpected: 100), world: Self.world(.suspended)).isEmpty)
        #expect(b.snapshots(Self.app, Self.session).first?.bytesDone == 40)
    }

    @Test func aUserTerminateCancelsTheAppsTransfers() {
        var (b, ids) = Self.broker(tasks: 2)
        let fx = b.appExited(Self.app, byUser: true)
        let entries = ids.sorted().enumerated().map {
            CancelledTransfer(id: $0.element, bundleIdentifier: Self.app, session: Self.session, taskIdentifier: TransferTaskID($0.offset + 1),
                              kind: .download, url: "http://h/f/\($0.offset + 1)", reason: .userForceQuitApplication)
        }
        // Remembered (not forgotten: TransferCancelledTests follows them to the app).
        #expect(fx == [.saveCancelled(entries, transfers: ids.sorted(), dropped: []), .daemon(.cancelApp(bundleIdentifier: Self.app)),
                       .note(app: Self.app, "terminated by the user: 2 background transfer(s) cancelled; reported (userForceQuitApplication) when the app makes their session again",
                             .init(transfer: .cancelledByUser))])
        #expect(b.records.isEmpty && b.id(app: Self.app, session: Self.session, task: 1) == nil)
        // The session stays: the app makes it again on its next launch.
        #expect(b.sessions[Self.app]?[Self.session] != nil)
    }

    @Test func anAppEndedBySystemMidRoundGetsTheRestWhenItMakesTheSessionAgain() {
        var (b, ids) = Self.broker(tasks: 1)
        _ = b.handle(.finished(id: ids[0], outcome: .completed(status: 200, bytes: 10)), world: Self.world(.suspended))
        #expect(b.appExited(Self.app, byUser: false).isEmpty)
        #expect(b.rounds.isEmpty && b.records[ids[0]]?.stage == .pending)
        let fx = Self.settle(&b, b.request(.urlSessionCreate(BackgroundSessionConfig(identifier: Self.session)), id: 70, from: Self.app,
                                           world: Self.world(.active)))
        #expect(fx.first == .reply(app: Self.app, request: 70, .transferTasks(b.snapshots(Self.app, Self.session))))
        #expect(Self.delivered(fx) == ["didFinishDownloadingTo/ifRunning", "didCompleteWithError/ifRunning"])
    }

    @Test func uninstallForgetsTheSessionsAndTheirTransfers() {
        var (b, ids) = Self.broker(tasks: 2)
        let fx = b.appUninstalled(Self.app)
        #expect(fx == [.deleteAppState(app: Self.app), .daemon(.cancelApp(bundleIdentifier: Self.app)),
                       .note(app: Self.app, "uninstalled: 2 background transfer(s) cancelled", .init(transfer: .cancelledByUninstall))])
        #expect(b.records.isEmpty && b.sessions[Self.app] == nil)
        // A late report of one of them is acknowledged and dropped.
        #expect(b.handle(.finished(id: ids[0], outcome: .completed(status: 200, bytes: 10)), world: Self.world(.notRunning)) == [.daemon(.acknowledge(id: ids[0]))])
        // Its tasks need the session made again.
        let start = b.request(.urlSessionStartTask(session: Self.session, kind: .download, url: "http://h/1", method: "GET", headers: [:], uploadFile: nil),
                              id: 3, from: Self.app, world: Self.world(.active))
        #expect(start == [.reply(app: Self.app, request: 3, .refused(reason: "no background session \"s\" in this process (create it first)"))])
    }

    @Test func aRestartedHostRestoresSessionsAndTransfersAndNumbersOn() {
        let (before, ids) = Self.broker(tasks: 2)
        let jobs = ids.map { before.records[$0]!.job }
        let gone = TransferJob(id: 7, bundleIdentifier: "com.example.gone", session: "x", taskIdentifier: 1, kind: .download, url: "http://h/g",
                               method: "GET", headers: [:], uploadFile: nil, destination: "/c/g", discretionary: false,
                               allowsCellularAccess: true, timeoutForResource: 60, created: 0, resume: nil)
        let rows = [Store.TransferSessionRow(bundleIdentifier: Self.app, config: BackgroundSessionConfig(identifier: Self.session), lastTaskIdentifier: 2)]
        var (b, orphans) = TransferBroker.restored(sessions: rows, jobs: jobs + [gone], installed: [Self.app])
        #expect(orphans == [7])
        #expect(b.snapshots(Self.app, Self.session).map(\.taskIdentifier) == [1, 2])
        // The new daemon says ready: the conditions, then every job it has not accepted.
        #expect(b.handle(.ready(pid: 10, unfinished: 2), world: Self.world(.notRunning)).dropFirst()
            == [.sendConditions] + jobs.map { .daemon(.enqueue($0)) })
        // Transfers that finished while no app ran: a background launch once both have.
        #expect(Self.delivered(b.handle(.finished(id: ids[0], outcome: .completed(status: 200, bytes: 10)), world: Self.world(.notRunning))).isEmpty)
        let fx = b.handle(.finished(id: ids[1], outcome: .completed(status: 200, bytes: 10)), world: Self.world(.notRunning))
        #expect(Self.delivered(fx).first == "handleEventsForBackgroundURLSession/launch(urlSessionEvents)")
        // Numbers go on from the restored counter, ids above the restored ones.
        _ = Self.settle(&b, b.request(.urlSessionStartTask(session: Self.session, kind: .download, url: "http://h/3", method: "GET", headers: [:], uploadFile: nil),
                                      id: 4, from: Self.app, world: Self.world(.active)))
        let third = b.id(app: Self.app, session: Self.session, task: 3)
        #expect(third != nil && third! > ids.max()!)
    }

    @Test func aDaemonThatRestartsIsOfferedTheJobsItHasNotAccepted() {
        var b = TransferBroker(firstID: 100)
        _ = Self.settle(&b, b.request(.urlSessionCreate(BackgroundSessionConfig(identifier: Self.session)), id: 1, from: Self.app, world: Self.world(.active)))
        let fx = Self.settle(&b, b.request(.urlSessionStartTask(session: Self.session, kind: .download, url: "http://h/1", method: "GET", headers: [:], uploadFile: nil),
                                           id: 2, from: Self.app, world: Self.world(.active)))
        #expect(!fx.contains { if case .daemon = $0 { true } else { false } }, "no daemon ready: the job waits")
        let job = b.records.values.first!.job
        #expect(b.handle(.ready(pid: 3, unfinished: 0), world: Self.world(.active)).dropFirst() == [.sendConditions, .daemon(.enqueue(job))])
        _ = b.handle(.accepted(id: job.id), world: Self.world(.active))
        b.daemonGone()
        #expect(!b.ready)
        #expect(b.handle(.ready(pid: 4, unfinished: 1), world: Self.world(.active)).dropFirst() == [.sendConditions], "accepted: not sent again")
    }

    /// A cancel asked while the daemon is starting reaches nobody then, and the job is
    /// sent once it is ready: the cancel follows the job (the flake of
    /// `aCancelRightAfterResumeComesAfterItsTask` in loaded runs: the download completed).
    @Test func aCancelWhileTheDaemonStartsFollowsTheJobOnceItIsReady() {
        var b = TransferBroker(firstID: 100)
        _ = Self.settle(&b, b.request(.urlSessionCreate(BackgroundSessionConfig(identifier: Self.session)), id: 1, from: Self.app, world: Self.world(.active)))
        _ = Self.settle(&b, b.request(.urlSessionStartTask(session: Self.session, kind: .download, url: "http://h/1", method: "GET", headers: [:], uploadFile: nil),
                                      id: 2, from: Self.app, world: Self.world(.active)))
        let job = b.records.values.first!.job
        let cancel = b.request(.urlSessionCancel(session: Self.session, taskIdentifier: 1, produceResumeData: false), id: 3, from: Self.app, world: Self.world(.active))
        #expect(!cancel.contains { if case .daemon = $0 { true } else { false } }, "nothing reaches a daemon that is not ready")
        #expect(cancel.contains(.reply(app: Self.app, request: 3, .ok)))
        let ready = b.handle(.ready(pid: 3, unfinished: 0), world: Self.world(.active)).dropFirst()
        #expect(Array(ready) == [.sendConditions, .daemon(.enqueue(job)), .daemon(.cancel(id: job.id))], "the job, then its cancel")
        // A second sync (the connection attached after `ready`) sends both again; once
        // the daemon accepted the job, neither.
        #expect(b.sync() == [.sendConditions, .daemon(.enqueue(job)), .daemon(.cancel(id: job.id))])
        _ = b.handle(.accepted(id: job.id), world: Self.world(.active))
        #expect(b.sync() == [.sendConditions])
    }

    @Test func theRoundsDeadlineKillsOnlyAnAppStillHoldingItsActivity() {
        let b = TransferBroker()
        #expect(b.roundTimedOut(app: Self.app, session: Self.session, activityHeld: false, timeout: "30s").isEmpty)
        let fx = b.roundTimedOut(app: Self.app, session: Self.session, activityHeld: true, timeout: "30s")
        guard case .mode(.kill(_, _, let code, _)) = fx.first else {
            Issue.record("no kill: \(fx)")
            return
        }
        #expect(code == .backgroundURLSessionTimeout)
    }

    @Test func anOutcomeIsWrittenAsItsDescription() {
        for outcome in [TransferOutcome.completed(status: 200, bytes: 1234), .completed(status: 404, bytes: 0),
                        .failed(code: "cannotConnectToHost", reason: "refused"), .cancelled] {
            #expect(TransferBroker.text(of: outcome) == String(describing: outcome))
        }
    }
}
