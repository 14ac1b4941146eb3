import Foundation

/// iOS "Termination Reason" codes the host writes into reports.
public enum TerminationCode: UInt32, Codable, Sendable, CaseIterable {
    /// Watchdog: launch, suspend, resume or an assertion took too long.
    case watchdog = 0x8badf00d
    /// Held a file lock while being suspended.
    case deadlock = 0xdead10cc
    /// A VoIP push was not reported as a call.
    case badCall = 0xbaadca11
    /// The user terminated an unresponsive app.
    case userForceQuit = 0xdeadfa11
    /// A background task did not complete in time.
    case backgroundTaskTimeout = 0x2182bad2
    /// A background URL session did not complete in time.
    case backgroundURLSessionTimeout = 0x2182bad3
    /// A background fetch (or a background notification's fetch completion) did not
    /// complete in time.
    case backgroundFetchTimeout = 0x2182bad4
    /// Thermal event.
    case coolOff = 0xc00010ff

    /// `0x8badf00d` style.
    public var hex: String { "0x" + String(rawValue, radix: 16) }

    /// What the code means (iOS's sense), one line.
    public var meaning: String {
        switch self {
        case .watchdog: "watchdog: the app took too long (launch, willResignActive, didEnterBackground, a blocked main run loop, or background time used up)"
        case .deadlock: "held a file lock outside its container while being suspended"
        case .badCall: "a VoIP push was not reported as an incoming call"
        case .userForceQuit: "the user terminated an app that did not respond to willTerminate"
        case .backgroundTaskTimeout: "a background task did not complete in time"
        case .backgroundURLSessionTimeout: "background URL session events were not completed in time"
        case .backgroundFetchTimeout: "a background fetch or a background notification did not call its completion in time"
        case .coolOff: "thermal event"
        }
    }

    /// What the app's developer should do about it.
    public var advice: String {
        switch self {
        case .watchdog: "return from delegate callbacks quickly, keep the main thread free, and end background tasks (at the latest in their expiration handlers)"
        case .deadlock: "release shared file and database locks before the app is suspended, or hold a background task until they are released"
        case .badCall: "report every VoIP push as a call before the push delegate returns"
        case .userForceQuit: "return from willTerminate promptly"
        case .backgroundTaskTimeout: "end background tasks before their time runs out"
        case .backgroundURLSessionTimeout: "call the stored completion handler after urlSessionDidFinishEvents"
        case .backgroundFetchTimeout: "call the fetch completion handler (performFetch's, or didReceiveRemoteNotification's) within its budget"
        case .coolOff: "reduce work under thermal pressure"
        }
    }
}

/// A background task held when an app was killed.
public struct HeldTaskRecord: Codable, Sendable, Equatable {
    public var id: BackgroundTaskID
    public var name: String?
    /// Seconds since `beginBackgroundTask`.
    public var age: Double
    public init(id: BackgroundTaskID, name: String?, age: Double) {
        self.id = id
        self.name = name
        self.age = age
    }
}

/// The budget a kill enforced.
public struct BudgetRecord: Codable, Sendable, Equatable {
    /// Budget key (`backgroundTask`, `launch`, ...).
    public var name: String
    public var seconds: Double
    /// The profile it came from.
    public var profile: String
    public init(name: String, seconds: Double, profile: String) {
        self.name = name
        self.seconds = seconds
        self.profile = profile
    }
}

/// One entry of an app's recent state history.
public struct StateRecord: Codable, Sendable, Equatable {
    public var state: AppState
    public var time: Date
    public var cause: String
    public init(state: AppState, time: Date, cause: String) {
        self.state = state
        self.time = time
        self.cause = cause
    }
}

/// A termination report, shaped like the header of an iOS crash report.
public struct TerminationReport: Codable, Sendable, Equatable {
    /// Unique id (also the JSON file's name).
    public var id: String
    public var bundleIdentifier: BundleID
    public var pid: Int32
    public var time: Date
    /// `EXC_CRASH (SIGKILL)`, `EXC_CRASH (SIGABRT)`, `EXIT` for a plain exit.
    public var exceptionType: String
    /// Exit status if the process exited.
    public var exitStatus: Int32?
    /// Signal number if a signal ended it.
    public var signal: Int32?
    /// Signal name (`SIGKILL`).
    public var signalName: String?
    /// `RUNNINGBOARD`, `FRONTBOARD`, `HOST` (protocol violations), or nil for a crash.
    public var terminationNamespace: String?
    /// iOS termination code in hex (`0x8badf00d`), when the host killed it for a rule.
    public var terminationCode: String?
    /// As an iOS crash report prints it: `Namespace RUNNINGBOARD, Code 0x8badf00d`.
    public var terminationReason: String?
    /// Human-readable reason.
    public var reason: String
    /// What the code means and what to do, when the host killed the app for a rule.
    public var explanation: String?
    /// Background tasks held at the time, with their ages.
    public var backgroundTasks: [HeldTaskRecord]
    /// The budget in force for the rule that was broken.
    public var budget: BudgetRecord?
    /// The app's last states, oldest first.
    public var lastStates: [StateRecord]
    /// A jetsam kill: the app's memory footprint in bytes when it was chosen, and its
    /// jetsam band (`suspended`, `background`, `backgroundActivity`, `foreground`).
    public var footprint: UInt64?
    public var jetsamBand: String?
    /// The uncaught exception the app aborted for (a programmer error): its name and
    /// reason, as an iOS crash report's "Application Specific Information" gives them.
    public var exception: UncaughtException?

    public init(id: String, bundleIdentifier: BundleID, pid: Int32, time: Date, exceptionType: String,
                exitStatus: Int32?, signal: Int32?, signalName: String?, terminationNamespace: String?,
                terminationCode: String?, reason: String, explanation: String? = nil,
                backgroundTasks: [HeldTaskRecord] = [], budget: BudgetRecord? = nil, lastStates: [StateRecord],
                footprint: UInt64? = nil, jetsamBand: String? = nil, exception: UncaughtException? = nil) {
        self.exception = exception
        self.footprint = footprint
        self.jetsamBand = jetsamBand
        self.id = id
        self.bundleIdentifier = bundleIdentifier
        self.pid = pid
        self.time = time
        self.exceptionType = exceptionType
        self.exitStatus = exitStatus
        self.signal = signal
        self.signalName = signalName
        self.terminationNamespace = terminationNamespace
        self.terminationCode = terminationCode
        self.terminationReason = terminationNamespace.map { ns in "Namespace \(ns)" + (terminationCode.map { ", Code \($0)" } ?? "") }
        self.reason = reason
        self.explanation = explanation
        self.backgroundTasks = backgroundTasks
        self.budget = budget
        self.lastStates = lastStates
    }
}

extension TerminationReport {
    /// The report cut so it fits a control frame whatever the app held: at most
    /// ``AppStatus/maximumListed`` tasks with names of at most ``AppStatus/maximumNameLength``
    /// characters, the reason and the last states' causes cut as well.
    public func boundedForWire() -> TerminationReport {
        func cut(_ text: String, _ limit: Int) -> String {
            text.count > limit ? String(text.prefix(limit)) + "…" : text
        }
        var r = self
        r.backgroundTasks = backgroundTasks.prefix(AppStatus.maximumListed).map {
            HeldTaskRecord(id: $0.id, name: $0.name.map { cut($0, AppStatus.maximumNameLength) }, age: $0.age)
        }
        r.reason = cut(reason, 4096)
        r.explanation = explanation.map { cut($0, 4096) }
        r.exception = exception?.bounded()
        r.lastStates = lastStates.suffix(16).map { StateRecord(state: $0.state, time: $0.time, cause: cut($0.cause, 1024)) }
        return r
    }
}
