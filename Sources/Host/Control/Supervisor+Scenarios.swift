import AppHostProtocol
import Foundation
import Plugins

extension Supervisor {
    /// `backgroundRefreshStatus` as `id` would read it now: available, denied or restricted.
    public func backgroundRefreshStatus(_ id: BundleID) -> String {
        modes.deviceState.refreshStatus(id).rawValue
    }

    /// The app's log (what it printed to stdout and stderr).
    public func logPath(of id: BundleID) -> String {
        configuration.logsDirectory + "/\(id).log"
    }
}
