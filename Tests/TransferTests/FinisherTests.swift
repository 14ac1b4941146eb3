import AppHostSystem
import AppHostProtocol
import Foundation
import TestSupport
import Testing
@testable import TransferCore

/// The batched end of downloads on its own (no server, no daemon): synced files are at
/// their destinations and recorded as finished in one go; a file that cannot be moved
/// fails its own transfer only.
@Suite struct FinisherTests {
    private func job(_ id: UInt64, destination: String) -> TransferJob {
        TransferJob(id: TransferID(id), bundleIdentifier: "com.example.f", session: "s", taskIdentifier: TransferTaskID(Int(id)), kind: .download,
                    url: "http://127.0.0.1/\(id)", destination: destination, created: 0)
    }

    /// Writes `bytes` to `destination.part` and returns it as received, descriptor open.
    private func received(_ destination: String, _ bytes: [UInt8]) throws -> ReceivedDownload {
        let part = destination + ".part"
        let fd = open(part, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        try #require(fd >= 0)
        #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count)
        return ReceivedDownload(fd: fd, part: part, destination: destination, status: 200,
                                bytes: Int64(bytes.count), bytesExpected: Int64(bytes.count))
    }

    /// Waiting received downloads hold descriptors: their bound leaves room under
    /// RLIMIT_NOFILE for connections and the database, and is never 0.
    @Test func theFinishingBoundLeavesDescriptorsToSpare() {
        #expect(TransferDaemon.finishingBound(256, openFileLimit: nil) == 256)
        #expect(TransferDaemon.finishingBound(256, openFileLimit: 1024) == 256)
        #expect(TransferDaemon.finishingBound(256, openFileLimit: 256) == 96)
        #expect(TransferDaemon.finishingBound(256, openFileLimit: 64) == 1)
        #expect(TransferDaemon.finishingBound(0, openFileLimit: nil) == 1)
    }

    @Test func aBatchIsMovedAndRecordedAndAFailedMoveFailsOnlyItsTransfer() throws {
        let dir = try TempDir("finisher")
        defer { dir.remove() }
        let store = try TransferStore(path: dir.path + "/t.sqlite")
        let destinations = [dir.path + "/a", dir.path + "/no-such-dir/b", dir.path + "/c"]
        let contents: [[UInt8]] = [Array("first".utf8), Array("second".utf8), Array(repeating: 7, count: 5000)]
        #expect(try store.insert(destinations.enumerated().map { job(UInt64($0.offset + 1), destination: $0.element) }) == [true, true, true])
        var batch: [(id: TransferID, file: ReceivedDownload)] = []
        for (i, destination) in destinations.enumerated() {
            // The second one's directory does not exist: its partial file is written beside the others.
            let file = try received(i == 1 ? dir.path + "/b" : destination, contents[i])
            batch.append((TransferID(UInt64(i + 1)), ReceivedDownload(fd: file.fd, part: file.part, destination: destination,
                                                          status: 200, bytes: file.bytes, bytesExpected: file.bytesExpected)))
        }

        let (finished, recordError) = Finisher.finish(batch, store: store, files: AppFiles())

        #expect(recordError == nil)
        #expect(finished.map(\.id) == [1, 2, 3])
        #expect(finished[0].outcome == .completed(status: 200, bytes: 5))
        guard case .failed(let code, _) = finished[1].outcome else { Issue.record("\(finished[1].outcome)"); return }
        #expect(code == "cannotMoveFile")
        #expect(finished[2].outcome == .completed(status: 200, bytes: 5000))
        #expect(FileManager.default.contents(atPath: destinations[0]) == Data(contents[0]))
        #expect(FileManager.default.contents(atPath: destinations[2]) == Data(contents[2]))
        for path in [destinations[0] + ".part", dir.path + "/b.part", destinations[2] + ".part"] {
            #expect(!FileManager.default.fileExists(atPath: path), "\(path) left behind")
        }
        // Recorded as finished (as a restarted daemon would report them), with the bytes.
        let rows = try store.loadAll()
        #expect(rows.map(\.state) == [.finished, .finished, .finished])
        #expect(rows.map(\.outcome) == finished.map(\.outcome))
        #expect(rows.map(\.bytesDone) == [5, 6, 5000])
    }

    /// A small download arrives with its body in memory: its file is made, written,
    /// synced and moved with the batch; one whose folder is gone fails to be created,
    /// alone, and leaves nothing behind.
    @Test func heldBodiesAreWrittenWithTheBatchAndAFailedCreateFailsOnlyItsTransfer() throws {
        let dir = try TempDir("finisher-held")
        defer { dir.remove() }
        let store = try TransferStore(path: dir.path + "/t.sqlite")
        let destinations = [dir.path + "/h1", dir.path + "/gone/h2", dir.path + "/h3", dir.path + "/h4"]
        let contents: [[UInt8]] = [Array("held".utf8), Array("lost".utf8), [], Array(repeating: 9, count: 3000)]
        #expect(try store.insert(destinations.enumerated().map { job(UInt64($0.offset + 1), destination: $0.element) }).allSatisfy { $0 })
        var batch: [(id: TransferID, file: ReceivedDownload)] = []
        for (i, destination) in destinations.enumerated() where i < 3 {
            batch.append((TransferID(UInt64(i + 1)), ReceivedDownload(fd: -1, part: destination + ".part", destination: destination, status: 200,
                                                          bytes: Int64(contents[i].count), bytesExpected: Int64(contents[i].count),
                                                          body: contents[i])))
        }
        // Held and written bodies in one batch.
        batch.append((4, try received(destinations[3], contents[3])))

        let (finished, recordError) = Finisher.finish(batch, store: store, files: AppFiles())

        #expect(recordError == nil)
        #expect(finished.map(\.id) == [1, 2, 3, 4])
        #expect(finished[0].outcome == .completed(status: 200, bytes: 4))
        guard case .failed(let code, _) = finished[1].outcome else { Issue.record("\(finished[1].outcome)"); return }
        #expect(code == "cannotCreateFile")
        #expect(finished[2].outcome == .completed(status: 200, bytes: 0))
        #expect(finished[3].outcome == .completed(status: 200, bytes: 3000))
        for i in [0, 2, 3] {
            #expect(FileManager.default.contents(atPath: destinations[i]) == Data(contents[i]), "\(destinations[i])")
        }
        for path in destinations.map({ $0 + ".part" }) {
            #expect(!FileManager.default.fileExists(atPath: path), "\(path) left behind")
        }
        #expect(try store.loadAll().map(\.state) == [.finished, .finished, .finished, .finished])
    }
}
