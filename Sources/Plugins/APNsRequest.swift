import AppHostProtocol
import Foundation

/// One provider request to the push gateway, as APNs reads it: the device token, the
/// `apns-*` headers and the payload. ``validate(owner:)`` applies every rule APNs applies
/// before it accepts a push (the gateway answers with the rejection's reason and status)
/// and says which app it is for and what to deliver; delivery itself is the plugins'.
public struct APNsRequest: Sendable, Equatable {
    /// The `<token>` of `/3/device/<token>`, as sent.
    public var token: String
    /// `apns-topic`.
    public var topic: String?
    /// `apns-push-type`.
    public var pushType: String?
    /// `apns-priority`.
    public var priority: Int?
    /// `apns-expiration` (UNIX seconds, 0: deliver once or not at all).
    public var expiration: Int?
    /// `apns-collapse-id`.
    public var collapseID: String?
    /// `apns-id`, as sent (checked to be a UUID).
    public var apnsID: String?
    /// The request body.
    public var payload: Data

    /// A push as sent (``validate(owner:makeID:)`` checks every field).
    public init(token: String, topic: String? = nil, pushType: String? = nil, priority: Int? = nil, expiration: Int? = nil,
                collapseID: String? = nil, apnsID: String? = nil, payload: Data) {
        self.token = token
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.payload = payload
    }

    /// The `apns-push-type` values APNs knows.
    public static let pushTypes = ["alert", "background", "voip", "complication", "fileprovider", "mdm", "location",
                                   "liveactivity", "pushtotalk", "widgets", "controls"]
    /// A new `apns-id` as APNs makes one: a lowercase canonical UUID.
    public static func makeID() -> String { UUID().uuidString.lowercased() }

    /// The largest VoIP payload APNs takes, in bytes.
    public static let voipPayloadLimit = 5120

    /// What an accepted request delivers.
    public struct Accepted: Sendable, Equatable {
        /// The app the device token is registered to.
        public var bundleIdentifier: BundleID
        /// The `apns-id` answered: the request's exactly as sent (provider libraries match
        /// answers to requests by it), or a new lowercase UUID.
        public var messageID: String
        /// The command for the mode plugins.
        public var command: ModeCommand
    }

    /// Checks the request as APNs does; `owner` says whose a device token is.
    /// `makeID` gives the `apns-id` when the request has none.
    public func validate(owner: (String) -> ModeHub.TokenOwner,
                         makeID: () -> String = APNsRequest.makeID) -> Result<Accepted, APNsRejection> {
        let token = token.lowercased()
        guard token.count == 64, token.allSatisfy(\.isHexDigit) else {
            return .failure(APNsRejection(.badDeviceToken, "the device token must be 64 hex digits"))
        }
        let id: BundleID
        let kind: DeviceTokenKind
        switch owner(token) {
        case .installed(let app, let k): (id, kind) = (app, k)
        case .uninstalled(let app):
            return .failure(APNsRejection(.unregistered, "the device token belonged to \(app), which is no longer installed"))
        case .unknown:
            return .failure(APNsRejection(.badDeviceToken, "no installed app registered this device token"))
        }
        if let pushType, !Self.pushTypes.contains(pushType) {
            return .failure(APNsRejection(.invalidPushType, "apns-push-type \"\(pushType)\" is not one of \(Self.pushTypes.joined(separator: ", "))"))
        }
        guard let topic, !topic.isEmpty else {
            return .failure(APNsRejection(.missingTopic, "apns-topic is required (the app's bundle id)"))
        }
        // A PushKit token takes VoIP pushes on `<bundle id>.voip`; the app's APNs token
        // takes the others on its bundle id.
        let expectedTopic = kind == .voip ? id.rawValue + ".voip" : id.rawValue
        guard topic == expectedTopic else {
            return .failure(APNsRejection(.deviceTokenNotForTopic, "the device token is \(id)'s \(kind == .voip ? "PushKit (VoIP)" : "APNs") token; apns-topic must be \(expectedTopic)"))
        }
        if kind == .voip, let pushType, pushType != "voip" {
            return .failure(APNsRejection(.deviceTokenNotForTopic, "the device token is \(id)'s PushKit (VoIP) token: it takes apns-push-type voip, not \(pushType)"))
        }
        if kind == .apns, pushType == "voip" {
            return .failure(APNsRejection(.deviceTokenNotForTopic, "the device token is \(id)'s APNs token; a VoIP push goes to the token PushKit gave the app"))
        }
        if let priority, ![1, 5, 10].contains(priority) {
            return .failure(APNsRejection(.badPriority, "apns-priority must be 10, 5 or 1"))
        }
        if pushType == "background", priority == 10 {
            return .failure(APNsRejection(.badPriority, "a background push must have apns-priority 5"))
        }
        if let expiration, expiration < 0 {
            return .failure(APNsRejection(.badExpirationDate, "apns-expiration must be a UNIX time in seconds or 0"))
        }
        if let collapseID, collapseID.utf8.count > 64 {
            return .failure(APNsRejection(.badCollapseId, "apns-collapse-id may have at most 64 bytes"))
        }
        let messageID: String
        if let apnsID {
            guard UUID(uuidString: apnsID) != nil else {
                return .failure(APNsRejection(.badMessageId, "apns-id must be a UUID (8-4-4-4-12 hex digits)"))
            }
            messageID = apnsID
        } else {
            messageID = makeID()
        }
        let command: ModeCommand
        if kind == .voip {
            guard let text = String(data: payload, encoding: .utf8), !payload.isEmpty else {
                return .failure(APNsRejection(.payloadEmpty, "the payload is empty"))
            }
            guard payload.count <= Self.voipPayloadLimit else {
                return .failure(APNsRejection(.payloadTooLarge, "a VoIP payload carries at most \(Self.voipPayloadLimit) bytes"))
            }
            command = .voipPush(bundleIdentifier: id, payload: text)
        } else {
            do throws(APNsRejection) {
                let parsed = try APNsPayload.parse(payload, name: "payload")
                command = .push(PushRequest(bundleIdentifier: id, payload: parsed.json, pushType: pushType, priority: priority,
                                            collapseID: collapseID, apnsID: messageID, expiration: expiration, source: "gateway"))
            } catch {
                return .failure(error)
            }
        }
        return .success(Accepted(bundleIdentifier: id, messageID: messageID, command: command))
    }
}
