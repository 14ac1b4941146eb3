import AppHostProtocol
import ArgumentParser
import Foundation
import Host

// The verbs named after simctl's own, for scripts written for `xcrun simctl`:
// list-devices (`simctl list devices`), listapps, get_app_container and io screenshot.
// The device argument they take is handled in DeviceArgument.swift.

extension AppHostCommand {
    struct ListDevices: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list-devices",
            abstract: "Show this host's device, as `simctl list devices`: its name, UDID and state.",
            discussion: """
                A state directory is one device. Its UDID is made once and kept in the state directory (\(DeviceIdentity.fileName)); its name is "AppHost" and the directory's name. Booted means a host daemon runs on the state directory; Shutdown, that none does. Scripts written for simctl name the device by booted, this name or this UDID (`apphost launch booted <bundle-id>`).

                --json prints {"version": 1, "devices": [{"name", "udid", "state", "isAvailable", "stateDirectory", "pid"}]} (pid null when Shutdown). A state directory no host has used has no device yet: the list is empty and nothing is created.

                Example:
                  apphost list-devices --state-dir /tmp/ah
                """)
        @OptionGroup var state: StateOptions
        @OptionGroup var output: JSONOption

        struct Device: Encodable {
            var name: String
            var udid: String
            var state: String
            var isAvailable = true
            var stateDirectory: String
            var pid: Int32?

            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(name, forKey: .name)
                try c.encode(udid, forKey: .udid)
                try c.encode(state, forKey: .state)
                try c.encode(isAvailable, forKey: .isAvailable)
                try c.encode(stateDirectory, forKey: .stateDirectory)
                try c.encode(pid, forKey: .pid)  // null when Shutdown
            }
            enum CodingKeys: String, CodingKey { case name, udid, state, isAvailable, stateDirectory, pid }
        }


        func run() throws {
            try reportingErrors {
                let dir = state.resolved
                var devices: [Device] = []
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory), isDirectory.boolValue {
                    let identity: DeviceIdentity
                    do throws(DeviceIdentityError) {
                        identity = try DeviceIdentity.loadOrCreate(stateDirectory: dir)
                    } catch {
                        throw CLIError(description: error.description)
                    }
                    var pid: Int32?
                    if let r = try? state.client.request(.ping(version: ControlSocket.version)) {
                        if case .pong(let p, _) = r { pid = p } else { pid = 0 }
                    }
                    devices.append(Device(name: identity.name, udid: identity.udid, state: pid == nil ? "Shutdown" : "Booted",
                                          stateDirectory: dir, pid: pid == 0 ? nil : pid))
                }
                if output.json { return try printJSON(.listDevices, devices) }
                print("== Devices ==")
                print("-- AppHost: \(dir) --")
                if devices.isEmpty {
                    print("    (none: no host has used \(dir) yet; `apphost daemon --state-dir \(dir)` starts one)")
                }
                for d in devices {
                    print("    \(d.name) (\(d.udid)) (\(d.state))")
                }
            }
        }
    }

    struct ListApps: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "listapps",
            abstract: "List the installed apps with their bundle and containers, as `simctl listapps`.",
            discussion: """
                Prints what simctl prints, an old-style property list keyed by bundle identifier, with ApplicationType, Bundle, CFBundleDisplayName, CFBundleExecutable, CFBundleIdentifier, CFBundleName, DataContainer, GroupContainers, Path and UIBackgroundModes. `apphost list` prints the same apps as a table.

                --json prints {"version": 1, "apps": [{"bundleIdentifier", "name", "displayName", "executable", "bundlePath", "dataContainer", "groupContainers": {"<group id>": "<path>"}, "backgroundModes", "installedAt"}]}.

                \(DeviceArgument.help("apphost listapps booted"))
                """)
        @OptionGroup var state: StateOptions
        @OptionGroup var output: JSONOption

        struct App: Encodable {
            var bundleIdentifier: String
            var name: String
            var displayName: String?
            var executable: String
            var bundlePath: String
            var dataContainer: String
            var groupContainers: [String: String]
            var backgroundModes: [String]
            var installedAt: Date

            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(bundleIdentifier, forKey: .bundleIdentifier)
                try c.encode(name, forKey: .name)
                try c.encode(displayName, forKey: .displayName)  // null when the manifest has none
                try c.encode(executable, forKey: .executable)
                try c.encode(bundlePath, forKey: .bundlePath)
                try c.encode(dataContainer, forKey: .dataContainer)
                try c.encode(groupContainers, forKey: .groupContainers)
                try c.encode(backgroundModes, forKey: .backgroundModes)
                try c.encode(installedAt, forKey: .installedAt)
            }
            enum CodingKeys: String, CodingKey {
                case bundleIdentifier, name, displayName, executable, bundlePath, dataContainer, groupContainers, backgroundModes, installedAt
            }
        }


        func run() throws {
            try reportingErrors {
                let config = HostConfiguration(stateDirectory: state.resolved)
                let apps = try state.installedApps().map { app in
                    App(bundleIdentifier: app.bundleIdentifier.rawValue, name: app.name, displayName: app.manifest.displayName,
                        executable: app.executablePath, bundlePath: app.bundlePath,
                        dataContainer: config.dataContainer(of: app.bundleIdentifier),
                        groupContainers: Dictionary((app.applicationGroups ?? []).map { ($0, config.groupContainer($0)) },
                                                    uniquingKeysWith: { first, _ in first }),
                        backgroundModes: app.backgroundModes.map(\.rawValue), installedAt: app.installedAt)
                }
                if output.json { return try printJSON(.listapps, apps) }
                print(OpenStepPlist.text(apps.map { app in
                    var entries: [(String, OpenStepPlist.Value)] = [
                        ("ApplicationType", .string("User")),
                        ("Bundle", .string(fileURL(app.bundlePath, directory: true))),
                    ]
                    if let display = app.displayName { entries.append(("CFBundleDisplayName", .string(display))) }
                    entries += [
                        ("CFBundleExecutable", .string((app.executable as NSString).lastPathComponent)),
                        ("CFBundleIdentifier", .string(app.bundleIdentifier)),
                        ("CFBundleName", .string(app.name)),
                        ("DataContainer", .string(fileURL(app.dataContainer, directory: true))),
                    ]
                    if !app.groupContainers.isEmpty {
                        entries.append(("GroupContainers", .dictionary(app.groupContainers.sorted { $0.key < $1.key }
                            .map { ($0.key, .string(fileURL($0.value, directory: true))) })))
                    }
                    entries.append(("Path", .string(app.bundlePath)))
                    if !app.backgroundModes.isEmpty { entries.append(("UIBackgroundModes", .array(app.backgroundModes))) }
                    return (app.bundleIdentifier, .dictionary(entries))
                }))
            }
        }

        private func fileURL(_ path: String, directory: Bool) -> String {
            URL(fileURLWithPath: path, isDirectory: directory).absoluteString
        }
    }

    struct GetAppContainer: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "get_app_container",
            abstract: "Print the path of an installed app's bundle, data container or App Group containers, as simctl.",
            discussion: """
                The container is app (the bundle, the default), data (the app's HOME: Documents, Library, tmp), groups (each App Group of its com.apple.security.application-groups entitlement, one line each: the group identifier, a tab, the path) or one App Group identifier (group.com.example.shared). The data container exists once the app has been launched.

                Examples:
                  apphost get_app_container booted com.example.app data
                  cat "$(apphost get_app_container com.example.app data)/Documents/state.json"

                \(DeviceArgument.help("apphost get_app_container booted com.example.app data"))
                """)
        @Argument(help: ArgumentHelp("The app.", valueName: "bundle-id")) var bundleIdentifier: BundleID
        @Argument(help: ArgumentHelp("app, data, groups, or an App Group identifier.", valueName: "container"),
                  completion: .list(["app", "data", "groups"]))
        var container: String = "app"
        @OptionGroup var state: StateOptions

        func validate() throws {
            guard ["app", "data", "groups"].contains(container) || container.hasPrefix("group.") else {
                throw ValidationError("unknown container \"\(container)\": one of app, data, groups, or an App Group identifier (group.…)")
            }
        }

        func run() throws {
            try reportingErrors {
                let config = HostConfiguration(stateDirectory: state.resolved)
                let apps = try state.installedApps()
                guard let app = apps.first(where: { $0.bundleIdentifier == bundleIdentifier }) else {
                    let installed = apps.map(\.bundleIdentifier.rawValue)
                    throw ControlError(.unknownBundle, "unknown bundle id \"\(bundleIdentifier)\" ("
                        + (installed.isEmpty ? "no apps are installed" : "installed: \(installed.joined(separator: ", "))") + ")")
                }
                let groups = app.applicationGroups ?? []
                switch container {
                case "app": print(app.bundlePath)
                case "data": print(config.dataContainer(of: bundleIdentifier))
                case "groups":
                    for group in groups { print("\(group)\t\(config.groupContainer(group))") }
                default:
                    guard groups.contains(container) else {
                        throw CLIError(description: "\(bundleIdentifier) is not in App Group \"\(container)\" ("
                            + (groups.isEmpty ? "it has none" : "its groups: \(groups.joined(separator: ", "))") + ")", exitCode: 2)
                    }
                    print(config.groupContainer(container))
                }
            }
        }
    }

    struct IOCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "io",
            abstract: "The device's screen, as `simctl io`: take a screenshot.",
            discussion: DeviceArgument.help("apphost io booted screenshot shot.png"),
            subcommands: [Screenshot.self])

        struct Screenshot: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Write the screen as a PNG file: the app in front, as the user sees it now.",
                discussion: """
                    The app in front (active, or inactive in the foreground) is drawn from its window as it is now. No snapshot policy applies: this is the screen, not the app switcher's picture (`apphost snapshot` is that). With no app in front (the home screen) there is nothing to draw: exit 1. The file is replaced whole if it exists (a directory is refused); - writes the PNG to standard output.

                    Examples:
                      apphost io booted screenshot screen.png
                      apphost io screenshot - > screen.png
                    """)
            @Option(name: .long, help: ArgumentHelp("The image format: png (the only one AppHost writes; simctl's default).", valueName: "png"),
                    completion: .list(["png"]))
            var type: String = "png"
            @Argument(help: ArgumentHelp("The PNG file to write, or - for standard output.", valueName: "file"), completion: .file(extensions: ["png"]))
            var file: String
            @OptionGroup var state: StateOptions

            private var output: OutputFile { OutputFile(file, example: "screen.png") }

            func validate() throws {
                guard type.lowercased() == "png" else {
                    throw ValidationError("--type \(type): AppHost writes PNG only (--type png)")
                }
                if file != "-" {
                    do throws(OutputFile.Failure) { try output.check() } catch { throw ValidationError(error.description) }
                }
            }

            func run() throws {
                try reportingErrors {
                    let r = try state.client.request(.screenshot).checked()
                    guard case .screenshot(let info) = r else { throw unexpected(r) }
                    do throws(OutputFile.Failure) {
                        let bytes = try OutputFile.read(info.png)
                        if file == "-" {
                            FileHandle.standardOutput.write(Data(bytes))
                            return
                        }
                        try output.write(bytes)
                    } catch {
                        throw CLIError(description: error.description)
                    }
                    print("Wrote screenshot of \(info.bundleIdentifier) (\(info.width)×\(info.height)) to: \(file)")
                }
            }
        }
    }
}

/// simctl's output format for `listapps`: an old-style (OpenStep) property list.
enum OpenStepPlist {
    indirect enum Value {
        case string(String)
        case array([String])
        case dictionary([(String, Value)])
    }

    /// `{ key = value; ... }` with simctl's indentation.
    static func text(_ entries: [(String, Value)]) -> String {
        render(.dictionary(entries), indent: 0)
    }

    private static func render(_ value: Value, indent: Int) -> String {
        let pad = String(repeating: " ", count: indent)
        switch value {
        case .string(let s):
            return quoted(s)
        case .array(let items):
            return "(\n" + items.map { pad + "    " + quoted($0) }.joined(separator: ",\n") + "\n" + pad + ")"
        case .dictionary(let entries):
            var out = "{\n"
            for (key, value) in entries {
                let rendered = render(value, indent: indent + 4)
                let gap = if case .string = value { " " } else { "     " }
                out += pad + "    " + quoted(key) + " =" + gap + rendered + ";\n"
            }
            return out + pad + "}"
        }
    }

    /// Bare when only ASCII letters, digits and `_` (as simctl prints `ApplicationType =
    /// User;` but `CFBundleIdentifier = "com.example.app";`), else quoted with `\` and `"`
    /// escaped.
    static func quoted(_ s: String) -> String {
        let bare = !s.isEmpty && s.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "_") }
        if bare { return s }
        var out = "\""
        for c in s {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out + "\""
    }
}
