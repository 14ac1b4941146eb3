import AppHostProtocol

/// Options handed to ``ApplicationDelegate/didFinishLaunching(_:options:)``: why the
/// app was launched and the arguments given after `--` on `apphost launch`.
public typealias LaunchOptions = AppHostProtocol.LaunchOptions

/// Why the app was launched: `user`, `background` for a launch straight into the
/// background, or the service event it was launched in the background for
/// (`location`, `voipPush`, `bluetoothCentral`, `bluetoothPeripheral`,
/// `externalAccessory`); that event follows `didFinishLaunching` as a delegate
/// call on the service object of its kind, so create that object while launching.
public typealias LaunchReason = AppHostProtocol.LaunchReason
