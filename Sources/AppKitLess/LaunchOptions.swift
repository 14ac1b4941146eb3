import AppHostProtocol

/// Options handed to ``ApplicationDelegate/didFinishLaunching(_:options:)``: why the
/// app was launched and the arguments given after `--` on `apphost launch`.
public typealias LaunchOptions = AppHostProtocol.LaunchOptions

/// Why the app was launched (`user`, or `background` for a launch straight into the background).
public typealias LaunchReason = AppHostProtocol.LaunchReason
