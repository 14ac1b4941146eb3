import Foundation

/// The name of an exception iOS raises for a programmer error (`NSExceptionName`):
/// `NSInternalInconsistencyException`, `NSInvalidArgumentException`, `NSGenericException`.
/// Encoded as its string.
public struct ExceptionName: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
    public var description: String { rawValue }

    /// `NSInternalInconsistencyException`: an API used in a state it does not allow.
    public static let internalInconsistency = ExceptionName(rawValue: "NSInternalInconsistencyException")
    /// `NSInvalidArgumentException`: an argument an API does not take.
    public static let invalidArgument = ExceptionName(rawValue: "NSInvalidArgumentException")
    /// `NSGenericException`: what URLSession raises for calls a background session refuses.
    public static let generic = ExceptionName(rawValue: "NSGenericException")
}

/// An uncaught exception that ends an app, as iOS's crash report gives it: the name
/// and the reason. AppKitLess raises it for a programmer error — it tells the host, writes
/// iOS's "*** Terminating app due to uncaught exception" line and calls `abort()`, so the
/// process ends with `SIGABRT` (`EXC_CRASH (SIGABRT)`) — and the host's termination report
/// carries it.
public struct UncaughtException: Codable, Sendable, Equatable {
    /// Longest name and reason kept (longer ones are cut, with "…").
    public static let maximumNameLength = 256
    public static let maximumReasonLength = 4096

    public var name: ExceptionName
    public var reason: String

    public init(name: ExceptionName, reason: String) {
        self.name = name
        self.reason = reason
    }

    /// The line iOS writes before aborting:
    /// `*** Terminating app due to uncaught exception 'NAME', reason: 'REASON'`.
    public var terminationMessage: String {
        "*** Terminating app due to uncaught exception '\(name.rawValue)', reason: '\(reason)'"
    }

    /// Cut to ``maximumNameLength`` and ``maximumReasonLength`` characters: what the host
    /// keeps of what an app says.
    public func bounded() -> UncaughtException {
        func cut(_ text: String, _ limit: Int) -> String {
            text.count > limit ? String(text.prefix(limit)) + "…" : text
        }
        return UncaughtException(name: ExceptionName(rawValue: cut(name.rawValue, Self.maximumNameLength)),
                                 reason: cut(reason, Self.maximumReasonLength))
    }
}
