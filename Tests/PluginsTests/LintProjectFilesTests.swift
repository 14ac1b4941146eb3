import AppHostManifest
import AppHostProtocol
import Foundation
import Testing
@testable import Plugins

// `apphost lint` on what real projects hold (issue 19): usage descriptions the modes
// need, accessory protocols without the mode, entitlements kept elsewhere or under
// another name, an entitlements file given as the bundle, Xcode's generated Info.plist.

/// A folder of one test; removed by `remove()`.
private struct ProjectDir {
    let path: String
    init() throws {
        path = (NSTemporaryDirectory() as NSString).appendingPathComponent("apphost-lintp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `relative` (folders made on the way) holding a property list of `body`; returns its path.
    @discardableResult
    func plist(_ relative: String, _ body: String) throws -> String {
        let file = (path as NSString).appendingPathComponent(relative)
        try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let text = """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0">
            <dict>
            \(body)
            </dict>
            </plist>
            """
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        return file
    }

    /// `Name.app/Info.plist` with an identity, the modes and `extra`; returns the bundle.
    func bundle(_ name: String, modes: [String], _ extra: String = "") throws -> String {
        let modeKeys = "<key>UIBackgroundModes</key><array>" + modes.map { "<string>\($0)</string>" }.joined() + "</array>"
        try plist("\(name).app/Info.plist", """
            <key>CFBundleIdentifier</key><string>com.example.\(name.lowercased())</string>
            <key>CFBundleExecutable</key><string>\(name)</string>
            \(modeKeys)
            \(extra)
            """)
        return (path as NSString).appendingPathComponent("\(name).app")
    }
}

private extension LintReport {
    func with(_ severity: LintFinding.Severity) -> [LintFinding] { findings.filter { $0.severity == severity } }
    func about(_ key: String) -> [LintFinding] { findings.filter { $0.key == key } }
    var shown: String { findings.map(\.line).joined(separator: "\n") }
}

private let bluetoothUsage = "<key>NSBluetoothAlwaysUsageDescription</key><string>Pairs with your scale.</string>"

@Suite("apphost lint: real project files")
struct LintProjectFilesTests {
    @Test(arguments: ["bluetooth-central", "bluetooth-peripheral"])
    func bluetoothModesNeedTheirUsageDescription(mode: String) throws {
        let dir = try ProjectDir()
        defer { dir.remove() }
        let bare = Linter.lint(bundlePath: try dir.bundle("Bare", modes: [mode]))
        let findings = bare.about("NSBluetoothAlwaysUsageDescription")
        #expect(findings.count == 1, "\(bare.shown)")
        #expect(findings.first?.severity == .error)
        #expect(findings.first?.mode == mode)
        #expect(findings.first?.message == "background mode \"\(mode)\" without NSBluetoothAlwaysUsageDescription: iOS terminates the app the first time it uses Core Bluetooth (a privacy violation: no usage description), and App Store Connect refuses the build")

        let described = Linter.lint(bundlePath: try dir.bundle("Described", modes: [mode], bluetoothUsage))
        #expect(described.about("NSBluetoothAlwaysUsageDescription").isEmpty, "\(described.shown)")
        // An empty string is no description.
        let empty = Linter.lint(bundlePath: try dir.bundle("Empty", modes: [mode], "<key>NSBluetoothAlwaysUsageDescription</key><string></string>"))
        #expect(empty.about("NSBluetoothAlwaysUsageDescription").count == 1)

        // Xcode's generated Info.plist takes it from INFOPLIST_KEY_..., only with GENERATE_INFOPLIST_FILE.
        let key = ["INFOPLIST_KEY_NSBluetoothAlwaysUsageDescription": "Pairs with your scale."]
        let bundle = try dir.bundle("Generated", modes: [mode])
        #expect(Linter.lint(bundlePath: bundle, settings: key).about("NSBluetoothAlwaysUsageDescription").count == 1)
        let generated = Linter.lint(bundlePath: bundle, settings: key.merging(["GENERATE_INFOPLIST_FILE": "YES"]) { $1 })
        #expect(generated.about("NSBluetoothAlwaysUsageDescription").isEmpty, "\(generated.shown)")
    }

    @Test func backgroundLocationNeedsBothUsageDescriptions() throws {
        let dir = try ProjectDir()
        defer { dir.remove() }
        let whenInUse = "<key>NSLocationWhenInUseUsageDescription</key><string>Shows you on the map.</string>"
        let always = "<key>NSLocationAlwaysAndWhenInUseUsageDescription</key><string>Records your walks.</string>"
        let none = Linter.lint(bundlePath: try dir.bundle("None", modes: ["location"]))
        #expect(none.with(.warning).compactMap(\.key) == ["NSLocationWhenInUseUsageDescription", "NSLocationAlwaysAndWhenInUseUsageDescription"],
                "\(none.shown)")
        let onlyWhenInUse = Linter.lint(bundlePath: try dir.bundle("Half", modes: ["location"], whenInUse))
        #expect(onlyWhenInUse.with(.warning).map(\.message) == [
            "background mode \"location\" without NSLocationAlwaysAndWhenInUseUsageDescription: requestAlwaysAuthorization does nothing: the app gets When In Use authorization at most: updates go on in the background only if it started them in front, and region monitoring and significant-change updates never relaunch it (AppHost takes Always from `apphost privacy grant location-always`)",
        ], "\(onlyWhenInUse.shown)")
        let onlyAlways = Linter.lint(bundlePath: try dir.bundle("Other", modes: ["location"], always))
        #expect(onlyAlways.with(.warning).first?.message.hasPrefix("background mode \"location\" without NSLocationWhenInUseUsageDescription: iOS never shows a location prompt") == true,
                "\(onlyAlways.shown)")
        let both = Linter.lint(bundlePath: try dir.bundle("Both", modes: ["location"], whenInUse + always))
        #expect(both.with(.warning).isEmpty && both.with(.error).isEmpty, "\(both.shown)")
    }

    @Test func modesThatNeedNoUsageDescriptionGetNone() throws {
        let dir = try ProjectDir()
        defer { dir.remove() }
        // Playing audio in the background needs no NSMicrophoneUsageDescription (only recording does).
        let audio = Linter.lint(bundlePath: try dir.bundle("Radio", modes: ["audio", "voip", "fetch"]))
        #expect(!audio.findings.contains { $0.key?.hasSuffix("UsageDescription") == true }, "\(audio.shown)")
        // nearby-interaction is not emulated, but its prompt text is still checked.
        let nearby = Linter.lint(bundlePath: try dir.bundle("Finder", modes: ["nearby-interaction"]))
        #expect(nearby.about("NSNearbyInteractionUsageDescription").map(\.severity) == [.warning], "\(nearby.shown)")
    }

    @Test func accessoryProtocolsWithoutTheModeAreAWarning() throws {
        let dir = try ProjectDir()
        defer { dir.remove() }
        let protocols = "<key>UISupportedExternalAccessoryProtocols</key><array><string>com.example.printer</string></array>"
        let foreground = Linter.lint(bundlePath: try dir.bundle("Print", modes: ["audio"], protocols))
        let warning = try #require(foreground.about("UISupportedExternalAccessoryProtocols").first, "\(foreground.shown)")
        #expect(warning.severity == .warning)
        #expect(warning.message == "UISupportedExternalAccessoryProtocols lists 1 protocol(s) but UIBackgroundModes has no \"external-accessory\": the app reaches its accessories only while it runs in front, and is not woken or kept running for them in the background (declare the mode if it should be)")
        let declared = Linter.lint(bundlePath: try dir.bundle("Printer", modes: ["external-accessory"], protocols))
        #expect(declared.about("UISupportedExternalAccessoryProtocols").isEmpty, "\(declared.shown)")
    }

    @Test func anEntitlementsFileGivenAsTheBundleIsSaidToBeOne() throws {
        let dir = try ProjectDir()
        defer { dir.remove() }
        let file = try dir.plist("App/App.entitlements", "<key>aps-environment</key><string>development</string>")
        let report = Linter.lint(bundlePath: file)
        #expect(report.hasErrors)
        #expect(report.findings.map(\.line) == [
            "\(file): error: this is an entitlements file, not an app bundle or Info.plist: lint the app's bundle or Info.plist and name this file with --entitlements (apphost lint --entitlements \(file) App.app)",
            "\(file): note: entitlements: aps-environment = development",
        ])
        // Named otherwise, it is known by its keys.
        let plist = try dir.plist("App/Entitlements.plist", "<key>com.apple.security.application-groups</key><array><string>bad group</string></array>")
        let byContent = Linter.lint(bundlePath: plist)
        #expect(byContent.findings.first?.message.hasPrefix("this is an entitlements file") == true, "\(byContent.shown)")
        #expect(byContent.findings.contains { $0.key == Entitlements.applicationGroupsKey && $0.severity == .error }, "its groups are checked too")
    }

    @Test func entitlementsKeptElsewhereAndUnderAnotherName() throws {
        let dir = try ProjectDir()
        defer { dir.remove() }
        let bundle = try dir.bundle("Chat", modes: ["remote-notification"])
        try dir.plist("Chat.app/ChatDebug.entitlements", "<key>aps-environment</key><string>development</string>")
        let plain = Linter.lint(bundlePath: bundle)
        #expect(plain.with(.warning).map(\.line).contains(
            "\(bundle)/Info.plist: warning: \(bundle)/ChatDebug.entitlements is not read: AppHost looks for \(bundle)/Chat.entitlements (the bundle's name); rename it, or pass --entitlements \(bundle)/ChatDebug.entitlements"),
            "\(plain.shown)")
        #expect(plain.about("aps-environment").map(\.severity) == [.error], "remote-notification still lacks it")

        let elsewhere = try dir.plist("Config/Chat.entitlements", "<key>aps-environment</key><string>production</string>")
        let named = Linter.lint(bundlePath: bundle, entitlements: elsewhere)
        #expect(named.with(.error).isEmpty && named.with(.warning).isEmpty, "\(named.shown)")
        #expect(named.findings.map(\.line).contains("\(elsewhere): note: entitlements: aps-environment = production"))

        let missing = Linter.lint(bundlePath: bundle, entitlements: dir.path + "/nope.entitlements")
        #expect(missing.with(.error).map(\.line).contains("\(dir.path)/nope.entitlements: error: file not found"), "\(missing.shown)")
    }

    @Test func referencesLeftInTheNameAreWarnings() throws {
        let dir = try ProjectDir()
        defer { dir.remove() }
        let bundle = try dir.bundle("Brand", modes: ["audio"], "<key>CFBundleDisplayName</key><string>$(BRAND_NAME)</string>")
        let report = Linter.lint(bundlePath: bundle)
        #expect(report.about("CFBundleDisplayName").map(\.line) == [
            "\(bundle)/Info.plist: warning: CFBundleDisplayName: $(BRAND_NAME) has no value, so it reads \"$(BRAND_NAME)\" (pass --setting BRAND_NAME=... or an --xcconfig file that sets it)",
        ], "\(report.shown)")
        #expect(Linter.lint(bundlePath: bundle, settings: ["BRAND_NAME": "Brand"]).about("CFBundleDisplayName").isEmpty)
    }

    @Test func theFixtureProjectLintsCleanWithItsOwnFiles() throws {
        let project = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/XcodeProject").standardizedFileURL.path
        let plist = project + "/Walker/Info.plist"
        let entitlements = project + "/Walker/Supporting Files/Walker.entitlements"
        let settings = try XCConfig.load(files: [project + "/Config/Base.xcconfig"]).settings
        let report = Linter.lint(bundlePath: plist, settings: settings, entitlements: entitlements)
        #expect(report.with(.error).isEmpty && report.with(.warning).isEmpty, "\(report.shown)")
        #expect(report.bundleIdentifier == "com.example.walker")

        // As written, without the project's settings and entitlements, it is what Xcode alone completes.
        let bare = Linter.lint(bundlePath: plist)
        #expect(bare.with(.error).compactMap(\.key) == ["CFBundleIdentifier", "BGTaskSchedulerPermittedIdentifiers", "NSBluetoothAlwaysUsageDescription", "aps-environment"],
                "\(bare.shown)")
    }

    // MARK: - corpus

    @Test(.enabled(if: projectCorpusAvailable, "needs ../shared/corpus beside the checkout (or APPHOST_CORPUS)"))
    func corpusUsageDescriptionsAndAccessoriesReadAsWritten() throws {
        let folder = (projectCorpusDirectory as NSString).appendingPathComponent("plists")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".plist") }.sorted()
        var bluetoothApps = 0
        for name in files {
            let path = (folder as NSString).appendingPathComponent(name)
            let raw = try ManifestReader.readRaw(path: path)
            let dictionary = raw.propertyList()
            let report = Linter.lint(bundlePath: path, settings: ["PRODUCT_BUNDLE_IDENTIFIER": "org.example.corpus"])
            let bluetooth = raw.backgroundModes.contains(.bluetoothCentral) || raw.backgroundModes.contains(.bluetoothPeripheral)
            if bluetooth { bluetoothApps += 1 }
            let described = (dictionary["NSBluetoothAlwaysUsageDescription"] as? String).map { !$0.isEmpty } ?? false
            #expect(report.about("NSBluetoothAlwaysUsageDescription").isEmpty == (!bluetooth || described), "\(name): \(report.shown)")
            let protocols = (dictionary["UISupportedExternalAccessoryProtocols"] as? [Any])?.isEmpty == false
            let accessoryWarning = report.about("UISupportedExternalAccessoryProtocols").contains { $0.severity == .warning }
            #expect(accessoryWarning == (protocols && !raw.backgroundModes.contains(.externalAccessory)), "\(name): \(report.shown)")
        }
        #expect(bluetoothApps >= 5, "the corpus exercises the bluetooth modes")
    }
}

private let projectCorpusDirectory: String = {
    if let env = ProcessInfo.processInfo.environment["APPHOST_CORPUS"], !env.isEmpty { return env }
    return URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("../shared/corpus").standardizedFileURL.path
}()

private let projectCorpusAvailable = FileManager.default.fileExists(
    atPath: (projectCorpusDirectory as NSString).appendingPathComponent("INDEX.tsv"))
