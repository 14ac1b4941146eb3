@testable import AppHostProtocol
import Foundation
import Testing

/// The rule both sides apply to a host timer's interval, and the timer messages on the
/// wire (an app's number can be anything JSON and "nan"/"inf" spell).
@Suite("HostTimerInterval")
struct HostTimerIntervalTests {
    @Test func notANumberIsRefusedAndTheRestIsKeptBetweenOneMillisecondAndAHundredYears() {
        #expect(HostTimerInterval.duration(seconds: .nan) == nil)
        #expect(HostTimerInterval.duration(seconds: .infinity) == nil)
        #expect(HostTimerInterval.duration(seconds: -.infinity) == nil)
        #expect(HostTimerInterval.duration(seconds: 0) == .milliseconds(1))
        #expect(HostTimerInterval.duration(seconds: -1e300) == .milliseconds(1))
        #expect(HostTimerInterval.duration(seconds: 0.000_999) == .milliseconds(1))
        #expect(HostTimerInterval.duration(seconds: 0.25) == .milliseconds(250))
        #expect(HostTimerInterval.duration(seconds: 10) == .seconds(10))
        #expect(HostTimerInterval.duration(seconds: 1e300) == Duration.longestWait)
        #expect(HostTimerInterval.duration(seconds: .greatestFiniteMagnitude) == Duration.longestWait)
        #expect(HostTimerInterval.seconds(-2) == 0.001)
        #expect(HostTimerInterval.seconds(.nan) == nil)
    }

    @Test func timerMessagesRoundTripThroughFrames() throws {
        let messages: [AppMessage] = [
            .request(id: 1, request: .service(.timerSchedule(id: 7, interval: 2.5, repeats: true))),
            .request(id: 2, request: .service(.timerSchedule(id: 8, interval: .infinity, repeats: false))),
            .invalidateTimer(id: 7),
        ]
        for message in messages {
            let frame = try Frame.encode(message)
            var decoder = FrameDecoder()
            decoder.append(frame[...])
            #expect(try Frame.decode(AppMessage.self, from: try #require(try decoder.next())) == message)
        }
        let nan = try Frame.encode(AppMessage.request(id: 3, request: .service(.timerSchedule(id: 9, interval: .nan, repeats: false))))
        var decoder = FrameDecoder()
        decoder.append(nan[...])
        guard case .request(_, .service(.timerSchedule(9, let interval, false))) = try Frame.decode(AppMessage.self, from: try #require(try decoder.next())) else {
            Issue.record("a NaN interval did not come through")
            return
        }
        #expect(interval.isNaN, "NaN reaches the host, which refuses it")
        let fire = HostMessage.callback(seq: 4, callback: .service(.timerFired(id: 7)), state: .background)
        var d2 = FrameDecoder()
        d2.append(try Frame.encode(fire)[...])
        #expect(try Frame.decode(HostMessage.self, from: try #require(try d2.next())) == fire)
    }

    /// A fire crosses the socket every interval of a repeating timer: it is written and
    /// read directly, byte for byte the generic coder's.
    @Test func aFireIsTheGenericBytesAndReadsBack() throws {
        for state in [AppState.active, .inactive, .background] {
            for seq: UInt64 in [1, 77, .max] {
                for id in [0, 1, 10_000, -2, Int.max, Int.min] {
                    let message = HostMessage.callback(seq: seq, callback: .service(.timerFired(id: HostTimerID(id))), state: state)
                    let direct = try Frame.encode(message)
                    #expect(String(decoding: direct, as: UTF8.self) == String(decoding: try Frame.genericEncode(message), as: UTF8.self))
                    #expect(try Frame.decode(HostMessage.self, from: Array(direct.dropFirst(Frame.headerSize))) == message)
                }
            }
        }
        // Near misses go to the generic decoder, which decides.
        let tooBig = #"{"callback":{"callback":{"service":{"_0":{"timerFired":{"id":9223372036854775808}}}},"seq":1,"state":"active"}}"#
        #expect(throws: FrameError.self) { try Frame.decode(HostMessage.self, from: Array(tooBig.utf8)) }
        let spaced = #"{"callback":{"callback":{"service":{"_0":{"timerFired":{"id": 3}}}},"seq":1,"state":"active"}}"#
        #expect(try Frame.decode(HostMessage.self, from: Array(spaced.utf8)) == .callback(seq: 1, callback: .service(.timerFired(id: 3)), state: .active))
    }
}
