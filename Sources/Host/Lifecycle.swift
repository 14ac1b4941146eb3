import AppHostProtocol

/// One app's lifecycle as a pure value: `handle(event) -> [Effect]`.
///
/// Every rule of the iOS model that concerns states lives here, in one place, and is
/// tested without processes. The ``Supervisor`` feeds events (user requests, IPC
/// messages, kernel reports) and performs the effects (spawn, send a delegate
/// callback, signal, record a transition, write a report).
///
/// States: notRunning → inactive → active ⇄ inactive → background → suspended, and
/// notRunning → background for background launches.
public struct Lifecycle: Sendable, Equatable {
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
        case home
        case taskBegan(id: Int, name: String?)
        case taskEnded(id: Int)
        /// The kernel reports the process stopped / continued.
        case stopConfirmed
        case continueConfirmed
        case terminate(TerminationCause)
        /// The grace period after `willTerminate` ran out.
        case graceExpired
        /// The app broke the IPC protocol (garbage, oversized frame, bad handshake).
        case protocolViolation(String)
        /// The process is gone.
        case exited(description: String, clean: Bool)
    }

    /// Signals the supervisor may send.
    public enum Signal: String, Sendable, Equatable { case stop = "SIGSTOP", cont = "SIGCONT", kill = "SIGKILL" }

    /// What the supervisor must do.
    public enum Effect: Sendable, Equatable {
        case spawn(LaunchOptions)
        case send(LifecycleCallback, state: AppState)
        case signal(Signal, reason: String)
        case transition(from: AppState, to: AppState, cause: String)
        case startGraceTimer
        case cancelGraceTimer
        /// Write a termination report for the exit that follows / just happened.
        case report(TerminationRecord)
        case log(String)
    }

    /// What a termination report should say (the supervisor adds pid, status, history).
    public struct TerminationRecord: Sendable, Equatable {
        public var namespace: String?
        public var code: TerminationCode?
        public var reason: String
    }

    /// Current state.
    public private(set) var state: AppState = .notRunning
    /// Where the app is headed.
    public private(set) var placement: Placement = .foreground
    /// Background tasks held, id → name.
    public private(set) var tasks: [Int: String?] = [:]
    /// `didFinishLaunching` has returned.
    public private(set) var launched = false
    /// The process completed its handshake.
    public private(set) var connected = false
    /// `didEnterBackground` has returned since the app last went home.
    public private(set) var backgroundCallbackReturned = false
    /// SIGSTOP sent, confirmation pending.
    public private(set) var stopPending = false
    /// Termination under way (willTerminate sent or SIGKILL sent).
    public private(set) var terminating: TerminationCause? = nil
    /// Why the host killed the app, for the report written on exit.
    public private(set) var pendingRecord: TerminationRecord? = nil
    /// Whether the app must terminate instead of suspending.
    public let exitsOnSuspend: Bool

    private var launchOptions = LaunchOptions(reason: .user)
    /// The host sent SIGKILL itself, so a SIGKILL exit is expected.
    private var killSent = false

    public init(exitsOnSuspend: Bool = false) {
        self.exitsOnSuspend = exitsOnSuspend
    }

    /// Whether the app holds an assertion that keeps it running in the background.
    public var hasAssertion: Bool { !tasks.isEmpty }

    /// Whether a process exists (or is being spawned).
    public var isRunning: Bool { state != .notRunning }

    /// Feed one event; returns the effects to perform, in order.
    public mutating func handle(_ event: Event) -> [Effect] {
        var fx: [Effect] = []
        switch (state, event) {

        // MARK: launch
        case (.notRunning, .launch(let options, let placement)):
            reset()
            self.placement = placement
            launchOptions = options
            fx.append(.spawn(options))
            fx += move(to: placement == .foreground ? .inactive : .background,
                       cause: placement == .foreground ? "launch" : "launch in background")
        case (_, .launch):
            fx.append(.log("already running"))

        case (_, .spawned):
            break

        case (_, .handshake) where !connected:
            connected = true
            fx.append(.send(.didFinishLaunching(options: launchOptions), state: state))
        case (_, .handshake):
            fx += violation("second handshake")

        case (_, .callbackReturned(.didFinishLaunching)):
            launched = true
            if terminating != nil { break }
            switch placement {
            case .foreground:
                fx += move(to: .active, cause: "didFinishLaunching returned")
                fx.append(.send(.didBecomeActive, state: .active))
            case .background:
                if state == .inactive {
                    // Sent home while launching.
                    fx += move(to: .background, cause: "home button during launch")
                    fx.append(.send(.didEnterBackground, state: .background))
                } else {
                    // A background launch has no didEnterBackground: it is already there.
                    backgroundCallbackReturned = true
                    fx += suspendIfIdle()
                }
            }

        // MARK: home
        case (.active, .home):
            placement = .background
            fx += goHome(cause: "home button")
        case (.inactive, .home):
            // Still launching (didFinishLaunching not returned): go home once it has.
            placement = .background
            if launched {
                fx += move(to: .background, cause: "home button")
                backgroundCallbackReturned = false
                fx.append(.send(.didEnterBackground, state: .background))
            }
        case (.background, .home), (.suspended, .home):
            break

        case (.background, .callbackReturned(.didEnterBackground)):
            backgroundCallbackReturned = true
            fx += suspendIfIdle()

        // MARK: foreground
        case (.active, .foreground):
            break
        case (.inactive, .foreground):
            placement = .foreground
        case (.background, .foreground) where launched:
            placement = .foreground
            if stopPending {
                stopPending = false
                fx.append(.signal(.cont, reason: "brought to the foreground before the stop was confirmed"))
            }
            fx += enterForeground(cause: "foreground")
        case (.background, .foreground):
            // Background launch still in didFinishLaunching: become active once it returns.
            placement = .foreground
        case (.suspended, .foreground):
            placement = .foreground
            fx.append(.signal(.cont, reason: "resume"))
            fx += move(to: .background, cause: "resumed (SIGCONT)")
            fx += enterForeground(cause: "foreground")

        // MARK: background tasks
        case (_, .taskBegan(let id, let name)):
            if tasks[id] != nil {
                fx.append(.log("background task \(id) begun twice"))
            }
            tasks[id] = name
        case (_, .taskEnded(let id)):
            if tasks.removeValue(forKey: id) == nil {
                fx.append(.log("endBackgroundTask(\(id)): no such task (ignored)"))
            } else if state == .background {
                fx += suspendIfIdle()
            }

        // MARK: kernel reports
        case (.background, .stopConfirmed) where stopPending:
            stopPending = false
            fx += move(to: .suspended, cause: "no assertion left (SIGSTOP)")
        case (_, .stopConfirmed), (_, .continueConfirmed):
            break

        // MARK: termination
        case (.notRunning, .terminate):
            break
        case (_, .terminate(let cause)) where terminating != nil:
            if cause == .user || cause == .uninstall, terminating != .user {
                terminating = cause
            }
        case (.suspended, .terminate(let cause)) where cause == .user || cause == .uninstall:
            // iOS kills a suspended app without a callback.
            terminating = cause
            fx.append(kill("terminated while suspended"))
        case (_, .terminate(let cause)):
            terminating = cause
            if state == .suspended || stopPending {
                stopPending = false
                fx.append(.signal(.cont, reason: "resume to deliver willTerminate"))
            }
            if connected && launched {
                fx.append(.send(.willTerminate, state: state == .suspended ? .background : state))
                fx.append(.startGraceTimer)
            } else {
                fx.append(kill("terminated during launch"))
            }

        case (_, .graceExpired) where terminating != nil && state != .notRunning:
            pendingRecord = pendingRecord ?? TerminationRecord(
                namespace: "FRONTBOARD", code: nil,
                reason: "did not exit within the grace period after willTerminate")
            fx.append(kill("grace period after willTerminate ran out"))
        case (_, .graceExpired):
            break

        case (.notRunning, .protocolViolation):
            break
        case (_, .protocolViolation(let reason)):
            fx += violation(reason)

        case (.notRunning, .exited):
            break
        case (_, .exited(let description, let clean)):
            fx.append(.cancelGraceTimer)
            var report: TerminationRecord?
            if let record = pendingRecord {
                report = record
            } else if terminating == nil || !(clean || killSent) {
                // Exited or crashed on its own (or crashed while terminating).
                let what = launched ? "" : " during launch"
                report = TerminationRecord(namespace: nil, code: nil, reason: "\(description)\(what)")
            }
            let cause: String
            switch terminating {
            case .user?: cause = "terminated by user (\(description))"
            case .shutdown?: cause = "host shutdown (\(description))"
            case .exitsOnSuspend?: cause = "UIApplicationExitsOnSuspend (\(description))"
            case .uninstall?: cause = "uninstalled (\(description))"
            case nil: cause = description
            }
            fx += move(to: .notRunning, cause: pendingRecord.map { "killed: \($0.reason)" } ?? cause)
            // After the transition, so the report's history ends with notRunning.
            if let report { fx.append(.report(report)) }
            reset()

        case (_, .callbackReturned):
            // Other callbacks' returns change nothing here (the watchdogs time them).
            break

        default:
            fx.append(.log("ignored \(event) in state \(state)"))
        }
        return fx
    }

    // MARK: helpers

    private mutating func move(to next: AppState, cause: String) -> [Effect] {
        guard next != state else { return [] }
        let from = state
        state = next
        return [.transition(from: from, to: next, cause: cause)]
    }

    private mutating func goHome(cause: String) -> [Effect] {
        var fx = move(to: .inactive, cause: cause)
        fx.append(.send(.willResignActive, state: .inactive))
        fx += move(to: .background, cause: cause)
        backgroundCallbackReturned = false
        fx.append(.send(.didEnterBackground, state: .background))
        return fx
    }

    private mutating func enterForeground(cause: String) -> [Effect] {
        var fx = move(to: .inactive, cause: cause)
        fx.append(.send(.willEnterForeground, state: .inactive))
        fx += move(to: .active, cause: cause)
        fx.append(.send(.didBecomeActive, state: .active))
        return fx
    }

    /// In the background with nothing to do: suspend (or exit, for ExitsOnSuspend apps).
    private mutating func suspendIfIdle() -> [Effect] {
        guard state == .background, launched, backgroundCallbackReturned,
              !hasAssertion, !stopPending, terminating == nil, placement == .background else { return [] }
        if exitsOnSuspend {
            terminating = .exitsOnSuspend
            return [.send(.willTerminate, state: .background), .startGraceTimer]
        }
        stopPending = true
        return [.signal(.stop, reason: "no assertion left")]
    }

    private mutating func kill(_ reason: String) -> Effect {
        killSent = true
        return .signal(.kill, reason: reason)
    }

    private mutating func violation(_ reason: String) -> [Effect] {
        pendingRecord = TerminationRecord(namespace: "APPHOST", code: nil, reason: "IPC protocol violation: \(reason)")
        terminating = terminating ?? .user
        return [kill("IPC protocol violation: \(reason)")]
    }

    private mutating func reset() {
        tasks = [:]
        launched = false
        connected = false
        backgroundCallbackReturned = false
        stopPending = false
        terminating = nil
        pendingRecord = nil
        killSent = false
        placement = .foreground
    }
}
