import AppHostProtocol
import Foundation
import Plugins

/// Carrying out what the mode plugins ask (``ModeEffect``): their effects are queued
/// while a plugin step runs and performed in order afterwards, so a plugin never sees
/// the host re-enter it.
extension Supervisor {
    /// Carries out what the plugins asked for. During a feed, waits until it is done
    /// (a plugin reacting to a state change acts once that change is complete).
    func performMode(_ effects: [ModeEffect]) {
        for effect in scope.modeEffects(effects) {
            performMode(effect)
        }
    }

    /// The pid of `app`'s process while it has one: an event about an app that is not
    /// running (a refused push, a note) names no pid, not that of its dead process.
    func livePID(_ app: BundleID) -> Int32? {
        guard let rt = processes[app], rt.machine.isRunning else { return nil }
        return rt.pid
    }

    func performMode(_ effect: ModeEffect) {
        switch effect {
        case .deliver(let app, let event, let wake, let because):
            // Looked up, not copied: the row is needed only for a launch.
            guard apps.index(forKey: app) != nil else { return }
            var launch: LaunchReason?
            if case .launch(let reason) = wake { launch = reason }
            if processes[app]?.machine.isRunning != true {
                guard let launch, !shuttingDown, let row = apps[app] else {
                    events.append(.service, app: app, cause: "\(event.name) not delivered: the app is not running (\(because))", time: now())
                    return
                }
                makeRuntime(app, row)
                events.append(.service, app: app, cause: "launching in the background for \(event.name) (\(because))", time: now())
                feed(app, .deliver(event, wake: true, launch: launch))
                return
            }
            events.append(.service, app: app, pid: livePID(app), cause: "\(event.name) (\(because))", time: now())
            feed(app, .deliver(event, wake: wake != .ifRunning, launch: launch))
        case .beginActivity(let app, let name):
            guard processes[app]?.machine.isRunning == true, processes[app]?.machine.activities.contains(name) == false else { return }
            events.append(.service, app: app, pid: livePID(app), cause: "activity began: \(name) (keeps the app running in the background)", time: now())
            feed(app, .activityBegan(name))
        case .endActivity(let app, let name):
            guard processes[app]?.machine.activities.contains(name) == true else { return }
            events.append(.service, app: app, pid: livePID(app), cause: "activity ended: \(name)", time: now())
            feed(app, .activityEnded(name))
        case .kill(let app, let namespace, let code, let reason):
            guard processes[app]?.machine.isRunning == true else { return }
            events.append(.warning, app: app, pid: livePID(app), cause: "killing: \(reason)", time: now())
            feed(app, .modeViolation(Lifecycle.TerminationRecord(namespace: namespace, code: code, reason: reason)))
        case .startTimer(let app, let timer, let after):
            startHostTimer(.plugin(timer), app: app, after: after)
        case .cancelTimer(let app, let timer):
            cancelHostTimer(.plugin(timer), app: app)
        case .used(let app, let mode, let what):
            events.append(.modeUsed, app: app, pid: livePID(app), cause: what, mode: mode, time: now())
        case .refused(let app, let mode, let what):
            events.append(.modeRefused, app: app, pid: livePID(app),
                          cause: "\(what): needs \"\(mode.rawValue)\" in UIBackgroundModes", mode: mode, time: now())
        case .refusedBecause(let app, let mode, let what, let because):
            events.append(.modeRefused, app: app, pid: livePID(app), cause: "\(what): \(because)", mode: mode, time: now())
        case .note(let app, let text):
            events.append(.service, app: app, pid: app.flatMap { livePID($0) }, cause: text, time: now())
        case .typedNote(let app, let text, let fields):
            events.append(.service, app: app, pid: app.flatMap { livePID($0) }, cause: text, fields: fields, time: now())
        case .typedUse(let app, let mode, let what, let fields):
            events.append(.modeUsed, app: app, pid: livePID(app), cause: what, mode: mode, fields: fields, time: now())
        case .audio(let app, let output):
            guard configuration.audioSink == .wav else { return }
            do {
                try audioSinks.play(output, app: app, container: configuration.containersDirectory + "/" + app.rawValue)
            } catch {
                events.append(.warning, app: app, cause: "audio sink: \(error)", time: now())
            }
        case .persistSetting(let key, let value):
            do {
                try store.setSetting(key: key, value: value)
            } catch {
                logger.error("could not record the setting \(key): \(error)")
            }
        case .protectData(let level):
            applyDataProtection(level)
        case .lockGrace(let after?):
            startHostTimer(.lockGrace, app: nil, after: after)
        case .lockGrace(nil):
            cancelHostTimer(.lockGrace, app: nil)
        case .persistDeviceToken, .forgetDeviceToken:
            persistDeviceToken(effect)
        case .persistPrivacy(let app, let service, let value):
            do {
                try store.setPrivacy(bundleIdentifier: app, service: service, value: value)
            } catch {
                logger.error("could not record the privacy decision for \(app): \(error)")
            }
        }
    }
}
