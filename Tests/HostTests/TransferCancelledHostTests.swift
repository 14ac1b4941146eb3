import AppHostProtocol
import Foundation
import TestSupport
import Testing
@testable import Host

/// A user terminate cancels the app's background transfers, and the app hears of each
/// when it next makes the session: `didCompleteWithError` with `NSURLErrorCancelled`
/// and `NSURLErrorBackgroundTaskCancelledReasonKey` = 0 (userForceQuitApplication),
/// through ProbeApp, the host and the real transfer daemon, across a host restart; and
/// Background App Refresh turned off, which cancels the discretionary ones (reason 1).
@Suite("Transfers cancelled by a user terminate, through the host", .tags(.process), .timeLimit(.minutes(2)),
       .enabled(if: probeBuilt && transferDaemonBuilt, "ProbeApp or apphost-transferd not built: run `swift build` first (scripts/test.sh does)"))
struct TransferCancelledHostTests {
    static let reported = "didCompleteWithError(task 1, cancelled, userForceQuitApplication)"
    static let line = "[ProbeApp] task 1 completed error=cancelled code=-999 NSURLErrorBackgroundTaskCancelledReasonKey=0 (userForceQuitApplication)"

    func log(_ host: TestHost, _ id: BundleID) -> String {
        (try? String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)) ?? ""
    }

    @Test func theCancellationIsReportedAtTheNextLaunchEvenAfterAHostRestart() async throws {
        try await withStateDirectory("txq") { dir in
            let id = try await withHost(directory: dir, configure: patientLaunch) { first in
                let id = try await first.installProbe("com.tx.forcequit")
                // No network: the download waits in the daemon, nothing finishes by itself.
                _ = try await first.supervisor.modeCommand(.deviceNetwork(.none))
                _ = try await first.supervisor.launch(id, background: false, arguments: [
                    "--on", "launch", "url-session:s", "--on", "launch", "download:s:http://downloads.example.invalid/big.bin",
                ])
                _ = await first.waitForEvent(id) { $0.transfer == .queued }
                try await first.supervisor.terminate(id)
                #expect(await first.waitForEvent(id) { $0.transfer == .cancelledByUser } != nil)
                let store = try Store(path: first.dir.path + "/apphost.sqlite")
                #expect(try store.transfers().isEmpty)
                #expect(try store.cancelledTransfers().map(\.reason) == [.userForceQuitApplication])
                return id
            }

            // The host stopped between the terminate and the next launch: the row is what remains.
            try await withHost(reopening: dir, configure: patientLaunch) { second in
                _ = try await second.supervisor.launch(id, background: false, arguments: ["--on", "launch", "url-session:s"])
                // The delegate returned it (a `callback` event is written on the return) ...
                #expect(await second.waitForEvent(id) { $0.kind == .callback && $0.callback == Self.reported } != nil)
                let store = try Store(path: second.dir.path + "/apphost.sqlite")
                // ... so its row is gone (by the end of that step: the terminate comes after).
                try await second.supervisor.terminate(id)
                try await second.waitUntil(id, is: .notRunning)
                #expect(try store.cancelledTransfers().isEmpty)
                #expect(log(second, id).contains("[ProbeApp] url-session s: 0 tasks"))
                #expect(log(second, id).contains(Self.line), "\(log(second, id))")

                // Heard once: a later launch hears nothing more.
                _ = try await second.supervisor.launch(id, background: false, arguments: ["--on", "launch", "url-session:s"])
                try await second.supervisor.terminate(id)
                try await second.waitUntil(id, is: .notRunning)
                #expect(await second.callbacks(id).filter { $0 == Self.reported }.count == 1)
            }
        }
    }

    /// Background App Refresh turned off for the app cancels its discretionary transfers
    /// (URLSession's `backgroundUpdatesDisabled`, reason 1), reported at once to the app
    /// that runs; a transfer of a non-discretionary session goes on.
    @Test func refreshTurnedOffCancelsTheDiscretionaryTransfersOnly() async throws {
        try await withHost(label: "txr", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.tx.refreshoff")
            // No network: the downloads wait in the daemon, nothing finishes by itself.
            _ = try await host.supervisor.modeCommand(.deviceNetwork(.none))
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:d:discretionary", "--on", "launch", "download:d:http://downloads.example.invalid/a.bin",
                "--on", "launch", "url-session:u", "--on", "launch", "download:u:http://downloads.example.invalid/b.bin",
            ])
            _ = await host.waitForEvent(id) { $0.transfer == .queued && $0.session == "d" }
            _ = await host.waitForEvent(id) { $0.transfer == .queued && $0.session == "u" }
            _ = try await host.supervisor.modeCommand(.settingsBackgroundRefresh(bundleIdentifier: id, on: false))
            #expect(await host.waitForEvent(id) { $0.transfer == .cancelledByRefreshOff } != nil)
            let reported = "didCompleteWithError(task 1, cancelled, backgroundUpdatesDisabled)"
            #expect(await host.waitForEvent(id) { $0.kind == .callback && $0.callback == reported } != nil)
            #expect(log(host, id).contains("NSURLErrorBackgroundTaskCancelledReasonKey=1 (backgroundUpdatesDisabled)"), "\(log(host, id))")
            let store = try Store(path: host.dir.path + "/apphost.sqlite")
            let left = try store.transfers()
            #expect(left.count == 1)
            #expect(left.first?.discretionary == false)
            #expect(await host.events(id).filter { $0.transfer == .cancelledByRefreshOff }.count == 1)
            try await host.supervisor.terminate(id)
            try await host.waitUntil(id, is: .notRunning)
        }
    }
}
