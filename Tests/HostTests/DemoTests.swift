import Foundation
import TestSupport
import Testing

/// `apphost demo` (README's first command runs it): every act reaches its end and shows
/// what it is there to show.
@Suite("apphost demo", .tags(.process, .network), .timeLimit(.minutes(3)),
       .enabled(if: cliBuilt && transferDaemonBuilt,
                "apphost, ProbeApp or apphost-transferd not built: run `swift build` first (scripts/test.sh does)"))
struct DemoTests {
    @Test(.tags(.slow)) func everyActRunsToItsEnd() async throws {
        let dir = try TempDir("demo")
        defer { dir.remove() }
        let run = await apphost(["demo", "--state-dir", dir.path + "/demo", "--manifests", packageRoot + "/manifests"])
        #expect(run.status == 0, "stderr: \(run.stderr)")
        let out = run.stdout
        #expect(!out.contains("demo failed"), "\(out)")
        #expect(!out.contains("gave up waiting"), "\(out)")
        // Act 1: a real stop, seen in /proc.
        #expect(out.contains("state T"))
        // Act 2: the watchdog on the virtual clock.
        #expect(out.contains("0x8badf00d"))
        // Act 4: the download resumed with Range after the drop and reached the relaunched app whole.
        #expect(out.contains("Range: bytes=3145728-"), "\(out)")
        #expect(out.contains("byte for byte the server's file"), "\(out)")
        #expect(out.contains("launched in the background for handleEventsForBackgroundURLSession"), "\(out)")
        // Act 5: the privacy check names the leaky bank's balance and passes the others.
        #expect(out.contains("FAIL com.example.bank.leaky"))
        #expect(out.contains("PASS com.example.bank.cover"))
        #expect(out.contains("\"$12,345.67\" is readable"))
    }
}
