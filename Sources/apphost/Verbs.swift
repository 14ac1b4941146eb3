import AppHostManifest
import AppHostProtocol
import ArgumentParser
import Foundation
import HostConfig
import Plugins
import Host

extension AppHostCommand {
    struct Install: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Install an app bundle (or update it) on the running host.",
            discussion: "The executable is resolved from the bundle, then --products-dir / $APPHOST_PRODUCTS_DIR of the daemon, then the folder of the apphost binary, then the package's .build/debug and .build/release above the bundle. A partial Info.plist (Xcode's GENERATE_INFOPLIST_FILE) takes CFBundleIdentifier, CFBundleExecutable and CFBundleName from $(PRODUCT_BUNDLE_IDENTIFIER), $(EXECUTABLE_NAME) and $(PRODUCT_NAME), given with --setting or --xcconfig.\n\n" + DeviceArgument.help("apphost install booted path/to/App.app"))
        @Argument(help: ArgumentHelp("An App.app folder or an Info.plist file.", valueName: "bundle"))
        var bundle: String
        @OptionGroup var settings: SettingOptions
        @OptionGroup var entitlements: EntitlementsOption
        @OptionGroup var state: StateOptions
        @OptionGroup var output: JSONOption

        func run() throws {
            try reportingErrors {
                let path = absolute(bundle)
                if AppBundleLoader.isEntitlementsFile(ManifestReader.manifestPath(for: path)) {
                    throw ManifestWarnings.entitlementsGivenAsManifest(bundle, verb: "install")
                }
                let values = try settings.resolved()
                ManifestWarnings.print(path: path, settings: values, entitlements: entitlements.path)
                let r = try state.client.request(.install(path: path, settings: values,
                                                          entitlements: entitlements.absolutePath)).checked()
                guard case .installed(let app) = r else { throw unexpected(r) }
                if output.json { try printJSON(.install, app) } else {
                    print("installed \(app.bundleIdentifier) (\(app.executablePath))")
                }
            }
        }
    }

    struct Uninstall: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Uninstall an app (terminating it first).",
            discussion: DeviceArgument.help("apphost uninstall booted com.example.app"))
        @Argument(help: ArgumentHelp("Bundle identifier.", valueName: "bundle-id")) var bundleIdentifier: BundleID
        @OptionGroup var state: StateOptions

        func run() throws { try state.perform(.uninstall(bundleIdentifier: bundleIdentifier)) }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List installed apps.")
        @OptionGroup var state: StateOptions
        @OptionGroup var output: JSONOption

        func run() throws {
            try reportingErrors {
                let apps = try state.installedApps()
                if output.json { return try printJSON(.list, apps) }
                if apps.isEmpty { return print("no apps installed (apphost install <App.app>)") }
                let rows = apps.map { [$0.bundleIdentifier.rawValue, $0.name, $0.backgroundModes.map(\.rawValue).joined(separator: ","), $0.bundlePath] }
                print(table(["BUNDLE ID", "NAME", "MODES", "BUNDLE"], rows))
            }
        }
    }

    struct Launch: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Launch an installed app (prints `bundle-id: pid` once didFinishLaunching has returned).",
            discussion: """
                Words after the bundle id are passed to the app (its argv and launch options), as simctl does: `apphost launch com.example.app --on background hold`. AppHost's own options (--background, --console, --state-dir, ...) are AppHost's wherever they stand; to pass one of those to the app, put the app's arguments after `--`. Launching a running app brings it to the foreground.

                --console (or simctl's --console-pty) then prints the app's output (its stdout and stderr, as one stream: they share logs/<bundle-id>.log) as it writes it, and returns when the app exits.

                \(DeviceArgument.help("apphost launch booted com.example.app"))

                Examples:
                  apphost launch com.example.app
                  apphost launch --background com.example.app --on background hold
                  apphost launch --console booted com.example.app -- --verbose
                """)
        @Flag(name: .long, help: "Launch into the background (notRunning → background) instead of the foreground.")
        var background = false
        @Flag(name: .long, help: "Terminate the app first if it is running (otherwise a running app is only brought to the foreground; other arguments for it are refused).")
        var terminateRunningProcess = false
        @Flag(name: [.customLong("console"), .customLong("console-pty")],
              help: "Print the app's output as it writes it and return when it exits.")
        var console = false
        // Declared before the bundle id and the app's arguments, so that usage shows
        // --state-dir among AppHost's options, not after the app's arguments.
        @OptionGroup var state: StateOptions
        @Argument(help: ArgumentHelp("Bundle identifier.", valueName: "bundle-id")) var bundleIdentifier: BundleID
        // `.allUnrecognized`: AppHost's options are taken wherever they are; everything
        // else after the bundle id, in order, is the app's (`--` included, dropped below).
        @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Arguments for the app (after `--` when one looks like an AppHost option).", valueName: "app-argument"))
        var words: [String] = []

        /// The app's arguments: the words after the bundle id, without the first `--`.
        var arguments: [String] {
            var words = self.words
            if let i = words.firstIndex(of: "--") { words.remove(at: i) }
            return words
        }

        func run() throws {
            try reportingErrors {
                let arguments = self.arguments
                var follower = console
                    ? try ConsoleFollower(stateDirectory: state.resolved, bundleIdentifier: bundleIdentifier, client: state.client)
                    : nil
                let r = try state.client.request(.launch(bundleIdentifier: bundleIdentifier, background: background,
                                                         arguments: arguments, terminateRunning: terminateRunningProcess)).checked()
                guard case .launched(let id, let pid, let wasRunning) = r else { throw unexpected(r) }
                if wasRunning {
                    // The host refuses other arguments for a running app: these are its own.
                    FileHandle.standardError.write(Data("apphost: \(id) was already running\n".utf8))
                }
                print("\(id): \(pid)")
                fflush(nil)
                guard follower != nil else { return }
                if let cause = try follower?.follow(pid: pid) {
                    FileHandle.standardError.write(Data("apphost: \(id)[\(pid)] exited: \(cause)\n".utf8))
                } else {
                    throw CLIError(description: "the host stopped before \(id) exited")
                }
            }
        }
    }

    struct Foreground: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Make an app the active app; the previously active app goes home.")
        @Argument(help: ArgumentHelp("Bundle identifier.", valueName: "bundle-id")) var bundleIdentifier: BundleID
        @OptionGroup var state: StateOptions
        func run() throws { try state.perform(.foreground(bundleIdentifier: bundleIdentifier)) }
    }

    struct Background: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Press the home button for an app: willResignActive, didEnterBackground, then suspension once it has no assertion.")
        @Argument(help: ArgumentHelp("Bundle identifier.", valueName: "bundle-id")) var bundleIdentifier: BundleID
        @OptionGroup var state: StateOptions
        func run() throws { try state.perform(.background(bundleIdentifier: bundleIdentifier)) }
    }

    struct Terminate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Terminate an app, as a swipe in the app switcher (a suspended app is killed without a callback).",
            discussion: DeviceArgument.help("apphost terminate booted com.example.app"))
        @Argument(help: ArgumentHelp("Bundle identifier.", valueName: "bundle-id")) var bundleIdentifier: BundleID
        @OptionGroup var state: StateOptions
        func run() throws { try state.perform(.terminate(bundleIdentifier: bundleIdentifier)) }
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the state of one app or of every installed app.",
            discussion: """
                One line per app: state (* the app in front), pid, memory footprint (its memory \
                cgroup's memory.current, else the Pss of /proc/<pid>/smaps_rollup, as the host last \
                read it: at launch, state changes, the app's own cue, `device memory` and clock \
                steps), since when, the background tasks it holds and what keeps it running. \
                --json prints the same fields (footprint in bytes, or null). `apphost device show` \
                prints the device memory and the pressure level.
                """)
        @Argument(help: ArgumentHelp("Bundle identifier (all apps if omitted).", valueName: "bundle-id")) var bundleIdentifier: BundleID?
        @OptionGroup var state: StateOptions
        @OptionGroup var output: JSONOption
        func run() throws {
            try reportingErrors {
                let apps = try state.client.collect(.status(bundleIdentifier: bundleIdentifier)) { r -> AppStatus? in
                    if case .appStatus(let s) = r { return s }
                    return nil
                }
                if output.json { return try printJSON(.status, apps) }
                if apps.isEmpty { return print("no apps installed (apphost install <App.app>)") }
                let rows = apps.map { s in
                    [s.bundleIdentifier.rawValue, s.state.rawValue + (s.isFrontmost ? " *" : ""), s.pid.map(String.init) ?? "-",
                     s.footprint.map(ByteCountText.format) ?? "-",
                     Timestamp.format(s.since), s.backgroundTasks.joined(separator: ","), s.activities.joined(separator: ",")]
                }
                print(table(["BUNDLE ID", "STATE", "PID", "FOOTPRINT", "SINCE", "TASKS", "KEPT RUNNING BY"], rows))
            }
        }
    }

    struct Events: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the host's events (transitions with time, app, from, to and cause).")
        @Argument(help: ArgumentHelp("Only this app's events.", valueName: "bundle-id")) var bundleIdentifier: BundleID?
        @Flag(name: [.short, .long], help: "Keep printing new events as they happen (Ctrl-C to stop).")
        var follow = false
        @OptionGroup var state: StateOptions
        @OptionGroup var output: JSONOption
        func run() throws {
            try reportingErrors {
                    // Ends with `.end`; a hangup before it (a follower the daemon dropped for
                    // falling behind, when its notice was lost) is an error.
                    try state.client.stream(.events(follow: follow, bundleIdentifier: bundleIdentifier), untilEnd: true) { r in
                    guard case .event(let e) = try r.checked() else { throw unexpected(r) }
                    if output.json {
                        print(try jsonLine(.event, e))
                    } else {
                        print(EventFormatter.line(e))
                    }
                    fflush(nil)
                }
            }
        }
    }

    struct Reports: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show termination reports (oldest first).")
        @Argument(help: ArgumentHelp("Only this app's reports.", valueName: "bundle-id")) var bundleIdentifier: BundleID?
        @OptionGroup var state: StateOptions
        @OptionGroup var output: JSONOption
        func run() throws {
            try reportingErrors {
                let reports = try state.client.collect(.reports(bundleIdentifier: bundleIdentifier)) { r -> TerminationReport? in
                    if case .report(let report) = r { return report }
                    return nil
                }
                if output.json { return try printJSON(.reports, reports) }
                if reports.isEmpty { return print("no termination reports") }
                for report in reports {
                    print(ReportFormatter.text(report))
                }
            }
        }
    }

    struct ManifestCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "manifest", abstract: "Inspect manifests.", subcommands: [Show.self])

        struct Show: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Print a parsed manifest (needs no daemon).",
                discussion: """
                    Build-setting references are expanded from --setting and --xcconfig. A \
                    partial Info.plist (Xcode's GENERATE_INFOPLIST_FILE) takes a missing \
                    CFBundleIdentifier, CFBundleExecutable and CFBundleName from \
                    $(PRODUCT_BUNDLE_IDENTIFIER), $(EXECUTABLE_NAME) and $(PRODUCT_NAME), as \
                    Xcode does. The entitlements are Name.entitlements beside Info.plist, or \
                    --entitlements FILE; --json prints them under "entitlements".

                    Exit status: 65 when the manifest, an .xcconfig or the entitlements \
                    cannot be read.

                    Examples:
                      apphost manifest show manifests/Tracker.app
                      apphost manifest show --xcconfig Config/Debug.xcconfig \\
                        --entitlements App/App.entitlements App/Info.plist
                    """)
            @Argument(help: ArgumentHelp("An App.app folder or an Info.plist file.", valueName: "path")) var path: String
            @OptionGroup var settings: SettingOptions
            @OptionGroup var entitlementsFile: EntitlementsOption
            @OptionGroup var output: JSONOption

            func run() throws {
                var file = absolute(path)
                var isDir: ObjCBool = false
                if FileManager.default.fileExists(atPath: file, isDirectory: &isDir), isDir.boolValue {
                    file += "/Info.plist"
                }
                var readManifest: Manifest?
                var entitlements: Entitlements?
                var notes: [String] = []
                try reportingErrors {
                    if AppBundleLoader.isEntitlementsFile(file) {
                        throw ManifestWarnings.entitlementsGivenAsManifest(path, verb: "manifest show")
                    }
                    let values = try settings.resolved()
                    let read: (manifest: Manifest, warnings: [ManifestWarning])
                    do {
                        read = try ManifestReader.readWithWarnings(path: file, settings: values)
                        // The entitlements: the file named (it must read), else the one beside it.
                        if let named = entitlementsFile.absolutePath {
                            entitlements = try Entitlements.read(path: named)
                        } else {
                            let beside = Linter.entitlementsPath(forManifestAt: file)
                            if FileManager.default.fileExists(atPath: beside) {
                                do {
                                    entitlements = try Entitlements.read(path: beside)
                                } catch {
                                    notes.append("unreadable: \(error)")
                                }
                            }
                        }
                    } catch {
                        // As every verb: a file that is not there is EX_NOINPUT, a bad one EX_DATAERR.
                        let missing = (error as? ManifestError).map { ($0.code == .fileNotFound || $0.code == .unreadable) && $0.file == file } ?? false
                        throw CLIError(description: "\(error)", exitCode: missing ? 66 : 65)
                    }
                    for warning in read.warnings {
                        FileHandle.standardError.write(Data("apphost: warning: \(warning)\n".utf8))
                    }
                    if entitlementsFile.path == nil, let misnamed = AppBundleLoader.misnamedEntitlementsWarning(forManifestAt: file) {
                        FileHandle.standardError.write(Data("apphost: warning: \(file): \(misnamed)\n".utf8))
                    }
                    readManifest = read.manifest
                }
                guard let manifest = readManifest else { return }
                if output.json { return try printJSON(.manifest, ManifestShowJSON(manifest: manifest, entitlements: entitlements.map(EntitlementsJSON.init))) }
                var lines = [
                    ("file", manifest.sourcePath),
                    ("bundle id", manifest.bundleIdentifier),
                    ("executable", manifest.executable),
                    ("name", manifest.name),
                ]
                if let d = manifest.displayName { lines.append(("display name", d)) }
                lines.append(("background modes", manifest.backgroundModes.isEmpty ? "-" : manifest.backgroundModes.map(\.rawValue).joined(separator: ", ")))
                lines.append(("BGTask identifiers", manifest.bgTaskIdentifiers.isEmpty ? "-" : manifest.bgTaskIdentifiers.joined(separator: ", ")))
                lines.append(("exits on suspend", manifest.exitsOnSuspend ? "yes" : "no"))
                if !manifest.externalAccessoryProtocols.isEmpty {
                    lines.append(("accessory protocols", manifest.externalAccessoryProtocols.joined(separator: ", ")))
                }
                // The entitlements: every key is kept and shown (aps-environment is the one
                // AppHost acts on).
                if let entitlements {
                    let shown = Linter.describe(entitlements)
                    lines.append(("entitlements", shown.isEmpty ? "- (\(entitlements.path) has no keys)" : shown.joined(separator: ", ")))
                    if entitlementsFile.path != nil { lines.append(("entitlements file", entitlements.path)) }
                } else {
                    lines.append(("entitlements", notes.first ?? "-"))
                }
                let width = lines.map(\.0.count).max() ?? 0
                for (k, v) in lines {
                    print(k.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + v)
                }
            }
        }
    }
}

/// A plain text table with padded columns.
func table(_ header: [String], _ rows: [[String]]) -> String {
    let all = [header] + rows
    let widths = header.indices.map { i in all.map { $0[i].count }.max() ?? 0 }
    return all.map { row in
        row.enumerated().map { i, cell in
            i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
        }.joined(separator: "  ")
    }.joined(separator: "\n")
}

/// Renders a report like the header of an iOS crash report.
enum ReportFormatter {
    static func text(_ r: TerminationReport) -> String {
        var lines = [
            "Report:             \(r.id)",
            "Identifier:         \(r.bundleIdentifier)",
            "PID:                \(r.pid)",
            "Date/Time:          \(Timestamp.format(r.time))",
            "Exception Type:     \(r.exceptionType)",
        ]
        if let code = r.exitStatus { lines.append("Exit Status:        \(code)") }
        if let ns = r.terminationNamespace {
            lines.append("Termination Reason: Namespace \(ns)\(r.terminationCode.map { ", Code \($0)" } ?? "")")
        }
        lines.append("Reason:             \(r.reason)")
        if let x = r.exception {
            lines.append("Exception Name:     \(x.name)")
            lines.append("Exception Reason:   \(x.reason)")
        }
        if let e = r.explanation { lines.append("Explanation:        \(e)") }
        if let b = r.budget { lines.append("Budget:             \(b.name) \(DurationText.format(b.seconds)) (profile \(b.profile))") }
        if let f = r.footprint { lines.append("Footprint:          \(ByteCountText.format(f)) (\(f) bytes)") }
        if let band = r.jetsamBand { lines.append("Jetsam band:        \(band)") }
        if !r.backgroundTasks.isEmpty {
            lines.append("Background tasks:")
            for t in r.backgroundTasks {
                lines.append("  #\(t.id) \(t.name.map { "\"\($0)\"" } ?? "(unnamed)") held \(DurationText.format(t.age))")
            }
        }
        if !r.lastStates.isEmpty {
            lines.append("Last states:")
            for s in r.lastStates {
                lines.append("  \(Timestamp.format(s.time))  \(s.state.rawValue)  (\(s.cause))")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
