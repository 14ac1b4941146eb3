import Foundation
import TestSupport
import Testing

/// On CI (`CI=true`) every sample product must be built: a missing one fails the run
/// here, by name, instead of quietly skipping the suites that launch it.
@Suite("Sample products")
struct SampleProductTests {
    @Test(.enabled(if: runningInCI, "not a CI run (CI=true): suites skip what is not built"))
    func everySampleProductIsBuiltOnCI() {
        for name in sampleProducts {
            let path = productsDirectory + "/" + name
            #expect(FileManager.default.isExecutableFile(atPath: path),
                    "CI=true and \(name) is not built at \(path): run `swift build` before `swift test`")
        }
    }
}
