import AppHostProtocol
import Foundation

/// A policy test as a file: apps, then steps (the CLI's verbs as data) and expectations,
/// run on a private host on the virtual clock. Read by ``ScenarioReader``, run by
/// ``ScenarioRunner``.
public struct Scenario: Sendable, Equatable {
    public var name: String
    /// The file it was read from (absolute), for relative paths and messages.
    public var file: String
    /// The iOS rule it checks and where the rule comes from (Apple's documentation, a DTS answer).
    public var rule: String?
    public var source: String?
    /// The budget profile (`ios13` unless said).
    public var profile: String
    /// Where the virtual clock starts.
    public var epoch: Date
    /// Real time the host waits for apps to answer before each deadline (`settle:`).
    public var settle: Duration
    /// The device's memory in bytes (`deviceMemory: 512 MiB`); nil: the profile's.
    public var deviceMemory: UInt64?
    /// What the machine must offer for the scenario to run (`requires: [root]`); where
    /// it does not, the scenario is skipped, saying why.
    public var requires: [Requirement] = []

    /// A condition of the machine a scenario needs.
    public enum Requirement: String, Sendable, Equatable, CaseIterable {
        /// The host runs as root: apps get uids of their own, so the kernel can refuse
        /// an app a file (data protection) or a signal.
        case root
        /// The host closes protected files while the device is locked: a root host by
        /// per-app uids, a user's host by covers in each app's mount namespace (which
        /// needs the user namespaces the machine may refuse). Known once the host runs.
        case dataProtection = "data-protection"

        /// Why a host running as `uid` does not meet it, or nil (a requirement known only
        /// once the host has started: nil here).
        public func unmet(uid: uid_t = geteuid()) -> String? {
            switch self {
            case .root: uid == 0 ? nil : "needs root (the host must give apps uids of their own); running as uid \(uid)"
            case .dataProtection: nil
            }
        }
    }
    public var apps: [App]
    public var steps: [Step]

    /// An app of the scenario, known by its alias in the steps.
    public struct App: Sendable, Equatable {
        public var alias: String
        /// The bundle (an `.app` folder), absolute.
        public var bundle: String
        /// Arguments for every launch of it (a launch step may give its own).
        public var args: [String]
        /// Build settings for `install --setting` (`$(PRODUCT_BUNDLE_IDENTIFIER)` and the like).
        public var settings: [String: String]
        /// Installed before the first step (`install: false` leaves it to an `install` step).
        public var installFirst: Bool
    }

    /// Where a step is in its file.
    public struct Position: Sendable, Equatable, CustomStringConvertible {
        public var line: Int
        public var column: Int
        public var description: String { "\(line):\(column)" }
    }

    public struct Step: Sendable, Equatable {
        public var action: Action
        public var position: Position
        /// The step as written, on one line and shortened (for reports).
        public var text: String
    }

    public enum Action: Sendable, Equatable {
        case install(app: String)
        case uninstall(app: String)
        case launch(app: String, background: Bool, args: [String]?)
        case foreground(app: String)
        case background(app: String)
        case terminate(app: String)
        /// A system kill (SIGKILL from outside the host), to test background relaunch.
        case kill(app: String)
        case advance(Duration)
        case push(Push)
        case fetch(app: String)
        case bgtask(app: String, run: Bool, identifier: String)
        case mode(ModeCommand, what: String)
        /// `privacy`, for one app (its alias) or every app: the command is made with the
        /// app's bundle id when the step runs.
        case privacy(PrivacyAction, PrivacyScope, app: String?, what: String)
        /// `settings: {backgroundRefresh: on|off, app: alias}`, as ``privacy(_:_:app:what:)``.
        case backgroundRefresh(app: String?, on: Bool, what: String)
        case snapshot(app: String)
        case expect(Expectation)
    }

    public struct Push: Sendable, Equatable {
        public var app: String
        /// The payload's JSON text (inline in the file or read from a `.apns` file).
        public var payload: String
        /// alert, background or voip (nil: as APNs infers it from the payload).
        public var type: String?
        public var priority: Int?
        /// apns-expiration (0: deliver now or never), apns-collapse-id, apns-id.
        public var expiration: Int?
        public var collapseID: String?
        public var apnsID: String?
    }
}

/// What must hold at a point of the host's time.
public struct Expectation: Sendable, Equatable {
    /// Per app alias.
    public var apps: [AppExpectation] = []
    /// Termination reports (each must match one report; `none` for an app: it has none).
    public var reports: [ReportExpectation] = []
    /// Events, by kind and typed fields, with counts.
    public var events: [EventExpectation] = []
    /// The push gateway's answer to the last push step.
    public var push: PushAnswerExpectation?
    /// Host time within which it must come to hold (the clock is moved in small steps).
    public var within: Duration?
    /// The step before was refused by the host, with this reason.
    public var refused: TextMatch?

    public struct AppExpectation: Sendable, Equatable {
        public var alias: String
        public var state: AppState?
        public var process: ProcessState?
        /// Lines the app printed (its log) must contain each of these.
        public var printed: [TextMatch] = []
        /// The app's last snapshot's text layer shows each of `shows` and none of `hides`.
        public var snapshotShows: [String] = []
        public var snapshotHides: [String] = []
        /// How many leaks `apphost privacy-check`'s inspector finds in the app's last
        /// snapshot (text or pixels of a privacy-sensitive view or a secure field).
        public var snapshotLeaks: Int?
        public var backgroundRefreshStatus: String?
    }

    public enum ProcessState: String, Sendable, Equatable, CaseIterable {
        /// Alive and not stopped.
        case running
        /// Stopped by SIGSTOP: `T` in /proc/<pid>/stat.
        case stopped
        /// No process.
        case gone
    }

    public struct ReportExpectation: Sendable, Equatable {
        public var alias: String?
        /// The app must have no report at all.
        public var none = false
        public var code: String?
        public var namespace: String?
        public var reason: TextMatch?
        /// The report's `exceptionType`, exactly (`EXC_CRASH (SIGABRT)`).
        public var exceptionType: String?
        /// The name of the uncaught exception the app aborted for, exactly.
        public var exception: String?
    }

    public struct EventExpectation: Sendable, Equatable {
        public var kind: HostEvent.Kind?
        public var alias: String?
        public var from: AppState?
        public var to: AppState?
        public var callback: String?
        public var signal: String?
        public var confirmed: Bool?
        /// A background task's id (`beginBackgroundTask`'s number) and name.
        public var task: BackgroundTaskID?
        public var taskName: String?
        public var began: Bool?
        public var mode: String?
        public var transfer: TransferNote?
        public var push: UInt64?
        public var fetch: UInt64?
        public var apnsID: String?
        public var result: String?
        /// A remote-notification registration's device token (hex, any case), a
        /// BGTaskScheduler task's identifier, and what its `setTaskCompleted(success:)` said.
        public var deviceToken: String?
        public var bgTask: String?
        public var success: Bool?
        /// A `memory` event's jetsam band and pressure level.
        public var band: String?
        public var pressure: String?
        public var cause: TextMatch?
        public var count: Count = .atLeast(1)
    }

    public enum Count: Sendable, Equatable, CustomStringConvertible {
        case exactly(Int)
        case atLeast(Int)
        case none

        public func holds(_ n: Int) -> Bool {
            switch self {
            case .exactly(let k): return n == k
            case .atLeast(let k): return n >= k
            case .none: return n == 0
            }
        }

        public var description: String {
            switch self {
            case .exactly(let k): return "exactly \(k)"
            case .atLeast(let k): return "at least \(k)"
            case .none: return "none"
            }
        }
    }

    public struct PushAnswerExpectation: Sendable, Equatable {
        public var status: Int?
        public var reason: TextMatch?
    }

    public init() {}
}

/// A text expectation: a plain string (contained), `{contains: ...}`, `{equals: ...}` or `{matches: regex}`.
public enum TextMatch: Sendable, Equatable, CustomStringConvertible {
    case contains(String)
    case equals(String)
    case matches(String)
    /// Any text (`refused: true`).
    case any

    public func holds(_ text: String) -> Bool {
        switch self {
        case .any: return true
        case .contains(let s): return text.contains(s)
        case .equals(let s): return text == s
        case .matches(let pattern):
            guard let regex = try? NSRegularExpression(pattern: pattern) else { return false }
            return regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
        }
    }

    public var description: String {
        switch self {
        case .contains(let s): return "containing \"\(s)\""
        case .equals(let s): return "\"\(s)\""
        case .matches(let s): return "matching /\(s)/"
        case .any: return "for any reason"
        }
    }
}
