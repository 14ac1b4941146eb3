import Foundation
import Testing
@testable import AppHostProtocol

/// The uncaught exception of a programmer error: its wire form, its bounds, and the
/// report field that carries it (issue 18).
@Suite("UncaughtException")
struct UncaughtExceptionTests {
    let location = UncaughtException(name: .internalInconsistency, reason: "Invalid parameter not satisfying: !stayUp")

    @Test func itsMessageAndAReplyRoundTripAsFrames() throws {
        let message = AppMessage.uncaughtException(exception: location)
        let decoded = try Frame.decode(AppMessage.self, from: Array(Frame.encode(message).dropFirst(4)))
        #expect(decoded == message)
        let reply = HostMessage.reply(id: 3, reply: .service(.raise(exception: location)))
        #expect(try Frame.decode(HostMessage.self, from: Array(Frame.encode(reply).dropFirst(4))) == reply)
    }

    @Test func theNameIsAStringOnTheWireAndInAReport() throws {
        let data = try JSONEncoder().encode(location)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["name"] as? String == "NSInternalInconsistencyException")
        #expect(object["reason"] as? String == location.reason)
        let other = try JSONDecoder().decode(UncaughtException.self, from: Data(#"{"name":"MyAppException","reason":"r"}"#.utf8))
        #expect(other.name == ExceptionName(rawValue: "MyAppException"), "any name an app raises is kept")

        let report = TerminationReport(id: "a-1-2", bundleIdentifier: testID("a"), pid: 2, time: Date(timeIntervalSince1970: 0),
                                       exceptionType: "EXC_CRASH (SIGABRT)", exitStatus: nil, signal: 6, signalName: "SIGABRT",
                                       terminationNamespace: nil, terminationCode: nil, reason: location.terminationMessage,
                                       lastStates: [], exception: location)
        let json = try #require(try JSONSerialization.jsonObject(with: WireJSON.encoder(pretty: false).encode(report)) as? [String: Any])
        let field = try #require(json["exception"] as? [String: Any])
        #expect(field["name"] as? String == "NSInternalInconsistencyException")
        #expect(try WireJSON.decoder().decode(TerminationReport.self, from: WireJSON.encoder(pretty: false).encode(report)) == report)
        let plain = TerminationReport(id: "b", bundleIdentifier: testID("b"), pid: 1, time: Date(timeIntervalSince1970: 0),
                                      exceptionType: "EXIT", exitStatus: 0, signal: nil, signalName: nil,
                                      terminationNamespace: nil, terminationCode: nil, reason: "x", lastStates: [])
        let plainJSON = try #require(try JSONSerialization.jsonObject(with: WireJSON.encoder(pretty: false).encode(plain)) as? [String: Any])
        #expect(plainJSON["exception"] == nil, "absent when no exception")
    }

    @Test func iOSsLineNamesItAndItsReason() {
        #expect(location.terminationMessage
            == "*** Terminating app due to uncaught exception 'NSInternalInconsistencyException', reason: 'Invalid parameter not satisfying: !stayUp'")
    }

    @Test func whatAnAppSaysIsCutToItsBounds() {
        let long = UncaughtException(name: ExceptionName(rawValue: String(repeating: "N", count: 10_000)),
                                     reason: String(repeating: "r", count: 100_000))
        let cut = long.bounded()
        #expect(cut.name.rawValue.count == UncaughtException.maximumNameLength + 1 && cut.name.rawValue.hasSuffix("…"))
        #expect(cut.reason.count == UncaughtException.maximumReasonLength + 1 && cut.reason.hasSuffix("…"))
        #expect(location.bounded() == location, "short ones are kept whole")
        let exact = UncaughtException(name: .generic, reason: String(repeating: "r", count: UncaughtException.maximumReasonLength))
        #expect(exact.bounded() == exact, "at the bound: kept")
    }
}
