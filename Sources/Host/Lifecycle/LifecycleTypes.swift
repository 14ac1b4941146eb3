import AppHostProtocol

// The vocabulary of the lifecycle table (Lifecycle.swift): its events, effects, timers
// and the records it hands the supervisor.
extension Lifecycle {
    /// Where the user (or the system) wants the app.
    public enum Placement: Sendable, Equatable { case foreground, background }

    /// Why the host is terminating an app.
    public enum TerminationCause: Sendable, Equatable {
        /// `apphost terminate` (a swipe in the app switcher).
        case user
        /// The host is shutting down.
        case shutdown
        /// `UIApplicationExitsOnSuspend`.
        case exitsOnSuspend
        /// Uninstall.
        case uninstall
        /// An update installed over the running app (`apphost install`), as an App Store
        /// update terminates it.
        case update
        /// The host killed it for breaking a rule (a watchdog, a file lock, the IPC
        /// protocol, a mode rule). Not the user's doing: what iOS keeps for an app the
        /// user did not swipe away (e.g. its background transfers) it keeps.
        case system
    }

    /// Inputs to the machine.
    public enum Event: Sendable, Equatable {
        case launch(LaunchOptions, placement: Placement)
        /// The process exists (spawn succeeded).
        case spawned(pid: Int32)
        /// The app completed the IPC handshake.
        case handshake
        /// The delegate method of a callback returned.
        case callbackReturned(LifecycleCallback)
        case foreground
        /// Out of the foreground: the home button, another app brought to the front, or
        /// the device locked (`cause` is what the transitions say).
        case leaveForeground(cause: String)
        /// The home button.
        public static let home = Event.leaveForeground(cause: "home button")
        case taskBegan(id: BackgroundTaskID, name: String?)
        case taskEnded(id: BackgroundTaskID)
        /// The kernel reports the process stopped / continued.
        case stopConfirmed
        case continueConfirmed
        case terminate(TerminationCause)
        /// A timer started by ``Effect/startTimer(_:after:)`` ran out.
        case timerFired(Timer)
        /// Suspended (or about to be) while holding a file lock outside its container.
        case lockHeldAtSuspension(String)
        /// The app broke the IPC protocol (garbage, oversized frame, bad handshake).
        case protocolViolation(String)
        /// The process is gone.
        case exited(description: String, clean: Bool)
        /// The kernel killed it for a resource limit (the memory cgroup's OOM killer): the
        /// report of the exit that follows carries `record`.
        case limitExceeded(TerminationRecord)
        /// A background-mode activity that keeps a backgrounded app running began /
        /// ended (audio playing, location updates, a VoIP call).
        case activityBegan(String)
        case activityEnded(String)
        /// Deliver a service event: `wake` lets it wake a suspended app, `launch` lets
        /// it launch a terminated one into the background; otherwise it reaches only
        /// an app that is running code.
        case deliver(ServiceEvent, wake: Bool, launch: LaunchReason?)
        /// The app's host-clock timer `id` fires (``AppTimers``): its block runs as a
        /// ``ServiceEvent/timerFired(id:)`` callback. Only while the app runs code (the
        /// supervisor keeps a fire owed otherwise); queued while it is launching. Not a
        /// wake-up: no wake budget times it (a timer in the background runs while the app
        /// holds a task or an activity, on their budgets).
        case fireTimer(id: HostTimerID)
        /// A plugin's rule was broken, or jetsam chose the app: kill with this report.
        case modeViolation(TerminationRecord)
        /// The device is short of memory: an app running code (launched, not suspended,
        /// not being stopped, not terminating) gets `didReceiveMemoryWarning`; any other
        /// gets nothing, as on iOS.
        case memoryWarning
        /// The hang-check deadline (``Timer/hangCheck``) ran out, and this is what the
        /// host read of the app's main run loop then (see ``HangWatch``).
        case hangCheck(MainRunLoop)
        /// The app said it aborts for this uncaught exception (a programmer error): the
        /// report of the exit that follows carries it (the first of a process counts).
        case exceptionRaised(UncaughtException)
    }

    /// What the host read of an active app's main run loop at a hang check: the app's
    /// run-loop stamp page, as ``HangWatch`` bounds it. Nothing is asked of the app.
    public enum MainRunLoop: Sendable, Equatable {
        /// Nothing to read (no page, or an app that never stamped it): the process is
        /// not watched, and the check is not armed again for it.
        case unwatched(String)
        /// Waiting for work: healthy.
        case idle
        /// In one turn since host time `since` (at most now).
        case busy(since: Duration)
    }

    /// The deadlines the machine asks for. One of each kind at a time per app.
    public enum Timer: String, Sendable, Equatable, CaseIterable {
        /// After willTerminate: kill if still running.
        case grace
        /// didFinishLaunching must return.
        case launch
        /// willResignActive (on the way home) must return.
        case resignCallback
        /// didEnterBackground must return.
        case backgroundCallback
        /// Run the expiration handlers.
        case expirationWarning
        /// Background time is up.
        case backgroundBudget
        /// Read the active app's run-loop stamp: armed at activation for
        /// `foregroundHang`, then again from what it read (``Event/hangCheck(_:)``).
        case hangCheck
        /// A service event an app was woken (or launched) for must be handled.
        case wake
    }

    /// Signals the supervisor may send (the event log's `signal`).
    public typealias Signal = AppSignal

    /// What the supervisor must do.
    public enum Effect: Sendable, Equatable {
        case spawn(LaunchOptions)
        case send(LifecycleCallback, state: AppState)
        case signal(Signal, reason: String)
        case transition(from: AppState, to: AppState, cause: String)
        case startTimer(Timer, after: Duration)
        case cancelTimer(Timer)
        /// Write a termination report for the exit that follows / just happened.
        case report(TerminationRecord)
        case log(String)
    }

    /// What a termination report should say (the supervisor adds pid, status, history).
    public struct TerminationRecord: Sendable, Equatable {
        public var namespace: String?
        public var code: TerminationCode?
        public var reason: String
        public var tasks: [HeldTaskRecord] = []
        public var budget: BudgetRecord? = nil
        /// A jetsam kill: the footprint (bytes) and band that chose the app.
        public var footprint: UInt64? = nil
        public var band: JetsamBand? = nil
        /// The uncaught exception the app aborted for.
        public var exception: UncaughtException? = nil
    }

    /// A background task the app holds.
    public struct HeldTask: Sendable, Equatable {
        public var name: String?
        /// When it was begun (host clock).
        public var began: Duration
    }
}
