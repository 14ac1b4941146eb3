import AppHostProtocol
import Foundation

/// The payload of a VoIP push, like `PKPushPayload`: the JSON text the sender
/// gave (`apphost push --type voip <id> <payload>`).
public struct PushPayload: Sendable, Equatable, CustomStringConvertible {
    /// The JSON text, as sent.
    public let json: String

    /// Wraps JSON text.
    public init(json: String) {
        self.json = json
    }

    /// The payload parsed as a JSON object (`dictionaryPayload`); empty if it is not one.
    public var dictionary: [String: Any] {
        guard let data = json.data(using: .utf8),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return [:] }
        return object
    }

    /// The JSON text.
    public var description: String { json }
}

/// What a ``PushRegistry`` tells its delegate, like `PKPushRegistryDelegate`.
@MainActor
public protocol PushRegistryDelegate: AnyObject {
    /// A VoIP push arrived (`pushRegistry(_:didReceiveIncomingPushWith:for:completion:)`).
    /// As on iOS 13+, the app must report an incoming call with
    /// ``CallProvider/reportNewIncomingCall(uuid:handle:)`` before this method returns:
    /// if it has not, PushKit raises `NSInternalInconsistencyException` ("Killing app
    /// because it never posted an incoming call to the system after receiving a PushKit
    /// VoIP push.") and the app aborts. A delegate that blocks instead is killed by the
    /// host after the `voipReport` budget (0xbaadca11), and after a few unreported
    /// pushes in a row the host stops delivering them.
    func didReceiveIncomingPush(_ registry: PushRegistry, payload: PushPayload)
}

/// VoIP push registration, like `PKPushRegistry` with `desiredPushTypes = [.voIP]`.
/// Needs `voip` in `UIBackgroundModes`. Every live registry receives the app's
/// VoIP pushes; calls ask the host and block until it answers.
@MainActor
public final class PushRegistry {
    /// Receives pushes; held weakly.
    public weak var delegate: (any PushRegistryDelegate)?

    /// The VoIP push token (hex) from the last successful ``register()``.
    public private(set) var pushToken: String?

    private let router: ServiceRouter

    /// A registry that hands pushes to `delegate` (held weakly). Pushes are
    /// delivered from creation on; ``register()`` gets the token a server would use.
    public convenience init(delegate: (any PushRegistryDelegate)?) {
        self.init(delegate: delegate, router: .shared)
    }

    init(delegate: (any PushRegistryDelegate)?, router: ServiceRouter) {
        self.delegate = delegate
        self.router = router
        router.register(self)
    }

    /// Registers for VoIP pushes (what setting `desiredPushTypes = [.voIP]` does on
    /// iOS) and returns the token, also kept in ``pushToken``.
    /// - Throws: ``ServiceError`` when the app does not declare the `voip` mode.
    @discardableResult
    public func register() throws(ServiceError) -> String {
        let request = ServiceRequest.voipRegister
        let reply = try router.request(request)
        guard case .token(let token) = reply else { throw ServiceRouter.unexpected(reply, to: request) }
        pushToken = token
        return token
    }

    /// A VoIP push from the host; false when no delegate took it.
    func didReceive(_ payload: PushPayload) -> Bool {
        guard let delegate else { return false }
        delegate.didReceiveIncomingPush(self, payload: payload)
        return true
    }
}

/// Call reporting, like CallKit's `CXProvider`. A reported call keeps the app
/// running until it is ended. Calls ask the host and block until it answers.
@MainActor
public final class CallProvider {
    private let router: ServiceRouter

    /// A provider.
    public convenience init() {
        self.init(router: .shared)
    }

    init(router: ServiceRouter) {
        self.router = router
    }

    /// Reports an incoming call (`reportNewIncomingCall(with:update:completion:)`),
    /// which answers the VoIP push being handled.
    /// - Throws: ``ServiceError`` if the host refuses.
    public func reportNewIncomingCall(uuid: UUID, handle: String) throws(ServiceError) {
        // Reported, whatever CallKit then answers (PushKit's check is that a report was made).
        router.callReported()
        try router.requestOK(.voipReportIncomingCall(uuid: uuid.uuidString, handle: handle))
    }

    /// Reports that call `uuid` ended (`reportCall(with:endedAt:reason:)`).
    /// - Throws: ``ServiceError`` when no such call was reported.
    public func reportCallEnded(uuid: UUID) throws(ServiceError) {
        try router.requestOK(.voipEndCall(uuid: uuid.uuidString))
    }
}
