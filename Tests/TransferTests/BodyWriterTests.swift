import Foundation
import TestSupport
import NIOCore
import NIOPosix
import Testing
@testable import TransferCore

/// A partial file in a temporary folder, with the store a writer commits to.
private struct PartFile {
    let dir: TempDir
    let store: TransferStore
    let path: String
    let fd: Int32

    init() throws {
        dir = try TempDir("bodywriter")
        store = try TransferStore(path: dir.path + "/t.sqlite")
        path = dir.path + "/x.part"
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
    }

    func writer(offset: Int64 = 0, length: Int64?, commitBytes: Int64, loop: any EventLoop) -> BodyWriter {
        let (_, sink) = AsyncStream<Int64>.makeStream()
        return BodyWriter(fd: fd, path: path, offset: offset, length: length, point: ResumePoint(), store: store, id: 1,
                          commitBytes: commitBytes, progress: sink, eventLoop: loop)
    }

    func remove() {
        if fd >= 0 { close(fd) }
        dir.remove()
    }
}

/// The download body writer on its own (no server, no daemon): what is in the file
/// when a response stops.
@Suite struct BodyWriterTests {
    /// Bytes received before a dropped connection are valid data: they reach the file
    /// even when the writer thread never ran before the drop, so the next attempt asks
    /// only for the rest. (Before, they were thrown away and the resume started at 0.)
    @Test(arguments: [100_000, 4096 * 3, 1])
    func stopWritesWhatTheRingHolds(count: Int) async throws {
        let file = try PartFile()
        defer { file.remove() }
        #expect(file.fd >= 0)
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        // Below the wake threshold, so appending alone does not start the writer.
        #expect(count < BodyWriter.wakeBytes)
        let writer = file.writer(length: 1 << 20, commitBytes: 1 << 30, loop: loop)
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        try await loop.submit { writer.append(ByteBuffer(bytes: bytes)) }.flatMap { $0 }.get()
        writer.stop()
        let end = try await writer.end.get()
        guard case .stopped(let written) = end else {
            Issue.record("ended \(end)")
            return
        }
        #expect(written == Int64(count))
        let data = try Data(contentsOf: URL(fileURLWithPath: file.path))
        #expect(data == Data(bytes))
    }

    /// A stop with nothing received ends at once, at the offset the attempt started from.
    @Test func stopWithNothingReceivedEndsAtTheStart() async throws {
        let file = try PartFile()
        defer { file.remove() }
        let writer = file.writer(offset: 5000, length: nil, commitBytes: 1 << 20, loop: MultiThreadedEventLoopGroup.singleton.any())
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
        let file = try PartFile()
        defer { file.remove() }
        #expect(file.fd >= 0)
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        let writer = file.writer(length: Int64(count), commitBytes: 1 << 30, loop: loop)
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
        try await loop.submit { writer.append(ByteBuffer(bytes: bytes)) }.flatMap { $0 }.get()
        try await loop.submit { writer.finish() }.get()
        let end = try await writer.end.get()
        guard case .finished(let written) = end else {
            Issue.record("ended \(end)")
            return
        }
        #expect(written == Int64(count))
        let data = try Data(contentsOf: URL(fileURLWithPath: file.path))
        #expect(data == Data(bytes))
    }
}
