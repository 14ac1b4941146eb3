import AppHostProtocol
import Foundation
import HostConfig
import TestSupport
import Testing
@testable import Host

/// Whether this machine lets the host make a memory cgroup (else the memory test skips).
let memoryCgroupWritable: Bool = {
    let (made, _) = AppCgroups.make()
    defer { made?.remove() }
    return made?.limitsMemory == true
}()

/// The host config's `"limits"`, enforced on real app processes.
@Suite("Resource limits", .tags(.process), .timeLimit(.minutes(2)), .enabled(if: probeBuilt, "ProbeApp not built: run `swift build` first (scripts/test.sh does)"))
struct ResourceLimitTests {
    /// The soft and hard values of a `/proc/<pid>/limits` row ("Max open files").
    func limit(_ pid: Int32, _ name: String) -> (soft: String, hard: String)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name) }) else { return nil }
        let fields = line.dropFirst(name.count).split(separator: " ")
        guard fields.count >= 2 else { return nil }
        return (String(fields[0]), String(fields[1]))
    }

    func appLog(_ host: TestHost, _ id: BundleID) -> String {
        (try? String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)) ?? ""
    }

    @Test func descriptorAndFileSizeLimitsApplyPerAppWithOverrides() async throws {
        try await withHost(label: "lim", configure: {
            $0.limits = LimitSettings(all: AppLimits(openFiles: 64, fileSize: 1 << 20),
                                      apps: ["com.lim.wide": AppLimits(openFiles: 128)])
        }) { host in
            let id = try await host.installProbe("com.lim.files")
            let wide = try await host.installProbe("com.lim.wide")
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "write-file:Documents/big:3145728"])
            let widePID = try await host.supervisor.launch(wide, background: false, arguments: [])
            #expect(limit(pid, "Max open files")?.soft == "64")
            #expect(limit(pid, "Max open files")?.hard == "64")
            #expect(limit(pid, "Max file size")?.soft == "1048576")
            #expect(limit(widePID, "Max open files")?.soft == "128", "the per-app override")
            #expect(limit(widePID, "Max file size")?.soft == "1048576", "the rest from all apps")
            // Over the file-size limit a write fails with EFBIG; the app goes on.
            #expect(appLog(host, id).contains("wrote 1048576 of 3145728 to Documents/big (EFBIG)"), "\(appLog(host, id))")
            #expect(processExists(pid))
        }
    }

    @Test(.enabled(if: memoryCgroupWritable, "no writable memory cgroup here (not root, or a read-only cgroupfs): memory limits fall back to RLIMIT_AS"))
    func anAppOverItsMemoryLimitIsKilledWithAJetsamReport() async throws {
        try await withHost(label: "mem", configure: { $0.limits = LimitSettings(all: AppLimits(memory: 64 << 20)) }) { host in
            let id = try await host.installProbe("com.lim.memory")
            let other = try await host.installProbe("com.lim.bystander")
            let bystander = try await host.supervisor.launch(other, background: false, arguments: [])
            _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "active", "allocate:256"])
            try await host.waitUntil(id, is: .notRunning)
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.terminationNamespace == "JETSAM")
            #expect(report.signal == SIGKILL)
            #expect(report.reason.contains("per-process-limit") && report.reason.contains("64 MiB"), "\(report.reason)")
            #expect(!appLog(host, id).contains("allocated 256 MiB"))
            #expect(processExists(bystander), "another app is not touched")
            // (In the background since the other came to the front: suspended or on its way.)
            #expect(try await host.supervisor.status(other).first?.state != .notRunning)
            #expect(try await host.supervisor.reports(other).isEmpty)
        }
    }

    @Test func anAppWithinItsMemoryLimitRuns() async throws {
        try await withHost(label: "mem2", configure: { $0.limits = LimitSettings(all: AppLimits(memory: 256 << 20)) }) { host in
            let id = try await host.installProbe("com.lim.fits")
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "allocate:32"])
            #expect(appLog(host, id).contains("allocated 32 MiB"))
            #expect(processExists(pid))
            #expect(try await host.supervisor.reports(id).isEmpty)
        }
    }
}
