import AppHostProtocol
import AppHostSystem
import Foundation
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

/// The processes an app starts are the app's: inside its cgroup from their first
/// instruction, stopped while it is suspended, gone when it is; the `processes` limit
/// holds them; an OOM kill of one of them is not the app's jetsam.
@Suite("App processes", .serialized, .timeLimit(.minutes(2)),
       .enabled(if: probeBuilt, "ProbeApp not built: run `swift build` first (scripts/test.sh does)"),
       .enabled(if: appCgroupsAvailable, "the host cannot make per-app cgroups here (not root, or a read-only cgroupfs)"))
struct AppProcessesTests {
    func appLog(_ host: TestHost, _ id: String) -> String {
        (try? String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)) ?? ""
    }

    /// The pids of the log's `[ProbeApp] forked K of N: PID,...` line.
    func forkedPIDs(_ log: String) -> [Int32] {
        guard let line = log.split(separator: "\n").first(where: { $0.hasPrefix("[ProbeApp] forked ") }),
              let colon = line.firstIndex(of: ":") else { return [] }
        return line[line.index(after: colon)...].split(separator: " ").first.map {
            $0.split(separator: ",").compactMap { Int32($0) }
        } ?? []
    }

    /// Exited: no process, or a zombie nobody has reaped yet.
    /// Whether `pid` (the app's child, not ours) reaches state T within 2 s. The host sends
    /// SIGSTOP to it before the app's own, but only the app's stop is confirmed (by
    /// `waitid`): a process stops in its own context, and the kernel reports the stop of
    /// a process only to its parent, so for a grandchild there is no event to wait on.
    /// Reading /proc until then, bounded, is the only way to see it.
    func stopsSoon(_ pid: Int32) async -> Bool {
        let clock = ContinuousClock()
        let end = clock.now + .seconds(2)
        while clock.now < end {
            if kernelState(pid) == "T" { return true }
            await Task.yield()
        }
        return kernelState(pid) == "T"
    }

    func exited(_ pid: Int32) -> Bool {
        guard let state = kernelState(pid) else { return true }
        return state == "Z" || state == "X"
    }

    @Test func aForkedChildIsInTheAppsCgroupAndDiesWithIt() async throws {
        let host = try TestHost(label: "fork")
        let id = try await host.installProbe("com.proc.fork")
        let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "fork:2"])
        let children = forkedPIDs(appLog(host, id))
        #expect(children.count == 2, "\(appLog(host, id))")
        let cgroup = try #require(await host.supervisor.runtimes[id]?.cgroup, "the app has no cgroup")
        #expect(Set(cgroup.members) == Set([pid] + children), "the app and its children, no one else")
        for child in children {
            let text = (try? String(contentsOfFile: "/proc/\(child)/cgroup", encoding: .utf8)) ?? ""
            for directory in cgroup.directories {
                let relative = directory.split(separator: "/").suffix(2).joined(separator: "/")
                #expect(text.contains("/" + relative + "\n"), "child \(child) is in \(directory): \(text)")
            }
        }

        try await host.supervisor.terminate(id)
        for child in children {
            #expect(exited(child), "child \(child) outlived the app (state \(kernelState(child).map(String.init) ?? "?"))")
        }
        #expect(cgroup.members.isEmpty)
        await host.stop()
    }

    @Test func anAppsChildrenAreStoppedWhileItIsSuspended() async throws {
        let host = try TestHost(label: "stop")
        let id = try await host.installProbe("com.proc.stop")
        let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "fork:1"])
        let child = try #require(forkedPIDs(appLog(host, id)).first, "\(appLog(host, id))")
        #expect(kernelState(child) != "T")

        try await host.supervisor.background(id)
        await host.supervisor.waitUntil(id, is: .suspended)
        #expect(kernelState(pid) == "T", "the app itself is stopped (confirmed by the kernel)")
        #expect(await stopsSoon(child), "its child is stopped too (state \(kernelState(child).map(String.init) ?? "?"))")
        let signals = await host.events(id).filter { $0.kind == .signal }.map(\.cause)
        #expect(signals.contains { $0.contains("other processes: \(child)") }, "\(signals)")

        try await host.supervisor.foreground(id)
        await host.supervisor.waitUntil(id, is: .active)
        #expect(kernelState(pid) != "T")
        #expect(kernelState(child) != "T", "its child runs again")

        // Killed by the host (a terminate that the app does not answer is not needed: a
        // kill of a suspended app is the same path): the child goes with it.
        try await host.supervisor.background(id)
        await host.supervisor.waitUntil(id, is: .suspended)
        try await host.supervisor.terminate(id)
        #expect(exited(child), "the child of a terminated suspended app is gone")
        await host.stop()
    }

    @Test(.enabled(if: pidsControllerPresent, "no pids controller here (or not root): the processes limit is not enforced"))
    func theProcessesLimitStopsForksAndThreads() async throws {
        let host = try TestHost(label: "pids") { $0.limits = LimitSettings(all: AppLimits(processes: 32)) }
        let id = try await host.installProbe("com.proc.pids")
        _ = try await host.supervisor.launch(id, background: false, arguments: [
            "--on", "launch", "fork-limit:64", "--on", "launch", "threads:64", "--on", "launch", "print:still-here",
        ])
        let log = appLog(host, id)
        // As the app sees it: fork(2) and pthread_create(3) fail with EAGAIN past the limit,
        // and the app goes on.
        let forks = log.split(separator: "\n").first { $0.hasPrefix("[ProbeApp] fork-limit: ") }.map(String.init) ?? ""
        let threads = log.split(separator: "\n").first { $0.hasPrefix("[ProbeApp] threads: ") }.map(String.init) ?? ""
        #expect(forks.hasSuffix("of 64 (EAGAIN)"), "\(log)")
        #expect(threads.hasSuffix("of 64 (EAGAIN)"), "\(log)")
        #expect(log.contains("still-here"))
        let cgroup = try #require(await host.supervisor.runtimes[id]?.cgroup)
        let pidsMax = cgroup.directories.map { $0 + "/pids.max" }.first { FileManager.default.fileExists(atPath: $0) }
        #expect(pidsMax.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } == "32\n")
        // The event line says where the limits live, readably.
        let (past, _, sub) = await host.supervisor.subscribe(bundleIdentifier: nil)
        await host.supervisor.unsubscribe(sub)
        let service = past.filter { $0.cause.hasPrefix("per-app cgroups: ") }.map(\.cause)
        let line = try #require(service.first, "no per-app cgroups line")
        #expect(!line.contains("Optional"), "\(line)")
        #expect(line.contains("process limits: yes"), "\(line)")
        await host.stop()
    }

    @Test(.enabled(if: memoryCgroupWritable, "no writable memory cgroup here"))
    func aUserTerminateAfterAChildsOOMKillIsNotJetsam() async throws {
        let host = try TestHost(label: "oom", grace: .milliseconds(300)) { $0.limits = LimitSettings(all: AppLimits(memory: 64 << 20)) }
        let id = try await host.installProbe("com.proc.oom")
        // The child goes over the limit and the OOM killer takes it; the app lives on, and
        // does not answer willTerminate, so the host kills it with SIGKILL.
        _ = try await host.supervisor.launch(id, background: false, arguments: [
            "--on", "launch", "fork-allocate:256", "--on", "terminate", "block:forever",
        ])
        #expect(appLog(host, id).contains("allocating 256 MiB: SIGKILL"), "\(appLog(host, id))")
        let cgroup = try #require(await host.supervisor.runtimes[id]?.cgroup)
        #expect(cgroup.oomKills >= 1, "the child was OOM-killed in the app's cgroup")

        try await host.supervisor.terminate(id)
        let exits = await host.events(id).filter { $0.kind == .exited }.map(\.cause)
        #expect(exits.last == "SIGKILL", "the host killed it: \(exits)")
        let reports = try await host.supervisor.reports(id)
        #expect(!reports.contains { $0.terminationNamespace == "JETSAM" },
                "a user terminate is not jetsam: \(reports.map(\.reason))")
        await host.stop()
    }
}
