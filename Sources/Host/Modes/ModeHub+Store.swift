import AppHostProtocol
import Logging
import Plugins

extension ModeHub {
    /// Restores what the plugins keep across host restarts: privacy decisions, device
    /// tokens and settings from the database, and the configuration's refresh policy.
    func restore(from store: Store, configuration: HostConfiguration, logger: Logger) throws {
        for decision in try store.privacy() {
            // A row this build cannot read (a newer host's service or decision) counts as
            // not determined, as after `privacy reset`; it is left in the table.
            guard let service = PrivacyService(rawValue: decision.service), let value = PrivacyDecision(rawValue: decision.value) else {
                logger.warning("ignoring the privacy decision \"\(decision.value)\" for \"\(decision.service)\" of \(decision.bundleIdentifier): unknown to this host")
                continue
            }
            restorePrivacy(app: decision.bundleIdentifier, service: service, value: value)
        }
        for record in try store.deviceTokens() {
            restoreDeviceToken(record)
        }
        for setting in try store.settings() {
            restoreSetting(key: setting.key, value: setting.value)
        }
        setRefreshRestrictedByPolicy(configuration.backgroundRefreshRestricted)
    }
}
