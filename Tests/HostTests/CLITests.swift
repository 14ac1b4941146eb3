import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The `apphost` binary end to end, as a user runs it: real daemons on their own
/// state directories, verbs as separate processes, signals, exit statuses and
/// messages. Waits are on output lines (`daemon ready`, `events --follow`), never on time.
@Suite("CLI", .tags(.process), .timeLimit(.minutes(2)), .enabled(if: cliBuilt, "apphost and ProbeApp not built: run `swift build` first (scripts/test.sh does)"))
struct CLITests {
    // MARK: - No daemon, second daemon

    @Test func verbWithoutDaemonExplainsHowToStartOne() async throws {
        let dir = try TempDir("nd")
        defer { dir.remove() }
        let missing = dir.path + "/never-created"
        for stateDir in [dir.path, missing] {
            for verb in [["status"], ["launch", "com.example.probe"], ["list", "--json"]] {
                let r = await apphost(verb + ["--state-dir", stateDir])
                let shown = "apphost \(verb.joined(separator: " ")): exit \(r.status), stderr:\n\(r.stderr)"
                #expect(r.status == 69, "EX_UNAVAILABLE expected; \(shown)")
                #expect(r.stderr.contains("no AppHost daemon is running on \(stateDir)"), "\(shown)")
                #expect(r.stderr.contains("apphost daemon --state-dir \(stateDir)"), "\(shown)")
                #expect(r.stdout.isEmpty, "nothing on stdout; got: \(r.stdout)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: missing), "a client verb must not create the state directory")
    }

    @Test func stateDirComesFromTheEnvironmentWhenNotGiven() async throws {
        let dir = try TempDir("env")
        defer { dir.remove() }
        let fromVariable = await apphost(["status"], environment: ["APPHOST_STATE_DIR": dir.path])
        #expect(fromVariable.status == 69, "stderr: \(fromVariable.stderr)")
        #expect(fromVariable.stderr.contains("no AppHost daemon is running on \(dir.path)\n"), "APPHOST_STATE_DIR is used; stderr: \(fromVariable.stderr)")
        let fromXDG = await apphost(["status"], environment: ["XDG_STATE_HOME": dir.path])
        #expect(fromXDG.status == 69, "stderr: \(fromXDG.stderr)")
        #expect(fromXDG.stderr.contains("no AppHost daemon is running on \(dir.path)/apphost\n"), "$XDG_STATE_HOME/apphost is used; stderr: \(fromXDG.stderr)")
        let flagWins = await apphost(["status", "--state-dir", dir.path + "/flag"], environment: ["APPHOST_STATE_DIR": dir.path])
        #expect(flagWins.stderr.contains("no AppHost daemon is running on \(dir.path)/flag\n"), "--state-dir wins; stderr: \(flagWins.stderr)")
    }

    @Test func staleSocketOfAKilledDaemonIsNotMistakenForADaemon() async throws {
        try await withCLISession("stale") { s in
            let first = try await s.startDaemon()
            first.send(SIGKILL)
            #expect(await first.waitForExit() == CLIExit(status: SIGKILL, signaled: true))
            #expect(FileManager.default.fileExists(atPath: s.stateDir + "/control.sock"), "precondition: the killed daemon left its socket")

            let status = await s.run("status")
            #expect(status.status == 69, "stderr: \(status.stderr)")
            #expect(status.stderr.contains("no AppHost daemon is running on \(s.stateDir)"))

            // A new daemon takes over the stale socket and answers.
            _ = try await s.startDaemon()
            let again = await s.run("status")
            #expect(again.status == 0, "stderr: \(again.stderr)")
            #expect(again.stdout.contains("no apps installed"))
        }
    }

    @Test func secondDaemonOnTheSameStateDirIsRefused() async throws {
        try await withCLISession("dd") { s in
            let first = try await s.startDaemon()
            let second = try s.start(["daemon"])
            let exit = await second.waitForExit()
            #expect(exit == .exited(75), "EX_TEMPFAIL expected, got \(exit); stderr:\n\(second.stderr)")
            #expect(second.stderr.contains("already running on \(s.stateDir)"), "stderr:\n\(second.stderr)")
            #expect(second.stderr.contains("pid \(first.pid)"), "names the holder's pid; stderr:\n\(second.stderr)")
            #expect(second.stderr.contains("apphost shutdown --state-dir \(s.stateDir)"), "stderr:\n\(second.stderr)")
            #expect(!second.stdout.contains("daemon ready"), "stdout:\n\(second.stdout)")

            // The first one is untouched and still answers.
            #expect(first.exit == nil, "the first daemon must keep running")
            #expect(FileManager.default.fileExists(atPath: s.stateDir + "/control.sock"))
            let status = await s.run("status")
            #expect(status.status == 0, "stderr: \(status.stderr)")
            #expect(status.stdout.contains("no apps installed"))
        }
    }

    // MARK: - manifest show (no daemon)

    @Test func manifestShowPrintsTheParsedManifest() async throws {
        let plain = packageRoot + "/manifests/Plain.app"
        let json = await apphost(["manifest", "show", "--json", plain])
        try #require(json.status == 0, "stderr: \(json.stderr)")
        let object = try #require(try jsonPayload(json.stdout, "manifest") as? [String: Any], "not an object: \(json.stdout)")
        #expect(object["bundleIdentifier"] as? String == "com.example.plain")
        #expect(object["executable"] as? String == "PlainApp")
        #expect(object["name"] as? String == "Plain")
        #expect(object["displayName"] as? String == "Plain")
        #expect((object["backgroundModes"] as? [Any])?.isEmpty == true, "backgroundModes: \(String(describing: object["backgroundModes"]))")
        #expect((object["bgTaskIdentifiers"] as? [Any])?.isEmpty == true, "bgTaskIdentifiers: \(String(describing: object["bgTaskIdentifiers"]))")
        #expect(object["exitsOnSuspend"] as? Bool == false)
        #expect(object["externalAccessoryProtocols"] is [Any])
        #expect(object["sourcePath"] as? String == plain + "/Info.plist")

        let text = await apphost(["manifest", "show", plain])
        #expect(text.status == 0, "stderr: \(text.stderr)")
        let lines = text.stdout.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ") }
        for expected in ["file \(plain)/Info.plist", "bundle id com.example.plain", "executable PlainApp", "name Plain",
                         "background modes -", "BGTask identifiers -", "exits on suspend no"] {
            #expect(lines.contains(expected), "missing \"\(expected)\" in:\n\(text.stdout)")
        }
    }

    @Test func manifestShowListsModesInFileOrder() async throws {
        let dir = try TempDir("mm")
        defer { dir.remove() }
        let bundle = try makeProbeBundle(in: dir.path, id: "com.cli.modes", extra: [
            "UIBackgroundModes": ["processing", "audio", "fetch"],
            "BGTaskSchedulerPermittedIdentifiers": ["com.cli.modes.refresh"],
            "UIApplicationExitsOnSuspend": true,
        ])
        let r = await apphost(["manifest", "show", "--json", bundle])
        try #require(r.status == 0, "stderr: \(r.stderr)")
        let object = try #require(try jsonPayload(r.stdout, "manifest") as? [String: Any])
        #expect(object["backgroundModes"] as? [String] == ["processing", "audio", "fetch"])
        #expect(object["bgTaskIdentifiers"] as? [String] == ["com.cli.modes.refresh"])
        #expect(object["exitsOnSuspend"] as? Bool == true)
        let text = await apphost(["manifest", "show", bundle])
        #expect(text.stdout.contains("processing, audio, fetch"), "\(text.stdout)")
        #expect(text.stdout.contains("yes"), "\(text.stdout)")
    }

    @Test func manifestBuildSettingsAreExpandedFromSettingOptions() async throws {
        let settings = packageRoot + "/manifests/Settings.app"
        let bare = await apphost(["manifest", "show", settings])
        #expect(bare.status == 65, "EX_DATAERR expected; stderr: \(bare.stderr)")
        #expect(bare.stderr.contains("PRODUCT_BUNDLE_IDENTIFIER"), "names the unresolved setting; stderr: \(bare.stderr)")
        #expect(bare.stderr.contains("--setting PRODUCT_BUNDLE_IDENTIFIER="), "says how to pass it; stderr: \(bare.stderr)")
        #expect(bare.stderr.contains(settings + "/Info.plist"), "names the file; stderr: \(bare.stderr)")
        #expect(bare.stdout.isEmpty)

        let set = await apphost(["manifest", "show", "--json", settings,
                                 "--setting", "PRODUCT_BUNDLE_IDENTIFIER=com.example.settings",
                                 "--setting", "EXECUTABLE_NAME=PlainApp"])
        try #require(set.status == 0, "stderr: \(set.stderr)")
        let object = try #require(try jsonPayload(set.stdout, "manifest") as? [String: Any])
        #expect(object["bundleIdentifier"] as? String == "com.example.settings")
        #expect(object["executable"] as? String == "PlainApp")

        let malformed = await apphost(["manifest", "show", settings, "--setting", "PRODUCT_BUNDLE_IDENTIFIER"])
        #expect(malformed.status == 64, "EX_USAGE expected; stderr: \(malformed.stderr)")
        #expect(malformed.stderr.contains("--setting expects KEY=VALUE"), "stderr: \(malformed.stderr)")
    }

    @Test(arguments: ["this is not a property list\n", "<?xml version=\"1.0\"?>\n<plist version=\"1.0\"><dict><key>CFBundleIdentifier</key><string>x", ""])
    func malformedPlistIsRefusedNamingTheFile(contents: String) async throws {
        let dir = try TempDir("mp")
        defer { dir.remove() }
        let bundle = dir.path + "/Broken.app"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try Data(contents.utf8).write(to: URL(fileURLWithPath: bundle + "/Info.plist"))
        for path in [bundle, bundle + "/Info.plist"] {
            let r = await apphost(["manifest", "show", path])
            #expect(r.status == 65, "EX_DATAERR expected for \(path); stderr: \(r.stderr)")
            #expect(r.stderr.contains(bundle + "/Info.plist"), "names the file; stderr: \(r.stderr)")
            #expect(r.stdout.isEmpty, "stdout: \(r.stdout)")
        }
    }

    @Test func unknownBackgroundModeSuggestsTheClosestOne() async throws {
        let dir = try TempDir("um")
        defer { dir.remove() }
        let bundle = try makeProbeBundle(in: dir.path, id: "com.cli.typo", extra: ["UIBackgroundModes": ["fetch", "audoi"]])
        let r = await apphost(["manifest", "show", bundle])
        #expect(r.status == 65, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("UIBackgroundModes[1]"), "points at the entry; stderr: \(r.stderr)")
        #expect(r.stderr.contains("\"audoi\""), "stderr: \(r.stderr)")
        #expect(r.stderr.contains("did you mean \"audio\""), "stderr: \(r.stderr)")
        #expect(r.stderr.contains(bundle + "/Info.plist"), "stderr: \(r.stderr)")
    }

    // MARK: - Verbs against a daemon

    @Test func fullVerbFlowAgainstADaemon() async throws {
        try await withCLISession("flow") { s in
            _ = try await s.startDaemon()
            let id = "com.cli.flow"
            let bundle = try makeProbeBundle(in: s.stateDir, id: id)

            let install = await s.run("install", bundle)
            try #require(install.status == 0, "install: \(install.stderr)")
            #expect(install.stdout.contains("installed \(id)"), "\(install.stdout)")
            #expect(install.stdout.contains(productsDirectory + "/ProbeApp"), "the executable found beside apphost: \(install.stdout)")

            let follow = try s.start(["events", "--follow", id])

            // launch prints `id: pid`.
            let launch = await s.run("launch", id)
            try #require(launch.status == 0, "launch: \(launch.stderr)")
            var pid = try #require(launchedPID(launch.stdout, id: id), "launch printed: \(launch.stdout)")
            #expect(processExists(pid))
            var cursor = try #require(await follow.line(containing: "inactive → active"), "events --follow: \(follow.lines)").index

            var status = try await statusJSON(s, id)
            #expect(status["bundleIdentifier"] as? String == id)
            #expect(status["state"] as? String == "active")
            #expect((status["pid"] as? NSNumber)?.int32Value == pid, "pid is a number: \(String(describing: status["pid"]))")
            #expect(status["since"] is String, "since: \(String(describing: status["since"]))")
            #expect(status["isFrontmost"] as? Bool == true)
            #expect((status["backgroundTasks"] as? [Any])?.isEmpty == true)

            // Home button: background, then suspended with a real SIGSTOP.
            let home = await s.run("background", id)
            #expect(home.status == 0, "background: \(home.stderr)")
            cursor = try #require(await follow.line(containing: "background → suspended", from: cursor + 1), "events --follow: \(follow.lines)").index
            #expect(kernelState(pid) == "T", "suspended must be state T in /proc/\(pid)/stat")
            status = try await statusJSON(s, id)
            #expect(status["state"] as? String == "suspended")
            #expect((status["pid"] as? NSNumber)?.int32Value == pid)
            #expect(status["isFrontmost"] as? Bool == false)

            // Foreground: resumed and active again.
            let front = await s.run("foreground", id)
            #expect(front.status == 0, "foreground: \(front.stderr)")
            cursor = try #require(await follow.line(containing: "inactive → active", from: cursor + 1), "events --follow: \(follow.lines)").index
            #expect(kernelState(pid) != "T")
            #expect(kernelState(pid) != nil)
            status = try await statusJSON(s, id)
            #expect(status["state"] as? String == "active")

            // Text status shows the same.
            let text = await s.run("status", id)
            #expect(text.stdout.contains("STATE"), "\(text.stdout)")
            #expect(text.stdout.contains(id) && text.stdout.contains("active *") && text.stdout.contains("\(pid)"), "\(text.stdout)")

            let list = await s.run("list", "--json")
            #expect(list.status == 0, "list: \(list.stderr)")
            let apps = try #require(try jsonPayload(list.stdout, "list") as? [[String: Any]], "list --json: \(list.stdout)")
            #expect(apps.map { $0["bundleIdentifier"] as? String } == [id])
            #expect(apps.first?["name"] as? String == "Probe")

            // events (not following) is the log so far and then ends.
            let events = await s.run("events")
            #expect(events.status == 0, "events: \(events.stderr)")
            let eventLines = events.stdout.split(separator: "\n")
            #expect(eventLines.contains { $0.contains("\(id)[\(pid)]") && $0.contains("background → suspended") }, "events:\n\(events.stdout)")
            #expect(eventLines.contains { $0.contains("host") && $0.contains("hostStarted") }, "events:\n\(events.stdout)")
            let json = await s.run("events", "--json", id)
            let objects = try jsonEvents(json.stdout)
            #expect(objects.contains { $0["from"] as? String == "background" && $0["to"] as? String == "suspended" }, "events --json:\n\(json.stdout)")

            // Unknown ids: exit 2 and the message names the id.
            for verb in ["launch", "foreground", "background", "terminate", "status", "uninstall", "events", "reports"] {
                let r = await s.run(verb, "com.cli.nope")
                #expect(r.status == 2, "\(verb) of an unknown id: exit \(r.status), stderr: \(r.stderr)")
                #expect(r.stderr.contains("com.cli.nope"), "\(verb): \(r.stderr)")
            }

            // launch of a running app with other arguments is refused (exit 1), naming
            // --terminate-running-process, which relaunches with them; the process stays.
            let again = await s.run("launch", id, "--", "--on", "active", "print:relaunched")
            #expect(again.status == 1, "exit \(again.status): \(again.stderr)")
            #expect(again.stderr.contains("already running") && again.stderr.contains("--terminate-running-process"), "\(again.stderr)")
            #expect(processExists(pid), "the running process is left as it was")
            // Without arguments: brought to the front, the same process.
            let toFront = await s.run("launch", id)
            #expect(launchedPID(toFront.stdout, id: id) == pid, "same process: \(toFront.stdout) \(toFront.stderr)")
            let relaunch = await s.run("launch", "--terminate-running-process", id, "--", "--on", "active", "print:relaunched")
            let newPID = try #require(launchedPID(relaunch.stdout, id: id), "relaunch printed: \(relaunch.stdout) \(relaunch.stderr)")
            #expect(newPID != pid)
            #expect(!processExists(pid), "the old process is gone")
            pid = newPID

            // terminate: notRunning, pid null, process reaped.
            let term = await s.run("terminate", id)
            #expect(term.status == 0, "terminate: \(term.stderr)")
            #expect(!processExists(pid), "terminate returns once the app is reaped")
            let raw = await s.run("status", "--json", id)
            let entry = try #require((try jsonPayload(raw.stdout, "status") as? [[String: Any]])?.first, "status --json: \(raw.stdout)")
            #expect(entry["state"] as? String == "notRunning")
            #expect(entry.keys.contains("pid") && entry["pid"] is NSNull, "\"pid\": null expected: \(raw.stdout)")
            let log = try String(contentsOfFile: s.stateDir + "/logs/\(id).log", encoding: .utf8)
            #expect(log.contains("willTerminate"), "log:\n\(log)")

            // uninstall: nothing listed.
            let uninstall = await s.run("uninstall", id)
            #expect(uninstall.status == 0, "uninstall: \(uninstall.stderr)")
            #expect(uninstall.stdout.contains("uninstalled \(id)"))
            let empty = await s.run("list", "--json")
            #expect((try jsonPayload(empty.stdout, "list") as? [Any])?.isEmpty == true, "list --json: \(empty.stdout)")
            let emptyText = await s.run("list")
            #expect(emptyText.stdout.contains("no apps installed"), "\(emptyText.stdout)")
        }
    }

    @Test func backgroundLaunchPrintsPidAndSuspends() async throws {
        try await withCLISession("bgl") { s in
            _ = try await s.startDaemon()
            let id = "com.cli.bglaunch"
            let install = await s.run("install", try makeProbeBundle(in: s.stateDir, id: id))
            try #require(install.status == 0, "install: \(install.stderr)")
            let follow = try s.start(["events", "--follow", id])
            let launch = await s.run("launch", "--background", id)
            let pid = try #require(launchedPID(launch.stdout, id: id), "launch printed: \(launch.stdout), stderr: \(launch.stderr)")
            _ = try #require(await follow.line(containing: "background → suspended"), "events --follow: \(follow.lines)")
            #expect(!follow.lines.contains { $0.contains("→ active") }, "a background launch never becomes active: \(follow.lines)")
            #expect(kernelState(pid) == "T")
        }
    }

    @Test func appExitStatusShowsInReports() async throws {
        try await withCLISession("rep") { s in
            _ = try await s.startDaemon()
            let id = "com.cli.exit3"
            let install = await s.run("install", try makeProbeBundle(in: s.stateDir, id: id))
            try #require(install.status == 0, "install: \(install.stderr)")
            let none = await s.run("reports", id)
            #expect(none.stdout.contains("no termination reports"), "\(none.stdout)")

            let follow = try s.start(["events", "--follow", id])
            let launch = await s.run("launch", id, "--", "--on", "active", "exit:3")
            try #require(launch.status == 0, "launch: \(launch.stderr)")
            let pid = try #require(launchedPID(launch.stdout, id: id), "launch printed: \(launch.stdout)")
            _ = try #require(await follow.line(containing: "report:"), "events --follow: \(follow.lines)")

            let json = await s.run("reports", "--json", id)
            #expect(json.status == 0, "reports: \(json.stderr)")
            let reports = try #require(try jsonPayload(json.stdout, "reports") as? [[String: Any]], "reports --json: \(json.stdout)")
            let report = try #require(reports.last)
            #expect(reports.count == 1)
            #expect((report["exitStatus"] as? NSNumber)?.int32Value == 3, "\(json.stdout)")
            #expect(report["bundleIdentifier"] as? String == id)
            #expect((report["pid"] as? NSNumber)?.int32Value == pid)
            #expect(report["lastStates"] is [Any])

            let text = await s.run("reports", id)
            #expect(text.status == 0)
            #expect(text.stdout.contains("Identifier:") && text.stdout.contains(id), "\(text.stdout)")
            #expect(text.stdout.contains("Exit Status:        3"), "\(text.stdout)")
            #expect(text.stdout.contains("PID:                \(pid)"), "\(text.stdout)")

            let status = try await statusJSON(s, id)
            #expect(status["state"] as? String == "notRunning")
            #expect(status["pid"] is NSNull)
            // The report is also a file under reports/.
            let files = try FileManager.default.contentsOfDirectory(atPath: s.stateDir + "/reports")
            #expect(files.contains { $0.hasPrefix(id) && $0.hasSuffix(".json") }, "reports/: \(files)")
        }
    }

    @Test func launchOfAnAppThatExitsDuringLaunchPointsToItsReport() async throws {
        try await withCLISession("lf") { s in
            _ = try await s.startDaemon()
            let id = "com.cli.launchfail"
            let install = await s.run("install", try makeProbeBundle(in: s.stateDir, id: id))
            try #require(install.status == 0, "install: \(install.stderr)")
            let launch = await s.run("launch", id, "--", "--on", "launch", "exit:7")
            #expect(launch.status == 1, "stderr: \(launch.stderr)")
            #expect(launch.stdout.isEmpty, "no `id: pid` for a failed launch: \(launch.stdout)")
            #expect(launch.stderr.contains("\(id) could not be launched"), "stderr: \(launch.stderr)")
            #expect(launch.stderr.contains("apphost reports \(id)"), "points to the report; stderr: \(launch.stderr)")
            let reports = await s.run("reports", "--json", id)
            let report = try #require((try jsonPayload(reports.stdout, "reports") as? [[String: Any]])?.last, "reports --json: \(reports.stdout)")
            #expect((report["exitStatus"] as? NSNumber)?.int32Value == 7)
            #expect((report["reason"] as? String)?.contains("during launch") == true, "\(reports.stdout)")
            #expect(try await statusJSON(s, id)["state"] as? String == "notRunning")
        }
    }

    @Test func installOfABadManifestIsRefusedNamingTheFile() async throws {
        try await withCLISession("ib") { s in
            _ = try await s.startDaemon()
            let bundle = s.stateDir + "/Broken.app"
            try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
            try Data("junk".utf8).write(to: URL(fileURLWithPath: bundle + "/Info.plist"))
            let broken = await s.run("install", bundle)
            #expect(broken.status != 0, "stdout: \(broken.stdout)")
            #expect(broken.stderr.contains(bundle + "/Info.plist"), "stderr: \(broken.stderr)")

            let noExecutable = await s.run("install", try makeProbeBundle(in: s.stateDir, id: "com.cli.noexe", executable: "NoSuchApp"))
            #expect(noExecutable.status != 0)
            #expect(noExecutable.stderr.contains("NoSuchApp"), "names the missing executable; stderr: \(noExecutable.stderr)")

            let list = await s.run("list", "--json")
            #expect((try jsonPayload(list.stdout, "list") as? [Any])?.isEmpty == true, "nothing installed: \(list.stdout)")
        }
    }

    // MARK: - Restart, shutdown, signals

    @Test func shutdownFreesTheStateDirectoryBeforeReturning() async throws {
        try await withCLISession("sd") { s in
            let first = try await s.startDaemon()
            let id = "com.cli.slowexit"
            let install = await s.run("install", try makeProbeBundle(in: s.stateDir, id: id))
            try #require(install.status == 0, "install: \(install.stderr)")
            // willTerminate takes a while (well inside the 5 s grace period).
            let launch = await s.run("launch", id, "--", "--on", "terminate", "block:3")
            try #require(launch.status == 0, "launch: \(launch.stderr)")

            let shutdown = await s.run("shutdown")
            #expect(shutdown.status == 0, "shutdown: \(shutdown.stderr)")
            // What a script does next: start a daemon on the same state directory.
            let next = try s.start(["daemon"])
            let ready = await next.line { $0.hasPrefix("apphost: daemon ready on") }
            #expect(ready != nil, "a new daemon starts once `apphost shutdown` has returned; it said: \(next.stderr)")
            #expect(await first.waitForExit() == .exited(0), "stderr: \(first.stderr)")
            let log = (try? String(contentsOfFile: s.stateDir + "/logs/\(id).log", encoding: .utf8)) ?? "(no log)"
            #expect(log.contains("willTerminate"), "log:\n\(log)")
        }
    }

    @Test func restartedDaemonStillListsInstalledApps() async throws {
        try await withCLISession("rs") { s in
            let first = try await s.startDaemon()
            let id = "com.cli.persist"
            let install = await s.run("install", try makeProbeBundle(in: s.stateDir, id: id))
            try #require(install.status == 0, "install: \(install.stderr)")
            let launch = await s.run("launch", id)
            let pid = try #require(launchedPID(launch.stdout, id: id), "launch printed: \(launch.stdout)")

            let shutdown = await s.run("shutdown")
            #expect(shutdown.status == 0, "shutdown: \(shutdown.stderr)")
            #expect(await first.waitForExit() == .exited(0), "daemon stderr:\n\(first.stderr)")
            #expect(!processExists(pid), "shutdown leaves no app running")
            #expect(!FileManager.default.fileExists(atPath: s.stateDir + "/control.sock"), "the socket is removed on a clean exit")
            let gone = await s.run("list")
            #expect(gone.status == 69)

            _ = try await s.startDaemon()
            let list = await s.run("list")
            #expect(list.status == 0, "list: \(list.stderr)")
            #expect(list.stdout.contains(id), "list after restart:\n\(list.stdout)")
            let status = try await statusJSON(s, id)
            #expect(status["state"] as? String == "notRunning")

            // And it launches again.
            let again = await s.run("launch", id)
            #expect(launchedPID(again.stdout, id: id) != nil, "launch after restart: \(again.stdout) \(again.stderr)")
        }
    }

    @Test func sigtermStopsTheDaemonGracefully() async throws {
        try await withCLISession("st") { s in
            let daemon = try await s.startDaemon()
            let suspended = "com.cli.sigterm.first"
            let active = "com.cli.sigterm.second"
            for id in [suspended, active] {
                let r = await s.run("install", try makeProbeBundle(in: s.stateDir, id: id))
                try #require(r.status == 0, "install \(id): \(r.stderr)")
            }
            let follow = try s.start(["events", "--follow"])
            let first = await s.run("launch", suspended)
            let firstPID = try #require(launchedPID(first.stdout, id: suspended), "launch printed: \(first.stdout) \(first.stderr)")
            let second = await s.run("launch", active)  // the first goes home
            let secondPID = try #require(launchedPID(second.stdout, id: active), "launch printed: \(second.stdout) \(second.stderr)")
            _ = try #require(await follow.line { $0.contains("\(suspended)[") && $0.contains("background → suspended") }, "\(follow.lines)")
            _ = try #require(await follow.line { $0.contains("\(active)[") && $0.contains("inactive → active") }, "\(follow.lines)")
            #expect(kernelState(firstPID) == "T")

            daemon.send(SIGTERM)
            let exit = await daemon.waitForExit()
            #expect(exit == .exited(0), "SIGTERM is a graceful stop, got \(exit); stderr:\n\(daemon.stderr)")
            #expect(!processExists(firstPID), "the suspended app is gone")
            #expect(!processExists(secondPID), "the active app is gone")
            for id in [suspended, active] {
                let log = (try? String(contentsOfFile: s.stateDir + "/logs/\(id).log", encoding: .utf8)) ?? "(no log)"
                #expect(log.contains("willTerminate"), "\(id) got willTerminate; log:\n\(log)")
            }
            // A follower's stream ends with the host, and it exits cleanly.
            #expect(await follow.waitForExit() == .exited(0), "events --follow stderr: \(follow.stderr)")
            #expect(follow.lines.contains { $0.contains("hostStopped") }, "\(follow.lines)")
            #expect(!FileManager.default.fileExists(atPath: s.stateDir + "/control.sock"))
        }
    }

    @Test func runInTheForegroundStopsOnCtrlC() async throws {
        try await withCLISession("run") { s in
            let id = "com.cli.run"
            let bundle = try makeProbeBundle(in: s.stateDir, id: id)
            let run = try s.start(["run", bundle])
            let banner = try #require(await run.line(where: { _ in true }), "no output; stderr:\n\(run.stderr)")
            #expect(banner.line.contains("apphost: host on \(s.stateDir)"), "\(banner.line)")
            #expect(banner.line.contains("apphost status --state-dir \(s.stateDir)"), "\(banner.line)")
            let active = try #require(await run.line { $0.contains("\(id)[") && $0.contains("inactive → active") },
                                      "run output:\n\(run.stdout)\nstderr:\n\(run.stderr)")
            let pid = try #require(eventPID(active.line, id: id), "no [pid] in \(active.line)")
            #expect(processExists(pid))

            // Other verbs work against it meanwhile.
            let status = try await statusJSON(s, id)
            #expect(status["state"] as? String == "active")
            #expect((status["pid"] as? NSNumber)?.int32Value == pid)

            run.send(SIGINT)
            let exit = await run.waitForExit()
            #expect(exit == .exited(0), "Ctrl-C is a graceful stop, got \(exit); stderr:\n\(run.stderr)")
            #expect(!processExists(pid), "the app is gone after Ctrl-C")
            #expect(run.stdout.contains("hostStopped"), "\(run.stdout)")
            let log = (try? String(contentsOfFile: s.stateDir + "/logs/\(id).log", encoding: .utf8)) ?? "(no log)"
            #expect(log.contains("willTerminate"), "log:\n\(log)")
        }
    }

    @Test func runRefusesABadBundleBeforeStartingAnything() async throws {
        try await withCLISession("rb") { s in
            let bundle = try makeProbeBundle(in: s.stateDir, id: "com.cli.typo", extra: ["UIBackgroundModes": ["audoi"]])
            let r = await s.run("run", bundle)
            #expect(r.status == 65, "stderr: \(r.stderr)")
            #expect(r.stderr.contains("did you mean \"audio\""), "stderr: \(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: s.stateDir + "/apphost.sqlite"), "no host was started")
        }
    }

    @Test func runOnAStateDirWithADaemonIsRefused() async throws {
        try await withCLISession("rbusy") { s in
            let daemon = try await s.startDaemon()
            let bundle = try makeProbeBundle(in: s.stateDir, id: "com.cli.busy")
            let r = await s.run("run", bundle)
            #expect(r.status == 75, "stderr: \(r.stderr)")
            #expect(r.stderr.contains("already running on \(s.stateDir)"), "stderr: \(r.stderr)")
            #expect(r.stderr.contains("pid \(daemon.pid)"), "stderr: \(r.stderr)")
            #expect(!r.stdout.contains("Ctrl-C to stop"), "a refused run does not claim to be running; stdout: \(r.stdout)")
            let list = await s.run("list", "--json")
            #expect((try jsonPayload(list.stdout, "list") as? [Any])?.isEmpty == true, "the refused run installed nothing: \(list.stdout)")
            #expect(daemon.exit == nil)
        }
    }

    // MARK: - Help

    @Test func helpListsVerbsAndOptions() async throws {
        let root = await apphost(["--help"])
        #expect(root.status == 0, "stderr: \(root.stderr)")
        for verb in ["run", "daemon", "install", "uninstall", "list", "launch", "foreground", "background",
                     "terminate", "status", "events", "reports", "manifest", "shutdown"] {
            #expect(root.stdout.contains("  \(verb) "), "root --help lacks \(verb):\n\(root.stdout)")
        }

        let launch = await apphost(["launch", "--help"])
        #expect(launch.status == 0, "stderr: \(launch.stderr)")
        #expect(launch.stdout.contains("--background"), "\(launch.stdout)")
        #expect(launch.stdout.contains("--state-dir"), "\(launch.stdout)")
        #expect(launch.stdout.contains("<bundle-id>"), "\(launch.stdout)")

        let unknown = await apphost(["lauch"])
        #expect(unknown.status == 64, "an unknown verb is a usage error; stderr: \(unknown.stderr)")
        #expect(unknown.stderr.contains("lauch"), "\(unknown.stderr)")
    }
}

/// `apphost status --json <id>` as the single object it should contain.
private func statusJSON(_ s: CLISession, _ id: String) async throws -> [String: Any] {
    let r = await s.run("status", "--json", id)
    try #require(r.status == 0, "status --json: exit \(r.status), stderr: \(r.stderr)")
    let array = try #require(try jsonPayload(r.stdout, "status") as? [[String: Any]], "status --json is not an array of objects: \(r.stdout)")
    #expect(array.count == 1, "one app asked for: \(r.stdout)")
    return try #require(array.first { $0["bundleIdentifier"] as? String == id }, "no \(id) in \(r.stdout)")
}
