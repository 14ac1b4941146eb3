import Foundation
import Testing
import AppHostProtocol
@testable import AppHostManifest

@Suite("Build setting expansion")
struct ManifestExpansionTests {
    static func expand(_ text: String, _ settings: [String: String]) -> (String, [String]) {
        let result = BuildSettingExpander(settings: settings).expand(text)
        return (result.value, result.unresolved.map(\.name))
    }

    @Test(arguments: [
        ("$(A)", "x y"),
        ("${A}", "x y"),
        ("pre.$(A).post", "pre.x y.post"),
        ("$(A:rfc1034identifier)", "x-y"),
        ("${A:rfc1034identifier}", "x-y"),
        ("$(A:identifier)", "x_y"),
        ("$(A:upper)", "X Y"),
        ("$(A:lower:upper)", "X Y"),
        ("$(B:lower)", "mixed"),
        ("$(C)", "x y.child"),
        ("$(NAME_$(SUFFIX))", "nested"),
        ("$(MISSING:default=fallback)", "fallback"),
        ("$(A:default=unused)", "x y"),
        ("a$()b", "ab"),
        ("no references", "no references"),
        ("cost: $5 (US)", "cost: $5 (US)"),
        ("$(unterminated", "$(unterminated"),
    ])
    func expands(text: String, expected: String) {
        let settings = ["A": "x y", "B": "MiXeD", "C": "$(A).child", "SUFFIX": "X", "NAME_X": "nested"]
        let (value, unresolved) = Self.expand(text, settings)
        #expect(value == expected)
        #expect(unresolved.isEmpty)
    }

    @Test func rfc1034IdentifierKeepsOnlyLettersDigitsHyphensAndDots() {
        let (value, _) = Self.expand("$(P:rfc1034identifier)", ["P": "My App_2.0+beta é"])
        #expect(value == "My-App-2.0-beta--")
    }

    @Test func c99IdentifierPrefixesALeadingDigit() {
        #expect(Self.expand("$(P:c99extidentifier)", ["P": "2-fast app"]).0 == "_2_fast_app")
    }

    @Test func unresolvedReferencesStayAsWritten() {
        let (value, unresolved) = Self.expand("com.$(ORG).${APP:rfc1034identifier}", [:])
        #expect(value == "com.$(ORG).${APP:rfc1034identifier}")
        #expect(unresolved == ["ORG", "APP"])
    }

    @Test func selfReferenceIsUnresolvedNotInfinite() {
        let (value, unresolved) = Self.expand("$(A)", ["A": "x$(A)"])
        #expect(value == "x$(A)")
        #expect(unresolved == ["A"])
    }

    @Test func defaultsComeFromTheBundleNameAndSettingsOverrideThem() throws {
        try withTempDir { dir in
            let path = try write(plist(strings([
                "CFBundleIdentifier": "org.example.$(PRODUCT_NAME:rfc1034identifier)",
                "CFBundleExecutable": "${EXECUTABLE_NAME}",
                "CFBundleName": "$(TARGET_NAME)",
                "CFBundleDisplayName": "$(PRODUCT_NAME)",
            ])), to: "My App.app/Info.plist", in: dir)
            let manifest = try ManifestReader.read(path: path)
            #expect(manifest.bundleIdentifier == "org.example.My-App")
            #expect(manifest.executable == "My App")
            #expect(manifest.name == "My App")
            #expect(manifest.displayName == "My App")

            let renamed = try ManifestReader.read(path: path, settings: ["PRODUCT_NAME": "Shiny"])
            #expect(renamed.bundleIdentifier == "org.example.Shiny")
            #expect(renamed.executable == "Shiny")
            #expect(renamed.name == "My App")

            let explicit = try ManifestReader.read(path: path, settings: ["EXECUTABLE_NAME": "bin/run"], bundleName: "Other")
            #expect(explicit.executable == "bin/run")
            #expect(explicit.bundleIdentifier == "org.example.Other")
        }
    }

    @Test func unresolvedBundleIdentifierNamesFileKeyAndVariable() throws {
        try withTempDir { dir in
            let path = try write(plist(xcodeIdentity), to: "Foo.app/Info.plist", in: dir)
            let error = #expect(throws: ManifestError.self) { try ManifestReader.read(path: path) }
            #expect(error?.code == .unresolvedBuildSetting)
            #expect(error?.value == "PRODUCT_BUNDLE_IDENTIFIER")
            #expect(error?.description ==
                "\(path): CFBundleIdentifier: unresolved build setting $(PRODUCT_BUNDLE_IDENTIFIER) (pass --setting PRODUCT_BUNDLE_IDENTIFIER=...)")
        }
    }

    @Test func unresolvedExecutableAndBGTaskIdentifiersAreErrors() throws {
        try withTempDir { dir in
            let exe = try write(plist(strings(["CFBundleIdentifier": "a.b", "CFBundleExecutable": "${APP_EXE}"])),
                                to: "exe/Info.plist", in: dir)
            let exeError = #expect(throws: ManifestError.self) { try ManifestReader.read(path: exe) }
            #expect(exeError?.description == "\(exe): CFBundleExecutable: unresolved build setting ${APP_EXE} (pass --setting APP_EXE=...)")

            let task = try write(plist(strings(["CFBundleIdentifier": "a.b", "CFBundleExecutable": "x"]) + "\n"
                                       + array("BGTaskSchedulerPermittedIdentifiers", ["a.b.refresh", "$(TASK_PREFIX).sync"])),
                                 to: "task/Info.plist", in: dir)
            let taskError = #expect(throws: ManifestError.self) { try ManifestReader.read(path: task) }
            #expect(taskError?.key == "BGTaskSchedulerPermittedIdentifiers")
            #expect(taskError?.index == 1)
            #expect(taskError?.description.hasSuffix("BGTaskSchedulerPermittedIdentifiers[1]: unresolved build setting $(TASK_PREFIX) (pass --setting TASK_PREFIX=...)") == true)
            #expect(try ManifestReader.read(path: task, settings: ["TASK_PREFIX": "a.b"]).bgTaskIdentifiers == ["a.b.refresh", "a.b.sync"])
        }
    }

    @Test func unknownOperatorInARequiredKeyIsAnError() throws {
        try withTempDir { dir in
            let path = try write(plist(strings(["CFBundleIdentifier": "$(PRODUCT_NAME:shout)", "CFBundleExecutable": "x"])),
                                 to: "Info.plist", in: dir)
            let error = #expect(throws: ManifestError.self) { try ManifestReader.read(path: path) }
            #expect(error?.code == .unknownBuildSettingOperator)
            #expect(error?.value == "shout")
        }
    }

    @Test func optionalKeysKeepUnresolvedReferencesAsWritten() throws {
        try withTempDir { dir in
            let path = try write(plist(strings([
                "CFBundleIdentifier": "org.example.x", "CFBundleExecutable": "x",
                "CFBundleName": "$(CUSTOM_NAME)", "CFBundleDisplayName": "${BUNDLE_DISPLAY_NAME} ($(PRODUCT_NAME))",
            ])), to: "X.app/Info.plist", in: dir)
            let manifest = try ManifestReader.read(path: path)
            #expect(manifest.name == "$(CUSTOM_NAME)")
            #expect(manifest.displayName == "${BUNDLE_DISPLAY_NAME} (X)")
        }
    }
}
