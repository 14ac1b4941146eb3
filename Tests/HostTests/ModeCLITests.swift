import AppHostProtocol
import Foundation
import TestSupport
import Testing

/// The mode verbs as a user types them, against a real daemon on the virtual clock.
@Suite("CLI: mode verbs", .tags(.process), .timeLimit(.minutes(2)), .enabled(if: cliBuilt, "apphost and the probe app not built: run `swift build` first (scripts/test.sh does)"))
struct ModeCLITests {
    @Test func locationFlowFromPrivacyToABackgroundFix() async throws {
        try await withCLISession("loc") { s in
            _ = try await s.startDaemon(["--clock", "virtual"])
            let id = "com.cli.tracker"
            let bundle = try makeProbeBundle(in: s.stateDir, id: id, extra: ["UIBackgroundModes": ["location"]])
            #expect(await s.run("install", bundle).status == 0)

            let noBundle = await s.run("privacy", "grant", "location-always")
            #expect(noBundle.status != 0)
            #expect(noBundle.stderr.contains("bundle"), "\(noBundle.stderr)")
            let badService = await s.run("privacy", "grant", "telepathy", id)
            #expect(badService.status != 0)
            let grant = await s.run("privacy", "grant", "location-always", id)
            #expect(grant.status == 0, "privacy grant: \(grant.stderr)")

            let launch = await s.run("launch", id, "--", "--on", "active", "location-auth:always", "--on", "active", "location-start",
                                     "--on", "active", "location-background:on")
            try #require(launch.status == 0, "launch: \(launch.stderr)")
            let follow = try s.start(["events", "--follow", id])
            #expect(await s.run("background", id).status == 0)
            _ = await s.run("clock", "advance", "0s")

            let badFix = await s.run("location", "set", "91,0")
            #expect(badFix.status != 0)
            #expect(badFix.stderr.contains("latitude"), "\(badFix.stderr)")
            let set = await s.run("location", "set", "48.8584,2.2945")
            #expect(set.status == 0, "location set: \(set.stderr)")
            #expect(set.stdout.contains("delivered to 1 app"), "\(set.stdout)")
            _ = try #require(await follow.line(containing: "didUpdateLocations(1)"), "events: \(follow.lines)")
            _ = await s.run("clock", "advance", "1m")
            let status = await s.run("status", id)
            #expect(status.stdout.contains("background") && status.stdout.contains("location updates"), "kept running: \(status.stdout)")

            let route = await s.run("location", "route", packageRoot + "/manifests/routes/commute.gpx")
            #expect(route.status == 0, "route: \(route.stderr)")
            #expect(route.stdout.contains("8 point"), "\(route.stdout)")
            _ = await follow.stop()
        }
    }

    @Test func voipPushBleAndAccessoryVerbs() async throws {
        try await withCLISession("modes") { s in
            _ = try await s.startDaemon(["--clock", "virtual"])
            let plain = "com.cli.plain"
            #expect(await s.run("install", try makeProbeBundle(in: s.stateDir, id: plain)).status == 0)

            let payload = s.stateDir + "/call.json"
            try Data(#"{"caller":"alice"}"#.utf8).write(to: URL(fileURLWithPath: payload))
            let refused = await s.run("push", "--type", "voip", plain, payload)
            #expect(refused.status != 0)
            #expect(refused.stderr.contains("voip"), "a VoIP push to an app without the mode: \(refused.stderr)")
            let alert = await s.run("push", plain, payload)
            #expect(alert.status != 0)
            #expect(alert.stderr.contains("--type voip"), "\(alert.stderr)")

            let add = await s.run("ble", "add", "hr", "--service", "180D", "--name", "Heart")
            #expect(add.status == 0, "ble add: \(add.stderr)")
            let load = await s.run("ble", "load", packageRoot + "/manifests/ble/world.json")
            #expect(load.status == 0, "ble load: \(load.stderr)")
            let list = await s.run("ble", "list")
            #expect(list.stdout.contains("180D"), "\(list.stdout)")
            let notify = await s.run("ble", "notify", "nosuch", "2a37", "hex:48")
            #expect(notify.status != 0)

            let connect = await s.run("accessory", "connect", "com.acme.printer", "--name", "Printer")
            #expect(connect.status == 0, "accessory connect: \(connect.stderr)")
            #expect(await s.run("accessory", "list").stdout.contains("Printer"))
            let send = await s.run("accessory", "send", "com.acme.printer", "hello")
            #expect(send.status == 0 && send.stdout.contains("no app"), "\(send.stdout) \(send.stderr)")
            let none = await s.run("accessory", "send", "com.acme.other", "x")
            #expect(none.status != 0)
        }
    }

    @Test func lintFindsMissingCompanionKeys() async throws {
        let dir = try TempDir("lint")
        defer { dir.remove() }
        let bundle = try makeProbeBundle(in: dir.path, id: "com.cli.lint", extra: ["UIBackgroundModes": ["processing", "external-accessory", "push-to-talk"]])
        let r = await apphost(["lint", bundle])
        #expect(r.status == 1)
        #expect(r.stdout.contains("error:") && r.stdout.contains("BGTaskSchedulerPermittedIdentifiers"), "\(r.stdout)")
        #expect(r.stdout.contains("UISupportedExternalAccessoryProtocols"), "\(r.stdout)")
        #expect(r.stdout.contains("not emulated"), "\(r.stdout)")
    }
}
