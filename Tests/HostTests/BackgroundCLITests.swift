import Foundation
import TestSupport
import Testing

/// `apphost args... --state-dir DIR`: the state dir after everything, which every
/// leaf verb of settings, device, fetch, bgtask and push takes.
private func run(_ s: CLISession, _ args: String...) async -> (status: Int32, stdout: String, stderr: String) {
    await apphost(args + ["--state-dir", s.stateDir])
}

/// Writes `text` to `name` in the session's directory and returns its path.
private func write(_ text: String, _ name: String, in s: CLISession) throws -> String {
    let path = s.stateDir + "/" + name
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    return path
}

/// Checks a CLI mistake: `status`, one line on stderr naming `text`, nothing on stdout.
private func expectRefusal(_ r: (status: Int32, stdout: String, stderr: String), _ status: Int32, _ text: String,
                           sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(r.status == status, "exit \(r.status), stderr: \(r.stderr)", sourceLocation: sourceLocation)
    #expect(r.stderr.hasPrefix("apphost: ") && r.stderr.contains(text), "stderr: \(r.stderr)", sourceLocation: sourceLocation)
    #expect(r.stderr.trimmingCharacters(in: .newlines).split(separator: "\n").count == 1, "one line: \(r.stderr)", sourceLocation: sourceLocation)
    #expect(r.stdout.isEmpty, "stdout: \(r.stdout)", sourceLocation: sourceLocation)
}

/// Checks that a verb reached the daemon and was answered.
private func expectAnswered(_ r: (status: Int32, stdout: String, stderr: String), _ what: String,
                            sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(r.status == 0, "\(what): exit \(r.status), stderr: \(r.stderr)", sourceLocation: sourceLocation)
    #expect(!r.stdout.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(what): no message", sourceLocation: sourceLocation)
}

/// The settings, device, fetch, bgtask and push verbs as a user types them: their
/// own checks (no daemon needed) and a trip to a daemon on the virtual clock.
@Suite("CLI: background verbs", .tags(.process), .timeLimit(.minutes(2)), .enabled(if: cliBuilt, "apphost and the probe app not built: run `swift build` first (scripts/test.sh does)"))
struct BackgroundCLITests {
    @Test func helpShowsEveryVerbWithExamples() async throws {
        let root = await apphost(["--help"])
        for verb in ["settings", "device", "fetch", "bgtask", "push"] {
            #expect(root.stdout.contains("  \(verb) "), "root --help lacks \(verb):\n\(root.stdout)")
        }
        for verb in [["settings", "background-refresh"], ["settings", "low-power"], ["settings", "show"],
                     ["device", "power"], ["device", "network"], ["device", "show"],
                     ["fetch"], ["fetch", "now"], ["fetch", "schedule"],
                     ["bgtask", "run"], ["bgtask", "expire"], ["bgtask", "list"], ["push"]] {
            let help = await apphost(verb + ["--help"])
            #expect(help.status == 0, "\(verb): \(help.stderr)")
            #expect(help.stdout.hasPrefix("OVERVIEW: "), "\(verb): \(help.stdout)")
            #expect(help.stdout.contains("Example"), "\(verb) --help has no example:\n\(help.stdout)")
        }
        let push = await apphost(["push", "--help"])
        #expect(push.stdout.contains("[<bundle-id>] <payload-file|->") && push.stdout.contains("overrides"), "\(push.stdout)")
        #expect(await apphost(["fetch", "--help"]).stdout.contains("apphost fetch [now] <bundle-id>"))
    }

    @Test func settingsDeviceFetchAndBGTaskCheckTheirInputBeforeAnyRequest() async throws {
        try await withCLISession("bgin") { s in
            // No daemon: a mistake is reported before the socket is tried.
            expectRefusal(await run(s, "settings", "background-refresh"), 64, "on or off")
            expectRefusal(await run(s, "settings", "background-refresh", "maybe"), 64, "expected on|off, got \"maybe\"")
            expectRefusal(await run(s, "settings", "background-refresh", "com.cli.app", "sometimes"), 64, "expected on|off")
            expectRefusal(await run(s, "settings", "background-refresh", "com cli", "on"), 64, "not a bundle identifier")
            expectRefusal(await run(s, "settings", "low-power", "half"), 64, "low-power: expected on|off")
            expectRefusal(await run(s, "device", "power", "ac"), 64, "expected plugged|battery")
            expectRefusal(await run(s, "device", "network", "lte"), 64, "expected wifi|cellular|none")
            expectRefusal(await run(s, "fetch"), 64, "apphost fetch schedule")
            expectRefusal(await run(s, "fetch", "now"), 64, "give an app")
            expectRefusal(await run(s, "fetch", "com.cli.a", "com.cli.b"), 64, "one app at a time")
            expectRefusal(await run(s, "fetch", "com/cli"), 64, "not a bundle identifier")
            expectRefusal(await run(s, "bgtask", "run", "com.cli.app", "a task"), 64, "not a task identifier")
            expectRefusal(await run(s, "bgtask", "expire", "com cli", "com.cli.refresh"), 64, "not a bundle identifier")
            expectRefusal(await run(s, "bgtask", "list", "com cli"), 64, "not a bundle identifier")

            // Case does not matter; well-formed input goes on to the (missing) daemon.
            for args in [["settings", "background-refresh", "OFF"], ["settings", "background-refresh", "com.cli.app", "on"],
                         ["settings", "low-power", "on"], ["settings", "show"], ["device", "power", "Battery"],
                         ["device", "network", "none"], ["device", "show"], ["fetch", "com.cli.app"],
                         ["fetch", "now", "com.cli.app"], ["fetch", "schedule"], ["bgtask", "run", "com.cli.app", "com.cli.refresh"],
                         ["bgtask", "expire", "com.cli.app", "com.cli.refresh"], ["bgtask", "list"], ["bgtask", "list", "com.cli.app"]] {
                let r = await apphost(args + ["--state-dir", s.stateDir])
                #expect(r.status == 69 && r.stderr.contains("no AppHost daemon"), "\(args): \(r.status) \(r.stderr)")
            }
            // `fetch --state-dir D schedule` is the schedule, not an app called "schedule".
            let scheduled = await apphost(["fetch", "--state-dir", s.stateDir, "schedule"])
            #expect(scheduled.status == 69, "\(scheduled.stderr)")
        }
    }

    @Test func pushChecksThePayloadAndDryRunSendsNothing() async throws {
        try await withCLISession("bgpush") { s in
            let alert = try write(#"{"Simulator Target Bundle": "com.cli.target", "aps": {"alert": {"title": "Hello", "body": "there"}, "sound": "default"}}"#,
                                  "alert.apns", in: s)
            let silent = try write(#"{"aps": {"content-available": 1}, "sync": true}"#, "silent.apns", in: s)

            // No daemon is running: --dry-run needs none.
            let named = await run(s, "push", "--dry-run", alert)
            #expect(named.status == 0, "\(named.stderr)")
            for text in ["dry run: nothing sent", "com.cli.target", "Simulator Target Bundle", "alert (inferred from the payload)",
                         "\"Hello\"", "visible", "of 4096 bytes", "not set"] {
                #expect(named.stdout.contains(text), "\(text): \(named.stdout)")
            }
            let overridden = await run(s, "push", "--dry-run", "--priority", "10", "--collapse-id", "score", "com.cli.other", alert)
            #expect(overridden.status == 0, "\(overridden.stderr)")
            #expect(overridden.stdout.contains("com.cli.other (the argument; it overrides the payload's \"com.cli.target\")"), "\(overridden.stdout)")
            #expect(overridden.stdout.contains("score") && overridden.stdout.contains("10"), "\(overridden.stdout)")

            let background = await run(s, "push", "--dry-run", "com.cli.app", silent)
            #expect(background.status == 0, "\(background.stderr)")
            #expect(background.stdout.contains("background (inferred from the payload)") && background.stdout.contains("silent"), "\(background.stdout)")
            let forced = await run(s, "push", "--dry-run", "--type", "alert", "com.cli.app", silent)
            #expect(forced.stdout.contains("alert (--type)"), "\(forced.stdout)")
            let voip = await run(s, "push", "--dry-run", "--type", "voip", "com.cli.phone", try write(#"{"caller": "Ada"}"#, "call.json", in: s))
            #expect(voip.status == 0 && voip.stdout.contains("voip") && voip.stdout.contains("of 5120 bytes"), "\(voip.stdout) \(voip.stderr)")

            // Where the bundle id comes from.
            expectRefusal(await run(s, "push", "--dry-run", silent), 64, "Simulator Target Bundle")
            expectRefusal(await run(s, "push"), 64, "give a payload")
            expectRefusal(await run(s, "push", "com cli", alert), 64, "not a bundle identifier")

            // Options, checked as APNs would.
            expectRefusal(await run(s, "push", "--priority", "7", alert), 64, "--priority must be 10")
            expectRefusal(await run(s, "push", "--collapse-id", String(repeating: "c", count: 65), alert), 64, "64 bytes")
            #expect(await run(s, "push", "--dry-run", "--collapse-id", String(repeating: "c", count: 64), alert).status == 0)
            expectRefusal(await run(s, "push", "--apns-id", "not-a-uuid", alert), 64, "not a UUID")
            #expect(await run(s, "push", "--dry-run", "--apns-id", UUID().uuidString.lowercased(), alert).status == 0)
            expectRefusal(await run(s, "push", "--type", "liveactivity", alert), 64, "does not deliver liveactivity")
            expectRefusal(await run(s, "push", "--type", "telegram", alert), 64, "alert, background, voip")
            expectRefusal(await run(s, "push", "--type", "background", "--priority", "10", "com.cli.app", silent), 64, "--priority 5")

            // Bad payloads: exit 65 with what and where.
            let trailing = try write("{\n  \"aps\": {\n    \"alert\": \"Hi\",\n  }\n}\n", "trailing.apns", in: s)
            expectRefusal(await run(s, "push", "--dry-run", "com.cli.app", trailing), 65, "trailing comma at line 3")
            let comment = try write("{\n  // hi\n  \"aps\": {\"alert\": \"Hi\"}\n}\n", "comment.apns", in: s)
            expectRefusal(await run(s, "push", "--dry-run", "com.cli.app", comment), 65, "comment at line 2")
            expectRefusal(await run(s, "push", "com.cli.app", try write(#"{"caller": "Ada"}"#, "noaps.json", in: s)), 65, "--type voip")
            let big = try write(#"{"aps": {"alert": ""# + String(repeating: "x", count: 5000) + #""}}"#, "big.apns", in: s)
            expectRefusal(await run(s, "push", "com.cli.app", big), 65, "at most 4096")
            expectRefusal(await run(s, "push", "com.cli.app", "-"), 65, "standard input: the payload is empty")
            expectRefusal(await run(s, "push", "com.cli.app", s.stateDir + "/nosuch.apns"), 66, "no such file")

            // A good push without --dry-run does try the daemon.
            let sent = await run(s, "push", alert)
            #expect(sent.status == 69 && sent.stderr.contains("no AppHost daemon"), "\(sent.stderr)")
        }
    }

    @Test func everyVerbReachesTheDaemon() async throws {
        try await withCLISession("bgd") { s in
            _ = try await s.startDaemon(["--clock", "virtual"])
            let id = "com.cli.bg"
            let task = "com.cli.bg.refresh"
            let bundle = try makeProbeBundle(in: s.stateDir, id: id, extra: [
                "UIBackgroundModes": ["fetch", "processing", "remote-notification"],
                "BGTaskSchedulerPermittedIdentifiers": [task],
            ])
            #expect(await s.run("install", bundle).status == 0)
            let launch = await s.run("launch", id, "--", "--on", "launch", "fetch-interval:minimum", "--on", "launch", "bg-register:\(task)",
                                     "--on", "launch", "bg-submit:refresh:\(task):3600", "--bgtask", "never")
            try #require(launch.status == 0, "launch: \(launch.stderr)")

            // The task first: Background App Refresh turned off cancels pending requests.
            for args in [["bgtask", "list"], ["bgtask", "list", id], ["bgtask", "run", id, task], ["bgtask", "expire", id, task],
                         ["settings", "show"], ["settings", "background-refresh", "off"], ["settings", "background-refresh", "on"],
                         ["settings", "background-refresh", id, "off"], ["settings", "background-refresh", id, "on"],
                         ["settings", "low-power", "on"], ["settings", "low-power", "off"],
                         ["device", "power", "battery"], ["device", "network", "cellular"], ["device", "network", "none"],
                         ["device", "show"], ["device", "power", "plugged"], ["device", "network", "wifi"],
                         ["fetch", id], ["fetch", "now", id], ["fetch", "schedule"]] {
                expectAnswered(await apphost(args + ["--state-dir", s.stateDir]), args.joined(separator: " "))
            }
            expectAnswered(await apphost(["fetch", "--state-dir", s.stateDir, "schedule"]), "fetch --state-dir D schedule")

            let alert = try write(#"{"Simulator Target Bundle": "\#(id)", "aps": {"alert": "Hello"}}"#, "alert.apns", in: s)
            let silent = try write(#"{"aps": {"content-available": 1}}"#, "silent.apns", in: s)
            expectAnswered(await run(s, "push", alert), "push (target from the payload)")
            expectAnswered(await run(s, "push", "--priority", "10", "--collapse-id", "c1", "--apns-id", UUID().uuidString, id, alert),
                           "push with headers")
            expectAnswered(await run(s, "push", "--priority", "5", id, silent), "silent push")
            expectAnswered(await run(s, "push", "--type", "background", id, silent), "push --type background")

            // The daemon's refusals keep their exit codes.
            let unknown = await run(s, "fetch", "com.cli.nosuch")
            #expect(unknown.status == 2, "unknown bundle: \(unknown.status) \(unknown.stderr)")
            let noTarget = await run(s, "push", "com.cli.nosuch", silent)
            #expect(noTarget.status != 0 && !noTarget.stderr.isEmpty, "\(noTarget.stderr)")
        }
    }
}
