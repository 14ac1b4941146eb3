import AppHostSystem
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
    let files: AppFiles

    init() throws {
        dir = try TempDir("bodywriter")
        store = try TransferStore(path: dir.path + "/t.sqlite")
        path = dir.path + "/x.part"
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        files = AppFiles()
    }

    /// Where a writer that makes its own file writes (not made by `init`).
    var ownPath: String { dir.path + "/own.part" }

    /// `opensFile`: the writer makes `path` itself (a fresh download's), not given `fd`.
    func writer(offset: Int64 = 0, length: Int64?, commitBytes: Int64, loop: any EventLoop, opensFile: Bool = false,
                at other: String? = nil) -> BodyWriter {
        let (_, sink) = AsyncStream<Int64>.makeStream()
        return BodyWriter(fd: opensFile ? nil : fd, path: other ?? path, files: files, offset: offset, length: length, point: ResumePoint(), store: store, id: 1,
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

    /// A writer that makes its own file (a fresh download's) makes none for a body that
    /// fits in `inlineBytes`: it ends `.held` with the bytes in memory, for the finisher.
    /// A larger body goes to a file it makes, whose descriptor it then hands over.
    @Test(arguments: [0, 1, 3000, Int(BodyWriter.inlineBytes), Int(BodyWriter.inlineBytes) + 1, 200_000])
    func aWriterThatMakesItsFileHoldsASmallBody(count: Int) async throws {
        let file = try PartFile()
        defer { file.remove() }
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        let writer = file.writer(length: Int64(count), commitBytes: 1 << 30, loop: loop, opensFile: true, at: file.ownPath)
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 17 &+ 3) }
        if count > 0 { try await loop.submit { writer.append(ByteBuffer(bytes: bytes)) }.flatMap { $0 }.get() }
        try await loop.submit { writer.finish() }.get()
        let end = try await writer.end.get()
        let made = writer.takeDescriptor()
        defer { if made >= 0 { close(made) } }
        // (A body of exactly `inlineBytes` fills its ring, sized to the length, which
        // wakes the writer before the end: it is written like a large one.)
        if count < Int(BodyWriter.inlineBytes) {
            guard case .held(let n) = end else { Issue.record("ended \(end)"); return }
            #expect(n == Int64(count))
            #expect(writer.heldBody() == bytes)
            #expect(made == -1)
            #expect(!FileManager.default.fileExists(atPath: file.ownPath), "a file was made for a held body")
        } else {
            guard case .finished(let n) = end else { Issue.record("ended \(end)"); return }
            #expect(n == Int64(count))
            #expect(made >= 0)
            #expect(try Data(contentsOf: URL(fileURLWithPath: file.ownPath)) == Data(bytes))
        }
    }

    /// A stopped body of a writer that makes its own file is still written (the next
    /// attempt resumes from it); a file it cannot make fails the body as `opening`.
    @Test func aWriterThatMakesItsFileWritesAStoppedBodyAndReportsAFailedCreate() async throws {
        let file = try PartFile()
        defer { file.remove() }
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        let bytes = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
        let writer = file.writer(length: 1 << 20, commitBytes: 1 << 30, loop: loop, opensFile: true, at: file.ownPath)
        try await loop.submit { writer.append(ByteBuffer(bytes: bytes)) }.flatMap { $0 }.get()
        writer.stop()
        guard case .stopped(let written) = try await writer.end.get() else { Issue.record("did not end stopped"); return }
        #expect(written == 5000)
        let made = writer.takeDescriptor()
        #expect(made >= 0)
        if made >= 0 { close(made) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: file.ownPath)) == Data(bytes))

        let nowhere = file.writer(length: nil, commitBytes: 1 << 30, loop: loop, opensFile: true, at: file.dir.path + "/gone/x.part")
        try await loop.submit { nowhere.append(ByteBuffer(bytes: bytes)) }.flatMap { $0 }.get()
        nowhere.stop()
        guard case .failed(let failure, _) = try await nowhere.end.get() else { Issue.record("did not fail"); return }
        #expect(failure.opening)
        #expect(failure.errnoValue == ENOENT)
        #expect(nowhere.takeDescriptor() == -1)
    }
}
