import AppHostProtocol
import AppHostSystem
import Synchronization
import Foundation
import Logging
import NIOCore
import NIOPosix
import Plugins
import SystemPackage


/// The host's brain: installed apps, one ``Lifecycle`` per app, and the effects.
///
/// Requests from the control socket arrive as actor calls. Everything an app or the
/// kernel says arrives on one ordered input stream consumed by ``run()``, so the
/// handling of one input is a synchronous step of the actor and never interleaves.
public actor Supervisor {

    public let configuration: HostConfiguration
    let store: Store
    let events: EventLog
    let group: any EventLoopGroup
    let logger: Logger
    /// Host time and every deadline (see ``DeadlineScheduler``).
    var scheduler: DeadlineScheduler
    /// The one real-clock timer (a timerfd with a thread of its own), armed as the
    /// scheduler says; nil on the virtual clock. Moving it is one syscall that wakes
    /// nobody; a cancelled `Task.sleep` on Linux left its dispatch timer armed (a wake-up
    /// for every cancelled deadline), and moving a NIO timer from the actor's thread woke
    /// the event loop on the path of every step that moved a deadline.
    let deadlineTimer: DeadlineTimer?
    /// Virtual clock: the safety net under each settle wait, in real time (see ``settle()``),
    /// with its own timerfd for the same reason: arming it is one syscall that wakes no
    /// thread, where a NIO timer scheduled and cancelled from the actor woke the event loop
    /// twice a settle.
    let settleTimer: DeadlineTimer?
    /// The current step's depth and what it defers to its end: frames, transitions, the
    /// plugins' effects, the timer (see ``StepScope``).
    var scope = StepScope()
    /// Virtual clock: who waits for the host to settle, and the safety net under each wait
    /// (see ``SettleTracker``).
    var settling = SettleTracker()
    /// Virtual clock: which app processes are known to be asleep (see ``Quiescence``).
    var quiescence = Quiescence()
    /// Verbs waiting for an app (a launch, an exit), numbered (see ``VerbWaits``).
    var verbWaits = VerbWaits()
    /// What the safety net caught: each a run whose outcome no longer depends only on its
    /// inputs (``takeSafetyNetFailures()``).
    var safetyNetFailures: [String] = []

    var apps: [BundleID: Store.AppRow] = [:]
    /// Each running app's process and runtime (see ``ProcessTable``).
    var processes = ProcessTable()
    var lastStateChange: [BundleID: Date] = [:]
    /// Transitions whose events are not on disk yet (held in the step's batch, or waiting
    /// for a full disk), in order: ``flushTransitions()`` hands them on once they are.
    var unloggedTransitions: [Store.TransitionRow] = []
    var shuttingDown = false
    /// The app that was in front when the device locked: it comes back at the unlock.
    var frontAtLock: BundleID?
    /// Asked to shut down, stopped, and who waits for each (Supervisor+Running.swift).
    var life = HostLife()
    /// Transition writes the database refused (counted on GRDB's queue).
    let databaseFailures = RecordingFailures()
    /// A run-loop stamp page made after a spawn for the next one (see `spawn`).
    var spareStampPage: RunLoopStampPage?
    /// Virtual clock: whose inputs are handled now, and what waits (see ``TurnOrder``).
    var turns = TurnOrder()
    /// Verbs waiting for an app's state or for the kernel's word on its stop (see ``AppWaiters``).
    var waiters = AppWaiters<CheckedContinuation<Void, Never>>()
    /// The bound on the stop waits, armed while anyone waits (see ``awaitStopConfirmations(_:)``).
    var stopWaitBound: Scheduled<Void>?

    /// The transfer daemon and the transfers the host mediates (TransferBroker.swift).
    var transfers = TransferBrokerState()
    /// The app switcher and its snapshots (SnapshotKeeper.swift).
    var snapshots = SnapshotKeeperState()
    /// Device memory: footprints, pressure, jetsam (Supervisor+Memory.swift).
    var memory: MemoryState

    let inputs: AsyncStream<Input>
    let input: AsyncStream<Input>.Continuation

    /// The background-mode plugins' host side.
    let modes: ModeHub
    /// Audio sinks of apps with an open audio session.
    var audioSinks = AudioSinks()
    /// Plans each launch (limits, confinement, identity); holds the per-app cgroups.
    var launcher: AppLauncher
    /// What the sandbox enforces here (logged once at startup).
    let sandbox: SandboxSummary
    /// Per-app uids (a host running as root with `identities` set), else nil.
    let identities: AppIdentities?
    /// The host said that it cannot enforce data protection (apps run as its uid).
    var dataProtectionWarned = false
    /// A user's host (``coversProtectedFiles``): the files closed to each app while the
    /// device is locked, by the paths its namespace shows (Supervisor+DataProtection).
    var protectedCovers: [BundleID: Set<String>] = [:]
    /// Where termination reports go (database and `reports/`).
    let reportWriter: ReportWriter

    /// Opens the state directory's database and event log. The caller holds the state dir lock.
    public init(configuration: HostConfiguration, group: any EventLoopGroup, logger: Logger) throws {
        // A host lives long, draws large pictures and holds descriptors for many apps:
        // see `Allocator.holdLargeBlocksApart` and `HostLimits.raiseOpenFiles`.
        Allocator.holdLargeBlocksApart()
        HostLimits.raiseOpenFiles()
        self.configuration = configuration
        let separateIdentities = configuration.identities != nil && geteuid() == 0
        try configuration.prepareStateDirectory(separateIdentities: separateIdentities)
        store = try Store(path: configuration.databasePath)
        reportWriter = ReportWriter(store: store, directory: configuration.reportsDirectory, logger: logger)
        identities = separateIdentities
            ? try AppIdentities(settings: configuration.identities ?? .standard, stateDirectory: configuration.stateDirectory, store: store)
            : nil
        events = try EventLog(path: configuration.eventsPath, limits: configuration.eventLog, logger: logger)
        self.group = group
        self.logger = logger
        if configuration.clock == .virtual, let epoch = configuration.virtualEpoch {
            scheduler = DeadlineScheduler(mode: .virtual, startDate: epoch)
        } else {
            scheduler = DeadlineScheduler(mode: configuration.clock)
        }
        let startDate = scheduler.startDate
        (inputs, input) = AsyncStream<Input>.makeStream()
        let deadlines = input
        deadlineTimer = configuration.clock == .real ? try DeadlineTimer { deadlines.yield(.deadlinesDue) } : nil
        settleTimer = configuration.clock == .virtual ? try DeadlineTimer(name: "aph-settle") { deadlines.yield(.settleTimerFired) } : nil
        modes = ModeHub(profile: configuration.profile)
        var skipped: [Store.SkippedRow] = []
        for row in try store.apps(skipping: { skipped.append($0) }) {
            apps[row.app.bundleIdentifier] = row
            _ = modes.install(Self.modeApp(row.app, configuration))
        }
        try modes.restore(from: store, configuration: configuration, logger: logger)
        transfers = try Self.restoredTransfers(store: store, installed: Set(apps.keys), start: startDate)
        events.append(.hostStarted, cause: "host started (pid \(getpid()), \(apps.count) app(s) installed, \(configuration.clock.rawValue) clock, profile \(configuration.profile.name))", time: startDate)
        for row in skipped {
            events.append(.warning, cause: "\(configuration.databasePath): \(row)", time: startDate)
            logger.warning("\(configuration.databasePath): \(row)")
        }
        Self.recoverTransitions(store: store, events: events, logger: logger, time: startDate)
        let killedAtStart = Self.killLeftoverProcesses(apps: apps.keys.sorted(), identities: identities, events: events,
                                                       logger: logger, time: startDate)
        lastStateChange = reportWriter.recordEndedWithHost(apps: apps.keys.sorted(), killedAtStart: killedAtStart,
                                                           events: events, time: startDate)
        // Said once, at startup: what confines apps here and what does not.
        let namespaces = NamespaceUse.decide(configured: configuration.namespaces, identities: identities != nil,
                                             stateDirectory: configuration.stateDirectory,
                                             writable: configuration.containersDirectory)
        let summary = SandboxSummary(kernelABI: Landlock.abiVersion, limit: configuration.landlockABI,
                                     seccomp: configuration.seccomp, uid: geteuid(),
                                     identities: identities.map { ($0.settings.first, $0.settings.count) },
                                     namespaces: namespaces)
        events.append(.service, cause: summary.enforced, time: startDate)
        logger.info("\(summary.enforced)")
        if let warning = summary.warning {
            events.append(.warning, cause: warning, time: startDate)
            logger.warning("\(warning)")
        }
        sandbox = summary
        launcher = AppLauncher(configuration: configuration, sandbox: summary, identities: identities, logger: logger)
        let device = configuration.memory.device ?? configuration.profile.deviceMemory
        memory = MemoryState(device: device, cuesPerSecond: configuration.bounds.footprintCues)
        memory.watch = Self.startMemoryWatch(configuration, device: device, input: input, events: events, logger: logger, time: startDate)
    }

    /// At start, before reporting on the apps a crashed host left: brings the database's
    /// transitions level with the event log. A transition goes to the database only once
    /// its event is on disk, on a queue of its own: a host killed in between (kill -9, a
    /// crash) left events.jsonl ahead of the table, and without this the next host would
    /// report on an app from a state it had already left. Also numbers new events above
    /// any transition the table holds whose event a full disk dropped.
    nonisolated static func recoverTransitions(store: Store, events: EventLog, logger: Logger, time: Date) {
        do {
            let last = try store.lastTransitionSeq()
            if let last { events.advanceSeq(atLeast: last) }
            guard let floor = try last ?? (store.hasTransitions() ? nil : 0) else { return }  // an older database's rows only
            let missing = events.events(after: floor).compactMap { e -> Store.TransitionRow? in
                guard e.kind == .transition, let app = e.bundleIdentifier, let from = e.from, let to = e.to else { return nil }
                return Store.TransitionRow(bundleIdentifier: app, pid: e.pid, from: from, to: to, cause: e.cause, time: e.time, seq: e.seq)
            }
            guard !missing.isEmpty else { return }
            try store.insertTransitions(missing)
            let cause = "recovered \(missing.count) state transition(s) (seq \(missing.first?.seq ?? 0)–\(missing.last?.seq ?? 0)) from \(events.path) that the database had not committed when the previous host ended"
            events.append(.warning, cause: cause, time: time)
            logger.warning("\(cause)")
        } catch {
            logger.error("could not bring the database's transitions level with \(events.path): \(error)")
        }
    }

    /// At start, before reporting on the apps a crashed host left: kills every process
    /// still running as an app's uid (a root host with per-app uids; without them the
    /// apps run as the host's uid, which keeps their parent-death signal). Returns the
    /// apps whose processes were killed, with their pids.
    nonisolated static func killLeftoverProcesses(apps: [BundleID], identities: AppIdentities?, events: EventLog,
                                                  logger: Logger, time: Date) -> [BundleID: [Int32]] {
        guard let identities else { return [:] }
        var killed: [BundleID: [Int32]] = [:]
        for (app, outcome) in identities.killLeftovers(of: apps).sorted(by: { $0.key < $1.key }) {
            if !outcome.killed.isEmpty {
                killed[app] = outcome.killed
                let cause = "killed \(outcome.killed.count) process(es) of \(app) left running by the previous host (pid \(outcome.killed.map(String.init).joined(separator: ", "))): it ended without shutting down"
                events.append(.signal, app: app, cause: cause, fields: .init(signal: .kill), time: time)
                logger.warning("\(cause)")
            }
            if !outcome.remaining.isEmpty {
                let cause = "process(es) of \(app) left by the previous host did not die of SIGKILL within 2 s (pid \(outcome.remaining.map(String.init).joined(separator: ", ")))"
                events.append(.warning, app: app, cause: cause, time: time)
                logger.error("\(cause)")
            }
        }
        return killed
    }

    // MARK: - Inputs

    func handle(_ item: Input) {
        guard admitForTurn(item) else { return }
        switch item {
        case .spawned(let id, let instance, let child):
            processes.watch(id, for: .settle)
            let (attached, early) = processes.attach(id, instance: instance, child: child)
            guard attached != nil else {
                try? child.signal(SIGKILL)
                return
            }
            touch(id)
            events.append(.spawned, app: id, pid: child.pid, cause: "spawned \(apps[id]?.app.executablePath ?? "")", time: now())
            feed(id, .spawned(pid: child.pid))
            if processes[id]?.machine.killSent == true {
                // Killed (a watchdog, a terminate) before the process existed.
                if let cgroup = processes[id]?.cgroup, processes[id]?.oomKillsAtHostKill == nil {
                    processes[id]?.oomKillsAtHostKill = cgroup.oomKills
                }
                try? child.signal(SIGKILL)
            }
            for early in early {
                handle(.child(app: id, instance: instance, early.event, observed: early.observed))
            }

        case .spawnFailed(let id, let instance, let error):
            guard let rt = processes[id], rt.instance == instance else { return }
            events.append(.warning, app: id, cause: "launch failed: \(error)", time: now())
            processes[id]?.exitStatus = nil
            finishLaunchWaiters(id, .failure(ControlError(.spawnFailed, "\(id): could not launch: \(error)")))
            feed(id, .exited(description: "could not be spawned: \(error)", clean: false))

        case .connected(let id, let instance, let channel, let writer, let hello):
            guard processes[id]?.instance == instance, processes[id]?.machine.isRunning == true else {
                writer?.close()
                channel.close(promise: nil)
                return
            }
            processes[id]?.channel = channel
            processes[id]?.writer = writer
            processes[id]?.helloAnswer = hello
            processes[id]?.channelOpen = true
            touch(id)

        case .message(let id, let instance, let message):
            guard processes[id]?.instance == instance else { return }
            touch(id)
            handleMessage(id, message)

        case .messages(let id, let instance, let messages):
            if processes[id]?.instance == instance { touch(id) }
            for message in messages {
                // Each is checked: one of them may end the app (a violation, a kill).
                guard processes[id]?.instance == instance else { return }
                handleMessage(id, message)
            }

        case .violation(let id, let instance, let reason):
            guard processes[id]?.instance == instance else { return }
            touch(id)
            events.append(.warning, app: id, pid: processes[id]?.pid, cause: "IPC protocol violation: \(reason)", time: now())
            feed(id, .protocolViolation(reason))

        case .child(let id, let instance, let event, let observed):
            guard processes[id]?.instance == instance else { return }
            guard processes[id]?.child != nil else {
                // Reported by the reaper before the spawn call returned: keep for `.spawned`.
                if !processes.holdEarly(instance: instance, event, observed: observed) {
                    logger.warning("\(id): more than \(ProcessTable.earlyReportsBound) reports about its process before its spawn returned; dropped one")
                }
                return
            }
            switch event {
            case .stopped:
                // A continue followed by a stop before the reaper looked is reported as the
                // stop alone: the frames held for the continue's word go now.
                releaseHeldFrames(id)
                processes[id]?.stopConfirmed = true
                // Stopped, so alive: no OOM kill counted so far was of the app itself.
                if let cgroup = processes[id]?.cgroup { processes[id]?.oomKillsBefore = cgroup.oomKills }
                if processes[id]?.lockCheck == .awaitingStop {
                    // The host's own suspension: the app becomes suspended once no lock
                    // outside its container is found (`.lockVerdict`), or is killed instead.
                    startLockCheck(id, stoppedAt: observed)
                } else {
                    stopStands(id, instance: instance, observed: observed)
                }
            case .continued:
                events.append(.signal, app: id, pid: processes[id]?.pid, cause: "running again (kernel confirmed SIGCONT)",
                              fields: .init(signal: .cont, confirmed: true), time: scheduler.date(observed: observed))
                touch(id)
                feedObserved(id, .continueConfirmed, at: observed)
                processes[id]?.stopConfirmed = false
                releaseHeldFrames(id)
            case .exited(let status):
                processes[id]?.heldForContinue = nil
                // The app is gone: so is anything left in its cgroup (a child holding its end
                // of the IPC socket would keep the connection open, too). Apps make no process
                // (seccomp), so there is none: this is defense in depth, harmless when empty.
                if let left = processes[id]?.cgroup?.killAll(), !left.isEmpty {
                    events.append(.warning, app: id, cause: "processes \(left.map(String.init).joined(separator: ", ")) of the app's cgroup outlived SIGKILL", time: now())
                }
                if processes[id]?.channelOpen == true {
                    processes[id]?.pendingExit = status
                    processes.watch(id, for: .settle)
                    // At most 1 s (real time) for the socket to reach EOF, on the event loop's
                    // timer, cancelled when it does. On the virtual clock the EOF decides
                    // (the process is gone: nothing holds its end), under the safety net.
                    let input = self.input
                    let bound: Duration = takesTurns ? configuration.settleTimeout : .seconds(1)
                    processes[id]?.drainTimer = group.any().scheduleTask(in: .nanoseconds(bound.clampedNanoseconds)) {
                        input.yield(.drainExpired(app: id, instance: instance))
                    }
                } else {
                    processExit(id, status)
                }
            }

        case .disconnected(let id, let instance):
            guard processes[id]?.instance == instance else { return }
            processes[id]?.channelOpen = false
            processes[id]?.writer = nil
            processes[id]?.drainTimer?.cancel()
            processes[id]?.drainTimer = nil
            if let status = processes[id]?.pendingExit {
                processExit(id, status)
            }

        case .drainExpired(let id, let instance):
            guard processes[id]?.instance == instance, let status = processes[id]?.pendingExit else { return }
            processes[id]?.channelOpen = false
            processes[id]?.writer = nil
            processes[id]?.channel?.close(promise: nil)
            processExit(id, status)

        case .lockVerdict(let id, let instance, let what, let observed):
            // Not `.checking` when the app was resumed (or killed) meanwhile: the check is moot.
            guard processes[id]?.instance == instance, case .checking(let stoppedAt) = processes[id]?.lockCheck else { return }
            processes[id]?.lockCheck = nil
            if let what {
                // Killed at the moment of suspension, without being suspended first.
                feedObserved(id, .lockHeldAtSuspension(what), at: observed)
            } else {
                stopStands(id, instance: instance, observed: stoppedAt)
            }

        case .deadlinesDue:
            fireDue()

        case .settleTimerFired:
            safetyNetFired()

        case .stopWaitsExpired:
            resumeStopWaiters(nil, all: true)

        case .quietProbe(let id, let instance, let token, let asleep):
            probeEnded(.init(app: id, instance: instance), token: token, asleep: asleep)

        case .transferDaemonStarted, .transferDaemonFailed, .transferEvent, .transferEvents, .transferDaemonExited, .transferDaemonRestart, .transferBatchSaved:
            handleTransferInput(item)
        case .shutdownGraceOver(let final):
            shutdownGraceOver(final: final)
        case .memoryPressureReported(let level, let trigger):
            memoryPressureReported(level, trigger: trigger)
        }
    }

    /// True when apps share the host's uid and run in user, mount and pid namespaces of
    /// their own (a host run by a user whose machine allows them): each is its pid
    /// namespace's init, and its mounts are the host's to cover (decisions 0050, 0051).
    var appsIsolateUser: Bool { identities == nil && sandbox.namespaces == .used }

    /// What ended the process, with an abort seen as the abort it was: an app in a pid
    /// namespace of its own (a user's host) is that namespace's init, whose own `SIGABRT`
    /// the kernel discards (pid_namespaces(7)), so glibc's `abort()` ends it with its last
    /// resort instead (a `hlt`, hence `SIGSEGV`, else `_exit(127)`). An app that announced
    /// an uncaught exception, which it does only right before `abort()`, and then died so,
    /// died of that abort: `SIGABRT`, as on iOS and on a root host (decision 0051).
    func abortStatus(_ id: BundleID, _ status: ExitStatus) -> ExitStatus {
        guard appsIsolateUser, processes[id]?.machine.raisedException != nil else { return status }
        switch status {
        case .signaled(let signal, let core) where [SIGSEGV, SIGILL, SIGTRAP, SIGBUS].contains(signal):
            return .signaled(signal: SIGABRT, coreDumped: core)
        case .exited(code: 127):
            return .signaled(signal: SIGABRT, coreDumped: false)
        default:
            return status
        }
    }

    /// The process is gone: its connection and its run-loop stamp page are freed on
    /// an event loop, not on the actor at the app's next launch (where they were: 16 µs
    /// for the channel's pipeline, handlers and buffers, 40-60 µs for the page's munmap,
    /// which stops the other CPUs to flush their TLBs in this VM).
    func releaseConnection(_ id: BundleID) {
        let channel = processes[id]?.channel, page = processes[id]?.stampPage
        guard channel != nil || page != nil else { return }
        processes[id]?.channel = nil
        processes[id]?.helloAnswer = nil
        processes[id]?.stampPage = nil
        (channel?.eventLoop ?? group.any()).execute { withExtendedLifetime((channel, page)) {} }
    }

    func processExit(_ id: BundleID, _ reaped: ExitStatus) {
        let status = abortStatus(id, reaped)
        processes.processGone(id)
        memory.device.processGone(id)
        processes[id]?.pendingExit = nil
        processes[id]?.writer = nil
        if let instance = processes[id]?.instance {
            quiescence.exited(.init(app: id, instance: instance))
        }
        processes[id]?.exitStatus = status
        events.append(.exited, app: id, pid: processes[id]?.pid, cause: status.description, time: now())
        if let record = processes[id]?.outOfMemoryRecord(status) {
            feed(id, .limitExceeded(record))
        }
        let clean: Bool
        if case .exited(code: 0) = status { clean = true } else { clean = false }
        feed(id, .exited(description: status.description, clean: clean))
        releaseConnection(id)
    }

    // MARK: - Effects

    /// Feeds one event to an app's machine and performs the effects.
    func feed(_ id: BundleID, _ event: Lifecycle.Event) {
        scope.beginFeed()
        events.beginBatch()
        defer {
            let effects = scope.endFeed()
            flushTransitions()
            armTimerIfChanged()
            if !effects.isEmpty { performMode(effects) }
            // Timers that fell due while the app ran no code fire once it runs again, after
            // the callbacks of the step that resumed it.
            if !scope.feeding, processes[id]?.timers.owedCount ?? 0 > 0 { resumeAppTimers(id) }
            // Footprints that may have changed in the step are read, and the pressure judged.
            if !scope.feeding, memory.device.hasStale { evaluateMemoryAfterStep() }
            events.endBatch()
            if !unloggedTransitions.isEmpty { flushTransitions() }
        }
        // In place: a copy of the runtime would make the machine's tables copy themselves.
        let now = hostNow()
        guard let effects = processes[id]?.machine.handle(event, at: now) else { return }
        for effect in effects {
            perform(id, effect)
        }
        // Read through `?.`, not a copy of the runtime (`guard let rt = processes[id]`
        // retained and released everything in it, on every event fed).
        guard let isRunning = processes[id]?.machine.isRunning else { return }
        // Launch finished (or failed): answer `launch`.
        if processes[id]?.machine.launched == true || !isRunning, processes[id]?.launchWaiters.isEmpty == false {
            if let pid = processes[id]?.pid, isRunning {
                finishLaunchWaiters(id, .success(pid))
            } else {
                let reason = processes[id]?.exitStatus.map { "it ended during launch (\($0.description))" } ?? "it did not start"
                finishLaunchWaiters(id, .failure(ControlError(.spawnFailed, "\(id) could not be launched: \(reason); see `apphost reports \(id)`")))
            }
        }
        if waiters.waitsForStops { resumeStopWaiters(id) }
        if !isRunning, let waiters = processes[id]?.exitWaiters, !waiters.isEmpty {
            processes[id]?.exitWaiters.removeAll()
            for w in waiters {
                verbWaits.end(w.number)
                w.continuation.resume()
            }
        }
    }

    /// Feeds the kernel's report of a stop or a continue: the transitions it makes are
    /// recorded at the moment the reaper thread got the report (on the real clock), as a
    /// raw `waitid` loop would time it, not when the actor came to handle it.
    /// Reads /proc/locks for a stopped app off the actor (it takes the kernel's file-lock
    /// rwsem for writing: tens of µs here) and reports with `.lockVerdict`. The stop is
    /// already confirmed: a lock found outside the container kills the suspended app with
    /// 0xdead10cc, as iOS does with an app "suspended with locked files". Settling waits for
    /// the verdict (see ``settleViews``), so on the virtual clock the kill comes at the time
    /// of the stop.
    func startLockCheck(_ id: BundleID, stoppedAt: ContinuousClock.Instant) {
        guard let instance = processes[id]?.instance, let pid = processes[id]?.child?.pid else { return }
        processes[id]?.lockCheck = .checking(stoppedAt: stoppedAt)
        processes.watch(id, for: .settle)
        let (container, input) = (configuration.containersDirectory + "/" + id.rawValue + "/", self.input)
        Task.detached {
            let verdict = ProcLocks.firstOutside(container, heldBy: pid)
            input.yield(.lockVerdict(app: id, instance: instance, verdict, observed: .now))
        }
    }

    /// The kernel's confirmation of a stop, handed to the app's lifecycle (it becomes
    /// `suspended` as of `observed`).
    private func stopStands(_ id: BundleID, instance: UInt64, observed: ContinuousClock.Instant) {
        feedObserved(id, .stopConfirmed, at: observed)
        // Quiet without a probe only if the stop stands: a report taken late (kept for
        // the app's turn) may come after the host continued the process again.
        if takesTurns, processes[id]?.machine.state == .suspended, processes[id]?.heldForContinue == nil {
            quiescence.stopped(.init(app: id, instance: instance))
        }
    }

    func feedObserved(_ id: BundleID, _ event: Lifecycle.Event, at observed: ContinuousClock.Instant) {
        scope.observedTime = configuration.clock == .real ? (id, scheduler.date(observed: observed)) : nil
        defer { scope.observedTime = nil }
        feed(id, event)
    }

    /// Hands the transitions whose events are on disk to the database's writer queue (a
    /// transition's event is written at the end of its step, or later if the disk was
    /// full: the table never holds a transition the log lacks, so after a crash the next
    /// host brings the table level with the log, ``Supervisor/recoverTransitions``). Also
    /// retries what a full disk held back, in the log and in the database.
    func flushTransitions() {
        if events.hasUnwritten { events.retryUnwritten() }
        unloggedTransitions += scope.takeTransitions()
        let written = events.writtenSeq
        let ready = unloggedTransitions.prefix { row in row.seq.map { $0 <= written } ?? true }
        let logger = self.logger
        let failures = databaseFailures
        let path = configuration.databasePath
        let onError: @Sendable (any Error) -> Void = { error in
            logger.error("could not record state transitions in \(path): \(error)")
            failures.note("\(error)")
        }
        guard !ready.isEmpty else {
            store.retryUnwritten(onError: onError)
            return
        }
        let rows = Array(ready)
        unloggedTransitions.removeFirst(rows.count)
        store.recordTransitions(rows, onError: onError)
    }

    /// Answers `launch`. It goes on once this step's events are written (the actor is
    /// free after them), not after the database's queue has committed the transition to
    /// active: the table of transitions is what the next host reads after a crash, and
    /// the event log is the record the verb checks. Waiting for the queue cost two thread
    /// wakes and a commit, a fifth of the host's part of a launch.
    ///
    /// What the step recorded so far is written first (``EventLog/flushHeld``; the rest of
    /// the step's events follow at its end), so that each waiter is answered here, with a
    /// failure if a write since its launch began failed, and goes on without the actor.
    func finishLaunchWaiters(_ id: BundleID, _ result: Result<Int32, ControlError>) {
        let waiters = processes[id]?.launchWaiters ?? []
        guard !waiters.isEmpty else { return }
        processes[id]?.launchWaiters.removeAll()
        if case .success = result { events.writeHeld() }
        for ticket in waiters {
            verbWaits.end(ticket.number)
            ticket.resolve(result.flatMap { pid in
                if let error = unrecorded(since: ticket.mark, "launched", id) { return .failure(error) }
                return .success(pid)
            })
        }
    }

    func perform(_ id: BundleID, _ effect: Lifecycle.Effect) {
        switch effect {
        case .spawn(let options):
            expectTurn(.app(id))
            spawn(id, options: options)
        case .send(let callback, let state):
            expectTurn(.app(id))
            guard let last = processes[id]?.seq else { return }
            let seq = last + 1
            processes[id]?.seq = seq
            processes[id]?.pending[seq] = callback
            processes[id]?.callbacksSent?.sent(seq)
            // The first callback may have gone out with the welcome (see HelloAnswer).
            if seq == 1, case .didFinishLaunching = callback, processes[id]?.helloAnswer?.firstCallbackSent == true { return }
            send(id, .callback(seq: seq, callback: callback, state: state))
        case .signal(let sig, let reason):
            // The signal first, the host's books after: nothing below changes what is sent,
            // and the time from a callback's return to its SIGSTOP is the decision's cost.
            let child = processes[id]?.child
            // Sent at the moment the host issues kill(2), as a raw loop times its signal:
            // the call itself is the kernel's (it wakes the app's threads, and one woken on
            // this CPU may run first: about 20 µs of a SIGSTOP here).
            let issued = now()
            let outcome = processes[id]?.signal(sig)
            processes.watch(id, for: .settle)
            expectTurn(.app(id))
            touch(id)
            if sig == .kill { memory.device.killSent(id) }
            guard let child, let (sent, others) = outcome else { return }
            if sig == .stop { modes.setRunningCode(id, false) } else if sig == .cont { modes.setRunningCode(id, true) }
            // On the virtual clock, what follows a continue waits for the kernel's word that
            // the app runs again (a stopped process reports it; one not yet stopped may not).
            // (The kernel's word arrives as an input: after this step, whatever the order here.)
            if sig == .cont, configuration.clock == .virtual, processes[id]?.stopConfirmed == true,
               processes[id]?.heldForContinue == nil {
                processes[id]?.heldForContinue = []
            }
            if let error = sent {
                // ESRCH: already gone; its exit is on its way.
                logger.debug("signal \(sig.rawValue) to \(id) failed: \(error)")
            } else {
                events.append(.signal, app: id, pid: child.pid, cause: "\(sig.rawValue): \(reason)", fields: .init(signal: sig), time: issued)
            }
            if !others.isEmpty {
                events.append(.signal, app: id, pid: child.pid,
                              cause: "\(sig.rawValue) also to the app's other processes: \(others.map(String.init).joined(separator: ", "))", time: now())
            }
            // iOS kills an app suspended with a shared file lock (0xdead10cc) rather than let
            // it deadlock the others: checked once the kernel has confirmed the stop (see
            // `.child(.stopped)` and `startLockCheck`), when the app can take no more locks.
            processes[id]?.lockCheck = sig == .stop ? .awaitingStop : nil
        case .transition(let from, let to, let cause):
            processes.watch(id, for: .settle)
            let time = scope.observedTime.flatMap { $0.app == id ? $0.date : nil } ?? now()
            lastStateChange[id] = time
            processes[id]?.since = time
            processes[id]?.history.append(StateRecord(state: to, time: time, cause: cause))
            let pid = processes[id]?.pid
            // The event first: the row carries its seq, and goes to the database only once
            // the event is on disk (``flushTransitions()``), so the table never leads the log.
            let event = try? events.append(.transition, app: id, pid: pid, from: from, to: to, cause: cause, time: time).get()
            scope.record(Store.TransitionRow(bundleIdentifier: id, pid: pid, from: from, to: to, cause: cause, time: time,
                                             seq: event?.seq))
            let machine = processes[id]?.machine
            // Before its hello: a first callback made for another state does not go out.
            if machine?.connected == false, let answer = processes[id]?.helloAnswer, answer.firstState != to {
                answer.withdrawFirstCallback()
            }
            if to == .active {
                switcherActivated(id)
                snapshotsActivated(id)
            }
            if to == .notRunning, machine?.lastTermination == .user { switcherRemoved(id, uninstalled: false) }
            memoryTransition(id, from: from, to: to)
            if to == .notRunning {
                appTimersEnded(id)
                transfersAppExited(id, byUser: machine?.lastTermination == .user)
                performMode(modes.appExited(id, byUser: machine?.lastTermination == .user, at: hostNow()))
            } else {
                if from == .suspended { transfersAppRunsAgain(id) }
                let inFront: (AppState) -> Bool = { $0 == .active || $0 == .inactive }
                if inFront(to) && !inFront(from) {
                    transfersAppCameToFront(id)
                } else if inFront(from) && !inFront(to) {
                    transfersAppLeftFront(id)
                }
                performMode(modes.appMoved(id, from: from, to: to, runningCode: machine?.isRunningCode ?? false, at: hostNow()))
            }
            for waiter in waiters.entered(to, by: id) { waiter.resume() }
        case .startTimer(let timer, let after):
            startTimer(id, timer, after: after)
        case .cancelTimer(let timer):
            cancelTimer(id, timer)
        case .report(let record):
            writeReport(id, record)
        case .log(let message):
            events.append(.warning, app: id, pid: processes[id]?.pid, cause: message, time: now())
        }
    }

    func writeReport(_ id: BundleID, _ record: Lifecycle.TerminationRecord) {
        guard let rt = processes[id] else { return }
        reportWriter.write(ReportWriter.report(app: id, pid: rt.pid, status: rt.exitStatus, record: record,
                                               history: rt.history, time: now()), events: events)
    }

}

/// A `launch()` waiting for its app's didFinishLaunching to return (or for the launch to
/// fail): answered by the supervisor's step, awaited by the caller off the actor.
final class LaunchTicket: Sendable {
    private struct State {
        var result: Result<Int32, ControlError>?
        var waiter: CheckedContinuation<Result<Int32, ControlError>, Never>?
    }

    /// The recording failures counted when the launch began.
    let mark: (events: UInt64, database: UInt64)
    /// Its number among the verbs waiting for an app (``VerbWaits``).
    let number: UInt64
    private let state = Mutex(State())

    init(mark: (events: UInt64, database: UInt64), number: UInt64) {
        self.mark = mark
        self.number = number
    }

    /// Answers the launch (the first answer counts).
    func resolve(_ result: Result<Int32, ControlError>) {
        let waiter = state.withLock { state -> CheckedContinuation<Result<Int32, ControlError>, Never>? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: result)
    }

    /// The answer, once there is one.
    func value() async -> Result<Int32, ControlError> {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Result<Int32, ControlError>? in
                if let result = state.result { return result }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
