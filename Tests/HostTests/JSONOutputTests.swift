import AppHostProtocol
import Foundation
import Testing
import TestSupport

// Every `--json` output has a schema in docs/schemas (docs/json.md lists them). These
// tests run each verb against a real daemon, as a user would, and hold what it prints
// to its schema with TestSupport's JSONSchema validator; the validator itself is
// tested to fail on a missing, renamed or mistyped field.

/// The kinds of `--json` output: `docs/schemas/<kind>.schema.json` each.
let jsonOutputKinds = ["status", "list", "install", "reports", "event", "clock", "profile", "fetchSchedule", "bgtaskList",
                       "settings", "device", "snapshot", "switcher", "manifest", "listDevices", "listapps", "bleList", "accessoryList"]

func outputSchema(_ kind: String) throws -> JSONSchema {
    try JSONSchema(path: packageRoot + "/docs/schemas/\(kind).schema.json")
}

/// Expects `text` (one JSON document) to conform to `kind`'s schema.
func expectConforms(_ text: String, to kind: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let violations = try outputSchema(kind).violations(ofJSON: text)
    #expect(violations.isEmpty, "\(what) against \(kind).schema.json:\n\(violations.map(\.description).joined(separator: "\n"))\n\(text.prefix(2000))",
            sourceLocation: sourceLocation)
}

@Suite("JSON schemas")
struct JSONSchemaTests {
    @Test func everyOutputHasOneSchemaFileWithIdAndTitle() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: packageRoot + "/docs/schemas").filter { $0.hasSuffix(".schema.json") }
        #expect(Set(files) == Set(jsonOutputKinds.map { "\($0).schema.json" }), "docs/schemas: \(files.sorted())")
        let page = try String(contentsOfFile: packageRoot + "/docs/json.md", encoding: .utf8)
        for kind in jsonOutputKinds {
            let schema = try outputSchema(kind)
            #expect(schema.id == "urn:apphost:json:\(kind):v1", "\(kind): $id \(String(describing: schema.id))")
            #expect(page.contains("schemas/\(kind).schema.json"), "docs/json.md links \(kind).schema.json")
            // The envelope: version and kind are required constants.
            #expect(!schema.violations(ofJSON: #"{"version": 2, "kind": "\#(kind)"}"#).isEmpty)
        }
    }

    /// A status answer as the CLI prints it, to break in each way a change could.
    static let status = """
        {"version": 1, "kind": "status", "apps": [{"bundleIdentifier": "com.example.a", "state": "suspended", "pid": 42,
         "since": "2025-01-01T00:00:00.000Z", "backgroundTasks": [], "isFrontmost": false, "activities": ["audio playback"],
         "footprint": null}]}
        """

    @Test func theValidatorPassesAConformingOutput() throws {
        #expect(try outputSchema("status").violations(ofJSON: Self.status).isEmpty)
    }

    @Test(arguments: [
        ("a missing field", #""state": "suspended", "#, "", "required field \"state\" is missing"),
        ("a renamed field", #""pid": 42"#, #""processID": 42"#, "field \"processID\" is not in the schema"),
        ("a wrong type", #""pid": 42"#, #""pid": "42""#, "expected integer or null, got string"),
        ("a fraction for an integer", #""pid": 42"#, #""pid": 4.2"#, "expected integer or null"),
        ("a boolean for a number", #""pid": 42"#, #""pid": true"#, "expected integer or null, got boolean"),
        ("a value outside the enum", #""state": "suspended""#, #""state": "asleep""#, "\"asleep\" is not one of"),
        ("another version", #""version": 1"#, #""version": 2"#, "expected 1, got 2"),
        ("another kind", #""kind": "status""#, #""kind": "list""#, "expected \"status\", got \"list\""),
        ("an item of the wrong type", #""activities": ["audio playback"]"#, #""activities": [7]"#, "/apps/0/activities/0: expected string"),
        ("a missing payload", #""apps": ["#, #""app": ["#, "required field \"apps\" is missing"),
    ])
    func theValidatorFailsABrokenOutput(what: String, replacing: String, with: String, message: String) throws {
        let broken = Self.status.replacingOccurrences(of: replacing, with: with)
        #expect(broken != Self.status, "\(what): the replacement applies")
        let violations = try outputSchema("status").violations(ofJSON: broken)
        #expect(violations.contains { $0.description.contains(message) }, "\(what): \(violations)")
    }

    @Test func aSchemaUsingAnUnsupportedKeywordIsRefused() throws {
        #expect(throws: JSONSchema.SchemaError.self) { try JSONSchema(data: Data(#"{"type": "integer", "minimum": 0}"#.utf8)) }
        #expect(throws: JSONSchema.SchemaError.self) { try JSONSchema(data: Data(##"{"$ref": "#/$defs/nothing"}"##.utf8)) }
        #expect(throws: JSONSchema.SchemaError.self) { try JSONSchema(data: Data(#"{"type": "integr"}"#.utf8)) }
        #expect(throws: JSONSchema.SchemaError.self) {
            try JSONSchema(data: Data(#"{"properties": {"a": {"pattern": "x"}}}"#.utf8))
        }
        #expect(throws: (any Error).self) { try JSONSchema(data: Data("not json".utf8)) }
    }

    @Test func nullableAndBooleanTypesAreTold() throws {
        let schema = try JSONSchema(data: Data(#"{"type": "object", "properties": {"b": {"type": "boolean"}, "n": {"type": ["integer", "null"]}}}"#.utf8))
        #expect(schema.violations(ofJSON: #"{"b": true, "n": null}"#).isEmpty)
        #expect(schema.violations(ofJSON: #"{"b": false, "n": 0}"#).isEmpty)
        #expect(!schema.violations(ofJSON: #"{"b": 1}"#).isEmpty, "1 is not a boolean")
        #expect(!schema.violations(ofJSON: #"{"n": false}"#).isEmpty, "false is not an integer")
    }
}

@Suite("JSON output of the CLI", .tags(.process), .timeLimit(.minutes(3)),
       .enabled(if: cliBuilt, "apphost and ProbeApp not built: run `swift build` first (scripts/test.sh does)"))
struct JSONOutputCLITests {
    @Test func everyListingVerbPrintsItsSchema() async throws {
        try await withCLISession("json") { s in
            // No daemon needed: manifest show, profile show.
            let bundle = try makeProbeBundle(in: s.stateDir, id: "com.cli.json", extra: [
                "UIBackgroundModes": ["fetch", "processing", "remote-notification"],
                "BGTaskSchedulerPermittedIdentifiers": ["com.cli.json.refresh", "com.cli.json.clean"],
            ], entitlements: ["aps-environment": "development"])
            let crasher = try makeProbeBundle(in: s.stateDir, id: "com.cli.json.crash")
            try expectConforms(try ok(await apphost(["manifest", "show", "--json", bundle]), "manifest show"), to: "manifest", "manifest show")
            let offline = try ok(await s.run("profile", "show", "--json", "--profile", "ios7"), "profile show (no daemon)")
            try expectConforms(offline, to: "profile", "profile show (no daemon)")
            #expect((try parseJSON(offline) as? [String: Any])?["source"] as? String == "options")
            try expectConforms(try ok(await s.run("profile", "show", "--all", "--json"), "profile show --all"), to: "profile", "profile show --all")

            _ = try await s.startDaemon(["--clock", "virtual"])
            let follow = try s.start(["events", "--follow", "--json"])
            let installed = try ok(await s.run("install", "--json", bundle), "install")
            try expectConforms(installed, to: "install", "install --json")
            #expect(await s.run("install", crasher).status == 0)
            let id = "com.cli.json"
            _ = try ok(await s.run("launch", id, "--", "--on", "launch", "fetch-interval:minimum", "--on", "launch", "register-push",
                                   "--on", "launch", "bg-register:com.cli.json.refresh", "--on", "launch", "bg-register:com.cli.json.clean",
                                   "--on", "launch", "bg-submit:refresh:com.cli.json.refresh:3600",
                                   "--on", "launch", "bg-submit:processing:com.cli.json.clean:60:power",
                                   "--on", "launch", "window:Balance", "--on", "active", "begin-task:upload",
                                   "--on", "background", "end-task:upload"), "launch")
            _ = try ok(await s.run("background", id), "background")
            _ = try #require(await follow.line(where: { $0.contains(#""to":"suspended""#) }), "suspended: \(follow.lines)")

            // Something in the BLE and accessory worlds, so their listings have content.
            _ = try ok(await s.run("ble", "add", "hr", "--service", "180D", "--name", "Heart"), "ble add")
            _ = try ok(await s.run("accessory", "connect", "com.acme.printer", "--name", "Printer"), "accessory connect")
            let world = try #require(try jsonPayload(try ok(await s.run("ble", "list", "--json"), "ble list"), "bleList") as? [String: Any])
            let peripherals = try #require(world["peripherals"] as? [[String: Any]])
            #expect(peripherals.first?["id"] as? String == "hr" && peripherals.first?["services"] as? [String] == ["180D"], "\(world)")
            #expect(try ok(await s.run("ble", "list"), "ble list").contains("hr \"Heart\" services 180D"), "the text says the same")
            let accessories = try #require(try jsonPayload(try ok(await s.run("accessory", "list", "--json"), "accessory list"), "accessoryList") as? [[String: Any]])
            #expect(accessories.map { $0["name"] as? String } == ["Printer"] && accessories.first?["protocols"] as? [String] == ["com.acme.printer"], "\(accessories)")

            let daemonProfile = try ok(await s.run("profile", "show", "--json"), "profile show")
            try expectConforms(daemonProfile, to: "profile", "profile show")
            #expect((try parseJSON(daemonProfile) as? [String: Any])?["source"] as? String == "daemon")
            for verb in [["status"], ["status", id], ["list"], ["clock", "now"], ["clock", "advance", "1s"], ["settings", "show"],
                         ["device", "show"], ["fetch", "schedule"], ["bgtask", "list"], ["bgtask", "list", id], ["snapshot", id], ["switcher"],
                         ["list-devices"], ["listapps"], ["ble", "list"], ["accessory", "list"]] {
                let kind = switch verb[0] {
                case "ble": "bleList"
                case "accessory": "accessoryList"
                case "clock": "clock"
                case "settings": "settings"
                case "device": "device"
                case "fetch": "fetchSchedule"
                case "bgtask": "bgtaskList"
                case "list-devices": "listDevices"
                default: verb[0]
                }
                try expectConforms(try ok(await apphost(s.withStateDir(verb + ["--json"])), verb.joined(separator: " ")), to: kind, verb.joined(separator: " "))
            }

            // The data says what the text says.
            let schedule = try #require(try jsonPayload(try ok(await s.run("fetch", "schedule", "--json"), "fetch schedule"), "fetchSchedule") as? [String: Any])
            let entry = try #require((schedule["apps"] as? [[String: Any]])?.first)
            #expect(entry["bundleIdentifier"] as? String == id && entry["status"] as? String == "scheduled", "\(schedule)")
            let scheduleText = try ok(await s.run("fetch", "schedule"), "fetch schedule (text)")
            #expect(scheduleText.contains("\(id): next fetch in"), "\(scheduleText)")
            let tasks = try #require(try jsonPayload(try ok(await s.run("bgtask", "list", "--json"), "bgtask list"), "bgtaskList") as? [[String: Any]])
            #expect(tasks.map { $0["identifier"] as? String } == ["com.cli.json.clean", "com.cli.json.refresh"], "\(tasks)")
            #expect(tasks.first?["requiresExternalPower"] as? Bool == true && tasks.first?["state"] as? String == "pending")
            _ = try ok(await s.run("device", "power", "battery"), "device power battery")
            _ = try ok(await s.run("settings", "low-power", "on"), "low power on")
            let device = try #require(try jsonPayload(try ok(await s.run("device", "show", "--json"), "device show"), "device") as? [String: Any])
            #expect(device["power"] as? String == "battery" && device["lock"] as? String == "unlocked", "\(device)")
            #expect((device["memory"] as? [String: Any])?["pressure"] as? String == "normal", "\(device)")
            let waiting = try #require(try jsonPayload(try ok(await s.run("bgtask", "list", "--json", id), "bgtask list"), "bgtaskList") as? [[String: Any]])
            #expect(waiting.allSatisfy { ($0["waitingFor"] as? String)?.contains("Low Power Mode") == true }, "\(waiting)")
            let settings = try #require(try jsonPayload(try ok(await s.run("settings", "show", "--json"), "settings show"), "settings") as? [String: Any])
            #expect(settings["lowPowerMode"] as? Bool == true && settings["backgroundRefresh"] as? Bool == true, "\(settings)")
            try expectConforms(try ok(await s.run("fetch", "schedule", "--json"), "fetch schedule"), to: "fetchSchedule", "fetch schedule, not scheduled")
            _ = try ok(await s.run("settings", "low-power", "off"), "low power off")
            _ = try ok(await s.run("bgtask", "run", id, "com.cli.json.refresh"), "bgtask run")
            _ = try #require(await follow.line(where: { $0.contains(#""success":true"#) }), "BGTask completed: \(follow.lines)")

            // A crash: a report to list.
            _ = try ok(await s.run("launch", "com.cli.json.crash", "--", "--on", "active", "crash"), "launch the crasher")
            _ = try #require(await follow.line(where: { $0.contains(#""kind":"report""#) }), "report: \(follow.lines)")
            let reports = try ok(await s.run("reports", "--json"), "reports")
            try expectConforms(reports, to: "reports", "reports --json")
            #expect((try jsonPayload(reports, "reports") as? [Any])?.count == 1, "\(reports)")
            try expectConforms(try ok(await s.run("reports", "--json", id), "reports of an app without any"), to: "reports", "reports (none)")

            // Every event line, logged and followed, conforms; the typed fields are there.
            let logged = try ok(await s.run("events", "--json"), "events")
            for line in logged.split(separator: "\n") { try expectConforms(String(line), to: "event", "events --json line") }
            for line in follow.lines { try expectConforms(line, to: "event", "events --follow --json line") }
            let events = try jsonEvents(logged)
            let token = try #require(events.first { $0["deviceToken"] != nil }, "a registration event with the device token")
            #expect((token["deviceToken"] as? String)?.count == 64 && (token["cause"] as? String)?.contains("device token") == true, "\(token)")
            let begun = try #require(events.first { $0["kind"] as? String == "backgroundTask" && $0["began"] as? Bool == true })
            let ended = try #require(events.first { $0["kind"] as? String == "backgroundTask" && $0["began"] as? Bool == false })
            #expect(ended["taskName"] as? String == "upload" && ended["task"] as? Int == begun["task"] as? Int, "\(begun) \(ended)")
            #expect(events.contains { $0["kind"] as? String == "modeUsed" && $0["bgTask"] as? String == "com.cli.json.refresh" }, "launched")
            #expect(events.contains { $0["callback"] != nil && $0["bgTask"] as? String == "com.cli.json.refresh" }, "its callback")
            #expect(events.contains { $0["bgTask"] as? String == "com.cli.json.refresh" && $0["success"] as? Bool == true }, "completed")
        }
    }

    /// The exit statuses a few error cases return are those of README's table.
    @Test func exitStatusesAreThoseOfTheREADMETable() async throws {
        let table = try exitStatusTable()
        for code: Int32 in [0, 1, 2, 64, 65, 66, 69, 75] {
            #expect(table[code] != nil, "README's exit status table lists \(code): \(table.keys.sorted())")
        }
        try await withCLISession("exit") { s in
            let noDaemon = await s.run("status")
            #expect(noDaemon.status == 69 && table[69]?.contains("no daemon") == true, "\(noDaemon)")
            let usage = await s.run("clock", "advance", "soon")
            #expect(usage.status == 64 && table[64]?.contains("command line") == true, "\(usage)")
            let missing = await apphost(["manifest", "show", s.stateDir + "/Nothing.app"])
            #expect(missing.status == 66 && table[66]?.contains("does not exist") == true, "\(missing)")
            let payload = try writeFile("{\"aps\": ", s.stateDir + "/bad.apns")
            let bad = await s.run("push", "--dry-run", "com.cli.x", payload)
            #expect(bad.status == 65 && table[65]?.contains("content") == true, "\(bad)")
            let daemon = try await s.startDaemon()
            let unknown = await s.run("launch", "com.cli.nosuch")
            #expect(unknown.status == 2 && table[2]?.contains("not installed") == true, "\(unknown)")
            let second = await s.run("daemon")
            #expect(second.status == 75 && table[75]?.contains("another daemon") == true, "\(second)")
            let notRunning = await s.run("foreground", "com.cli.nosuch2")
            #expect(notRunning.status == 2, "\(notRunning)")
            _ = daemon
        }
    }

    /// `| code | meaning |` rows of README's "Exit statuses" section.
    func exitStatusTable() throws -> [Int32: String] {
        let readme = try String(contentsOfFile: packageRoot + "/README.md", encoding: .utf8)
        let start = try #require(readme.range(of: "## Exit statuses"), "README has an Exit statuses section")
        let section = readme[start.upperBound...]
        let end = section.range(of: "\n## ")?.lowerBound ?? section.endIndex
        var table: [Int32: String] = [:]
        for line in section[..<end].split(separator: "\n") where line.hasPrefix("| ") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 2, let code = Int32(cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))) else { continue }
            table[code] = cells[1]
        }
        return table
    }

    func writeFile(_ text: String, _ path: String) throws -> String {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The stdout of a run that must succeed.
    func ok(_ r: (status: Int32, stdout: String, stderr: String), _ what: String,
            sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        try #require(r.status == 0, "\(what): exit \(r.status), stderr: \(r.stderr)", sourceLocation: sourceLocation)
        return r.stdout
    }
}
