import AppHostProtocol
import AppHostSystem
import Foundation
import HostConfig
import Synchronization
import TestSupport
import Testing
@testable import Host

/// Whether this machine lets a test put a memory hog in a memory cgroup and watch the
/// kernel's PSI: root, `/proc/pressure/memory`, and a memory hierarchy (v1, or v2 with
/// the memory controller) for the host's own cgroup.
let memoryHogPossible: Bool = {
    guard geteuid() == 0, FileManager.default.isWritableFile(atPath: "/proc/pressure/memory"),
          let text = try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8) else { return false }
    for line in text.split(separator: "\n") {
        let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { continue }
        if parts[1].split(separator: ",").contains("memory") { return true }
        if parts[0] == "0", parts[1].isEmpty,
           let controllers = try? String(contentsOfFile: "/sys/fs/cgroup\(parts[2] == "/" ? "" : String(parts[2]))/cgroup.controllers", encoding: .utf8),
           controllers.split(whereSeparator: { $0 == " " || $0 == "\n" }).contains("memory") { return true }
    }
    return false
}()

/// The PSI source reacts to a real memory hog: a shell in a 16 MiB memory cgroup that
/// keeps writing a 128 MiB file (its dirty page cache must be written back before it
/// can be reclaimed, so it stalls in reclaim), with the host waiting on a PSI trigger.
@Suite("PSI (real clock)", .tags(.process), .timeLimit(.minutes(2)),
       .enabled(if: memoryHogPossible, "needs root, /proc/pressure/memory and a memory cgroup hierarchy (this machine has none of them or not all)"))
struct PSIHostTests {
    @Test func aMemoryHogInACgroupFiresTheTriggerAndTheHostWarns() async throws {
        let (cgroups, why) = AppCgroups.make()
        let groups = try #require(cgroups, "no memory cgroup after all: \(why ?? "?")")
        defer { groups.remove() }
        let hogGroup = try groups.prepare("psi-hog", memory: 16 << 20, processes: nil)
        try await withHost(label: "psi", configure: {
            $0.memory = MemorySettings(source: .psi)
            // 50 ms stalled within 2 s (without CAP_SYS_RESOURCE, as here, only 2 s multiples are taken).
            $0.memoryPSITriggers = [PSITrigger(line: "some 50000 2000000", level: .warning)]
        }) { host in
            let (past, _, sub) = await host.supervisor.subscribe(bundleIdentifier: nil)
            await host.supervisor.unsubscribe(sub)
            #expect(past.contains { $0.cause.contains("waiting on PSI triggers \"some 50000 2000000\"") }, "\(past.map(\.cause))")
            let stop = host.dir.path + "/hog.stop"
            let file = host.dir.path + "/hog.bin"
            // At most 20 s, and until the test has seen the trigger fire.
            let join = procs(hogGroup.procsFiles)
            let script = "\(join) end=$(($(date +%s) + 20)); while [ ! -e \(stop) ] && [ $(date +%s) -lt $end ]; do dd if=/dev/zero of=\(file) bs=1M count=128 status=none; done; rm -f \(file)"
            let hog = Task.detached { try await Tool.run("/bin/sh", ["-c", script]) }
            let fired = await waitForHostEvent(host, within: .seconds(30)) { $0.kind == .memory && $0.cause.contains("PSI trigger \"some 50000 2000000\" fired") }
            FileManager.default.createFile(atPath: stop, contents: nil)
            let result = try await hog.value
            #expect(result.status == 0, "\(result.stderr)")
            let event = try #require(fired, "the trigger did not fire while the hog ran")
            #expect(event.pressure == .warning)
        }
    }

    func procs(_ files: [String]) -> String {
        files.map { "echo $$ > \($0);" }.joined(separator: " ")
    }

    /// The first host-wide or app event matching `predicate`, waiting at most `timeout` of real time.
    func waitForHostEvent(_ host: TestHost, within timeout: Duration, _ predicate: @escaping @Sendable (HostEvent) -> Bool) async -> HostEvent? {
        let (past, live, sub) = await host.supervisor.subscribe(bundleIdentifier: nil)
        defer { Task { await host.supervisor.unsubscribe(sub) } }
        if let e = past.first(where: predicate) { return e }
        let found = Mutex<HostEvent?>(nil)
        _ = await finishes(within: timeout) {
            for await e in live where predicate(e) {
                found.withLock { $0 = e }
                return
            }
        }
        return found.withLock { $0 }
    }
}
