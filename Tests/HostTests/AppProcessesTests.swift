import AppHostProtocol
import AppHostSystem
import Foundation
import HostConfig
import TestSupport
import Testing
@testable import Host

/// Whether this machine lets the host make per-app cgroups (root, a writable cgroupfs).
let appCgroupsAvailable: Bool = {
    let (made, _) = AppCgroups.make()
    defer { made?.remove() }
    return made != nil
}()

/// Whether this process is under a `pids` controller (a v1 `pids` hierarchy, or cgroup v2
/// offering `pids`), found without the host's own detection, which is under test.
let pidsControllerPresent: Bool = {
    guard getuid() == 0, let text = try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8) else { return false }
    for line in text.split(separator: "\n") {
        let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { continue }
        if parts[1].split(separator: ",").contains("pids") {
            return FileManager.default.fileExists(atPath: "/sys/fs/cgroup/pids/cgroup.procs")
        }
        if parts[0] == "0", parts[1].isEmpty,
           let controllers = try? String(contentsOfFile: "/sys/fs/cgroup/cgroup.controllers", encoding: .utf8),
           controllers.split(whereSeparator: \.isWhitespace).contains("pids") {
            return true
        }
    }
    return false
}()

/// What an app may start, as on iOS: threads, never a process. `fork` and
/// `posix_spawn` fail with EPERM (seccomp) and the app goes on; the `processes` limit
/// (a pids cgroup) caps its threads; an app with a limit is in its cgroup from its
/// first instruction, alone in it; an app without one has none.
@Suite("App processes", .tags(.process), .serialized, .timeLimit(.minutes(2)),
       .enabled(if: probeBuilt, "ProbeApp not built: run `swift build` first (scripts/test.sh does)"))
struct AppProcessesTests {
    func appLog(_ host: TestHost, _ id: BundleID) -> String {
        (try? String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)) ?? ""
    }

    /// The children of every thread of `pid` (`/proc/PID/task/TID/children`), or nil
    /// where the kernel does not list them (CONFIG_PROC_CHILDREN).
    func children(of pid: Int32) -> [Int32]? {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return nil }
        var all: [Int32] = []
        for task in tasks {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8) else { return nil }
            all += text.split(separator: " ").compactMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
        return all
    }

    @Test func anAppCannotForkOrSpawnAndGoesOn() async throws {
        try await withHost(label: "fork") { host in
            let id = try await host.installProbe("com.proc.fork")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "fork:2", "--on", "launch", "fork-allocate:1", "--on", "launch", "spawn:/bin/true",
                "--on", "launch", "threads:8", "--on", "launch", "print:still-here",
            ])
            let log = appLog(host, id)
            // As iOS's sandbox refuses them: fork(2) and posix_spawn(3) fail with EPERM.
            #expect(log.contains("[ProbeApp] forked 0 of 2 (EPERM)\n"), "\(log)")
            #expect(log.contains("[ProbeApp] fork-allocate: EPERM\n"), "\(log)")
            #expect(log.contains("[ProbeApp] spawn /bin/true: EPERM\n"), "\(log)")
            // Threads are made as ever, and the app goes on.
            #expect(log.contains("[ProbeApp] threads: started 8 of 8\n"), "\(log)")
            #expect(log.contains("still-here"))
            #expect(processExists(pid))
            #expect(try await host.supervisor.status(id).first?.state == .active)
            if let children = children(of: pid) { #expect(children.isEmpty, "the app has no child: \(children)") }
        }
    }

    @Test(.enabled(if: pidsControllerPresent, "no pids controller here (or not root): the processes limit is not enforced"))
    func theProcessesLimitStopsThreadsPastIt() async throws {
        try await withHost(label: "pids", configure: { $0.limits = LimitSettings(all: AppLimits(processes: 32)) }) { host in
            let id = try await host.installProbe("com.proc.pids")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "threads:64", "--on", "launch", "fork-limit:4", "--on", "launch", "print:still-here",
            ])
            let log = appLog(host, id)
            // As the app sees it: pthread_create(3) fails with EAGAIN past the limit (the
            // runtime's own threads count too), and the app goes on.
            let threads = log.split(separator: "\n").first { $0.hasPrefix("[ProbeApp] threads: ") }.map(String.init) ?? ""
            #expect(threads.hasSuffix("of 64 (EAGAIN)"), "\(log)")
            let started = Int(threads.dropFirst("[ProbeApp] threads: started ".count).prefix { $0.isNumber }) ?? -1
            #expect((1..<32).contains(started), "\(threads)")
            // A fork fails with EPERM before the limit is asked.
            #expect(log.contains("[ProbeApp] fork-limit: forked 0 of 4 (EPERM)\n"), "\(log)")
            #expect(log.contains("still-here"))
            let cgroup = try #require(await host.supervisor.cgroup(of: id))
            let pidsMax = cgroup.directories.map { $0 + "/pids.max" }.first { FileManager.default.fileExists(atPath: $0) }
            #expect(pidsMax.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } == "32\n")
            // The event line says where the limits live, readably.
            let (past, _, sub) = await host.supervisor.subscribe(bundleIdentifier: nil)
            await host.supervisor.unsubscribe(sub)
            let service = past.filter { $0.cause.hasPrefix("per-app cgroups: ") }.map(\.cause)
            let line = try #require(service.first, "no per-app cgroups line")
            #expect(!line.contains("Optional"), "\(line)")
            #expect(line.contains("process limits: yes"), "\(line)")
        }
    }

    @Test func anAppWithoutAMemoryOrProcessesLimitHasNoCgroup() async throws {
        // The standard limits (descriptors only): no cgroup to join at launch.
        try await withHost(label: "nocg", configure: { $0.limits = LimitSettings(all: AppLimits(openFiles: 64, fileSize: 1 << 20)) }) { host in
            let id = try await host.installProbe("com.proc.nocgroup")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [])
            #expect(await host.supervisor.cgroup(of: id) == nil)
            let text = (try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8)) ?? ""
            #expect(!text.contains("/apphost-"), "the app is in no per-app cgroup: \(text)")
            let (past, _, sub) = await host.supervisor.subscribe(bundleIdentifier: nil)
            await host.supervisor.unsubscribe(sub)
            #expect(!past.contains { $0.cause.hasPrefix("per-app cgroups") }, "none was made")
        }
    }

    @Test(.enabled(if: appCgroupsAvailable, "the host cannot make per-app cgroups here (not root, or a read-only cgroupfs)"))
    func anAppWithALimitIsAloneInItsCgroupFromItsFirstInstruction() async throws {
        try await withHost(label: "cg", configure: { $0.limits = LimitSettings(all: AppLimits(memory: 256 << 20)) }) { host in
            let id = try await host.installProbe("com.proc.cgroup")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [])
            let cgroup = try #require(await host.supervisor.cgroup(of: id), "an app with a memory limit has a cgroup")
            // The child joined before execve (no move after the spawn), so the cgroup holds
            // the app and nothing else: not the host, not a process of the spawn.
            #expect(cgroup.members == [pid], "the app, alone: \(cgroup.members)")
            let text = (try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8)) ?? ""
            for directory in cgroup.directories {
                let relative = directory.split(separator: "/").suffix(2).joined(separator: "/")
                #expect(text.contains("/" + relative + "\n"), "the app is in \(directory): \(text)")
            }
            try await host.supervisor.terminate(id)
            #expect(cgroup.members.isEmpty)
        }
    }
}
