import Foundation
import Testing
import AppHostProtocol
@testable import AppHostManifest

@Suite("ManifestReader")
struct ManifestReaderTests {
    static let settings = ["PRODUCT_BUNDLE_IDENTIFIER": "org.example.Foo"]

    @Test func readsAnXcodeInfoPlistInsideAnAppFolder() throws {
        try withTempDir { dir in
            let path = try write(plist(xcodeIdentity + "\n" + array("UIBackgroundModes", ["fetch", "audio", "processing"])
                                       + "\n" + array("BGTaskSchedulerPermittedIdentifiers", ["$(PRODUCT_BUNDLE_IDENTIFIER).refresh"])
                                       + "\n\t<key>UIApplicationExitsOnSuspend</key><true/>"
                                       + "\n" + array("UISupportedExternalAccessoryProtocols", ["com.example.proto"])),
                                 to: "Foo.app/Info.plist", in: dir)
            let manifest = try ManifestReader.read(path: path, settings: Self.settings)
            #expect(manifest.bundleIdentifier == "org.example.Foo")
            #expect(manifest.executable == "Foo")
            #expect(manifest.name == "Foo")
            #expect(manifest.displayName == nil)
            #expect(manifest.backgroundModes == [.fetch, .audio, .processing])
            #expect(manifest.bgTaskIdentifiers == ["org.example.Foo.refresh"])
            #expect(manifest.exitsOnSuspend)
            #expect(manifest.externalAccessoryProtocols == ["com.example.proto"])
            #expect(manifest.sourcePath == path)

            // The .app folder itself names the same manifest.
            let viaFolder = try ManifestReader.read(path: (dir as NSString).appendingPathComponent("Foo.app"), settings: Self.settings)
            #expect(viaFolder == manifest)
        }
    }

    @Test func keepsUnknownKeys() throws {
        try withTempDir { dir in
            let body = strings(["CFBundleIdentifier": "org.example.A", "CFBundleExecutable": "A", "NSCameraUsageDescription": "why"])
                + "\n\t<key>AppHost</key><dict><key>snapshot</key><string>blur</string></dict>"
            let path = try write(plist(body), to: "A.app/Info.plist", in: dir)
            let raw = try ManifestReader.readRaw(path: path)
            #expect(raw.keys == ["AppHost", "CFBundleExecutable", "CFBundleIdentifier", "NSCameraUsageDescription"])
            #expect(raw.propertyList()["NSCameraUsageDescription"] as? String == "why")
            #expect((raw.propertyList()["AppHost"] as? [String: Any])?["snapshot"] as? String == "blur")
            #expect(raw.format == .xml)
            #expect(try ManifestReader.read(path: path).bundleIdentifier == "org.example.A")
        }
    }

    @Test func readsABinaryPlist() throws {
        try withTempDir { dir in
            let dict: [String: Any] = [
                "CFBundleIdentifier": "org.example.Bin",
                "CFBundleExecutable": "Bin",
                "UIBackgroundModes": ["voip", "remote-notification"],
                "UIApplicationExitsOnSuspend": false,
            ]
            let data = try PropertyListSerialization.data(fromPropertyList: dict, format: .binary, options: 0)
            #expect(data.starts(with: Array("bplist00".utf8)))
            let path = try write(data, to: "Info.plist", in: dir)
            let raw = try ManifestReader.readRaw(path: path)
            #expect(raw.format == .binary)
            #expect(raw.exitsOnSuspend == false)
            let manifest = try ManifestReader.read(path: path)
            #expect(manifest.backgroundModes == [.voip, .remoteNotification])
            #expect(manifest.bundleIdentifier == "org.example.Bin")
        }
    }

    @Test func readsCRLFBOMCommentsAndEmptyDictionaries() throws {
        try withTempDir { dir in
            let body = """
                <!-- identity -->
                \(strings(["CFBundleIdentifier": "org.example.Crlf", "CFBundleExecutable": "Crlf"]))
                <key>UIBackgroundModes</key>
                <!-- a comment between key and value -->
                <array><string>location</string></array>
                <key>Empty</key>
                <dict/>
                <key>Multi</key>
                <string>line one
                line two</string>
                """
            let text = "\u{FEFF}" + plist(body).replacingOccurrences(of: "\n", with: "\r\n")
            let path = try write(text, to: "Info.plist", in: dir)
            let manifest = try ManifestReader.read(path: path)
            #expect(manifest.bundleIdentifier == "org.example.Crlf")
            #expect(manifest.backgroundModes == [.location])
        }
    }

    @Test func readsAnEmptyDictionaryWithoutRequiringKeysWhenRaw() throws {
        try withTempDir { dir in
            let path = try write(plist(""), to: "Info.plist", in: dir)
            let raw = try ManifestReader.readRaw(path: path)
            #expect(raw.rawBundleIdentifier == nil)
            #expect(raw.backgroundModes.isEmpty)
            #expect(!raw.declaresBackgroundModes)
            #expect(raw.keys.isEmpty)
        }
    }

    @Test func everyDocumentedModeIsAccepted() throws {
        try withTempDir { dir in
            let all = BackgroundMode.allCases.map(\.rawValue)
            #expect(all.count == 13)
            let path = try write(plist(strings(["CFBundleIdentifier": "a.b", "CFBundleExecutable": "x"]) + "\n"
                                       + array("UIBackgroundModes", all)), to: "Info.plist", in: dir)
            #expect(try ManifestReader.read(path: path).backgroundModes == BackgroundMode.allCases)
        }
    }

    @Test func unknownModeNamesFileKeyIndexAndSuggestion() throws {
        try withTempDir { dir in
            let path = try write(plist(xcodeIdentity + "\n" + array("UIBackgroundModes", ["fetch", "voip", "audoi"])),
                                 to: "Foo.app/Info.plist", in: dir)
            let error = #expect(throws: ManifestError.self) { try ManifestReader.read(path: path, settings: Self.settings) }
            #expect(error?.code == .unknownBackgroundMode)
            #expect(error?.index == 2)
            #expect(error?.value == "audoi")
            #expect(error?.description == "\(path): UIBackgroundModes[2]: unknown mode \"audoi\" (did you mean \"audio\"?)")
        }
    }

    @Test func suggestionsAreOnlyOfferedForCloseMisspellings() {
        #expect(BackgroundMode.suggestion(for: "remote-notifications") == .remoteNotification)
        #expect(BackgroundMode.suggestion(for: "Location") == .location)
        #expect(BackgroundMode.suggestion(for: "bluetooth-centrl") == .bluetoothCentral)
        #expect(BackgroundMode.suggestion(for: "pushtotalk") == .pushToTalk)
        #expect(BackgroundMode.suggestion(for: "background-refresh") == nil)
    }

    @Test func unknownModeWithoutACloseMatchListsTheKnownModes() throws {
        try withTempDir { dir in
            let path = try write(plist(array("UIBackgroundModes", ["teleportation"])), to: "Info.plist", in: dir)
            let error = #expect(throws: ManifestError.self) { try ManifestReader.readRaw(path: path) }
            #expect(error?.description.contains("known modes: audio, location, voip") == true)
        }
    }

    @Test(arguments: [
        ("<key>UIBackgroundModes</key><string>audio</string>", "UIBackgroundModes", nil as Int?, "expected an array of strings, found a string"),
        ("<key>UIBackgroundModes</key><array><string>audio</string><integer>3</integer></array>", "UIBackgroundModes", 1, "expected a string, found an integer"),
        ("<key>CFBundleIdentifier</key><array/>", "CFBundleIdentifier", nil, "expected a string, found an array"),
        ("<key>CFBundleExecutable</key><true/>", "CFBundleExecutable", nil, "expected a string, found a boolean"),
        ("<key>UIApplicationExitsOnSuspend</key><integer>1</integer>", "UIApplicationExitsOnSuspend", nil, "expected a boolean (<true/> or <false/>), found an integer"),
        ("<key>UIApplicationExitsOnSuspend</key><string>maybe</string>", "UIApplicationExitsOnSuspend", nil, "expected a boolean (<true/> or <false/>), found a string"),
        ("<key>BGTaskSchedulerPermittedIdentifiers</key><array><dict/></array>", "BGTaskSchedulerPermittedIdentifiers", 0, "expected a string, found a dictionary"),
        ("<key>UISupportedExternalAccessoryProtocols</key><real>1.5</real>", "UISupportedExternalAccessoryProtocols", nil, "expected an array of strings, found a real number"),
    ])
    func wrongTypesNameKeyIndexAndType(body: String, key: String, index: Int?, detail: String) throws {
        try withTempDir { dir in
            let path = try write(plist(body), to: "Info.plist", in: dir)
            let error = #expect(throws: ManifestError.self) { try ManifestReader.readRaw(path: path) }
            #expect(error?.code == .wrongType)
            #expect(error?.key == key)
            #expect(error?.index == index)
            #expect(error?.detail == detail)
            #expect(error?.file == path)
        }
    }

    @Test(arguments: [("YES", true), ("NO", false), ("true", true), ("false", false), ("yes", true)])
    func exitsOnSuspendAcceptsBooleanStrings(text: String, expected: Bool) throws {
        try withTempDir { dir in
            let path = try write(plist(strings(["UIApplicationExitsOnSuspend": text])), to: "Info.plist", in: dir)
            #expect(try ManifestReader.readRaw(path: path).exitsOnSuspend == expected)
        }
    }

    @Test func malformedPlistSaysSoWithFoundationsReason() throws {
        try withTempDir { dir in
            let path = try write("<?xml version=\"1.0\"?>\n<plist><dict><key>a</key></dict></plist>", to: "Info.plist", in: dir)
            let error = #expect(throws: ManifestError.self) { try ManifestReader.read(path: path) }
            #expect(error?.code == .malformedPropertyList)
            let text = error?.description ?? ""
            #expect(text.hasPrefix("\(path): not a valid property list ("))
            #expect(!text.contains("\n"))
        }
    }

    @Test func topLevelMustBeADictionary() throws {
        try withTempDir { dir in
            let path = try write("<?xml version=\"1.0\"?>\n<plist><array><string>a</string></array></plist>", to: "Info.plist", in: dir)
            let error = #expect(throws: ManifestError.self) { try ManifestReader.read(path: path) }
            #expect(error?.code == .notADictionary)
            #expect(error?.description == "\(path): top level is an array, not a dictionary")
        }
    }

    @Test func missingFileIsNamed() throws {
        try withTempDir { dir in
            let path = (dir as NSString).appendingPathComponent("Nope.app/Info.plist")
            let error = #expect(throws: ManifestError.self) { try ManifestReader.read(path: path) }
            #expect(error?.code == .fileNotFound)
            #expect(error?.description == "\(path): file not found")
        }
    }

    // Issue 19 changed this: a missing identity key takes the reference Xcode puts there
    // (a GENERATE_INFOPLIST_FILE project's partial Info.plist), so only one left
    // unresolved is an error, naming the setting to pass.
    @Test func aMissingBundleIdentifierNamesTheSettingToPass() throws {
        try withTempDir { dir in
            let path = try write(plist(strings(["CFBundleExecutable": "A"])), to: "Info.plist", in: dir)
            let error = #expect(throws: ManifestError.self) { try ManifestReader.read(path: path) }
            #expect(error?.code == .missingKey)
            #expect(error?.value == "PRODUCT_BUNDLE_IDENTIFIER")
            #expect(error?.description == "\(path): CFBundleIdentifier: missing, and Xcode fills it from $(PRODUCT_BUNDLE_IDENTIFIER), but PRODUCT_BUNDLE_IDENTIFIER has no value (pass --setting PRODUCT_BUNDLE_IDENTIFIER=... or an --xcconfig file that sets it)")
            let filled = try ManifestReader.read(path: path, settings: ["PRODUCT_BUNDLE_IDENTIFIER": "org.example.A"])
            #expect(filled.bundleIdentifier == "org.example.A")
        }
    }

    @Test(arguments: ["", "org/example", "../..", ".hidden", "has space", "org.example."])
    func malformedBundleIdentifiersAreRejected(id: String) throws {
        try withTempDir { dir in
            let path = try write(plist(strings(["CFBundleIdentifier": id, "CFBundleExecutable": "A"])), to: "Info.plist", in: dir)
            let error = #expect(throws: ManifestError.self) { try ManifestReader.read(path: path) }
            #expect(error?.code == .invalidValue)
            #expect(error?.key == "CFBundleIdentifier")
        }
    }

    @Test func manifestJSONKeepsItsKeysAndModeOrder() throws {
        try withTempDir { dir in
            let path = try write(plist(xcodeIdentity + "\n" + array("UIBackgroundModes", ["processing", "audio", "fetch"])
                                       + "\n" + array("BGTaskSchedulerPermittedIdentifiers", ["org.example.Foo.refresh"])),
                                 to: "Foo.app/Info.plist", in: dir)
            let manifest = try ManifestReader.read(path: path, settings: Self.settings)
            let json = try JSONSerialization.jsonObject(with: WireJSON.encoder().encode(manifest)) as? [String: Any] ?? [:]
            for key in ["bundleIdentifier", "executable", "name", "backgroundModes", "bgTaskIdentifiers", "exitsOnSuspend",
                        "externalAccessoryProtocols", "sourcePath"] {
                #expect(json[key] != nil, "missing JSON key \(key)")
            }
            #expect(json["bundleIdentifier"] as? String == "org.example.Foo")
            #expect(json["backgroundModes"] as? [String] == ["processing", "audio", "fetch"])
            #expect(json["bgTaskIdentifiers"] as? [String] == ["org.example.Foo.refresh"])
            #expect(json["exitsOnSuspend"] as? Bool == false)
            let decoded = try WireJSON.decoder().decode(Manifest.self, from: WireJSON.encoder().encode(manifest))
            #expect(decoded == manifest)
        }
    }

    @Test(arguments: [
        ("Foo.app/Info.plist", "Foo"),
        ("Samples/PlainApp/Info.plist", "PlainApp"),
        ("manifests/ProbeApp.plist", "ProbeApp"),
        ("openHAB/openHAB-Info.plist", "openHAB"),
    ])
    func bundleNameComesFromTheFolderOrFile(relative: String, expected: String) throws {
        try withTempDir { dir in
            let path = try write(plist(""), to: relative, in: dir)
            #expect(ManifestReader.defaultBundleName(forManifestAt: path) == expected)
        }
    }
}
