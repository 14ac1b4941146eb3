import AppHostProtocol
import Foundation

/// What a ``CentralManager`` tells its delegate, like `CBCentralManagerDelegate`
/// and `CBPeripheralDelegate` together. Methods run on the main queue and have
/// empty defaults.
@MainActor
public protocol CentralManagerDelegate: AnyObject {
    /// A scan found a peripheral (`centralManager(_:didDiscover:advertisementData:rssi:)`).
    func didDiscover(_ central: CentralManager, peripheral: BLEPeripheral)
    /// A connection completed (`centralManager(_:didConnect:)`).
    func didConnect(_ central: CentralManager, peripheral: String)
    /// A connection ended (`centralManager(_:didDisconnectPeripheral:error:)`).
    func didDisconnect(_ central: CentralManager, peripheral: String)
    /// A notifying characteristic changed (`peripheral(_:didUpdateValueFor:error:)`).
    func didUpdateValue(_ central: CentralManager, peripheral: String, characteristic: String, value: Data)
}

extension CentralManagerDelegate {
    /// Default: does nothing.
    public func didDiscover(_ central: CentralManager, peripheral: BLEPeripheral) {}
    /// Default: does nothing.
    public func didConnect(_ central: CentralManager, peripheral: String) {}
    /// Default: does nothing.
    public func didDisconnect(_ central: CentralManager, peripheral: String) {}
    /// Default: does nothing.
    public func didUpdateValue(_ central: CentralManager, peripheral: String, characteristic: String, value: Data) {}
}

/// A BLE central, like `CBCentralManager`, over the host's simulated peripherals
/// (`apphost ble add|notify|remove`). In the background, scans need a service
/// filter, and events wake a suspended app only with `bluetooth-central` in
/// `UIBackgroundModes`. Every live central receives the app's BLE events; calls
/// ask the host and block until it answers.
@MainActor
public final class CentralManager {
    /// Receives discoveries, connections and notifications; held weakly.
    public weak var delegate: (any CentralManagerDelegate)?

    /// Whether a scan is on.
    public private(set) var isScanning = false

    private let router: ServiceRouter

    /// A central that reports to `delegate` (held weakly).
    public convenience init(delegate: (any CentralManagerDelegate)? = nil) {
        self.init(delegate: delegate, router: .shared)
    }

    init(delegate: (any CentralManagerDelegate)?, router: ServiceRouter) {
        self.delegate = delegate
        self.router = router
        router.register(self)
    }

    /// Scans for peripherals advertising any of `services` (UUID strings), or for
    /// all peripherals when nil (foreground only, as on iOS), like
    /// `scanForPeripherals(withServices:options:)`. Discoveries follow as delegate calls.
    /// Unlike iOS this throws, so a refusal is visible.
    /// - Throws: ``ServiceError`` if the host refuses.
    public func scanForPeripherals(withServices services: [String]?) throws(ServiceError) {
        try router.requestOK(.bleScan(services: services))
        isScanning = true
    }

    /// Stops scanning (`stopScan()`); a failure is logged to stderr.
    public func stopScan() {
        router.requestLoggingFailure(.bleStopScan)
        isScanning = false
    }

    /// Connects to peripheral `id` (`connect(_:options:)`); ``CentralManagerDelegate/didConnect(_:peripheral:)`` follows.
    /// - Throws: ``ServiceError`` when no such peripheral is in range.
    public func connect(_ id: String) throws(ServiceError) {
        try router.requestOK(.bleConnect(peripheral: id))
    }

    /// Disconnects from peripheral `id` (`cancelPeripheralConnection(_:)`);
    /// ``CentralManagerDelegate/didDisconnect(_:peripheral:)`` follows. A failure
    /// (not connected) is logged to stderr.
    public func cancelPeripheralConnection(_ id: String) {
        router.requestLoggingFailure(.bleDisconnect(peripheral: id))
    }

    /// A BLE event from the host.
    func handle(_ event: ServiceEvent) {
        switch event {
        case .bleDiscovered(let peripheral):
            delegate?.didDiscover(self, peripheral: peripheral)
        case .bleConnected(let id):
            delegate?.didConnect(self, peripheral: id)
        case .bleDisconnected(let id):
            delegate?.didDisconnect(self, peripheral: id)
        case .bleNotification(let id, let characteristic, let value):
            delegate?.didUpdateValue(self, peripheral: id, characteristic: characteristic, value: value)
        default:
            break
        }
    }
}

/// A BLE peripheral role, like `CBPeripheralManager`: advertise services that
/// the host's simulated centrals (and other apps' scans) can see. Advertising goes
/// on in the background only with `bluetooth-peripheral` in `UIBackgroundModes`;
/// without it it pauses until the app is back in front. Calls ask the host and
/// block until it answers.
@MainActor
public final class PeripheralManager {
    /// Whether advertising was started and not stopped since.
    public private(set) var isAdvertising = false

    private let router: ServiceRouter

    /// A peripheral manager.
    public convenience init() {
        self.init(router: .shared)
    }

    init(router: ServiceRouter) {
        self.router = router
    }

    /// Starts advertising `services` (UUID strings) under `localName`
    /// (`startAdvertising(_:)` with `CBAdvertisementDataServiceUUIDsKey` and
    /// `CBAdvertisementDataLocalNameKey`).
    /// - Throws: ``ServiceError`` if the host refuses.
    public func startAdvertising(services: [String], localName: String? = nil) throws(ServiceError) {
        try router.requestOK(.bleStartAdvertising(services: services, localName: localName))
        isAdvertising = true
    }

    /// Stops advertising (`stopAdvertising()`); a failure is logged to stderr.
    public func stopAdvertising() {
        router.requestLoggingFailure(.bleStopAdvertising)
        isAdvertising = false
    }
}
