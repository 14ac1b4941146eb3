@testable import AppHostProtocol
import Foundation
import Testing
import TestSupport

/// `Timestamp.format` writes years 1583-9999 from the day count; it must write what
/// Foundation's ISO 8601 style wrote, to the millisecond, and round-trip through `parse`.
@Suite("Timestamps: the civil format") struct CivilTimestampTests {
    @Test func theCivilFormatIsFoundationsForYears1583To9999() {
        var generator = SplitMix(seed: 31)
        // The edges, leap days, the epoch, before it, and 20,000 seconds drawn from the range.
        var samples: [Int64] = [
            -12_212_553_600, -12_212_553_600 + 86_399, 253_402_300_799, 0, -1, 86_400 - 1, 951_782_400, // 2000-02-29
            -2_203_891_200, // 1900-02-28
            4_107_456_000, // 2100-02-28
            1_795_000_000,
        ]
        for _ in 0..<20_000 { samples.append(Int64.random(in: -12_212_553_600...253_402_300_799, using: &generator)) }
        // Within weeks of the reference date (2001-01-01) a sum's last bit depends on its
        // order: a whole-seconds-first sum differed from Foundation's for about 3 % of these.
        for _ in 0..<20_000 { samples.append(978_307_200 + Int64.random(in: -5_000_000...5_000_000, using: &generator)) }
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

    /// `parse` reads the civil shape itself; it must give Foundation's `Date`, bit for bit,
    /// and leave to Foundation everything that is not a real date of 1583-9999 in that shape.
    @Test func theCivilParseIsFoundationsForYears1583To9999() throws {
        var generator = SplitMix(seed: 31)
        var samples: [Int64] = [-12_212_553_600, 253_402_300_799, 0, -1, 951_782_400, -2_203_891_200, 4_107_456_000]
        for _ in 0..<20_000 { samples.append(Int64.random(in: -12_212_553_600...253_402_300_799, using: &generator)) }
        // Within weeks of the reference date (2001-01-01) a sum's last bit depends on its
        // order: a whole-seconds-first sum differed from Foundation's for about 3 % of these.
        for _ in 0..<20_000 { samples.append(978_307_200 + Int64.random(in: -5_000_000...5_000_000, using: &generator)) }
        for seconds in samples {
            let ms = Int64.random(in: 0...999, using: &generator)
            let text = try #require(Timestamp.civil(seconds: seconds, milliseconds: ms))
            let fast = try #require(Timestamp.parseCivil(text), "\(text)")
            #expect(fast == Timestamp.foundationParse(text), "\(text)")
        }
        // Not the civil shape, or not a real date in it: Foundation decides.
        for text in ["2026-02-29T00:00:00.000Z", "2024-02-30T00:00:00.000Z", "2026-13-01T00:00:00.000Z", "2026-00-10T00:00:00.000Z",
                     "2026-04-31T00:00:00.000Z", "2026-11-21T24:00:00.000Z", "2026-11-21T23:60:00.000Z", "2026-11-21T23:59:60.000Z",
                     "1582-10-20T00:00:00.000Z", "2026-11-21T21:35:06Z", "2026-11-21T21:35:06.123+01:00", "2026-11-21 21:35:06.123Z",
                     "2026-11-2xT21:35:06.123Z", "+026-11-21T21:35:06.123Z", "2026-11-21T21:35:06.1234Z", ""] {
            #expect(Timestamp.parseCivil(text) == nil, "\(text)")
            #expect(Timestamp.parse(text) == Timestamp.foundationParse(text), "\(text)")
        }
        #expect(Timestamp.parseCivil("2024-02-29T23:59:59.999Z") == Timestamp.foundationParse("2024-02-29T23:59:59.999Z"))
        #expect(Timestamp.parseCivil("2000-02-29T00:00:00.000Z") != nil)
        #expect(Timestamp.parseCivil("1900-02-29T00:00:00.000Z") == nil)
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
