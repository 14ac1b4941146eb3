import AppHostProtocol
import ArgumentParser
import Foundation
import Host
import HostConfig

extension AppHostCommand {
    struct ClockCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "clock",
            abstract: "Read or move the host clock (moving it needs a daemon started with --clock virtual).",
            subcommands: [Advance.self, Now.self])

        struct Advance: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Move virtual time forward, firing every deadline that falls inside, in order, before returning.",
                discussion: "Examples: `apphost clock advance 31s`, `10m`, `1h`, `250ms`, `1h30m`.")
            // `.allUnrecognized` so that `-5s` reaches validate() (and is refused as a
            // negative duration) instead of being read as the options -5 and -s.
            @Argument(parsing: .allUnrecognized, help: ArgumentHelp("How far: 31s, 10m, 1h, 250ms, 1h30m.", valueName: "duration"))
            var words: [String] = []
            @OptionGroup var state: StateOptions
            @OptionGroup var output: JSONOption

            var duration: String { words.first { $0 != "--" } ?? "" }

            func validate() throws {
                let given = words.filter { $0 != "--" }
                guard given.count == 1 else {
                    throw ValidationError(given.isEmpty ? "give a duration: apphost clock advance 31s (or 10m, 1h, 250ms)"
                                                        : "one duration, got \(given.count): \(given.joined(separator: " "))")
                }
                if duration.hasPrefix("-"), (try? DurationText.seconds(String(duration.dropFirst()))) != nil {
                    throw ValidationError("\(duration): durations must be positive: time only moves forward (e.g. apphost clock advance \(duration.dropFirst()))")
                }
                do { _ = try DurationText.seconds(duration) } catch { throw ValidationError(error.message) }
            }

            func run() throws {
                try reportingErrors {
                    let seconds = (try? DurationText.seconds(duration)) ?? 0
                    try printClock(state.client.request(.clockAdvance(seconds: seconds)).checked(), json: output.json)
                }
            }
        }

        struct Now: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Print the host clock: mode, time since the host started, and as a date.")
            @OptionGroup var state: StateOptions
            @OptionGroup var output: JSONOption
            func run() throws {
                try reportingErrors {
                    try printClock(state.client.request(.clockNow).checked(), json: output.json)
                }
            }
        }
    }

    struct ProfileCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "profile", abstract: "Show budget profiles.", subcommands: [Show.self])

        struct Show: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Print the budget table in force: the daemon's if one runs, else the one --profile/--config would give.")
            @Option(name: .long, help: ArgumentHelp("Profile to show when no daemon runs (ios6, ios7, ios13).", valueName: "name")) var profile: String?
            @Option(name: .long, help: ArgumentHelp("Config file to apply when no daemon runs.", valueName: "file")) var config: String?
            @Flag(name: .long, help: "Show every named profile side by side.") var all = false
            @OptionGroup var state: StateOptions
            @OptionGroup var output: JSONOption

            func run() throws {
                if all { return try printProfiles(BudgetProfile.all, source: "named profiles", json: "named") }
                var inForce: BudgetProfile
                var source: String
                var jsonSource = "options"
                if profile == nil, config == nil,
                   let r = try? state.client.request(.profile), case .profile(let p) = r {
                    inForce = p
                    source = "in force on the daemon at \(state.resolved)"
                    jsonSource = "daemon"
                } else {
                    do {
                        let file = try config.map { try HostConfigFile.load(path: absolute($0)) }
                        inForce = try HostConfigFile.resolve(profile: profile, file: file)
                    } catch let e as BudgetError {
                        FileHandle.standardError.write(Data("apphost: \(e.message)\n".utf8))
                        throw ExitCode(65)
                    }
                    source = "no daemon answering; what --profile/--config give"
                }
                try printProfiles([inForce], source: source, json: jsonSource)
            }

            /// A duration as a duration (`30s`, `15m`); a count as a count (`3`).
            static func value(_ value: Double, of key: BudgetKey) -> String {
                guard key == .silentPushesPerHour else { return DurationText.format(value) }
                return value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
            }

            /// The table, or with --json the profiles and where they came from (`daemon`: the
            /// running host's; `options`: what --profile/--config give; `named`: --all).
            func printProfiles(_ profiles: [BudgetProfile], source: String, json: String) throws {
                if output.json { return try printJSON(.profile, profiles, extra: ["source": json]) }
                print("budgets (\(source)):")
                let header = ["BUDGET"] + profiles.map(\.name) + ["SOURCE"]
                let rows = BudgetProfile.keys.map { key in
                    [key.rawValue] + profiles.map { Self.value($0[key], of: key) } + [key.note]
                }
                print(table(header, rows))
                print("device memory: " + profiles.map { "\($0.name) \(ByteCountText.format($0.deviceMemory))" }.joined(separator: ", ")
                      + " (AppHost's own figures, iPhones of each era; `\"memory\": {\"device\": ...}` in --config overrides)")
                print("location relaunch after a user force-quit: " + profiles.map { "\($0.name) \($0.locationRelaunchAfterUserTerminate ? "yes" : "no")" }.joined(separator: ", ")
                      + " (\(BudgetProfile.locationRelaunchNote); `\"rules\": {\"locationRelaunchAfterUserTerminate\": true}` in --config overrides)")
            }
        }
    }
}

func printClock(_ r: ControlResponse, json: Bool) throws {
    guard case .clock(let mode, let seconds, let date) = r else { throw unexpected(r) }
    if json {
        struct Reading: Encodable { var mode: String; var seconds: Double; var date: Date }
        return try printJSON(.clock, Reading(mode: mode, seconds: seconds, date: date))
    }
    print("\(mode) clock: +\(DurationText.format(seconds)) (\(Timestamp.format(date)))")
}
