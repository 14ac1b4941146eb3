import AppHostProtocol
import Foundation

/// Per-operation costs of work the host does on every event, callback and message,
/// timed in this process with the same public code paths. Context for the breakdowns.
struct MicroCosts {
    let iterations: Int

    func run() throws -> Section {
        let clock = ContinuousClock()
        let n = Swift.max(iterations, 200)
        func time(_ body: () throws -> Void) rethrows -> Samples {
            var s = Samples()
            for i in 0..<(n + 20) {
                let t0 = clock.now
                try body()
                let t1 = clock.now
                if i >= 20 { s.add(t1 - t0) }
            }
            return s
        }
        let event = HostEvent(seq: 42, time: Date(), kind: .transition, bundleIdentifier: BundleID("com.bench.micro"), pid: 1234,
                              from: .background, to: .suspended, cause: "no assertion left (SIGSTOP)")
        let eventEncoder = WireJSON.encoder()
        let encodeEvent = try time { _ = try eventEncoder.encode(event) }
        let formatDate = time { _ = Timestamp.format(Date()) }
        let callback = HostMessage.callback(seq: 7, callback: .didEnterBackground, state: .background)
        let encodeFrame = try time { _ = try Frame.encode(callback) }
        let payload = Array(try Frame.encode(AppMessage.callbackReturned(seq: 7)).dropFirst(Frame.headerSize))
        let decodeFrame = try time { _ = try Frame.decode(AppMessage.self, from: payload) }
        let newDecoder = time { _ = WireJSON.decoder() }
        // One row of `status`: the client decodes a frame per app.
        guard let micro = BundleID("com.bench.micro") else { throw BenchError("bad bundle id") }
        let status = AppStatus(bundleIdentifier: micro, state: .suspended, pid: 1234, since: Date(),
                               backgroundTasks: [], isFrontmost: false, footprint: 1_234_567)
        let statusPayload = Array(try Frame.encode(ControlResponse.appStatus(status)).dropFirst(Frame.headerSize))
        let decodeStatus = try time { _ = try Frame.decode(ControlResponse.self, from: statusPayload) }
        let hundred = try [UInt8](WireJSON.encoder().encode(Array(repeating: status, count: 100)))
        let arrayDecoder = WireJSON.decoder()
        let decodeHundred = try time { _ = try arrayDecoder.decode([AppStatus].self, from: Data(hundred)) }
        return Section(
            title: "Host per-operation costs (same code paths, timed alone; context for the breakdowns)",
            rows: [
                Row("encode one HostEvent (EventLog.append, per event)", encodeEvent, note: "then one write(2) to events.jsonl", slice: true),
                Row("  of which Timestamp.format(Date())", formatDate, slice: true),
                Row("Frame.encode(HostMessage.callback) (per callback sent)", encodeFrame, note: "a new JSONEncoder each time", slice: true),
                Row("Frame.decode(AppMessage) (per message received)", decodeFrame, note: "a new JSONDecoder each time", slice: true),
                Row("  of which WireJSON.decoder() alone", newDecoder, slice: true),
                Row("Frame.decode(ControlResponse.appStatus) (per app in status)", decodeStatus, slice: true),
                Row("decode [AppStatus] of 100 in one call (per call)", decodeHundred, slice: true),
            ],
            notes: ["home button → suspended: 3 transitions (3 Store writes), 6 events, 2 callbacks encoded, 2 returns decoded;",
                    "foreground from suspended: the same counts (3 transitions, 6 events, 2 callbacks, 2 returns)."])
    }
}
