import Foundation
import TestSupport
import Testing

/// The Xcode-like project in Tests/Fixtures/XcodeProject.
private let fixtureProject = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/XcodeProject").standardizedFileURL.path

/// `apphost manifest show`, `lint`, `install` and `push` on a real project's own files
/// (issue 19), run as a user runs them: the built binary, its output and exit status.
@Suite("CLI: real project files", .tags(.process), .timeLimit(.minutes(2)),
       .enabled(if: cliBuilt, "apphost and the probe app not built: run `swift build` first"))
struct ProjectFilesCLITests {
    let plist = fixtureProject + "/Walker/Info.plist"
    let base = fixtureProject + "/Config/Base.xcconfig"
    let entitlements = fixtureProject + "/Walker/Supporting Files/Walker.entitlements"

    @Test func manifestShowTakesTheProjectsXcconfigAndEntitlements() async throws {
        let r = await apphost(["manifest", "show", "--xcconfig", base, "--entitlements", entitlements, plist])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        // `key<padding>  value` lines.
        var rows: [String: String] = [:]
        for line in r.stdout.split(separator: "\n").map(String.init) {
            guard let gap = line.range(of: "  ") else { continue }
            rows[String(line[..<gap.lowerBound])] = line[gap.upperBound...].trimmingCharacters(in: .whitespaces)
        }
        #expect(rows["bundle id"] == "com.example.walker", "\(r.stdout)")
        #expect(rows["executable"] == "Walker")
        #expect(rows["name"] == "Walker")
        #expect(rows["display name"] == "Walker")
        #expect(rows["BGTask identifiers"] == "com.example.walker.refresh")
        #expect(rows["entitlements"] == "aps-environment = development, com.apple.security.application-groups = [group.com.example.walker]")
        #expect(rows["entitlements file"] == entitlements)
        // [config=Debug] is skipped without a configuration: said once, on stderr.
        #expect(r.stderr == "apphost: warning: \(fixtureProject)/Config/Debug.xcconfig:8: settings conditioned on [config=...] were skipped: no configuration is named (pass --setting CONFIGURATION=Debug, or Release, to apply them)\n")

        // --setting names the configuration and the SDK; --json carries the entitlements.
        let debug = await apphost(["manifest", "show", "--json", "--xcconfig", base, "--setting", "CONFIGURATION=Debug",
                                   "--setting", "SDK_NAME=iphonesimulator", "--entitlements", entitlements, plist])
        #expect(debug.status == 0 && debug.stderr.isEmpty, "stderr: \(debug.stderr)")
        let json = try #require(try parseJSON(debug.stdout) as? [String: Any], "\(debug.stdout)")
        #expect(json["bundleIdentifier"] as? String == "com.example.walker.debug")
        #expect(json["displayName"] as? String == "Walker-Sim")
        let shown = try #require(json["entitlements"] as? [String: Any], "\(debug.stdout)")
        #expect(shown["file"] as? String == entitlements)
        #expect(shown["keys"] as? [String] == ["aps-environment", "com.apple.security.application-groups"])
        let values = try #require(shown["values"] as? [String: Any])
        #expect(values["aps-environment"] as? String == "development")
        #expect(values["com.apple.security.application-groups"] as? [String] == ["group.com.example.walker"])

        // --setting wins over the xcconfig, as xcodebuild KEY=VALUE does.
        let over = await apphost(["manifest", "show", "--json", "--xcconfig", base, "--setting", "PRODUCT_BUNDLE_IDENTIFIER=org.example.ci", plist])
        #expect((try parseJSON(over.stdout) as? [String: Any])?["bundleIdentifier"] as? String == "org.example.ci", "\(over.stdout)")
        #expect((try parseJSON(over.stdout) as? [String: Any])?["entitlements"] is NSNull, "no entitlements file beside it: null")
    }

    @Test func whatIsStillMissingIsNamed() async throws {
        // The partial Info.plist alone: the error names the setting to pass.
        let bare = await apphost(["manifest", "show", plist])
        #expect(bare.status == 65)
        #expect(bare.stdout.isEmpty)
        #expect(bare.stderr == "apphost: \(plist): CFBundleIdentifier: missing, and Xcode fills it from $(PRODUCT_BUNDLE_IDENTIFIER), but PRODUCT_BUNDLE_IDENTIFIER has no value (pass --setting PRODUCT_BUNDLE_IDENTIFIER=... or an --xcconfig file that sets it)\n")

        let dir = try TempDir("xcc")
        defer { dir.remove() }
        // A broken xcconfig: file and line, exit 65, for every verb that reads one.
        let broken = dir.path + "/Broken.xcconfig"
        try Data("// fine\nPRODUCT_NAME = A\n#include \"Missing.xcconfig\"\n".utf8).write(to: URL(fileURLWithPath: broken))
        for verb in [["manifest", "show"], ["lint"], ["install", "--state-dir", dir.path]] {
            let r = await apphost(verb + ["--xcconfig", broken, plist])
            #expect(r.status == 65, "\(verb): \(r.status) \(r.stderr)")
            #expect(r.stderr == "apphost: \(broken):3: #include \"\(dir.path)/Missing.xcconfig\": file not found\n", "\(verb)")
        }
        // A named entitlements file that is not there.
        let missing = await apphost(["manifest", "show", "--xcconfig", base, "--entitlements", dir.path + "/nope.entitlements", plist])
        #expect(missing.status == 65)
        #expect(missing.stderr.hasSuffix("apphost: \(dir.path)/nope.entitlements: file not found\n"), "\(missing.stderr)")
        // An entitlements file where the Info.plist goes.
        for verb in [["manifest", "show"], ["install", "--state-dir", dir.path]] {
            let r = await apphost(verb + [entitlements])
            #expect(r.status == 65, "\(verb): \(r.stderr)")
            #expect(r.stderr.contains("this is an entitlements file, not an app bundle or Info.plist"), "\(verb): \(r.stderr)")
        }
        let lint = await apphost(["lint", entitlements])
        #expect(lint.status == 1)
        #expect(lint.stdout.hasPrefix("\(entitlements): error: this is an entitlements file"), "\(lint.stdout)")
    }

    @Test func lintChecksTheProjectAsXcodeWouldBuildIt() async throws {
        let clean = await apphost(["lint", "--xcconfig", base, "--entitlements", entitlements, plist])
        #expect(clean.status == 0, "stdout:\n\(clean.stdout)\nstderr:\n\(clean.stderr)")
        #expect(clean.stdout.hasSuffix("0 error(s), 0 warning(s)\n"), "\(clean.stdout)")

        let bare = await apphost(["lint", plist])
        #expect(bare.status == 1)
        let lines = bare.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("\(plist): error: background mode \"bluetooth-central\" without NSBluetoothAlwaysUsageDescription: iOS terminates the app the first time it uses Core Bluetooth (a privacy violation: no usage description), and App Store Connect refuses the build"),
                "\(bare.stdout)")
        #expect(lines.last == "4 error(s), 0 warning(s)", "\(bare.stdout)")

        // The help says what lint checks today: every mode AppHost emulates is judged.
        let help = await apphost(["lint", "--help"])
        #expect(help.stdout.contains("all nine modes AppHost emulates are judged"))
        #expect(!help.stdout.contains("not emulate yet"), "\(help.stdout)")
        for option in ["--xcconfig", "--entitlements", "NSBluetoothAlwaysUsageDescription"] {
            #expect(help.stdout.contains(option), "\(option)")
        }
        // (The USAGE line is ArgumentParser's, wrapped by the help work of issue 19.)
        for line in help.stdout.split(separator: "\n") where !line.hasPrefix("USAGE:") {
            #expect(line.count <= 80, "over 80 columns: \(line)")
        }
    }

    @Test func installTakesTheProjectsFilesAndWarnsOfMisnamedEntitlements() async throws {
        try await withCLISession("xcinst") { s in
            // The project as a user has it after building: the executable beside Info.plist.
            let project = s.stateDir + "/Walker"
            try FileManager.default.copyItem(atPath: fixtureProject, toPath: project)
            try FileManager.default.copyItem(atPath: productsDirectory + "/ProbeApp", toPath: project + "/Walker/Walker")
            // An entitlements file beside Info.plist under another name than the bundle's.
            try FileManager.default.copyItem(atPath: project + "/Walker/Supporting Files/Walker.entitlements",
                                             toPath: project + "/Walker/WalkerDebug.entitlements")
            _ = try await s.startDaemon(["--clock", "virtual"])

            let plain = await s.run("install", "--setting", "PRODUCT_BUNDLE_IDENTIFIER=com.example.plain", project + "/Walker")
            #expect(plain.status == 0, "\(plain.stderr)")
            #expect(plain.stderr.contains("apphost: warning: \(project)/Walker/Info.plist: \(project)/Walker/WalkerDebug.entitlements is not read: AppHost looks for \(project)/Walker/Walker.entitlements (the bundle's name)"),
                    "\(plain.stderr)")

            let r = await s.run("install", "--json", "--xcconfig", project + "/Config/Base.xcconfig", "--setting", "CONFIGURATION=Debug",
                                "--entitlements", project + "/Walker/Supporting Files/Walker.entitlements", project + "/Walker/Info.plist")
            #expect(r.status == 0, "\(r.stderr)")
            #expect(!r.stderr.contains("is not read"), "--entitlements names the file: \(r.stderr)")
            let app = try #require(try parseJSON(r.stdout) as? [String: Any], "\(r.stdout)")
            #expect(app["bundleIdentifier"] as? String == "com.example.walker.debug")
            #expect(app["entitlements"] as? [String] == ["aps-environment", "com.apple.security.application-groups"])
            #expect(app["applicationGroups"] as? [String] == ["group.com.example.walker"])
            let manifest = try #require(app["manifest"] as? [String: Any])
            #expect(manifest["bgTaskIdentifiers"] as? [String] == ["com.example.walker.debug.refresh"])

            let listed = await s.run("list")
            #expect(listed.stdout.contains("com.example.walker.debug"), "\(listed.stdout)")
        }
    }

    @Test func pushFilesAsPeopleWriteThem() async throws {
        try await withCLISession("xcpush") { s in
            func write(_ text: String, _ name: String) throws -> String {
                let path = s.stateDir + "/" + name
                try Data(text.utf8).write(to: URL(fileURLWithPath: path))
                return path
            }
            // A string where APNs wants a number: a warning saying what iOS does; not silent.
            let stringy = try write(#"{"Simulator Target Bundle": "com.example.walker", "aps": {"content-available": "1"}}"#, "s.apns")
            let dry = await apphost(["push", "--dry-run", stringy])
            #expect(dry.status == 0, "\(dry.stderr)")
            #expect(dry.stderr.contains("apphost: warning: \(stringy): \"aps\".\"content-available\" is the string \"1\", not a number"), "\(dry.stderr)")
            #expect(dry.stderr.contains("this is not a background (silent) push"), "\(dry.stderr)")
            #expect(dry.stdout.contains("push type  alert (inferred from the payload)"), "\(dry.stdout)")

            // A misspelled target key, no bundle id: refused, with "did you mean".
            let misspelled = try write(#"{"Simulation Target Bundle": "com.example.walker", "aps": {"alert": "Hi"}}"#, "m.apns")
            let refused = await apphost(["push", "--dry-run", misspelled])
            #expect(refused.status == 64)
            #expect(refused.stderr == "apphost: no app to push to (\(misspelled) has \"Simulation Target Bundle\", which simctl does not read: did you mean \"Simulator Target Bundle\"?): give a bundle id (apphost push <bundle-id> \(misspelled)) or put \"Simulator Target Bundle\": \"<bundle-id>\" in \(misspelled)\n")
            // With the id given, a warning.
            let given = await apphost(["push", "--dry-run", "com.example.walker", misspelled])
            #expect(given.status == 0 && given.stderr.contains("did you mean \"Simulator Target Bundle\"?"), "\(given.stderr)")
            // What simctl refuses stays refused, with its message.
            let trailing = try write("{\"aps\": {\"alert\": \"Hi\",}}", "t.apns")
            let bad = await apphost(["push", "--dry-run", "com.example.walker", trailing])
            #expect(bad.status == 65 && bad.stderr.contains("trailing comma"), "\(bad.stderr)")

            // A team ID prefix: matched to the installed app, with a note.
            let prefixed = try write(#"{"Simulator Target Bundle": "ABCDE12345.com.example.teamapp", "aps": {"alert": "Hi"}}"#, "p.apns")
            let preview = await apphost(["push", "--dry-run", prefixed])
            #expect(preview.stdout.contains("it starts with a team ID: a host with com.example.teamapp installed, and not ABCDE12345.com.example.teamapp, delivers to com.example.teamapp"),
                    "\(preview.stdout)")
            _ = try await s.startDaemon(["--clock", "virtual"])
            let bundle = try makeProbeBundle(in: s.stateDir, id: "com.example.teamapp")
            #expect(await s.run("install", bundle).status == 0)
            let sent = await apphost(["push", prefixed, "--state-dir", s.stateDir])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(sent.stderr == "apphost: note: \"ABCDE12345.com.example.teamapp\" starts with the team ID ABCDE12345 (an application identifier); pushing to the installed com.example.teamapp\n")
            let events = await s.run("events", "com.example.teamapp")
            #expect(events.stdout.contains("notification shown"), "\(events.stdout)")
            // An id that is not installed either way is refused by the host, as before.
            let unknown = try write(#"{"Simulator Target Bundle": "ABCDE12345.com.example.nosuch", "aps": {"alert": "Hi"}}"#, "u.apns")
            let notInstalled = await apphost(["push", unknown, "--state-dir", s.stateDir])
            #expect(notInstalled.status != 0 && notInstalled.stderr.contains("ABCDE12345.com.example.nosuch"), "\(notInstalled.stderr)")
        }
    }
}
