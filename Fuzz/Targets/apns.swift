// libFuzzer target `apns`: `.apns` push payloads (`apphost push`, the push gateway and
// silent pushes) through `APNsPayload.parse`. Seeds: ../shared/corpus/apns and
// Fuzz/seeds/apns.
@testable import Plugins
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ bytes: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let data = fuzzInput(bytes, size)
    let problem = APNsPayload.strictProblem(data)
    do {
        let payload = try APNsPayload.parse(data, name: "fuzz.apns")
        invariant(problem == nil, "accepted a payload with \(problem ?? "")")
        invariant(data.count <= APNsPayload.maximumSize, "accepted \(data.count) bytes")
        invariant(Data(payload.json.utf8) == data, "the payload's text is not its bytes")
        invariant(payload.target.map { !$0.isEmpty } ?? true, "an empty target was accepted")
        _ = payload.inferredPushType
    } catch {
        invariant(!error.reason.isEmpty && !error.message.isEmpty, "a rejection without a reason")
        invariant([400, 413].contains(error.status), "status \(error.status)")
    }
    return 0
}
