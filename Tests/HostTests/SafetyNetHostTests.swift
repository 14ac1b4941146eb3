import AppHostProtocol
import Foundation
import Testing
@testable import Host

/// The virtual clock's safety net with a real process: an app that keeps running code in
/// real time never lets the host settle. The run fails saying which app the machine did
/// not let answer (never with an iOS termination), the app is excused from taking turns,
/// and the host goes on with it.
@Suite("The safety net (virtual clock)", .tags(.process), .timeLimit(.minutes(2)))
struct SafetyNetHostTests {
    @Test func anAppThatNeverSettlesFailsTheRunNamingItAndIsThenTakenAsItComes() async throws {
        try await withHost(label: "net", clock: .virtual, settle: .seconds(1), configure: { $0.transferDaemon = false }) { host in
            let id = try await host.installProbe("com.net.spin")
            _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "background", "spin:3"])
            // didEnterBackground spins for 3 s of real time: awake throughout. The verb that
            // waits for the host to settle fails, naming the app and the real-time bound.
            let error = await #expect(throws: ControlError.self) {
                try await host.supervisor.background(id)
                _ = try await host.supervisor.advanceClock(by: .seconds(1))
            }
            #expect(error?.message.hasPrefix("the machine did not let com.net.spin answer within 1s of real time") == true,
                    "\(error?.message ?? "no error")")
            // Excused: its answer is taken when it comes, and it is suspended as iOS would,
            // not killed by a watchdog (the spin is far inside the background budget).
            try await host.waitUntil(id, is: .suspended)
            let reports = try await host.supervisor.reports(id)
            #expect(reports.isEmpty, "no termination: \(reports)")
            // Ended here, not by the harness: on a loaded machine the terminate's own waits
            // may pass the 1 s bound too (the net is a real-time bound by design); what the
            // test holds is the first failure, the spin's.
            try await host.supervisor.terminate(id)
            let failures = await host.supervisor.takeSafetyNetFailures()
            #expect(failures.first?.hasPrefix("the machine did not let com.net.spin answer") == true, "\(failures)")
        }
    }
}
