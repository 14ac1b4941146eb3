import AppHostProtocol
import Plugins
#if canImport(Glibc)
import Glibc
#endif

extension Supervisor {
    /// Closes or opens every installed app's protected files for `level` (the device
    /// locked or unlocked; see ``ProtectedFiles``), in bundle-id order, one `service`
    /// event per app whose files changed. Only a host that runs apps as uids of their own
    /// can: an app running as the host's uid owns whatever the host could give it, so
    /// the host says once that data protection is not enforced.
    func applyDataProtection(_ level: DataProtectionLevel) {
        guard let identities else {
            guard !dataProtectionWarned else { return }
            dataProtectionWarned = true
            events.append(.warning, cause: "data protection is not enforced: apps run as the host's own uid (a root host with \"identities\" gives each app its own), so a locked device leaves their protected files readable", time: now())
            return
        }
        for id in apps.keys.sorted() {
            guard let uid = identities.existingUID(app: id) else { continue }
            var outcome = ProtectedFiles.apply(level, root: configuration.containersDirectory + "/" + id.rawValue, uid: uid, gid: uid)
            // The App Group containers it shares: the files it owns there (a member app's
            // files are its own to lose, as on iOS, where the class is the file's).
            var inGroups = ProtectedFiles.Outcome()
            for group in (apps[id]?.app.applicationGroups ?? []).sorted() {
                guard let gid = identities.existingGroupID(group) else { continue }
                let done = ProtectedFiles.apply(level, root: configuration.groupsDirectory + "/" + group, uid: uid, gid: gid)
                inGroups.closed += done.closed
                inGroups.opened += done.opened
                outcome.failures += done.failures.map { "\(group)/\($0)" }
                outcome.cut = outcome.cut || done.cut
            }
            var parts: [String] = []
            if outcome.closed > 0 { parts.append("\(outcome.closed) protected file(s) closed to the app") }
            if outcome.opened > 0 { parts.append("\(outcome.opened) protected file(s) open again") }
            if inGroups.closed > 0 { parts.append("\(inGroups.closed) in its App Group containers closed") }
            if inGroups.opened > 0 { parts.append("\(inGroups.opened) in its App Group containers open again") }
            if !outcome.failures.isEmpty { parts.append("could not change \(outcome.failures.prefix(8).joined(separator: ", "))") }
            if outcome.cut { parts.append("the container has more than \(ProtectedFiles.maximumEntries) entries or \(ProtectedFiles.maximumDepth) levels: the rest was not looked at") }
            guard !parts.isEmpty else { continue }
            events.append(.service, app: id, cause: "data protection (\(level.rawValue)): " + parts.joined(separator: "; "), time: now())
        }
    }

    /// At start: a host stopped while the device was locked starts locked, not unlocked
    /// since boot, so files of both protected classes are closed until `device unlock`.
    func applyDataProtectionAtStart() {
        let level = modes.deviceState.protectionLevel
        guard level != .open else { return }
        applyDataProtection(level)
    }
}
