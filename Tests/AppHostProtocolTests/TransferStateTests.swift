import AppHostProtocol
import Foundation
import Testing

/// The daemon's transfer states: the strings it stored and sent before they were a type.
@Suite struct TransferStateTests {
    @Test func rawValuesAreTheStoredStrings() {
        #expect(TransferState.allCases.map(\.rawValue) == ["queued", "waiting", "running", "finished"])
    }

    /// A row read back at start: finished stays finished, everything else is queued again,
    /// an unknown string included (attempted again, never a crash).
    @Test(arguments: [("finished", TransferState.finished), ("queued", .queued), ("waiting", .queued),
                      ("running", .queued), ("paused", .queued), ("", .queued), ("FINISHED", .queued)])
    func restoring(stored: String, expected: TransferState) {
        #expect(TransferState(restoring: stored) == expected)
    }

    @Test func statusOnTheWireIsAPlainString() throws {
        let job = TransferJob(id: 1, bundleIdentifier: testID("com.example.a"), session: "s", taskIdentifier: 1, kind: .download,
                              url: "https://example.com/x", destination: "/tmp/x", created: 0)
        let status = TransferStatus(job: job, state: .running, bytesDone: 5, bytesExpected: nil, outcome: nil)
        let text = String(decoding: try WireJSON.encoder().encode(status), as: UTF8.self)
        #expect(text.contains(#""state":"running""#))
        #expect(try WireJSON.decoder().decode(TransferStatus.self, from: Data(text.utf8)) == status)
    }

    @Test func unknownStringOnTheWireIsADecodingError() {
        #expect(throws: DecodingError.self) {
            try WireJSON.decoder().decode(TransferState.self, from: Data(#""paused""#.utf8))
        }
    }
}

/// The task states the host lists to an app (`getAllTasks`).
@Suite struct TransferTaskStateTests {
    @Test func rawValuesAreTheWireStrings() {
        #expect(TransferTaskState.allCases.map(\.rawValue) == ["queued", "waiting", "running", "completed"])
    }

    /// A snapshot as an earlier host encoded it (state a string) decodes.
    @Test func oldSnapshotDecodes() throws {
        let text = #"{"bytesDone":10,"bytesExpected":100,"kind":"download","state":"completed","taskIdentifier":4,"url":"https://example.com/a"}"#
        let snapshot = try WireJSON.decoder().decode(TransferTaskSnapshot.self, from: Data(text.utf8))
        #expect(snapshot.state == .completed)
        #expect(String(decoding: try WireJSON.encoder().encode(snapshot), as: UTF8.self) == text)
    }

    @Test func unknownStateIsADecodingError() {
        let text = #"{"bytesDone":0,"kind":"upload","state":"finished","taskIdentifier":1,"url":"https://example.com/a"}"#
        #expect(throws: DecodingError.self) {
            try WireJSON.decoder().decode(TransferTaskSnapshot.self, from: Data(text.utf8))
        }
    }
}
