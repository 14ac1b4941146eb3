import AppHostProtocol
import Foundation

/// What ``AccessoryManager`` tells its delegate: the `EAAccessoryDidConnect` /
/// `EAAccessoryDidDisconnect` notifications and bytes on an `EASession`'s input
/// stream. Methods run on the main queue and have empty defaults.
@MainActor
public protocol AccessoryManagerDelegate: AnyObject {
    /// An accessory speaking a protocol the app declares connected.
    func didConnect(_ manager: AccessoryManager, accessory: Accessory)
    /// An accessory went away.
    func didDisconnect(_ manager: AccessoryManager, accessory: Accessory)
    /// `accessory` sent `bytes` on `protocolString`.
    func didReceive(_ manager: AccessoryManager, bytes: Data, from accessory: Accessory, protocolString: String)
}

extension AccessoryManagerDelegate {
    /// Default: does nothing.
    public func didConnect(_ manager: AccessoryManager, accessory: Accessory) {}
    /// Default: does nothing.
    public func didDisconnect(_ manager: AccessoryManager, accessory: Accessory) {}
    /// Default: does nothing.
    public func didReceive(_ manager: AccessoryManager, bytes: Data, from accessory: Accessory, protocolString: String) {}
}

/// External accessories, like `EAAccessoryManager` (and the input side of
/// `EASession`), over the host's simulated accessories (`apphost accessory
/// connect|send|disconnect`). The app sees only accessories speaking a protocol
/// it lists in `UISupportedExternalAccessoryProtocols`; events wake a suspended
/// app only with `external-accessory` in `UIBackgroundModes`. One per process, ``shared``.
@MainActor
public final class AccessoryManager {
    /// The process's accessory manager; events are dropped until it is first used.
    public static let shared = AccessoryManager(router: .shared)

    /// Receives connections, disconnections and data; held weakly.
    public weak var delegate: (any AccessoryManagerDelegate)?

    private let router: ServiceRouter

    init(router: ServiceRouter) {
        self.router = router
        router.register(self)
    }

    /// The connected accessories the app may talk to (`connectedAccessories`).
    /// Asks the host each time and blocks until it answers; a failure is logged to
    /// stderr and gives an empty list.
    public var connectedAccessories: [Accessory] {
        let request = ServiceRequest.accessoryList
        do throws(ServiceError) {
            let reply = try router.request(request)
            guard case .accessories(let accessories) = reply else { throw ServiceRouter.unexpected(reply, to: request) }
            return accessories
        } catch {
            router.logFailure(of: request.apiName, error)
            return []
        }
    }

    /// An accessory event from the host.
    func handle(_ event: ServiceEvent) {
        switch event {
        case .accessoryConnected(let accessory):
            delegate?.didConnect(self, accessory: accessory)
        case .accessoryDisconnected(let accessory):
            delegate?.didDisconnect(self, accessory: accessory)
        case .accessoryData(let accessory, let protocolString, let bytes):
            delegate?.didReceive(self, bytes: bytes, from: accessory, protocolString: protocolString)
        default:
            break
        }
    }
}
