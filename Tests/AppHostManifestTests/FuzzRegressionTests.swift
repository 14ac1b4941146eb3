import Foundation
import Testing
import AppHostProtocol
@testable import AppHostManifest

/// `Fuzz/regressions/<target>/`: inputs that once crashed a fuzz harness, kept as they
/// were found (scripts/fuzz.sh also seeds the fuzzers with them).
func fuzzRegressions(_ target: String) -> [String] {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let dir = root.appendingPathComponent("Fuzz/regressions/\(target)").path
    let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
    return names.sorted().map { (dir as NSString).appendingPathComponent($0) }
}

@Suite("Fuzz regressions")
struct FuzzRegressionTests {
    @Test func theFoundCrashInputsAreKept() {
        #expect(!fuzzRegressions("manifest-binary").isEmpty)
    }

    /// Each input gives a manifest or a ManifestError, and the lenient reader's first
    /// problem is the strict reader's error, or its manifest the strict one (what the
    /// harness checks).
    @Test(arguments: fuzzRegressions("manifest-xml") + fuzzRegressions("manifest-binary"))
    func manifestInputsAreReadOrRefused(path: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let display = (path as NSString).lastPathComponent
        var strictError: ManifestError?
        var strict: Manifest?
        do {
            let raw = try ManifestReader.readRaw(data: data, displayPath: display)
            strict = try ManifestReader.resolve(raw, bundleName: "Fuzz")
        } catch {
            strictError = error
        }
        let lenient = ManifestReader.readLenient(data: data, displayPath: display, bundleName: "Fuzz")
        #expect(lenient.problems.first == strictError)
        if let strict { #expect(lenient.manifest == strict, "lint reads the manifest install reads") }
    }
}
