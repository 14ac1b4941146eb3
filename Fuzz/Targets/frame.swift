// libFuzzer target `frame`: the IPC and control-socket wire. Each input is used twice:
// 1. as one frame's payload, decoded as every message type that crosses a socket
//    (AppMessage: app → host, the untrusted direction; HostMessage; ControlRequest and
//    ControlResponse; TransferRequest and TransferEvent);
// 2. as a byte stream split by `FrameDecoder`, fed whole, byte by byte and in chunks
//    of 7, which must give the same frames and the same error; each frame is decoded
//    as in 1.
// A message that decodes must encode, and decode and encode again to the same bytes.
// Seeds are written by the harness itself (`APPHOST_FUZZ_MAKE_SEEDS=DIR harness`), from
// Fuzz/SeedMessages.swift: one payload per message case, and streams of several frames.
@testable import AppHostProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ bytes: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = Array(UnsafeBufferPointer(start: bytes, count: size))
    decodeEveryType(input)

    let whole = split(input, chunk: max(input.count, 1))
    let single = split(input, chunk: 1)
    let chunked = split(input, chunk: 7)
    invariant(whole == single && whole == chunked, "chunking changed the frames: \(whole) / \(single) / \(chunked)")
    if whole.error == nil {
        let framed = whole.payloads.reduce(0) { $0 + Frame.headerSize + $1.count }
        invariant(framed + whole.buffered == input.count, "\(framed) framed + \(whole.buffered) buffered != \(input.count)")
    }
    for payload in whole.payloads { decodeEveryType(payload) }

    // A small maximum: every frame returned is within it.
    let small = split(input, chunk: 5, maximum: 64)
    invariant(small.payloads.allSatisfy { $0.count <= 64 }, "a payload over the maximum was returned")
    return 0
}

/// What a decoder made of a stream: its frames, the error that stopped it, the bytes left
/// (0 after an error).
struct Split: Equatable, CustomStringConvertible {
    var payloads: [[UInt8]] = []
    var error: FrameError?
    var buffered = 0
    var description: String { "\(payloads.count) frames, error \(error.map { "\($0)" } ?? "none"), \(buffered) buffered" }
}

func split(_ stream: [UInt8], chunk: Int, maximum: Int = Frame.maximumPayload) -> Split {
    var decoder = FrameDecoder(maximumPayload: maximum)
    var result = Split()
    var offset = 0
    outer: while offset < stream.count {
        let end = min(offset + chunk, stream.count)
        decoder.append(stream[offset..<end])
        offset = end
        do {
            while let payload = try decoder.next() { result.payloads.append(payload) }
        } catch {
            result.error = error
            break outer
        }
    }
    // After an error the connection is dropped: what is left in the buffer then depends
    // on how the bytes arrived and means nothing.
    guard result.error == nil else { return result }
    result.buffered = decoder.bufferedCount
    do {
        try decoder.finish()
        invariant(result.buffered == 0, "finish passed with \(result.buffered) bytes buffered")
    } catch {
        invariant(result.buffered > 0, "finish threw with nothing buffered")
    }
    return result
}

func decodeEveryType(_ payload: [UInt8]) {
    roundTrip(AppMessage.self, payload)
    roundTrip(HostMessage.self, payload)
    roundTrip(ControlRequest.self, payload)
    roundTrip(ControlResponse.self, payload)
    roundTrip(TransferRequest.self, payload)
    roundTrip(TransferEvent.self, payload)
}

/// Decodes `payload` as `type`; if it is one, it must encode, and encode the same after
/// another decode (what the host logs or forwards is what it understood).
func roundTrip<M: Codable>(_ type: M.Type, _ payload: [UInt8]) {
    guard let message = try? Frame.decode(type, from: payload) else { return }
    let first: [UInt8]
    do { first = try Frame.encode(message) } catch {
        invariant(false, "\(type) decoded but does not encode: \(error)")
        return
    }
    let again: M
    do { again = try Frame.decode(type, from: Array(first.dropFirst(Frame.headerSize))) } catch {
        invariant(false, "\(type) does not decode its own encoding: \(error)\n\(String(decoding: first.dropFirst(4), as: UTF8.self))")
        return
    }
    let second = try? Frame.encode(again)
    invariant(second == first, "\(type) encodes differently after a round trip:\n\(String(decoding: first.dropFirst(4), as: UTF8.self))\n\(String(decoding: (second ?? []).dropFirst(4), as: UTF8.self))")
}

// MARK: - Seeds

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<Int32>,
                           _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> Int32 {
    guard let request = seedRequest() else { return 0 }
    var count = 0
    func payload<M: Encodable>(_ name: String, _ messages: [M]) {
        for (i, m) in messages.enumerated() {
            guard let frame = try? Frame.encode(m) else { continue }
            writeSeed(Data(frame.dropFirst(Frame.headerSize)), named: "\(name)-\(i).json", in: request.directory)
            count += 1
        }
    }
    func stream<M: Encodable>(_ name: String, _ messages: [M]) {
        let bytes = messages.compactMap { try? Frame.encode($0) }.joined()
        writeSeed(Data(bytes), named: "\(name).stream", in: request.directory)
        count += 1
    }
    let app = SeedMessages.app, host = SeedMessages.host, control = SeedMessages.control
    payload("app", app)
    payload("host", host)
    payload("control", control)
    payload("transfer-request", SeedMessages.transferRequests)
    payload("transfer-event", SeedMessages.transferEvents)
    stream("app-session", Array(app.prefix(8)))
    stream("host-session", Array(host.prefix(6)))
    stream("control-session", Array(control.prefix(4)))
    print("frame: \(count) seeds written")
    exit(0)
}
