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
    /// A background fetch did not complete in time.
    case backgroundFetchTimeout = 0x2182bad4
    /// Thermal event.
    case coolOff = 0xc00010ff

    /// `0x8badf00d` style.
    public var hex: String { "0x" + String(rawValue, radix: 16) }
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
    public var bundleIdentifier: String
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
    /// Human-readable reason.
    public var reason: String
    /// The app's last states, oldest first.
    public var lastStates: [StateRecord]

    public init(id: String, bundleIdentifier: String, pid: Int32, time: Date, exceptionType: String,
                exitStatus: Int32?, signal: Int32?, signalName: String?, terminationNamespace: String?,
                terminationCode: String?, reason: String, lastStates: [StateRecord]) {
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
        self.reason = reason
        self.lastStates = lastStates
    }
}
