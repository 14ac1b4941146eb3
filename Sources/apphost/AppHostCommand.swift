import AppHostManifest
import AppHostProtocol
import AppHostSystem
import ArgumentParser
import Foundation
import Host
import HostConfig
import Logging
import ServiceLifecycle

/// The entry point is `main.swift` (it chooses the executor before any task runs).
struct AppHostCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apphost",
        abstract: "Run Linux apps under the iOS background-execution model.",
        discussion: """
            A host daemon launches each app (an App.app folder with an Info.plist) as a sandboxed child process, moves it through the iOS states (notRunning, inactive, active, background, suspended) and suspends it with SIGSTOP as soon as it has no reason to run. Drive it as `xcrun simctl` drives a simulator; scripts written for simctl work with few edits (`apphost launch booted <bundle-id>`, see list-devices).

            Quick start:
              apphost run manifests/Plain.app   # host + apps; Ctrl-C stops
              apphost daemon &                  # or a host alone, driven by verbs:
              apphost install manifests/Plain.app
              apphost launch com.example.plain
              apphost background com.example.plain      # home button
              apphost status
              apphost fetch com.example.plain           # simulate a fetch
              apphost push com.example.plain p.apns     # as simctl push
              apphost location set 37.3349,-122.0090    # and privacy, ble, ...
              apphost settings low-power on             # and device, bgtask

            The host's own log: --log-level or $APPHOST_LOG_LEVEL (trace, debug, info, notice, warning, error, critical), on standard error and in host.log in the state directory. Shell completion: apphost --generate-completion-script bash|zsh|fish.
            """,
        subcommands: [
            Run.self, Daemon.self, Install.self, Uninstall.self, List.self, Launch.self,
            Foreground.self, Background.self, Terminate.self, Status.self, Events.self,
            Reports.self, ManifestCommand.self, Shutdown.self, ClockCommand.self, ProfileCommand.self, Demo.self,
            Privacy.self, LocationCommand.self, Push.self, BLECommand.self, AccessoryCommand.self,
            SettingsCommand.self, DeviceCommand.self, FetchCommand.self, BGTaskCommand.self,
            Lint.self, SnapshotCommand.self, Switcher.self, PrivacyCheck.self, Test.self, TimelineCommand.self,
            ListDevices.self, ListApps.self, GetAppContainer.self, IOCommand.self,
        ]
    )
}

// MARK: - Shared options

/// `--state-dir`, with `APPHOST_STATE_DIR` and `$XDG_STATE_HOME/apphost` as fallbacks.
struct StateOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "The host's state directory (database, containers, reports, control socket).",
        discussion: "Default: $APPHOST_STATE_DIR, else $XDG_STATE_HOME/apphost, else ~/.local/state/apphost.",
        valueName: "dir"))
    var stateDir: String?

    var resolved: String { Self.resolve(flag: stateDir) }

    /// The state directory `--state-dir` (`flag`) and the environment select.
    static func resolve(flag: String?, environment env: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let dir = flag { return absolute(dir) }
        if let dir = env["APPHOST_STATE_DIR"], !dir.isEmpty { return absolute(dir) }
        if let xdg = env["XDG_STATE_HOME"], !xdg.isEmpty { return absolute(xdg) + "/apphost" }
        let home = env["HOME"] ?? NSHomeDirectory()
        return home + "/.local/state/apphost"
    }

    var client: ControlClient { ControlClient(stateDirectory: resolved) }

    /// The installed apps, as the daemon lists them (`list`).
    func installedApps() throws -> [InstalledApp] {
        try client.collect(.list) { r -> InstalledApp? in
            if case .app(let app) = r { return app }
            return nil
        }
    }

    /// Sends a request answered with `.ok(message)` and prints the message.
    func perform(_ request: ControlRequest) throws {
        try reportingErrors {
            let r = try client.request(request).checked()
            guard case .ok(let message) = r else { throw unexpected(r) }
            print(message)
        }
    }
}

/// `--setting KEY=VALUE` for build-setting references in manifests.
struct SettingOptions: ParsableArguments {
    @Option(name: .customLong("setting"), help: ArgumentHelp(
        "Value for an Xcode build-setting reference in the manifest, e.g. PRODUCT_BUNDLE_IDENTIFIER=com.example.app (repeatable).",
        valueName: "KEY=VALUE"))
    var settings: [String] = []
    @Option(name: .customLong("xcconfig"), help: ArgumentHelp(
        "An Xcode .xcconfig file to take build settings from, as Xcode reads it (#include, $(inherited), [sdk=...] conditions); repeatable: later files win, --setting wins over them.",
        valueName: "file"))
    var xcconfigs: [String] = []

    func validate() throws {
        for s in settings where !s.contains("=") || s.hasPrefix("=") {
            throw ValidationError("--setting expects KEY=VALUE, got \"\(s)\"")
        }
    }

    var dictionary: [String: String] {
        var out: [String: String] = [:]
        for s in settings {
            let parts = s.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            out[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        return out
    }
}

struct JSONOption: ParsableArguments {
    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false
}

/// Host options shared by `run` and `daemon`.
struct HostOptions: ParsableArguments {
    /// Read in `main.swift`, before any task starts; declared here so that it parses.
    @Flag(name: .long, help: ArgumentHelp("Run Swift Concurrency on NIO's event loops: an idle host then never wakes (libdispatch's worker pool and its 1 Hz monitor never start), but snapshot renders share the loops with the supervisor and delay suspend and resume (see docs/decisions/0008-deadlines-on-a-timerfd.md)."))
    var eventLoopExecutor = false

    @Option(name: .long, help: ArgumentHelp("Seconds an app may take to exit after willTerminate before it is killed.", valueName: "seconds"))
    var gracePeriod: Double = 5

    @Option(name: .long, help: ArgumentHelp("Extra directory to search for app executables (repeatable; also $APPHOST_PRODUCTS_DIR).", valueName: "dir"))
    var productsDir: [String] = []

    @Option(name: .long, help: ArgumentHelp(
        "How much the host logs, to standard error and to host.log in the state directory: trace, debug, info, notice, warning, error or critical (default: $APPHOST_LOG_LEVEL, else info).",
        valueName: "level"))
    var logLevel: Logger.Level?

    /// --log-level, else $APPHOST_LOG_LEVEL (checked by `validate()`), else info.
    var effectiveLogLevel: Logger.Level {
        if let logLevel { return logLevel }
        guard let text = ProcessInfo.processInfo.environment["APPHOST_LOG_LEVEL"], !text.isEmpty else { return .info }
        return (try? Logger.Level.named(text, setting: "APPHOST_LOG_LEVEL")) ?? .info
    }

    @Option(name: .long, help: ArgumentHelp("real, or virtual: time moves only with `apphost clock advance` (policy tests).", valueName: "mode"))
    var clock: ClockMode = .real

    @Option(name: .long, help: ArgumentHelp("Budget profile: ios6 (600 s background tasks), ios7 (180 s), ios13 (30 s, default). `apphost profile show` prints the table.", valueName: "name"))
    var profile: String?

    @Option(name: .long, help: ArgumentHelp("JSON config file: {\"profile\": \"ios7\", \"budgets\": {\"backgroundTask\": \"45s\"}, \"audioSink\": \"wav\" or \"null\", \"transfers\": {\"extraCA\": \"ca.pem\", \"perHost\": 4, \"maxConcurrent\": 16}, \"limits\": {\"openFiles\": 256, \"processes\": 512, \"fileSize\": \"2 GiB\", \"memory\": \"1 GiB\", \"apps\": {\"com.example.big\": {\"memory\": \"2 GiB\"}}}, \"identities\": {\"first\": 200000, \"count\": 100000} (a root host runs each app as a uid of its own from this range; false: as uid 0 without capabilities), \"memory\": {\"device\": \"3 GiB\" (default: the profile's; pressure is the apps' footprints against it), \"source\": \"computed\" or \"psi\" (also the kernel's /proc/pressure/memory triggers)}, \"logs\": {\"fileSize\": \"8 MiB\", \"rate\": \"1 MiB\", \"burst\": \"8 MiB\", \"total\": \"256 MiB\"} (each app's stdout and stderr: rotated at fileSize, rate a second after burst at once, total for all apps' logs)}.", valueName: "file"))
    var config: String?

    @Option(name: .long, help: ArgumentHelp("Virtual clock: the safety net, in real seconds, under each wait for apps to answer or block (a slow app is waited for, a blocked one is not; this only catches a machine too loaded to let an app do either, and then `clock advance` fails).", valueName: "seconds"))
    var settleTimeout: Double = 60

    @Option(name: .long, help: ArgumentHelp("Seconds a control connection may take to send its request before the daemon hangs up (`events --follow` streams are not timed).", valueName: "seconds"))
    var controlTimeout: Double = 10

    @Option(name: .long, help: ArgumentHelp("Serve the APNs provider API (HTTP/2, POST /3/device/<token>) on this address; port 0 picks a free one (written to <state dir>/push-gateway.address).", valueName: "host:port"))
    var pushGateway: String?

    @Option(name: .long, help: ArgumentHelp("PEM certificate chain for the push gateway: it then speaks TLS (ALPN h2) instead of cleartext h2c.", valueName: "file"))
    var pushGatewayCert: String?

    @Option(name: .long, help: ArgumentHelp("PEM private key of --push-gateway-cert.", valueName: "file"))
    var pushGatewayKey: String?

    @Option(name: .long, help: ArgumentHelp("Require APNs provider tokens signed by this key (repeatable, one per key): an ES256 JWT in \"authorization: bearer <jwt>\" whose kid is KEYID, iss TEAMID and iat at most an hour old, else 403 MissingProviderToken, InvalidProviderToken or ExpiredProviderToken. FILE is AuthKey_KEYID.p8 as Apple gives it, or its public key (PEM).", valueName: "keyid:teamid:file"))
    var apnsAuthKey: [String] = []

    @Option(name: .long, help: ArgumentHelp("Require a TLS client certificate chained to these PEM CA certificates (certificate-based provider authentication; needs --push-gateway-cert). A connection without one fails its handshake.", valueName: "file"))
    var apnsClientCa: String?

    @Option(name: .long, help: ArgumentHelp("Confine apps with at most this Landlock ABI (default: the kernel's); 0 turns Landlock off. The host says at startup what is enforced and warns once about what is not.", valueName: "n"))
    var landlockABI: Int?

    func validate() throws {
        if logLevel == nil, let text = ProcessInfo.processInfo.environment["APPHOST_LOG_LEVEL"], !text.isEmpty {
            do { _ = try Logger.Level.named(text, setting: "APPHOST_LOG_LEVEL") } catch { throw ValidationError(error.description) }
        }
        if pushGatewayCert != nil || pushGatewayKey != nil {
            guard pushGatewayCert != nil, pushGatewayKey != nil else { throw ValidationError("--push-gateway-cert and --push-gateway-key go together") }
            guard pushGateway != nil else { throw ValidationError("--push-gateway-cert needs --push-gateway HOST:PORT") }
        }
        if pushGateway == nil, !apnsAuthKey.isEmpty || apnsClientCa != nil {
            throw ValidationError("--apns-auth-key and --apns-client-ca protect the push gateway: give --push-gateway HOST:PORT too")
        }
        if apnsClientCa != nil, pushGatewayCert == nil {
            throw ValidationError("--apns-client-ca needs TLS: give --push-gateway-cert and --push-gateway-key too")
        }
        _ = try pushGatewaySettings()
        guard gracePeriod >= 0, gracePeriod.isFinite else { throw ValidationError("--grace-period must be a non-negative number of seconds") }
        guard settleTimeout > 0, settleTimeout.isFinite else { throw ValidationError("--settle-timeout must be a positive number of seconds") }
        guard controlTimeout > 0, controlTimeout <= 86_400 else { throw ValidationError("--control-timeout must be a positive number of seconds (at most a day)") }
        if let landlockABI, landlockABI < 0 { throw ValidationError("--landlock-abi must be 0 (no Landlock) or an ABI version (1, 2, ...)") }
        _ = try budgets()
    }

    /// The profile in force: --profile, else the config file's, else ios13; config overrides on top.
    func budgets() throws -> BudgetProfile {
        do {
            let file = try config.map { try HostConfigFile.load(path: absolute($0)) }
            return try HostConfigFile.resolve(profile: profile, file: file)
        } catch let error as BudgetError {
            throw ValidationError(error.message)
        }
    }

    func configuration(stateDirectory: String) -> HostConfiguration {
        var config = HostConfiguration(stateDirectory: stateDirectory)
        config.terminationGracePeriod = .milliseconds(Int64(gracePeriod * 1000))
        config.productDirectories = productDirectories
        config.clock = clock
        config.profile = (try? budgets()) ?? .default
        config.settleTimeout = .milliseconds(Int64(settleTimeout * 1000))
        config.controlRequestTimeout = .milliseconds(Int64(controlTimeout * 1000))
        config.pushGateway = try? pushGatewaySettings()
        config.landlockABI = landlockABI
        config.logClock = clock == .virtual ? HostLogClock() : nil
        if let file = (try? self.config.map { try HostConfigFile.load(path: absolute($0)) }) ?? nil {
            if let sink = file.audioSink { config.audioSink = AudioSinkKind(rawValue: sink) ?? .wav }
            config.backgroundRefreshRestricted = file.backgroundRefreshRestricted
            config.transferSettings = file.transfers
            if let policy = file.snapshotPolicy { config.snapshotPolicy = policy }
            if let screen = file.screen { config.screen = screen }
            config.limits = file.limits
            config.memory = file.memory
            if let n = file.logs.fileSize { config.appLogs.fileBytes = Int64(clamping: n) }
            if let n = file.logs.rate { config.appLogs.bytesPerSecond = Int64(clamping: n) }
            if let n = file.logs.burst { config.appLogs.burstBytes = Int64(clamping: n) }
            if let n = file.logs.total { config.appLogs.totalBytes = Int64(clamping: n) }
            if let namespaces = file.namespaces { config.namespaces = namespaces }
            if let ids = file.identities {
                if ids.enabled {
                    let standard = IdentitySettings.standard
                    config.identities = IdentitySettings(first: ids.first ?? standard.first, count: ids.count ?? standard.count,
                                                         registryDirectory: ids.registry ?? standard.registryDirectory)
                } else {
                    config.identities = nil
                }
            }
        }
        return config
    }

    /// --push-gateway (with --push-gateway-cert/-key), or nil.
    func pushGatewaySettings() throws -> PushGatewaySettings? {
        guard let pushGateway else { return nil }
        var settings: PushGatewaySettings
        do {
            settings = try PushGatewaySettings(parsing: pushGateway)
        } catch {
            throw ValidationError(error.description)
        }
        if let cert = pushGatewayCert, let key = pushGatewayKey {
            settings.tls = .init(certificatePath: absolute(cert), privateKeyPath: absolute(key))
        }
        for text in apnsAuthKey {
            do {
                var key = try ProviderKey(parsing: text)
                key.path = absolute(key.path)
                settings.authentication.keys.append(key)
            } catch {
                throw ValidationError(error.description)
            }
        }
        settings.authentication.clientCAPath = apnsClientCa.map(absolute)
        return settings
    }

    var productDirectories: [String] {
        var dirs = productsDir.map(absolute)
        if let env = ProcessInfo.processInfo.environment["APPHOST_PRODUCTS_DIR"], !env.isEmpty {
            dirs.append(absolute(env))
        }
        // The folder holding this apphost binary: sample apps are built beside it.
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            dirs.append((exe as NSString).deletingLastPathComponent)
        }
        return dirs
    }

    func logger(_ label: String) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = effectiveLogLevel
        return logger
    }

    /// Sends this process's log lines (the host's own log) to standard error and to
    /// `host.log` in the state directory, with milliseconds and, on a virtual clock, host
    /// time (the configuration's `logClock`). Once per process, before the first logger
    /// is made.
    func bootstrapLogging(_ configuration: HostConfiguration) {
        let stateDirectory = configuration.stateDirectory
        let clock = configuration.logClock
        let level = effectiveLogLevel
        var file: HostLogFile?
        do {
            try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            file = try HostLogFile(path: stateDirectory + "/" + HostLogFile.fileName)
        } catch {
            // The host reports an unusable state directory itself; the log still goes to stderr.
            FileHandle.standardError.write(Data("apphost: warning: no host.log: \(error)\n".utf8))
        }
        let shared = file
        LoggingSystem.bootstrap { label in
            HostLogHandler(label: label, level: level, file: shared, clock: clock)
        }
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
extension ClockMode: ExpressibleByArgument {}

func absolute(_ path: String) -> String {
    URL(fileURLWithPath: path).standardizedFileURL.path
}

func printJSON<T: Encodable>(_ value: T) throws {
    let data = try WireJSON.encoder(pretty: true).encode(value)
    print(String(decoding: data, as: UTF8.self))
}

/// Runs `body` and turns errors into `apphost: message` with the right exit code.
func reportingErrors(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as CLIError {
        FileHandle.standardError.write(Data("apphost: \(error.description)\n".utf8))
        throw ExitCode(error.exitCode)
    } catch let error as ControlError {
        FileHandle.standardError.write(Data("apphost: \(error.message)\n".utf8))
        switch error.code {
        case .unknownBundle: throw ExitCode(2)
        case .invalidManifest: throw ExitCode(65)  // EX_DATAERR, as `manifest show` and `run`
        default: throw ExitCode(1)
        }
    }
}

extension ControlResponse {
    /// Throws the daemon's error, if that is what this is.
    func checked() throws -> ControlResponse {
        if case .error(let e) = self { throw e }
        return self
    }
}

func unexpected(_ r: ControlResponse) -> CLIError {
    CLIError(description: "unexpected answer from the daemon: \(r)")
}

// MARK: - Host

extension AppHostCommand {
    struct Daemon: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the host alone; other verbs talk to it over the control socket in the state directory.",
            discussion: "Stops gracefully on SIGTERM or Ctrl-C (SIGINT) or `apphost shutdown`: every app gets willTerminate, then is killed after the grace period.")

        @OptionGroup var state: StateOptions
        @OptionGroup var host: HostOptions

        func run() async throws {
            let dir = state.resolved
            let config = host.configuration(stateDirectory: dir)
            host.bootstrapLogging(config)
            let logger = host.logger("apphost.daemon")
            let service = HostService(configuration: config, logger: logger) { _ in
                // Readiness on stdout, once the control socket accepts: scripts wait for this line.
                print("apphost: daemon ready on \(config.controlSocketPath) (pid \(getpid()))")
                if config.pushGateway != nil, let address = PushGateway.boundAddress(stateDirectory: dir) {
                    let tls = config.pushGateway?.tls != nil
                    print("apphost: push gateway on \(tls ? "https" : "http")://\(address) (\(tls ? "h2" : "h2c"))")
                }
                fflush(nil)
            }
            try await runHost(service, logger: logger)
        }
    }

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start a host in the foreground with these apps launched; stream its events.",
            discussion: """
                Installs and launches each bundle in order (each launch brings that app to the foreground, so earlier ones go home and are suspended), then prints every event until Ctrl-C or SIGTERM, when all apps get willTerminate and the host exits. Other verbs (`apphost background <id>`, ...) work against it meanwhile.
                """)

        @Argument(help: ArgumentHelp("App bundles (Name.app folders) or Info.plist files.", valueName: "bundle"))
        var bundles: [String]

        @Flag(name: .long, help: "Launch the apps in the background instead.")
        var background = false

        @OptionGroup var settings: SettingOptions
        @OptionGroup var state: StateOptions
        @OptionGroup var host: HostOptions

        func run() async throws {
            let dir = state.resolved
            let config = host.configuration(stateDirectory: dir)
            let values = try settings.resolvedOrExit()
            // Check every bundle before starting anything.
            for path in bundles {
                let abs = absolute(path)
                do {
                    _ = try AppBundleLoader.load(
                        path: abs, settings: values,
                        productDirectories: AppBundleLoader.defaultProductDirectories(forBundleAt: abs, extra: config.productDirectories))
                } catch {
                    FileHandle.standardError.write(Data("apphost: \(error)\n".utf8))
                    throw ExitCode(65)
                }
            }
            host.bootstrapLogging(config)
            let logger = host.logger("apphost.run")
            let bundles = self.bundles.map(absolute)
            let settings = values
            let background = self.background
            let service = HostService(configuration: config, logger: logger) { supervisor in
                // Announced only once the state directory is ours and the socket accepts.
                print("apphost: host on \(dir); Ctrl-C to stop. Other terminals: apphost status --state-dir \(dir)")
                fflush(nil)
                let (_, live, _) = await supervisor.subscribe(bundleIdentifier: nil)
                let printer = Task {
                    for await event in live {
                        print(EventFormatter.line(event))
                        fflush(nil)
                    }
                }
                for path in bundles {
                    do {
                        let app = try await supervisor.install(path: path, settings: settings)
                        _ = try await supervisor.launch(app.bundleIdentifier, background: background, arguments: [])
                    } catch {
                        logger.error("\(error)")
                    }
                }
                await printer.value
            }
            try await runHost(service, logger: logger)
        }
    }

    struct Shutdown: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Ask the daemon to terminate every app and exit.",
            discussion: DeviceArgument.help("apphost shutdown booted"))
        @OptionGroup var state: StateOptions

        func run() throws { try state.perform(.shutdown) }
    }
}

/// Runs a host service under a ServiceGroup that turns SIGTERM/SIGINT into a graceful shutdown.
func runHost(_ service: HostService, logger: Logger) async throws {
    let group = ServiceGroup(configuration: .init(
        services: [.init(service: service, successTerminationBehavior: .gracefullyShutdownGroup,
                         failureTerminationBehavior: .gracefullyShutdownGroup)],
        gracefulShutdownSignals: [.sigterm, .sigint],
        logger: logger))
    do {
        try await group.run()
    } catch let error as HostStartError {
        FileHandle.standardError.write(Data("apphost: \(error.description)\n".utf8))
        throw ExitCode(75)
    } catch let error as ServiceGroupError {
        FileHandle.standardError.write(Data("apphost: \(error)\n".utf8))
        throw ExitCode(1)
    } catch {
        FileHandle.standardError.write(Data("apphost: \(error)\n".utf8))
        throw ExitCode(1)
    }
}
