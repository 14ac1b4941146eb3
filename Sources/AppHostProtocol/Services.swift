import Foundation

// The services background-mode plugins offer an app (audio, location, VoIP, BLE,
// external accessories, remote-notification registration). An app calls them
// with ``AppRequest/service(_:)`` and gets a ``ServiceReply``; what the world does
// to the app (a fix, a VoIP push, a BLE notification, accessory bytes, an audio
// interruption) reaches it as ``LifecycleCallback/service(_:)``, a callback like
// any other: the app is woken (or launched) for it only when a plugin says so,
// and it is not suspended while the handler runs.

/// A call from the app to a host service. Named after the iOS API it models.
public enum ServiceRequest: Codable, Sendable, Equatable {
    // MARK: audio (AVAudioSession / AVAudioPlayer)
    /// `AVAudioSession.setActive(true)` with a category (`playback`, `ambient`, ...).
    case audioActivate(category: String)
    /// Plays 16-bit little-endian mono PCM `samples` at `sampleRate`; returns once queued.
    case audioPlay(samples: Data, sampleRate: Int)
    /// Stops playing (and deactivates the session).
    case audioStop

    // MARK: location (CLLocationManager)
    /// `requestWhenInUseAuthorization` / `requestAlwaysAuthorization`.
    case locationRequestAuthorization(always: Bool)
    /// `startUpdatingLocation`.
    case locationStart
    /// `stopUpdatingLocation`.
    case locationStop
    /// `allowsBackgroundLocationUpdates = value`.
    case locationAllowsBackgroundUpdates(Bool)

    // MARK: voip (PKPushRegistry / CXProvider)
    /// `PKPushRegistry.desiredPushTypes = [.voIP]`: asks for a VoIP push token.
    case voipRegister
    /// `CXProvider.reportNewIncomingCall(with:update:completion:)`.
    case voipReportIncomingCall(uuid: String, handle: String)
    /// `CXProvider.reportCall(with:endedAt:reason:)`.
    case voipEndCall(uuid: String)

    // MARK: bluetooth (CBCentralManager / CBPeripheralManager)
    /// `scanForPeripherals(withServices:)`; nil scans for everything (foreground only on iOS).
    case bleScan(services: [String]?)
    /// `stopScan()`.
    case bleStopScan
    /// `connect(_:)`.
    case bleConnect(peripheral: String)
    /// `cancelPeripheralConnection(_:)`.
    case bleDisconnect(peripheral: String)
    /// `CBPeripheralManager.startAdvertising` with service UUIDs and a local name.
    case bleStartAdvertising(services: [String], localName: String?)
    /// `stopAdvertising()`.
    case bleStopAdvertising

    // MARK: external accessory (EAAccessoryManager / EASession)
    /// `EAAccessoryManager.connectedAccessories` (only those speaking a protocol the app declared).
    case accessoryList

    // MARK: remote notifications (UIApplication)
    /// `registerForRemoteNotifications()`.
    case registerForRemoteNotifications

    /// The iOS API's name, for events and errors.
    public var apiName: String {
        switch self {
        case .audioActivate: "AVAudioSession.setActive"
        case .audioPlay: "AVAudioPlayer.play"
        case .audioStop: "AVAudioPlayer.stop"
        case .locationRequestAuthorization(let always): always ? "CLLocationManager.requestAlwaysAuthorization" : "CLLocationManager.requestWhenInUseAuthorization"
        case .locationStart: "CLLocationManager.startUpdatingLocation"
        case .locationStop: "CLLocationManager.stopUpdatingLocation"
        case .locationAllowsBackgroundUpdates: "CLLocationManager.allowsBackgroundLocationUpdates"
        case .voipRegister: "PKPushRegistry.desiredPushTypes"
        case .voipReportIncomingCall: "CXProvider.reportNewIncomingCall"
        case .voipEndCall: "CXProvider.reportCall(endedAt:)"
        case .bleScan: "CBCentralManager.scanForPeripherals"
        case .bleStopScan: "CBCentralManager.stopScan"
        case .bleConnect: "CBCentralManager.connect"
        case .bleDisconnect: "CBCentralManager.cancelPeripheralConnection"
        case .bleStartAdvertising: "CBPeripheralManager.startAdvertising"
        case .bleStopAdvertising: "CBPeripheralManager.stopAdvertising"
        case .accessoryList: "EAAccessoryManager.connectedAccessories"
        case .registerForRemoteNotifications: "UIApplication.registerForRemoteNotifications"
        }
    }
}

/// Location authorization, as `CLAuthorizationStatus`.
public enum LocationAuthorization: String, Codable, Sendable, CaseIterable {
    case notDetermined, denied, whenInUse, always
}

/// One location fix.
public struct LocationFix: Codable, Sendable, Equatable {
    public var latitude: Double
    public var longitude: Double
    public var altitude: Double?
    /// When it was taken (from a GPX `<time>`), if known.
    public var timestamp: Date?

    public init(latitude: Double, longitude: Double, altitude: Double? = nil, timestamp: Date? = nil) {
        self.latitude = latitude
        self.longitude = longitude
        self.altitude = altitude
        self.timestamp = timestamp
    }
}

/// A simulated BLE peripheral as a central sees it.
public struct BLEPeripheral: Codable, Sendable, Equatable {
    /// Its identifier (a UUID string, or any name the world file gives it).
    public var id: String
    public var name: String?
    /// Advertised service UUIDs (upper-case).
    public var services: [String]
    /// Signal strength in dBm.
    public var rssi: Int

    public init(id: String, name: String? = nil, services: [String], rssi: Int = -60) {
        self.id = id
        self.name = name
        self.services = services
        self.rssi = rssi
    }
}

/// A connected external accessory, as `EAAccessory`.
public struct Accessory: Codable, Sendable, Equatable {
    /// `connectionID`.
    public var id: Int
    public var name: String
    /// `protocolStrings` (reverse-DNS, e.g. `com.example.printer`).
    public var protocols: [String]

    public init(id: Int, name: String, protocols: [String]) {
        self.id = id
        self.name = name
        self.protocols = protocols
    }
}

/// The host's answer to a ``ServiceRequest``.
public enum ServiceReply: Codable, Sendable, Equatable {
    /// Done.
    case ok
    /// The location authorization now in force.
    case authorization(LocationAuthorization)
    /// A push token, hex.
    case token(String)
    /// The connected accessories the app may talk to.
    case accessories([Accessory])
    /// Refused; `reason` says why in the terms of the iOS rule (e.g. a missing
    /// background mode or entitlement).
    case refused(reason: String)
}

/// Something the world does to an app, delivered as a callback.
public enum ServiceEvent: Codable, Sendable, Equatable {
    /// `AVAudioSession.interruptionNotification` (began / ended).
    case audioInterruption(began: Bool, reason: String)
    /// `locationManager(_:didUpdateLocations:)`.
    case locationUpdate([LocationFix])
    /// `locationManagerDidChangeAuthorization(_:)`.
    case locationAuthorizationChanged(LocationAuthorization)
    /// `pushRegistry(_:didReceiveIncomingPushWith:for:completion:)`; `payload` is the JSON text.
    case voipPush(payload: String)
    /// `centralManager(_:didDiscover:advertisementData:rssi:)`.
    case bleDiscovered(BLEPeripheral)
    /// `centralManager(_:didConnect:)`.
    case bleConnected(peripheral: String)
    /// `centralManager(_:didDisconnectPeripheral:error:)`.
    case bleDisconnected(peripheral: String)
    /// `peripheral(_:didUpdateValueFor:error:)` for a notifying characteristic.
    case bleNotification(peripheral: String, characteristic: String, value: Data)
    /// `EAAccessoryDidConnect`.
    case accessoryConnected(Accessory)
    /// `EAAccessoryDidDisconnect`.
    case accessoryDisconnected(Accessory)
    /// Bytes on an `EASession`'s input stream.
    case accessoryData(accessory: Accessory, protocolString: String, bytes: Data)

    /// The delegate method's name, for events and logs.
    public var name: String {
        switch self {
        case .audioInterruption(let began, _): began ? "audioInterruption(began)" : "audioInterruption(ended)"
        case .locationUpdate(let fixes): "didUpdateLocations(\(fixes.count))"
        case .locationAuthorizationChanged(let a): "didChangeAuthorization(\(a.rawValue))"
        case .voipPush: "didReceiveIncomingPush(voIP)"
        case .bleDiscovered(let p): "didDiscover(\(p.id))"
        case .bleConnected(let p): "didConnect(\(p))"
        case .bleDisconnected(let p): "didDisconnect(\(p))"
        case .bleNotification(let p, let c, _): "didUpdateValue(\(p) \(c))"
        case .accessoryConnected(let a): "accessoryDidConnect(\(a.name))"
        case .accessoryDisconnected(let a): "accessoryDidDisconnect(\(a.name))"
        case .accessoryData(let a, let proto, let bytes): "EASession(\(a.name) \(proto)) \(bytes.count) bytes"
        }
    }
}

/// A privacy decision (`simctl privacy`).
public enum PrivacyAction: String, Codable, Sendable, CaseIterable {
    case grant, revoke, reset
}

/// A CLI command to the background-mode plugins: privacy, outside events, the
/// simulated worlds (location, BLE, accessories).
public enum ModeCommand: Codable, Sendable, Equatable {
    /// `apphost privacy grant|revoke|reset <service> [<id>]`.
    case privacy(action: PrivacyAction, service: String, bundleIdentifier: String?)
    /// `apphost location set <lat>,<lon>`.
    case locationSet(LocationFix)
    /// `apphost location route <file.gpx>`: fixes played on the host clock, one every
    /// `interval` seconds unless their timestamps say otherwise.
    case locationRoute(name: String, fixes: [LocationFix], interval: Double)
    /// `apphost location clear`: no fix, stop a route.
    case locationClear
    /// `apphost push --type voip <id> <payload>`.
    case voipPush(bundleIdentifier: String, payload: String)
    /// `apphost ble add`: a peripheral appears and advertises.
    case bleAdd(BLEPeripheral)
    /// `apphost ble load <world.json>`: replace the simulated peripherals.
    case bleLoad([BLEPeripheral])
    /// `apphost ble remove <id>`.
    case bleRemove(id: String)
    /// `apphost ble notify <id> <characteristic> <value>`.
    case bleNotify(peripheral: String, characteristic: String, value: Data)
    /// `apphost ble list`: peripherals, scanners, connections and advertisers.
    case bleList
    /// `apphost accessory connect <protocol>... --name N`.
    case accessoryConnect(name: String, protocols: [String])
    /// `apphost accessory disconnect <protocol|id>`.
    case accessoryDisconnect(String)
    /// `apphost accessory send <protocol> <bytes>`.
    case accessorySend(protocolString: String, bytes: Data)
    /// `apphost accessory list`.
    case accessoryList
}
