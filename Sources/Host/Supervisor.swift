import AppHostProtocol
import AppHostSystem
import Foundation
import Logging
import NIOCore
import NIOPosix
import Plugins
import SystemPackage

extension Supervisor {
    /// Records a host-wide `service` event (the push gateway says where it listens).
    public func recordServiceEvent(_ cause: String) {
        events.append(.service, cause: cause, time: now())
    }
}

/// The host's brain: installed apps, one ``Lifecycle`` per app, and the effects.
///
/// Requests from the control socket arrive as actor calls. Everything an app or the
/// kernel says arrives on one ordered input stream consumed by ``run()``, so the
/// handling of one input is a synchronous step of the actor and never interleaves.
public actor Supervisor {
    /// Inputs from app connections, the reaper and timers.
    enum Input: Sendable {
        case spawned(app: String, instance: UInt64, child: ChildProcess)
        case spawnFailed(app: String, instance: UInt64, error: String)
        case connected(app: String, instance: UInt64, channel: any Channel)
        case message(app: String, instance: UInt64, AppMessage)
        case violation(app: String, instance: UInt64, String)
        /// The app's end of the socket closed (everything it sent has been read).
        case disconnected(app: String, instance: UInt64)
        /// An exited app's socket did not reach EOF in time (a child of the app may hold it).
        case drainExpired(app: String, instance: UInt64)
        case child(app: String, instance: UInt64, ChildEvent)
        /// The real-clock timer ran out: fire what is due.
        case deadlinesDue
        /// A file lock outside the container was found when about to suspend.
        case lockHeld(app: String, instance: UInt64, String)
        /// The transfer daemon is up (spawned and attached) / said something / exited.
        case transferDaemonStarted(child: ChildProcess, channel: any Channel, generation: UInt64)
        case transferDaemonFailed(String, generation: UInt64)
        case transferEvent(TransferEvent, generation: UInt64)
        case transferDaemonExited(ExitStatus, generation: UInt64)
        case transferDaemonRestart
        /// Shutdown: the grace period (in real time, whatever the clock) is over; `final`:
        /// so is the wait for killed apps to be reaped.
        case shutdownGraceOver(final: Bool)
    }

    /// A running (or starting) app.
    struct Runtime {
        var machine: Lifecycle
        let instance: UInt64
        var child: ChildProcess?
        var channel: (any Channel)?
        var pid: Int32?
        var seq: UInt64 = 0
        var pending: [UInt64: LifecycleCallback] = [:]
        var since: Date
        var exitStatus: ExitStatus?
        /// The IPC connection is attached and has not reached EOF.
        var channelOpen = false
        /// An exit that waits for the connection to drain, so messages the app sent
        /// before dying are handled before its exit.
        var pendingExit: ExitStatus?
        /// This run's transitions, oldest first (for termination reports).
        var history: [StateRecord] = []
        var launchWaiters: [CheckedContinuation<Int32, any Error>] = []
        var exitWaiters: [CheckedContinuation<Void, Never>] = []
        /// What the app's window shows now (its last `viewTree` message).
        var viewTree: ViewTree?
        /// `ignoreSnapshotOnNextApplicationLaunch()` was called in this run and the app
        /// has not been active since: every snapshot shows the launch image.
        var ignoreSnapshotsUntilActive = false
        /// Its cgroup, where it has a memory or processes limit (else nil).
        var cgroup: AppCgroup?
        /// OOM kills counted in its cgroup that were not of the app's own process: those
        /// before it started, and those before it last confirmed a stop (a process with
        /// SIGKILL pending never stops).
        var oomKillsBefore = 0
        /// The count when the host itself sent SIGKILL: a SIGKILL death is the OOM
        /// killer's only if the count rose after that.
        var oomKillsAtHostKill: Int?
        /// The memory limit it runs under (for its report).
        var memoryLimit: UInt64?
        /// The bound on waiting for its socket's EOF after its exit (see `.drainExpired`).
        var drainTimer: Scheduled<Void>?
    }

    public let configuration: HostConfiguration
    let store: Store
    let events: EventLog
    let group: any EventLoopGroup
    let logger: Logger
    /// Host time and every deadline (see ``DeadlineScheduler``).
    private var scheduler: DeadlineScheduler
    /// The one real-clock timer, on the host's NIO event loop, armed as the scheduler
    /// says: cancelling it really disarms it (a cancelled `Task.sleep` on Linux leaves its
    /// dispatch timer armed, which woke an idle host once for every cancelled deadline).
    private var timer: Scheduled<Void>?
    /// Virtual clock: callbacks sent and not yet returned nor waited for. An advance
    /// first waits for them (bounded), so it never fires a watchdog on a callback
    /// the app simply has not had the real time to run; each callback is waited
    /// for at most once, so a hung app costs one settle timeout, not one per step.
    private var advancing = false
    private var stepCallbacks: Set<String> = []
    /// Launches already waited for by a settle that timed out (a launch that hangs costs
    /// one settle timeout, as a hung callback does).
    private var launchesWaited: Set<UInt64> = []
    private var settleWaiter: CheckedContinuation<Void, Never>?
    private var settleToken: UInt64 = 0

    var apps: [String: Store.AppRow] = [:]
    var runtimes: [String: Runtime] = [:]
    private var lastStateChange: [String: Date] = [:]
    private var nextInstance: UInt64 = 0
    var shuttingDown = false
    private var shutdownRequests: [CheckedContinuation<Void, Never>] = []
    private var shutdownRequested = false
    private var stopped = false
    private var stoppedWaiters: [CheckedContinuation<Void, Never>] = []
    /// Transitions of the current step, written in one transaction at its end.
    private var pendingTransitions: [Store.TransitionRow] = []
    /// Transition writes the database refused (counted on GRDB's queue).
    private let databaseFailures = RecordingFailures()
    /// Shutdown's real-time bound on the grace period (see ``shutdown()``).
    private var shutdownTimer: Scheduled<Void>?
    /// Child events that arrived before their `.spawned` (replayed after it).
    private var earlyChildEvents: [UInt64: [ChildEvent]] = [:]
    private var stateWaiters: [String: [(state: AppState, continuation: CheckedContinuation<Void, Never>)]] = [:]

    /// The transfer daemon and the transfers the host mediates (TransferBroker.swift).
    var transfers = TransferBrokerState()
    /// The app switcher and its snapshots (SnapshotKeeper.swift).
    var snapshots = SnapshotKeeperState()

    private let inputs: AsyncStream<Input>
    let input: AsyncStream<Input>.Continuation

    /// The background-mode plugins' host side.
    let modes: ModeHub
    /// Mode effects asked for during a ``feed(_:_:)`` (by state changes), run once it is done.
    var pendingModeEffects: [ModeEffect] = []
    private var feedDepth = 0
    /// Audio sinks of apps with an open audio session.
    private var audioSinks: [String: AudioSink] = [:]
    /// The per-app cgroups, made at the first spawn that needs them (nil inside: none possible).
    private var cgroups: AppCgroups??
    /// Limits the host could not enforce as configured, warned about once each.
    private var warnedLimits: Set<String> = []
    /// What the sandbox enforces here (logged once at startup).
    let sandbox: SandboxSummary
    /// Per-app uids (a host running as root with `identities` set), else nil.
    let identities: AppIdentities?
    /// Where termination reports go (database and `reports/`).
    let reportWriter: ReportWriter

    /// Opens the state directory's database and event log. The caller holds the state dir lock.
    public init(configuration: HostConfiguration, group: any EventLoopGroup, logger: Logger) throws {
        self.configuration = configuration
        let fm = FileManager.default
        let separateIdentities = configuration.identities != nil && geteuid() == 0
        // Explicit modes, whatever the umask: nothing of the host's is open to apps or
        // other users. With apps under uids of their own, the state directory and
        // `containers`/`groups` are 0711 (apps pass through to their own container,
        // 0700 and theirs; nobody lists the apps); else 0700.
        let passThrough: mode_t = separateIdentities ? 0o711 : 0o700
        for (dir, mode) in [(configuration.stateDirectory, passThrough), (configuration.reportsDirectory, 0o700),
                            (configuration.containersDirectory, passThrough), (configuration.groupsDirectory, passThrough),
                            (configuration.logsDirectory, 0o700), (configuration.stateDirectory + "/snapshots", 0o700),
                            (configuration.stateDirectory + "/transfers", 0o700)] as [(String, mode_t)] {
            try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
            guard chmod(dir, mode) == 0 else {
                throw IdentityError(description: "cannot set the mode of \(dir): \(String(cString: strerror(errno)))")
            }
        }
        store = try Store(path: configuration.databasePath)
        reportWriter = ReportWriter(store: store, directory: configuration.reportsDirectory, logger: logger)
        identities = separateIdentities
            ? try AppIdentities(settings: configuration.identities ?? .standard, stateDirectory: configuration.stateDirectory, store: store)
            : nil
        events = try EventLog(path: configuration.eventsPath, limits: configuration.eventLog, logger: logger)
        self.group = group
        self.logger = logger
        scheduler = DeadlineScheduler(mode: configuration.clock)
        let startDate = scheduler.startDate
        (inputs, input) = AsyncStream<Input>.makeStream()
        modes = ModeHub(profile: configuration.profile)
        for row in try store.apps() {
            apps[row.app.bundleIdentifier] = row
            _ = modes.install(Self.modeApp(row.app, configuration))
        }
        for decision in try store.privacy() {
            // A row this build cannot read (a newer host's service or decision) counts as
            // not determined, as after `privacy reset`; it is left in the table.
            guard let service = PrivacyService(rawValue: decision.service), let value = PrivacyDecision(rawValue: decision.value) else {
                logger.warning("ignoring the privacy decision \"\(decision.value)\" for \"\(decision.service)\" of \(decision.bundleIdentifier): unknown to this host")
                continue
            }
            modes.restorePrivacy(app: decision.bundleIdentifier, service: service, value: value)
        }
        for setting in try store.settings() {
            modes.restoreSetting(key: setting.key, value: setting.value)
        }
        modes.setRefreshRestrictedByPolicy(configuration.backgroundRefreshRestricted)
        transfers = try Self.restoredTransfers(store: store, installed: Set(apps.keys))
        events.append(.hostStarted, cause: "host started (pid \(getpid()), \(apps.count) app(s) installed, \(configuration.clock.rawValue) clock, profile \(configuration.profile.name))", time: startDate)
        lastStateChange = Self.recordEndedWithHost(apps: apps.keys.sorted(), store: store, reports: reportWriter, events: events,
                                                   time: startDate, logger: logger)
        // Said once, at startup: what confines apps here and what does not.
        let summary = SandboxSummary(kernelABI: Landlock.abiVersion, limit: configuration.landlockABI,
                                     seccomp: configuration.seccomp, uid: geteuid(),
                                     identities: identities.map { ($0.settings.first, $0.settings.count) })
        events.append(.service, cause: summary.enforced, time: startDate)
        logger.info("\(summary.enforced)")
        if let warning = summary.warning {
            events.append(.warning, cause: warning, time: startDate)
            logger.warning("\(warning)")
        }
        sandbox = summary
    }

    /// After a crash of the host (kill -9, a power cut) its apps died with it (PDEATHSIG)
    /// and nothing said how. For each app whose last recorded state is not notRunning,
    /// records the transition to notRunning and an APPHOST report. Returns when each changed.
    private static func recordEndedWithHost(apps: [String], store: Store, reports: ReportWriter, events: EventLog,
                                            time: Date, logger: Logger) -> [String: Date] {
        let cause = "ended with the host (the host stopped without shutting down)"
        var changed: [String: Date] = [:]
        var rows: [Store.TransitionRow] = []
        for id in apps {
            let states: [StateRecord]
            do {
                states = try store.recentStates(bundleIdentifier: id, limit: 16)
            } catch {
                logger.error("could not read the last state of \(id): \(error)")
                continue
            }
            guard let last = states.last, last.state != .notRunning else { continue }
            rows.append(Store.TransitionRow(bundleIdentifier: id, pid: nil, from: last.state, to: .notRunning, cause: cause, time: time))
            events.append(.transition, app: id, from: last.state, to: .notRunning, cause: cause, time: time)
            let report = TerminationReport(
                id: ReportWriter.reportID(app: id, time: time, pid: nil), bundleIdentifier: id, pid: 0, time: time,
                exceptionType: "HOST_ENDED",
                exitStatus: nil, signal: nil, signalName: nil, terminationNamespace: "APPHOST", terminationCode: nil,
                reason: "the app was \(last.state.rawValue) when the host ended without shutting down (killed, or the machine stopped); "
                    + "the app ended with it (its parent-death signal)",
                explanation: "Found by the next host at its start; how the app's process ended was not observed.",
                lastStates: states + [StateRecord(state: .notRunning, time: time, cause: cause)])
            reports.write(report, events: events)
            changed[id] = time
        }
        if !rows.isEmpty {
            store.recordTransitions(rows) { error in logger.error("could not record state transitions: \(error)") }
        }
        return changed
    }

    // MARK: - Clock

    /// Host time since the host started: real monotonic, or virtual.
    public func hostNow() -> Duration {
        scheduler.now()
    }

    /// Host time as a date (virtual dates start at the host's start date).
    func now() -> Date {
        scheduler.date()
    }

    /// The clock's mode, host time and date.
    public func clockReading() -> (mode: ClockMode, now: Duration, date: Date) {
        (configuration.clock, hostNow(), now())
    }

    /// How late real-clock deadlines fired so far (and clears the record).
    public func takeDeadlineLateness() -> [Duration] {
        scheduler.takeLateness()
    }

    /// Virtual clock only: moves time forward by `duration`, firing every deadline
    /// that falls inside, in order. Before each next deadline the apps get up to
    /// `settleTimeout` of real time to answer what the last one sent them (callback
    /// returns, stop confirmations), so their replies land at the right virtual time.
    public func advanceClock(by duration: Duration) async throws(ControlError) -> Duration {
        guard configuration.clock == .virtual else {
            throw ControlError(.badRequest, "the host runs on the real clock; start it with `--clock virtual` to move time by hand")
        }
        guard duration >= .zero else { throw ControlError(.badRequest, "time only moves forward") }
        guard !advancing else { throw ControlError(.badRequest, "the clock is already being advanced") }
        advancing = true
        defer { advancing = false }
        let target = scheduler.now() + duration
        await settle()
        while let (key, due) = scheduler.popDue(by: target) {
            scheduler.advance(to: due)
            fire(key)
            await settle()
        }
        scheduler.advance(to: target)
        await settle()
        return scheduler.now()
    }

    private func fire(_ key: DeadlineKey) {
        switch key.timer {
        case .lifecycle(let timer):
            guard runtimes[key.app]?.instance == key.instance else { return }
            feed(key.app, .timerFired(timer))
        case .plugin(let timer):
            performMode(modes.timerFired(timer, app: key.app.isEmpty ? nil : key.app, at: hostNow()))
        case .transferRound(let session):
            transferRoundTimedOut(app: key.app, session: session)
        case .transferRestart:
            transferRestartDue()
        }
    }

    /// Starts (or moves) a deadline of no process instance: a plugin's or the transfer
    /// broker's (`app` nil: host-wide). It outlives the app's process; its owner cancels it.
    func startHostTimer(_ timer: TimerID, app: String?, after: Duration) {
        apply(scheduler.start(DeadlineKey(app: app ?? "", instance: 0, timer: timer), after: after))
    }

    /// Cancels a deadline started with ``startHostTimer(_:app:after:)``.
    func cancelHostTimer(_ timer: TimerID, app: String?) {
        apply(scheduler.cancel(DeadlineKey(app: app ?? "", instance: 0, timer: timer)))
    }

    private func startTimer(_ id: String, _ timer: Lifecycle.Timer, after: Duration) {
        guard let instance = runtimes[id]?.instance else { return }
        apply(scheduler.start(DeadlineKey(app: id, instance: instance, timer: .lifecycle(timer)), after: after))
    }

    private func cancelTimer(_ id: String, _ timer: Lifecycle.Timer) {
        guard let instance = runtimes[id]?.instance else { return }
        apply(scheduler.cancel(DeadlineKey(app: id, instance: instance, timer: .lifecycle(timer))))
    }

    /// Real clock: arms (or disarms) the one timer as the scheduler says.
    private func apply(_ change: DeadlineScheduler.TimerChange?) {
        guard let change else { return }
        timer?.cancel()
        timer = nil
        guard case .arm(let after) = change else { return }
        // A deadline past `longestWait` (a plugin's "never") wakes the host early, once in
        // a hundred years, and is armed again: the nanoseconds must fit an Int64.
        let input = self.input
        timer = group.any().scheduleTask(in: .nanoseconds(after.clampedNanoseconds)) {
            input.yield(.deadlinesDue)
        }
    }

    private func fireDue() {
        scheduler.timerFired()
        let t = scheduler.now()
        while let key = scheduler.popDueNow(by: t) {
            fire(key)
        }
        apply(scheduler.rearm())
    }

    /// Waits until the apps have answered what this step sent them, or the settle timeout.
    private func settle() async {
        defer { stepCallbacks.removeAll() }
        guard !isSettled() else { return }
        settleToken += 1
        let token = settleToken
        // Real time whatever the host clock, on the event loop's timer: a cancelled
        // `Task.sleep` leaves its dispatch timer armed on Linux (a wake-up for nothing).
        let timer = group.any().scheduleTask(in: .nanoseconds(configuration.settleTimeout.clampedNanoseconds)) { [weak self] in
            Task { await self?.settleTimedOut(token) }
        }
        await withCheckedContinuation { settleWaiter = $0 }
        timer.cancel()
    }

    private func settleTimedOut(_ token: UInt64) {
        guard token == settleToken, let w = settleWaiter else { return }
        for rt in runtimes.values where isLaunching(rt) { launchesWaited.insert(rt.instance) }
        settleWaiter = nil
        w.resume()
    }

    private func isSettled() -> Bool {
        if !stepCallbacks.isEmpty { return false }
        // Also wait for stops to be confirmed and killed apps to be reaped, so that
        // after `advance` the states a test reads are the final ones.
        // And for apps being launched (for an event, during the advance) to finish
        // launching, so what their launch brings runs at this virtual time.
        return !runtimes.values.contains {
            $0.machine.stopPending || $0.pendingExit != nil || ($0.machine.killSent && $0.machine.isRunning && $0.child != nil)
                || (isLaunching($0) && !launchesWaited.contains($0.instance))
        }
    }

    private func isLaunching(_ rt: Runtime) -> Bool {
        rt.machine.isRunning && !rt.machine.launched && rt.machine.terminating == nil
    }

    private func checkSettled() {
        guard let w = settleWaiter, isSettled() else { return }
        settleWaiter = nil
        w.resume()
    }

    // MARK: - Running

    /// Consumes inputs until ``finish()``; call once.
    public func run() async {
        startTransferDaemon()
        for await item in inputs {
            handle(item)
            if settleWaiter != nil { checkSettled() }
        }
    }

    /// Ends ``run()`` and every event subscription.
    public func finish() {
        flushTransitions()
        do { try store.flush() } catch { logger.error("could not flush the database: \(error)") }
        events.append(.hostStopped, cause: "host stopped", time: now())
        input.finish()
        events.close()
    }

    /// Suspends until someone asks the host to shut down over the control socket.
    public func waitForShutdownRequest() async {
        if shutdownRequested { return }
        await withCheckedContinuation { shutdownRequests.append($0) }
    }

    /// Suspends until the host has stopped: apps terminated, state directory released.
    public func waitUntilStopped() async {
        if stopped { return }
        await withCheckedContinuation { stoppedWaiters.append($0) }
    }

    /// Called by the service once the state directory is released.
    public func markStopped() {
        stopped = true
        for c in stoppedWaiters { c.resume() }
        stoppedWaiters.removeAll()
    }

    /// Asks the host to shut down (control `shutdown`).
    public func requestShutdown() {
        shutdownRequested = true
        for c in shutdownRequests { c.resume() }
        shutdownRequests.removeAll()
    }

    /// Terminates every app (willTerminate, then SIGKILL after the grace period) and
    /// waits until none is left.
    public func shutdown() async {
        shuttingDown = true
        let running = runtimes.filter { $0.value.machine.isRunning }.map(\.key).sorted()
        events.append(.hostStopping, cause: "shutting down, terminating \(running.count) app(s)", time: now())
        for id in running {
            feed(id, .terminate(.shutdown))
        }
        // The grace timers run on the host clock, which on the virtual clock nobody moves
        // now: after the grace period in real time the apps still there are killed, and
        // after 5 s more (a process SIGKILL cannot end at once) no longer waited for.
        if runtimes.values.contains(where: { $0.machine.isRunning }) {
            armShutdownTimer(final: false)
        }
        for id in running {
            await waitForExit(id)
        }
        shutdownTimer?.cancel()
        shutdownTimer = nil
        await stopTransferDaemon()
        if case .some(.some(let cgroups)) = cgroups { cgroups.remove() }
    }

    private func armShutdownTimer(final: Bool) {
        let input = self.input
        let after: Duration = final ? .seconds(5) : max(configuration.terminationGracePeriod, .milliseconds(100))
        shutdownTimer = group.any().scheduleTask(in: .nanoseconds(after.clampedNanoseconds)) {
            input.yield(.shutdownGraceOver(final: final))
        }
    }

    /// The grace period of a shutdown is over in real time: what its timers would have
    /// done on the real clock is done now (kill, with a FRONTBOARD report); then, once
    /// more time has passed, apps that are still not reaped are given up on.
    private func shutdownGraceOver(final: Bool) {
        guard shuttingDown else { return }
        let left = runtimes.filter { $0.value.machine.isRunning }.map(\.key).sorted()
        guard !left.isEmpty else { return }
        if !final {
            for id in left {
                guard let rt = runtimes[id], !rt.machine.killSent else { continue }
                apply(scheduler.cancel(DeadlineKey(app: id, instance: rt.instance, timer: .lifecycle(.grace))))
                logger.warning("\(id) did not exit within the shutdown's grace period (real time): killing it")
                feed(id, .timerFired(.grace))
                if runtimes[id]?.machine.killSent != true, let child = runtimes[id]?.child {
                    // Not terminating in the machine's eyes: kill it all the same.
                    try? child.signal(SIGKILL)
                }
            }
            armShutdownTimer(final: true)
            return
        }
        for id in left {
            let pid = runtimes[id]?.pid.map { " (pid \($0))" } ?? ""
            logger.error("\(id)\(pid) was not reaped after SIGKILL; the host stops without waiting for it")
            events.append(.warning, app: id, pid: runtimes[id]?.pid,
                          cause: "not reaped after SIGKILL; the host stopped without waiting for it", time: now())
            let waiters = runtimes[id]?.exitWaiters ?? []
            runtimes[id]?.exitWaiters.removeAll()
            for w in waiters { w.resume() }
        }
    }

    private func waitForExit(_ id: String) async {
        guard let rt = runtimes[id], rt.machine.isRunning else { return }
        await withCheckedContinuation { c in runtimes[id]?.exitWaiters.append(c) }
    }

    // MARK: - Control API

    /// Installs or updates the app at `path`. The app keeps running if it runs.
    public func install(path: String, settings: [String: String]) throws(ControlError) -> InstalledApp {
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
        let bundle: AppBundle
        do {
            let dirs = AppBundleLoader.defaultProductDirectories(forBundleAt: absolute, extra: configuration.productDirectories)
            bundle = try AppBundleLoader.load(path: absolute, settings: settings, productDirectories: dirs)
        } catch {
            throw ControlError(.invalidManifest, "\(error)")
        }
        // Checked here, not when a bundle is merely read: the identifiers become folders.
        let groups: [String]
        do {
            groups = try bundle.entitlementsPath.map { path throws(ManifestError) in
                try Entitlements.read(path: path).applicationGroups(settings: settings)
            } ?? []
        } catch {
            throw ControlError(.invalidManifest, "\(error)")
        }
        let app = InstalledApp(
            bundleIdentifier: bundle.manifest.bundleIdentifier, name: bundle.manifest.name,
            bundlePath: bundle.bundlePath ?? absolute, executablePath: bundle.executablePath,
            backgroundModes: bundle.manifest.backgroundModes, installedAt: now(), manifest: bundle.manifest,
            entitlements: bundle.entitlementKeys, applicationGroups: groups)
        do {
            try store.saveApp(app, settings: settings)
        } catch {
            throw ControlError(.internalError, "could not record the installation: \(error)")
        }
        apps[app.bundleIdentifier] = Store.AppRow(app: app, settings: settings)
        var modeApp = Self.modeApp(app, configuration)
        if let rt = runtimes[app.bundleIdentifier], rt.machine.isRunning {
            modeApp.state = rt.machine.state
            modeApp.isRunningCode = rt.machine.isRunningCode
        }
        performMode(modes.install(modeApp))
        events.append(.installed, app: app.bundleIdentifier, cause: "installed from \(app.bundlePath)", time: now())
        return app
    }

    /// Uninstalls an app, terminating it first.
    public func uninstall(_ bundle: BundleID) async throws(ControlError) {
        let id = bundle.rawValue
        _ = try installed(id)
        if runtimes[id]?.machine.isRunning == true {
            feed(id, .terminate(.uninstall))
            await waitForExit(id)
        }
        do { try store.deleteApp(id) } catch { throw ControlError(.internalError, "\(error)") }
        apps.removeValue(forKey: id)
        runtimes.removeValue(forKey: id)
        performMode(modes.uninstall(id))
        transfersAppUninstalled(id)
        switcherRemoved(id, uninstalled: true)
        // As on iOS, the app's data goes with it. Reports and history stay.
        try? FileManager.default.removeItem(atPath: configuration.containersDirectory + "/" + id)
        identities?.release(app: id)
        events.append(.uninstalled, app: id, cause: "uninstalled (container removed)", time: now())
    }

    /// Installed apps.
    public func list() -> [InstalledApp] {
        apps.values.map(\.app).sorted { $0.bundleIdentifier < $1.bundleIdentifier }
    }

    /// Launches an app and returns its pid once `didFinishLaunching` has returned.
    /// Launching a running app brings it to the foreground (unless `background`).
    /// With `terminateRunning`, a running app is terminated first (simctl's
    /// `--terminate-running-process`); otherwise it is brought to the foreground
    /// (unless `background`) and keeps its process and arguments.
    public func launch(_ bundle: BundleID, background: Bool, arguments: [String],
                       terminateRunning: Bool = false) async throws(ControlError) -> Int32 {
        let id = bundle.rawValue
        let row = try installed(id)
        if shuttingDown { throw ControlError(.shuttingDown, "the host is shutting down") }
        let mark = recordingMark()
        if terminateRunning, runtimes[id]?.machine.isRunning == true {
            feed(id, .terminate(.user))
            await waitForExit(id)
        }
        if let rt = runtimes[id], rt.machine.isRunning {
            if !background { try await foreground(bundle) }
            guard let pid = rt.pid else { throw ControlError(.alreadyRunning, "\(id) is already launching") }
            return pid
        }
        if !background { sendOthersHome(except: id) }
        performMode(modes.userLaunched(id, at: hostNow()))
        makeRuntime(id, row)
        let options = LaunchOptions(reason: background ? .background : .user, arguments: arguments)
        feed(id, .launch(options, placement: background ? .background : .foreground))
        let pid: Int32
        do {
            pid = try await withCheckedThrowingContinuation { c in
                runtimes[id]?.launchWaiters.append(c)
            }
        } catch let error as ControlError {
            throw error
        } catch {
            throw ControlError(.internalError, "\(error)")
        }
        try await checkRecorded(since: mark, "launched", id)
        return pid
    }

    /// How many writes of the event log and of the database have failed so far.
    private func recordingMark() -> (events: UInt64, database: UInt64) {
        (events.failures, databaseFailures.count)
    }

    /// Throws if an event or a transition could not be written since `mark`: the verb
    /// happened, but the host has no record of it. Waits for the database's queue without
    /// holding the actor (a kernel report or an app's answer is handled meanwhile).
    private func checkRecorded(since mark: (events: UInt64, database: UInt64), _ what: String, _ id: String) async throws(ControlError) {
        do {
            try await store.flushed()
        } catch {
            databaseFailures.note("\(error)")
            logger.error("could not flush \(configuration.databasePath): \(error)")
        }
        var problems: [String] = []
        if events.failures > mark.events, let error = events.lastError {
            problems.append("\(error)")
        }
        if databaseFailures.count > mark.database, let error = databaseFailures.last {
            problems.append("cannot write to \(configuration.databasePath): \(error)")
        }
        guard !problems.isEmpty else { return }
        // SQLite says "disk is full" without an errno: say what the file system has left.
        var fs = statvfs()
        if statvfs(configuration.stateDirectory, &fs) == 0 {
            problems.append("\(UInt64(fs.f_bavail) * UInt64(fs.f_frsize)) bytes free on that file system")
        }
        let state = runtimes[id]?.machine.state ?? .notRunning
        throw ControlError(.internalError, "\(id) \(what), but the host could not record it in its state directory "
            + "\(configuration.stateDirectory): \(problems.joined(separator: "; ")). \(id) is now \(state.rawValue); "
            + "free space there (or repair the file system) and see the host's log")
    }

    /// A fresh runtime (new instance) for a launch.
    private func makeRuntime(_ id: String, _ row: Store.AppRow) {
        nextInstance += 1
        var machine = Lifecycle(exitsOnSuspend: row.app.manifest.exitsOnSuspend, profile: configuration.profile,
                                grace: configuration.terminationGracePeriod)
        machine.maximumHeldTasks = configuration.bounds.heldTasks
        runtimes[id] = Runtime(machine: machine, instance: nextInstance, since: now())
    }

    /// How the plugins see an installed app.
    private static func modeApp(_ app: InstalledApp, _ config: HostConfiguration) -> ModeApp {
        ModeApp(bundleIdentifier: app.bundleIdentifier, manifest: app.manifest, entitlements: app.entitlements ?? [],
                container: config.containersDirectory + "/" + app.bundleIdentifier)
    }

    /// Carries out a CLI command for the background-mode plugins (privacy, location,
    /// VoIP push, BLE, accessories). Returns the message for the user.
    public func modeCommand(_ command: ModeCommand) throws(ControlError) -> String {
        switch command {
        case .voipPush(let id, _), .fetchNow(let id), .bgTaskRun(let id, _), .bgTaskExpire(let id, _),
             .settingsBackgroundRefresh(let id?, _), .bgTaskList(let id?):
            _ = try installed(id)
        case .push(let request):
            _ = try installed(request.bundleIdentifier)
        default:
            break
        }
        if case .privacy(_, _, let id?) = command { _ = try installed(id) }
        if shuttingDown { throw ControlError(.shuttingDown, "the host is shutting down") }
        let (result, effects) = modes.command(command, at: hostNow())
        performMode(effects)
        switch command {
        case .devicePower, .deviceNetwork:
            let device = modes.deviceState
            sendToDaemon(.conditions(pluggedIn: device.pluggedIn, network: device.network))
        default:
            break
        }
        switch result {
        case .success(let message): return message
        case .failure(let error): throw ControlError(.refused, error.message)
        }
    }

    /// A push through the APNs provider API (the push gateway): checks what APNs
    /// checks (device token, topic, push type, priority, expiration, collapse id, apns-id,
    /// payload) and hands the notification to the remote-notification plugin. Returns
    /// the `apns-id`, or the rejection APNs would answer with. APNs accepts a valid push
    /// whatever the device then does with it; what happened is in the event log.
    public func apnsPush(_ request: APNsRequest) -> Result<String, APNsRejection> {
        let accepted: APNsRequest.Accepted
        switch request.validate(owner: { modes.deviceTokenOwner($0) }) {
        case .success(let a): accepted = a
        case .failure(let rejection): return .failure(rejection)
        }
        let (id, messageID, command) = (accepted.bundleIdentifier, accepted.messageID, accepted.command)
        let (result, effects) = modes.command(command, at: hostNow())
        performMode(effects)
        if case .failure(let error) = result {
            // Accepted as APNs would; the device side refused it (logged).
            events.append(.service, app: id, cause: "push \(messageID) accepted by the gateway, not delivered: \(error.message)", time: now())
        }
        return .success(messageID)
    }

    /// Makes `id` the active app, sending the previously active app home.
    public func foreground(_ bundle: BundleID) async throws(ControlError) {
        let id = bundle.rawValue
        _ = try installed(id)
        guard let rt = runtimes[id], rt.machine.isRunning else {
            throw ControlError(.notRunning, "\(id) is not running (start it with `apphost launch \(id)`)")
        }
        let mark = recordingMark()
        sendOthersHome(except: id)
        feed(id, .foreground)
        try await checkRecorded(since: mark, "came to the foreground", id)
    }

    /// Home button for `id`.
    public func background(_ bundle: BundleID) async throws(ControlError) {
        let id = bundle.rawValue
        _ = try installed(id)
        guard let rt = runtimes[id], rt.machine.isRunning else {
            throw ControlError(.notRunning, "\(id) is not running")
        }
        let mark = recordingMark()
        feed(id, .home)
        try await checkRecorded(since: mark, "went home", id)
    }

    /// Terminates `id` (as a swipe in the app switcher) and waits until it is gone.
    public func terminate(_ bundle: BundleID) async throws(ControlError) {
        let id = bundle.rawValue
        _ = try installed(id)
        guard let rt = runtimes[id], rt.machine.isRunning else {
            throw ControlError(.notRunning, "\(id) is not running")
        }
        let mark = recordingMark()
        feed(id, .terminate(.user))
        await waitForExit(id)
        try await checkRecorded(since: mark, "was terminated", id)
    }

    /// Terminates `id` if it runs and waits until it is gone, moving the virtual clock past
    /// the grace period after willTerminate: an app that ignores willTerminate is then killed
    /// as on the real clock. For a host nobody else drives (`apphost privacy-check`).
    public func terminateMovingClock(_ bundle: BundleID) async {
        let id = bundle.rawValue
        guard let rt = runtimes[id], rt.machine.isRunning else { return }
        feed(id, .terminate(.user))
        if configuration.clock == .virtual, runtimes[id]?.machine.isRunning == true {
            _ = try? await advanceClock(by: configuration.terminationGracePeriod + .seconds(1))
        }
        await waitForExit(id)
    }

    /// Status of one app or all installed apps.
    public func status(_ bundle: BundleID?) throws(ControlError) -> [AppStatus] {
        let id = bundle?.rawValue
        let ids: [String]
        if let id {
            _ = try installed(id)
            ids = [id]
        } else {
            ids = apps.keys.sorted()
        }
        return ids.map { id in
            let rt = runtimes[id]
            let state = rt?.machine.state ?? .notRunning
            let since = lastStateChange[id] ?? apps[id]?.app.installedAt ?? now()
            let tasks = rt?.machine.tasks.sorted { $0.key < $1.key }.map { $0.value.name ?? "#\($0.key)" } ?? []
            // Bounded: one app's answer must fit a control frame whatever it holds.
            return AppStatus(bundleIdentifier: id, state: state, pid: state == .notRunning ? nil : rt?.pid,
                             since: since, backgroundTasks: AppStatus.bounded(tasks),
                             activities: AppStatus.bounded(rt?.machine.activities.sorted() ?? []),
                             isFrontmost: state == .active || (state == .inactive && rt?.machine.placement == .foreground))
        }
    }

    /// Past events plus a live stream; call ``unsubscribe(_:)`` when done.
    public func subscribe(bundleIdentifier: String?) -> (past: EventLogPast, live: AsyncStream<HostEvent>, id: UInt64) {
        events.subscribe(filter: bundleIdentifier)
    }

    /// Suspends until `id` is in `state` (returns at once if it already is).
    public func waitUntil(_ id: String, is state: AppState) async {
        let current = runtimes[id]?.machine.state ?? .notRunning
        if current == state { return }
        await withCheckedContinuation { stateWaiters[id, default: []].append((state, $0)) }
    }

    /// Whether `id` is installed or has left events or reports behind.
    public func isKnown(_ id: String) -> Bool {
        apps[id] != nil || lastStateChange[id] != nil || !((try? store.reports(bundleIdentifier: id)) ?? []).isEmpty
    }

    /// The pid of a running app.
    public func pid(of id: String) -> Int32? {
        guard let rt = runtimes[id], rt.machine.isRunning else { return nil }
        return rt.pid
    }

    /// Ends a subscription.
    public func unsubscribe(_ id: UInt64) {
        events.unsubscribe(id)
    }

    /// Termination reports, oldest first.
    public func reports(_ bundle: BundleID?) throws(ControlError) -> [TerminationReport] {
        let id = bundle?.rawValue
        if let id, apps[id] == nil {
            // Reports of an uninstalled app are still readable.
            let r = (try? store.reports(bundleIdentifier: id)) ?? []
            if r.isEmpty { throw unknownBundle(id) }
            return r
        }
        do { return try store.reports(bundleIdentifier: id) } catch { throw ControlError(.internalError, "\(error)") }
    }

    func installed(_ id: String) throws(ControlError) -> Store.AppRow {
        guard let row = apps[id] else { throw unknownBundle(id) }
        return row
    }

    private func unknownBundle(_ id: String) -> ControlError {
        let known = apps.keys.sorted()
        let hint = known.isEmpty ? "no apps are installed; install one with `apphost install <App.app>`"
            : "installed: \(known.joined(separator: ", "))"
        return ControlError(.unknownBundle, "unknown bundle id \"\(id)\" (\(hint))")
    }

    private func sendOthersHome(except id: String) {
        for (other, rt) in runtimes where other != id && rt.machine.isRunning && rt.machine.placement == .foreground {
            feed(other, .home)
        }
    }

    // MARK: - Inputs

    private func handle(_ item: Input) {
        switch item {
        case .spawned(let id, let instance, let child):
            let early = earlyChildEvents.removeValue(forKey: instance) ?? []
            guard var rt = runtimes[id], rt.instance == instance else {
                try? child.signal(SIGKILL)
                return
            }
            rt.child = child
            rt.pid = child.pid
            runtimes[id] = rt
            events.append(.spawned, app: id, pid: child.pid, cause: "spawned \(apps[id]?.app.executablePath ?? "")", time: now())
            feed(id, .spawned(pid: child.pid))
            if runtimes[id]?.machine.killSent == true {
                // Killed (a watchdog, a terminate) before the process existed.
                if let cgroup = runtimes[id]?.cgroup, runtimes[id]?.oomKillsAtHostKill == nil {
                    runtimes[id]?.oomKillsAtHostKill = cgroup.oomKills
                }
                try? child.signal(SIGKILL)
            }
            for event in early {
                handle(.child(app: id, instance: instance, event))
            }

        case .spawnFailed(let id, let instance, let error):
            guard let rt = runtimes[id], rt.instance == instance else { return }
            events.append(.warning, app: id, cause: "launch failed: \(error)", time: now())
            runtimes[id]?.exitStatus = nil
            finishLaunchWaiters(id, .failure(ControlError(.spawnFailed, "\(id): could not launch: \(error)")))
            feed(id, .exited(description: "could not be spawned: \(error)", clean: false))

        case .connected(let id, let instance, let channel):
            guard runtimes[id]?.instance == instance, runtimes[id]?.machine.isRunning == true else {
                channel.close(promise: nil)
                return
            }
            runtimes[id]?.channel = channel
            runtimes[id]?.channelOpen = true

        case .message(let id, let instance, let message):
            guard runtimes[id]?.instance == instance else { return }
            handleMessage(id, message)

        case .violation(let id, let instance, let reason):
            guard runtimes[id]?.instance == instance else { return }
            events.append(.warning, app: id, pid: runtimes[id]?.pid, cause: "IPC protocol violation: \(reason)", time: now())
            feed(id, .protocolViolation(reason))

        case .child(let id, let instance, let event):
            guard runtimes[id]?.instance == instance else { return }
            guard runtimes[id]?.child != nil else {
                // Reported by the reaper before the spawn call returned: keep for `.spawned`.
                earlyChildEvents[instance, default: []].append(event)
                return
            }
            switch event {
            case .stopped:
                // Stopped, so alive: no OOM kill counted so far was of the app itself.
                if let cgroup = runtimes[id]?.cgroup { runtimes[id]?.oomKillsBefore = cgroup.oomKills }
                feed(id, .stopConfirmed)
            case .continued:
                events.append(.signal, app: id, pid: runtimes[id]?.pid, cause: "running again (kernel confirmed SIGCONT)", time: now())
                feed(id, .continueConfirmed)
            case .exited(let status):
                // The app is gone: so is anything left in its cgroup (a child holding its end
                // of the IPC socket would keep the connection open, too). Apps make no process
                // (seccomp), so there is none: this is defense in depth, harmless when empty.
                if let cgroup = runtimes[id]?.cgroup {
                    let left = cgroup.killAll()
                    if !left.isEmpty {
                        events.append(.warning, app: id, cause: "processes \(left.map(String.init).joined(separator: ", ")) of the app's cgroup outlived SIGKILL", time: now())
                    }
                }
                if runtimes[id]?.channelOpen == true {
                    runtimes[id]?.pendingExit = status
                    // At most 1 s (real time) for the socket to reach EOF, on the event loop's
                    // timer, cancelled when it does.
                    let input = self.input
                    runtimes[id]?.drainTimer = group.any().scheduleTask(in: .seconds(1)) {
                        input.yield(.drainExpired(app: id, instance: instance))
                    }
                } else {
                    processExit(id, status)
                }
            }

        case .disconnected(let id, let instance):
            guard runtimes[id]?.instance == instance else { return }
            runtimes[id]?.channelOpen = false
            runtimes[id]?.drainTimer?.cancel()
            runtimes[id]?.drainTimer = nil
            if let status = runtimes[id]?.pendingExit {
                processExit(id, status)
            }

        case .drainExpired(let id, let instance):
            guard runtimes[id]?.instance == instance, let status = runtimes[id]?.pendingExit else { return }
            runtimes[id]?.channelOpen = false
            runtimes[id]?.channel?.close(promise: nil)
            processExit(id, status)

        case .deadlinesDue:
            fireDue()

        case .lockHeld(let id, let instance, let what):
            guard runtimes[id]?.instance == instance else { return }
            feed(id, .lockHeldAtSuspension(what))
        case .transferDaemonStarted, .transferDaemonFailed, .transferEvent, .transferDaemonExited, .transferDaemonRestart:
            handleTransferInput(item)
        case .shutdownGraceOver(let final):
            shutdownGraceOver(final: final)
        }
    }

    private func processExit(_ id: String, _ status: ExitStatus) {
        runtimes[id]?.pendingExit = nil
        if let instance = runtimes[id]?.instance {
            stepCallbacks = stepCallbacks.filter { !$0.hasPrefix("\(id)#\(instance)#") }
        }
        runtimes[id]?.exitStatus = status
        events.append(.exited, app: id, pid: runtimes[id]?.pid, cause: status.description, time: now())
        // JETSAM only when the OOM killer struck in this kill's window: after the host's own
        // SIGKILL if it sent one, else since the app last proved alive (its start or a stop).
        // (The kernel does not say whom it killed; apps make no process, so an OOM kill in an
        // app's cgroup is of the app.)
        if case .signaled(SIGKILL, _) = status, let rt = runtimes[id], let cgroup = rt.cgroup,
           cgroup.oomKills > (rt.oomKillsAtHostKill ?? rt.oomKillsBefore) {
            let limit = rt.memoryLimit.map { ByteCountText.format($0) } ?? "its limit"
            feed(id, .limitExceeded(Lifecycle.TerminationRecord(
                namespace: "JETSAM", code: nil,
                reason: "per-process-limit: the app's memory went over \(limit) and the kernel killed it (memory cgroup \(cgroup.directories.first ?? "?"))")))
        }
        let clean: Bool
        if case .exited(code: 0) = status { clean = true } else { clean = false }
        feed(id, .exited(description: status.description, clean: clean))
    }

    private func handleMessage(_ id: String, _ message: AppMessage) {
        guard let rt = runtimes[id] else { return }
        switch message {
        case .hello(let version, _):
            guard version == IPCProtocol.version else {
                send(id, .rejected(reason: "AppHost speaks IPC version \(IPCProtocol.version), the app speaks \(version); rebuild it against this AppKitLess"))
                feed(id, .protocolViolation("IPC version \(version) is not supported"))
                return
            }
            guard !rt.machine.connected else {
                feed(id, .protocolViolation("second hello"))
                return
            }
            send(id, .welcome(version: IPCProtocol.version, bundleIdentifier: id, screen: configuration.screen))
            feed(id, .handshake)
        case _ where !rt.machine.connected:
            feed(id, .protocolViolation("message before hello"))
        case .callbackReturned(let seq):
            guard let callback = runtimes[id]?.pending.removeValue(forKey: seq) else {
                feed(id, .protocolViolation("callbackReturned for unknown callback \(seq)"))
                return
            }
            stepCallbacks.remove("\(id)#\(rt.instance)#\(seq)")
            if case .service(.urlSessionProgress) = callback {
                // Progress leaves no line: a large download has thousands.
            } else if callback != .heartbeat {
                events.append(.callback, app: id, pid: rt.pid, cause: "\(callback.name) returned", time: now())
            }
            feed(id, .callbackReturned(callback))
            snapshotAfterCallback(callback, app: id)
            if case .service(let event) = callback {
                transferCallbackReturned(event, app: id)
                performMode(modes.callbackReturned(event, app: id, at: hostNow()))
            }
        case .viewTree(let tree):
            runtimes[id]?.viewTree = tree
        case .ignoreSnapshotOnNextApplicationLaunch:
            runtimes[id]?.ignoreSnapshotsUntilActive = true
        case .beginBackgroundTask(let taskID, let rawName):
            let name = configuration.bounds.taskName(rawName)
            events.append(.backgroundTask, app: id, pid: rt.pid,
                          cause: "beginBackgroundTask \(name.map { "\"\($0)\"" } ?? "") id \(taskID)", time: now())
            feed(id, .taskBegan(id: taskID, name: name))
        case .endBackgroundTask(let taskID):
            events.append(.backgroundTask, app: id, pid: rt.pid, cause: "endBackgroundTask id \(taskID)", time: now())
            feed(id, .taskEnded(id: taskID))
        case .request(let requestID, .backgroundTimeRemaining):
            send(id, .reply(id: requestID, reply: .backgroundTimeRemaining(seconds: rt.machine.timeRemaining(at: hostNow()))))
        case .request(let requestID, .service(let request)):
            if transferRequest(request, id: requestID, from: id) { return }
            let (reply, effects) = modes.request(request, from: id, at: hostNow())
            // The answer first: the app is blocked on it, and an effect may kill it.
            send(id, .reply(id: requestID, reply: .service(reply)))
            if case .refused(let reason) = reply {
                events.append(.service, app: id, pid: rt.pid, cause: "\(request.apiName) refused: \(reason)", time: now())
            }
            // Before the effects: ending the fetch's activity may suspend the app.
            snapshotAfterCompletion(request, reply: reply, app: id, state: rt.machine.state)
            performMode(effects)
        }
    }

    // MARK: - Effects

    /// Feeds one event to an app's machine and performs the effects.
    func feed(_ id: String, _ event: Lifecycle.Event) {
        feedDepth += 1
        defer {
            feedDepth -= 1
            flushTransitions()
            if feedDepth == 0, !pendingModeEffects.isEmpty {
                let effects = pendingModeEffects
                pendingModeEffects.removeAll()
                performMode(effects)
            }
        }
        guard var rt = runtimes[id] else { return }
        let effects = rt.machine.handle(event, at: hostNow())
        runtimes[id] = rt
        for effect in effects {
            perform(id, effect)
        }
        guard let after = runtimes[id] else { return }
        rt = after
        // Launch finished (or failed): answer `launch`.
        if rt.machine.launched || !rt.machine.isRunning, !rt.launchWaiters.isEmpty {
            if let pid = rt.pid, rt.machine.isRunning {
                finishLaunchWaiters(id, .success(pid))
            } else {
                let reason = rt.exitStatus.map { "it ended during launch (\($0.description))" } ?? "it did not start"
                finishLaunchWaiters(id, .failure(ControlError(.spawnFailed, "\(id) could not be launched: \(reason); see `apphost reports \(id)`")))
            }
        }
        if !rt.machine.isRunning {
            let waiters = rt.exitWaiters
            runtimes[id]?.exitWaiters.removeAll()
            for w in waiters { w.resume() }
        }
    }

    private func flushTransitions() {
        guard !pendingTransitions.isEmpty else { return }
        let logger = self.logger
        let failures = databaseFailures
        let path = configuration.databasePath
        store.recordTransitions(pendingTransitions) { error in
            logger.error("could not record state transitions in \(path): \(error)")
            failures.note("\(error)")
        }
        pendingTransitions.removeAll()
    }

    private func finishLaunchWaiters(_ id: String, _ result: Result<Int32, ControlError>) {
        let waiters = runtimes[id]?.launchWaiters ?? []
        runtimes[id]?.launchWaiters.removeAll()
        for w in waiters { w.resume(with: result.mapError { $0 as any Error }) }
    }

    private func perform(_ id: String, _ effect: Lifecycle.Effect) {
        switch effect {
        case .spawn(let options):
            spawn(id, options: options)
        case .send(let callback, let state):
            guard var rt = runtimes[id] else { return }
            rt.seq += 1
            rt.pending[rt.seq] = callback
            runtimes[id] = rt
            if configuration.clock == .virtual { stepCallbacks.insert("\(id)#\(rt.instance)#\(rt.seq)") }
            send(id, .callback(seq: rt.seq, callback: callback, state: state))
        case .signal(let sig, let reason):
            guard let child = runtimes[id]?.child else { return }
            if sig == .stop, let what = lockOutsideContainer(id), let instance = runtimes[id]?.instance {
                // iOS kills an app suspended with a shared file lock (0xdead10cc) rather
                // than let it deadlock the others: no SIGSTOP, the machine kills it.
                input.yield(.lockHeld(app: id, instance: instance, what))
                return
            }
            let number: Int32 = switch sig {
            case .stop: SIGSTOP
            case .cont: SIGCONT
            case .kill: SIGKILL
            }
            if sig == .stop { modes.setRunningCode(id, false) } else if sig == .cont { modes.setRunningCode(id, true) }
            let cgroup = runtimes[id]?.cgroup
            // Any other process in its cgroup is stopped before it and continued after it, and
            // killed with it; only the app's own stop and continue are confirmed. (Apps make no
            // process: defense in depth, harmless when there is none.)
            var others: [Int32] = []
            if sig == .stop, let cgroup { others = cgroup.signalOthers(SIGSTOP, except: child.pid) }
            if sig == .kill, let cgroup, runtimes[id]?.oomKillsAtHostKill == nil { runtimes[id]?.oomKillsAtHostKill = cgroup.oomKills }
            do {
                try child.signal(number)
                events.append(.signal, app: id, pid: child.pid, cause: "\(sig.rawValue): \(reason)", time: now())
            } catch {
                // ESRCH: already gone; its exit is on its way.
                logger.debug("signal \(sig.rawValue) to \(id) failed: \(error)")
            }
            if sig == .cont, let cgroup { others = cgroup.signalOthers(SIGCONT, except: child.pid) }
            if sig == .kill, let cgroup { others = cgroup.signalOthers(SIGKILL, except: child.pid) }
            if !others.isEmpty {
                events.append(.signal, app: id, pid: child.pid,
                              cause: "\(sig.rawValue) also to the app's other processes: \(others.map(String.init).joined(separator: ", "))", time: now())
            }
        case .transition(let from, let to, let cause):
            let time = now()
            lastStateChange[id] = time
            runtimes[id]?.since = time
            runtimes[id]?.history.append(StateRecord(state: to, time: time, cause: cause))
            let pid = runtimes[id]?.pid
            pendingTransitions.append(Store.TransitionRow(bundleIdentifier: id, pid: pid, from: from, to: to, cause: cause, time: time))
            events.append(.transition, app: id, pid: pid, from: from, to: to, cause: cause, time: time)
            let machine = runtimes[id]?.machine
            if to == .active {
                switcherActivated(id)
                snapshotsActivated(id)
            }
            if to == .notRunning, machine?.lastTermination == .user { switcherRemoved(id, uninstalled: false) }
            if to == .notRunning {
                transfersAppExited(id, byUser: machine?.lastTermination == .user)
                pendingModeEffects += modes.appExited(id, byUser: machine?.lastTermination == .user, at: hostNow())
            } else {
                pendingModeEffects += modes.appMoved(id, from: from, to: to, runningCode: machine?.isRunningCode ?? false, at: hostNow())
            }
            if let waiters = stateWaiters[id], waiters.contains(where: { $0.state == to }) {
                stateWaiters[id] = waiters.filter { $0.state != to }
                for w in waiters where w.state == to { w.continuation.resume() }
            }
        case .startTimer(let timer, let after):
            startTimer(id, timer, after: after)
        case .cancelTimer(let timer):
            cancelTimer(id, timer)
        case .report(let record):
            writeReport(id, record)
        case .log(let message):
            events.append(.warning, app: id, pid: runtimes[id]?.pid, cause: message, time: now())
        }
    }

    // MARK: - Mode effects

    /// Carries out what the plugins asked for. During a feed, waits until it is done
    /// (a plugin reacting to a state change acts once that change is complete).
    func performMode(_ effects: [ModeEffect]) {
        if feedDepth > 0 {
            pendingModeEffects += effects
            return
        }
        for effect in effects {
            performMode(effect)
        }
    }

    private func performMode(_ effect: ModeEffect) {
        switch effect {
        case .deliver(let app, let event, let wake, let because):
            guard let row = apps[app] else { return }
            var launch: LaunchReason?
            if case .launch(let reason) = wake { launch = reason }
            if runtimes[app]?.machine.isRunning != true {
                guard let launch, !shuttingDown else {
                    events.append(.service, app: app, cause: "\(event.name) not delivered: the app is not running (\(because))", time: now())
                    return
                }
                makeRuntime(app, row)
                events.append(.service, app: app, cause: "launching in the background for \(event.name) (\(because))", time: now())
                feed(app, .deliver(event, wake: true, launch: launch))
                return
            }
            events.append(.service, app: app, pid: runtimes[app]?.pid, cause: "\(event.name) (\(because))", time: now())
            feed(app, .deliver(event, wake: wake != .ifRunning, launch: launch))
        case .beginActivity(let app, let name):
            guard runtimes[app]?.machine.isRunning == true, runtimes[app]?.machine.activities.contains(name) == false else { return }
            events.append(.service, app: app, pid: runtimes[app]?.pid, cause: "activity began: \(name) (keeps the app running in the background)", time: now())
            feed(app, .activityBegan(name))
        case .endActivity(let app, let name):
            guard runtimes[app]?.machine.activities.contains(name) == true else { return }
            events.append(.service, app: app, pid: runtimes[app]?.pid, cause: "activity ended: \(name)", time: now())
            feed(app, .activityEnded(name))
        case .kill(let app, let namespace, let code, let reason):
            guard runtimes[app]?.machine.isRunning == true else { return }
            events.append(.warning, app: app, pid: runtimes[app]?.pid, cause: "killing: \(reason)", time: now())
            feed(app, .modeViolation(Lifecycle.TerminationRecord(namespace: namespace, code: code, reason: reason)))
        case .startTimer(let app, let timer, let after):
            startHostTimer(.plugin(timer), app: app, after: after)
        case .cancelTimer(let app, let timer):
            cancelHostTimer(.plugin(timer), app: app)
        case .used(let app, let mode, let what):
            events.append(.modeUsed, app: app, pid: runtimes[app]?.pid, cause: what, mode: mode.rawValue, time: now())
        case .refused(let app, let mode, let what):
            events.append(.modeRefused, app: app, pid: runtimes[app]?.pid,
                          cause: "\(what): needs \"\(mode.rawValue)\" in UIBackgroundModes", mode: mode.rawValue, time: now())
        case .note(let app, let text):
            events.append(.service, app: app, pid: app.flatMap { runtimes[$0]?.pid }, cause: text, time: now())
        case .audio(let app, let output):
            playAudio(app, output)
        case .persistSetting(let key, let value):
            do {
                try store.setSetting(key: key, value: value)
            } catch {
                logger.error("could not record the setting \(key): \(error)")
            }
        case .persistPrivacy(let app, let service, let value):
            do {
                try store.setPrivacy(bundleIdentifier: app, service: service, value: value)
            } catch {
                logger.error("could not record the privacy decision for \(app): \(error)")
            }
        }
    }

    private func playAudio(_ app: String, _ output: AudioOutput) {
        guard configuration.audioSink == .wav else { return }
        switch output {
        case .open:
            if audioSinks[app] == nil {
                audioSinks[app] = AudioSink(directory: configuration.containersDirectory + "/" + app + "/Library/Audio")
            }
        case .write(let samples, let rate):
            let sink = audioSinks[app] ?? AudioSink(directory: configuration.containersDirectory + "/" + app + "/Library/Audio")
            audioSinks[app] = sink
            do {
                try sink.write(samples, sampleRate: rate)
            } catch {
                events.append(.warning, app: app, cause: "audio sink: \(error)", time: now())
            }
        case .close:
            audioSinks.removeValue(forKey: app)?.close()
        }
    }

    /// A file lock the app holds outside its container (from /proc/locks), described.
    private func lockOutsideContainer(_ id: String) -> String? {
        guard let pid = runtimes[id]?.pid, let locks = try? ProcLocks.held(by: pid) else { return nil }
        let container = configuration.containersDirectory + "/" + id + "/"
        for lock in locks {
            // A lock whose path cannot be resolved (st_dev differs from /proc/locks on
            // btrfs subvolumes and some overlayfs setups) is not counted: a wrong kill
            // is worse than a missed one.
            guard let path = lock.path else {
                logger.debug("\(id): \(lock.kind.rawValue) lock on inode \(lock.inode), device \(lock.device): path unknown, not checked")
                continue
            }
            if !path.hasPrefix(container) {
                return "\(lock.kind.rawValue) \(lock.exclusive ? "write" : "read") lock on \(path)"
            }
        }
        return nil
    }

    func send(_ id: String, _ message: HostMessage) {
        guard let channel = runtimes[id]?.channel else {
            logger.warning("no connection to \(id); dropped \(message)")
            return
        }
        do {
            let bytes = try Frame.encode(message)
            channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
        } catch {
            logger.error("could not encode \(message): \(error)")
        }
    }

    private func writeReport(_ id: String, _ record: Lifecycle.TerminationRecord) {
        guard let rt = runtimes[id] else { return }
        reportWriter.write(ReportWriter.report(app: id, pid: rt.pid, status: rt.exitStatus, record: record,
                                               history: rt.history, time: now()), events: events)
    }

    // MARK: - Who a process is

    /// The app `pid` belongs to: an app's own process, a process in an app's cgroup (what
    /// an app starts stays in it, even orphaned), or a descendant of an app's process
    /// (where there are no cgroups). Nil for anyone else (the CLI, a user's shell).
    public func appOwning(pid: Int32) -> String? {
        let apps = Dictionary(runtimes.compactMap { id, rt in rt.pid.map { ($0, id) } }, uniquingKeysWith: { a, _ in a })
        if let app = apps[pid] { return app }
        for path in ProcessTree.cgroupPaths(of: pid) {
            for (id, rt) in runtimes {
                if let dir = rt.cgroup?.directories.first, let name = dir.split(separator: "/").suffix(2).first,
                   path.hasSuffix("/\(name)/\(id)") {
                    return id
                }
            }
        }
        return ProcessTree.ancestors(of: pid).lazy.compactMap { apps[$0] }.first
    }

    /// An app tried the control socket: said once per app and pid.
    public func noteRefusedControlPeer(pid: Int32, app: String) {
        events.append(.warning, app: app, pid: pid, cause: "refused a control-socket connection from the app's process \(pid)", time: now())
    }

    // MARK: - Spawning

    /// The rlimits and cgroup that enforce `id`'s configured limits: descriptors and file
    /// size by rlimit; memory and processes by cgroup where the host can make one, else
    /// memory by RLIMIT_AS (an address-space cap: an app over it fails to allocate rather
    /// than being killed with a report) and processes not at all (RLIMIT_NPROC counts
    /// every process of the user, the host's included). Each fallback is warned about once.
    /// Only an app with a memory or processes limit gets a cgroup: joining one takes the
    /// kernel's cgroup_threadgroup_rwsem for writing, an RCU grace period (13-15 ms here)
    /// on every launch. Apps cannot make processes (seccomp), so there is nothing else of
    /// an app's for a cgroup to hold.
    private func enforcement(of limits: AppLimits, for id: String) -> (rlimits: [ResourceLimit], cgroup: AppCgroup?) {
        var rlimits: [ResourceLimit] = []
        if let n = limits.openFiles { rlimits.append(ResourceLimit(.openFiles, soft: UInt64(n))) }
        if let n = limits.fileSize { rlimits.append(ResourceLimit(.fileSize, soft: n)) }
        guard limits.memory != nil || limits.processes != nil else { return (rlimits, nil) }
        if cgroups == nil {
            let (made, why) = AppCgroups.make()
            cgroups = .some(made)
            if let made {
                events.append(.service, cause: "per-app cgroups: \(made.layout) (memory limits: \(made.limitsMemory ? "yes" : "no"), process limits: \(made.limitsProcesses ? "yes" : "no"))", time: now())
            } else {
                // What it costs (limits that fall back or go) is warned about per limit below.
                logger.info("no per-app cgroups: \(why ?? "unknown")")
            }
        }
        let made = cgroups ?? nil
        var cgroup: AppCgroup?
        if let made {
            do {
                cgroup = try made.prepare(id, memory: made.limitsMemory ? limits.memory : nil,
                                          processes: made.limitsProcesses ? limits.processes : nil)
            } catch {
                warnLimit("cgroup \(id)", "could not prepare \(id)'s cgroup (\(error)): its memory and process limits fall back to rlimits")
            }
        }
        if let memory = limits.memory, cgroup == nil || made?.limitsMemory != true {
            rlimits.append(ResourceLimit(.addressSpace, soft: memory))
            warnLimit("memory", "no memory cgroup: memory limits are enforced with RLIMIT_AS (address space); an app over its limit fails to allocate instead of being killed with a jetsam report")
        }
        if limits.processes != nil, cgroup == nil || made?.limitsProcesses != true {
            warnLimit("processes", "no pids cgroup: process/thread limits are not enforced (RLIMIT_NPROC would count every process of the host's user)")
        }
        return (rlimits, cgroup)
    }

    private func warnLimit(_ key: String, _ message: String) {
        guard warnedLimits.insert(key).inserted else { return }
        events.append(.warning, cause: message, time: now())
    }

    private func spawn(_ id: String, options: LaunchOptions) {
        guard let row = apps[id], let instance = runtimes[id]?.instance else { return }
        let config = configuration
        let input = self.input
        let group = self.group
        let container = config.containersDirectory + "/" + id
        let limits = config.limits.limits(for: id)
        let (rlimits, cgroup) = enforcement(of: limits, for: id)
        runtimes[id]?.cgroup = cgroup
        runtimes[id]?.oomKillsBefore = cgroup?.oomKills ?? 0
        runtimes[id]?.oomKillsAtHostKill = nil
        runtimes[id]?.memoryLimit = limits.memory
        let groups = (row.app.applicationGroups ?? []).map { (id: $0, path: config.groupsDirectory + "/" + $0) }
        // The confinement (Confinement.swift): AF_BLUETOOTH sockets only with a
        // bluetooth mode, no Unix sockets of its own, no listen, no new process
        // (seccomp); its containers, system paths read-only, sound and serial
        // devices only with audio / external-accessory (Landlock).
        let modes = row.app.manifest.backgroundModes
        let seccomp = AppConfinement.seccomp(
            config.seccomp, deniedSocketFamilies: config.modeRules ? ModeRegistry.denials(for: modes).socketFamilies : [])
        let landlock: LandlockPolicy? = sandbox.abi == nil ? nil : AppConfinement.landlockPolicy(
            app: row.app, container: container, groupContainers: groups.map(\.path),
            devices: AppConfinement.devices(for: modes, modeRules: config.modeRules),
            stateDirectory: config.stateDirectory, abiLimit: sandbox.abi)
        var environment = [
            "HOME": container,
            "TMPDIR": container + "/tmp",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            IPCProtocol.descriptorEnvironmentKey: String(IPCProtocol.descriptor),
            IPCProtocol.bundleIdentifierEnvironmentKey: id,
            IPCProtocol.bundlePathEnvironmentKey: row.app.bundlePath,
        ]
        if !groups.isEmpty {
            let map = Dictionary(groups.map { ($0.id, $0.path) }, uniquingKeysWith: { first, _ in first })
            if let data = try? JSONSerialization.data(withJSONObject: map, options: [.sortedKeys, .withoutEscapingSlashes]) {
                environment[IPCProtocol.applicationGroupContainersEnvironmentKey] = String(decoding: data, as: UTF8.self)
            }
        }
        // Its own uid (a host running as root): the container is made its own, 0700, and
        // each App Group container is shared through the group's gid (setgid, 2770).
        let identity: ProcessIdentity?
        do {
            identity = try identities?.identity(app: id, groups: groups.map(\.id))
        } catch {
            input.yield(.spawnFailed(app: id, instance: instance, error: "\(error)"))
            return
        }
        Task {
            do {
                if let identity {
                    var st = stat()
                    if lstat(container, &st) == 0, st.st_uid != identity.uid {
                        // Made by an earlier host (as root, or for another uid): all of it becomes the app's.
                        AppOwnership.ownTree(container, identity: identity)
                    }
                }
                try AppOwnership.makeDirectory(container, below: config.containersDirectory, identity: identity, mode: 0o700)
                for sub in ["Documents", "Library", "tmp"] {
                    try AppOwnership.makeDirectory(container + "/" + sub, below: container, identity: identity, mode: 0o700)
                }
                for (group, gid) in zip(groups, identity?.groups ?? groups.map { _ in UInt32.max }) {
                    let owner = identity.map { _ in ProcessIdentity(uid: 0, gid: gid) }
                    try AppOwnership.makeDirectory(group.path, below: config.groupsDirectory, identity: owner,
                                                   mode: owner == nil ? 0o700 : 0o2770)
                }
                let settings = SpawnSettings(
                    executablePath: row.app.executablePath,
                    arguments: [row.app.executablePath] + options.arguments,
                    environment: environment,
                    workingDirectory: container,
                    resourceLimits: rlimits,
                    seccomp: seccomp,
                    landlock: landlock,
                    cgroupProcsFiles: cgroup?.procsFiles ?? [],
                    identity: identity,
                    // Group-writable for App Group containers (setgid folders); the
                    // app's own files are its uid's and its own gid's.
                    umask: identity == nil ? nil : 0o007)
                let bounds = config.bounds
                do throws(ChildLauncher.Failure) {
                    // Events go straight to the input stream (one hop); any that beat
                    // `.spawned` there are held by the supervisor until it arrives. Nothing
                    // is read before `.connected` is in the stream.
                    let (_, channel) = try await ChildLauncher.launch(
                        settings, logPath: config.logsDirectory + "/\(id).log", group: group, autoRead: false,
                        writeBufferWaterMark: .init(low: bounds.unreadBytes / 2, high: bounds.unreadBytes),
                        makeHandler: { AppConnectionHandler(app: id, instance: instance, input: input, bounds: bounds) },
                        onEvent: { event in input.yield(.child(app: id, instance: instance, event)) },
                        spawned: { child in input.yield(.spawned(app: id, instance: instance, child: child)) })
                    input.yield(.connected(app: id, instance: instance, channel: channel))
                    do {
                        try await channel.setOption(.autoRead, value: true).get()
                    } catch {
                        input.yield(.violation(app: id, instance: instance, "could not read the IPC socket: \(error)"))
                    }
                } catch .attach(_, let error) {
                    input.yield(.violation(app: id, instance: instance, "could not attach the IPC socket: \(error)"))
                } catch .spawn(let error) {
                    throw error
                }
            } catch {
                input.yield(.spawnFailed(app: id, instance: instance, error: "\(error)"))
            }
        }
    }
}
