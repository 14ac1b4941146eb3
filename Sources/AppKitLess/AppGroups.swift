import AppHostProtocol
import Foundation

extension FileManager {
    /// The shared container of the App Group `groupIdentifier`, as on iOS: a folder
    /// every app of the group may read and write (and lock files in: a lock held
    /// there when the app is suspended gets it killed with 0xdead10cc, as on iOS).
    ///
    /// Returns nil when the app does not belong to the group, that is when its
    /// bundle's `com.apple.security.application-groups` entitlement does not list
    /// it, or when the app runs outside a host. The host creates the folder
    /// (`<state>/groups/<group-id>`) before it launches the app.
    ///
    /// Foundation on Linux has no such method, so this one is AppKitLess's;
    /// the call reads as the iOS one:
    /// `FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: "group.com.example.shared")`.
    public func containerURL(forSecurityApplicationGroupIdentifier groupIdentifier: String) -> URL? {
        guard let path = ApplicationGroupContainers.fromEnvironment[groupIdentifier] else { return nil }
        return URL(fileURLWithPath: path, isDirectory: true)
    }
}

/// The App Group containers the host passed in the environment.
enum ApplicationGroupContainers {
    /// Group identifier → container path, read once; empty when none were passed
    /// or the variable does not parse.
    static let fromEnvironment: [String: String] = {
        let key = IPCProtocol.applicationGroupContainersEnvironmentKey
        guard let text = ProcessInfo.processInfo.environment[key] else { return [:] }
        return parse(text)
    }()

    /// Parses the variable's JSON object (group identifier → absolute path).
    static func parse(_ text: String) -> [String: String] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)),
              let map = object as? [String: String] else { return [:] }
        return map.filter { $0.value.hasPrefix("/") }
    }
}
