import AppHostSystem
import Foundation
import SystemPackage
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `SpawnSettings.dropsCapabilities`: a child keeps no capability, even when
/// this process (the host) runs as root.
@Suite("Capabilities", .tags(.process), .timeLimit(.minutes(3)))
struct CapabilitiesTests {
    static let none = "0000000000000000"

    @Test func aChildStartsWithNoCapabilities() async throws {
        let report = try await capabilityReport(drops: true)
        #expect(report["capeff"] == Self.none, "\(report)")
        #expect(report["capprm"] == Self.none, "\(report)")
        #expect(report["capinh"] == Self.none, "\(report)")
        #expect(report["capamb"] == Self.none, "\(report)")
        if geteuid() == 0 {
            // Root had CAP_SETPCAP to empty the bounding set with: nothing can come back on exec.
            #expect(report["capbnd"] == Self.none, "\(report)")
        }
    }

    @Test(.enabled(if: geteuid() == 0, "only a host running as root has capabilities to keep"))
    func withoutTheDropARootChildKeepsThem() async throws {
        let report = try await capabilityReport(drops: false)
        #expect(report["capeff"] != Self.none, "\(report)")
    }

    /// The capability lines of `aph-sandbox-check`'s report ("capeff" → hex).
    func capabilityReport(drops: Bool) async throws -> [String: String] {
        let result = try await runToExit(SpawnSettings(
            executablePath: try #require(sandboxCheckPath()), arguments: ["aph-sandbox-check"], dropsCapabilities: drops))
        #expect(result.events == [.exited(.exited(code: 0))], "stdout:\n\(result.stdout)")
        var report: [String: String] = [:]
        for line in result.stdout.split(separator: "\n") where line.hasPrefix("cap") {
            let parts = line.split(separator: " ")
            if parts.count == 2 { report[String(parts[0])] = String(parts[1]) }
        }
        return report
    }
}
