import AppHostProtocol
import Foundation
import Testing
@testable import Plugins

/// APNs' request rules, checked without a gateway or a host.
@Suite("APNsRequest")
struct APNsRequestTests {
    let token = String(repeating: "ab", count: 32)
    let payload = Data(#"{"aps": {"content-available": 1}}"#.utf8)

    func request(token: String? = nil, topic: String? = "com.x.app", type: String? = "background", priority: Int? = 5,
                 expiration: Int? = nil, collapse: String? = nil, id: String? = nil, payload: Data? = nil) -> APNsRequest {
        APNsRequest(token: token ?? self.token, topic: topic, pushType: type, priority: priority, expiration: expiration,
                    collapseID: collapse, apnsID: id, payload: payload ?? self.payload)
    }

    func reason(_ r: APNsRequest, owner: ModeHub.TokenOwner = .installed("com.x.app")) -> String? {
        if case .failure(let rejection) = r.validate(owner: { _ in owner }) { return rejection.reason }
        return nil
    }

    @Test func eachRuleRejectsWithAPNsReason() {
        #expect(reason(request(token: "abc")) == "BadDeviceToken")
        #expect(reason(request(), owner: .unknown) == "BadDeviceToken")
        #expect(reason(request(), owner: .uninstalled("com.x.app")) == "Unregistered")
        #expect(reason(request(type: "carrier-pigeon")) == "InvalidPushType")
        #expect(reason(request(topic: nil)) == "MissingTopic")
        #expect(reason(request(topic: "com.other")) == "DeviceTokenNotForTopic")
        #expect(reason(request(type: "voip")) == "DeviceTokenNotForTopic", "a VoIP topic ends in .voip")
        #expect(reason(request(priority: 7)) == "BadPriority")
        #expect(reason(request(priority: 10)) == "BadPriority", "a background push is priority 5")
        #expect(reason(request(expiration: -1)) == "BadExpirationDate")
        #expect(reason(request(collapse: String(repeating: "c", count: 65))) == "BadCollapseId")
        #expect(reason(request(id: "not-a-uuid")) == "BadMessageId")
        #expect(reason(request(topic: "com.x.app.voip", type: "voip", payload: Data())) == "PayloadEmpty")
        #expect(reason(request(topic: "com.x.app.voip", type: "voip", payload: Data(count: 5121))) == "PayloadTooLarge")
    }

    @Test func anAcceptedRequestNamesTheAppAndTheMessage() throws {
        let uuid = "0a9f5f6c-2b3a-4f3e-9d8c-1e2f3a4b5c6d"
        let result = request(token: token.uppercased(), collapse: String(repeating: "c", count: 64), id: uuid)
            .validate(owner: { $0 == token ? .installed("com.x.app") : .unknown })
        let accepted = try result.get()
        #expect(accepted.bundleIdentifier == "com.x.app")
        #expect(accepted.messageID == uuid.uppercased())
        guard case .push(let push) = accepted.command else {
            Issue.record("\(accepted.command)")
            return
        }
        #expect(push.bundleIdentifier == "com.x.app" && push.priority == 5 && push.apnsID == uuid.uppercased())
        let voip = try request(topic: "com.x.app.voip", type: "voip", payload: Data("{}".utf8))
            .validate(owner: { _ in .installed("com.x.app") }, makeID: { "ID" }).get()
        #expect(voip.command == .voipPush(bundleIdentifier: "com.x.app", payload: "{}") && voip.messageID == "ID")
    }
}
