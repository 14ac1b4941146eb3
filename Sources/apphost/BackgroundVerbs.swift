import AppHostProtocol
import ArgumentParser
import Foundation

// The verbs of background execution's world: the Settings switches (Background
// App Refresh, Low Power Mode), the device's power and network, background fetch
// (Xcode's Debug > Simulate Background Fetch) and BGTaskScheduler tasks (the
// `_simulateLaunchForTaskWithIdentifier:` debugger calls). Each checks its input,
// sends one `ControlRequest.mode(...)` and prints the daemon's answer.

extension AppHostCommand {
    // MARK: - settings

    struct SettingsCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "settings",
            abstract: "Flip the Settings switches that gate background work: Background App Refresh and Low Power Mode.",
            discussion: """
                As on iOS, an app gets background fetches, BGAppRefreshTask launches and silent \
                pushes in the background only while Background App Refresh is on, both globally \
                (Settings > General > Background App Refresh) and for the app; its \
                UIApplication.backgroundRefreshStatus is denied otherwise. Low Power Mode turns \
                background refresh off for every app (status restricted) until it is off again.

                Examples:
                  apphost settings background-refresh off                    # every app
                  apphost settings background-refresh com.example.app off    # one app
                  apphost settings low-power on
                  apphost settings show
                """,
            subcommands: [BackgroundRefresh.self, LowPower.self, ShowSettings.self])

        struct BackgroundRefresh: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "background-refresh",
                abstract: "Turn Background App Refresh on or off, for every app or for one.",
                usage: "apphost settings background-refresh [<bundle-id>] on|off",
                discussion: """
                    Without a bundle id this is the global switch; with one, the app's own switch. \
                    An app refreshes in the background only when both are on (and Low Power Mode \
                    is off). Running apps see backgroundRefreshStatus change.

                    Examples:
                      apphost settings background-refresh off
                      apphost settings background-refresh com.example.app on
                    """)
            @Argument(help: ArgumentHelp("The app; without it, the global switch.", valueName: "bundle-id"))
            var first: String?
            @Argument(help: ArgumentHelp("on or off.", valueName: "on|off"))
            var second: String?
            @OptionGroup var state: StateOptions

            func run() throws {
                var request = ModeCommand.settingsShow
                try reportingErrors {
                    switch (first, second) {
                    case (let value?, nil):
                        request = .settingsBackgroundRefresh(bundleIdentifier: nil, on: try ModeInput.onOff(value, what: "background-refresh"))
                    case (let id?, let value?):
                        request = .settingsBackgroundRefresh(bundleIdentifier: try ModeInput.bundleID(id), on: try ModeInput.onOff(value, what: "background-refresh \(id)"))
                    default:
                        throw ModeInput.usage("say on or off: apphost settings background-refresh [<bundle-id>] on|off")
                    }
                }
                try state.perform(.mode(request))
            }
        }

        struct LowPower: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "low-power",
                abstract: "Turn Low Power Mode on or off.",
                discussion: """
                    While it is on, background refresh is off for every app (backgroundRefreshStatus \
                    restricted): no background fetches or app-refresh tasks, as on iOS.

                    Examples:
                      apphost settings low-power on
                      apphost settings low-power off
                    """)
            @Argument(help: ArgumentHelp("on or off.", valueName: "on|off"))
            var value: String
            @OptionGroup var state: StateOptions

            func run() throws {
                var on = false
                try reportingErrors { on = try ModeInput.onOff(value, what: "low-power") }
                try state.perform(.mode(.settingsLowPower(on)))
            }
        }

        struct ShowSettings: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "show",
                abstract: "Show the Background App Refresh switches and Low Power Mode.",
                discussion: """
                    --json prints the same as data (docs/json.md).

                    Examples:
                      apphost settings show
                      apphost settings show --json
                    """)
            @OptionGroup var state: StateOptions
            @OptionGroup var output: JSONOption
            func run() throws {
                guard output.json else { return try state.perform(.mode(.settingsShow)) }
                try reportingErrors {
                    guard case .settings(let settings) = try state.query(.settings) else { throw CLIError(description: "unexpected answer from the daemon") }
                    try printJSON(.settings, settings)
                }
            }
        }
    }

    // MARK: - device

    struct DeviceCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "device",
            abstract: "Set the simulated device's power source and network, which BGProcessingTasks wait for, and its memory pressure.",
            discussion: """
                A BGProcessingTaskRequest with requiresExternalPower runs only while the device is \
                plugged in, and one with requiresNetworkConnectivity only while it has a network \
                (`apphost bgtask list` says what each task waits for). The device starts plugged \
                in, on Wi-Fi. `device memory` forces the memory pressure level (memory warnings, \
                jetsam); `device show` prints the device memory, the apps' footprints and the level.

                Examples:
                  apphost device power plugged
                  apphost device network none
                  apphost device memory critical
                  apphost device show
                """,
            subcommands: [Power.self, Network.self, Memory.self, Lock.self, Unlock.self, ShowDevice.self])

        struct Lock: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "lock",
                abstract: "Lock the device: files written with complete data protection close to their apps.",
                discussion: """
                    The app in front goes to the background (willResignActive, \
                    didEnterBackground); apps running code get protectedDataWillBecomeUnavailable; \
                    10 s later, as iOS discards the class key, every file an app wrote with \
                    .completeFileProtection (Data.writeProtected) closes to it until \
                    `apphost device unlock`: opening it fails with EACCES, as on a locked iPhone, \
                    and isProtectedDataAvailable reads false. A root host gives the file to root \
                    (apps have uids of their own); a host run by a user covers it in each app's \
                    own mount namespace, also for apps launched while locked. A host with neither \
                    says it cannot enforce it. A host stopped while locked starts locked, as a \
                    device that booted locked: files of the default class \
                    (completeUntilFirstUserAuthentication) stay closed too until the first unlock.

                    Example: apphost device lock
                    """)
            @OptionGroup var state: StateOptions
            func run() throws { try state.perform(.mode(.deviceLock(true))) }
        }

        struct Unlock: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "unlock",
                abstract: "Unlock the device: protected files open again (protectedDataDidBecomeAvailable).",
                discussion: "Example: apphost device unlock")
            @OptionGroup var state: StateOptions
            func run() throws { try state.perform(.mode(.deviceLock(false))) }
        }

        struct Power: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "power",
                abstract: "Plug the device in or run it on battery.",
                discussion: """
                    Processing tasks that require external power wait while on battery and may \
                    start once plugged in.

                    Examples:
                      apphost device power plugged
                      apphost device power battery
                    """)
            @Argument(help: ArgumentHelp("plugged (external power) or battery.", valueName: "plugged|battery"))
            var source: String
            @OptionGroup var state: StateOptions

            func run() throws {
                var plugged = false
                try reportingErrors { plugged = try ModeInput.choice(source, ["plugged": true, "battery": false], what: "device power") }
                try state.perform(.mode(.devicePower(plugged: plugged)))
            }
        }

        struct Network: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "network",
                abstract: "Put the device on Wi-Fi, on cellular, or offline.",
                discussion: """
                    With none, processing tasks that require network connectivity wait until a \
                    network is back.

                    Examples:
                      apphost device network wifi
                      apphost device network cellular
                      apphost device network none
                    """)
            @Argument(help: ArgumentHelp("wifi, cellular or none.", valueName: "wifi|cellular|none"))
            var network: String
            @OptionGroup var state: StateOptions

            func run() throws {
                var value = DeviceNetwork.wifi
                try reportingErrors {
                    value = try ModeInput.choice(network, ["wifi": .wifi, "cellular": .cellular, "none": .none], what: "device network")
                }
                try state.perform(.mode(.deviceNetwork(value)))
            }
        }

        struct Memory: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "memory",
                abstract: "Force the memory pressure level: warning, critical, or normal (back to the computed level).",
                discussion: """
                    The host computes memory pressure from the apps' footprints (read from the \
                    kernel) against the device's memory ("memory": {"device": "3 GiB"} in --config, \
                    else the profile's): warning from 80 %, critical from 95 %. This command \
                    reports a level as the kernel would, and keeps it until `normal`:

                    warning: every app running code (not suspended) gets didReceiveMemoryWarning.

                    critical: the same, then jetsam kills the least valuable app: suspended apps \
                    least recently used first, then background apps, then apps kept running by \
                    audio, location or a call, the foreground app last (one per command; the \
                    footprints may ask for more). It stays in the app switcher; `apphost \
                    foreground` launches it cold, with LaunchOptions.afterJetsam.

                    normal: hands the level back to the footprints.

                    Each warning and kill is an event of kind memory (`apphost events`), each kill \
                    a JETSAM report (`apphost reports`: vm-pageshortage, footprint and band).

                    Examples:
                      apphost device memory warning
                      apphost device memory critical
                      apphost device memory normal
                    """)
            @Argument(help: ArgumentHelp("normal, warning or critical.", valueName: "normal|warning|critical"))
            var level: String
            @OptionGroup var state: StateOptions

            func run() throws {
                var value = MemoryPressureLevel.normal
                try reportingErrors {
                    value = try ModeInput.choice(level, ["normal": .normal, "warning": .warning, "critical": .critical], what: "device memory")
                }
                try state.perform(.mode(.deviceMemory(value)))
            }
        }

        struct ShowDevice: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "show",
                abstract: "Show the device's power source, network, memory and memory pressure.",
                discussion: """
                    --json prints the same as data (docs/json.md), the memory in bytes.

                    Examples:
                      apphost device show
                      apphost device show --json
                    """)
            @OptionGroup var state: StateOptions
            @OptionGroup var output: JSONOption
            func run() throws {
                guard output.json else { return try state.perform(.mode(.deviceShow)) }
                try reportingErrors {
                    guard case .device(let device) = try state.query(.device) else { throw CLIError(description: "unexpected answer from the daemon") }
                    try printJSON(.device, device)
                }
            }
        }
    }

    // MARK: - fetch

    /// `fetch <id>` is `fetch now <id>` (the default subcommand); `fetch schedule` the schedule.
    struct FetchCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "fetch",
            abstract: "Trigger a background fetch now (Xcode's Simulate Background Fetch), or show the fetch schedule.",
            usage: """
                apphost fetch [now] <bundle-id>
                apphost fetch schedule
                """,
            discussion: """
                `apphost fetch <bundle-id>` (short for `apphost fetch now <bundle-id>`) does what \
                Xcode's Debug > Simulate Background Fetch does: the app is woken, or launched in \
                the background, and its performFetch(completionHandler:) is called once, within \
                the fetch budget (`apphost profile show`). The app needs "fetch" in \
                UIBackgroundModes.

                `apphost fetch schedule` lists each app's next background fetch and why then: \
                its minimum interval (setMinimumBackgroundFetchInterval), how its last fetches \
                went, and whether Background App Refresh lets it run at all.

                Examples:
                  apphost fetch com.example.app
                  apphost fetch now com.example.app
                  apphost fetch schedule
                """,
            subcommands: [Now.self, Schedule.self],
            defaultSubcommand: Now.self)

        struct Now: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "now",
                abstract: "Give an app one background fetch now (`apphost fetch <bundle-id>` for short).",
                usage: "apphost fetch [now] <bundle-id>",
                discussion: """
                    Examples:
                      apphost fetch com.example.app
                      apphost fetch now com.example.app
                    """)
            @Argument(help: ArgumentHelp("The app.", valueName: "bundle-id"))
            var bundleIdentifier: String?
            // ArgumentParser picks a subcommand only from the first word after `fetch`;
            // with an option first (`fetch --state-dir D schedule`, `fetch --state-dir D
            // now <id>`) the words land here, and mean what they say.
            @Argument(help: ArgumentHelp(visibility: .private))
            var rest: String?
            @OptionGroup var state: StateOptions
            @OptionGroup var output: JSONOption

            func run() throws {
                var request = ModeCommand.fetchSchedule
                try reportingErrors {
                    switch (bundleIdentifier, rest) {
                    case ("schedule"?, nil):
                        request = .fetchSchedule
                    case (nil, _), ("now"?, nil):
                        throw ModeInput.usage("give an app: apphost fetch <bundle-id> (or apphost fetch schedule)")
                    case ("now"?, let id?), (let id?, nil):
                        request = .fetchNow(bundleIdentifier: try ModeInput.bundleID(id))
                    case (let id?, let extra?):
                        throw ModeInput.usage("one app at a time: apphost fetch \(id), then apphost fetch \(extra)")
                    }
                    if output.json, request != .fetchSchedule {
                        throw ModeInput.usage("--json is for the schedule: apphost fetch schedule --json")
                    }
                }
                if output.json { return try printFetchSchedule(state) }
                try state.perform(.mode(request))
            }
        }

        struct Schedule: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "schedule",
                abstract: "Show each app's next background fetch and why.",
                discussion: """
                    --json prints the same as data (docs/json.md), times in seconds.

                    Examples:
                      apphost fetch schedule
                      apphost fetch schedule --json
                    """)
            @OptionGroup var state: StateOptions
            @OptionGroup var output: JSONOption
            func run() throws {
                guard output.json else { return try state.perform(.mode(.fetchSchedule)) }
                try printFetchSchedule(state)
            }
        }
    }

    // MARK: - bgtask

    struct BGTaskCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "bgtask",
            abstract: "Launch or expire an app's BGTaskScheduler tasks, as the debugger's _simulateLaunch/_simulateExpiration.",
            discussion: """
                Apple's way to test a BGAppRefreshTask or BGProcessingTask is to pause in the \
                debugger after submitting it and send [BGTaskScheduler sharedScheduler] \
                _simulateLaunchForTaskWithIdentifier:@"<id>" (or \
                _simulateExpirationForTaskWithIdentifier:). These verbs do the same. The \
                identifier must be listed in the app's BGTaskSchedulerPermittedIdentifiers and \
                registered by the app.

                Examples:
                  apphost bgtask run com.example.app com.example.app.refresh
                  apphost bgtask expire com.example.app com.example.app.refresh
                  apphost bgtask list
                """,
            subcommands: [RunTask.self, ExpireTask.self, ListTasks.self])

        struct RunTask: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "run",
                abstract: "Launch a task now (_simulateLaunchForTaskWithIdentifier:).",
                discussion: """
                    The app is woken, or launched in the background, and its launch handler for \
                    the identifier is called, whatever the request's earliestBeginDate.

                    Example: apphost bgtask run com.example.app com.example.app.refresh
                    """)
            @Argument(help: ArgumentHelp("The app.", valueName: "bundle-id"))
            var bundleIdentifier: String
            @Argument(help: ArgumentHelp("The task identifier, as registered and in BGTaskSchedulerPermittedIdentifiers.", valueName: "task-identifier"))
            var identifier: String
            @OptionGroup var state: StateOptions

            func run() throws {
                var app: BundleID?
                try reportingErrors { app = try ModeInput.checkTask(bundleIdentifier, identifier) }
                guard let app else { return }
                try state.perform(.mode(.bgTaskRun(bundleIdentifier: app, identifier: identifier)))
            }
        }

        struct ExpireTask: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "expire",
                abstract: "Expire a running task now (_simulateExpirationForTaskWithIdentifier:).",
                discussion: """
                    The task's expirationHandler is called; the app should then call \
                    setTaskCompleted(success:) promptly.

                    Example: apphost bgtask expire com.example.app com.example.app.refresh
                    """)
            @Argument(help: ArgumentHelp("The app.", valueName: "bundle-id"))
            var bundleIdentifier: String
            @Argument(help: ArgumentHelp("The identifier of the running task.", valueName: "task-identifier"))
            var identifier: String
            @OptionGroup var state: StateOptions

            func run() throws {
                var app: BundleID?
                try reportingErrors { app = try ModeInput.checkTask(bundleIdentifier, identifier) }
                guard let app else { return }
                try state.perform(.mode(.bgTaskExpire(bundleIdentifier: app, identifier: identifier)))
            }
        }

        struct ListTasks: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "list",
                abstract: "Show pending and running tasks and what each waits for, for every app or one.",
                discussion: """
                    --json prints the same as data (docs/json.md), times in seconds.

                    Examples:
                      apphost bgtask list
                      apphost bgtask list com.example.app
                      apphost bgtask list --json
                    """)
            @Argument(help: ArgumentHelp("Only this app.", valueName: "bundle-id"))
            var bundleIdentifier: String?
            @OptionGroup var state: StateOptions
            @OptionGroup var output: JSONOption

            func run() throws {
                var app: BundleID?
                try reportingErrors { app = try bundleIdentifier.map { text throws(CLIError) in try ModeInput.bundleID(text) } }
                if output.json {
                    return try reportingErrors {
                        guard case .bgTasks(let tasks) = try state.query(.bgTasks(bundleIdentifier: app)) else {
                            throw CLIError(description: "unexpected answer from the daemon")
                        }
                        try printJSON(.bgtaskList, tasks)
                    }
                }
                try state.perform(.mode(.bgTaskList(bundleIdentifier: app)))
            }
        }
    }
}

/// `fetch schedule --json`.
private func printFetchSchedule(_ state: StateOptions) throws {
    try reportingErrors {
        guard case .fetchSchedule(let schedule) = try state.query(.fetchSchedule) else {
            throw CLIError(description: "unexpected answer from the daemon")
        }
        try printJSON(.fetchSchedule, schedule)
    }
}

extension ModeInput {
    /// The app and task operands of `bgtask run|expire`, checked: the app as a bundle id.
    static func checkTask(_ bundleIdentifier: String, _ identifier: String) throws(CLIError) -> BundleID {
        let app = try bundleID(bundleIdentifier)
        guard !identifier.isEmpty, !identifier.contains(where: \.isWhitespace) else {
            throw usage("\"\(identifier)\" is not a task identifier (as in BGTaskSchedulerPermittedIdentifiers, e.g. com.example.app.refresh)")
        }
        return app
    }
}
