import Foundation
import Testing
import AppHostProtocol
@testable import AppHostManifest

/// Partial Info.plists of projects with `GENERATE_INFOPLIST_FILE`: the identity keys
/// Xcode adds at build time come from build settings, as Xcode takes them.
@Suite("Manifest: Xcode-generated Info.plists")
struct GeneratedInfoPlistTests {
    @Test func missingIdentityKeysTakeXcodesReferences() throws {
        try withTempDir { dir in
            let path = try write(plist(array("UIBackgroundModes", ["audio"])), to: "Radio/Info.plist", in: dir)
            let settings = ["PRODUCT_BUNDLE_IDENTIFIER": "org.example.$(PRODUCT_NAME:rfc1034identifier)", "PRODUCT_NAME": "Radio FM"]
            let read = try ManifestReader.readWithWarnings(path: path, settings: settings)
            #expect(read.manifest.bundleIdentifier == "org.example.Radio-FM")
            #expect(read.manifest.executable == "Radio FM", "EXECUTABLE_NAME defaults to $(PRODUCT_NAME)")
            #expect(read.manifest.name == "Radio FM")
            #expect(read.manifest.displayName == nil)
            #expect(read.warnings.isEmpty)
            #expect(ManifestReader.generatingSetting(for: "CFBundleExecutable") == "EXECUTABLE_NAME")
            #expect(ManifestReader.generatingSetting(for: "CFBundleDisplayName") == nil)

            // Without PRODUCT_NAME the defaults are the folder's name, as before.
            let plain = try ManifestReader.read(path: path, settings: ["PRODUCT_BUNDLE_IDENTIFIER": "org.example.radio"])
            #expect(plain.executable == "Radio" && plain.name == "Radio")
        }
    }

    @Test func anExecutableNameThatCannotResolveNamesWhatItNeeds() throws {
        try withTempDir { dir in
            let path = try write(plist(strings(["CFBundleIdentifier": "org.example.a"])), to: "A.app/Info.plist", in: dir)
            let error = #expect(throws: ManifestError.self) {
                try ManifestReader.read(path: path, settings: ["EXECUTABLE_NAME": "$(EXECUTABLE_PREFIX)A"])
            }
            #expect(error?.code == .missingKey)
            #expect(error?.key == "CFBundleExecutable")
            #expect(error?.value == "EXECUTABLE_PREFIX")
            #expect(error?.detail == "missing, and Xcode fills it from $(EXECUTABLE_NAME), but EXECUTABLE_NAME needs $(EXECUTABLE_PREFIX), which has no value (pass --setting EXECUTABLE_PREFIX=... or an --xcconfig file that sets it)")
        }
    }

    @Test func referencesLeftInTheNameOrDisplayNameAreWarnings() throws {
        try withTempDir { dir in
            let path = try write(plist(strings(["CFBundleIdentifier": "org.example.a", "CFBundleExecutable": "A",
                                                "CFBundleName": "$(APP_NAME)", "CFBundleDisplayName": "${BRAND} $(FLAVOR) ${BRAND}"])),
                                 to: "A.app/Info.plist", in: dir)
            let read = try ManifestReader.readWithWarnings(path: path)
            #expect(read.manifest.name == "$(APP_NAME)")
            #expect(read.manifest.displayName == "${BRAND} $(FLAVOR) ${BRAND}")
            #expect(read.warnings.map(\.description) == [
                "\(path): CFBundleName: $(APP_NAME) has no value, so it reads \"$(APP_NAME)\" (pass --setting APP_NAME=... or an --xcconfig file that sets it)",
                "\(path): CFBundleDisplayName: ${BRAND}, $(FLAVOR) have no value, so it reads \"${BRAND} $(FLAVOR) ${BRAND}\" (pass --setting BRAND=... --setting FLAVOR=... or an --xcconfig file that sets them)",
            ])
            let resolved = try ManifestReader.readWithWarnings(path: path, settings: ["APP_NAME": "Aa", "BRAND": "B", "FLAVOR": "c"])
            #expect(resolved.manifest.name == "Aa" && resolved.manifest.displayName == "B c B")
            #expect(resolved.warnings.isEmpty)
            // The lenient reader (lint) carries the same warnings.
            #expect(ManifestReader.readLenient(path: path).warnings == read.warnings)
        }
    }

    @Test func theDisplayNameComesFromINFOPLIST_KEYWhenXcodeGeneratesTheInfoPlist() throws {
        try withTempDir { dir in
            let path = try write(plist(strings(["CFBundleIdentifier": "org.example.a"])), to: "A/Info.plist", in: dir)
            let key = ["INFOPLIST_KEY_CFBundleDisplayName": "$(PRODUCT_NAME) Beta"]
            #expect(try ManifestReader.read(path: path, settings: key).displayName == nil, "only with GENERATE_INFOPLIST_FILE")
            let generated = try ManifestReader.read(path: path, settings: key.merging(["GENERATE_INFOPLIST_FILE": "YES"]) { $1 })
            #expect(generated.displayName == "A Beta")
            // A key the file writes wins, as Xcode merges them.
            let written = try write(plist(strings(["CFBundleIdentifier": "org.example.a", "CFBundleDisplayName": "Own"])), to: "B/Info.plist", in: dir)
            #expect(try ManifestReader.read(path: written, settings: key.merging(["GENERATE_INFOPLIST_FILE": "YES"]) { $1 }).displayName == "Own")
        }
    }

    @Test func theFixtureProjectReadsWithItsXcconfig() throws {
        let xcconfig = try XCConfig.load(files: [xcodeProjectFixture + "/Config/Base.xcconfig"],
                                         conditions: .init(sdk: "iphonesimulator", config: "Debug"))
        let manifest = try ManifestReader.read(path: xcodeProjectFixture + "/Walker/Info.plist", settings: xcconfig.settings)
        #expect(manifest.bundleIdentifier == "com.example.walker.debug")
        #expect(manifest.executable == "Walker")
        #expect(manifest.name == "Walker")
        #expect(manifest.displayName == "Walker-Sim")
        #expect(manifest.bgTaskIdentifiers == ["com.example.walker.debug.refresh"])
        #expect(manifest.backgroundModes == [.bluetoothCentral, .location, .processing, .remoteNotification])
    }

    @Test func entitlementsElsewhereAndMisnamedOnes() throws {
        try withTempDir { dir in
            let app = dir + "/Walker.app"
            try write(plist(strings(["CFBundleIdentifier": "org.example.walker"])), to: "Walker.app/Info.plist", in: dir)
            try writeExecutable("Walker", in: app)
            let elsewhere = try write(plist("<key>aps-environment</key><string>development</string>"), to: "Config/App.entitlements", in: dir)
            try write(plist("<key>com.apple.developer.siri</key><true/>"), to: "Walker.app/WalkerDebug.entitlements", in: dir)

            let plain = try AppBundleLoader.load(path: app)
            #expect(plain.entitlementsPath == nil, "a file under another name is not read")
            #expect(AppBundleLoader.misnamedEntitlements(forManifestAt: app + "/Info.plist") == [app + "/WalkerDebug.entitlements"])
            #expect(AppBundleLoader.misnamedEntitlementsWarning(forManifestAt: app + "/Info.plist")
                    == "\(app)/WalkerDebug.entitlements is not read: AppHost looks for \(app)/Walker.entitlements (the bundle's name); rename it, or pass --entitlements \(app)/WalkerDebug.entitlements")

            let named = try AppBundleLoader.load(path: app, entitlements: elsewhere)
            #expect(named.entitlementsPath == elsewhere)
            #expect(named.entitlementKeys == ["aps-environment"])
            let missing = #expect(throws: ManifestError.self) { try AppBundleLoader.load(path: app, entitlements: dir + "/nope.entitlements") }
            #expect(missing?.code == .fileNotFound)
            #expect(missing?.file == dir + "/nope.entitlements")

            // Once the expected file is there, nothing is misnamed.
            try write(plist(""), to: "Walker.app/Walker.entitlements", in: dir)
            #expect(AppBundleLoader.misnamedEntitlements(forManifestAt: app + "/Info.plist").isEmpty)
        }
    }

    @Test func misnamedEntitlementsListedAreBounded() throws {
        try withTempDir { dir in
            try write(plist(strings(["CFBundleIdentifier": "org.example.a"])), to: "A.app/Info.plist", in: dir)
            for i in 0..<(AppBundleLoader.maximumMisnamedEntitlementsListed + 5) {
                try write(plist(""), to: "A.app/E\(i).entitlements", in: dir)
            }
            #expect(AppBundleLoader.misnamedEntitlements(forManifestAt: dir + "/A.app/Info.plist").count
                    == AppBundleLoader.maximumMisnamedEntitlementsListed)
        }
    }

    @Test func entitlementsFilesAreRecognisedByNameOrContent() throws {
        try withTempDir { dir in
            let named = try write(plist(""), to: "X.entitlements", in: dir)
            let content = try write(plist("<key>aps-environment</key><string>production</string><key>com.apple.developer.siri</key><true/>"),
                                    to: "Entitlements.plist", in: dir)
            let info = try write(plist(strings(["CFBundleIdentifier": "org.example.a"])), to: "Info.plist", in: dir)
            let empty = try write(plist(""), to: "Empty.plist", in: dir)
            #expect(AppBundleLoader.isEntitlementsFile(named))
            #expect(AppBundleLoader.isEntitlementsFile(content))
            #expect(!AppBundleLoader.isEntitlementsFile(info))
            #expect(!AppBundleLoader.isEntitlementsFile(empty))
        }
    }
}
