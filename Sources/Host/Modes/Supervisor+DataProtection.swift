import AppHostProtocol
import AppHostSystem
import Foundation
import Plugins
#if canImport(Glibc)
import Glibc
#endif

extension Supervisor {
    /// Closes or opens every installed app's protected files for `level` (the device
    /// locked or unlocked; see ``ProtectedFiles``), in bundle-id order, one `service`
    /// event per app whose files changed. A root host with per-app uids gives a closed
    /// file to root; a host whose apps share its uid covers the file in the app's own
    /// mount namespace (``coversProtectedFiles``); a host with neither says once that
    /// data protection is not enforced.
    func applyDataProtection(_ level: DataProtectionLevel) {
        guard let identities else {
            if coversProtectedFiles {
                applyDataProtectionByCovers(level)
                return
            }
            guard !dataProtectionWarned else { return }
            dataProtectionWarned = true
            events.append(.warning, cause: "data protection is not enforced: apps run as the host's own uid without namespaces of their own (a root host with \"identities\" gives each app its own uid; a user's host needs the user namespaces this machine refused or the config turned off), so a locked device leaves their protected files readable", time: now())
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
            let parts = Self.dataProtectionParts(closed: outcome.closed, opened: outcome.opened, closedInGroups: inGroups.closed,
                                                 openedInGroups: inGroups.opened, failures: outcome.failures,
                                                 cut: outcome.cut ? "the container has more than \(ProtectedFiles.maximumEntries) entries or \(ProtectedFiles.maximumDepth) levels" : nil)
            guard !parts.isEmpty else { continue }
            events.append(.service, app: id, cause: "data protection (\(level.rawValue)): " + parts.joined(separator: "; "), time: now())
        }
    }

    /// The words of a `data protection (...)` event, the same for both hosts: what closed
    /// and opened in the container and in the App Group containers, what could not be
    /// changed, and the bound a walk stopped at.
    static func dataProtectionParts(closed: Int, opened: Int, closedInGroups: Int, openedInGroups: Int,
                                    failures: [String], cut: String?) -> [String] {
        var parts: [String] = []
        if closed > 0 { parts.append("\(closed) protected file(s) closed to the app") }
        if opened > 0 { parts.append("\(opened) protected file(s) open again") }
        if closedInGroups > 0 { parts.append("\(closedInGroups) in its App Group containers closed") }
        if openedInGroups > 0 { parts.append("\(openedInGroups) in its App Group containers open again") }
        if !failures.isEmpty { parts.append("could not change \(failures.prefix(8).joined(separator: ", "))") }
        if let cut { parts.append(cut + ": the rest was not looked at") }
        return parts
    }

    /// At start: a host stopped while the device was locked starts locked, not unlocked
    /// since boot, so files of both protected classes are closed until `device unlock`.
    func applyDataProtectionAtStart() {
        let level = modes.deviceState.protectionLevel
        guard level != .open else { return }
        applyDataProtection(level)
    }


    /// Why this host leaves protected files readable on a locked device, or nil when it
    /// closes them (per-app uids, or covers in its apps' namespaces).
    public var dataProtectionUnenforced: String? {
        if identities != nil || coversProtectedFiles { return nil }
        return sandbox.namespaces == .off
            ? "its apps share its uid and \"namespaces\": false turned their namespaces off"
            : "its apps share its uid and this machine refused them user namespaces"
    }

    /// True when this host closes protected files by covering them in each app's mount
    /// namespace: its apps share its uid and run in user and mount namespaces of their
    /// own (decision 0050).
    var coversProtectedFiles: Bool { appsIsolateUser }

    /// The folders whose protected files `id` loses while locked, by the paths its mount
    /// namespace shows: its container, then its App Group containers (canonical, as the
    /// namespace's writable folders are mounted).
    func protectedRoots(of id: BundleID) -> (container: String, groups: [String]) {
        (AppConfinement.canonical(configuration.containersDirectory + "/" + id.rawValue),
         (apps[id]?.app.applicationGroups ?? []).sorted().map { AppConfinement.canonical(configuration.groupsDirectory + "/" + $0) })
    }

    /// What a launch of `id` covers before the app runs while `level` closes files, or
    /// nil when nothing is to cover (said as a warning when the files are too many).
    func protectedCoversAtLaunch(of id: BundleID) -> [String]? {
        let level = modes.deviceState.protectionLevel
        guard coversProtectedFiles, level != .open else { return nil }
        let roots = protectedRoots(of: id)
        var (paths, cut) = ProtectedFiles.closedFiles(level, roots: [roots.container] + roots.groups)
        if paths.count > AppNamespaces.maximumCovered || cut {
            events.append(.warning, app: id, cause: "data protection (\(level.rawValue)): more than \(min(paths.count, AppNamespaces.maximumCovered)) protected files or a container over \(ProtectedFiles.maximumEntries) entries: the rest stay readable to the app", time: now())
            paths = Array(paths.prefix(AppNamespaces.maximumCovered))
        }
        return paths.isEmpty ? nil : paths
    }

    /// Closes the files `level` closes, and opens those it opens, for every installed
    /// app, and covers or uncovers them in the mount namespace of every running app (a
    /// forked helper per app joins its user and mount namespaces); an app not running
    /// gets its covers at its next launch (``protectedCoversAtLaunch(of:)``). The events
    /// count what closed and opened for the app as a root host's do (the ledger
    /// ``protectedCovers`` is the host's record, as a closed file's owner is a root
    /// host's); what a running app's namespace holds is read back from its
    /// `/proc/PID/mountinfo`, so a failed or missing cover is found and said.
    private func applyDataProtectionByCovers(_ level: DataProtectionLevel) {
        protectedCovers = protectedCovers.filter { apps[$0.key] != nil }
        for id in apps.keys.sorted() {
            let roots = protectedRoots(of: id)
            var (wanted, cut) = ProtectedFiles.closedFiles(level, roots: [roots.container] + roots.groups)
            let over = wanted.count > AppNamespaces.maximumCovered
            if over { wanted = Array(wanted.prefix(AppNamespaces.maximumCovered)) }
            let wantedSet = Set(wanted)
            let before = protectedCovers[id] ?? []
            let closed = wanted.filter { !before.contains($0) }
            let opened = before.filter { !wantedSet.contains($0) }.sorted()
            protectedCovers[id] = wantedSet.isEmpty ? nil : wantedSet
            var failures: [String] = []
            if let rt = processes[id], rt.machine.isRunning, let child = rt.child, let pid = rt.pid {
                let covered = AppNamespaces.coveredFiles(pid: pid) ?? []
                let present = Set(covered)
                let add = wanted.filter { !present.contains($0) }
                let remove = covered.filter { !wantedSet.contains($0) }
                if !add.isEmpty || !remove.isEmpty {
                    do {
                        let outcome = try AppNamespaces.cover(in: child, files: add, uncover: remove)
                        // A file removed since the walk has nothing left to cover.
                        failures = (outcome.covered + outcome.uncovered).compactMap { item -> String? in
                            guard let errno = item.errno, errno != .noSuchFileOrDirectory else { return nil }
                            return "\(relative(item.path, roots)): \(errno)"
                        }
                    } catch .noSuchProcess {
                        // Gone since: its next launch covers.
                    } catch {
                        failures = ["the app's namespaces (\(error))"]
                    }
                }
            }
            let inContainer = { (path: String) in path.hasPrefix(roots.container + "/") }
            let closedHere = closed.filter(inContainer).count, openedHere = opened.filter(inContainer).count
            let parts = Self.dataProtectionParts(closed: closedHere, opened: openedHere, closedInGroups: closed.count - closedHere,
                                                 openedInGroups: opened.count - openedHere, failures: failures,
                                                 cut: cut || over ? "the container has more than \(ProtectedFiles.maximumEntries) entries, \(ProtectedFiles.maximumDepth) levels or \(AppNamespaces.maximumCovered) protected files" : nil)
            guard !parts.isEmpty else { continue }
            events.append(.service, app: id, cause: "data protection (\(level.rawValue)): " + parts.joined(separator: "; "), time: now())
        }
    }

    /// `path` beneath the container, or as `group/path` beneath an App Group container.
    private func relative(_ path: String, _ roots: (container: String, groups: [String])) -> String {
        if path.hasPrefix(roots.container + "/") { return String(path.dropFirst(roots.container.count + 1)) }
        for group in roots.groups where path.hasPrefix(group + "/") {
            return (group as NSString).lastPathComponent + "/" + path.dropFirst(group.count + 1)
        }
        return path
    }
}
