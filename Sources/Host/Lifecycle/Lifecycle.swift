import AppHostProtocol
import HostConfig

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
    /// Current state.
    public internal(set) var state: AppState = .notRunning
    /// Where the app is headed.
    public internal(set) var placement: Placement = .foreground
    /// Background tasks held, by id.
    public private(set) var tasks: [BackgroundTaskID: HeldTask] = [:]
    /// Background tasks the app may hold at once; one more is a violation (kill, report).
    public var maximumHeldTasks = AppBounds.standard.heldTasks
    /// Background-mode activities that keep the app running (audio playback, ...).
    public private(set) var activities: Set<String> = []
    /// Service events waiting for `didFinishLaunching` to return.
    public internal(set) var queued: [ServiceEvent] = []
    /// The uncaught exception this process said it aborts for (the first one).
    public private(set) var raisedException: UncaughtException? = nil
    /// Why the last process ended (kept after the reset that follows an exit).
    public private(set) var lastTermination: TerminationCause? = nil
    /// When the app last entered the background (host clock); nil in the foreground.
    public internal(set) var backgroundSince: Duration?
    /// The expiration handlers of this background period have been asked to run.
    public internal(set) var expirationSent = false
    /// When the app last became active (host clock); nil when not active. A turn of
    /// the main run loop is counted as blocked from here at the earliest.
    public internal(set) var activeSince: Duration?
    /// The hang check found nothing to read for this process: not armed again.
    public internal(set) var mainRunLoopUnwatched = false
    /// Callbacks sent and not yet returned. An app is never stopped with one in
    /// flight: its return would sit in the stopped process (iOS suspends an app
    /// once its handlers have returned).
    public private(set) var callbacksInFlight = 0
    /// The budgets in force.
    public let profile: BudgetProfile
    /// How long an app may take to exit after willTerminate.
    public let grace: Duration
    /// `didFinishLaunching` has returned.
    public private(set) var launched = false
    /// The process completed its handshake.
    public private(set) var connected = false
    /// `willResignActive` was sent on the way home and has not returned: the app is
    /// `inactive` until it has (then `background` and `didEnterBackground`).
    public internal(set) var resigning = false
    /// `didEnterBackground` has returned since the app last went home.
    public internal(set) var backgroundCallbackReturned = false
    /// SIGSTOP sent, confirmation pending.
    public internal(set) var stopPending = false
    /// Termination under way (willTerminate sent or SIGKILL sent).
    public internal(set) var terminating: TerminationCause? = nil
    /// Why the host killed the app, for the report written on exit.
    public private(set) var pendingRecord: TerminationRecord? = nil
    /// Why the app last left the foreground (the home button, another app, the lock).
    var leavingCause = "home button"
    /// Whether the app must terminate instead of suspending.
    public let exitsOnSuspend: Bool

    var launchOptions = LaunchOptions(reason: .user)
    private(set) var now: Duration = .zero
    /// The host sent SIGKILL itself, so a SIGKILL exit is expected.
    public private(set) var killSent = false

    public init(exitsOnSuspend: Bool = false, profile: BudgetProfile = .default, grace: Duration = .seconds(5)) {
        self.exitsOnSuspend = exitsOnSuspend
        self.profile = profile
        self.grace = grace
    }

    /// `backgroundTimeRemaining` at `now`: DBL_MAX in the foreground (as iOS), the rest
    /// of the background budget in the background, 0 once it is used up.
    public func timeRemaining(at now: Duration) -> Double {
        if !activities.isEmpty { return Double.greatestFiniteMagnitude }
        switch state {
        case .active, .inactive, .notRunning: return Double.greatestFiniteMagnitude
        case .background, .suspended:
            guard let since = backgroundSince else { return Double.greatestFiniteMagnitude }
            return max(0, profile.backgroundTask - seconds(now - since))
        }
    }

    func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// Whether the app holds an assertion that keeps it running in the background.
    public var hasAssertion: Bool { !tasks.isEmpty || !activities.isEmpty }

    /// Running code now: launched or launching, not suspended or being suspended.
    public var isRunningCode: Bool { state != .notRunning && state != .suspended && !stopPending }

    /// Whether a process exists (or is being spawned).
    public var isRunning: Bool { state != .notRunning }

    /// Feed one event at host time `now`; returns the effects to perform, in order.
    public mutating func handle(_ event: Event, at now: Duration = .zero) -> [Effect] {
        self.now = now
        if case .callbackReturned = event, callbacksInFlight > 0 { callbacksInFlight -= 1 }
        let fx = rules(event)
        if state != .notRunning {
            callbacksInFlight += fx.reduce(0) { n, e in if case .send = e { n + 1 } else { n } }
        }
        return fx
    }

    private mutating func rules(_ event: Event) -> [Effect] {
        var fx: [Effect] = []
        switch (state, event) {

        // MARK: launch
        case (.notRunning, .launch(let options, let placement)):
            reset()
            self.placement = placement
            launchOptions = options
            fx.append(.spawn(options))
            fx.append(.startTimer(.launch, after: profile.duration(.launch)))
            fx += move(to: placement == .foreground ? .inactive : .background,
                       cause: placement == .foreground ? "launch" : "launch in background")
            if placement == .background { fx += startBackgroundBudget() }
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
            fx.append(.cancelTimer(.launch))
            if terminating != nil { break }
            switch placement {
            case .foreground:
                if state == .background {
                    // Background launch brought to the foreground while launching.
                    fx += enterForeground(cause: "foreground")
                } else {
                    fx += move(to: .active, cause: "didFinishLaunching returned")
                    fx.append(.send(.didBecomeActive, state: .active))
                    fx += startHangCheck()
                }
                fx += flushQueued()
            case .background:
                if state == .inactive, exitsOnSuspend {
                    // Sent home while launching, and opted out of the background.
                    fx += exitOnSuspend()
                } else if state == .inactive {
                    // Sent home while launching.
                    fx += move(to: .background, cause: "\(leavingCause) during launch")
                    fx += startBackgroundBudget()
                    fx += sendDidEnterBackground()
                } else {
                    // A background launch has no didEnterBackground: it is already there.
                    backgroundCallbackReturned = true
                    if queued.isEmpty {
                        fx += suspendIfIdle()
                    } else {
                        fx += flushQueued()
                    }
                }
            }

        // MARK: home
        case (.active, .leaveForeground(let cause)):
            placement = .background
            leavingCause = cause
            fx += goHome(cause: cause)
        case (.inactive, .leaveForeground(let cause)):
            leavingCause = cause
            // Still launching (didFinishLaunching not returned): go home once it has. Still
            // in willResignActive: go on to the background once it has returned.
            placement = .background
        case (.background, .leaveForeground), (.suspended, .leaveForeground):
            break

        case (.inactive, .callbackReturned(.willResignActive)) where resigning:
            resigning = false
            fx.append(.cancelTimer(.resignCallback))
            if terminating == nil { fx += resignReturned() }

        case (.inactive, .timerFired(.resignCallback)) where resigning && terminating == nil:
            fx += watchdog(reason: "willResignActive did not return within \(fmt(.foregroundHang))",
                           budget: .foregroundHang, namespace: "FRONTBOARD")

        case (.background, .callbackReturned(.didEnterBackground)):
            backgroundCallbackReturned = true
            fx.append(.cancelTimer(.backgroundCallback))
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
        case (_, .taskBegan(let id, _)) where tasks[id] == nil && tasks.count >= maximumHeldTasks:
            fx += violation("holds more than \(maximumHeldTasks) background tasks at once (task \(id) would be one more)")
        case (_, .taskBegan(let id, let name)):
            if tasks[id] != nil {
                fx.append(.log("background task \(id) begun twice"))
            }
            tasks[id] = HeldTask(name: name, began: now)
            if expirationSent, state == .background {
                // Begun after the handlers ran: its time is already up, so its handler runs now.
                fx.append(.send(.backgroundTaskExpiration(taskID: id), state: .background))
            }
        case (_, .taskEnded(let id)):
            if tasks.removeValue(forKey: id) == nil {
                fx.append(.log("endBackgroundTask(\(id)): no such task (ignored)"))
            } else if state == .background {
                fx += suspendIfIdle()
            }

        // MARK: background-mode activities and service events
        case (.notRunning, .activityBegan), (.notRunning, .activityEnded):
            break
        case (_, .activityBegan(let name)):
            activities.insert(name)
            if state == .suspended || stopPending {
                // Asked for while being stopped (the request was already on the socket)
                // or from outside (a privacy grant): it runs again.
                stopPending = false
                fx.append(.signal(.cont, reason: "resume: \(name) keeps the app running"))
                fx += move(to: .background, cause: "resumed: \(name)")
            }
            if state == .background {
                // A mode activity is not background time: no budget runs while it lasts.
                fx += [.cancelTimer(.expirationWarning), .cancelTimer(.backgroundBudget)]
            }
        case (_, .activityEnded(let name)):
            guard activities.remove(name) != nil else { break }
            if state == .background && activities.isEmpty {
                if !tasks.isEmpty { fx += startBackgroundBudget() }
                fx += suspendIfIdle()
            }

        case (_, .deliver):
            fx += deliver(event)

        case (_, .fireTimer(let id)):
            fx += fireTimer(id)

        case (_, .memoryWarning) where isRunningCode && launched && terminating == nil:
            fx.append(.send(.didReceiveMemoryWarning, state: state))
        case (_, .memoryWarning):
            break

        case (.notRunning, .modeViolation):
            break
        case (_, .modeViolation(let record)) where terminating == nil || !killSent:
            pendingRecord = record
            terminating = terminating ?? .system
            stopPending = false
            fx.append(kill(record.reason))
        case (_, .modeViolation):
            break

        case (_, .callbackReturned(.service(.timerFired))):
            // A timer's block is not a wake-up's handler: the wake budget is not moved for it.
            if callbacksInFlight == 0 { fx.append(.cancelTimer(.wake)) }
            if state == .background { fx += suspendIfIdle() }

        case (_, .callbackReturned(.service)):
            if callbacksInFlight == 0 {
                fx.append(.cancelTimer(.wake))
            } else if state == .background {
                // The wake budget times one handler, not the queue in front of it: events
                // the host sent in a burst (a session's finished transfers) are not
                // charged to the app while it keeps returning them.
                fx.append(.startTimer(.wake, after: profile.duration(.wake)))
            }
            if state == .background { fx += suspendIfIdle() }

        case (.background, .timerFired(.wake)) where callbacksInFlight > 0 && terminating == nil:
            fx += watchdog(reason: "a service event handler did not return within the wake budget of \(fmt(.wake))",
                           budget: .wake, namespace: "RUNNINGBOARD")

        // MARK: kernel reports
        case (.background, .stopConfirmed) where stopPending:
            stopPending = false
            fx += move(to: .suspended, cause: "no assertion left (SIGSTOP)")
            // A suspended app holds no task and runs no code: nothing left to time.
            fx += [.cancelTimer(.expirationWarning), .cancelTimer(.backgroundBudget), .cancelTimer(.backgroundCallback)]
        case (_, .stopConfirmed), (_, .continueConfirmed):
            break

        // MARK: termination
        case (.notRunning, .terminate):
            break
        case (_, .terminate(let cause)) where terminating != nil:
            if cause == .user || cause == .uninstall, terminating != .user {
                terminating = cause
            }
        case (.suspended, .terminate(let cause)) where cause == .user || cause == .uninstall || cause == .update:
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
                fx.append(.startTimer(.grace, after: grace))
            } else {
                fx.append(kill("terminated during launch"))
            }

        case (_, .timerFired(.grace)) where terminating != nil && state != .notRunning:
            let user = terminating == .user
            pendingRecord = pendingRecord ?? TerminationRecord(
                namespace: "FRONTBOARD", code: user ? .userForceQuit : nil,
                reason: "did not exit within \(DurationText.format(seconds(grace))) after willTerminate"
                    + (user ? " (the user terminated an unresponsive app)" : ""),
                tasks: heldTasks())
            fx.append(kill("grace period after willTerminate ran out"))

        case (_, .timerFired(.launch)) where !launched && terminating == nil && state != .notRunning:
            fx += watchdog(reason: "didFinishLaunching did not return within the launch budget of \(fmt(.launch))",
                           budget: .launch, namespace: "FRONTBOARD")

        case (.background, .timerFired(.backgroundCallback)) where !backgroundCallbackReturned && terminating == nil:
            fx += watchdog(reason: "didEnterBackground did not return within \(fmt(.didEnterBackground))",
                           budget: .didEnterBackground, namespace: "FRONTBOARD")

        case (.background, .timerFired(.expirationWarning)) where terminating == nil:
            expirationSent = true
            for id in tasks.keys.sorted() {
                fx.append(.send(.backgroundTaskExpiration(taskID: id), state: .background))
            }

        case (.background, .timerFired(.backgroundBudget)) where terminating == nil && activities.isEmpty && (hasAssertion || callbacksInFlight > 0):
            let names = tasks.sorted { $0.key < $1.key }.map { id, t in
                "\(t.name.map { "\"\($0)\"" } ?? "#\(id)") (held \(DurationText.format(seconds(now - t.began))))"
            }
            let what = names.isEmpty ? "with a callback still running (an expiration handler that did not return)"
                : "while holding background task\(names.count == 1 ? "" : "s") \(names.joined(separator: ", "))"
            fx += watchdog(reason: "background time of \(fmt(.backgroundTask)) used up \(what)",
                           budget: .backgroundTask, namespace: "RUNNINGBOARD")

        // MARK: the foreground hang watchdog (issue 18)
        case (.active, .hangCheck(let loop)) where terminating == nil:
            fx += hangCheck(loop)
        case (_, .hangCheck):
            break

        case (_, .timerFired):
            // A timer whose condition no longer holds (state moved on).
            break

        case (.background, .lockHeldAtSuspension(let what)) where stopPending:
            stopPending = false
            pendingRecord = TerminationRecord(
                namespace: "RUNNINGBOARD", code: .deadlock,
                reason: "held a file lock outside its container while being suspended: \(what)", tasks: heldTasks())
            terminating = .system
            fx.append(kill("file lock held at suspension"))
        case (.suspended, .lockHeldAtSuspension(let what)) where terminating == nil:
            // Found once the stop was confirmed: iOS's "was suspended with locked files".
            pendingRecord = TerminationRecord(
                namespace: "RUNNINGBOARD", code: .deadlock,
                reason: "held a file lock outside its container while being suspended: \(what)", tasks: heldTasks())
            terminating = .system
            fx.append(kill("file lock held at suspension"))
        case (_, .lockHeldAtSuspension):
            break

        case (.notRunning, .protocolViolation):
            break
        case (_, .protocolViolation(let reason)):
            fx += violation(reason)

        case (.notRunning, .exceptionRaised):
            break
        case (_, .exceptionRaised(let exception)):
            if raisedException == nil { raisedException = exception.bounded() }

        case (.notRunning, .exited), (.notRunning, .limitExceeded):
            break
        case (_, .limitExceeded(let record)):
            // The kernel's kill is what ended it, whatever the host had planned.
            pendingRecord = record
            terminating = terminating ?? .system
            killSent = true
        case (_, .exited(let description, let clean)):
            for t in Timer.allCases { fx.append(.cancelTimer(t)) }
            var report: TerminationRecord?
            if let record = pendingRecord {
                report = record
            } else if let exception = raisedException {
                // An uncaught exception: iOS's crash, whatever the host was doing meanwhile.
                report = TerminationRecord(namespace: nil, code: nil,
                                           reason: "\(exception.terminationMessage) (\(description))", exception: exception)
            } else if terminating == nil || !(clean || killSent) {
                // Exited or crashed on its own (or crashed while terminating).
                let what = launched ? "" : " during launch"
                report = TerminationRecord(namespace: nil, code: nil, reason: "\(description)\(what)")
            }
            var cause: String
            switch terminating {
            case .user?: cause = "terminated by user (\(description))"
            case .shutdown?: cause = "host shutdown (\(description))"
            case .exitsOnSuspend?: cause = "UIApplicationExitsOnSuspend (\(description))"
            case .uninstall?: cause = "uninstalled (\(description))"
            case .update?: cause = "updated (\(description))"
            case .system?: cause = "killed by the host (\(description))"
            case nil: cause = description
            }
            if pendingRecord == nil, let exception = raisedException {
                cause = "uncaught exception '\(exception.name)' (\(description))"
            }
            fx += move(to: .notRunning, cause: pendingRecord.map { "killed: \($0.reason)" } ?? cause)
            // After the transition, so the report's history ends with notRunning.
            if let report { fx.append(.report(report)) }
            lastTermination = terminating
            reset()

        case (.background, .callbackReturned):
            // The last callback in flight returned (e.g. an expiration handler).
            fx += suspendIfIdle()
        case (_, .callbackReturned):
            break

        default:
            fx.append(.log("ignored \(event) in state \(state)"))
        }
        return fx
    }

    // MARK: helpers

    mutating func move(to next: AppState, cause: String) -> [Effect] {
        guard next != state else { return [] }
        let from = state
        state = next
        return [.transition(from: from, to: next, cause: cause)]
    }

    /// The background budget runs from entering the background; tasks begun in the
    /// foreground start consuming it only now. While a mode activity keeps the app
    /// running no budget runs (it starts when the last activity ends).
    mutating func startBackgroundBudget() -> [Effect] {
        backgroundSince = now
        expirationSent = false
        if !activities.isEmpty { return [.cancelTimer(.expirationWarning), .cancelTimer(.backgroundBudget)] }
        let total = profile.duration(.backgroundTask)
        let lead = profile.duration(.expirationWarning)
        return [.startTimer(.expirationWarning, after: total > lead ? total - lead : .zero),
                .startTimer(.backgroundBudget, after: total)]
    }

    func fmt(_ key: BudgetKey) -> String {
        DurationText.format(profile[key])
    }

    private func heldTasks() -> [HeldTaskRecord] {
        tasks.sorted { $0.key < $1.key }.map { HeldTaskRecord(id: $0.key, name: $0.value.name, age: seconds(now - $0.value.began)) }
    }

    /// Kill for a watchdog rule: SIGKILL, 0x8badf00d, a report naming the budget.
    mutating func watchdog(reason: String, budget key: BudgetKey, namespace: String) -> [Effect] {
        pendingRecord = TerminationRecord(
            namespace: namespace, code: .watchdog, reason: reason, tasks: heldTasks(),
            budget: BudgetRecord(name: key.rawValue, seconds: profile[key], profile: profile.name))
        terminating = .system
        stopPending = false
        return [kill("watchdog: \(reason)")]
    }

    /// In the background with nothing to do: suspend (or exit, for ExitsOnSuspend apps).
    private mutating func suspendIfIdle() -> [Effect] {
        guard state == .background, launched, backgroundCallbackReturned, callbacksInFlight == 0,
              !hasAssertion, !stopPending, terminating == nil, placement == .background else { return [] }
        if exitsOnSuspend {
            // Only a background launch gets here (going home never enters the background).
            terminating = .exitsOnSuspend
            return [.send(.willTerminate, state: .background), .startTimer(.grace, after: grace)]
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
        terminating = terminating ?? .system
        return [kill("IPC protocol violation: \(reason)")]
    }

    mutating func reset() {
        tasks = [:]
        activities = []
        queued = []
        callbacksInFlight = 0
        backgroundSince = nil
        expirationSent = false
        activeSince = nil
        mainRunLoopUnwatched = false
        launched = false
        connected = false
        backgroundCallbackReturned = false
        resigning = false
        stopPending = false
        terminating = nil
        pendingRecord = nil
        raisedException = nil
        killSent = false
        placement = .foreground
    }
}
