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
        // The hand-written encoders against the one definition (the Codable types through
        // WireJSON, a new coder each time as Frame's generic path makes): what each saves.
        let directEvent = time { _ = event.jsonBytes() }
        guard let transferApp = BundleID("com.bench.micro") else { throw BenchError("bad bundle id") }
        let job = TransferJob(id: TransferID(77), bundleIdentifier: transferApp, session: SessionIdentifier("bench.session"),
                              taskIdentifier: TransferTaskID(3), kind: .download, url: "http://127.0.0.1:8080/files/77.bin",
                              destination: "/tmp/apphost/containers/com.bench.micro/Library/Caches/77.bin", created: 1_764_400_000.25)
        let enqueue = TransferRequest.enqueue(job)
        let directEnqueue = try time { _ = try Frame.encode(enqueue) }
        let genericEnqueue = try time { _ = try [UInt8](WireJSON.encoder().encode(enqueue)) }
        let progress = Array(try Frame.encode(TransferEvent.progress(id: TransferID(77), bytesDone: 65_536, bytesExpected: 1_048_576)).dropFirst(Frame.headerSize))
        let directProgress = try time { _ = try Frame.decode(TransferEvent.self, from: progress) }
        let genericProgress = try time { _ = try WireJSON.decoder().decode(TransferEvent.self, from: Data(progress)) }
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
        let genericEvent = Row("encode one HostEvent through JSONEncoder (its Codable definition)", encodeEvent)
        let genericEnqueueRow = Row("TransferRequest.enqueue through JSONEncoder", genericEnqueue)
        let genericProgressRow = Row("TransferEvent.progress through JSONDecoder", genericProgress)
        return Section(
            title: "Host per-operation costs (same code paths, timed alone; context for the breakdowns)",
            rows: [
                genericEvent,
                Row("  HostEvent.jsonBytes(), what EventLog writes (the same bytes)", directEvent, against: genericEvent,
                    note: "then one write(2) a step to events.jsonl"),
                Row("    of which Timestamp.format(Date())", formatDate, slice: true),
                genericEnqueueRow,
                Row("  Frame.encode(TransferRequest.enqueue), direct (the same bytes)", directEnqueue, against: genericEnqueueRow,
                    note: "one per resume() of a background download, to the daemon"),
                genericProgressRow,
                Row("  Frame.decode(TransferEvent.progress), direct", directProgress, against: genericProgressRow,
                    note: "many per download, from the daemon"),
                Row("Frame.encode(HostMessage.callback) (per callback sent)", encodeFrame, note: "direct (FrameFastPaths); the same bytes as JSONEncoder's", slice: true),
                Row("Frame.decode(AppMessage) (per message received)", decodeFrame, note: "direct (FrameFastPaths) for the shapes apps send", slice: true),
                Row("  of which WireJSON.decoder() alone", newDecoder, slice: true),
                Row("Frame.decode(ControlResponse.appStatus) (per app in status)", decodeStatus, slice: true),
                Row("decode [AppStatus] of 100 in one call (per call)", decodeHundred, slice: true),
            ],
            notes: ["home button → suspended: 3 transitions (3 Store writes), 6 events, 2 callbacks encoded, 2 returns decoded;",
                    "foreground from suspended: the same counts (3 transitions, 6 events, 2 callbacks, 2 returns)."])
    }
}
