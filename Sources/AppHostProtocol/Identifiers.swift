/// An identifier that is a number or a string with a name of its own: a background
/// task's id is not a timer's, nor a transfer's, though all three are integers. Each is
/// coded as its raw value alone (the standard library's `RawRepresentable` coding), so
/// frames, stored JSON and the event log read as they did when these were bare `Int`,
/// `UInt64` and `String`; it prints as the raw value too, so log lines do not change.
/// Hashing and comparing one costs what its raw value's did.
public protocol RawIdentifier: RawRepresentable, Hashable, Comparable, Sendable, Codable, CustomStringConvertible
where RawValue: Hashable & Comparable & Sendable & CustomStringConvertible {
    init(rawValue: RawValue)
}

extension RawIdentifier {
    /// Orders as the raw values do.
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    /// The raw value, as it was printed before it had a type.
    public var description: String { rawValue.description }
}

/// `UIBackgroundTaskIdentifier`: the id the app chose for a task it began with
/// `beginBackgroundTask(name:expirationHandler:)`, unique within its process.
public struct BackgroundTaskID: RawIdentifier {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public init(_ rawValue: Int) { self.rawValue = rawValue }
}

/// An AppKitLess `HostTimer`'s id, chosen by the app, unique among its live timers.
public struct HostTimerID: RawIdentifier {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public init(_ rawValue: Int) { self.rawValue = rawValue }
}

/// A background transfer's number, given by the host: unique across the host's life, the
/// transfer daemon's primary key, the id of the daemon's events about it.
public struct TransferID: RawIdentifier {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
}

/// A background `URLSession`'s identifier
/// (`URLSessionConfiguration.background(withIdentifier:)`), chosen by the app: any string,
/// unique among the app's sessions.
public struct SessionIdentifier: RawIdentifier {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

/// `URLSessionTask.taskIdentifier`: a task's number within its session, given by the host
/// in order (1, 2, ...); the host's ``TransferID`` names the same transfer host-wide.
public struct TransferTaskID: RawIdentifier {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public init(_ rawValue: Int) { self.rawValue = rawValue }
}
