// TrackerApp: asks for always location authorization, starts location updates with
// allowsBackgroundLocationUpdates, and prints every fix and authorization change.
// With `location` in UIBackgroundModes (manifests/Tracker.app) and always
// authorization (`apphost privacy grant location-always com.example.tracker`),
// updates keep it running in the background and each fix reaches it there.
import AppKitLess
import Foundation

/// Starts location updates at launch (or once authorized) and logs what arrives.
final class TrackerDelegate: ApplicationDelegate, LocationManagerDelegate {
    private let manager = LocationManager()

    func didFinishLaunching(_ application: Application, options: LaunchOptions) -> Bool {
        log("didFinishLaunching state=\(application.applicationState)")
        manager.delegate = self
        manager.requestAlwaysAuthorization()
        log("authorization \(manager.authorizationStatus.rawValue)")
        startUpdates()
        return true
    }
    func willResignActive(_ application: Application) { log("willResignActive state=\(application.applicationState)") }
    func didEnterBackground(_ application: Application) { log("didEnterBackground state=\(application.applicationState)") }
    func willEnterForeground(_ application: Application) { log("willEnterForeground state=\(application.applicationState)") }
    func didBecomeActive(_ application: Application) { log("didBecomeActive state=\(application.applicationState)") }
    func willTerminate(_ application: Application) { log("willTerminate state=\(application.applicationState)") }

    // MARK: LocationManagerDelegate

    func didUpdateLocations(_ manager: LocationManager, _ locations: [LocationFix]) {
        let state = Application.shared.applicationState
        for fix in locations {
            log("fix \(fix.latitude),\(fix.longitude) state=\(state)")
        }
    }

    func didChangeAuthorization(_ manager: LocationManager, _ status: LocationAuthorization) {
        log("authorization changed to \(status.rawValue)")
        if status == .always || status == .whenInUse {
            startUpdates()
        } else if manager.isUpdatingLocation {
            manager.stopUpdatingLocation()
            log("stopped location updates")
        }
    }

    // MARK: helpers

    /// Keeps updates on in the background (the `location` mode), then starts them;
    /// without authorization the host refuses and this waits for a change.
    private func startUpdates() {
        guard !manager.isUpdatingLocation else { return }
        if !manager.allowsBackgroundLocationUpdates {
            do {
                try manager.setAllowsBackgroundLocationUpdates(true)
                log("allowsBackgroundLocationUpdates = true")
            } catch {
                log("allowsBackgroundLocationUpdates refused: \(error)")
            }
        }
        do {
            try manager.startUpdatingLocation()
            log("started location updates")
        } catch {
            log("startUpdatingLocation refused: \(error)")
        }
    }

    private func log(_ line: String) {
        print("[TrackerApp] \(line)")
        fflush(nil)  // stdout is a log file: flush so each line is there at once
    }
}

ApplicationMain(delegate: TrackerDelegate())
