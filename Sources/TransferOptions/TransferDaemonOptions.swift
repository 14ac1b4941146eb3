import AppHostProtocol
import ArgumentParser

/// The transfer daemon's command line (`apphost-transferd`), in one place: the daemon
/// parses it, the host renders it (``arguments``) to start the daemon. Defaults are the
/// daemon's own; `validate()` refuses what it cannot run with, and the daemon exits 64
/// (`EX_USAGE`) with the message and its usage.
public struct TransferDaemonOptions: ParsableArguments, Equatable, Sendable {
    /// The most event loops `--event-loops` may ask for.
    public static let eventLoopsRange = 1...64
    /// Received downloads waiting to be finished, at most (`--max-finishing`).
    public static let maxFinishingRange = 1...4096
    /// How often progress is committed, in bytes (`--commit-bytes`): at most every MiB.
    public static let commitBytesRange: ClosedRange<Int64> = 1...(1 << 20)

    /// The daemon's defaults, named once for the options' declarations (what parsing and
    /// `--help` use) and for ``init(stateDirectory:)`` (ArgumentParser's property wrappers
    /// hold no value until parsed or assigned, their declared defaults included).
    private enum Default {
        static let retryBase = 1.0
        static let maxAttempts = 10
        static let perHost = 4
        static let maxConcurrent = 16
        static let maxFinishing = 256
        static let readTimeout = 60.0
        static let commitBytes: Int64 = 512 * 1024
        static let eventLoops = 1
        static let power = DeviceConditions.Power.battery
        static let network = DeviceNetwork.wifi
    }

    @Option(name: .customLong("state-dir"),
            help: ArgumentHelp("The folder that holds the daemon's queue, transfers.sqlite.", valueName: "dir"))
    public var stateDirectory: String

    @Option(name: .customLong("containers"),
            help: ArgumentHelp("""
                The host's containers folder: every file the daemon writes, reads or moves must \
                lie below it, reached through no symbolic link. Without it, paths are used as \
                given (tests, a daemon on its own).
                """, valueName: "dir"))
    public var containers: String?

    @Option(name: .customLong("extra-ca"),
            help: ArgumentHelp("A PEM file of CAs trusted besides the system store (a test server's own CA).",
                               valueName: "file"))
    public var extraCA: String?

    // Numbers take the next argument whatever it is, so that a negative one reaches
    // `validate()` and its message instead of reading as an unknown option.
    @Option(name: .customLong("retry-base"), parsing: .unconditional,
            help: ArgumentHelp("The first retry's delay; each attempt doubles it (up to 5 minutes).",
                               valueName: "seconds"))
    public var retryBase: Double = Default.retryBase

    @Option(name: .customLong("max-attempts"), parsing: .unconditional,
            help: ArgumentHelp("Failed attempts before a transfer fails for good.", valueName: "n"))
    public var maxAttempts: Int = Default.maxAttempts

    @Option(name: .customLong("per-host"), parsing: .unconditional,
            help: ArgumentHelp("Connections to one host at a time.", valueName: "n"))
    public var perHost: Int = Default.perHost

    @Option(name: .customLong("max-concurrent"), parsing: .unconditional,
            help: ArgumentHelp("Transfers running at once across all hosts.", valueName: "n"))
    public var maxConcurrent: Int = Default.maxConcurrent

    @Option(name: .customLong("max-finishing"), parsing: .unconditional,
            help: ArgumentHelp("""
                Received downloads (each an open file) waiting to be synced, moved and recorded, \
                at most (1 to 4096); past it no new attempt starts until a batch is done.
                """, valueName: "n"))
    public var maxFinishing: Int = Default.maxFinishing

    @Option(name: .customLong("read-timeout"), parsing: .unconditional,
            help: ArgumentHelp("No byte on a connection for this long: the attempt is retried.", valueName: "seconds"))
    public var readTimeout: Double = Default.readTimeout

    @Option(name: .customLong("commit-bytes"), parsing: .unconditional,
            help: ArgumentHelp("A transfer's progress is committed and reported at least every this many bytes (1 to 1048576).",
                               valueName: "bytes"))
    public var commitBytes: Int64 = Default.commitBytes

    @Option(name: .customLong("event-loops"), parsing: .unconditional,
            help: ArgumentHelp("""
                NIO event loops the daemon runs on (1 to 64); Swift Concurrency's jobs run on them \
                too. One keeps a transfer's steps on one thread.
                """, valueName: "n"))
    public var eventLoops: Int = Default.eventLoops

    @Option(name: .customLong("power"),
            help: ArgumentHelp("The device's power at the start; later changes come from the host.", valueName: "power"))
    public var power: DeviceConditions.Power = Default.power

    @Option(name: .customLong("network"),
            help: ArgumentHelp("The device's network at the start; later changes come from the host.", valueName: "network"))
    public var network: DeviceNetwork = Default.network

    /// For the parser.
    public init() {}

    /// The daemon's defaults, with its state folder.
    public init(stateDirectory: String) {
        self.stateDirectory = stateDirectory
        containers = nil
        extraCA = nil
        retryBase = Default.retryBase
        maxAttempts = Default.maxAttempts
        perHost = Default.perHost
        maxConcurrent = Default.maxConcurrent
        maxFinishing = Default.maxFinishing
        readTimeout = Default.readTimeout
        commitBytes = Default.commitBytes
        eventLoops = Default.eventLoops
        power = Default.power
        network = Default.network
    }

    public func validate() throws {
        func refuse(_ message: String) -> ValidationError { ValidationError(message) }
        guard !stateDirectory.isEmpty else { throw refuse("--state-dir must name a folder") }
        guard retryBase.isFinite, retryBase >= 0 else {
            throw refuse("--retry-base must be a number of seconds, 0 or more, got \(retryBase)")
        }
        guard maxAttempts >= 1 else { throw refuse("--max-attempts must be at least 1, got \(maxAttempts)") }
        guard perHost >= 1 else { throw refuse("--per-host must be at least 1, got \(perHost)") }
        guard maxConcurrent >= 1 else { throw refuse("--max-concurrent must be at least 1, got \(maxConcurrent)") }
        guard Self.maxFinishingRange.contains(maxFinishing) else {
            throw refuse("--max-finishing must be from 1 to 4096, got \(maxFinishing)")
        }
        guard readTimeout.isFinite, readTimeout > 0 else {
            throw refuse("--read-timeout must be a number of seconds above 0, got \(readTimeout)")
        }
        guard Self.commitBytesRange.contains(commitBytes) else {
            throw refuse("--commit-bytes must be from 1 to 1048576 (1 MiB), got \(commitBytes)")
        }
        guard Self.eventLoopsRange.contains(eventLoops) else {
            throw refuse("--event-loops must be from 1 to 64, got \(eventLoops)")
        }
    }

    /// The command line that parses back to these options: `--state-dir`, then each option
    /// whose value is not the default, in the order of `--help`. The host starts the daemon
    /// with it; no other place spells the daemon's options.
    public var arguments: [String] {
        let standard = TransferDaemonOptions(stateDirectory: stateDirectory)
        var a = ["--state-dir", stateDirectory]
        if let containers { a += ["--containers", containers] }
        if let extraCA { a += ["--extra-ca", extraCA] }
        if retryBase != standard.retryBase { a += ["--retry-base", String(retryBase)] }
        if maxAttempts != standard.maxAttempts { a += ["--max-attempts", String(maxAttempts)] }
        if perHost != standard.perHost { a += ["--per-host", String(perHost)] }
        if maxConcurrent != standard.maxConcurrent { a += ["--max-concurrent", String(maxConcurrent)] }
        if maxFinishing != standard.maxFinishing { a += ["--max-finishing", String(maxFinishing)] }
        if readTimeout != standard.readTimeout { a += ["--read-timeout", String(readTimeout)] }
        if commitBytes != standard.commitBytes { a += ["--commit-bytes", String(commitBytes)] }
        if eventLoops != standard.eventLoops { a += ["--event-loops", String(eventLoops)] }
        if power != standard.power { a += ["--power", power.rawValue] }
        if network != standard.network { a += ["--network", network.rawValue] }
        return a
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.stateDirectory == b.stateDirectory && a.containers == b.containers && a.extraCA == b.extraCA
            && a.retryBase == b.retryBase && a.maxAttempts == b.maxAttempts && a.perHost == b.perHost
            && a.maxConcurrent == b.maxConcurrent && a.maxFinishing == b.maxFinishing && a.readTimeout == b.readTimeout
            && a.commitBytes == b.commitBytes && a.eventLoops == b.eventLoops && a.power == b.power && a.network == b.network
    }
}

// The device's power and network on the command line by the names the control socket
// and `apphost device` use.
extension DeviceConditions.Power: ExpressibleByArgument {}
extension DeviceNetwork: ExpressibleByArgument {}
