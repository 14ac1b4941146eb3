import Foundation
import Testing
import AppHostProtocol
@testable import AppHostManifest

@Suite("AppBundleLoader")
struct ManifestBundleTests {
    static let settings = ["PRODUCT_BUNDLE_IDENTIFIER": "org.example.PlainApp"]

    static let entitlements = plist("""
        \t<key>aps-environment</key><string>development</string>
        \t<key>com.apple.developer.siri</key><true/>
        """)

    @Test func loadsAnAppFolderWithExecutableAndEntitlements() throws {
        try withTempDir { dir in
            let app = (dir as NSString).appendingPathComponent("PlainApp.app")
            try write(plist(xcodeIdentity), to: "Info.plist", in: app)
            let exe = try writeExecutable("PlainApp", in: app)
            let ent = try write(Self.entitlements, to: "PlainApp.entitlements", in: app)

            let bundle = try AppBundleLoader.load(path: app, settings: Self.settings)
            #expect(bundle.bundlePath == app)
            #expect(bundle.executablePath == exe)
            #expect(bundle.manifest.bundleIdentifier == "org.example.PlainApp")
            #expect(bundle.manifest.executable == "PlainApp")
            #expect(bundle.entitlementKeys == ["aps-environment", "com.apple.developer.siri"])
            #expect(bundle.entitlementsPath == ent)

            // Naming the Info.plist gives the same bundle.
            let viaPlist = try AppBundleLoader.load(path: (app as NSString).appendingPathComponent("Info.plist"), settings: Self.settings)
            #expect(viaPlist == bundle)
        }
    }

    @Test func aManifestOutsideAnAppFolderUsesItsOwnFolder() throws {
        try withTempDir { dir in
            let path = try write(plist(strings(["CFBundleIdentifier": "org.example.tool", "CFBundleExecutable": "tool"])),
                                 to: "Tool/tool.plist", in: dir)
            let exe = try writeExecutable("Tool/tool", in: dir)
            let bundle = try AppBundleLoader.load(path: path)
            #expect(bundle.bundlePath == nil)
            #expect(bundle.executablePath == exe)
            #expect(bundle.entitlementKeys.isEmpty)
            #expect(bundle.entitlementsPath == nil)
        }
    }

    @Test func productDirectoriesAreSearchedInOrderAfterTheBundle() throws {
        try withTempDir { dir in
            let app = (dir as NSString).appendingPathComponent("PlainApp.app")
            try write(plist(xcodeIdentity), to: "Info.plist", in: app)
            let first = (dir as NSString).appendingPathComponent("first")
            let second = (dir as NSString).appendingPathComponent("second")
            try writeExecutable("PlainApp", in: first, mode: 0o644)  // present but not executable: skipped
            let wanted = try writeExecutable("PlainApp", in: second)
            try writeExecutable("PlainApp", in: (dir as NSString).appendingPathComponent("third"))
            let bundle = try AppBundleLoader.load(path: app, settings: Self.settings,
                                                  productDirectories: [first, second, (dir as NSString).appendingPathComponent("third")])
            #expect(bundle.executablePath == wanted)

            // The bundle folder comes first.
            let inBundle = try writeExecutable("PlainApp", in: app)
            #expect(try AppBundleLoader.load(path: app, settings: Self.settings, productDirectories: [second]).executablePath == inBundle)
        }
    }

    @Test func missingExecutableSaysWhereItLooked() throws {
        try withTempDir { dir in
            let app = (dir as NSString).appendingPathComponent("PlainApp.app")
            let plistPath = try write(plist(xcodeIdentity), to: "Info.plist", in: app)
            let a = (dir as NSString).appendingPathComponent("A")
            let b = (dir as NSString).appendingPathComponent("B")
            let error = #expect(throws: ManifestError.self) {
                try AppBundleLoader.load(path: app, settings: Self.settings, productDirectories: [a, b])
            }
            #expect(error?.code == .executableNotFound)
            #expect(error?.description ==
                "\(plistPath): CFBundleExecutable: executable \"PlainApp\" not found (looked in: \(app), \(a), \(b))")
        }
    }

    @Test func anExecutableOutsideTheBundleAndProductsIsRefused() throws {
        try withTempDir { dir in
            // A file beside the bundle, reached by "..", by an absolute path, by a symbolic link.
            let escaper = try writeExecutable("escaper", in: dir)
            let products = (dir as NSString).appendingPathComponent("products")
            try writeExecutable("Tool", in: products)
            func bundle(_ name: String, executable: String) throws -> String {
                let app = (dir as NSString).appendingPathComponent(name + ".app")
                try write(plist(strings(["CFBundleIdentifier": "org.example.\(name)", "CFBundleExecutable": executable])),
                          to: "Info.plist", in: app)
                return app
            }
            let climbing = try bundle("Climb", executable: "../escaper")
            let climbError = #expect(throws: ManifestError.self) {
                try AppBundleLoader.load(path: climbing, productDirectories: [products])
            }
            #expect(climbError?.code == .executableOutsideBundle)
            #expect(climbError?.key == "CFBundleExecutable")
            #expect(climbError?.value == "../escaper")
            #expect(climbError?.description == "\(climbing)/Info.plist: CFBundleExecutable: \"../escaper\" climbs out of its folder (\"..\"): the executable must lie inside the bundle folder or a products directory")

            let absolute = try bundle("Absolute", executable: escaper)
            let absoluteError = #expect(throws: ManifestError.self) {
                try AppBundleLoader.load(path: absolute, productDirectories: [products])
            }
            #expect(absoluteError?.code == .executableOutsideBundle)
            #expect(absoluteError?.value == escaper)
            #expect(absoluteError?.description == "\(absolute)/Info.plist: CFBundleExecutable: executable \"\(escaper)\" is \(escaper): outside the bundle folder and the products directories (\(absolute), \(products)); put the executable inside one of them")

            let linked = try bundle("Linked", executable: "Linked")
            try FileManager.default.createSymbolicLink(atPath: linked + "/Linked", withDestinationPath: escaper)
            let linkError = #expect(throws: ManifestError.self) { try AppBundleLoader.load(path: linked) }
            #expect(linkError?.code == .executableOutsideBundle)
            #expect(linkError?.description.contains("is \(linked)/Linked, which is \(escaper): outside the bundle folder") == true)

            // Inside them, however named, it is found.
            let inProducts = try bundle("Products", executable: products + "/Tool")
            #expect(try AppBundleLoader.load(path: inProducts, productDirectories: [products]).executablePath == products + "/Tool")
            let linkedIn = try bundle("LinkedIn", executable: "Tool")
            try FileManager.default.createSymbolicLink(atPath: linkedIn + "/Tool", withDestinationPath: products + "/Tool")
            // (The path recorded is standardized, which on Linux resolves the link.)
            #expect(try AppBundleLoader.load(path: linkedIn, productDirectories: [products]).executablePath == products + "/Tool")
        }
    }

    @Test func aNonExecutableFileIsReportedAsSuch() throws {
        try withTempDir { dir in
            let app = (dir as NSString).appendingPathComponent("PlainApp.app")
            try write(plist(xcodeIdentity), to: "Info.plist", in: app)
            let exe = try writeExecutable("PlainApp", in: app, mode: 0o644)
            let error = #expect(throws: ManifestError.self) { try AppBundleLoader.load(path: app, settings: Self.settings) }
            #expect(error?.description.hasSuffix("; \(exe) exists but is not executable (chmod +x)") == true)
        }
    }

    @Test func anAppFolderWithoutInfoPlistIsNamed() throws {
        try withTempDir { dir in
            let app = (dir as NSString).appendingPathComponent("Empty.app")
            try FileManager.default.createDirectory(atPath: app, withIntermediateDirectories: true)
            let error = #expect(throws: ManifestError.self) { try AppBundleLoader.load(path: app) }
            #expect(error?.code == .fileNotFound)
            #expect(error?.file == (app as NSString).appendingPathComponent("Info.plist"))
        }
    }

    @Test func malformedEntitlementsAreAnError() throws {
        try withTempDir { dir in
            let app = (dir as NSString).appendingPathComponent("PlainApp.app")
            try write(plist(xcodeIdentity), to: "Info.plist", in: app)
            try writeExecutable("PlainApp", in: app)
            let ent = try write("<plist><dict><key>x</key>", to: "PlainApp.entitlements", in: app)
            let error = #expect(throws: ManifestError.self) { try AppBundleLoader.load(path: app, settings: Self.settings) }
            #expect(error?.code == .malformedPropertyList)
            #expect(error?.file == ent)
        }
    }

    @Test func defaultProductDirectoriesWalkUpToThePackage() throws {
        try withTempDir { dir in
            try write("// swift-tools-version:6.0\n", to: "Package.swift", in: dir)
            let debug = (dir as NSString).appendingPathComponent(".build/debug")
            try FileManager.default.createDirectory(atPath: debug, withIntermediateDirectories: true)
            let app = (dir as NSString).appendingPathComponent("manifests/PlainApp.app")
            try write(plist(""), to: "Info.plist", in: app)

            let dirs = AppBundleLoader.defaultProductDirectories(forBundleAt: app, extra: ["/opt/products", "/opt/products"])
            #expect(dirs == ["/opt/products", debug])  // no .build/release: left out

            let release = (dir as NSString).appendingPathComponent(".build/release")
            try FileManager.default.createDirectory(atPath: release, withIntermediateDirectories: true)
            #expect(AppBundleLoader.defaultProductDirectories(forBundleAt: app, extra: []) == [debug, release])
        }
    }

    @Test func defaultProductDirectoriesWithoutAPackageAreJustTheExtras() throws {
        try withTempDir { dir in
            let app = (dir as NSString).appendingPathComponent("PlainApp.app")
            try write(plist(""), to: "Info.plist", in: app)
            #expect(AppBundleLoader.defaultProductDirectories(forBundleAt: app, extra: ["/x"]) == ["/x"])
        }
    }

    @Test func entitlementsReadBinaryToo() throws {
        try withTempDir { dir in
            let data = try PropertyListSerialization.data(
                fromPropertyList: ["aps-environment": "production", "com.apple.security.application-groups": ["group.x"]],
                format: .binary, options: 0)
            let path = try write(data, to: "App.entitlements", in: dir)
            let entitlements = try Entitlements.read(path: path)
            #expect(entitlements.keys == ["aps-environment", "com.apple.security.application-groups"])
            #expect(entitlements.propertyList()["aps-environment"] as? String == "production")
            #expect(try entitlements.applicationGroups() == ["group.x"])
        }
    }

    @Test func applicationGroupsAreCheckedIdentifiers() throws {
        try withTempDir { (dir: String) throws -> Void in
            func groups(_ value: Any?, settings: [String: String] = [:]) throws(ManifestError) -> [String] {
                let list: [String: Any] = value.map { ["com.apple.security.application-groups": $0] } ?? ["aps-environment": "production"]
                let data = try! PropertyListSerialization.data(fromPropertyList: list, format: .xml, options: 0)
                let path = try! write(data, to: "App.entitlements", in: dir)
                return try Entitlements.read(path: path).applicationGroups(settings: settings)
            }
            #expect(try groups(nil) == [])
            #expect(try groups(["group.b", "group.a-1_x", "group.b"]) == ["group.b", "group.a-1_x"], "file order, no repeats")
            for bad in ["group.", "group./x", "group.../..", "com.example", "group.a b", String(repeating: "g", count: 250) + "group.x"] {
                #expect(throws: ManifestError.self, "\(bad)") { try groups([bad]) }
            }
            #expect { try groups(["group.ok", "../escape"]) } throws: { error in
                let e = error as? ManifestError
                return e?.code == .invalidValue && e?.index == 1 && e?.value == "../escape"
                    && e?.description.contains("com.apple.security.application-groups[1]") == true
            }
            // Build settings, as Xcode fills them in.
            #expect(try groups(["group.$(TEAM).shared"], settings: ["TEAM": "acme"]) == ["group.acme.shared"])
            #expect { try groups(["$(APPLICATION_GROUP_IDENTIFIER)"]) } throws: { error in
                let e = error as? ManifestError
                return e?.code == .unresolvedBuildSetting && e?.value == "APPLICATION_GROUP_IDENTIFIER"
            }
            #expect { try groups("group.x") } throws: { ($0 as? ManifestError)?.code == .wrongType }
            #expect { try groups([1]) } throws: { ($0 as? ManifestError)?.code == .wrongType }
        }
    }
}
