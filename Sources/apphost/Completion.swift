import AppHostProtocol
import ArgumentParser
import Foundation
import Host

/// Shell completion (`apphost --generate-completion-script bash|zsh|fish`): bundle ids
/// complete to the apps installed on the state directory the command line (or the
/// environment) selects; privacy services and the other closed lists to their words.
enum Completion {
    /// The installed apps: the running daemon's list, else the state directory's database
    /// (read only), else none.
    static let bundleIdentifiers: CompletionKind = .custom { words, _, prefix in
        installed(stateDirectory: StateOptions.resolve(flag: DeviceArgument.stateDirectoryFlag(words[...])))
            .filter { $0.hasPrefix(prefix) }
    }

    static func installed(stateDirectory: String) -> [String] {
        let client = ControlClient(stateDirectory: stateDirectory)
        if let apps = try? client.collect(.list, { r -> String? in
            if case .app(let app) = r { return app.bundleIdentifier.rawValue }
            return nil
        }) {
            return apps
        }
        return Store.installedBundleIdentifiers(stateDirectory: stateDirectory).map(\.rawValue)
    }
}
