import AppHostProtocol
import AppHostSystem
import Foundation
import HostConfig

/// Settings of one host.
public struct HostConfiguration: Sendable {
    /// The state directory (database, containers, reports, events, control socket).
    public var stateDirectory: String
    /// How long an app may take to exit after `willTerminate` before it is killed.
    public var terminationGracePeriod: Duration = .seconds(5)
    /// Extra directories searched for app executables (before the package's build products).
    public var productDirectories: [String] = []
    /// The seccomp policy applied to apps.
    public var seccomp: SeccompPolicy = .baseline
    /// Real time, or virtual time moved only by ``Supervisor/advanceClock(by:)``.
    public var clock: ClockMode = .real
    /// Where the virtual clock's dates start (nil: the host's start date). A scenario
    /// fixes it so that its events carry the same timestamps on every run.
    public var virtualEpoch: Date?
    /// The budgets in force.
    public var profile: BudgetProfile = .default
    /// With the virtual clock: the safety net, in real time, under every wait for the host
    /// to settle (an app to answer or block, the kernel to confirm a stop). Nothing is
    /// decided by it: when it runs out the run has failed ("the machine did not let ...
    /// answer"), since what follows would depend on the machine's speed.
    public var settleTimeout: Duration = .seconds(60)
    /// Where apps' audio goes: a WAV file in each app's container, or nowhere.
    public var audioSink: AudioSinkKind = .wav
    /// Apply the background-mode kernel rules (AF_BLUETOOTH, sound and serial devices).
    public var modeRules = true
    /// The Landlock ABI apps are confined with at most: nil for whatever the kernel
    /// offers, a lower number to use only what that ABI restricts, 0 for no Landlock.
    /// The host says at startup what is enforced and warns once about what is not.
    public var landlockABI: Int?
    /// A policy restricting Background App Refresh for every app (`backgroundRefreshStatus`
    /// is `restricted`; no fetch, no task, no background launch for silent pushes).
    public var backgroundRefreshRestricted = false
    /// Start the shared transfer daemon (`apphost-transferd`) for background URLSession.
    public var transferDaemon = true
    /// Start it at the first background-session request rather than at host start (unless
    /// transfers are left from a host before): a scenario's private host, which most often
    /// never uses it, then does not pay for its start. Off for `apphost daemon`.
    public var transferDaemonOnDemand = false
    /// The transfer daemon's settings (extra CA, connection limits, retries).
    public var transferSettings = TransferSettings()
    /// Resource limits per app (open files, processes, file size, memory).
    public var limits = LimitSettings()
    /// The host-wide snapshot policy (an app's own policy applies when stricter).
    public var snapshotPolicy: SnapshotPolicy = .default
    /// The screen snapshots are drawn for.
    public var screen: ScreenSize = .default

    /// The push gateway (APNs provider API over HTTP/2), or nil for none.
    public var pushGateway: PushGatewaySettings?
    /// Per-app uids and App Group gids, used when the host runs as root; nil runs every
    /// app as the host's uid (without capabilities), as a host run by a user always does.
    public var identities: IdentitySettings? = .standard
    /// Whether apps of a host without per-app uids (a host run by a user) run in user,
    /// mount, pid and IPC namespaces of their own (``AppNamespaces``), where the kernel
    /// allows them. On by default; `"namespaces": false` in `--config` turns it off.
    public var namespaces = true
    /// What one app can make the host keep or do (message rate, unread replies, tasks, names).
    public var bounds: AppBounds = .standard
    /// When `events.jsonl` is rotated and how many older files are kept.
    public var eventLog = EventLogLimits()
    /// How long a control connection may take to send its request before it is closed
    /// (`events --follow` streams are not timed once streaming).
    public var controlRequestTimeout: Duration = .seconds(10)
    /// Events an `events --follow` client may fall behind before the host drops it (with
    /// a notice): what waits for a client that stops reading is bounded by this, not by
    /// the host's memory (20 such clients once took the host from 82 to 202 MB).
    public var followerBacklog: Int = 4_096
    /// Control connections open at once; one more is answered with an error and closed
    /// (19,990 idle ones once held 8,403 descriptors and 296 MB).
    public var controlConnectionLimit: Int = 256
    /// The bounds of the apps' logs: rotation, rate, the folder's budget (see ``AppLogLimits``).
    public var appLogs: AppLogLimits = .standard
    /// The device's memory (nil: the profile's) and where pressure comes from.
    public var memory = MemorySettings()
    /// With `memory.source` `psi`: the pressure file and the triggers written to it, each
    /// with the level it reports. Windows of 2 s, which an unprivileged host may use too
    /// (kernel 6.5+ refuses others to it): `warning` when tasks stalled on memory 15 % of
    /// the window, `critical` when every task did for half of it.
    public var memoryPSIPath = "/proc/pressure/memory"
    public var memoryPSITriggers: [PSITrigger] = [
        PSITrigger(line: "some 300000 2000000", level: .warning), PSITrigger(line: "full 1000000 2000000", level: .critical),
    ]

    /// With the virtual clock: where the supervisor publishes host time for the host's
    /// own log lines (``HostLogHandler``); nil: log lines show the wall clock only.
    public var logClock: HostLogClock?

    public init(stateDirectory: String) {
        self.stateDirectory = stateDirectory
    }

    var databasePath: String { stateDirectory + "/apphost.sqlite" }
    var eventsPath: String { stateDirectory + "/events.jsonl" }
    var reportsDirectory: String { stateDirectory + "/reports" }
    var containersDirectory: String { stateDirectory + "/containers" }
    /// App Group containers, `groups/<group-id>`.
    var groupsDirectory: String { stateDirectory + "/groups" }
    var logsDirectory: String { stateDirectory + "/logs" }
    /// The control socket's path.
    public var controlSocketPath: String { stateDirectory + "/" + ControlSocket.fileName }
    var lockPath: String { stateDirectory + "/apphost.lock" }
}

/// Where host time comes from.
public enum ClockMode: String, Sendable, Codable, CaseIterable {
    /// The machine's monotonic clock.
    case real
    /// Time moves only when told (`apphost clock advance`).
    case virtual
}

extension HostConfiguration {
    /// Makes the state directory and its folders with explicit modes, whatever the umask:
    /// nothing of the host's is open to apps or other users. With apps under uids of their
    /// own, the state directory and `containers`/`groups` are 0711 (apps pass through to
    /// their own container, 0700 and theirs; nobody lists the apps); else 0700.
    func prepareStateDirectory(separateIdentities: Bool) throws {
        let fm = FileManager.default
        let passThrough: mode_t = separateIdentities ? 0o711 : 0o700
        for (dir, mode) in [(stateDirectory, passThrough), (reportsDirectory, 0o700),
                            (containersDirectory, passThrough), (groupsDirectory, passThrough),
                            (logsDirectory, 0o700), (stateDirectory + "/snapshots", 0o700),
                            (stateDirectory + "/transfers", 0o700)] as [(String, mode_t)] {
            try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
            guard chmod(dir, mode) == 0 else {
                throw IdentityError(description: "cannot set the mode of \(dir): \(String(cString: strerror(errno)))")
            }
        }
    }
}

/// A PSI trigger line (`some|full STALL_US WINDOW_US`) and the pressure level it reports.
public struct PSITrigger: Sendable, Equatable {
    public var line: String
    public var level: MemoryPressureLevel
    public init(line: String, level: MemoryPressureLevel) {
        self.line = line
        self.level = level
    }
}
