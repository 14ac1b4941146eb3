import AppHostProtocol
import AppHostSystem
import Foundation
@testable import Scenarios
import Snapshots
import TestSupport
import Testing

/// A generated page opened in a real browser: headless Chromium takes a screenshot, and
/// the lanes' state colours must be in it. Without /usr/bin/chromium the test is skipped
/// (scripts/setup.sh installs it), except under CI=true, where it fails.
@Suite("HTML report in a browser", .tags(.process), .timeLimit(.minutes(2)))
struct HTMLReportBrowserTests {
    static let chromium = "/usr/bin/chromium"
    static let installed = FileManager.default.isExecutableFile(atPath: chromium)
    static let onCI = ProcessInfo.processInfo.environment["CI"] == "true"

    /// The rows of `image` with at least `run` pixels of `colour`, grouped into bands of
    /// consecutive rows: one band per lane showing the colour.
    static func bands(of colour: String, in image: RGBAImage, run: Int) -> [ClosedRange<Int>] {
        let hex = Array(colour.dropFirst())
        let rgb = stride(from: 0, to: 6, by: 2).map { UInt8(String(hex[$0..<$0 + 2]), radix: 16) ?? 0 }
        var rows: [Int] = []
        for y in 0..<image.height {
            var count = 0
            for x in 0..<image.width {
                let i = (y * image.width + x) * 4
                // Within 2 of the colour: band interiors are drawn exactly, edges are blended.
                if abs(Int(image.pixels[i]) - Int(rgb[0])) <= 2, abs(Int(image.pixels[i + 1]) - Int(rgb[1])) <= 2,
                   abs(Int(image.pixels[i + 2]) - Int(rgb[2])) <= 2 {
                    count += 1
                }
            }
            if count >= run { rows.append(y) }
        }
        var groups: [ClosedRange<Int>] = []
        for y in rows {
            if let last = groups.last, last.upperBound == y - 1 { groups[groups.count - 1] = last.lowerBound...y } else { groups.append(y...y) }
        }
        return groups
    }

    @Test(.enabled(if: installed || onCI, "no /usr/bin/chromium: the report is not checked in a browser (scripts/setup.sh installs it)"))
    func theScreenshotOfAScenarioPageShowsItsLanes() async throws {
        try #require(Self.installed, "CI=true and no \(Self.chromium): CI must install chromium (scripts/setup.sh)")
        let dir = try TempDir("browser")
        defer { dir.remove() }
        let result = ScenarioResult.failingTwoApps()
        try HTMLReport.write([result], to: dir.path + "/report")
        let page = dir.path + "/report/" + HTMLReport.pageNames([result])[0]
        let shot = dir.path + "/shot.png"
        let run = try await runToExit(
            Self.chromium,
            ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--user-data-dir=\(dir.path)/profile",
             "--screenshot=\(shot)", "--window-size=1200,800", URL(fileURLWithPath: page).absoluteString],
            in: dir.path, environment: ["HOME": dir.path, "PATH": "/usr/bin:/bin"])
        let status = run.status
        #expect(status == .exited(code: 0), "chromium ended with \(status.map { "\($0)" } ?? "no status"): \(run.stderr.suffix(2_000))")

        let image = try PNGCodec.decode(Data(contentsOf: URL(fileURLWithPath: shot)))
        #expect(image.width == 1200 && image.height == 800)
        // Both apps are in the background for long stretches: a band in each lane.
        let background = Self.bands(of: AppState.background.colour, in: image, run: 100)
        #expect(background.count == 2, "background bands at rows \(background)")
        for band in background { #expect(band.count >= 12, "a lane's band is \(band.count) rows high") }
        // Mail is suspended from 12.1 s to 20 s, active at first and at the end.
        #expect(Self.bands(of: AppState.suspended.colour, in: image, run: 60).count == 1)
        #expect(Self.bands(of: AppState.active.colour, in: image, run: 15).count >= 1)
        // The failure's red line crosses the lanes.
        #expect(!Self.bands(of: "#d50000", in: image, run: 1).isEmpty)
    }
}
