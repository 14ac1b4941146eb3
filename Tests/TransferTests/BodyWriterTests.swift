import Foundation
import TestSupport
import NIOCore
import NIOPosix
import Testing
@testable import TransferCore

/// The download body writer on its own (no server, no daemon): what is in the file
/// when a response stops.
@Suite struct BodyWriterTests {
    /// Bytes received before a dropped connection are valid data: they reach the file
    /// even when the writer thread never ran before the drop, so the next attempt asks
    /// only for the rest. (Before, they were thrown away and the resume started at 0.)
    @Test(arguments: [100_000, 4096 * 3, 1])
    func stopWritesWhatTheRingHolds(count: Int) async throws {
        let dir = try TempDir("bodywriter")
        defer { dir.remove() }
        let store = try TransferStore(path: dir.path + "/t.sqlite")
        let part = dir.path + "/x.part"
        let fd = open(part, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        #expect(fd >= 0)
        defer { close(fd) }
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        let (_, sink) = AsyncStream<Int64>.makeStream()
        // Below the wake threshold, so appending alone does not start the writer.
        #expect(count < BodyWriter.wakeBytes)
        let writer = BodyWriter(fd: fd, path: part, offset: 0, length: 1 << 20, point: ResumePoint(), store: store, id: 1,
                                commitBytes: 1 << 30, progress: sink, eventLoop: loop)
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        try await loop.submit { writer.append(ByteBuffer(bytes: bytes)) }.flatMap { $0 }.get()
        writer.stop()
        let end = try await writer.end.get()
        guard case .stopped(let written) = end else {
            Issue.record("ended \(end)")
            return
        }
        #expect(written == Int64(count))
        let data = try Data(contentsOf: URL(fileURLWithPath: part))
        #expect(data == Data(bytes))
    }

    /// A stop with nothing received ends at once, at the offset the attempt started from.
    @Test func stopWithNothingReceivedEndsAtTheStart() async throws {
        let dir = try TempDir("bodywriter")
        defer { dir.remove() }
        let store = try TransferStore(path: dir.path + "/t.sqlite")
        let part = dir.path + "/x.part"
        let fd = open(part, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        defer { close(fd) }
        let (_, sink) = AsyncStream<Int64>.makeStream()
        let writer = BodyWriter(fd: fd, path: part, offset: 5000, length: nil, point: ResumePoint(), store: store, id: 1,
                                commitBytes: 1 << 20, progress: sink, eventLoop: MultiThreadedEventLoopGroup.singleton.any())
        writer.stop()
        guard case .stopped(let written) = try await writer.end.get() else {
            Issue.record("did not end stopped")
            return
        }
        #expect(written == 5000)
    }

    /// A finished body reaches the file whole, whether its last bytes are few enough to
    /// be written on the event loop (up to `inlineBytes`) or go to a pool thread.
    @Test(arguments: [1, 3000, Int(BodyWriter.inlineBytes), Int(BodyWriter.inlineBytes) + 1, 200_000])
    func finishWritesEverything(count: Int) async throws {
        let dir = try TempDir("bodywriter")
        defer { dir.remove() }
        let store = try TransferStore(path: dir.path + "/t.sqlite")
        let part = dir.path + "/x.part"
        let fd = open(part, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        #expect(fd >= 0)
        defer { close(fd) }
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        let (_, sink) = AsyncStream<Int64>.makeStream()
        let writer = BodyWriter(fd: fd, path: part, offset: 0, length: Int64(count), point: ResumePoint(), store: store, id: 1,
                                commitBytes: 1 << 30, progress: sink, eventLoop: loop)
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
        try await loop.submit { writer.append(ByteBuffer(bytes: bytes)) }.flatMap { $0 }.get()
        try await loop.submit { writer.finish() }.get()
        let end = try await writer.end.get()
        guard case .finished(let written) = end else {
            Issue.record("ended \(end)")
            return
        }
        #expect(written == Int64(count))
        let data = try Data(contentsOf: URL(fileURLWithPath: part))
        #expect(data == Data(bytes))
    }
}
