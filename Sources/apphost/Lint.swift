import AppHostProtocol
import ArgumentParser
import Foundation
import Plugins

/// `apphost lint`: checks bundles as written, like a compiler, without a daemon.
struct Lint: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check app bundles' Info.plist, background modes and entitlements (needs no daemon).",
        discussion: """
            Prints one diagnostic a line, as a compiler does, then a summary:
              A.app/Info.plist: error: UIBackgroundModes[1]: unknown mode "audoi"
                (did you mean "audio"?)      [one line; wrapped here]
              A.app/Info.plist: warning: background mode "location" without
                NSLocationAlwaysAndWhenInUseUsageDescription: ...
              A.app/A.entitlements: note: entitlements: aps-environment = development
              1 error(s), 1 warning(s)

            Checks, for each bundle:
            - the manifest reads: every problem is an error naming its key, and
              every unknown background mode is one, with its "did you mean"; a
              partial Info.plist (Xcode's GENERATE_INFOPLIST_FILE) takes a missing
              CFBundleIdentifier, CFBundleExecutable and CFBundleName from
              $(PRODUCT_BUNDLE_IDENTIFIER), $(EXECUTABLE_NAME) and $(PRODUCT_NAME)
              (--setting, --xcconfig); references left in the name or display
              name are warnings;
            - each declared mode's rules: processing needs
              BGTaskSchedulerPermittedIdentifiers, external-accessory needs
              UISupportedExternalAccessoryProtocols, remote-notification needs
              the aps-environment entitlement, the bluetooth modes need
              NSBluetoothAlwaysUsageDescription (iOS terminates an app using
              Core Bluetooth without it: an error), location needs
              NSLocationWhenInUseUsageDescription and
              NSLocationAlwaysAndWhenInUseUsageDescription (without them the
              authorization request does nothing: warnings); a mode listed twice,
              and the four modes AppHost does not emulate (newsstand-content,
              network-authentication, nearby-interaction, push-to-talk), are
              warnings; UISupportedExternalAccessoryProtocols without
              external-accessory is a warning;
            - the entitlements: Name.entitlements beside Info.plist, or the file
              --entitlements names (an Xcode project keeps it anywhere); its keys
              and values are shown as a note. Another .entitlements file in the
              bundle, not the one looked for, is a warning naming both. Given an
              .entitlements file instead of a bundle, lint says so (an error).

            With --trace (a host's events.jsonl, in its state directory), for the
            app whose bundle id is the bundle's CFBundleIdentifier:
            - a declared mode it never used is a warning (App Review rejects
              unused modes); all nine modes AppHost emulates are judged;
            - a service refused for lack of a mode is a warning, counted per
              cause; an error when iOS terminates the app for it (setting
              allowsBackgroundLocationUpdates without "location");
            - the four modes AppHost does not emulate cannot be judged from a
              trace: a note says so.

            Exit status: 0 without errors (warnings and notes do not fail), 1 when
            any bundle has an error, 65 when the trace or an --xcconfig file
            cannot be read.

            Examples:
              apphost lint manifests/*.app
              apphost lint --setting PRODUCT_BUNDLE_IDENTIFIER=com.example.a A.app
              apphost lint --xcconfig Config/Debug.xcconfig \\
                --entitlements App/App.entitlements App/Info.plist
              apphost lint --trace ~/.local/state/apphost/events.jsonl A.app
              apphost lint --json A.app | jq '.[].findings[]'
            """)

    @Argument(help: ArgumentHelp("App bundles (Name.app folders) or Info.plist files.", valueName: "bundle"))
    var bundles: [String]

    @Option(name: .long, help: ArgumentHelp(
        "A host's event log (events.jsonl in its state directory): judge declared modes by what the apps did.",
        valueName: "events.jsonl"))
    var trace: String?

    @OptionGroup var settings: SettingOptions
    @OptionGroup var entitlements: EntitlementsOption
    @OptionGroup var output: JSONOption

    func run() throws {
        let values = try settings.resolvedOrExit()
        var events: [HostEvent]?
        if let trace {
            do {
                events = try Linter.readTrace(path: trace)
            } catch {
                FileHandle.standardError.write(Data("apphost: \(error.description)\n".utf8))
                throw ExitCode(65)  // EX_DATAERR
            }
        }
        let reports = bundles.map {
            Linter.lint(bundlePath: $0, settings: values, trace: events, entitlements: entitlements.path)
        }
        if output.json {
            try printJSON(reports)
        } else {
            for report in reports {
                for finding in report.findings { print(finding.line) }
            }
            let errors = reports.reduce(0) { $0 + $1.errorCount }
            let warnings = reports.reduce(0) { $0 + $1.warningCount }
            print("\(errors) error(s), \(warnings) warning(s)")
        }
        if reports.contains(where: \.hasErrors) { throw ExitCode(1) }
    }
}
