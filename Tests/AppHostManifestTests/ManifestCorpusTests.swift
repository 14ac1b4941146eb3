import Foundation
import Testing
import AppHostProtocol
@testable import AppHostManifest

/// The real-world corpus: `$APPHOST_CORPUS`, or `../shared/corpus` beside the checkout.
let corpusDirectory: String = {
    if let env = ProcessInfo.processInfo.environment["APPHOST_CORPUS"], !env.isEmpty { return env }
    let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return packageRoot.appendingPathComponent("../shared/corpus").standardizedFileURL.path
}()

/// Whether the corpus and its index are there.
let corpusAvailable = FileManager.default.fileExists(atPath: (corpusDirectory as NSString).appendingPathComponent("INDEX.tsv"))

/// One row of `INDEX.tsv`: kind, local_file, repo, path, commit, expected_bundle_id,
/// expected_UIBackgroundModes, notes. `-` means absent.
struct CorpusRow: Sendable, CustomTestStringConvertible {
    var kind: String
    var file: String
    var bundleIdentifier: String?
    var modes: [String]?
    /// `key=value` pairs after the ` | ` in the notes (`exe`, `name`, `display`, `BGTask`, …).
    var facts: [String: String]
    var notes: String

    var testDescription: String { file }
    var path: String { (corpusDirectory as NSString).appendingPathComponent(file) }

    /// A fact from the notes: nil if not given, `.some(nil)` if given as `-` (absent).
    func fact(_ key: String) -> String?? {
        guard let value = facts[key] else { return nil }
        return .some(value == "-" ? nil : value)
    }

    static func load() -> [CorpusRow] {
        guard corpusAvailable,
              let text = try? String(contentsOfFile: (corpusDirectory as NSString).appendingPathComponent("INDEX.tsv"), encoding: .utf8)
        else { return [] }
        return text.split(whereSeparator: \.isNewline).dropFirst().compactMap { line in
            let columns = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard columns.count >= 8 else { return nil }
            let absent = { (s: String) in s == "-" ? nil : s }
            var facts: [String: String] = [:]
            if let bar = columns[7].range(of: " | ", options: .backwards) {
                for pair in columns[7][bar.upperBound...].components(separatedBy: "; ") {
                    let kv = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                    if kv.count == 2 { facts[kv[0]] = kv[1] }
                }
            }
            return CorpusRow(kind: columns[0], file: columns[1], bundleIdentifier: absent(columns[5]),
                             modes: absent(columns[6]).map { $0.components(separatedBy: ",") }, facts: facts, notes: columns[7])
        }
    }
}

let corpusRows = CorpusRow.load()

@Suite("Manifest corpus conformance")
struct ManifestCorpusTests {
    static let skipReason: Comment = "needs ../shared/corpus beside the checkout (or APPHOST_CORPUS)"

    @Test(.enabled(if: corpusAvailable, skipReason))
    func everyCorpusFileHasAnIndexRowAndEveryRowAFile() throws {
        for kind in ["plists", "entitlements"] {
            let folder = (corpusDirectory as NSString).appendingPathComponent(kind)
            let files = Set(try FileManager.default.contentsOfDirectory(atPath: folder).map { "\(kind)/\($0)" })
            let indexed = Set(corpusRows.filter { $0.kind == kind }.map(\.file))
            #expect(!files.isEmpty)
            #expect(files.subtracting(indexed).isEmpty, "\(kind) files with no INDEX.tsv row: \(files.subtracting(indexed).sorted())")
            #expect(indexed.subtracting(files).isEmpty, "INDEX.tsv \(kind) rows with no file: \(indexed.subtracting(files).sorted())")
        }
    }

    @Test(.enabled(if: corpusAvailable, skipReason), arguments: corpusRows.filter { $0.kind == "plists" })
    func plistReadsAsIndexed(row: CorpusRow) throws {
        let raw = try ManifestReader.readRaw(path: row.path)
        #expect(raw.rawBundleIdentifier == row.bundleIdentifier)
        #expect(raw.backgroundModes.map(\.rawValue) == row.modes ?? [])
        #expect(raw.declaresBackgroundModes == (row.modes != nil))
        if let exe = row.fact("exe") { #expect(raw.rawExecutable == exe) }
        if let name = row.fact("name") { #expect(raw.rawName == name) }
        if let display = row.fact("display") { #expect(raw.rawDisplayName == display) }
        if let ids = row.fact("BGTask") { #expect(raw.rawBGTaskIdentifiers == (ids?.components(separatedBy: ",") ?? [])) }
        if let exits = row.fact("UIApplicationExitsOnSuspend") { #expect(raw.exitsOnSuspend == exits.map { $0 == "true" }) }
        if row.notes.contains("BINARY") { #expect(raw.format == .binary) }

        // The full read: references expanded from settings and defaults; since issue 19 a
        // missing identity key takes the reference Xcode puts there (GENERATE_INFOPLIST_FILE).
        let settings = ["PRODUCT_BUNDLE_IDENTIFIER": "org.example.corpus"]
        let manifest = try ManifestReader.read(path: row.path, settings: settings, bundleName: "Corpus")
        let fromSetting = row.bundleIdentifier == nil || row.bundleIdentifier == "$(PRODUCT_BUNDLE_IDENTIFIER)"
        #expect(manifest.bundleIdentifier == (fromSetting ? "org.example.corpus" : row.bundleIdentifier))
        #expect(manifest.backgroundModes == raw.backgroundModes)
        #expect(!manifest.executable.contains("$"))
        if raw.rawExecutable == nil { #expect(manifest.executable == "Corpus", "$(EXECUTABLE_NAME) defaults to the bundle's name") }
        #expect(manifest.bgTaskIdentifiers.count == raw.rawBGTaskIdentifiers.count)
        #expect(manifest.bgTaskIdentifiers.allSatisfy { !$0.contains("$") })
        if fromSetting {
            // Without the setting, the error names it.
            let error = #expect(throws: ManifestError.self) { try ManifestReader.read(path: row.path, bundleName: "Corpus") }
            #expect(error?.key == "CFBundleIdentifier" && error?.value == "PRODUCT_BUNDLE_IDENTIFIER", "\(String(describing: error))")
        }
        #expect(!AppBundleLoader.isEntitlementsFile(row.path), "an Info.plist is not taken for entitlements")
    }

    @Test(.enabled(if: corpusAvailable, skipReason), arguments: corpusRows.filter { $0.kind == "entitlements" })
    func entitlementsReadAsIndexed(row: CorpusRow) throws {
        let entitlements = try Entitlements.read(path: row.path)
        #expect(AppBundleLoader.isEntitlementsFile(row.path))
        // Notes: "aps-environment=development; com.apple.developer keys: a,b,c"
        let parts = row.notes.components(separatedBy: "; ")
        if let aps = parts.first(where: { $0.hasPrefix("aps-environment=") }) {
            #expect(entitlements.propertyList()["aps-environment"] as? String == String(aps.dropFirst("aps-environment=".count)))
        }
        if let developer = parts.first(where: { $0.hasPrefix("com.apple.developer keys: ") }) {
            let expected = developer.dropFirst("com.apple.developer keys: ".count).components(separatedBy: ",")
            #expect(entitlements.keys.filter { $0.hasPrefix("com.apple.developer.") } == expected.sorted())
        }
    }

    @Test(.enabled(if: corpusAvailable, skipReason))
    func aCorpusManifestLoadsAsAnAppBundle() throws {
        try withTempDir { dir in
            let app = (dir as NSString).appendingPathComponent("DeltaChat.app")
            try FileManager.default.createDirectory(atPath: app, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: (corpusDirectory as NSString).appendingPathComponent("plists/deltachat.plist"),
                                             toPath: (app as NSString).appendingPathComponent("Info.plist"))
            try FileManager.default.copyItem(atPath: (corpusDirectory as NSString).appendingPathComponent("entitlements/element-riot.entitlements"),
                                             toPath: (app as NSString).appendingPathComponent("DeltaChat.entitlements"))
            let exe = try writeExecutable("DeltaChat", in: app)
            let bundle = try AppBundleLoader.load(path: app, settings: ["PRODUCT_BUNDLE_IDENTIFIER": "chat.delta"])
            #expect(bundle.manifest.bundleIdentifier == "chat.delta")
            #expect(bundle.manifest.name == "DeltaChat")
            #expect(bundle.manifest.displayName == "Delta Chat")
            #expect(bundle.executablePath == exe)
            #expect(bundle.entitlementKeys.contains("aps-environment"))
        }
    }
}
