import AppHostProtocol
import Foundation
import TestSupport
import Synchronization
import Testing
@testable import Host

/// What one app can make the host keep or do is bounded (issue 14); past a bound the app
/// alone is killed, with a report, and the host goes on serving. Each test starts a real
/// app on a host of its own with small bounds.
@Suite("AppBounds", .tags(.process), .timeLimit(.minutes(2)), .enabled(if: probeBuilt, "sample apps not built: run `swift build` first"))
struct AppBoundsTests {
    /// Launches `id` with `arguments`, waits until it has ended, returns its report's reason.
    func endOf(_ host: TestHost, _ id: BundleID, _ arguments: [String]) async throws -> String {
        _ = try? await host.supervisor.launch(id, background: false, arguments: arguments)
        try await host.waitUntil(id, is: .notRunning)
        let reports = try await host.supervisor.reports(id)
        return reports.last.map { "\($0.terminationNamespace ?? "-") \($0.reason)" } ?? "no report"
    }

    @Test func aFloodOfMessagesKillsTheAppWithAReport() async throws {
        try await withHost(label: "bf", configure: { config in
            config.bounds.messageBurst = 300
            config.bounds.messagesPerSecond = 10
            config.bounds.heldTasks = 100_000
        }) { host in
            let id = try await host.installProbe("com.bounds.flood")
            let reason = try await endOf(host, id, ["--on", "launch", "hold-tasks:5000:t"])
            #expect(reason.hasPrefix("APPHOST ") && reason.contains("flooded the host: more than 300 messages at once, or more than 10 a second"), "\(reason)")
            // The events it made are bounded by the burst (and the 10 a second the bucket
            // refills while the test runs), not by the 5,000 it sent.
            let began = await host.events(id).filter { $0.kind == .backgroundTask }.count
            #expect(began < 400, "\(began) task events")
            #expect(try await host.supervisor.status(nil).count == 1, "the host still answers")
        }
    }

    /// The returns of callbacks the host sent are the host's traffic, not the app's: an
    /// app that answers more callbacks than the burst and the rate allow is no flood.
    @Test func returnsOfTheHostsCallbacksAreNotCountedAsAFlood() async throws {
        try await withHost(label: "bc", configure: { config in
            config.bounds.messageBurst = 20
            config.bounds.messagesPerSecond = 1
        }) { host in
            let id = try await host.installProbe("com.bounds.callbacks")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [])
            // 15 home/foreground cycles: 60 callbacks returned, three times the burst.
            for _ in 0..<15 {
                try await host.supervisor.background(id)
                try await host.waitUntil(id, is: .suspended, timeout: .seconds(10))
                try await host.supervisor.foreground(id)
                try await host.waitUntil(id, is: .active, timeout: .seconds(10))
            }
            // The last didBecomeActive's return may be logged after the state said active:
            // wait for the 62nd return (2 at launch, 4 per cycle).
            let returns = Mutex(0)
            let last = await host.waitForEvent(id, timeout: .seconds(10)) { e in
                guard e.kind == .callback && e.cause.hasSuffix("returned") else { return false }
                return returns.withLock { $0 += 1; return $0 >= 62 }
            }
            #expect(last != nil, "\(returns.withLock { $0 }) callbacks returned")
            #expect(try await host.supervisor.reports(id).isEmpty, "no report: the app was not killed")
            #expect(try await host.supervisor.status(nil).first?.pid == pid, "still its first process")
        }
    }

    @Test func holdingMoreTasksThanTheBoundKillsTheApp() async throws {
        try await withHost(label: "bt", configure: { $0.bounds.heldTasks = 50 }) { host in
            let id = try await host.installProbe("com.bounds.tasks")
            let reason = try await endOf(host, id, ["--on", "launch", "hold-tasks:51:t"])
            #expect(reason.contains("holds more than 50 background tasks at once"), "\(reason)")
            // Its report file is whole (no .tmp left) and the host's alone, whatever the umask.
            let files = try FileManager.default.contentsOfDirectory(atPath: host.dir.path + "/reports")
            #expect(files.count == 1 && files[0].hasSuffix(".json"), "\(files)")
            let mode = try FileManager.default.attributesOfItem(atPath: host.dir.path + "/reports/" + files[0])[.posixPermissions] as? Int
            #expect(mode == 0o600)
        }
    }

    @Test func aLongTaskNameIsCutWhereTheBoundSays() async throws {
        try await withHost(label: "bn", configure: { $0.bounds.taskNameLength = 40 }) { host in
            let id = try await host.installProbe("com.bounds.name")
            let long = String(repeating: "n", count: 4_000)
            _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "begin-task:\(long)"])
            let status = try #require(try await host.supervisor.status(id).first)
            #expect(status.backgroundTasks == [String(repeating: "n", count: 40) + "…"], "\(status.backgroundTasks)")
            let event = try #require(await host.events(id).first { $0.kind == .backgroundTask })
            #expect(event.cause.count < 100, "\(event.cause)")
        }
    }

    @Test func anAppThatReadsNoAnswerIsKilledNotBuffered() async throws {
        try await withHost(label: "bu", configure: { $0.bounds.unreadBytes = 64 << 10 }) { host in
            let id = try await host.installProbe("com.bounds.unread")
            let reason = try await endOf(host, id, ["--raw-unread", "10000"])
            #expect(reason.hasPrefix("APPHOST ") && reason.contains("does not read what the host sends: more than 64 KiB"), "\(reason)")
            #expect(try await host.supervisor.status(nil).count == 1, "the host still answers")
        }
    }
}
