import Foundation
import Testing
import AppHostProtocol
@testable import HostConfig

/// The `"transfers"` object of the host config file: the transfer daemon's settings.
@Suite("Host config: transfers")
struct TransferSettingsConfigTests {
    /// A directory of the test's own with `config.json` holding `json`.
    struct ConfigDir {
        let path: String
        var config: String { path + "/config.json" }
        init(_ json: String) throws {
            path = FileManager.default.temporaryDirectory.appendingPathComponent("tcfg-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: path + "/certs", withIntermediateDirectories: true)
            try Data(json.utf8).write(to: URL(fileURLWithPath: config))
        }
        func write(_ relative: String, _ text: String = "-----BEGIN CERTIFICATE-----\n") throws {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path + "/" + relative))
        }
        func remove() { try? FileManager.default.removeItem(atPath: path) }
    }

    /// The message of the error `HostConfigFile.load` throws, or nil if it loads.
    func loadError(_ path: String) -> String? {
        do throws(BudgetError) {
            _ = try HostConfigFile.load(path: path)
            return nil
        } catch {
            return error.message
        }
    }

    @Test func transfersParsesAndARelativeExtraCAIsTakenFromTheConfigFilesDirectory() throws {
        let dir = try ConfigDir(#"{"transfers": {"extraCA": "ca.pem", "perHost": 2, "maxConcurrent": 8}}"#)
        defer { dir.remove() }
        try dir.write("ca.pem")
        let file = try HostConfigFile.load(path: dir.config)
        #expect(file.transfers.extraCA == dir.path + "/ca.pem")
        #expect(file.transfers.perHost == 2)
        #expect(file.transfers.maxConcurrent == 8)
        #expect(file.transfers.retryBase == nil)
        #expect(file.transfers.maxAttempts == nil)
        var expected = TransferSettings()
        (expected.extraCA, expected.perHost, expected.maxConcurrent) = (dir.path + "/ca.pem", 2, 8)
        #expect(file.transfers == expected, "nothing else set")
        // Other keys are left as they were.
        #expect(file.profile == nil)
        #expect(file.budgets.isEmpty)
    }

    @Test func aRelativeExtraCAInASubdirectoryAndAnAbsoluteOneResolve() throws {
        let dir = try ConfigDir(#"{"transfers": {"extraCA": "certs/ca.pem", "retryBase": 0.5, "maxAttempts": 3}}"#)
        defer { dir.remove() }
        try dir.write("certs/ca.pem")
        let file = try HostConfigFile.load(path: dir.config)
        #expect(file.transfers.extraCA == dir.path + "/certs/ca.pem", "against the config file's directory, not the working directory")
        #expect(file.transfers.retryBase == 0.5)
        #expect(file.transfers.maxAttempts == 3)
        var expected = TransferSettings()
        (expected.extraCA, expected.retryBase, expected.maxAttempts) = (dir.path + "/certs/ca.pem", 0.5, 3)
        #expect(file.transfers == expected)

        try Data(#"{"transfers": {"extraCA": "\#(dir.path)/certs/ca.pem"}}"#.utf8).write(to: URL(fileURLWithPath: dir.config))
        #expect(try HostConfigFile.load(path: dir.config).transfers.extraCA == dir.path + "/certs/ca.pem")
    }

    @Test func noTransfersKeyMeansTheDaemonsDefaults() throws {
        let dir = try ConfigDir(#"{"profile": "ios7"}"#)
        defer { dir.remove() }
        let file = try HostConfigFile.load(path: dir.config)
        #expect(file.transfers == TransferSettings())
    }

    @Test func aMissingExtraCAFileIsAClearError() throws {
        let dir = try ConfigDir(#"{"transfers": {"extraCA": "nowhere/ca.pem"}}"#)
        defer { dir.remove() }
        let message = try #require(loadError(dir.config))
        #expect(message.contains(dir.config), "names the config file: \(message)")
        #expect(message.contains("transfers.extraCA"), "names the key: \(message)")
        #expect(message.contains(dir.path + "/nowhere/ca.pem"), "names the file it looked for: \(message)")
    }

    @Test func anUnknownKeyIsAClearError() throws {
        let dir = try ConfigDir(#"{"transfers": {"perHost": 2, "maxConcurent": 8}}"#)
        defer { dir.remove() }
        let message = try #require(loadError(dir.config))
        #expect(message.contains(dir.config), "\(message)")
        #expect(message.contains("maxConcurent"), "names the key: \(message)")
        for known in ["extraCA", "perHost", "maxConcurrent", "retryBase", "maxAttempts"] {
            #expect(message.contains(known), "lists \(known): \(message)")
        }
        // And a misspelt top-level key lists transfers among the known ones.
        try Data(#"{"transfer": {}}"#.utf8).write(to: URL(fileURLWithPath: dir.config))
        let top = try #require(loadError(dir.config))
        #expect(top.contains("\"transfer\"") && top.contains("transfers"), "\(top)")
    }

    @Test(arguments: [
        #"{"transfers": "ca.pem"}"#,
        #"{"transfers": {"perHost": 0}}"#,
        #"{"transfers": {"perHost": -1}}"#,
        #"{"transfers": {"maxConcurrent": "8"}}"#,
        #"{"transfers": {"maxAttempts": 2.5}}"#,
        #"{"transfers": {"retryBase": -1}}"#,
        #"{"transfers": {"extraCA": ""}}"#,
        #"{"transfers": {"extraCA": 3}}"#,
    ])
    func badValuesAreErrorsNamingTheKey(_ json: String) throws {
        let dir = try ConfigDir(json)
        defer { dir.remove() }
        let message = try #require(loadError(dir.config), "\(json) loaded")
        #expect(message.hasPrefix(dir.config + ": transfers"), "\(message)")
    }
}
