import Foundation
import Testing
import AppHostProtocol
@testable import AppHostManifest

/// The Xcode-like project in Tests/Fixtures/XcodeProject.
let xcodeProjectFixture = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/XcodeProject").standardizedFileURL.path

@Suite("XCConfig")
struct XCConfigTests {
    private func load(_ files: [String], _ conditions: XCConfig.Conditions = .init()) throws(XCConfigError) -> XCConfigSettings {
        try XCConfig.load(files: files, conditions: conditions)
    }

    @Test func theFixtureProjectReadsAsXcodeReadsIt() throws {
        let base = xcodeProjectFixture + "/Config/Base.xcconfig"
        let device = try load([base])
        #expect(device.settings["PRODUCT_NAME"] == "Walker")
        #expect(device.settings["PRODUCT_BUNDLE_IDENTIFIER"] == "com.example.walker")
        #expect(device.settings["MARKETING_VERSION"] == "2.3", "a ';' ending the line is dropped")
        #expect(device.settings["WALKER_API_URL"] == "https:/$()/api.example.com/v2", "the comment after it is cut, $() is kept for expansion")
        #expect(device.settings["INFOPLIST_KEY_CFBundleDisplayName"] == "Walker$(DISPLAY_SUFFIX)", "references are left for the manifest")
        #expect(device.settings["DISPLAY_SUFFIX"] == "", "[sdk=iphonesimulator*] does not match iphoneos")
        #expect(device.settings["SWIFT_ACTIVE_COMPILATION_CONDITIONS"] == " WALKER DEBUG", "$(inherited) across the #include")
        #expect(device.settings["CODE_SIGN_ENTITLEMENTS"] == "Walker/Supporting Files/Walker.entitlements")
        #expect(device.files == [base, xcodeProjectFixture + "/Config/Debug.xcconfig"], "Local.xcconfig is #include? and absent")
        // [config=Debug] is skipped without a configuration, and said so once.
        #expect(device.warnings.count == 1)
        #expect(device.warnings.first?.description.hasPrefix(xcodeProjectFixture + "/Config/Debug.xcconfig:8: settings conditioned on [config=...] were skipped") == true,
                "\(device.warnings)")

        let debugSimulator = try load([base], .init(sdk: "iphonesimulator17.2", config: "Debug"))
        #expect(debugSimulator.settings["PRODUCT_BUNDLE_IDENTIFIER"] == "com.example.walker.debug")
        #expect(debugSimulator.settings["DISPLAY_SUFFIX"] == "-Sim")
        #expect(debugSimulator.warnings.isEmpty)
        #expect(try load([base], .init(config: "Release")).settings["PRODUCT_BUNDLE_IDENTIFIER"] == "com.example.walker")
    }

    @Test func conditionsComeFromTheSettingsXcodeNames() {
        #expect(XCConfig.Conditions(settings: [:]) == .init(sdk: "iphoneos", arch: "arm64", config: nil))
        #expect(XCConfig.Conditions(settings: ["SDK_NAME": "iphonesimulator", "ARCHS": "x86_64 arm64", "CONFIGURATION": "Release"])
                == .init(sdk: "iphonesimulator", arch: "x86_64", config: "Release"))
        #expect(XCConfig.Conditions(settings: ["CURRENT_ARCH": "arm64e", "ARCHS": "x86_64"]).arch == "arm64e")
    }

    @Test func assignmentsConditionsAndReferences() throws {
        try withTempDir { dir in
            let file = try write("""
                \u{FEFF}// leading BOM and a comment
                A = one
                A = $(inherited) two\r
                B = ${inherited}x
                B = $(B)y;
                C[sdk=iphoneos*][arch=arm64] = both
                C[sdk=iphoneos*,arch=x86_64] = not this
                D[arch=*] = $(A)
                E =
                  F   =   spaced out   // trailing comment
                G[variant=profile] = skipped
                """, to: "A.xcconfig", in: dir)
            let r = try load([file])
            #expect(r.settings["A"] == "one two")
            #expect(r.settings["B"] == "xy")
            #expect(r.settings["C"] == "both")
            #expect(r.settings["D"] == "$(A)")
            #expect(r.settings["E"] == "")
            #expect(r.settings["F"] == "spaced out")
            #expect(r.settings["G"] == nil)
            #expect(r.warnings.map(\.description) == ["\(file):11: G[variant=profile]: AppHost evaluates sdk, arch and config conditions only; this setting is skipped"])
        }
    }

    @Test func laterFilesSeeEarlierOnesAsInherited() throws {
        try withTempDir { dir in
            let project = try write("FLAGS = -project\nID = org.example.app\n", to: "Project.xcconfig", in: dir)
            let target = try write("FLAGS = $(inherited) -target\n", to: "Target.xcconfig", in: dir)
            let r = try load([project, target])
            #expect(r.settings == ["FLAGS": "-project -target", "ID": "org.example.app"])
        }
    }

    @Test func includesAreRelativeToTheIncludingFileAndOptionalOnesMaySkip() throws {
        try withTempDir { dir in
            try write("SHARED = yes\n", to: "Config/Shared/Common.xcconfig", in: dir)
            let app = try write("""
                #include "Shared/Common.xcconfig"
                #include? "Shared/Missing.xcconfig"
                #include? "<DEVELOPER_DIR>/Makefiles/CoreOS/Xcode/BSD.xcconfig"
                OWN = $(SHARED)
                """, to: "Config/App.xcconfig", in: dir)
            let r = try load([app])
            #expect(r.settings == ["SHARED": "yes", "OWN": "$(SHARED)"])
            #expect(r.files == [app, dir + "/Config/Shared/Common.xcconfig"])
        }
    }

    @Test(arguments: [
        ("#include \"Nope.xcconfig\"", "A.xcconfig:1: #include \"@DIR@/Nope.xcconfig\": file not found"),
        ("#include Nope.xcconfig", "A.xcconfig:1: #include needs a file name in double quotes, e.g. #include \"Base.xcconfig\""),
        ("#import \"B.xcconfig\"", "A.xcconfig:1: unknown directive \"#import \"B.xcconfig\"\" (an .xcconfig file knows #include \"file\" and #include? \"file\")"),
        ("#include \"<DEVELOPER_DIR>/x.xcconfig\"", "A.xcconfig:1: #include \"<DEVELOPER_DIR>/x.xcconfig\" names a file inside Xcode, which is not on this host (use #include? to skip it where it is missing)"),
        ("OK = 1\nJUST_A_NAME", "A.xcconfig:2: expected SETTING = value, #include \"file\" or a // comment; found \"JUST_A_NAME\""),
        ("9LIVES = 1", "A.xcconfig:1: \"9LIVES\" is not a build setting name (letters, digits and _, not starting with a digit)"),
        ("A B = 1", "A.xcconfig:1: \"A B\" is not a build setting name (letters, digits and _, not starting with a digit)"),
        ("A[sdk] = 1", "A.xcconfig:1: A: condition \"[sdk]\" is not key=pattern (sdk, arch or config)"),
        ("A[sdk=iphoneos = 1", "A.xcconfig:1: A: a condition is written [key=pattern], e.g. A[sdk=iphoneos*]"),
    ])
    func problemsNameTheFileAndLine(text: String, expected: String) throws {
        try withTempDir { dir in
            let file = try write(text + "\n", to: "A.xcconfig", in: dir)
            let error = #expect(throws: XCConfigError.self) { try load([file]) }
            #expect(error?.description == dir + "/" + expected.replacingOccurrences(of: "@DIR@", with: dir), "\(String(describing: error))")
        }
    }

    @Test func aMissingOrUnreadableFileIsNamed() throws {
        try withTempDir { dir in
            let missing = dir + "/Nope.xcconfig"
            #expect(throws: XCConfigError(file: missing, detail: "file not found")) { try load([missing]) }
            #expect(throws: XCConfigError(file: dir, detail: "\(dir) is a directory, not an .xcconfig file")) { try load([dir]) }
            let binary = try write(Data([0x41, 0x20, 0x3d, 0x20, 0xff, 0xfe, 0x0a]), to: "Bin.xcconfig", in: dir)
            #expect(throws: XCConfigError(file: binary, detail: "is not UTF-8 text")) { try load([binary]) }
        }
    }

    @Test func includeCyclesAreNamedWithTheirChain() throws {
        try withTempDir { dir in
            try write("#include \"B.xcconfig\"\n", to: "A.xcconfig", in: dir)
            try write("X = 1\n#include \"C.xcconfig\"\n", to: "B.xcconfig", in: dir)
            try write("#include \"A.xcconfig\"\n", to: "C.xcconfig", in: dir)
            let error = #expect(throws: XCConfigError.self) { try load([dir + "/A.xcconfig"]) }
            #expect(error?.description == "\(dir)/C.xcconfig:1: #include \"A.xcconfig\" makes an include cycle (A.xcconfig → B.xcconfig → C.xcconfig → A.xcconfig)")

            try write("#include \"Self.xcconfig\"\n", to: "Self.xcconfig", in: dir)
            let own = #expect(throws: XCConfigError.self) { try load([dir + "/Self.xcconfig"]) }
            #expect(own?.detail.contains("(Self.xcconfig → Self.xcconfig)") == true, "\(String(describing: own))")
        }
    }

    @Test func includeDepthIsBounded() throws {
        try withTempDir { dir in
            // L1 includes L2 ... includes Ln: depth n.
            func chain(_ n: Int, prefix: String) throws -> String {
                for i in 1...n {
                    let next = i < n ? "#include \"\(prefix)\(i + 1).xcconfig\"\n" : ""
                    try write("V\(i) = \(i)\n" + next, to: "\(prefix)\(i).xcconfig", in: dir)
                }
                return dir + "/\(prefix)1.xcconfig"
            }
            let deepest = try load([try chain(XCConfig.maximumIncludeDepth, prefix: "ok")])
            #expect(deepest.settings["V\(XCConfig.maximumIncludeDepth)"] == "\(XCConfig.maximumIncludeDepth)")
            let error = #expect(throws: XCConfigError.self) { try load([try chain(XCConfig.maximumIncludeDepth + 1, prefix: "deep")]) }
            #expect(error?.description == "\(dir)/deep\(XCConfig.maximumIncludeDepth).xcconfig:2: #include \"deep\(XCConfig.maximumIncludeDepth + 1).xcconfig\" nests includes more than \(XCConfig.maximumIncludeDepth) deep")
        }
    }

    @Test func filesReadAreBoundedEvenWithoutACycle() throws {
        try withTempDir { dir in
            // Each level includes the next twice: 2^n reads from n small files.
            let levels = 10
            for i in 0..<levels {
                let next = "#include \"F\(i + 1).xcconfig\"\n"
                try write(i < levels - 1 ? next + next : "LEAF = 1\n", to: "F\(i).xcconfig", in: dir)
            }
            let error = #expect(throws: XCConfigError.self) { try load([dir + "/F0.xcconfig"]) }
            #expect(error?.detail == "more than \(XCConfig.maximumFilesRead) files read through #include (a file included from several places counts each time); not read further",
                    "\(String(describing: error))")
            #expect(error?.line != nil, "the #include that went over is named")
        }
    }

    @Test func fileSizeIsBounded() throws {
        try withTempDir { dir in
            let limit = XCConfig.maximumFileSize
            let line = "A = " + String(repeating: "x", count: 95) + "\n"  // 100 bytes
            var text = String(repeating: line, count: limit / 100)
            text += String(repeating: "/", count: limit - text.utf8.count)
            let fits = try write(text, to: "Fits.xcconfig", in: dir)
            #expect(try load([fits]).settings["A"]?.count == 95)
            let over = try write(text + "\n", to: "Over.xcconfig", in: dir)
            #expect(throws: XCConfigError(file: over, detail: "\(over) is \(limit + 1) bytes, over the limit of \(limit) bytes (1 MiB) for an .xcconfig file; not read")) {
                try load([over])
            }
            // Through an #include, the including line is named.
            let includer = try write("#include \"Over.xcconfig\"\n", to: "Inc.xcconfig", in: dir)
            let error = #expect(throws: XCConfigError.self) { try load([includer]) }
            #expect(error?.file == includer && error?.line == 1, "\(String(describing: error))")
        }
    }

    @Test func valuesGrowingThroughInheritedAreBounded() throws {
        try withTempDir { dir in
            // Each line doubles A: 16 chars × 2^12 = 65536 fits, one more doubling does not.
            let doubling = String(repeating: "A = $(inherited)$(inherited)\n", count: 12)
            let fits = try write("A = 0123456789abcdef\n" + doubling, to: "Fits.xcconfig", in: dir)
            #expect(try load([fits]).settings["A"]?.count == XCConfig.maximumValueLength)
            let over = try write("A = 0123456789abcdef\n" + doubling + "A = $(inherited)$(inherited)\n", to: "Over.xcconfig", in: dir)
            #expect(throws: XCConfigError(file: over, line: 14, detail: "A: the value grows past \(XCConfig.maximumValueLength) characters with $(inherited); not read further")) {
                try load([over])
            }
        }
    }
}
