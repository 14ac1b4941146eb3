import Foundation
import Snapshots
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Scripts written for `xcrun simctl`, run against `apphost` as a user runs them: the
/// device argument where simctl puts it, list-devices, listapps, get_app_container,
/// `launch --console`, `io screenshot`, privacy's subcommands, and help that reads at 80
/// columns. Waits are on output lines and process exits, never on time.
@Suite("CLI: simctl habits", .tags(.process), .timeLimit(.minutes(2)),
       .enabled(if: cliBuilt, "apphost and ProbeApp not built: run `swift build` first (scripts/test.sh does)"))
struct SimctlCLITests {
    // MARK: - list-devices

    @Test func listDevicesShowsOneStableUDIDAndWhetherADaemonRuns() async throws {
        try await withCLISession("devices") { s in
            // A state directory no host has used: no device, and nothing is created.
            let missing = s.stateDir + "/never"
            let none = await apphost(["list-devices", "--json", "--state-dir", missing])
            #expect(none.status == 0, "\(none.stderr)")
            let empty = try #require(try parseJSON(none.stdout) as? [String: Any], "\(none.stdout)")
            #expect(empty["version"] as? Int == 1)
            #expect((empty["devices"] as? [Any])?.isEmpty == true, "\(none.stdout)")
            #expect(!FileManager.default.fileExists(atPath: missing), "list-devices must not create a state directory")

            func device() async throws -> [String: Any] {
                let r = await s.run("list-devices", "--json")
                try #require(r.status == 0, "list-devices: \(r.stderr)")
                let object = try #require(try parseJSON(r.stdout) as? [String: Any], "\(r.stdout)")
                #expect(object["version"] as? Int == 1)
                let devices = try #require(object["devices"] as? [[String: Any]], "\(r.stdout)")
                try #require(devices.count == 1, "\(r.stdout)")
                return devices[0]
            }
            let shutdown = try await device()
            let udid = try #require(shutdown["udid"] as? String)
            #expect(UUID(uuidString: udid) != nil && udid == udid.uppercased(), "an uppercase UUID, as simctl's: \(udid)")
            #expect(shutdown["state"] as? String == "Shutdown")
            #expect(shutdown["pid"] is NSNull, "pid null when Shutdown: \(shutdown)")
            #expect(shutdown["stateDirectory"] as? String == s.stateDir)
            var info = stat()
            #expect(stat(s.stateDir + "/device.json", &info) == 0 && info.st_mode & 0o777 == 0o600, "device.json is the host's alone")

            let daemon = try await s.startDaemon()
            let booted = try await device()
            #expect(booted["udid"] as? String == udid, "the same UDID for the life of the state directory")
            #expect(booted["state"] as? String == "Booted")
            #expect((booted["pid"] as? NSNumber)?.int32Value == daemon.pid)
            let text = await s.run("list-devices")
            #expect(text.stdout.contains("== Devices =="), "\(text.stdout)")
            #expect(text.stdout.contains("    \(booted["name"] as? String ?? "?") (\(udid)) (Booted)"), "\(text.stdout)")
        }
    }

    // MARK: - The device argument

    @Test func simctlsDeviceArgumentIsTakenWhereSimctlPutsIt() async throws {
        try await withCLISession("booted") { s in
            _ = try await s.startDaemon()
            let id = "com.cli.booted"
            let bundle = try makeProbeBundle(in: s.stateDir, id: id,
                                             extra: ["UIBackgroundModes": ["remote-notification"]],
                                             entitlements: ["com.apple.security.application-groups": ["group.com.cli.shared"]])
            let install = await s.run("install", "booted", bundle)
            try #require(install.status == 0, "install booted: \(install.stderr)")

            // Arguments after the bundle id go to the app without `--`.
            let launch = await s.run("launch", "booted", id, "--on", "active", "print:args-without-dashes")
            try #require(launch.status == 0, "launch booted: \(launch.stderr)")
            let pid = try #require(launchedPID(launch.stdout, id: id), "\(launch.stdout)")
            let log = try String(contentsOfFile: s.stateDir + "/logs/\(id).log", encoding: .utf8)
            #expect(log.contains("args-without-dashes"), "the app got its arguments: \(log)")

            // By UDID and by name, as simctl scripts do.
            let listing = try #require(try parseJSON(await s.run("list-devices", "--json").stdout) as? [String: Any])
            let device = try #require((listing["devices"] as? [[String: Any]])?.first)
            let udid = try #require(device["udid"] as? String), name = try #require(device["name"] as? String)
            #expect(await s.run("privacy", udid.lowercased(), "grant", "location", id).status == 0, "a UDID in any case")
            let privacy = await s.run("privacy", "booted", "grant", "location-always", id)
            #expect(privacy.status == 0, "privacy booted grant: \(privacy.stderr)")
            let payload = s.stateDir + "/silent.apns"
            try Data(#"{"aps": {"content-available": 1}}"#.utf8).write(to: URL(fileURLWithPath: payload))
            let push = await s.run("push", name, id, payload)
            #expect(push.status == 0, "push <name> <id> <file>: \(push.stderr)")
            let location = await s.run("location", "booted", "set", "-33.8568", "151.2153")
            #expect(location.status == 0, "location booted set with a negative latitude: \(location.stderr)")

            // get_app_container: app, data, groups, a group; what simctl prints.
            let app = await s.run("get_app_container", "booted", id)
            #expect(app.stdout == bundle + "\n", "app container: \(app.stdout) \(app.stderr)")
            let data = await s.run("get_app_container", "booted", id, "data")
            #expect(data.stdout == s.stateDir + "/containers/\(id)\n", "\(data.stdout) \(data.stderr)")
            let dataPath = data.stdout.trimmingCharacters(in: .newlines)
            #expect(FileManager.default.fileExists(atPath: dataPath + "/Documents"), "the launched app's HOME")
            let groups = await s.run("get_app_container", id, "groups")
            #expect(groups.stdout == "group.com.cli.shared\t\(s.stateDir)/groups/group.com.cli.shared\n", "\(groups.stdout) \(groups.stderr)")
            let group = await s.run("get_app_container", id, "group.com.cli.shared")
            #expect(group.stdout == s.stateDir + "/groups/group.com.cli.shared\n", "\(group.stdout)")
            let otherGroup = await s.run("get_app_container", id, "group.com.cli.other")
            #expect(otherGroup.status == 2 && otherGroup.stderr.contains("group.com.cli.shared"), "\(otherGroup.stderr)")
            let badKind = await s.run("get_app_container", id, "documents")
            #expect(badKind.status == 64 && badKind.stderr.contains("app, data, groups"), "\(badKind.stderr)")
            let unknown = await s.run("get_app_container", "booted", "com.cli.nope")
            #expect(unknown.status == 2 && unknown.stderr.contains("com.cli.nope"), "\(unknown.stderr)")

            // listapps: simctl's plist, and JSON with a version.
            let plist = await s.run("listapps", "booted")
            #expect(plist.status == 0, "\(plist.stderr)")
            #expect(plist.stdout.contains("\"\(id)\" =     {"), "\(plist.stdout)")
            #expect(plist.stdout.contains("CFBundleIdentifier = \"\(id)\";"), "\(plist.stdout)")
            #expect(plist.stdout.contains("ApplicationType = User;"), "\(plist.stdout)")
            #expect(plist.stdout.contains("DataContainer = \"file://\(s.stateDir)/containers/\(id)/\";"), "\(plist.stdout)")
            let json = try #require(try parseJSON(await s.run("listapps", "--json").stdout) as? [String: Any])
            #expect(json["version"] as? Int == 1)
            let apps = try #require(json["apps"] as? [[String: Any]])
            #expect(apps.map { $0["bundleIdentifier"] as? String } == [id])
            #expect((apps[0]["groupContainers"] as? [String: String])?["group.com.cli.shared"] == s.stateDir + "/groups/group.com.cli.shared")
            #expect(apps[0]["displayName"] is NSNull, "no CFBundleDisplayName: null")

            // Another device is refused, saying which this one is; nothing happens.
            for other in ["8A3C2F0B-1D4E-4F5A-9B6C-7D8E9F0A1B2C", "iPhone 15 Pro"] {
                let r = await s.run("terminate", other, id)
                #expect(r.status == 64, "\(other): exit \(r.status) \(r.stderr)")
                #expect(r.stderr.contains("device \"\(other)\" is not this host's") && r.stderr.contains(udid), "\(r.stderr)")
                let priv = await s.run("privacy", other, "grant", "location", id)
                #expect(priv.status == 64, "privacy \(other): \(priv.stderr)")
            }
            let launchOther = await s.run("launch", "iPhone 15 Pro", id)
            #expect(launchOther.status == 64 && launchOther.stderr.contains("device \"iPhone 15 Pro\""), "\(launchOther.stderr)")
            #expect(processExists(pid), "a refused terminate leaves the app be")
            // A device only where a verb takes one: two positionals more than terminate takes.
            let extra = await s.run("terminate", "somewhere", id)
            #expect(extra.status == 64 && extra.stderr.contains("device \"somewhere\""), "\(extra.stderr)")

            let terminate = await s.run("terminate", udid, id)
            #expect(terminate.status == 0, "terminate <UDID> <id>: \(terminate.stderr)")
            #expect(!processExists(pid))
            #expect(await s.run("uninstall", "booted", id).status == 0)
            let shutdown = await s.run("shutdown", "booted")
            #expect(shutdown.status == 0, "shutdown booted: \(shutdown.stderr)")
        }
    }

    @Test func aUDIDOnAStateDirectoryNoHostHasUsedIsRefused() async throws {
        let dir = try TempDir("nodev")
        defer { dir.remove() }
        let r = await apphost(["launch", "--state-dir", dir.path, "8A3C2F0B-1D4E-4F5A-9B6C-7D8E9F0A1B2C", "com.example.app"])
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains("no host has used \(dir.path) yet"), "\(r.stderr)")
        // booted with no daemon: the verb's own answer (exit 69, how to start one).
        let booted = await apphost(["launch", "--state-dir", dir.path, "booted", "com.example.app"])
        #expect(booted.status == 69 && booted.stderr.contains("apphost daemon --state-dir"), "\(booted.stderr)")
        let console = await apphost(["launch", "--console", "--state-dir", dir.path, "booted", "com.example.app"])
        #expect(console.status == 69 && console.stderr.contains("apphost daemon --state-dir"), "\(console.stderr)")
    }

    // MARK: - launch --console

    @Test func launchConsoleStreamsTheAppsOutputUntilItExits() async throws {
        try await withCLISession("console") { s in
            _ = try await s.startDaemon()
            let id = "com.cli.console"
            try #require(await s.run("install", try makeProbeBundle(in: s.stateDir, id: id)).status == 0)
            // Output of an earlier run is not shown again.
            let earlier = await s.run("launch", id, "--on", "active", "print:from-an-earlier-run", "--on", "active", "exit:0")
            try #require(earlier.status == 0, "\(earlier.stderr)")
            let follow = try s.start(["events", "--follow", id])
            _ = try #require(await follow.line(containing: "→ notRunning"), "\(follow.lines)")

            let console = try s.start(["launch", "--console", "booted", id, "--on", "active", "print:console-line-1",
                                       "--on", "active", "print:console-line-2", "--on", "active", "exit:3"])
            let exit = await console.waitForExit()
            #expect(exit == .exited(0), "launch --console returns when the app exits: \(exit), \(console.stderr)")
            let lines = console.lines
            let pid = try #require(lines.first.flatMap { launchedPID($0, id: id) }, "first the pid: \(lines)")
            #expect(lines.contains { $0.contains("console-line-1") } && lines.contains { $0.contains("console-line-2") }, "\(lines)")
            #expect(!lines.contains { $0.contains("from-an-earlier-run") }, "only this run's output: \(lines)")
            #expect(console.stderr.contains("\(id)[\(pid)] exited"), "\(console.stderr)")
        }
    }

    // MARK: - io screenshot

    @Test func ioScreenshotWritesTheAppInFrontAsAPNG() async throws {
        try await withCLISession("shot") { s in
            _ = try await s.startDaemon()
            let id = "com.cli.shot"
            try #require(await s.run("install", try makeProbeBundle(in: s.stateDir, id: id)).status == 0)
            let noApp = await s.run("io", "booted", "screenshot", s.stateDir + "/none.png")
            #expect(noApp.status == 1 && noApp.stderr.contains("no app is in the foreground"), "\(noApp.stderr)")
            #expect(!FileManager.default.fileExists(atPath: s.stateDir + "/none.png"))

            try #require(await s.run("launch", id, "--", "--on", "launch", "window:on-the-screen").status == 0)
            let file = s.stateDir + "/screen.png"
            let shot = await s.run("io", "booted", "screenshot", file)
            #expect(shot.status == 0, "io screenshot: \(shot.stderr)")
            #expect(shot.stdout.contains("Wrote screenshot of \(id)") && shot.stdout.contains(file), "\(shot.stdout)")
            let image = try PNGCodec.decode(try Data(contentsOf: URL(fileURLWithPath: file)))
            #expect(image.width == 1170 && image.height == 2532, "the host's screen")
            #expect(Set(image.pixels).count > 1, "the window is drawn, not a blank screen")

            // To standard output, and what simctl refuses or AppHost cannot write.
            let piped = await s.run("io", "screenshot", "-")
            // (Read as UTF-8 text here: the signature's 0x89 comes back as U+FFFD.)
            #expect(piped.status == 0 && piped.stdout.hasPrefix("\u{FFFD}PNG\r\n") && piped.stdout.contains("IHDR"), "a PNG on stdout")
            let jpeg = await s.run("io", "screenshot", "--type", "jpeg", file)
            #expect(jpeg.status == 64 && jpeg.stderr.contains("PNG only"), "\(jpeg.stderr)")
            let folder = await s.run("io", "screenshot", s.stateDir)
            #expect(folder.status == 64 && folder.stderr.contains("directory"), "\(folder.stderr)")
            // Bounded: the daemon keeps only the latest few.
            for _ in 0..<10 { _ = await s.run("io", "screenshot", file) }
            let kept = try FileManager.default.contentsOfDirectory(atPath: s.stateDir + "/screenshots")
            #expect(kept.count <= 8, "\(kept)")
        }
    }

    // MARK: - Help, usage, small habits

    @Test func privacyActionsAreSubcommandsWithTheirOwnHelp() async throws {
        for action in ["grant", "revoke", "reset"] {
            let help = await apphost(["privacy", action, "--help"])
            #expect(help.status == 0, "\(help.stderr)")
            #expect(help.stdout.contains("USAGE: apphost privacy \(action) <service>"), "\(help.stdout)")
            #expect(help.stdout.contains("location-always"), "services listed: \(help.stdout)")
        }
        let missing = await apphost(["privacy", "revoke", "location"])
        #expect(missing.status == 64 && missing.stderr.contains("<bundle-id>"), "\(missing.stderr)")
        let badService = await apphost(["privacy", "grant", "telepathy", "com.example.app"])
        #expect(badService.status == 64 && badService.stderr.contains("unknown privacy service \"telepathy\""), "\(badService.stderr)")
    }

    @Test func launchUsageShowsStateDirAmongApphostsOptions() async throws {
        let help = await apphost(["launch", "--help"], environment: ["COLUMNS": "200"])
        let usage = try #require(help.stdout.split(separator: "\n").first { $0.hasPrefix("USAGE:") }, "\(help.stdout)")
        let stateDir = try #require(usage.range(of: "--state-dir"), "\(usage)")
        let bundle = try #require(usage.range(of: "<bundle-id>"), "\(usage)")
        #expect(stateDir.lowerBound < bundle.lowerBound, "--state-dir before the bundle id and the app's arguments: \(usage)")
        #expect(!usage.contains("-- <"), "no `--` in front of AppHost's options: \(usage)")
        #expect(help.stdout.contains("--console"), "\(help.stdout)")
    }

    @Test func negativeDurationsAreRefusedAsSuch() async throws {
        for duration in ["-5s", "-1h30m"] {
            let r = await apphost(["clock", "advance", duration, "--state-dir", "/nonexistent"])
            #expect(r.status == 64, "\(duration): \(r.stderr)")
            #expect(r.stderr.contains("durations must be positive"), "\(duration): \(r.stderr)")
        }
        let junk = await apphost(["clock", "advance", "soon", "--state-dir", "/nonexistent"])
        #expect(junk.status == 64 && junk.stderr.contains("not a duration"), "\(junk.stderr)")
    }

    @Test func profileShowPrintsCountsAsCounts() async throws {
        let dir = try TempDir("prof")
        defer { dir.remove() }
        let r = await apphost(["profile", "show", "--state-dir", dir.path])
        #expect(r.status == 0, "\(r.stderr)")
        let row = try #require(r.stdout.split(separator: "\n").first { $0.hasPrefix("silentPushesPerHour") }, "\(r.stdout)")
        #expect(row.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first == "3", "a count, not 3s: \(row)")
        let all = await apphost(["profile", "show", "--all"])
        let allRow = try #require(all.stdout.split(separator: "\n").first { $0.hasPrefix("silentPushesPerHour") })
        #expect(!allRow.contains("3s"), "\(allRow)")
    }

    /// Every verb's help at 80 columns: no paragraph written with hand line breaks longer
    /// than the screen (swift-argument-parser re-wraps them, leaving orphan words), and no
    /// example line wider than the screen.
    @Test func everyVerbsHelpReadsWellAtEightyColumns() async throws {
        let dump = await apphost(["--experimental-dump-help"])
        let root = try #require(try parseJSON(dump.stdout) as? [String: Any])
        var paths: [[String]] = [[]]
        func walk(_ command: [String: Any], _ path: [String]) {
            for sub in command["subcommands"] as? [[String: Any]] ?? [] {
                guard let name = sub["commandName"] as? String, name != "help" else { continue }
                paths.append(path + [name])
                walk(sub, path + [name])
            }
        }
        walk(try #require(root["command"] as? [String: Any]), [])
        #expect(paths.count > 40, "every verb and subcommand: \(paths.count)")
        var problems: [String] = []
        for path in paths {
            // Unwrapped, each line is a line of the source text.
            let wide = await apphost(path + ["--help"], environment: ["COLUMNS": "10000"])
            guard wide.status == 0 else { problems.append("\(path): exit \(wide.status)"); continue }
            let lines = wide.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            var inDiscussion = false
            for (i, line) in lines.enumerated() {
                if line.hasPrefix("OVERVIEW:") { inDiscussion = true; continue }
                if line.hasPrefix("USAGE:") { inDiscussion = false }
                guard inDiscussion, line.count > 80 else { continue }
                let indent = line.prefix { $0 == " " }.count
                let next = i + 1 < lines.count ? lines[i + 1] : ""
                let nextIndent = next.prefix { $0 == " " }.count
                // A long line is a paragraph only if the next line starts another one.
                if !next.isEmpty, nextIndent == indent {
                    problems.append("apphost \(path.joined(separator: " ")): hand-wrapped line of \(line.count) columns: \(line)")
                } else if indent > 2 {
                    problems.append("apphost \(path.joined(separator: " ")): example line of \(line.count) columns: \(line)")
                }
            }
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    // MARK: - The host's own log

    @Test func theHostLogsToItsStateDirectoryWithHostTimeOnAVirtualClock() async throws {
        try await withCLISession("hlog") { s in
            let bad = await apphost(["daemon", "--state-dir", s.stateDir], environment: ["APPHOST_LOG_LEVEL": "verbose"])
            #expect(bad.status == 64, "\(bad.stderr)")
            #expect(bad.stderr.contains("APPHOST_LOG_LEVEL=\"verbose\" is not a log level: one of trace, debug, info"), "\(bad.stderr)")
            #expect(!FileManager.default.fileExists(atPath: s.stateDir + "/control.sock"), "nothing started")

            let daemon = try await s.startDaemon(["--clock", "virtual"])
            #expect(await s.run("clock", "advance", "90s").status == 0)
            #expect(await s.run("shutdown").status == 0)
            #expect(await daemon.waitForExit() == .exited(0))
            let log = try String(contentsOfFile: s.stateDir + "/host.log", encoding: .utf8)
            let lines = log.split(separator: "\n")
            #expect(lines.contains { $0.contains("host listening on") }, "\(log)")
            let stopping = try #require(lines.first { $0.contains("shutting down") }, "\(log)")
            #expect(stopping.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4} \(host \+90\.000s "#,
                                   options: .regularExpression) != nil, "milliseconds, and host time after the advance: \(stopping)")
            #expect(daemon.stderr.contains("shutting down"), "standard error still gets the log")
            var info = stat()
            #expect(stat(s.stateDir + "/host.log", &info) == 0 && info.st_mode & 0o777 == 0o600)
        }
    }

    // MARK: - Completion

    @Test func bundleIdsCompleteToTheInstalledAppsAndServicesToTheirNames() async throws {
        try await withCLISession("compl") { s in
            _ = try await s.startDaemon()
            try #require(await s.run("install", try makeProbeBundle(in: s.stateDir, id: "com.cli.alpha")).status == 0)
            try #require(await s.run("install", try makeProbeBundle(in: s.stateDir, id: "com.cli.beta")).status == 0)
            // What the generated scripts run: `apphost ---completion <verb> -- <argument> <index> <cursor> <words...>`.
            let words = ["apphost", "terminate", "--state-dir", s.stateDir, "com.cli.a"]
            let running = await apphost(["---completion", "terminate", "--", "positional@0", "4", "9"] + words)
            #expect(running.stdout.split(separator: "\n") == ["com.cli.alpha"], "from the daemon: \(running.stdout) \(running.stderr)")
            #expect(await s.run("shutdown").status == 0)
            let stopped = await apphost(["---completion", "terminate", "--", "positional@0", "4", "8"] + words.dropLast() + ["com.cli."])
            #expect(stopped.stdout.split(separator: "\n") == ["com.cli.alpha", "com.cli.beta"], "from the database: \(stopped.stdout) \(stopped.stderr)")

            let script = await apphost(["--generate-completion-script", "bash"])
            #expect(script.status == 0)
            #expect(script.stdout.contains("location-always"), "privacy services are listed in the script")
        }
    }
}
