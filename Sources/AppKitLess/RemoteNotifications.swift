import Foundation

/// A remote notification as the app receives it, like the `userInfo` dictionary of
/// `application(_:didReceiveRemoteNotification:fetchCompletionHandler:)`: the JSON
/// payload the sender gave (an object with `aps`), and how it was delivered.
public struct RemoteNotification: Sendable, Equatable, CustomStringConvertible {
    /// The JSON payload, as sent.
    public let json: String
    /// True for a silent (`content-available`) push delivered in the background,
    /// which keeps the app running until its completion is called; false for a
    /// notification that arrived while the app was in front.
    public let isSilent: Bool

    /// Wraps a payload.
    public init(json: String, isSilent: Bool = false) {
        self.json = json
        self.isSilent = isSilent
    }

    /// The payload parsed as a JSON object (`userInfo`); empty if it is not one.
    public var dictionary: [String: Any] {
        guard let data = json.data(using: .utf8),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return [:] }
        return object
    }

    /// `userInfo[key]`: one top-level value of the payload (e.g. `"aps"`).
    public subscript(key: String) -> Any? {
        dictionary[key]
    }

    /// The JSON payload.
    public var description: String { json }
}
