import AppHostProtocol
import AppHostSystem
import Foundation
import TestSupport
import Testing
@testable import Host

#if canImport(Glibc)
import Glibc
#endif

/// The owner and permission bits of `path` (not following a link).
private func owner(_ path: String) -> (uid: UInt32, gid: UInt32, mode: mode_t)? {
    var st = stat()
    guard lstat(path, &st) == 0 else { return nil }
    return (st.st_uid, st.st_gid, st.st_mode & 0o7777)
}

/// The `Uid:`, `Gid:` and `Groups:` lines of `/proc/<pid>/status`, as numbers.
private func credentials(_ pid: Int32) -> (uids: [UInt32], gids: [UInt32], groups: [UInt32]) {
    let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    func numbers(_ key: String) -> [UInt32] {
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(key + ":") }) else { return [] }
        return line.dropFirst(key.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { UInt32($0) }
    }
    return (numbers("Uid"), numbers("Gid"), numbers("Groups"))
}

/// Each app of a root host runs as a uid of its own (issue 14). Every host here has a
/// registry and a range of its own, so the tests do not meet each other's claims.
@Suite("Identities", .tags(.process), .serialized, .timeLimit(.minutes(2)),
       .enabled(if: probeBuilt, "sample apps not built: run `swift build` first"),
       .enabled(if: geteuid() == 0, "per-app uids need a host running as root"))
struct IdentityTests {
    /// A host with a private identity registry and the range `first..<first+count`.
    /// Runs `body` with such a host (see `withHost`); with `directory`, on that state directory.
    func withIdentityHost<T>(_ label: String, registry: TempDir, first: UInt32 = 230_000, count: UInt32 = 500,
                             directory: TempDir? = nil, _ body: (TestHost) async throws -> T) async throws -> T {
        try await withHost(label: label, directory: directory, configure: { config in
            config.identities = IdentitySettings(first: first, count: count, registryDirectory: registry.path)
        }, body)
    }

    @Test func eachAppRunsAsAUidOfItsOwnKeptAcrossRestartsAndReleasedAtUninstall() async throws {
        let registry = try TempDir("idr")
        defer { registry.remove() }
        try await withStateDirectory("id") { dir in
            let (a, uidA, uidB) = try await withIdentityHost("id", registry: registry, directory: dir) { first in
                let a = try await first.installProbe("com.identity.a")
                let b = try await first.installProbe("com.identity.b")
                let pidA = try await first.supervisor.launch(a, background: true, arguments: [])
                let pidB = try await first.supervisor.launch(b, background: true, arguments: [])
                let credA = credentials(pidA), credB = credentials(pidB)
                #expect(credA.uids.count == 4 && Set(credA.uids).count == 1, "real, effective, saved and fs uid alike: \(credA)")
                let uidA = try #require(credA.uids.first)
                let uidB = try #require(credB.uids.first)
                #expect((230_000..<230_500).contains(uidA) && (230_000..<230_500).contains(uidB))
                #expect(uidA != uidB, "two apps, two uids")
                #expect(Set(credA.gids) == [uidA], "its own gid, numbered as its uid: \(credA)")
                #expect(credA.groups.isEmpty, "no supplementary group of the host's: \(credA)")

                // Its container and the folders in it are its own, closed to everyone else.
                let container = dir.path + "/containers/" + a.rawValue
                for path in [container, container + "/Documents", container + "/Library", container + "/tmp"] {
                    let o = try #require(owner(path), "\(path)")
                    #expect(o.uid == uidA && o.gid == uidA && o.mode == 0o700, "\(path): \(o)")
                }
                // Claimed machine-wide, naming the state directory and the app.
                let claim = try String(contentsOfFile: registry.path + "/\(uidA)", encoding: .utf8)
                #expect(claim == dir.path + "\napp:" + a.rawValue + "\n")
                return (a, uidA, uidB)
            }
            // A new host on the same state directory gives it the same uid.
            try await withHost(reopening: dir, configure: { config in
                config.identities = IdentitySettings(first: 230_000, count: 500, registryDirectory: registry.path)
            }) { second in
                let again = try await second.supervisor.launch(a, background: true, arguments: [])
                #expect(credentials(again).uids.first == uidA)

                // Uninstall gives the uid back.
                try await second.supervisor.uninstall(a)
                #expect(!FileManager.default.fileExists(atPath: registry.path + "/\(uidA)"))
                #expect(FileManager.default.fileExists(atPath: registry.path + "/\(uidB)"))
            }
        }
    }

    @Test func anAppGroupIsSharedThroughAGidOfItsOwn() async throws {
        let registry = try TempDir("idg")
        defer { registry.remove() }
        try await withIdentityHost("ig", registry: registry, first: 231_000) { host in
            let group = "group.com.identity.shared"
            let groupPath = host.dir.path + "/groups/" + group
            let writer = try await host.installProbe("com.identity.writer", entitlements: ["com.apple.security.application-groups": [group]])
            let reader = try await host.installProbe("com.identity.reader", entitlements: ["com.apple.security.application-groups": [group]])
            let pid = try await host.supervisor.launch(writer, background: false, arguments: ["--on", "launch", "write:group:\(group)/shared.db"])
            let groups = credentials(pid).groups
            #expect(groups.count == 1, "\(groups)")
            let gid = try #require(groups.first)
            let dir = try #require(owner(groupPath))
            #expect(dir.uid == 0 && dir.gid == gid && dir.mode == 0o2770, "root's, the group's, setgid: \(dir)")
            let file = try #require(owner(groupPath + "/shared.db"))
            #expect(file.uid == credentials(pid).uids.first && file.gid == gid && file.mode & 0o060 == 0o060,
                    "the writer's, the group's, group-writable (umask 007): \(file)")
            // Another member writes the same file.
            let readerPID = try await host.supervisor.launch(reader, background: false, arguments: ["--on", "launch", "write:group:\(group)/shared.db"])
            #expect(credentials(readerPID).groups == [gid])
            let log = (try? String(contentsOfFile: host.dir.path + "/logs/\(reader).log", encoding: .utf8)) ?? ""
            #expect(log.contains("[ProbeApp] write group:\(group)/shared.db: ok"), "\(log)")
        }
    }

    @Test func theStateDirectoryIsClosedToAppsAndUsersWhateverTheUmask() async throws {
        try await withCLISession("idm") { session in
            _ = try await session.startDaemon(umask: 0)
            let install = await session.run("install", packageRoot + "/manifests/Probe.app")
            #expect(install.status == 0, "\(install.stderr)")
            let launch = await session.run("launch", "com.example.probe")
            #expect(launch.status == 0, "\(launch.stderr)")
            let dir = session.stateDir
            let expected: [(String, mode_t)] = [
                (dir, 0o711), (dir + "/containers", 0o711), (dir + "/groups", 0o711),
                (dir + "/logs", 0o700), (dir + "/reports", 0o700), (dir + "/snapshots", 0o700), (dir + "/transfers", 0o700),
                (dir + "/apphost.sqlite", 0o600), (dir + "/apphost.sqlite-wal", 0o600), (dir + "/events.jsonl", 0o600),
                (dir + "/control.sock", 0o600), (dir + "/apphost.lock", 0o600), (dir + "/logs/com.example.probe.log", 0o600),
                (dir + "/containers/com.example.probe", 0o700),
            ]
            for (path, mode) in expected {
                #expect(owner(path)?.mode == mode, "\(path): \(String(owner(path)?.mode ?? 0, radix: 8)), expected \(String(mode, radix: 8))")
            }
            _ = await session.run("shutdown")
        }
    }

    @Test func aClaimOfAStateDirectoryGoneIsTakenBackAndALiveOneIsNot() async throws {
        let registry = try TempDir("idc")
        defer { registry.remove() }
        let live = try TempDir("idl")
        defer { live.remove() }
        FileManager.default.createFile(atPath: live.path + "/apphost.sqlite", contents: Data())
        // One id, claimed by a state directory that no longer exists: taken back.
        try Data("/nonexistent/state\napp:com.gone\n".utf8).write(to: URL(fileURLWithPath: registry.path + "/232000"))
        try await withIdentityHost("ic", registry: registry, first: 232_000, count: 1) { host in
            let id = try await host.installProbe("com.identity.stale")
            let pid = try await host.supervisor.launch(id, background: true, arguments: [])
            #expect(credentials(pid).uids.first == 232_000)
        }

        // One id, claimed by a live state directory: no id left, and the launch says so.
        try Data("\(live.path)\napp:com.other\n".utf8).write(to: URL(fileURLWithPath: registry.path + "/232001"))
        try await withIdentityHost("if", registry: registry, first: 232_001, count: 1) { full in
            let refused = try await full.installProbe("com.identity.refused")
            do {
                _ = try await full.supervisor.launch(refused, background: true, arguments: [])
                Issue.record("launched without a free id")
            } catch {
                #expect("\(error)".contains("no free id left in 232001...232001"), "\(error)")
            }
            #expect(try String(contentsOfFile: registry.path + "/232001", encoding: .utf8) == "\(live.path)\napp:com.other\n")
        }
    }

    @Test func aContainerAnEarlierHostMadeIsHandedOverWhole() async throws {
        let registry = try TempDir("ido")
        defer { registry.remove() }
        try await withIdentityHost("io", registry: registry, first: 233_000) { host in
            let id = try await host.installProbe("com.identity.older")
            // As a host before per-app uids left it: root's, with a file and a folder inside.
            let container = host.dir.path + "/containers/" + id.rawValue
            try FileManager.default.createDirectory(atPath: container + "/Documents/old", withIntermediateDirectories: true)
            FileManager.default.createFile(atPath: container + "/Documents/old/note", contents: Data("kept".utf8))
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "read:Documents/old/note",
                                                                                          "--on", "launch", "write:Documents/old/new"])
            let uid = try #require(credentials(pid).uids.first)
            for path in [container, container + "/Documents", container + "/Documents/old", container + "/Documents/old/note"] {
                #expect(owner(path)?.uid == uid, "\(path): \(String(describing: owner(path)))")
            }
            let log = (try? String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)) ?? ""
            #expect(log.contains("[ProbeApp] read Documents/old/note: ok") && log.contains("[ProbeApp] write Documents/old/new: ok"), "\(log)")
        }
    }

    @Test func aRegistryThatCannotBeMadeFailsTheLaunchClearly() async throws {
        try await withHost(label: "ir", configure: { config in
            config.identities = IdentitySettings(first: 234_000, count: 10, registryDirectory: "/dev/null/ids")
        }) { host in
            let id = try await host.installProbe("com.identity.noregistry")
            do {
                _ = try await host.supervisor.launch(id, background: true, arguments: [])
                Issue.record("launched without an identity")
            } catch {
                #expect("\(error)".contains("cannot create the identity registry /dev/null/ids"), "\(error)")
            }
            #expect(try await host.supervisor.status(id).first?.state == .notRunning)
        }
    }
}
