import AppHostProtocol
import Foundation
import Testing

/// The typed ids are coded and printed as their raw values: the frames, stored JSON and
/// event lines written when they were bare `Int`, `UInt64` and `String` read the same.
@Suite struct IdentifiersTests {
    func json<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try WireJSON.encoder().encode(value), as: UTF8.self)
    }

    @Test func eachIsCodedAsItsRawValue() throws {
        #expect(try json([BackgroundTaskID(-3), BackgroundTaskID(.max)]) == "[-3,\(Int.max)]")
        #expect(try json([HostTimerID(7)]) == "[7]")
        #expect(try json([TransferID(.max)]) == "[\(UInt64.max)]")
        #expect(try json([TransferTaskID(2)]) == "[2]")
        #expect(try json([SessionIdentifier("com.example.bg/1 \"x\"")]) == #"["com.example.bg/1 \"x\""]"#)
        #expect(try WireJSON.decoder().decode([TransferID].self, from: Data("[18446744073709551615]".utf8)) == [TransferID(.max)])
        #expect(try WireJSON.decoder().decode([SessionIdentifier].self, from: Data(#"["s"]"#.utf8)) == [SessionIdentifier("s")])
        #expect(throws: DecodingError.self) { try WireJSON.decoder().decode([HostTimerID].self, from: Data(#"["7"]"#.utf8)) }
    }

    @Test func eachPrintsAndOrdersAsItsRawValue() {
        #expect("task \(BackgroundTaskID(4)), timer \(HostTimerID(2)), transfer \(TransferID(9)), session \(SessionIdentifier("bg"))"
                == "task 4, timer 2, transfer 9, session bg")
        #expect([TransferID(10), TransferID(9)].sorted() == [TransferID(9), TransferID(10)])
        #expect(SessionIdentifier("a") < SessionIdentifier("b"))
    }

    /// The messages that carry them, as the generic coder writes them: the same text as
    /// before the types (these strings were written by a build where the ids were bare).
    @Test func theWireIsUnchanged() throws {
        let cases: [(String, String)] = [
            (try json(AppMessage.beginBackgroundTask(id: BackgroundTaskID(3), name: "up")), #"{"beginBackgroundTask":{"id":3,"name":"up"}}"#),
            (try json(AppMessage.invalidateTimer(id: HostTimerID(5))), #"{"invalidateTimer":{"id":5}}"#),
            (try json(LifecycleCallback.backgroundTaskExpiration(taskID: BackgroundTaskID(1))), #"{"backgroundTaskExpiration":{"taskID":1}}"#),
            (try json(ServiceEvent.urlSessionDidComplete(session: SessionIdentifier("s"), taskIdentifier: TransferTaskID(2),
                                                          errorCode: nil, errorReason: nil)),
             #"{"urlSessionDidComplete":{"session":"s","taskIdentifier":2}}"#),
            (try json(TransferEvent.progress(id: TransferID(8), bytesDone: 1, bytesExpected: nil)), #"{"progress":{"bytesDone":1,"id":8}}"#),
            (try json(HeldTaskRecord(id: BackgroundTaskID(6), name: nil, age: 1.5)), #"{"age":1.5,"id":6}"#),
        ]
        for (written, expected) in cases { #expect(written == expected) }
    }
}
