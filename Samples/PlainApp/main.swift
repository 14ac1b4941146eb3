// PlainApp: the smallest AppHost app. It prints one line per lifecycle callback
// and does nothing else, so the host suspends it as soon as it is backgrounded.
import AppKitLess
import Foundation

/// Logs every callback as `[PlainApp] <callback> state=<state>`.
final class PlainAppDelegate: ApplicationDelegate {
    func didFinishLaunching(_ application: Application, options: LaunchOptions) -> Bool {
        log("didFinishLaunching", application)
        return true
    }
    func willResignActive(_ application: Application) { log("willResignActive", application) }
    func didEnterBackground(_ application: Application) { log("didEnterBackground", application) }
    func willEnterForeground(_ application: Application) { log("willEnterForeground", application) }
    func didBecomeActive(_ application: Application) { log("didBecomeActive", application) }
    func willTerminate(_ application: Application) { log("willTerminate", application) }

    private func log(_ callback: String, _ application: Application) {
        print("[PlainApp] \(callback) state=\(application.applicationState)")
        fflush(nil)  // stdout is a log file: flush so each line is there at once
    }
}

ApplicationMain(delegate: PlainAppDelegate())
