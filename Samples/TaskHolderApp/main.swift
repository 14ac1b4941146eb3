// TaskHolderApp: on entering the background it begins a background task named
// "upload" and ends it after `--hold SECONDS` (default 3), so the host keeps it
// running that long and then suspends it.
import AppKitLess
import Foundation

/// Parses `--hold SECONDS` from the launch arguments; exits 64 on anything else.
func holdSeconds(from arguments: [String]) -> TimeInterval {
    var hold: TimeInterval = 3
    var rest = arguments[...]
    while let argument = rest.popFirst() {
        if argument == "--hold", let value = rest.popFirst(), let seconds = TimeInterval(value), seconds >= 0, seconds.isFinite {
            hold = seconds
        } else {
            FileHandle.standardError.write(Data("TaskHolderApp: usage: TaskHolderApp [--hold SECONDS] (got \(arguments))\n".utf8))
            exit(64)
        }
    }
    return hold
}

/// Holds an "upload" background task for a while after every move to the background.
final class TaskHolderDelegate: ApplicationDelegate {
    let hold: TimeInterval
    private var task = BackgroundTaskIdentifier.invalid

    init(hold: TimeInterval) {
        self.hold = hold
    }

    func didFinishLaunching(_ application: Application, options: LaunchOptions) -> Bool {
        log("didFinishLaunching state=\(application.applicationState)")
        return true
    }
    func willResignActive(_ application: Application) { log("willResignActive state=\(application.applicationState)") }
    func willEnterForeground(_ application: Application) { log("willEnterForeground state=\(application.applicationState)") }
    func didBecomeActive(_ application: Application) { log("didBecomeActive state=\(application.applicationState)") }
    func willTerminate(_ application: Application) { log("willTerminate state=\(application.applicationState)") }

    func didEnterBackground(_ application: Application) {
        log("didEnterBackground state=\(application.applicationState)")
        guard task == .invalid else { return }  // still holding the previous one
        let id = application.beginBackgroundTask(withName: "upload") { [weak self] in
            self?.log("upload expired")
            self?.endTask(application)
        }
        task = id
        log("began background task upload id=\(id) for \(hold)s")
        DispatchQueue.main.asyncAfter(deadline: .now() + hold) { [weak self] in
            MainActor.assumeIsolated {
                guard let self, self.task == id else { return }
                self.endTask(application)
            }
        }
    }

    private func endTask(_ application: Application) {
        guard task != .invalid else { return }
        log("ending background task upload id=\(task)")
        application.endBackgroundTask(task)
        task = .invalid
    }

    private func log(_ line: String) {
        print("[TaskHolderApp] \(line)")
        fflush(nil)  // stdout is a log file: flush so each line is there at once
    }
}

ApplicationMain(delegate: TaskHolderDelegate(hold: holdSeconds(from: Array(CommandLine.arguments.dropFirst()))))
