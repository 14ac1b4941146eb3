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

    func reason(_ r: APNsRequest, owner: ModeHub.TokenOwner = .installed("com.x.app", .apns)) -> String? {
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
        let voip = ModeHub.TokenOwner.installed("com.x.app", .voip)
        #expect(reason(request(topic: "com.x.app.voip", type: "voip", payload: Data()), owner: voip) == "PayloadEmpty")
        #expect(reason(request(topic: "com.x.app.voip", type: "voip", payload: Data(count: 5121)), owner: voip) == "PayloadTooLarge")
        #expect(reason(request(topic: "com.x.app.voip", type: "voip")) == "DeviceTokenNotForTopic", "a VoIP push to the APNs token")
        #expect(reason(request(topic: "com.x.app", type: "alert"), owner: voip) == "DeviceTokenNotForTopic", "an alert to the PushKit token")
        #expect(reason(request(topic: "com.x.app.voip", type: "alert"), owner: voip) == "DeviceTokenNotForTopic")
    }

    @Test func apnsIDsAreEchoedAsSentAndMadeLowercase() throws {
        for sent in ["0a9f5f6c-2b3a-4f3e-9d8c-1e2f3a4b5c6d", "0A9F5F6C-2B3A-4F3E-9D8C-1E2F3A4B5C6D", "0a9F5f6C-2b3A-4f3E-9d8C-1e2F3a4B5c6D"] {
            #expect(try request(id: sent).validate(owner: { _ in .installed("com.x.app", .apns) }).get().messageID == sent)
        }
        let made = try request().validate(owner: { _ in .installed("com.x.app", .apns) }).get().messageID
        #expect(UUID(uuidString: made) != nil && made == made.lowercased(), "\(made): a lowercase canonical UUID, as APNs makes")
        #expect(made.count == 36)
    }

    /// Apple's table ("Handling notification responses from APNs", Understand error codes):
    /// every reason the gateway can give, with its status.
    @Test func theReasonTableIsApples() {
        let apple: [String: Int] = [
            "BadCollapseId": 400, "BadDeviceToken": 400, "BadExpirationDate": 400, "BadMessageId": 400, "BadPriority": 400,
            "BadTopic": 400, "DeviceTokenNotForTopic": 400, "DuplicateHeaders": 400, "IdleTimeout": 400, "InvalidPushType": 400,
            "MissingDeviceToken": 400, "MissingTopic": 400, "PayloadEmpty": 400, "TopicDisallowed": 400,
            "BadCertificate": 403, "BadCertificateEnvironment": 403, "ExpiredProviderToken": 403, "Forbidden": 403,
            "InvalidProviderToken": 403, "MissingProviderToken": 403, "UnrelatedKeyIdInToken": 403, "BadEnvironmentKeyIdInToken": 403,
            "BadPath": 404, "MethodNotAllowed": 405, "ExpiredToken": 410, "Unregistered": 410, "PayloadTooLarge": 413,
            "TooManyProviderTokenUpdates": 429, "TooManyRequests": 429, "InternalServerError": 500,
            "ServiceUnavailable": 503, "Shutdown": 503,
        ]
        #expect(Dictionary(uniqueKeysWithValues: APNsReason.allCases.map { ($0.rawValue, $0.status) }) == apple)
        #expect(APNsRejection(.unregistered, "x").status == 410 && APNsRejection(.unregistered, "x").reason == "Unregistered")
    }

    @Test func anAcceptedRequestNamesTheAppAndTheMessage() throws {
        let uuid = "0a9f5f6c-2b3a-4f3e-9d8c-1e2f3a4b5c6d"
        let result = request(token: token.uppercased(), collapse: String(repeating: "c", count: 64), id: uuid)
            .validate(owner: { $0 == token ? .installed("com.x.app", .apns) : .unknown })
        let accepted = try result.get()
        #expect(accepted.bundleIdentifier == "com.x.app")
        #expect(accepted.messageID == uuid, "the apns-id exactly as sent: clients match answers by it")
        guard case .push(let push) = accepted.command else {
            Issue.record("\(accepted.command)")
            return
        }
        #expect(push.bundleIdentifier == "com.x.app" && push.priority == 5 && push.apnsID == uuid)
        let voip = try request(topic: "com.x.app.voip", type: "voip", payload: Data("{}".utf8))
            .validate(owner: { _ in .installed("com.x.app", .voip) }, makeID: { "ID" }).get()
        #expect(voip.command == .voipPush(bundleIdentifier: "com.x.app", payload: "{}") && voip.messageID == "ID")
    }
}
