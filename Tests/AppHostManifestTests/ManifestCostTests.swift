import Foundation
import Testing
import AppHostProtocol
@testable import AppHostManifest

/// What a hostile Info.plist can make the readers spend: bounded by its length. Before
/// the fixes, a 20 KB `CFBundleIdentifier` of nested references took minutes and over a
/// gigabyte in `apphost install`, and `apphost lint` of 2,000 unresolved task ids took
/// seconds (quadratic). The inputs are kept in Fuzz/regressions/manifest-xml.
@Suite("Manifest reading cost", .timeLimit(.minutes(3)))
struct ManifestCostTests {
    /// Seconds `body` takes.
    func seconds(_ body: () -> Void) -> Double {
        let d = ContinuousClock().measure(body)
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    @Test func referencesNestedPastTheLimitAreReportedNotFollowed() {
        let expander = BuildSettingExpander(settings: ["A": "x"])
        // 16 levels resolve; the 17th is kept as written and reported.
        let ok = String(repeating: "$(A", count: 15) + "$(A)" + String(repeating: ")", count: 15)
        #expect(expander.expand(ok).unresolved.map(\.problem).allSatisfy { $0 == .undefined })
        let deep = String(repeating: "$(", count: 17) + "A" + String(repeating: ")", count: 17)
        let result = expander.expand(deep)
        #expect(result.value == deep)
        #expect(result.unresolved.contains { $0.problem == .nestedTooDeep && $0.reference == "$(A)" })
    }

    @Test func aDeeplyNestedIdentifierIsAnErrorInLinearTime() throws {
        let n = 5000
        let id = String(repeating: "$(", count: n) + String(repeating: ")", count: n)
        let data = Data(plist(strings(["CFBundleIdentifier": id, "CFBundleExecutable": "x"])).utf8)
        var error: ManifestError?
        let took = seconds {
            do {
                _ = try ManifestReader.resolve(ManifestReader.readRaw(data: data, displayPath: "Deep.app/Info.plist"), bundleName: "Deep")
            } catch let e { error = e as? ManifestError }
        }
        #expect(took < 5, "took \(took) s")
        #expect(error?.code == .unresolvedBuildSetting)
        #expect(error?.detail.hasPrefix("build setting references nested more than 16 deep at $($($(") == true, "\(String(describing: error))")
        #expect((error?.detail.count ?? 0) < 200, "the message quotes at most 80 characters of the file")
    }

    @Test func unbalancedReferencesAreLinear() {
        let text = String(repeating: "$(", count: 30_000)
        var value = ""
        let took = seconds { value = BuildSettingExpander(settings: [:]).expand(text).value }
        #expect(took < 5, "took \(took) s")
        #expect(value == text)
    }

    @Test func lintReportsThousandsOfUnresolvedTaskIdsInOnePass() {
        let n = 3000
        let body = strings(["CFBundleIdentifier": "com.example.a", "CFBundleExecutable": "a"]) + "\n"
            + array("BGTaskSchedulerPermittedIdentifiers", (0..<n).map { "$(X\($0))" })
        let data = Data(plist(body).utf8)
        var lenient: LenientManifest?
        let took = seconds { lenient = ManifestReader.readLenient(data: data, displayPath: "Many.app/Info.plist") }
        #expect(took < 5, "took \(took) s")
        #expect(lenient?.problems.count == n)
        #expect(lenient?.problems.last?.index == n - 1)
        #expect(lenient?.manifest?.bgTaskIdentifiers.count == n)
        #expect(lenient?.manifest?.bgTaskIdentifiers[7] == "$(X7)")
    }
}
