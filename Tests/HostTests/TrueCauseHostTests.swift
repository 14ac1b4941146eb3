import AppHostProtocol
import Foundation
import Plugins
import TestSupport
import Testing
@testable import Host

/// Issue 18: refusals name their true cause, through ProbeApp and the host.
@Suite("True causes through the host", .tags(.process), .timeLimit(.minutes(2)),
       .enabled(if: probeBuilt, "ProbeApp not built: run `swift build` first (scripts/test.sh does)"))
struct TrueCauseHostTests {
    func log(_ host: TestHost, _ id: BundleID) -> String {
        (try? String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)) ?? ""
    }

    @Test func aVisiblePushsOneCompletionIsAcceptedNotRefusedAsASecondCall() async throws {
        try await withHost(label: "cause") { host in
            let id = try await host.installProbe("com.cause.push")
            _ = try await host.supervisor.launch(id, background: false, arguments: [])
            _ = try await host.supervisor.modeCommand(.push(PushRequest(bundleIdentifier: id, payload: #"{"aps":{"alert":"Hello"}}"#)))
            #expect(await host.waitForEvent(id) { $0.push == 1 && $0.result == .newData } != nil)
            // The app has read every answer once it has exited: no refusal reached its log.
            try await host.supervisor.terminate(id)
            try await host.waitUntil(id, is: .notRunning)
            let text = log(host, id)
            #expect(text.contains("[ProbeApp] push completed newData"), "\(text)")
            #expect(!text.contains("refused"), "\(text)")
        }
    }

    @Test func aWhenInUseFixRefusalNamesTheAuthorizationNotTheMode() async throws {
        try await withHost(label: "cause") { host in
            let id = try await host.installProbe("com.cause.where", extra: ["UIBackgroundModes": ["location"]])
            _ = try await host.supervisor.modeCommand(.privacy(action: .grant, service: .service(.location), bundleIdentifier: id))
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "location-auth:when-in-use", "--on", "launch", "location-background:on", "--on", "background", "location-start",
            ])
            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .suspended)
            _ = try await host.supervisor.modeCommand(.locationSet(LocationFix(latitude: 1, longitude: 2)))
            let refused = await host.waitForEvent(id) { $0.kind == .modeRefused }
            #expect(refused?.cause.contains("only when-in-use authorized and its updates did not start while it was in use") == true,
                    "\(String(describing: refused?.cause))")
            #expect(refused?.cause.contains("UIBackgroundModes") == false)
        }
    }

    /// Apple: when-in-use apps "start the services while the app is in use" to continue
    /// in the background. Started in front, the updates keep the app running and fixes come.
    @Test func aWhenInUseAppWhoseUpdatesStartedInFrontKeepsRunningAndGetsFixes() async throws {
        try await withHost(label: "cause") { host in
            let id = try await host.installProbe("com.cause.front", extra: ["UIBackgroundModes": ["location"]])
            _ = try await host.supervisor.modeCommand(.privacy(action: .grant, service: .service(.location), bundleIdentifier: id))
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "location-auth:when-in-use", "--on", "launch", "location-background:on", "--on", "active", "location-start",
            ])
            _ = await host.waitForEvent(id) { $0.callback == "didBecomeActive" }
            try await host.supervisor.background(id)
            #expect(await host.waitForEvent(id) { $0.kind == .modeUsed && $0.cause.contains("location updates keep the app running") } != nil)
            _ = try await host.supervisor.modeCommand(.locationSet(LocationFix(latitude: 1, longitude: 2)))
            #expect(await host.waitForEvent(id) { $0.callback == "didUpdateLocations(1)" } != nil)
            #expect(try await host.supervisor.status(id).first?.state == .background)
            #expect(!(await host.events(id)).contains { $0.kind == .modeRefused })
        }
    }
}
