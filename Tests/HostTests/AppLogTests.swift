import AppHostProtocol
import Foundation
import Testing
@testable import Host

/// An app's stdout and stderr reach its log through the host, bounded (issue 32: an app
/// wrote 3 GiB to stdout in 13 s, and filled a small state directory in 3 s): the file is
/// rotated at its size, output past the app's rate or the logs' budget is dropped, and
/// the log says how much. Waits on the app's exit, which the host records only once the
/// pipe is read to its end.
@Suite(.tags(.process), .timeLimit(.minutes(3)))
struct AppLogTests {
    func size(_ path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
    }

    @Test func aFloodIsRotatedAndCutToTheRateWithANotice() async throws {
        var limits = AppLogLimits()
        limits.fileBytes = 256 << 10
        limits.burstBytes = 512 << 10
        limits.bytesPerSecond = 64 << 10
        limits.totalBytes = 64 << 20
        try await withHost(label: "logs", configure: { $0.appLogs = limits }) { host in
            let id = try await host.installProbe("com.logs.flood")
            _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "log-flood:8"])
            try await host.supervisor.terminate(id)
            let path = host.dir.path + "/logs/\(id).log"
            let log = try String(contentsOfFile: path, encoding: .utf8)
            let rotated = try String(contentsOfFile: path + ".1", encoding: .utf8)
            // 8 MiB written at once: the burst (512 KiB) and what the rate let through since,
            // in files of at most 256 KiB (the notices' lines beside).
            #expect(size(path) <= (256 << 10) + 1024, "\(size(path))")
            #expect(size(path + ".1") <= (256 << 10) + 1024, "\(size(path + ".1"))")
            #expect((log + rotated).contains("bytes of \(id)'s output were dropped: over its rate of 65536 bytes a second"), "\(log.suffix(400))")
            // Everything after the flood is still there: the app's own line, past the drops.
            #expect(log.contains("[ProbeApp] wrote 8388608 bytes to stdout"), "\(log.suffix(400))")
        }
    }

    @Test func theLogsBudgetHoldsForEveryApp() async throws {
        var limits = AppLogLimits()
        limits.fileBytes = 4 << 20
        limits.burstBytes = 64 << 20
        limits.bytesPerSecond = 64 << 20
        limits.totalBytes = 300 << 10
        try await withHost(label: "budget", configure: { $0.appLogs = limits }) { host in
            var ids: [BundleID] = []
            let names: [BundleID] = ["com.logs.a", "com.logs.b"]
            for name in names {
                let id = try await host.installProbe(name)
                _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "log-flood:1"])
                try await host.supervisor.terminate(id)
                ids.append(id)
            }
            let total = ids.map { size(host.dir.path + "/logs/\($0).log") }.reduce(0, +)
            #expect(total <= 300 << 10, "\(total)")
            let second = try String(contentsOfFile: host.dir.path + "/logs/\(ids[1]).log", encoding: .utf8)
            #expect(second.contains("the apps' logs had used their budget of 307200 bytes") || total == 300 << 10,
                    "\(second.suffix(300))")
        }
    }
}
