import AppHostProtocol
import Foundation
import Plugins

extension Supervisor {
    /// One message from an app's connection (in the order it was read): the handshake,
    /// a callback's return, its window, its background tasks and requests.
    func handleMessage(_ id: BundleID, _ message: AppMessage) {
        // Scalars, not a copy of the runtime: a copy alive while `pending` is changed below
        // would make the table copy itself on every callback's return.
        // (Each through `?.`: `processes[id].map { ... }` copied the whole runtime.)
        guard let connected = processes[id]?.machine.connected else { return }
        let machine = (connected: connected, state: processes[id]?.machine.state ?? .notRunning)
        let pid = processes[id]?.pid
        // The host has sent this process SIGKILL: what it says after that (already in the
        // socket, or written before the signal landed) no longer counts, as nothing of a
        // killed app does on iOS. Without this, whether a callback the app returned while
        // the kill was on its way shows in the log depended on the race.
        if processes[id]?.machine.killSent == true { return }
        switch message {
        case .hello(let version, _):
            guard version == IPCProtocol.version else {
                send(id, .rejected(reason: "AppHost speaks IPC version \(IPCProtocol.version), the app speaks \(version); rebuild it against this AppKitLess"))
                feed(id, .protocolViolation("IPC version \(version) is not supported"))
                return
            }
            guard !machine.connected else {
                feed(id, .protocolViolation("second hello"))
                return
            }
            // The connection's handler answered it where it read it (see HelloAnswer),
            // through the runtime's writer; without one, the answer is the actor's.
            if processes[id]?.helloAnswer?.answered != true {
                send(id, .welcome(version: IPCProtocol.version, bundleIdentifier: id.rawValue, screen: configuration.screen))
            }
            feed(id, .handshake)
        case _ where !machine.connected:
            feed(id, .protocolViolation("message before hello"))
        case .callbackReturned(let seq):
            guard let callback = processes[id]?.pending.removeValue(forKey: seq) else {
                feed(id, .protocolViolation("callbackReturned for unknown callback \(seq)"))
                return
            }
            // willTerminate returned: the settle rules wait for the exit it brings.
            if processes[id]?.machine.terminating != nil { processes.watch(id, for: .settle) }
            if case .service(.timerFired(let timer)) = callback {
                // A timer's fire leaves no line (a repeating one would flood the log) and
                // concerns no plugin, transfer or snapshot.
                feed(id, .callbackReturned(callback))
                appTimerReturned(id, timer: timer)
                return
            }
            if case .service(.urlSessionProgress) = callback {
                // Progress leaves no line: a large download has thousands.
            } else {
                events.append(.callback, app: id, pid: pid, cause: "\(callback.name) returned", fields: callbackFields(callback, app: id), time: now())
            }
            feed(id, .callbackReturned(callback))
            snapshotAfterCallback(callback, app: id)
            if case .service(let event) = callback {
                transferCallbackReturned(event, app: id)
                performMode(modes.callbackReturned(event, app: id, at: hostNow()))
            }
        case .viewTree(let tree):
            processes[id]?.viewTree = tree
        case .ignoreSnapshotOnNextApplicationLaunch:
            processes[id]?.ignoreSnapshotsUntilActive = true
        case .beginBackgroundTask(let taskID, let rawName):
            let name = configuration.bounds.taskName(rawName)
            events.append(.backgroundTask, app: id, pid: pid,
                          cause: "beginBackgroundTask \(name.map { "\"\($0)\"" } ?? "") id \(taskID)",
                          fields: .init(task: taskID, taskName: name, began: true), time: now())
            feed(id, .taskBegan(id: taskID, name: name))
        case .endBackgroundTask(let taskID):
            events.append(.backgroundTask, app: id, pid: pid, cause: "endBackgroundTask id \(taskID)",
                          fields: .init(task: taskID, taskName: processes[id]?.machine.tasks[taskID]?.name, began: false), time: now())
            feed(id, .taskEnded(id: taskID))
        case .request(let requestID, .backgroundTimeRemaining):
            send(id, .reply(id: requestID, reply: .backgroundTimeRemaining(seconds: processes[id]?.machine.timeRemaining(at: hostNow()) ?? 0)))
        case .request(let requestID, .service(.timerSchedule(let timer, let seconds, let repeats))):
            send(id, .reply(id: requestID, reply: .service(scheduleAppTimer(id, timer: timer, seconds: seconds, repeats: repeats))))
        case .invalidateTimer(let timer):
            invalidateAppTimer(id, timer: timer)
        case .memoryFootprintChanged:
            memoryCue(id)
        case .uncaughtException(let exception):
            feed(id, .exceptionRaised(exception))
        case .request(let requestID, .service(let request)):
            if transferRequest(request, id: requestID, from: id) { return }
            let (reply, effects) = modes.request(request, from: id, at: hostNow())
            // The answer first: the app is blocked on it, and an effect may kill it.
            send(id, .reply(id: requestID, reply: .service(reply)))
            if case .refused(let reason) = reply {
                events.append(.service, app: id, pid: pid, cause: "\(request.apiName) refused: \(reason)", time: now())
            } else if case .raise(let exception) = reply {
                events.append(.service, app: id, pid: pid, cause: "\(request.apiName) refused: a programmer error, iOS raises \(exception.name)", time: now())
            }
            // The plugin's lines that lead its effects ("fetch 3 completed: newData") go to
            // the log first; then the picture, before the other effects: ending the fetch's
            // activity may suspend the app. On the virtual clock the picture is drawn in
            // line, and the log must still read completion, then picture.
            let lines = effects.prefix(while: \.isLogLine).count
            performMode(Array(effects.prefix(lines)))
            snapshotAfterCompletion(request, reply: reply, app: id, state: machine.state)
            performMode(Array(effects.dropFirst(lines)))
        }
    }
}

extension Supervisor {
    /// A returned callback's typed fields: the delegate method, and what it was about
    /// (the background task whose expiration handler ran, the BGTask, fetch or push
    /// number it was sent for), so readers and expectations need not parse `cause`.
    func callbackFields(_ callback: LifecycleCallback, app id: BundleID) -> HostEvent.Fields {
        var fields = HostEvent.Fields(callback: callback.name)
        switch callback {
        case .backgroundTaskExpiration(let taskID):
            fields.task = taskID
            fields.taskName = processes[id]?.machine.tasks[taskID]?.name
        case .service(.bgTaskLaunch(let identifier, _)), .service(.bgTaskExpire(let identifier)):
            fields.bgTask = identifier
        case .service(.performFetch(let fetch)):
            fields.fetch = fetch
        case .service(.remoteNotification(let push, _, _)):
            fields.push = push
        case .service(.urlSessionDidFinishDownloading(let session, let task, _)),
             .service(.urlSessionProgress(let session, let task, _, _)),
             .service(.urlSessionResumeData(let session, let task, _)):
            fields.session = session
            fields.transferTask = task
        case .service(.urlSessionDidComplete(let session, let task, let errorCode, _, _)):
            fields.session = session
            fields.transferTask = task
            fields.success = errorCode == nil
        case .service(.urlSessionHandleEvents(let session)), .service(.urlSessionDidFinishEvents(let session)):
            fields.session = session
        default:
            break
        }
        return fields
    }
}
