import AppHostProtocol
import AppHostSystem
import Foundation
import TestSupport
import Testing
@testable import Host

#if canImport(Glibc)
import Glibc
#endif

let kernelLandlockABI = Landlock.abiVersion ?? 0

/// The sandbox of a real app, seen from inside: the probe tries files, signals,
/// sockets and its App Groups, and prints what the kernel said. Each test uses
/// a host of its own, stops it (reaping every app) and removes its directories.
@Suite("Confinement", .tags(.process), .serialized, .timeLimit(.minutes(2)), .enabled(if: probeBuilt, "sample apps not built: run `swift build` first"))
struct ConfinementTests {
    /// Installs a probe whose bundle lies outside the state directory (as a user's would).
    func install(_ host: TestHost, _ bundles: TempDir, _ id: BundleID, groups: [String]? = nil) async throws -> BundleID {
        let path = try makeProbeBundle(in: bundles.path, id: id.rawValue,
                                       entitlements: groups.map { ["com.apple.security.application-groups": $0] })
        return try await host.supervisor.install(path: path, settings: [:]).bundleIdentifier
    }

    /// Launches `id` in front with `actions` in didFinishLaunching; returns its pid and, once
    /// the launch returned (every action has run), the `[ProbeApp]` lines of its log.
    func run(_ host: TestHost, _ id: BundleID, _ actions: [String], background: Bool = false) async throws -> (pid: Int32, log: [String]) {
        let pid = try await host.supervisor.launch(id, background: background, arguments: actions.flatMap { ["--on", "launch", $0] })
        let log = (try? String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)) ?? ""
        return (pid, log.split(separator: "\n").map(String.init).filter { $0.hasPrefix("[ProbeApp] ") })
    }

    @Test(.enabled(if: kernelLandlockABI >= 1, "needs Landlock"))
    func anAppReachesItsContainerAndTheSystemOnly() async throws {
        try await withHost(label: "cf") { host in
            let bundles = try TempDir("cfb")
            defer { bundles.remove() }
            let state = host.dir.path
            let other = try await install(host, bundles, "com.confine.other")
            let app = try await install(host, bundles, "com.confine.app")
            let (otherPID, otherLog) = try await run(host, other, ["write:Documents/secret"], background: true)
            #expect(otherLog.contains("[ProbeApp] write Documents/secret: ok"), "\(otherLog)")
            let hostPID = getpid()
            let outside = "/tmp/aph-confine-\(UUID().uuidString.prefix(8))"
            let bundle = bundles.path + "/\(app).app"
            // In namespaces of its own (where the machine allows them) the state directory
            // is an empty tmpfs but its container, and every other file is read-only:
            // what Landlock refuses with EACCES is not there (ENOENT) or not writable (EROFS).
            let hidden = await host.supervisor.sandbox.namespaces == .used
            let notThere = hidden ? "ENOENT" : "EACCES", readOnly = hidden ? "EROFS" : "EACCES"
            let expected: [(String, String)] = [
                // Its own container and bundle.
                ("write Documents/mine", "ok"),
                ("read \(bundle)/Info.plist", "ok"),
                ("write \(bundle)/planted", readOnly),
                // Another app's container, the state directory, other places.
                ("read \(state)/containers/\(other)/Documents/secret", notThere),
                ("write \(state)/containers/\(other)/Documents/planted", notThere),
                ("read \(state)/apphost.sqlite", notThere),
                ("read \(state)/events.jsonl", notThere),
                ("read \(state)/logs/\(other).log", notThere),
                ("write \(state)/planted", readOnly),
                ("write \(outside)", readOnly),
                ("read /etc/shadow", "EACCES"),
                ("read /etc/passwd", "ok"),
                ("read /usr/share/ca-certificates", "EISDIR"),
                // The host and the other app: /proc details, and (ABI 6) signals.
                ("read /proc/\(hostPID)/environ", "EACCES"),
                ("read /proc/\(otherPID)/environ", "EACCES"),
                ("read /proc/\(otherPID)/cmdline", "ok"),
                // Sockets: no Unix socket to reach the control socket with; TCP out is fine.
                ("socket unix", "EPERM"),
                ("socket inet", "ok"),
            ] + (kernelLandlockABI >= 6 ? [("kill \(hostPID)", geteuid() != 0 && hidden ? "ESRCH" : "EPERM"),
                                           ("kill \(otherPID)", geteuid() != 0 && hidden ? "ESRCH" : "EPERM")] : [])
            let actions = expected.map { line -> String in
                let parts = line.0.split(separator: " ", maxSplits: 1)
                return parts[0] + ":" + parts[1] + (parts[0] == "kill" ? ":0" : "")
            } + ["caps"]
            let (_, log) = try await run(host, app, actions)
            for (what, verdict) in expected {
                #expect(log.contains("[ProbeApp] \(what): \(verdict)"), "\(what): \(log.filter { $0.contains(what) })")
            }
            #expect(log.contains("[ProbeApp] CapEff 0000000000000000"), "\(log.filter { $0.contains("Cap") })")
            #expect(log.contains("[ProbeApp] CapPrm 0000000000000000"), "\(log.filter { $0.contains("Cap") })")
            #expect(!FileManager.default.fileExists(atPath: outside))
            #expect(!FileManager.default.fileExists(atPath: state + "/containers/\(other)/Documents/planted"))
            #expect(FileManager.default.fileExists(atPath: state + "/containers/\(app)/Documents/mine"))
            // Both lived through it.
            #expect(processExists(otherPID))
        }
    }

    @Test(.enabled(if: kernelLandlockABI >= 1, "needs Landlock"))
    func anAppGroupContainerIsSharedByItsMembersOnly() async throws {
        try await withHost(label: "cg") { host in
            let bundles = try TempDir("cgb")
            defer { bundles.remove() }
            let group = "group.com.confine.shared"
            let groupPath = host.dir.path + "/groups/" + group
            let writer = try await install(host, bundles, "com.confine.writer", groups: [group])
            let reader = try await install(host, bundles, "com.confine.reader", groups: ["group.com.confine.other", group])
            let stranger = try await install(host, bundles, "com.confine.stranger")

            let (_, wrote) = try await run(host, writer, ["group:\(group)", "write:group:\(group)/shared.db"])
            #expect(wrote.contains("[ProbeApp] group \(group): \(groupPath)"), "\(wrote)")
            #expect(wrote.contains("[ProbeApp] write group:\(group)/shared.db: ok"), "\(wrote)")
            #expect(FileManager.default.fileExists(atPath: groupPath + "/shared.db"))

            let (_, read) = try await run(host, reader, ["read:group:\(group)/shared.db", "group:group.com.confine.other"])
            #expect(read.contains("[ProbeApp] read group:\(group)/shared.db: ok"), "\(read)")
            #expect(read.contains("[ProbeApp] group group.com.confine.other: \(host.dir.path)/groups/group.com.confine.other"), "\(read)")

            let (_, refused) = try await run(host, stranger, ["group:\(group)", "read:\(groupPath)/shared.db", "write:\(groupPath)/planted"])
            let notThere = await host.supervisor.sandbox.namespaces == .used ? "ENOENT" : "EACCES"
            #expect(refused.contains("[ProbeApp] group \(group): none"), "\(refused)")
            #expect(refused.contains("[ProbeApp] read \(groupPath)/shared.db: \(notThere)"), "\(refused)")
            #expect(refused.contains("[ProbeApp] write \(groupPath)/planted: \(notThere)"), "\(refused)")
        }
    }

    @Test func aBadAppGroupEntitlementIsRefusedAtInstall() async throws {
        try await withHost(label: "ce") { host in
            let key = "com.apple.security.application-groups"
            for (value, says) in [(["../escape"] as Any, "\"../escape\" is not an App Group identifier"),
                                  (["com.example.nogroupprefix"] as Any, "is not an App Group identifier"),
                                  ("group.a" as Any, "expected an array")] {
                let path = try makeProbeBundle(in: host.dir.path, id: "com.confine.bad", entitlements: [key: value])
                await #expect {
                    _ = try await host.supervisor.install(path: path, settings: [:])
                } throws: { error in
                    let message = "\(error)"
                    return message.contains(key) && message.contains(says)
                }
            }
        }
    }

    @Test func noFolderGrantIsTheRootOrHoldsTheStateDirectory() throws {
        let state = try TempDir("gs")
        defer { state.remove() }
        func folderGrants(executable: String, bundle: String) -> [PathGrant] {
            let manifest = Manifest(bundleIdentifier: "com.grant.app", executable: "App", name: "App", sourcePath: bundle + "/Info.plist")
            let app = InstalledApp(bundleIdentifier: "com.grant.app", name: "App", bundlePath: bundle, executablePath: executable,
                                   backgroundModes: [], installedAt: Date(), manifest: manifest)
            let policy = AppConfinement.landlockPolicy(app: app, container: state.path + "/containers/com.grant.app", groupContainers: [],
                                                       devices: [], stateDirectory: state.path, abiLimit: nil)
            let fixed = Set(AppConfinement.systemTrees + AppConfinement.runtimeDirectories + AppConfinement.systemFiles
                + AppConfinement.certificatePaths + AppConfinement.systemInformation + AppConfinement.commonDevices
                + ["/proc", state.path + "/containers/com.grant.app"])
            return policy.grants.filter { !fixed.contains($0.path) }
        }
        // An executable at the root (an install before the loader refused it): the file only.
        #expect(folderGrants(executable: "/escaper", bundle: "/").map(\.path) == ["/escaper"])
        // An executable and a bundle in the folder holding the state directory: the file only.
        let parent = (state.path as NSString).deletingLastPathComponent
        #expect(folderGrants(executable: parent + "/escaper", bundle: parent).map(\.path) == [parent + "/escaper"])
        // An ordinary products folder and bundle are granted.
        let products = state.path + "-products"
        #expect(folderGrants(executable: products + "/App", bundle: products + "/App.app").map(\.path)
                == [products + "/App", products, products + "/App.app"])
    }

    @Test func theSummaryNamesWhatEachABILacks() {
        func lost(_ kernel: Int?, limit: Int? = nil, uid: uid_t = 1000) -> String {
            SandboxSummary(kernelABI: kernel, limit: limit, seccomp: .baseline, uid: uid).warning ?? ""
        }
        func lostWithIDs(_ kernel: Int?) -> String {
            SandboxSummary(kernelABI: kernel, limit: nil, seccomp: .baseline, uid: 0,
                           identities: (first: 200_000, count: 10)).warning ?? ""
        }
        // A host run by a user: its apps share its uid, and it says so whatever the ABI.
        #expect(lost(7).contains("apps run as the host's own uid 1000") && !lost(7).contains("signal scoping"))
        #expect(lost(6) == lost(7).replacingOccurrences(of: "ABI 7", with: "ABI 6"))
        // A root host with per-app uids: nothing is lost from ABI 6 on, and signals stay
        // between uids below it.
        #expect(lostWithIDs(7).isEmpty)
        #expect(lostWithIDs(6).isEmpty)
        #expect(!lostWithIDs(5).contains("signal") && lostWithIDs(3).contains("TCP"))
        #expect(lostWithIDs(nil).contains("world-readable") && !lostWithIDs(nil).contains("signal"))
        #expect(SandboxSummary(kernelABI: 7, limit: nil, seccomp: .baseline, uid: 0, identities: (first: 200_000, count: 10))
            .enforced.contains("each app runs as a uid of its own (200000...200009)"))
        #expect(lost(0 + 7, uid: 0).contains("apps run as uid 0 without capabilities (per-app identities are off)"))
        #expect(lost(5).contains("signal") && !lost(5).contains("TCP"))
        #expect(lost(3).contains("TCP") && !lost(3).contains("truncate"))
        #expect(lost(2).contains("truncate") && !lost(2).contains("EXDEV"))
        #expect(lost(1).contains("EXDEV"))
        #expect(lost(nil).contains("no Landlock") && lost(nil).contains("other apps' containers"))
        #expect(!lost(nil).contains("own every root-owned file"))
        #expect(lost(nil, uid: 0).contains("own every root-owned file"), "a root host's apps without uids of their own own root's files")
        #expect(lost(7, limit: 0).contains("no Landlock"))
        #expect(lost(7, limit: 4).contains("Landlock ABI 4"))
        let summary = SandboxSummary(kernelABI: 7, limit: 4, seccomp: .baseline, uid: 0)
        #expect(summary.abi == 4)
        #expect(summary.enforced.hasPrefix("sandbox: Landlock ABI 4 (kernel ABI 7, limited to 4)"), "\(summary.enforced)")
        #expect(summary.enforced.contains("TCP bind denied") && !summary.enforced.contains("signals"))
        // Apps run under the host's filter plus their own rules; other children keep the host's.
        let app = AppConfinement.seccomp(.baseline, deniedSocketFamilies: [])
        #expect(app.deniesProcessCreation && app.deniesUnixSocketCreation)
        #expect(!SeccompPolicy.baseline.deniesProcessCreation, "the transfer daemon's filter lets it make processes")
        #expect(AppConfinement.seccomp(.none, deniedSocketFamilies: []) == .none)
        let off = SandboxSummary(kernelABI: nil, limit: nil, seccomp: .none, uid: 1000)
        #expect(off.abi == nil)
        #expect(off.warning?.contains("seccomp is off") == true)
    }

    @Test func aUsersHostSaysWhetherItsAppsGetNamespacesAndHowToAllowThem() {
        let used = SandboxSummary(kernelABI: 5, limit: nil, seccomp: .baseline, uid: 1000, namespaces: .used)
        #expect(used.enforced.contains("apps in user, mount, pid and IPC namespaces of their own"))
        #expect(used.warning == nil || !(used.warning ?? "").contains("signal"), "a pid namespace keeps signals in: \(used.warning ?? "")")
        #expect(!(used.warning ?? "").contains("host's own uid"))
        let refused = SandboxSummary(kernelABI: 7, limit: nil, seccomp: .baseline, uid: 1000,
                                     namespaces: .unavailable(reason: "clone with new user, mount, pid and IPC namespaces: EPERM",
                                                              enable: "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"))
        let warning = refused.warning ?? ""
        #expect(warning.contains("this machine refused the apps' namespaces (clone with new user, mount, pid and IPC namespaces: EPERM)"), "\(warning)")
        #expect(warning.contains("to isolate them: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"), "\(warning)")
        let off = SandboxSummary(kernelABI: 7, limit: nil, seccomp: .baseline, uid: 1000, namespaces: .off)
        #expect((off.warning ?? "").contains("\"namespaces\": false in --config"))
        #expect((off.warning ?? "").contains("remove \"namespaces\": false from the config"))
        // The command follows the sysctl that forbids them.
        func command(_ files: [String: String]) -> String { NamespaceUse.enableCommand(read: { files[$0] }) }
        #expect(command(["/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n"]).hasPrefix("sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"))
        #expect(command(["/proc/sys/kernel/unprivileged_userns_clone": "0\n"]) == "sudo sysctl -w kernel.unprivileged_userns_clone=1")
        #expect(command(["/proc/sys/user/max_user_namespaces": "0\n"]) == "sudo sysctl -w user.max_user_namespaces=15000")
        #expect(command(["/proc/sys/user/max_user_namespaces": "15000\n"]).contains("seccomp profile"))
    }

    @Test func anAppsNamespacesMakeEveryFolderOnTheWayToItsWritableOnes() {
        let ns = AppNamespaces(hidden: "/s", writable: ["/s/containers/com.a", "/s/groups/group.x", "/s/groups/group.y"])
        #expect(ns.directories == ["/s/containers", "/s/containers/com.a", "/s/groups", "/s/groups/group.x", "/s/groups/group.y"])
        #expect(AppNamespaces(hidden: "/s/", writable: ["/s/c/a"]).directories == ["/s/c", "/s/c/a"])
        #expect(AppNamespaces(hidden: "/s", writable: ["/t/c"]).directories == nil, "outside the hidden folder")
        #expect(AppNamespaces(hidden: "/s", writable: ["/s"]).directories == nil, "the hidden folder itself")
        #expect(AppNamespaces(hidden: "/s", writable: ["/s/../etc"]).directories == nil)
        #expect(AppNamespaces(hidden: "/s", writable: (0...AppNamespaces.maximumWritable).map { "/s/\($0)" }).directories == nil)
    }

    /// The probe tries the namespaces for real: here on a folder of the test's own.
    @Test func theNamespacesProbeTriesThemForReal() throws {
        let dir = try TempDir("nsp")
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.path + "/containers", withIntermediateDirectories: true)
        let hidden = AppConfinement.canonical(dir.path)
        let refused = AppNamespaces(hidden: hidden, writable: [hidden + "/containers"]).probe()
        if let refused {
            withKnownIssue("this machine refuses user namespaces: \(refused)") { Issue.record("\(refused)") }
        }
        // A writable folder that does not exist fails at its step, with its errno.
        if refused == nil {
            let missing = AppNamespaces(hidden: hidden, writable: [hidden + "/nothing-here"]).probe()
            #expect(missing?.errno == .noSuchFileOrDirectory && missing?.step == "open_tree of a writable folder", "\(String(describing: missing))")
        }
    }

    @Test func theHostSaysOnceWhatConfinesApps() async throws {
        try await withHost(label: "cs") { host in
            let id = try await host.installProbe("com.confine.said")
            _ = try await host.supervisor.launch(id, background: false, arguments: [])
            try await host.supervisor.terminate(id)
            _ = try await host.supervisor.launch(id, background: false, arguments: [])
            let (past, _, sub) = await host.supervisor.subscribe(bundleIdentifier: nil)
            await host.supervisor.unsubscribe(sub)
            let said = past.filter { $0.kind == .service && $0.cause.hasPrefix("sandbox: ") }
            #expect(said.count == 1, "\(said.map(\.cause))")
            let warnings = past.filter { $0.kind == .warning && $0.cause.hasPrefix("sandbox: ") }
            if let abi = Landlock.abiVersion {
                #expect(said.first?.cause.hasPrefix("sandbox: Landlock ABI \(abi) (kernel ABI \(abi))") == true, "\(said.map(\.cause))")
                #expect(said.first?.cause.contains("capabilities dropped") == true)
                #expect(said.first?.cause.contains("no new processes") == true)
                // Nothing is missing from ABI 6 on with per-app uids (a root host): no warning. A
                // host run by a user warns that its apps share its uid.
                #expect(warnings.isEmpty == (abi >= 6 && geteuid() == 0), "\(warnings.map(\.cause))")
            } else {
                #expect(warnings.count == 1)
            }
        }
    }

    @Test func withoutLandlockTheHostWarnsOnceAndAppsStillRun() async throws {
        try await withHost(label: "cn", configure: { $0.landlockABI = 0 }) { host in
            let a = try await host.installProbe("com.confine.bare.a")
            let b = try await host.installProbe("com.confine.bare.b")
            let (_, wrote) = try await run(host, a, ["write:Documents/note"])
            #expect(wrote.contains("[ProbeApp] write Documents/note: ok"))
            let (_, read) = try await run(host, b, ["read:\(host.dir.path)/containers/\(a)/Documents/note", "caps"])
            let hidden = await host.supervisor.sandbox.namespaces == .used
            if hidden {
                // Its namespaces: the state directory is an empty tmpfs but its own container.
                #expect(read.contains("[ProbeApp] read \(host.dir.path)/containers/\(a)/Documents/note: ENOENT"), "\(read)")
            } else if geteuid() == 0 {
                // Each app its own uid: a's container (0700, a's) is closed to b by the kernel's own checks.
                #expect(read.contains("[ProbeApp] read \(host.dir.path)/containers/\(a)/Documents/note: EACCES"), "\(read)")
            } else {
                // What the warning says is lost: b reaches a's container.
                #expect(read.contains("[ProbeApp] read \(host.dir.path)/containers/\(a)/Documents/note: ok"), "\(read)")
            }
            #expect(read.contains("[ProbeApp] CapEff 0000000000000000"), "capabilities are dropped all the same")
            let (past, _, sub) = await host.supervisor.subscribe(bundleIdentifier: nil)
            await host.supervisor.unsubscribe(sub)
            let warnings = past.filter { $0.kind == .warning && $0.cause.hasPrefix("sandbox: ") }
            #expect(warnings.count == 1, "\(warnings.map(\.cause))")
            let warning = warnings.first?.cause ?? ""
            #expect(warning.contains("no Landlock"), "\(warning)")
            if geteuid() == 0 {
                #expect(warning.contains("world-readable"), "\(warning)")
            } else if hidden {
                #expect(warning.contains("outside the state directory"), "\(warning)")
            } else {
                #expect(warning.contains("other apps' containers"), "\(warning)")
                #expect(warning.contains("signal"), "\(warning)")
            }
        }
    }

    @Test(.enabled(if: kernelLandlockABI >= 6, "needs a kernel above the ABI limited to"))
    func anOlderABIWarnsAboutWhatItLacks() async throws {
        try await withHost(label: "co", configure: { $0.landlockABI = 5 }) { host in
            let id = try await host.installProbe("com.confine.older")
            let (_, log) = try await run(host, id, ["kill:\(getpid()):0", "read:\(host.dir.path)/apphost.sqlite"])
            // Signals are not scoped before ABI 6 (as the warning says) but by uid, where apps
            // have their own (a root host); files still are.
            let hidden = await host.supervisor.sandbox.namespaces == .used
            #expect(log.contains("[ProbeApp] kill \(getpid()): \(geteuid() == 0 ? "EPERM" : hidden ? "ESRCH" : "ok")"), "\(log)")
            #expect(log.contains("[ProbeApp] read \(host.dir.path)/apphost.sqlite: \(hidden ? "ENOENT" : "EACCES")"), "\(log)")
            let (past, _, sub) = await host.supervisor.subscribe(bundleIdentifier: nil)
            await host.supervisor.unsubscribe(sub)
            let warnings = past.filter { $0.kind == .warning && $0.cause.hasPrefix("sandbox: ") }.map(\.cause)
            if geteuid() == 0 {
                #expect(warnings.isEmpty, "apps of a root host have uids of their own: signals are refused by uid (\(warnings))")
            } else {
                #expect(warnings.count == 1 && warnings[0].contains("Landlock ABI 5") && warnings[0].contains("signal"), "\(warnings)")
            }
        }
    }
}
