import Foundation
import Testing
@testable import AppHostProtocol

/// ``TransferJob/directJSON`` and the direct `enqueue` frames must be the generic
/// coder's bytes, and the direct reader must read only what the generic one reads the same way.
struct TransferJobJSONTests {
    static func job(id: UInt64 = 12, task: Int = 3, created: Double = 1_764_109_234.123456, timeout: Double = 7 * 86400,
                    cellular: Bool = true, discretionary: Bool = false, kind: TransferKind = .download) -> TransferJob {
        TransferJob(id: TransferID(id), bundleIdentifier: testID("com.example.app"), session: "s", taskIdentifier: TransferTaskID(task), kind: kind,
                    url: "http://127.0.0.1:8080/f/1?a=b", destination: "/var/lib/c/com.example.app/tmp/CFNetworkDownload_\(id).tmp",
                    discretionary: discretionary, allowsCellularAccess: cellular, timeoutForResource: timeout, created: created)
    }

    @Test func directJobsAreTheGenericBytesAndReadBack() throws {
        var generator = SystemRandomNumberGenerator()
        var doubles: [Double] = [0, 1, 0.5, 1e-7, 604_800, 1_764_109_234, 1_764_109_234.5, 1.5e300, 123_456_789_012_345_678, -3.25, .leastNonzeroMagnitude, .greatestFiniteMagnitude]
        for _ in 0..<300 {
            doubles.append(Double(bitPattern: generator.next()).isFinite ? Double(bitPattern: generator.next()) : 1)
            doubles.append(Double.random(in: 1e9...2e9, using: &generator))
        }
        for (i, d) in doubles.enumerated() where d.isFinite {
            for job in [Self.job(id: UInt64(i), task: i, created: d), Self.job(id: .max, task: -i, timeout: d, cellular: i % 2 == 0, discretionary: i % 3 == 0, kind: i % 2 == 0 ? .download : .upload)] {
                let direct = try #require(job.directJSON)
                let generic = [UInt8](try WireJSON.encoder().encode(job))
                #expect(String(decoding: direct, as: UTF8.self) == String(decoding: generic, as: UTF8.self))
                let frame = try Frame.encode(TransferRequest.enqueue(job))
                #expect(frame == (try Frame.genericEncode(TransferRequest.enqueue(job))))
                #expect(try Frame.decode(TransferRequest.self, from: Array(frame.dropFirst(4))) == .enqueue(job))
            }
        }
    }

    @Test func otherJobsGoTheGenericWay() throws {
        var withHeaders = Self.job(); withHeaders.headers = ["Accept": "*/*"]
        var upload = Self.job(kind: .upload); upload.uploadFile = "/c/f"
        var resumed = Self.job(); resumed.resume = TransferResume(partialFile: "/c/p", bytes: 10, etag: "\"x\"", lastModified: nil)
        var escaped = Self.job(); escaped.url = "http://x/\u{e9}"
        let infinite = Self.job(timeout: .infinity)
        for job in [withHeaders, upload, resumed, escaped, infinite] {
            #expect(job.directJSON == nil)
            let frame = try Frame.encode(TransferRequest.enqueue(job))
            #expect(frame == (try Frame.genericEncode(TransferRequest.enqueue(job))))
            #expect(try Frame.decode(TransferRequest.self, from: Array(frame.dropFirst(4))) == .enqueue(job))
        }
        for other in [TransferRequest.cancel(id: 3), .list, .acknowledge(id: 9), .cancelApp(bundleIdentifier: testID("com.a"))] {
            let frame = try Frame.encode(other)
            #expect(try Frame.decode(TransferRequest.self, from: Array(frame.dropFirst(4))) == other)
        }
    }

    /// A job's bundle identifier is checked where the frame is read: one in the direct
    /// shape that is not a bundle identifier is left to the generic decoder, which says so.
    @Test func aJobForNoBundleIdentifierIsRefused() throws {
        let good = try Frame.encode(TransferRequest.enqueue(Self.job()))
        let text = String(decoding: good.dropFirst(4), as: UTF8.self)
        #expect(text.contains(#""bundleIdentifier":"com.example.app""#))
        for bad in ["com example", "../etc", "com..x"] {
            let payload = Array(text.replacingOccurrences(of: #""bundleIdentifier":"com.example.app""#,
                                                           with: #""bundleIdentifier":"\#(bad)""#).utf8)
            #expect(throws: FrameError.self, "\(bad)") { try Frame.decode(TransferRequest.self, from: payload) }
        }
    }

    @Test func acknowledgementsAreTheGenericBytesAndReadBack() throws {
        var generator = SystemRandomNumberGenerator()
        let ids: [UInt64] = [0, 1, 9, 10, 12_345, UInt64(Int64.max), UInt64(Int64.max) + 1, .max] + (0..<200).map { _ in generator.next() }
        for id in ids {
            let frame = try Frame.encode(TransferRequest.acknowledge(id: TransferID(id)))
            #expect(frame == (try Frame.genericEncode(TransferRequest.acknowledge(id: TransferID(id)))), "\(id)")
            #expect(try Frame.decode(TransferRequest.self, from: Array(frame.dropFirst(4))) == .acknowledge(id: TransferID(id)))
        }
        // Near misses are the generic decoder's to decide.
        for text in [#"{"acknowledge":{"id":-1}}"#, #"{"acknowledge":{"id":1.0}}"#, #"{"acknowledge":{"id":18446744073709551616}}"#,
                     #"{"acknowledge":{"id":01}}"#, #"{"acknowledge":{"id":1}} "#, #"{"acknowledge":{"id":"1"}}"#] {
            let bytes = Array(text.utf8)
            let direct = Result { try Frame.decode(TransferRequest.self, from: bytes) }
            let generic = Result { try Frame.genericDecode(TransferRequest.self, from: bytes) }
            #expect((try? direct.get()) == (try? generic.get()), "\(text)")
        }
    }

    /// Texts near the direct shape: the direct reader declines them, and the generic
    /// decoder decides, the same way it would have.
    @Test func nearMissesAreDecidedByTheGenericDecoder() throws {
        let good = String(decoding: try Frame.encode(TransferRequest.enqueue(Self.job())).dropFirst(4), as: UTF8.self)
        let variants = [
            good.replacingOccurrences(of: #""created":1764109234.123456"#, with: #""created":1764109234.1234560"#),
            good.replacingOccurrences(of: #""created":1764109234.123456"#, with: #""created":1.764109234123456e9"#),
            good.replacingOccurrences(of: #""timeoutForResource":604800"#, with: #""timeoutForResource":604800.0"#),
            good.replacingOccurrences(of: #""timeoutForResource":604800"#, with: #""timeoutForResource":"inf""#),
            good.replacingOccurrences(of: #""id":12"#, with: #""id":-12"#),
            good.replacingOccurrences(of: #""kind":"download""#, with: #""kind":"sideways""#),
            good.replacingOccurrences(of: #""headers":{}"#, with: #""headers":{"A":"b"}"#),
            good.replacingOccurrences(of: #""allowsCellularAccess":true"#, with: #""allowsCellularAccess":1"#),
            good + " ",
            String(good.dropLast()),
        ]
        for text in variants {
            let bytes = Array(text.utf8)
            let direct = Result { try Frame.decode(TransferRequest.self, from: bytes) }
            let generic = Result { try Frame.genericDecode(TransferRequest.self, from: bytes) }
            #expect((try? direct.get()) == (try? generic.get()), "\(text)")
        }
    }
}

/// The daemon's direct events and outcomes must be the generic coder's bytes, and read
/// back only where the generic decoder reads the same.
struct TransferEventJSONTests {
    @Test func directEventsAreTheGenericBytesAndReadBack() throws {
        var events: [TransferEvent] = []
        for id: TransferID in [0, 7, TransferID(.max)] {
            events.append(.accepted(id: id))
            for done: Int64 in [0, 4096, .max] {
                events.append(.progress(id: id, bytesDone: done, bytesExpected: nil))
                events.append(.progress(id: id, bytesDone: done, bytesExpected: 1 << 40))
                events.append(.progress(id: id, bytesDone: done, bytesExpected: -1))
            }
            for (status, bytes) in [(200, Int64(0)), (206, Int64(3_000)), (-1, Int64.min), (Int.max, Int64.max)] {
                events.append(.finished(id: id, outcome: .completed(status: status, bytes: bytes)))
            }
        }
        for event in events {
            let direct = try Frame.encode(event)
            #expect(String(decoding: direct, as: UTF8.self) == String(decoding: try Frame.genericEncode(event), as: UTF8.self))
            #expect(try Frame.decode(TransferEvent.self, from: Array(direct.dropFirst(4))) == event)
            if case .finished(_, let outcome) = event {
                #expect(outcome.directJSON == [UInt8](try WireJSON.encoder().encode(outcome)))
            }
        }
    }

    @Test func otherEventsGoTheGenericWay() throws {
        let others: [TransferEvent] = [
            .ready(pid: 4, unfinished: 2), .waiting(id: 1, reason: "no network"), .error("x"),
            .finished(id: 1, outcome: .failed(code: "timedOut", reason: "slow")), .finished(id: 2, outcome: .cancelled),
            .finished(id: 3, outcome: .cancelledResumable(TransferResume(partialFile: "/p", bytes: 3, etag: nil, lastModified: "x"))),
            .transfers([]),
        ]
        for event in others {
            let direct = try Frame.encode(event)
            #expect(direct == (try Frame.genericEncode(event)))
            #expect(try Frame.decode(TransferEvent.self, from: Array(direct.dropFirst(4))) == event)
        }
        #expect(TransferOutcome.cancelled.directJSON == nil)
    }

    @Test func nearMissesAreDecidedByTheGenericDecoder() {
        let texts = [
            #"{"accepted":{"id":-1}}"#, #"{"accepted":{"id":01}}"#, #"{"accepted":{"id":1}} "#, #"{"accepted":{"id":1,"x":2}}"#,
            #"{"progress":{"bytesDone":9223372036854775808,"id":1}}"#, #"{"progress":{"bytesDone":1,"id":1}"#,
            #"{"progress":{"bytesDone":1,"bytesExpected":,"id":1}}"#,
            #"{"finished":{"id":1,"outcome":{"completed":{"bytes":1,"status":9223372036854775808}}}}"#,
            #"{"finished":{"id":1,"outcome":{"completed":{"bytes":1,"status":200}}}}x"#,
            #"{"finished":{"id":1,"outcome":{"completed":{"status":200,"bytes":1}}}}"#,
        ]
        for text in texts {
            let bytes = Array(text.utf8)
            #expect((try? Frame.decode(TransferEvent.self, from: bytes)) == (try? Frame.genericDecode(TransferEvent.self, from: bytes)), "\(text)")
        }
    }
}
