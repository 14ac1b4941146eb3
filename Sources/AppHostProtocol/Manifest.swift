import Foundation

/// The 13 documented `UIBackgroundModes` values.
public enum BackgroundMode: String, Codable, Sendable, CaseIterable {
    case audio
    case location
    case voip
    case fetch
    case remoteNotification = "remote-notification"
    case newsstandContent = "newsstand-content"
    case externalAccessory = "external-accessory"
    case bluetoothCentral = "bluetooth-central"
    case bluetoothPeripheral = "bluetooth-peripheral"
    case networkAuthentication = "network-authentication"
    case nearbyInteraction = "nearby-interaction"
    case processing
    case pushToTalk = "push-to-talk"
}

/// A parsed app manifest (Info.plist), with build settings expanded.
public struct Manifest: Codable, Sendable, Equatable {
    /// `CFBundleIdentifier`, expanded.
    public var bundleIdentifier: String
    /// `CFBundleExecutable`, expanded.
    public var executable: String
    /// `CFBundleName`, expanded (falls back to the bundle folder's name).
    public var name: String
    /// `CFBundleDisplayName`, expanded, if present.
    public var displayName: String?
    /// `UIBackgroundModes`, in file order.
    public var backgroundModes: [BackgroundMode]
    /// `BGTaskSchedulerPermittedIdentifiers`, expanded, in file order.
    public var bgTaskIdentifiers: [String]
    /// `UIApplicationExitsOnSuspend`.
    public var exitsOnSuspend: Bool
    /// `UISupportedExternalAccessoryProtocols`.
    public var externalAccessoryProtocols: [String]
    /// The file this manifest was read from.
    public var sourcePath: String
    /// `AppHost` → `SnapshotPolicy` (nil: `default`, unless the host's policy is stricter).
    public var snapshotPolicy: SnapshotPolicy?
    /// `UILaunchImageFile`: a PNG in the bundle, for the `launch-image` policy.
    public var launchImageFile: String?

    /// Creates a manifest; everything but the identity keys and the source path has an empty default.
    public init(bundleIdentifier: String, executable: String, name: String, displayName: String? = nil,
                backgroundModes: [BackgroundMode] = [], bgTaskIdentifiers: [String] = [],
                exitsOnSuspend: Bool = false, externalAccessoryProtocols: [String] = [], sourcePath: String,
                snapshotPolicy: SnapshotPolicy? = nil, launchImageFile: String? = nil) {
        self.bundleIdentifier = bundleIdentifier
        self.executable = executable
        self.name = name
        self.displayName = displayName
        self.backgroundModes = backgroundModes
        self.bgTaskIdentifiers = bgTaskIdentifiers
        self.exitsOnSuspend = exitsOnSuspend
        self.externalAccessoryProtocols = externalAccessoryProtocols
        self.sourcePath = sourcePath
        self.snapshotPolicy = snapshotPolicy
        self.launchImageFile = launchImageFile
    }
}
