import AppHostManifest
import AppHostProtocol
import Foundation
import Testing
@testable import Plugins

// `apphost lint` without the CLI: bundles written from string literals into a
// temporary folder, traces built as the host writes them.

/// A temporary folder of one test; removed by `remove()`.
private struct LintDir {
    let path: String
    init() throws {
        path = (NSTemporaryDirectory() as NSString).appendingPathComponent("apphost-lint-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `Name.app/Info.plist` (dictionary body `keys`, XML) and, if given,
    /// `Name.app/Name.entitlements` (dictionary body `entitlements`); returns the bundle path.
    @discardableResult
    func bundle(_ name: String, _ keys: String, entitlements: String? = nil) throws -> String {
        let bundle = (path as NSString).appendingPathComponent("\(name).app")
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try Data(plistText(keys).utf8).write(to: URL(fileURLWithPath: bundle + "/Info.plist"))
        if let entitlements {
            try Data(plistText(entitlements).utf8).write(to: URL(fileURLWithPath: bundle + "/\(name).entitlements"))
        }
        return bundle
    }

    /// Writes a file of the folder; returns its path.
    @discardableResult
    func file(_ name: String, _ text: String) throws -> String {
        let file = (path as NSString).appendingPathComponent(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        return file
    }
}

private func plistText(_ body: String) -> String {
    """
    <?xml version="1.0" encoding="UTF-8"?>
    <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
    <plist version="1.0">
    <dict>
    \(body)
    </dict>
    </plist>
    """
}

/// The identity keys plus `UIBackgroundModes` (if any modes) plus `extra`.
private func keys(id: String = "com.example.lint", modes: [String]? = nil, _ extra: String = "") -> String {
    var body = """
        <key>CFBundleIdentifier</key><string>\(id)</string>
        <key>CFBundleExecutable</key><string>LintApp</string>
        """
    if let modes {
        body += "\n<key>UIBackgroundModes</key><array>" + modes.map { "<string>\($0)</string>" }.joined() + "</array>"
    }
    return body + "\n" + extra
}

/// The usage strings a location app carries.
private let locationUsage = """
    <key>NSLocationWhenInUseUsageDescription</key><string>Shows where you are.</string>
    <key>NSLocationAlwaysAndWhenInUseUsageDescription</key><string>Records your route in the background.</string>
    """

private let apsDevelopment = "<key>aps-environment</key><string>development</string>"

private extension LintReport {
    func with(_ severity: LintFinding.Severity) -> [LintFinding] { findings.filter { $0.severity == severity } }
    var shown: String { findings.map(\.line).joined(separator: "\n") }
}

/// A `HostEvent` as the host logs it.
private func event(_ seq: UInt64, _ kind: HostEvent.Kind, _ app: BundleID?, mode: String? = nil, _ cause: String = "") -> HostEvent {
    HostEvent(seq: seq, time: Date(timeIntervalSince1970: 1_800_000_000 + Double(seq)), kind: kind,
              bundleIdentifier: app, cause: cause, mode: mode.flatMap(BackgroundMode.init(rawValue:)))
}

@Suite("apphost lint")
struct LinterTests {
    // MARK: - manifest and modes

    @Test func cleanAppHasNoErrorsOrWarnings() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let bundle = try dir.bundle("Clean", keys(modes: ["audio", "location"], locationUsage))
        let report = Linter.lint(bundlePath: bundle)
        #expect(!report.hasErrors, "\(report.shown)")
        #expect(report.warningCount == 0, "\(report.shown)")
        #expect(report.bundleIdentifier == "com.example.lint")
        #expect(report.backgroundModes == ["audio", "location"])
        #expect(report.manifestPath == bundle + "/Info.plist")
        // Where the entitlements were looked for is said.
        #expect(report.findings.contains { $0.severity == .note && $0.message.contains("Clean.entitlements does not exist") }, "\(report.shown)")
    }

    @Test func processingWithoutIdentifiersIsAnError() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let without = Linter.lint(bundlePath: try dir.bundle("P", keys(modes: ["processing"])))
        let errors = without.with(.error)
        #expect(errors.count == 1, "\(without.shown)")
        #expect(errors.first?.key == "BGTaskSchedulerPermittedIdentifiers")
        #expect(errors.first?.mode == "processing")
        #expect(errors.first?.line.hasPrefix(dir.path + "/P.app/Info.plist: error: background mode \"processing\" needs BGTaskSchedulerPermittedIdentifiers") == true,
                "\(without.shown)")
        // Emulated now (BGTaskScheduler): no "not emulated" note.
        #expect(!without.findings.contains { $0.mode == "processing" && $0.message.contains("not emulated") }, "\(without.shown)")

        let with = Linter.lint(bundlePath: try dir.bundle("Q", keys(modes: ["processing"], """
            <key>BGTaskSchedulerPermittedIdentifiers</key><array><string>com.example.lint.cleanup</string></array>
            """)))
        #expect(!with.hasErrors, "\(with.shown)")
    }

    @Test func exitsOnSuspendGetsANoteThatAppleDeprecatedIt() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let report = Linter.lint(bundlePath: try dir.bundle("X", keys(modes: [], "<key>UIApplicationExitsOnSuspend</key><true/>")))
        let note = report.findings.first { $0.key == "UIApplicationExitsOnSuspend" }
        #expect(note?.severity == .note, "\(report.shown)")
        #expect(note?.message.contains("deprecated the key with iOS 13") == true, "\(report.shown)")
        #expect(!report.hasErrors)
        let plain = Linter.lint(bundlePath: try dir.bundle("Y", keys(modes: [])))
        #expect(!plain.findings.contains { $0.key == "UIApplicationExitsOnSuspend" })
    }

    @Test func externalAccessoryWithoutProtocolsIsAnError() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let without = Linter.lint(bundlePath: try dir.bundle("E", keys(modes: ["external-accessory"])))
        #expect(without.with(.error).map(\.key) == ["UISupportedExternalAccessoryProtocols"], "\(without.shown)")
        let with = Linter.lint(bundlePath: try dir.bundle("F", keys(modes: ["external-accessory"], """
            <key>UISupportedExternalAccessoryProtocols</key><array><string>com.example.printer</string></array>
            """)))
        #expect(!with.hasErrors, "\(with.shown)")
        #expect(with.warningCount == 0, "\(with.shown)")
    }

    @Test func remoteNotificationNeedsTheApsEnvironmentEntitlement() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        // No entitlements file: the error is on the Info.plist.
        let none = Linter.lint(bundlePath: try dir.bundle("R", keys(modes: ["remote-notification"])))
        #expect(none.with(.error).count == 1, "\(none.shown)")
        #expect(none.with(.error).first?.file == dir.path + "/R.app/Info.plist")
        #expect(none.with(.error).first?.key == "aps-environment")

        // An entitlements file without the key: the error is on that file, whose keys are shown.
        let other = Linter.lint(bundlePath: try dir.bundle("S", keys(modes: ["remote-notification"]),
                                                          entitlements: "<key>com.apple.developer.siri</key><true/>"))
        #expect(other.with(.error).first?.file == dir.path + "/S.app/S.entitlements", "\(other.shown)")
        #expect(other.with(.note).contains { $0.message == "entitlements: com.apple.developer.siri = true" }, "\(other.shown)")

        // With it: clean, and every key and value is shown on one note.
        let with = Linter.lint(bundlePath: try dir.bundle("T", keys(modes: ["remote-notification"]), entitlements: """
            \(apsDevelopment)
            <key>com.apple.security.application-groups</key><array><string>group.a</string><string>group.b</string></array>
            """))
        #expect(!with.hasErrors, "\(with.shown)")
        #expect(with.warningCount == 0, "\(with.shown)")
        let note = with.with(.note).first { $0.message.hasPrefix("entitlements:") }
        #expect(note?.message == "entitlements: aps-environment = development, com.apple.security.application-groups = [group.a, group.b]")
        #expect(note?.file == dir.path + "/T.app/T.entitlements")
    }

    @Test func appGroupIdentifiersTheHostWouldRefuseAreErrors() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let bad = Linter.lint(bundlePath: try dir.bundle("G", keys(modes: []), entitlements: """
            <key>com.apple.security.application-groups</key><array><string>group.ok</string><string>../shared</string></array>
            """))
        let error = bad.with(.error).first
        #expect(bad.with(.error).count == 1, "\(bad.shown)")
        #expect(error?.file == dir.path + "/G.app/G.entitlements")
        #expect(error?.key == "com.apple.security.application-groups")
        #expect(error?.message.contains("\"../shared\" is not an App Group identifier") == true, "\(bad.shown)")
        let good = Linter.lint(bundlePath: try dir.bundle("H", keys(modes: []), entitlements: """
            <key>com.apple.security.application-groups</key><array><string>group.$(TEAM).shared</string></array>
            """), settings: ["TEAM": "acme"])
        #expect(!good.hasErrors, "\(good.shown)")
    }

    @Test func anExecutableClimbingOutOfTheBundleIsAnError() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let climbing = Linter.lint(bundlePath: try dir.bundle("E", """
            <key>CFBundleIdentifier</key><string>com.example.escape</string>
            <key>CFBundleExecutable</key><string>../escaper</string>
            """))
        let error = climbing.with(.error).first
        #expect(climbing.with(.error).count == 1, "\(climbing.shown)")
        #expect(error?.key == "CFBundleExecutable")
        #expect(error?.message == "CFBundleExecutable: \"../escaper\" climbs out of its folder (\"..\"): the executable must lie inside the bundle folder or a products directory")
        let absolute = Linter.lint(bundlePath: try dir.bundle("F", """
            <key>CFBundleIdentifier</key><string>com.example.absolute</string>
            <key>CFBundleExecutable</key><string>/usr/bin/env</string>
            """))
        #expect(!absolute.hasErrors, "\(absolute.shown)")
        #expect(absolute.with(.warning).contains { $0.key == "CFBundleExecutable" && $0.message.contains("absolute path") }, "\(absolute.shown)")
    }

    @Test func notEmulatedModesAreWarnings() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let report = Linter.lint(bundlePath: try dir.bundle("N", keys(modes: ["push-to-talk", "newsstand-content"])))
        #expect(!report.hasErrors, "\(report.shown)")
        let warnings = report.with(.warning)
        #expect(warnings.contains { $0.mode == "push-to-talk" && $0.message.contains("not emulated") }, "\(report.shown)")
        #expect(warnings.contains { $0.mode == "newsstand-content" && $0.message.contains("not emulated") }, "\(report.shown)")
        #expect(warnings.contains { $0.mode == "newsstand-content" && $0.message.contains("deprecated") }, "\(report.shown)")
    }

    @Test func locationWithoutItsUsageStringsIsAWarning() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let report = Linter.lint(bundlePath: try dir.bundle("L", keys(modes: ["location"])))
        #expect(!report.hasErrors)
        #expect(report.with(.warning).contains { $0.mode == "location" && $0.message.contains("NSLocationAlwaysAndWhenInUseUsageDescription") },
                "\(report.shown)")
    }

    @Test func aModeListedTwiceIsAWarning() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let report = Linter.lint(bundlePath: try dir.bundle("D", keys(modes: ["audio", "location", "audio"], locationUsage)))
        #expect(report.with(.warning).map(\.message) == [
            "background mode \"audio\" is listed 2 times (UIBackgroundModes[0], UIBackgroundModes[2]); list it once",
        ], "\(report.shown)")
        #expect(report.backgroundModes == ["audio", "location"])
    }

    @Test func everyUnknownModeIsAnErrorWithItsSuggestionAndTheRestIsLinted() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let bundle = try dir.bundle("U", keys(modes: ["audoi", "processing", "locaton", "zzzzzzzzzzzz"]))
        let report = Linter.lint(bundlePath: bundle)
        let unknown = report.with(.error).filter { $0.message.contains("unknown mode") }
        #expect(unknown.map(\.line) == [
            bundle + "/Info.plist: error: UIBackgroundModes[0]: unknown mode \"audoi\" (did you mean \"audio\"?)",
            bundle + "/Info.plist: error: UIBackgroundModes[2]: unknown mode \"locaton\" (did you mean \"location\"?)",
            bundle + "/Info.plist: error: UIBackgroundModes[3]: unknown mode \"zzzzzzzzzzzz\" (known modes: "
                + BackgroundMode.allCases.map(\.rawValue).joined(separator: ", ") + ")",
        ], "\(report.shown)")
        #expect(unknown.map(\.mode) == ["audoi", "locaton", "zzzzzzzzzzzz"])
        // The known mode is still checked.
        #expect(report.with(.error).contains { $0.key == "BGTaskSchedulerPermittedIdentifiers" }, "\(report.shown)")
        #expect(report.backgroundModes == ["processing"])
    }

    @Test func manifestProblemsAreErrorsNamingFileAndKey() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        // Not a property list at all: one error, nothing else checked.
        let broken = try dir.file("Broken.plist", "<plist><dict><key>CFBundleIdentifier</key>")
        let bad = Linter.lint(bundlePath: broken)
        #expect(bad.findings.count == 1, "\(bad.shown)")
        #expect(bad.findings.first?.line.hasPrefix(broken + ": error: not a valid property list") == true, "\(bad.shown)")
        #expect(bad.bundleIdentifier == nil)

        // Missing id, mistyped executable, unresolved BGTask reference: all reported, modes still linted.
        let bundle = try dir.bundle("M", """
            <key>CFBundleExecutable</key><integer>3</integer>
            <key>UIBackgroundModes</key><array><string>external-accessory</string></array>
            <key>BGTaskSchedulerPermittedIdentifiers</key><array><string>$(ID_PREFIX).refresh</string></array>
            """)
        let report = Linter.lint(bundlePath: bundle)
        let file = bundle + "/Info.plist"
        #expect(report.with(.error).map(\.line) == [
            "\(file): error: CFBundleExecutable: expected a string, found an integer",
            // Issue 19: the message names the setting Xcode fills the key from.
            "\(file): error: CFBundleIdentifier: missing, and Xcode fills it from $(PRODUCT_BUNDLE_IDENTIFIER), but PRODUCT_BUNDLE_IDENTIFIER has no value (pass --setting PRODUCT_BUNDLE_IDENTIFIER=... or an --xcconfig file that sets it)",
            "\(file): error: BGTaskSchedulerPermittedIdentifiers[0]: unresolved build setting $(ID_PREFIX) (pass --setting ID_PREFIX=...)",
            "\(file): error: background mode \"external-accessory\" needs UISupportedExternalAccessoryProtocols: with no protocol listed no accessory ever reaches the app",
        ], "\(report.shown)")
        #expect(report.bundleIdentifier == nil)
    }

    @Test func settingsResolveBuildSettingReferences() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let bundle = try dir.bundle("B", keys(id: "$(PRODUCT_BUNDLE_IDENTIFIER)", modes: ["audio"]))
        let without = Linter.lint(bundlePath: bundle)
        #expect(without.with(.error).map(\.key) == ["CFBundleIdentifier"], "\(without.shown)")
        let with = Linter.lint(bundlePath: bundle, settings: ["PRODUCT_BUNDLE_IDENTIFIER": "com.example.b"])
        #expect(!with.hasErrors, "\(with.shown)")
        #expect(with.bundleIdentifier == "com.example.b")
    }

    @Test func reportRoundTripsThroughJSONWithItsCounts() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let report = Linter.lint(bundlePath: try dir.bundle("J", keys(modes: ["processing", "push-to-talk"])))
        let data = try WireJSON.encoder().encode(report)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["hasErrors"] as? Bool == true)
        #expect(object["errors"] as? Int == 1)
        #expect(object["warnings"] as? Int == 1)
        #expect(try WireJSON.decoder().decode(LintReport.self, from: data) == report)
    }

    // MARK: - trace

    @Test func traceDeclaredButNeverUsedAndRefused() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let id: BundleID = "com.example.lint"
        let bundle = try dir.bundle("Tr", keys(id: id.rawValue, modes: ["audio", "voip", "fetch", "push-to-talk"], """
            <key>BGTaskSchedulerPermittedIdentifiers</key><array><string>com.example.lint.refresh</string></array>
            """))
        let trace = [
            event(1, .installed, id, "installed"),
            event(2, .modeUsed, id, mode: "voip", "registered for VoIP pushes"),
            event(3, .modeUsed, "com.example.other", mode: "audio", "playing audio"),  // another app's
            event(4, .modeRefused, id, mode: "location", "startUpdatingLocation in the background"),
            // As the host writes it: the plugin's words, then what is needed (left out of the finding).
            event(5, .modeRefused, id, mode: "location", "startUpdatingLocation in the background: needs \"location\" in UIBackgroundModes"),
            event(6, .modeRefused, id, mode: "bluetooth-central", "BLE scan in the background"),
            event(7, .modeRefused, id, mode: "location", "allowsBackgroundLocationUpdates = true"),
            event(8, .modeRefused, id, mode: "voip", "PushKit VoIP registration"),  // declared now
        ]
        let report = Linter.lint(bundlePath: bundle, trace: trace)
        let file = bundle + "/Info.plist"
        let traceLines = report.findings.map(\.line).filter { $0.contains("trace") }
        #expect(traceLines == [
            "\(file): warning: background mode \"audio\" is declared but never used in the trace (App Review rejects unused modes)",
            "\(file): warning: background mode \"fetch\" is declared but never used in the trace (App Review rejects unused modes)",
            "\(file): note: background mode \"push-to-talk\": whether it is used cannot be judged from a trace (AppHost does not emulate it)",
            "\(file): warning: refused 2 times in the trace: startUpdatingLocation in the background (declare \"location\" in UIBackgroundModes)",
            "\(file): warning: refused once in the trace: BLE scan in the background (declare \"bluetooth-central\" in UIBackgroundModes)",
            "\(file): error: refused once in the trace, and iOS terminates the app for it: allowsBackgroundLocationUpdates = true (declare \"location\" in UIBackgroundModes, or stop doing this)",
            "\(file): note: refused once in the trace although \"voip\" is declared: PushKit VoIP registration",
        ], "\(report.shown)")
        #expect(report.hasErrors)

        // Without the trace the same bundle has no error.
        #expect(!Linter.lint(bundlePath: bundle).hasErrors)
    }

    @Test func aTerminationReportBlamingTheModeMakesARefusalAnError() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let id: BundleID = "com.example.lint"
        let bundle = try dir.bundle("K", keys(id: id.rawValue))
        let killed = Linter.lint(bundlePath: bundle, trace: [
            event(1, .modeRefused, id, mode: "audio", "some future fatal misuse"),
            event(2, .report, id, "termination report 7: did X without \"audio\" in UIBackgroundModes"),
        ])
        #expect(killed.with(.error).map(\.mode) == ["audio"], "\(killed.shown)")
        // The host's own line when it kills the app counts too.
        let warned = Linter.lint(bundlePath: bundle, trace: [
            event(1, .modeRefused, id, mode: "audio", "some future fatal misuse: needs \"audio\" in UIBackgroundModes"),
            event(2, .warning, id, "killing: did X without \"audio\" in UIBackgroundModes: a programmer error"),
        ])
        #expect(warned.with(.error).map(\.message) == [
            "refused once in the trace, and iOS terminates the app for it: some future fatal misuse (declare \"audio\" in UIBackgroundModes, or stop doing this)",
        ], "\(warned.shown)")
        // A report after a new spawn is not about that refusal.
        let relaunched = Linter.lint(bundlePath: bundle, trace: [
            event(1, .modeRefused, id, mode: "audio", "some future fatal misuse"),
            event(2, .spawned, id, "spawned"),
            event(3, .report, id, "termination report 8: did X without \"audio\" in UIBackgroundModes"),
        ])
        #expect(!relaunched.hasErrors, "\(relaunched.shown)")
        #expect(relaunched.with(.warning).map(\.mode) == ["audio"], "\(relaunched.shown)")
    }

    @Test func aTraceWithoutTheAppJudgesNothing() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let report = Linter.lint(bundlePath: try dir.bundle("X", keys(modes: ["audio"])),
                                 trace: [event(1, .modeUsed, "com.example.other", mode: "audio", "playing audio")])
        #expect(report.with(.warning).map(\.message) == [
            "the trace has no events of com.example.lint: nothing in it to judge the background modes by (was it installed under another id?)",
        ], "\(report.shown)")
    }

    @Test func readTraceReadsWhatTheHostWritesAndNamesBadLines() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let events = [event(1, .modeUsed, "a.b", mode: "audio", "playing audio"), event(2, .transition, "a.b", "home button")]
        let encoder = WireJSON.encoder()
        var lines = try events.map { String(decoding: try encoder.encode($0), as: UTF8.self) }
        let good = try dir.file("good.jsonl", lines.joined(separator: "\n") + "\n\n")
        #expect(try Linter.readTrace(path: good) == events)

        // A newer host's kind is skipped; a line that is not an event is an error naming it.
        lines.insert(#"{"seq":3,"time":"2027-01-15T08:00:00.000Z","kind":"fromTheFuture","cause":"x"}"#, at: 1)
        let future = try dir.file("future.jsonl", lines.joined(separator: "\n"))
        #expect(try Linter.readTrace(path: future) == events)

        lines.insert(#"{"seq":4,"time":"yesterday","kind":"modeUsed","cause":"x"}"#, at: 2)
        lines.append("{not json")
        let bad = try dir.file("bad.jsonl", lines.joined(separator: "\n"))
        #expect {
            try Linter.readTrace(path: bad)
        } throws: { error in
            guard let e = error as? TraceError else { return false }
            return e.line == 3 && e.description.hasPrefix(bad + ":3: not a host event: \"time\": not an ISO 8601 date: yesterday")
        }
        let missing = dir.path + "/none.jsonl"
        #expect(throws: TraceError(file: missing, detail: "trace not found (the host writes events.jsonl in its state directory)")) {
            try Linter.readTrace(path: missing)
        }
    }

    // MARK: - the lenient reader agrees with the strict one

    @Test func lenientReadAgreesWithTheStrictReader() throws {
        let dir = try LintDir()
        defer { dir.remove() }
        let bodies = [
            keys(modes: ["audio", "fetch"]),
            keys(modes: ["audoi", "fetch", "locaton"]),
            keys(modes: ["audio"], "<key>UIApplicationExitsOnSuspend</key><string>maybe</string>"),
            keys(id: "$(X)", "<key>BGTaskSchedulerPermittedIdentifiers</key><array><string>$(Y)</string><integer>1</integer></array>"),
            keys(id: "bad id"),
            "<key>UIBackgroundModes</key><string>audio</string>",
        ]
        for (i, body) in bodies.enumerated() {
            let bundle = try dir.bundle("L\(i)", body)
            try expectAgreement(bundle)
        }
        try expectAgreement(try dir.file("broken.plist", "<plist>"))
    }

    // MARK: - corpus

    @Test(.enabled(if: lintCorpusAvailable, "needs ../shared/corpus beside the checkout (or APPHOST_CORPUS)"))
    func everyCorpusPlistLintsAndEveryFindingNamesAFile() throws {
        let folder = (lintCorpusDirectory as NSString).appendingPathComponent("plists")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".plist") }.sorted()
        #expect(!files.isEmpty)
        for name in files {
            let path = (folder as NSString).appendingPathComponent(name)
            let report = Linter.lint(bundlePath: path)
            #expect(report.manifestPath == path)
            #expect(!report.findings.isEmpty, "\(name): at least the entitlements note")
            for finding in report.findings {
                #expect(!finding.file.isEmpty && FileManager.default.fileExists(atPath: finding.file), "\(name): \(finding.line)")
                #expect(finding.line.hasPrefix(finding.file + ": \(finding.severity.rawValue): "), "\(name): \(finding.line)")
                #expect(!finding.message.isEmpty && !finding.message.contains("\n"), "\(name): \(finding.line)")
            }
            // With an empty trace of another app too.
            _ = Linter.lint(bundlePath: path, trace: [event(1, .installed, "x.y", "installed")])
            try expectAgreement(path)
        }
    }
}

/// The lenient reader's first problem is the strict reader's error; with none, it reads the same manifest.
private func expectAgreement(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let lenient = ManifestReader.readLenient(path: path)
    do {
        let strict = try ManifestReader.read(path: path)
        #expect(lenient.problems.isEmpty, "\(path): \(lenient.problems)", sourceLocation: sourceLocation)
        #expect(lenient.manifest == strict, "\(path)", sourceLocation: sourceLocation)
        #expect(lenient.bundleIdentifierResolved, "\(path)", sourceLocation: sourceLocation)
    } catch {
        #expect(lenient.problems.first == error, "\(path): strict \(error), lenient \(lenient.problems)", sourceLocation: sourceLocation)
    }
}

/// The real-world corpus: `$APPHOST_CORPUS`, or `../shared/corpus` beside the checkout.
private let lintCorpusDirectory: String = {
    if let env = ProcessInfo.processInfo.environment["APPHOST_CORPUS"], !env.isEmpty { return env }
    return URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("../shared/corpus").standardizedFileURL.path
}()

private let lintCorpusAvailable = FileManager.default.fileExists(
    atPath: (lintCorpusDirectory as NSString).appendingPathComponent("INDEX.tsv"))
