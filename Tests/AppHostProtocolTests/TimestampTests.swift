@testable import AppHostProtocol
import Foundation
import Testing

/// `Timestamp.format` writes years 1583-9999 from the day count; it must write what
/// Foundation's ISO 8601 style wrote, to the millisecond, and round-trip through `parse`.
@Suite("Timestamps: the civil format") struct CivilTimestampTests {
    @Test func theCivilFormatIsFoundationsForYears1583To9999() {
        var generator = SystemRandomNumberGenerator()
        // The edges, leap days, the epoch, before it, and 20,000 seconds drawn from the range.
        var samples: [Int64] = [
            -12_212_553_600, -12_212_553_600 + 86_399, 253_402_300_799, 0, -1, 86_400 - 1, 951_782_400, // 2000-02-29
            -2_203_891_200, // 1900-02-28
            4_107_456_000, // 2100-02-28
            1_795_000_000,
        ]
        for _ in 0..<20_000 { samples.append(Int64.random(in: -12_212_553_600...253_402_300_799, using: &generator)) }
        for seconds in samples {
            let ms = Int64.random(in: 0...999, using: &generator)
            let civil = Timestamp.civil(seconds: seconds, milliseconds: ms)
            #expect(civil == Timestamp.foundationFormat(seconds: seconds, milliseconds: ms), "at \(seconds) s \(ms) ms")
        }
    }

    @Test func outsideTheRangeFoundationWrites() {
        #expect(Timestamp.civil(seconds: -12_212_553_601, milliseconds: 0) == nil, "before 1583: Foundation's Julian days")
        let julian = Date(timeIntervalSince1970: -30_000_000_000) // 1019
        #expect(Timestamp.format(julian) == Timestamp.foundationFormat(seconds: -30_000_000_000, milliseconds: 0))
        #expect(Timestamp.civil(seconds: 253_402_300_800, milliseconds: 0) == nil)
        let far = Date(timeIntervalSince1970: 633_000_000_000) // year 22028
        #expect(Timestamp.format(far) == Timestamp.foundationFormat(seconds: 633_000_000_000, milliseconds: 0))
    }

    @Test func aFormattedDateParsesBackToTheSameMillisecond() throws {
        for t in [0.0, 1_795_000_000.123, -1_000_000.5, 253_402_300_799.999] {
            let s = Timestamp.format(Date(timeIntervalSince1970: t))
            let back = try #require(Timestamp.parse(s))
            #expect(Timestamp.format(back) == s)
            #expect(abs(back.timeIntervalSince1970 - t) < 0.0015, "\(s)")
        }
    }
}

@Suite("Timestamps")
struct TimestampTests {
    /// Found by the frame fuzz target: far from 1970 a parsed date lost a millisecond on
    /// every format/parse round trip (Fuzz/regressions/frame/far-future-timestamp.json).
    @Test(arguments: ["22025-11-13T02:13:20.122Z", "2026-11-21T21:35:06.123Z", "1969-12-31T23:59:59.999Z", "2026-11-21T21:35:06.000Z"])
    func aTimestampSurvivesRoundTrips(text: String) throws {
        var s = text
        for _ in 0..<5 {
            let date = try #require(Timestamp.parse(s))
            s = Timestamp.format(date)
        }
        #expect(s == text)
    }
}
