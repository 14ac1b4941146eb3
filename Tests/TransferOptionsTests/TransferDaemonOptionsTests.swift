import AppHostProtocol
import ArgumentParser
import Testing
import TransferOptions

/// The transfer daemon's command line: what the host renders parses back to the same
/// options, and the daemon refuses what it cannot run with, saying why.
@Suite struct TransferDaemonOptionsTests {
    static let folder = "/var/lib/apphost/transfers"

    /// Every option at a value that is not its default (and within its bounds).
    static var everyOption: TransferDaemonOptions {
        var o = TransferDaemonOptions(stateDirectory: folder)
        o.containers = "/var/lib/apphost/containers"
        o.extraCA = "/etc/apphost/test ca.pem"
        o.retryBase = 0.05
        o.maxAttempts = 3
        o.perHost = 2
        o.maxConcurrent = 64
        o.maxFinishing = 4096
        o.readTimeout = 2.5
        o.commitBytes = 1 << 20
        o.eventLoops = 64
        o.power = .plugged
        o.network = .none
        return o
    }

    /// One option at a time away from its default, named by its flag.
    static let oneOption: [(String, @Sendable (inout TransferDaemonOptions) -> Void)] = [
        ("--containers", { $0.containers = "/c" }),
        ("--extra-ca", { $0.extraCA = "/ca.pem" }),
        ("--retry-base", { $0.retryBase = 0 }),
        ("--max-attempts", { $0.maxAttempts = 1 }),
        ("--per-host", { $0.perHost = 1 }),
        ("--max-concurrent", { $0.maxConcurrent = 1 }),
        ("--max-finishing", { $0.maxFinishing = 1 }),
        ("--read-timeout", { $0.readTimeout = 0.001 }),
        ("--commit-bytes", { $0.commitBytes = 1 }),
        ("--event-loops", { $0.eventLoops = 2 }),
        ("--power", { $0.power = .plugged }),
        ("--network", { $0.network = .cellular }),
    ]

    @Test func theDefaultsAreTheStateFolderAlone() throws {
        let defaults = TransferDaemonOptions(stateDirectory: Self.folder)
        #expect(defaults.arguments == ["--state-dir", Self.folder])
        let parsed = try TransferDaemonOptions.parse(defaults.arguments)
        #expect(parsed == defaults)
        #expect(parsed.retryBase == 1 && parsed.maxAttempts == 10 && parsed.perHost == 4 && parsed.maxConcurrent == 16)
        #expect(parsed.maxFinishing == 256 && parsed.readTimeout == 60 && parsed.commitBytes == 512 * 1024)
        #expect(parsed.eventLoops == 1 && parsed.power == .battery && parsed.network == .wifi)
        #expect(parsed.containers == nil && parsed.extraCA == nil)
    }

    @Test func everyOptionSetSurvivesTheRoundTrip() throws {
        let options = Self.everyOption
        #expect(options.arguments == [
            "--state-dir", Self.folder, "--containers", "/var/lib/apphost/containers",
            "--extra-ca", "/etc/apphost/test ca.pem", "--retry-base", "0.05", "--max-attempts", "3",
            "--per-host", "2", "--max-concurrent", "64", "--max-finishing", "4096", "--read-timeout", "2.5",
            "--commit-bytes", "1048576", "--event-loops", "64", "--power", "plugged", "--network", "none",
        ])
        #expect(try TransferDaemonOptions.parse(options.arguments) == options)
    }

    /// Each option alone: rendered under its flag, parsed back, and told apart from the
    /// default by `==`.
    @Test(arguments: oneOption.indices)
    func eachOptionSurvivesTheRoundTripAlone(index: Int) throws {
        let (flag, change) = Self.oneOption[index]
        var options = TransferDaemonOptions(stateDirectory: Self.folder)
        change(&options)
        #expect(options != TransferDaemonOptions(stateDirectory: Self.folder), "\(flag)")
        #expect(options.arguments.count == 4 && options.arguments[2] == flag, "\(options.arguments)")
        #expect(try TransferDaemonOptions.parse(options.arguments) == options, "\(flag)")
    }

    /// An option added to the type but not to ``oneOption`` (so perhaps not to `arguments`
    /// or `==`) fails here.
    @Test func everyFlagOfTheHelpIsCovered() {
        let help = TransferDaemonOptions.helpMessage(columns: 200)
        let flags = Set(help.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "," })
            .filter { $0.hasPrefix("--") && $0.count > 2 }.map(String.init))
        #expect(flags == Set(Self.oneOption.map(\.0) + ["--state-dir", "--help"]), "\(help)")
    }

    @Test func theHelpTeachesDefaultsAndValues() {
        let help = TransferDaemonOptions.helpMessage(columns: 200)
        for text in ["--state-dir <dir>", "transfers.sqlite", "--event-loops <n>", "(1 to 64)", "(default: 4)",
                     "(default: 1)", "--power <power>", "plugged", "battery", "--network <network>", "cellular"] {
            #expect(help.contains(text), "\(text) in:\n\(help)")
        }
    }

    @Test(arguments: [
        (["--state-dir", ""], "--state-dir must name a folder"),
        (["--retry-base", "-1"], "--retry-base must be a number of seconds, 0 or more, got -1.0"),
        (["--retry-base", "inf"], "--retry-base must be a number of seconds, 0 or more, got inf"),
        (["--max-attempts", "0"], "--max-attempts must be at least 1, got 0"),
        (["--per-host", "0"], "--per-host must be at least 1, got 0"),
        (["--max-concurrent", "-2"], "--max-concurrent must be at least 1, got -2"),
        (["--max-finishing", "0"], "--max-finishing must be from 1 to 4096, got 0"),
        (["--max-finishing", "4097"], "--max-finishing must be from 1 to 4096, got 4097"),
        (["--read-timeout", "0"], "--read-timeout must be a number of seconds above 0, got 0.0"),
        (["--read-timeout", "nan"], "--read-timeout must be a number of seconds above 0, got nan"),
        (["--commit-bytes", "0"], "--commit-bytes must be from 1 to 1048576 (1 MiB), got 0"),
        (["--commit-bytes", "1048577"], "--commit-bytes must be from 1 to 1048576 (1 MiB), got 1048577"),
        (["--event-loops", "0"], "--event-loops must be from 1 to 64, got 0"),
        (["--event-loops", "65"], "--event-loops must be from 1 to 64, got 65"),
        (["--event-loops", "-1"], "--event-loops must be from 1 to 64, got -1"),
    ])
    func eachBoundIsRefusedWithItsMessage(arguments: [String], message: String) {
        let given = arguments.first == "--state-dir" ? arguments : ["--state-dir", Self.folder] + arguments
        #expect {
            _ = try TransferDaemonOptions.parse(given)
        } throws: { error in
            TransferDaemonOptions.message(for: error) == message
                && TransferDaemonOptions.exitCode(for: error).rawValue == 64
        }
    }

    @Test(arguments: [["--max-finishing", "4096"], ["--commit-bytes", "1048576"], ["--event-loops", "64"],
                      ["--event-loops", "1"], ["--retry-base", "0"], ["--read-timeout", "0.001"]])
    func theEdgesAreAccepted(arguments: [String]) throws {
        _ = try TransferDaemonOptions.parse(["--state-dir", Self.folder] + arguments)
    }

    /// What is not a value of its option, or no state folder at all: a usage error too.
    @Test(arguments: [
        (["--state-dir", folder, "--event-loops", "many"], "'many' is invalid for '--event-loops <n>'"),
        (["--state-dir", folder, "--power", "mains"], "'mains' is invalid for '--power <power>'"),
        (["--state-dir", folder, "--network", "lte"], "'lte' is invalid for '--network <network>'"),
        (["--state-dir", folder, "--per-host"], "Missing value for '--per-host <n>'"),
        (["--state-dir", folder, "--speed", "9"], "Unknown option '--speed'"),
        (["--per-host", "2"], "Missing expected argument '--state-dir <dir>'"),
    ])
    func notAValueIsAUsageError(arguments: [String], message: String) {
        #expect {
            _ = try TransferDaemonOptions.parse(arguments)
        } throws: { error in
            TransferDaemonOptions.message(for: error).contains(message)
                && TransferDaemonOptions.exitCode(for: error).rawValue == 64
        }
    }
}
