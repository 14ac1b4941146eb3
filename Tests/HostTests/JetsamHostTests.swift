import AppHostProtocol
import AppHostSystem
import Foundation
import HostConfig
import TestSupport
import Testing
@testable import Host

private let MiB: UInt64 = 1 << 20

/// Device memory through real processes on the virtual clock: ProbeApps that allocate
/// (`allocate:MIB` touches the pages and tells the host), a device of a few hundred MiB,
/// memory warnings that reach only the apps running code, jetsam by band and recency,
/// JETSAM reports, the switcher keeping a killed app, a cold launch with afterJetsam.
@Suite("Jetsam (virtual clock)", .tags(.process, .virtualClock), .timeLimit(.minutes(2)),
       .enabled(if: probeBuilt, "sample apps not built: run `swift build` first (scripts/test.sh does)"))
struct JetsamHostTests {
    func withDevice<T>(_ device: UInt64, _ body: (TestHost) async throws -> T) async throws -> T {
        try await withHost(label: "mem", clock: .virtual, configure: { $0.memory.device = device }, body)
    }

    func log(_ host: TestHost, _ id: BundleID) -> String {
        (try? String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)) ?? ""
    }

    /// Launches `id` in front with `arguments`, sends it home and waits until it is suspended.
    func suspended(_ host: TestHost, _ id: BundleID, _ arguments: [String]) async throws {
        _ = try await host.supervisor.launch(id, background: false, arguments: arguments)
        try await host.supervisor.background(id)
        try await host.waitUntil(id, is: .suspended)
    }

    @Test func allocateRaisesTheFootprintStatusShows() async throws {
        try await withDevice(512 * MiB) { host in
            let id = try await host.installProbe("com.mem.grow")
            _ = try await host.supervisor.launch(id, background: false, arguments: [])
            let small = try #require(try await host.supervisor.status(id).first?.footprint)
            #expect(small > 1 * MiB && small < 64 * MiB, "a probe's runtime: \(small)")
            _ = try await host.supervisor.launch(id, background: false, arguments: [], terminateRunning: true)
            try await host.supervisor.terminate(id)
            _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "allocate:96"])
            let big = try #require(try await host.supervisor.status(id).first?.footprint)
            #expect(big >= 96 * MiB && big < 160 * MiB, "96 MiB touched: \(big)")
            let shown = try await host.supervisor.modeCommand(.deviceShow)
            #expect(shown.contains("of 512 MiB in use by apps") && shown.contains("pressure normal"), "\(shown)")
        }
    }

    @Test func warningsReachOnlyTheAppsRunningCode() async throws {
        try await withDevice(512 * MiB) { host in
            let args = ["--on", "memory-warning", "print:[ProbeApp] warned"]
            let frozen = try await host.installProbe("com.mem.frozen")
            let front = try await host.installProbe("com.mem.front")
            let busy = try await host.installProbe("com.mem.busy")
            try await suspended(host, frozen, args)
            _ = try await host.supervisor.launch(busy, background: true, arguments: args + ["--on", "launch", "begin-task:work"])
            _ = try await host.supervisor.launch(front, background: false, arguments: args)
            let said = try await host.supervisor.modeCommand(.deviceMemory(.warning))
            #expect(said.contains("pressure warning") && said.contains("memory warnings sent"), "\(said)")
            for id in [front, busy] {
                let e = await host.waitForEvent(id) { $0.kind == .callback && $0.callback == "didReceiveMemoryWarning" }
                #expect(e != nil)
                #expect(log(host, id).contains("[ProbeApp] didReceiveMemoryWarning"), "\(id)")
            }
            let warned = await host.events(frozen).filter { $0.callback == "didReceiveMemoryWarning" }
            #expect(warned.isEmpty, "a suspended app gets nothing: \(warned.map(\.cause))")
            #expect(!log(host, frozen).contains("didReceiveMemoryWarning"))
            // Each warning is recorded with typed fields.
            let memory = await host.events(front).filter { $0.kind == .memory }
            #expect(memory.first?.pressure == .warning && memory.first?.footprint != nil, "\(memory)")
            #expect(try await host.supervisor.status(frozen).first?.state == .suspended, "not woken either")
        }
    }

    @Test func jetsamKillsBySuspendedRecencyThenBandAndTheSwitcherKeepsTheApps() async throws {
        // 512 MiB: critical from 486 MiB. Two suspended apps of 150 MiB, a background app
        // holding a task (100 MiB), then the front app allocates 250: about 680 MiB with the
        // runtimes; less the older suspended app about 520, less the newer about 365.
        try await withDevice(512 * MiB) { host in
            let older = try await host.installProbe("com.mem.older")
            let newer = try await host.installProbe("com.mem.newer")
            let worker = try await host.installProbe("com.mem.worker")
            let front = try await host.installProbe("com.mem.front")
            try await suspended(host, older, ["--on", "launch", "allocate:150"])
            _ = try await host.supervisor.advanceClock(by: .seconds(1))
            try await suspended(host, newer, ["--on", "launch", "allocate:150"])
            _ = try await host.supervisor.advanceClock(by: .seconds(1))
            _ = try await host.supervisor.launch(worker, background: true, arguments: ["--on", "launch", "allocate:100", "--on", "launch", "begin-task:sync"])
            _ = try await host.supervisor.launch(front, background: false, arguments: ["--on", "active", "allocate:250"])
            // The front app's cue: critical, so the suspended apps go, least recently used first.
            try await host.waitUntil(older, is: .notRunning)
            try await host.waitUntil(newer, is: .notRunning)
            #expect(try await host.supervisor.status(worker).first?.state == .background, "below the critical threshold after two")
            #expect(try await host.supervisor.status(front).first?.state == .active)
            let olderKill = try #require(await host.events(older).first { $0.kind == .memory && $0.band != nil })
            let newerKill = try #require(await host.events(newer).first { $0.kind == .memory && $0.band != nil })
            #expect(olderKill.seq < newerKill.seq, "least recently used first")
            #expect(olderKill.band == .suspended && (olderKill.footprint ?? 0) >= 150 * MiB)
            for id in [older, newer] {
                let report = try #require(try await host.supervisor.reports(id).last)
                #expect(report.terminationNamespace == "JETSAM")
                #expect(report.terminationCode == nil)
                #expect(report.reason.hasPrefix("vm-pageshortage"))
                #expect(report.jetsamBand == "suspended")
                #expect((report.footprint ?? 0) >= 150 * MiB, "\(String(describing: report.footprint))")
                #expect(report.exceptionType == "EXC_CRASH (SIGKILL)")
            }
            // A reported critical frees one more each time: the background app, then the front one.
            let next = try await host.supervisor.modeCommand(.deviceMemory(.critical))
            #expect(next.contains("jetsam killed \(worker) (band background"), "\(next)")
            try await host.waitUntil(worker, is: .notRunning)
            #expect(try await host.supervisor.status(front).first?.state == .active)
            #expect(try await host.supervisor.reports(worker).last?.jetsamBand == "background")
            _ = try await host.supervisor.modeCommand(.deviceMemory(.normal))

            // The switcher still shows the apps that were in front, with their snapshots.
            let switcher = await host.supervisor.switcher().map(\.bundleIdentifier)
            #expect(switcher.contains(older) && switcher.contains(newer), "\(switcher)")
            #expect(await host.supervisor.switcher().first { $0.bundleIdentifier == older }?.snapshot != nil)

            // Brought back from the switcher: launched cold, told so, with its last arguments.
            try await host.supervisor.foreground(older)
            try await host.waitUntil(older, is: .active)
            #expect(log(host, older).contains("[ProbeApp] launched after jetsam (LaunchOptions.afterJetsam)"))
            #expect(log(host, older).components(separatedBy: "allocated 150 MiB").count == 3, "its arguments again")
            // A second launch is an ordinary one.
            try await host.supervisor.terminate(older)
            _ = try await host.supervisor.launch(older, background: false, arguments: [])
            #expect(log(host, older).components(separatedBy: "launched after jetsam").count == 2)
        }
    }

    @Test func aFloodOfFootprintCuesIsReadAtTheBound() async throws {
        try await withHost(label: "cue", clock: .virtual, configure: { $0.bounds.footprintCues = 4 }) { host in
            let id = try await host.installProbe("com.mem.cues")
            // Fifty 2 MiB allocations in one callback: fifty cues at once, each moving the resident set.
            let args = (0..<50).flatMap { _ in ["--on", "launch", "allocate:2"] }
            _ = try await host.supervisor.launch(id, background: false, arguments: args)
            let (taken, dropped) = await (host.supervisor.memory.device.cuesTaken, host.supervisor.memory.device.cuesDropped)
            #expect(taken + dropped == 50, "every cue counted: \(taken) + \(dropped)")
            // The bound is in host time: on the virtual clock no time passes in one callback,
            // so the burst of 4 is taken and the rest dropped, however slow the machine.
            #expect(taken == 4, "\(taken) cues acted on, the burst is 4")
            #expect(await host.supervisor.memory.device.reads <= taken + 2, "a read per cue acted on at most, and the state changes'")
            #expect(try await host.supervisor.status(id).first?.state == .active, "a cue past the bound is dropped, not the app")
        }
    }

    @Test func aMissingPSIFileIsSaidAtStartAndTheComputedSourceRuns() async throws {
        try await withHost(label: "psi", clock: .virtual, configure: {
            $0.memory = MemorySettings(device: 128 * MiB, source: .psi)
            $0.memoryPSIPath = "/nonexistent/pressure/memory"
        }) { host in
            let (past, _, sub) = await host.supervisor.subscribe(bundleIdentifier: nil)
            await host.supervisor.unsubscribe(sub)
            let warning = past.first { $0.kind == .warning && $0.cause.contains("memory pressure: cannot use PSI") }
            #expect(warning?.cause.contains("/nonexistent/pressure/memory: cannot read") == true, "\(past.map(\.cause))")
            #expect(warning?.cause.contains("computes pressure from the apps' footprints alone") == true)
            // The computed source works: a 160 MiB app on a 128 MiB device is critical, and
            // jetsam ends the only app there is, the one in front.
            let id = try await host.installProbe("com.mem.alone")
            _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "active", "allocate:160"])
            let kill = await host.waitForEvent(id) { $0.kind == .memory && $0.band != nil }
            #expect(kill?.band == .foreground)
            try await host.waitUntil(id, is: .notRunning)
        }
    }

    @Test func aPSITriggerTheKernelRefusesIsSaidAtStart() async throws {
        try await withHost(label: "psi2", clock: .virtual, configure: {
            $0.memory = MemorySettings(device: 256 * MiB, source: .psi)
            $0.memoryPSIPath = "/proc/pressure/memory"
            $0.memoryPSITriggers = [PSITrigger(line: "some 1000 100000", level: .warning)]
        }) { host in
            let (past, _, sub) = await host.supervisor.subscribe(bundleIdentifier: nil)
            await host.supervisor.unsubscribe(sub)
            let warning = past.first { $0.kind == .warning && $0.cause.contains("memory pressure: cannot use PSI") }
            #expect(warning != nil, "\(past.map(\.cause))")
        }
    }
}

/// Bad device-memory input at the command line: the daemon refuses to start, naming the key.
@Suite("device memory (CLI)", .tags(.process), .timeLimit(.minutes(3)),
       .enabled(if: productBuilt("apphost"), "apphost not built: run `swift build` first"))
struct DeviceMemoryCLITests {
    @Test func aDeviceSizeThatDoesNotParseStopsTheDaemonAtStartNamingTheKey() async throws {
        let dir = try TempDir("mem-cli")
        defer { dir.remove() }
        let config = dir.path + "/c.json"
        try #"{"memory": {"device": "3 GiBs"}}"#.write(toFile: config, atomically: true, encoding: .utf8)
        let r = await apphost(["daemon", "--config", config, "--state-dir", dir.path + "/s"])
        #expect(r.status == 64, "usage error: \(r)")
        #expect(r.stderr.contains("\(config): memory.device: unknown unit \"gibs\" in \"3 GiBs\""), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/s/control.sock"), "no host started")
    }

    @Test func anUnknownLevelIsAUsageError() async throws {
        let r = await apphost(["device", "memory", "panic", "--state-dir", "/nonexistent"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("normal") && r.stderr.contains("critical"), "\(r.stderr)")
    }
}
