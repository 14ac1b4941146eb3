import AppHostProtocol
import Foundation
import HostConfig
import Testing

/// The config file's budgets and identities, and durations as text.
@Suite("Host config: budgets")
struct BudgetConfigTests {
    @Test func durationsParse() throws {
        #expect(try DurationText.seconds("31s") == 31)
        #expect(try DurationText.seconds("10m") == 600)
        #expect(try DurationText.seconds("1h") == 3600)
        #expect(try DurationText.seconds("1h30m") == 5400)
        #expect(try DurationText.seconds("250ms") == 0.25)
        #expect(try DurationText.seconds("1.5s") == 1.5)
        #expect(try DurationText.seconds("42") == 42)
        #expect(throws: BudgetError.self) { try DurationText.seconds("soon") }
        #expect(throws: BudgetError.self) { try DurationText.seconds("5y") }
        #expect(throws: BudgetError.self) { try DurationText.seconds("-3s") }
        #expect(DurationText.format(31) == "31s")
        #expect(DurationText.format(5400) == "1h30m")
        #expect(DurationText.format(0.25) == "250ms")
    }

    @Test func configFileOverridesSingleValuesAndProfileFlagWins() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("budget-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("config.json")
        try Data(#"{"profile": "ios7", "budgets": {"backgroundTask": "45s", "launch": 10}}"#.utf8).write(to: file)
        let config = try HostConfigFile.load(path: file.path)
        let p = try HostConfigFile.resolve(profile: nil, file: config)
        #expect(p.backgroundTask == 45)
        #expect(p.launch == 10)
        #expect(p.fetch == 30)
        #expect(p.name == "ios7+config")
        let flag = try HostConfigFile.resolve(profile: "ios6", file: config)
        #expect(flag.backgroundTask == 45, "overrides apply on top of the chosen profile")
        #expect(flag.name == "ios6+config")
        try Data(#"{"budgets": {"backgroundTsk": 3}}"#.utf8).write(to: file)
        #expect(throws: BudgetError.self) { try HostConfigFile.load(path: file.path) }
        #expect(throws: BudgetError.self) { try HostConfigFile.resolve(profile: "ios99", file: nil) }
        try Data(#"{"budgets": {"expirationWarning": 60}}"#.utf8).write(to: file)
        #expect(throws: BudgetError.self) { try HostConfigFile.resolve(profile: nil, file: try HostConfigFile.load(path: file.path)) }
    }

    @Test func configFileSetsTheIdentityRangeOrTurnsItOff() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ids-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("config.json")
        func load(_ json: String) throws -> IdentityConfig? {
            try Data(json.utf8).write(to: file)
            return try HostConfigFile.load(path: file.path).identities
        }
        #expect(try load("{}") == nil)
        #expect(try load(#"{"identities": false}"#) == IdentityConfig(enabled: false))
        #expect(try load(#"{"identities": {"first": 70000, "count": 500, "registry": "ids"}}"#)
                == IdentityConfig(first: 70_000, count: 500, registry: dir.path + "/ids"))
        for bad in [#"{"identities": {"first": 0}}"#, #"{"identities": {"count": 0}}"#, #"{"identities": {"frist": 1}}"#,
                    #"{"identities": {"first": 4294967000, "count": 1000}}"#, #"{"identities": "on"}"#] {
            #expect(throws: BudgetError.self, "\(bad)") { try load(bad) }
        }
    }

    @Test func configFileTurnsTheAppsNamespacesOff() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ns-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("config.json")
        func load(_ json: String) throws -> Bool? {
            try Data(json.utf8).write(to: file)
            return try HostConfigFile.load(path: file.path).namespaces
        }
        #expect(try load("{}") == nil)
        #expect(try load(#"{"namespaces": false}"#) == false)
        #expect(try load(#"{"namespaces": true}"#) == true)
        #expect(throws: BudgetError.self) { try load(#"{"namespaces": "off"}"#) }
    }

    @Test func theLocationRelaunchRuleIsTheProfilesAndAConfigOverridesIt() throws {
        #expect(BudgetProfile.ios13.locationRelaunchAfterUserTerminate == false, "iOS 26 does not relaunch")
        #expect(BudgetProfile.ios7.locationRelaunchAfterUserTerminate && BudgetProfile.ios6.locationRelaunchAfterUserTerminate)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("rules-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("config.json")
        func load(_ json: String) throws -> HostConfigFile {
            try Data(json.utf8).write(to: file)
            return try HostConfigFile.load(path: file.path)
        }
        let on = try load(#"{"rules": {"locationRelaunchAfterUserTerminate": true}}"#)
        let resolved = try HostConfigFile.resolve(profile: nil, file: on)
        #expect(resolved.locationRelaunchAfterUserTerminate && resolved.name == "ios13+config")
        #expect(try HostConfigFile.resolve(profile: "ios7", file: try load("{}")).locationRelaunchAfterUserTerminate)
        #expect(throws: BudgetError.self) { try load(#"{"rules": {"locationRelaunchAfterUserTerminate": "yes"}}"#) }
        #expect(throws: BudgetError.self) { try load(#"{"rules": {"relaunch": true}}"#) }
        #expect(throws: BudgetError.self) { try load(#"{"rules": true}"#) }
    }

    @Test func configFileKeysAreBudgetKeys() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("budgetkey-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let good = dir.appendingPathComponent("good.json").path
        try #"{"budgets": {"voipReport": "3s", "backgroundTask": 45}}"#.write(toFile: good, atomically: true, encoding: .utf8)
        let file = try HostConfigFile.load(path: good)
        #expect(file.budgets == [.voipReport: 3, .backgroundTask: 45])
        let p = try HostConfigFile.resolve(profile: nil, file: file)
        #expect(p.duration(.voipReport) == .seconds(3) && p.name == "ios13+config")
        let bad = dir.appendingPathComponent("bad.json").path
        try #"{"budgets": {"voipreport": 3}}"#.write(toFile: bad, atomically: true, encoding: .utf8)
        #expect(throws: BudgetError.self) { try HostConfigFile.load(path: bad) }
    }
}
