import AppHostProtocol
@testable import AppKitLess
import Dispatch
import Foundation
import Synchronization
import Testing

/// An application delegate whose handleEvents creates the session (when told)
/// and keeps or calls the completion.
@MainActor
private final class EventsAppDelegate: ApplicationDelegate {
    /// Call the completion inside the method.
    var completeAtOnce = false
    /// Make a session with this delegate in handleEvents, if none is alive.
    var sessionDelegate: SessionRecorder?
    var router: ServiceRouter?
    var sessions: [BackgroundURLSession] = []
    var completions: [@Sendable () -> Void] = []
    var calls: [String] = []

    func handleEventsForBackgroundURLSession(_ application: Application, identifier: String,
                                             completion: @escaping @Sendable () -> Void) {
        calls.append("handleEvents \(identifier) state=\(application.applicationState)")
        if let sessionDelegate, let router, router.urlSession(identifier) == nil {
            sessions.append(BackgroundURLSession(configuration: .background(withIdentifier: identifier),
                                                 delegate: sessionDelegate, router: router))
        }
        if completeAtOnce { completion() } else { completions.append(completion) }
    }
}

@MainActor
private final class DefaultAppDelegate: ApplicationDelegate {}

/// A session delegate that records every call and, when told, moves downloads.
@MainActor
private final class SessionRecorder: BackgroundURLSessionDelegate {
    var lines: [String] = []
    /// Where to move a finished download (nil: leave it).
    var moveTo: URL?
    var movedBytes: Data?
    /// The errors didCompleteWithError was given, in order.
    var errors: [BackgroundURLSessionError] = []

    func urlSession(_ session: BackgroundURLSession, downloadTask: BackgroundURLSessionTask, didWriteData bytesWritten: Int64,
                    totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        lines.append("\(session.identifier) write task=\(downloadTask.taskIdentifier) +\(bytesWritten) \(totalBytesWritten)/\(totalBytesExpectedToWrite)")
    }

    func urlSession(_ session: BackgroundURLSession, task: BackgroundURLSessionTask, didSendBodyData bytesSent: Int64,
                    totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        lines.append("\(session.identifier) send task=\(task.taskIdentifier) +\(bytesSent) \(totalBytesSent)/\(totalBytesExpectedToSend)")
    }

    func urlSession(_ session: BackgroundURLSession, downloadTask: BackgroundURLSessionTask, didFinishDownloadingTo location: URL) {
        lines.append("\(session.identifier) finished task=\(downloadTask.taskIdentifier) exists=\(FileManager.default.fileExists(atPath: location.path))")
        if let moveTo {
            try? FileManager.default.moveItem(at: location, to: moveTo)
            movedBytes = FileManager.default.contents(atPath: moveTo.path)
        }
    }

    func urlSession(_ session: BackgroundURLSession, task: BackgroundURLSessionTask, didCompleteWithError error: BackgroundURLSessionError?) {
        lines.append("\(session.identifier) complete task=\(task.taskIdentifier) state=\(task.state) error=\(error.map { "\($0)" } ?? "nil")")
        if let error { errors.append(error) }
    }

    func urlSessionDidFinishEvents(forBackgroundURLSession session: BackgroundURLSession) {
        lines.append("\(session.identifier) didFinishEvents")
    }
}

/// An application with its own service router over a socketpair whose host end the test drives.
private typealias URLFixture<D: ApplicationDelegate & Sendable> = AppHarness<D, URLExtras>

private struct URLExtras: Sendable {
    let router: ServiceRouter
}

private extension AppHarness where Extra == URLExtras {
    init(_ make: @escaping @MainActor @Sendable () -> Delegate) async throws {
        try await self.init { connection, effects in
            let delegate = make()
            let router = ServiceRouter()
            let app = Application(bundleIdentifier: "com.example.transfers", delegate: delegate, connection: connection,
                                  effects: effects, services: router)
            return (delegate, app, URLExtras(router: router))
        }
    }

    /// Sends event callback `seq` and expects its acknowledgement next.
    func deliver(seq: UInt64, _ event: ServiceEvent, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try host.send(.callback(seq: seq, callback: .service(event), state: .background))
        #expect(try await host.receive() == .callbackReturned(seq: seq), sourceLocation: sourceLocation)
    }

    /// Makes session `identifier` on the main queue, answering its urlSessionCreate
    /// request `id` with `tasks`.
    @discardableResult
    func makeSession(_ identifier: String, id: UInt64, tasks: [TransferTaskSnapshot] = [],
                     delegate: SessionRecorder, configure: @escaping @Sendable (inout BackgroundURLSessionConfiguration) -> Void = { _ in },
                     sourceLocation: SourceLocation = #_sourceLocation) async throws -> BackgroundURLSession {
        let router = self.router
        var configuration = BackgroundURLSessionConfiguration.background(withIdentifier: identifier)
        configure(&configuration)
        let made = configuration
        let call = MainQueueCall { BackgroundURLSession(configuration: made, delegate: delegate, router: router) }
        #expect(try await host.receive(replying: .reply(id: id, reply: .service(.transferTasks(tasks)))) == .request(id: id, request: .service(.urlSessionCreate(made.protocolValue))), sourceLocation: sourceLocation)
        return await call.value
    }
}


private func temporaryFile(_ contents: String) throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("akl-urlsession-\(UUID().uuidString)")
    try Data(contents.utf8).write(to: url)
    return url
}

@Suite("Background URLSession", .serialized, .timeLimit(.minutes(3)))
struct URLSessionTests {
    @Test("the configuration defaults are iOS's; making a session sends urlSessionCreate and adopts the host's tasks; getAllTasks keeps task identity")
    func create() async throws {
        let fixture = try await URLFixture { DefaultAppDelegate() }
        defer { fixture.tearDown() }
        let host = fixture.host
        let recorder = SessionRecorder()

        let defaults = BackgroundURLSessionConfiguration.background(withIdentifier: "d")
        #expect(defaults.sessionSendsLaunchEvents && !defaults.isDiscretionary && defaults.allowsCellularAccess)
        #expect(defaults.timeoutIntervalForResource == 7 * 86400)

        let earlier = [
            TransferTaskSnapshot(taskIdentifier: 4, kind: .download, url: "https://example.com/a", state: .running, bytesDone: 10, bytesExpected: 100),
            TransferTaskSnapshot(taskIdentifier: 5, kind: .upload, url: "https://example.com/b", state: .waiting, bytesDone: 0, bytesExpected: nil),
        ]
        let session = try await fixture.makeSession("com.x.bg", id: 1, tasks: earlier, delegate: recorder) {
            $0.isDiscretionary = true
            $0.allowsCellularAccess = false
            $0.timeoutIntervalForResource = 60
        }
        #expect(session.configuration.protocolValue == BackgroundSessionConfig(identifier: "com.x.bg", isDiscretionary: true, timeoutIntervalForResource: 60, allowsCellularAccess: false))

        let list = MainQueueCall { session.getAllTasks() }
        #expect(try await host.receive(replying: .reply(id: 2, reply: .service(.transferTasks([earlier[0]])))) == .request(id: 2, request: .service(.urlSessionTasks(session: "com.x.bg"))))
        let tasks = await list.value
        await MainActor.run {
            #expect(tasks.map(\.taskIdentifier) == [4])
            #expect(tasks[0].kind == .download && tasks[0].state == .running && tasks[0].countOfBytesReceived == 10)
            #expect(tasks[0].countOfBytesExpectedToReceive == 100 && tasks[0].url.absoluteString == "https://example.com/a")
        }
        let again = MainQueueCall { session.getAllTasks() }
        #expect(try await host.receive(replying: .reply(id: 3, reply: .service(.transferTasks([earlier[0]])))) == .request(id: 3, request: .service(.urlSessionTasks(session: "com.x.bg"))))
        let second = await again.value
        #expect(await MainActor.run { second.first === tasks.first })

        // A second live session with the identifier: iOS's warning, no events.
        let other = SessionRecorder()
        let duplicate = try await fixture.makeSession("com.x.bg", id: 4, delegate: other)
        #expect(await MainActor.run { !duplicate.isRegistered && session.isRegistered })
        try await fixture.deliver(seq: 1, .urlSessionDidFinishEvents(session: "com.x.bg"))
        #expect(await MainActor.run { (recorder.lines, other.lines) } == (["com.x.bg didFinishEvents"], []))
        try await fixture.expectQuiet()
        #expect(fixture.recorder.log == ["A background URLSession with identifier com.x.bg already exists! This one receives no events."])
        _ = await MainActor.run { (session, duplicate) }
    }

    @Test("tasks start suspended; resume sends urlSessionStartTask (method, headers, upload file) and takes the identifier; cancel sends urlSessionCancel")
    func startAndCancel() async throws {
        let fixture = try await URLFixture { DefaultAppDelegate() }
        defer { fixture.tearDown() }
        let host = fixture.host
        let recorder = SessionRecorder()
        let session = try await fixture.makeSession("s", id: 1, delegate: recorder)

        let download = await MainActor.run { session.downloadTask(with: URL(string: "https://example.com/file.bin")!) }
        #expect(await MainActor.run { download.state == .suspended && download.taskIdentifier == 0 })
        try await fixture.expectQuiet()

        let resume = MainQueueCall { download.resume() }
        #expect(try await host.receive(replying: .reply(id: 2, reply: .service(.transferTaskCreated(taskIdentifier: 7))))
                == .request(id: 2, request: .service(.urlSessionStartTask(
            session: "s", kind: .download, url: "https://example.com/file.bin", method: "GET", headers: [:], uploadFile: nil))))
        await resume.value
        #expect(await MainActor.run { download.state == .running && download.taskIdentifier == 7 })

        let upload = await MainActor.run {
            var request = BackgroundURLRequest(url: URL(string: "https://example.com/up")!)
            request.httpMethod = "PUT"
            request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
            return session.uploadTask(with: request, fromFile: URL(fileURLWithPath: "/c/Documents/up.txt"))
        }
        let resumeUpload = MainQueueCall { upload.resume() }
        #expect(try await host.receive(replying: .reply(id: 3, reply: .service(.transferTaskCreated(taskIdentifier: 8))))
                == .request(id: 3, request: .service(.urlSessionStartTask(
            session: "s", kind: .upload, url: "https://example.com/up", method: "PUT",
            headers: ["Content-Type": "text/plain"], uploadFile: "/c/Documents/up.txt"))))
        await resumeUpload.value
        #expect(await MainActor.run { upload.kind == .upload && upload.taskIdentifier == 8 })

        let cancel = MainQueueCall { download.cancel() }
        #expect(try await host.receive(replying: .reply(id: 4, reply: .service(.ok))) == .request(id: 4, request: .service(.urlSessionCancel(session: "s", taskIdentifier: 7, produceResumeData: false))))
        await cancel.value
        #expect(await MainActor.run { download.state == .canceling })

        let resumeData = Mutex<Data??>(nil)
        let cancelWithData = MainQueueCall { upload.cancel(byProducingResumeData: { data in resumeData.withLock { $0 = .some(data) } }) }
        #expect(try await host.receive(replying: .reply(id: 5, reply: .service(.ok))) == .request(id: 5, request: .service(.urlSessionCancel(session: "s", taskIdentifier: 8, produceResumeData: true))))
        await cancelWithData.value
        try await fixture.expectQuiet()
        #expect(resumeData.withLock { $0 } == nil, "the resume data comes once the daemon has stopped the transfer")
        try await fixture.deliver(seq: 3, .urlSessionResumeData(session: "s", taskIdentifier: 8, data: Data([1, 2, 3])))
        #expect(resumeData.withLock { $0 } == .some(Data([1, 2, 3])))

        // The host's cancellation arrives as didComplete(cancelled).
        try await fixture.deliver(seq: 4, .urlSessionDidComplete(session: "s", taskIdentifier: 7, errorCode: "cancelled", errorReason: "cancelled by the app"))
        #expect(await MainActor.run { download.state == .completed && download.error?.code == .cancelled })

        // Cancelling a task never resumed completes it here, without asking the host.
        let never = await MainActor.run { session.downloadTask(with: URL(string: "https://example.com/n")!) }
        let cancelNever = MainQueueCall { never.cancel() }
        await cancelNever.value
        // A refused resume completes the task with the refusal, after resume returns.
        let bad = await MainActor.run { session.downloadTask(with: URL(string: "ftp://example.com/x")!) }
        let resumeBad = MainQueueCall { bad.resume() }
        guard case .request(6, .service(.urlSessionStartTask(_, .download, "ftp://example.com/x", _, _, _))) = try await host.receive() else {
            Issue.record("expected the ftp start request")
            return
        }
        try host.send(.reply(id: 6, reply: .service(.refused(reason: "only http and https URLs can be transferred"))))
        await resumeBad.value
        try await fixture.expectQuiet()
        #expect(await MainActor.run { recorder.lines } == [
            "s complete task=7 state=completed error=cancelled: cancelled by the app",
            "s complete task=0 state=completed error=cancelled: cancelled before it was resumed",
            "s complete task=0 state=completed error=refused: only http and https URLs can be transferred",
        ])
        #expect(fixture.recorder.log == ["URLSession.downloadTask (ftp://example.com/x): refused: only http and https URLs can be transferred"])

        // downloadTask(withResumeData:) hands the data back to the host as it is; the
        // task shows the URL the data names.
        let data = try PropertyListSerialization.data(
            fromPropertyList: ["NSURLSessionDownloadURL": "https://example.com/file.bin", "NSURLSessionResumeBytesReceived": 10],
            format: .xml, options: 0)
        let resumed = await MainActor.run { session.downloadTask(withResumeData: data) }
        #expect(await MainActor.run { resumed.url.absoluteString == "https://example.com/file.bin" && resumed.state == .suspended })
        let resumeResumed = MainQueueCall { resumed.resume() }
        #expect(try await host.receive(replying: .reply(id: 7, reply: .service(.transferTaskCreated(taskIdentifier: 9)))) == .request(id: 7, request: .service(.urlSessionResumeTask(session: "s", resumeData: data))))
        await resumeResumed.value
        #expect(await MainActor.run { resumed.taskIdentifier == 9 && resumed.state == .running })
    }

    @Test("progress, finished downloads, completions and didFinishEvents reach the session's delegate on the main queue before the acknowledgement")
    func eventsRouted() async throws {
        let fixture = try await URLFixture { DefaultAppDelegate() }
        defer { fixture.tearDown() }
        let recorder = SessionRecorder()
        let tasks = [
            TransferTaskSnapshot(taskIdentifier: 1, kind: .download, url: "https://e.com/1", state: .running, bytesDone: 0, bytesExpected: nil),
            TransferTaskSnapshot(taskIdentifier: 2, kind: .upload, url: "https://e.com/2", state: .running, bytesDone: 0, bytesExpected: 50),
        ]
        let session = try await fixture.makeSession("s", id: 1, tasks: tasks, delegate: recorder)
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("akl-moved-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        await MainActor.run { recorder.moveTo = destination }
        let location = try temporaryFile("payload")

        try await fixture.deliver(seq: 1, .urlSessionProgress(session: "s", taskIdentifier: 1, bytesDone: 10, bytesExpected: 100))
        try await fixture.deliver(seq: 2, .urlSessionProgress(session: "s", taskIdentifier: 1, bytesDone: 30, bytesExpected: nil))
        try await fixture.deliver(seq: 3, .urlSessionProgress(session: "s", taskIdentifier: 2, bytesDone: 50, bytesExpected: 50))
        try await fixture.deliver(seq: 4, .urlSessionDidFinishDownloading(session: "s", taskIdentifier: 1, location: location.path))
        try await fixture.deliver(seq: 5, .urlSessionDidComplete(session: "s", taskIdentifier: 1, errorCode: nil, errorReason: nil))
        try await fixture.deliver(seq: 6, .urlSessionDidComplete(session: "s", taskIdentifier: 2, errorCode: "timedOut", errorReason: "the resource timeout ran out"))
        try await fixture.deliver(seq: 7, .urlSessionDidFinishEvents(session: "s"))
        // Another session's events are held, not given to this one.
        try await fixture.deliver(seq: 8, .urlSessionDidFinishEvents(session: "other"))

        #expect(await MainActor.run { recorder.lines } == [
            "s write task=1 +10 10/100",
            "s write task=1 +20 30/-1",
            "s send task=2 +50 50/50",
            "s finished task=1 exists=true",
            "s complete task=1 state=completed error=nil",
            "s complete task=2 state=completed error=timedOut: the resource timeout ran out",
            "s didFinishEvents",
        ])
        #expect(await MainActor.run { recorder.movedBytes } == Data("payload".utf8))
        #expect(!FileManager.default.fileExists(atPath: location.path))
        // Completed tasks are no longer the session's.
        let list = MainQueueCall { session.getAllTasks() }
        #expect(try await fixture.host.receive() == .request(id: 2, request: .service(.urlSessionTasks(session: "s"))))
        try fixture.host.send(.reply(id: 2, reply: .service(.transferTasks([]))))
        #expect(await list.value.isEmpty)
        #expect(fixture.recorder.log == ["urlSessionDidFinishEvents(other): no BackgroundURLSession with identifier other exists yet; the event is held until the app makes it"])
    }

    @Test("a download not moved in didFinishDownloadingTo is deleted when the method returns, with a line to stderr")
    func downloadMustBeMoved() async throws {
        let fixture = try await URLFixture { DefaultAppDelegate() }
        defer { fixture.tearDown() }
        let recorder = SessionRecorder()
        let session = try await fixture.makeSession("s", id: 1, delegate: recorder)
        let location = try temporaryFile("lost")

        try await fixture.deliver(seq: 1, .urlSessionDidFinishDownloading(session: "s", taskIdentifier: 3, location: location.path))
        #expect(!FileManager.default.fileExists(atPath: location.path))
        #expect(await MainActor.run { recorder.lines } == ["s finished task=3 exists=true"])
        #expect(fixture.recorder.log == ["urlSession(_:downloadTask:didFinishDownloadingTo:) returned without moving \(location.path) (task 3, session s); the file is deleted"])
        _ = await MainActor.run { session }
    }

    @Test("handleEvents: the default calls the completion at once (sent before the acknowledgement); a kept one is sent when called, once")
    func handleEventsCompletion() async throws {
        let fixture = try await URLFixture { DefaultAppDelegate() }
        defer { fixture.tearDown() }
        let host = fixture.host
        try host.send(.callback(seq: 1, callback: .service(.urlSessionHandleEvents(session: "s")), state: .background))
        #expect(try await host.receive(replying: .reply(id: 1, reply: .service(.ok))) == .request(id: 1, request: .service(.urlSessionEventsCompleted(session: "s"))))
        #expect(try await host.receive() == .callbackReturned(seq: 1))
        try await fixture.expectQuiet()
        #expect(fixture.recorder.log.isEmpty)

        let kept = try await URLFixture { EventsAppDelegate() }
        defer { kept.tearDown() }
        let keptDelegate = kept.delegate
        try await kept.deliver(seq: 1, .urlSessionHandleEvents(session: "t"))
        let completion = try #require(await MainActor.run { keptDelegate.completions.first })
        let later = StartedThread { completion() }
        #expect(try await kept.host.receive() == .request(id: 1, request: .service(.urlSessionEventsCompleted(session: "t"))))
        try kept.host.send(.reply(id: 1, reply: .service(.ok)))
        try await later.value
        completion()
        try await kept.expectQuiet()
        #expect(await MainActor.run { keptDelegate.calls } == ["handleEvents t state=background"])
        #expect(kept.recorder.log == ["The handleEventsForBackgroundURLSession completion handler (session t) was called more than once; the call is ignored"])
    }

    @Test("events for a session not made yet are acknowledged at once, held, and delivered in order once the app makes it (in handleEvents too)")
    func heldEvents() async throws {
        let fixture = try await URLFixture { EventsAppDelegate() }
        defer { fixture.tearDown() }
        let recorder = SessionRecorder()

        try await fixture.deliver(seq: 1, .urlSessionProgress(session: "late", taskIdentifier: 9, bytesDone: 5, bytesExpected: 10))
        try await fixture.deliver(seq: 2, .urlSessionDidComplete(session: "late", taskIdentifier: 9, errorCode: nil, errorReason: nil))
        try await fixture.deliver(seq: 3, .urlSessionDidFinishEvents(session: "late"))
        #expect(fixture.recorder.log.count == 3)
        let session = try await fixture.makeSession("late", id: 1, delegate: recorder)
        try await fixture.expectQuiet()
        #expect(await MainActor.run { recorder.lines } == [
            "late write task=9 +5 5/10",
            "late complete task=9 state=completed error=nil",
            "late didFinishEvents",
        ])
        _ = await MainActor.run { session }

        // The usual relaunch: handleEvents makes the session; a held event then goes
        // first, before the next one, even if the main queue has not flushed it yet.
        let other = SessionRecorder()
        let router = fixture.router, delegate = fixture.delegate
        await MainActor.run {
            delegate.sessionDelegate = other
            delegate.router = router
            delegate.completeAtOnce = true
        }
        try await fixture.deliver(seq: 5, .urlSessionDidComplete(session: "relaunch", taskIdentifier: 1, errorCode: nil, errorReason: nil))
        try fixture.host.send(.callback(seq: 6, callback: .service(.urlSessionHandleEvents(session: "relaunch")), state: .background))
        #expect(try await fixture.host.receive() == .request(id: 2, request: .service(.urlSessionCreate(BackgroundSessionConfig(identifier: "relaunch")))))
        try fixture.host.send(.reply(id: 2, reply: .service(.transferTasks([]))))
        #expect(try await fixture.host.receive() == .request(id: 3, request: .service(.urlSessionEventsCompleted(session: "relaunch"))))
        try fixture.host.send(.reply(id: 3, reply: .service(.ok)))
        #expect(try await fixture.host.receive() == .callbackReturned(seq: 6))
        try await fixture.deliver(seq: 7, .urlSessionDidFinishEvents(session: "relaunch"))
        try await fixture.expectQuiet()
        #expect(await MainActor.run { other.lines } == [
            "relaunch complete task=1 state=completed error=nil",
            "relaunch didFinishEvents",
        ])
    }

    @Test("a task the system cancelled completes with NSURLErrorCancelled and NSURLErrorBackgroundTaskCancelledReasonKey, as URLError has them")
    func cancelledBySystem() async throws {
        let fixture = try await URLFixture { DefaultAppDelegate() }
        defer { fixture.tearDown() }
        let recorder = SessionRecorder()
        let session = try await fixture.makeSession("s", id: 1, delegate: recorder)
        for (seq, reason) in [(UInt64(2), BackgroundTaskCancelledReason.userForceQuitApplication), (3, .backgroundUpdatesDisabled)] {
            try await fixture.deliver(seq: seq, .urlSessionDidComplete(session: "s", taskIdentifier: TransferTaskID(Int(seq)), errorCode: "cancelled",
                                                                errorReason: "cancelled by the system", cancelledReason: reason))
        }
        try await fixture.deliver(seq: 4, .urlSessionDidComplete(session: "s", taskIdentifier: 4, errorCode: "cancelled", errorReason: "cancelled"))
        try await fixture.expectQuiet()
        let errors = await MainActor.run { recorder.errors }
        #expect(errors.map(\.backgroundTaskCancelledReason) == [.userForceQuitApplication, .backgroundUpdatesDisabled, nil])
        #expect(errors.map(\.errorCode) == [NSURLErrorCancelled, NSURLErrorCancelled, NSURLErrorCancelled])
        let keys = errors.map { $0.urlError.userInfo[NSURLErrorBackgroundTaskCancelledReasonKey] as? Int }
        #expect(keys == [NSURLErrorCancelledReasonUserForceQuitApplication, NSURLErrorCancelledReasonBackgroundUpdatesDisabled, nil])
        #expect(errors.first?.urlError.code == .cancelled)
        #expect(BackgroundURLSessionError(.init(rawValue: "somethingNew"), reason: "x").errorCode == NSURLErrorUnknown)
        withExtendedLifetime(session) {}
    }
}
