import AppHostManifest
import AppHostProtocol
import AppHostSystem
import Foundation
import Logging
import NIOCore
import NIOPosix
import Plugins
import SystemPackage

/// The control API: the verbs of `apphost` and of the control socket. They own no state:
/// each checks its request, feeds the app's machine (``Supervisor/feed(_:_:)``) and waits
/// for what the verb promises (a launch, an exit, the records written).
extension Supervisor {
    /// Records a host-wide `service` event (the push gateway says where it listens).
    public func recordServiceEvent(_ cause: String) {
        events.append(.service, cause: cause, time: now())
    }

    // MARK: - Control API

    /// Installs or updates the app at `path`. Updating an app that runs terminates it
    /// first, as an App Store update does (willTerminate, or a kill without a callback if
    /// it is suspended), and returns once it is gone; the new bundle's settings apply
    /// from its next launch. A bundle that cannot be installed leaves the running app be.
    /// `entitlements` names the entitlements file when it is not `Name.entitlements` beside
    /// the Info.plist (``AppBundleLoader/load(path:settings:productDirectories:entitlements:)``).
    public func install(path: String, settings: [String: String], entitlements: String? = nil) async throws(ControlError) -> InstalledApp {
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
        let bundle: AppBundle
        do {
            let dirs = AppBundleLoader.defaultProductDirectories(forBundleAt: absolute, extra: configuration.productDirectories)
            bundle = try AppBundleLoader.load(path: absolute, settings: settings, productDirectories: dirs, entitlements: entitlements)
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
        // The manifest reader checked the identifier by the same rule; this is where it
        // becomes a BundleID, once, for the host's tables.
        let id: BundleID
        do {
            id = try BundleID(validating: bundle.manifest.bundleIdentifier)
        } catch {
            throw ControlError(.invalidManifest, "\(absolute): CFBundleIdentifier \"\(bundle.manifest.bundleIdentifier)\": \(error)")
        }
        let updated = apps[id] != nil
        if updated, processes[id]?.machine.isRunning == true {
            feed(id, .terminate(.update))
            await waitForExit(id)
        }
        let app = InstalledApp(
            bundleIdentifier: id, name: bundle.manifest.name,
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
        if let rt = processes[app.bundleIdentifier], rt.machine.isRunning {
            modeApp.state = rt.machine.state
            modeApp.isRunningCode = rt.machine.isRunningCode
        }
        performMode(modes.install(modeApp))
        events.append(.installed, app: app.bundleIdentifier, cause: "\(updated ? "updated" : "installed") from \(app.bundlePath)", time: now())
        return app
    }

    /// Uninstalls an app, terminating it first.
    public func uninstall(_ id: BundleID) async throws(ControlError) {
        _ = try installed(id)
        if processes[id]?.machine.isRunning == true {
            feed(id, .terminate(.uninstall))
            await waitForExit(id)
        }
        do { try store.deleteApp(id) } catch { throw ControlError(.internalError, "\(error)") }
        apps.removeValue(forKey: id)
        processes.remove(id)
        performMode(modes.uninstall(id))
        transfersAppUninstalled(id)
        switcherRemoved(id, uninstalled: true)
        memory.device.uninstalled(id)
        // As on iOS, the app's data goes with it. Reports and history stay.
        try? FileManager.default.removeItem(atPath: configuration.containersDirectory + "/" + id.rawValue)
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
    ///
    /// The answer comes from the step in which didFinishLaunching's return is handled,
    /// once what that step had recorded is written (``LaunchTicket``): the caller goes on
    /// on its own thread, not after the rest of the step and whatever the actor runs next.
    public nonisolated func launch(_ id: BundleID, background: Bool, arguments: [String],
                                   terminateRunning: Bool = false) async throws(ControlError) -> Int32 {
        switch try await startLaunch(id, background: background, arguments: arguments, terminateRunning: terminateRunning) {
        case .running(let pid): return pid
        case .waiting(let ticket): return try await ticket.value().get()
        }
    }

    enum LaunchStart: Sendable {
        case running(Int32)
        case waiting(LaunchTicket)
    }

    private func startLaunch(_ id: BundleID, background: Bool, arguments: [String],
                             terminateRunning: Bool) async throws(ControlError) -> LaunchStart {
        let row = try installed(id)
        if shuttingDown { throw ControlError(.shuttingDown, "the host is shutting down") }
        let mark = recordingMark()
        if terminateRunning, processes[id]?.machine.isRunning == true {
            feed(id, .terminate(.user))
            await waitForExit(id)
        }
        if let rt = processes[id], rt.machine.isRunning {
            // A running app keeps its process and the arguments it was started with (a tap on
            // its icon brings it to the front). Other arguments would be silently lost:
            // refused, naming the way to relaunch with them.
            let running = rt.machine.launchOptions.arguments
            if !arguments.isEmpty, arguments != running {
                throw ControlError(.alreadyRunning, "\(id) is already running (pid \(rt.pid.map(String.init) ?? "?")) "
                    + "with \(running.isEmpty ? "no arguments" : "other arguments (\(running.joined(separator: " ")))"); "
                    + "its arguments cannot change: add --terminate-running-process to relaunch it with these, "
                    + "or `apphost foreground \(id)` to bring it to the front as it is")
            }
            if !background { try await foreground(id) }
            guard let pid = rt.pid else { throw ControlError(.alreadyRunning, "\(id) is already launching") }
            return .running(pid)
        }
        if !background { sendOthersHome(except: id) }
        performMode(modes.userLaunched(id, at: hostNow()))
        makeRuntime(id, row)
        // A user launch after jetsam ended the app says so (a background launch leaves it said
        // for the user's); the arguments are kept for a cold launch from the switcher.
        let afterJetsam = memory.device.launching(id, byUser: !background, arguments: arguments)
        let options = LaunchOptions(reason: background ? .background : .user, arguments: arguments, afterJetsam: afterJetsam)
        if !background { processes.watch(id, for: .front) }
        feed(id, .launch(options, placement: background ? .background : .foreground))
        guard processes[id] != nil else { throw ControlError(.spawnFailed, "\(id) could not be launched") }
        let ticket = LaunchTicket(mark: mark, number: verbWaits.begin())
        processes[id]?.launchWaiters.append(ticket)
        return .waiting(ticket)
    }

    /// What keeps `launch()` from answering success although the launch happened: an event
    /// or a transition written since `mark` failed. The database's queue is not waited for
    /// (see ``finishLaunchWaiters(_:_:)``).
    func unrecorded(since mark: (events: UInt64, database: UInt64), _ what: String, _ id: BundleID) -> ControlError? {
        var problems: [String] = []
        if events.failures > mark.events, let error = events.lastError {
            problems.append("\(error)")
        }
        if databaseFailures.count > mark.database, let error = databaseFailures.last {
            problems.append("cannot write to \(configuration.databasePath): \(error)")
        }
        guard !problems.isEmpty else { return nil }
        // SQLite says "disk is full" without an errno: say what the file system has left.
        var fs = statvfs()
        if statvfs(configuration.stateDirectory, &fs) == 0 {
            problems.append("\(UInt64(fs.f_bavail) * UInt64(fs.f_frsize)) bytes free on that file system")
        }
        let state = processes[id]?.machine.state ?? .notRunning
        return ControlError(.internalError, "\(id) \(what), but the host could not record it in its state directory "
            + "\(configuration.stateDirectory): \(problems.joined(separator: "; ")). \(id) is now \(state.rawValue); "
            + "free space there (or repair the file system) and see the host's log")
    }

    /// How many writes of the event log and of the database have failed so far.
    func recordingMark() -> (events: UInt64, database: UInt64) {
        (events.failures, databaseFailures.count)
    }

    /// Throws if an event or a transition could not be written since `mark`: the verb
    /// happened, but the host has no record of it. Waits for the database's queue without
    /// holding the actor (a kernel report or an app's answer is handled meanwhile).
    /// `flushed`: do not wait for the database's queue (its failures so far still count).
    func checkRecorded(since mark: (events: UInt64, database: UInt64), _ what: String, _ id: BundleID,
                       flushed: Bool = false) async throws(ControlError) {
        if !flushed {
            do {
                try await store.flushed()
            } catch {
                databaseFailures.note("\(error)")
                logger.error("could not flush \(configuration.databasePath): \(error)")
            }
        }
        if let error = unrecorded(since: mark, what, id) { throw error }
    }

    /// A fresh runtime (new instance) for a launch.
    func makeRuntime(_ id: BundleID, _ row: Store.AppRow) {
        memory.device.processGone(id)
        var machine = Lifecycle(exitsOnSuspend: row.app.manifest.exitsOnSuspend, profile: configuration.profile,
                                grace: configuration.terminationGracePeriod)
        machine.maximumHeldTasks = configuration.bounds.heldTasks
        processes.start(id, machine: machine, since: now(), timers: AppTimers(maximum: configuration.bounds.liveTimers))
    }

    /// How the plugins see an installed app.
    static func modeApp(_ app: InstalledApp, _ config: HostConfiguration) -> ModeApp {
        ModeApp(bundleIdentifier: app.bundleIdentifier, manifest: app.manifest, entitlements: app.entitlements ?? [],
                container: config.containersDirectory + "/" + app.bundleIdentifier.rawValue)
    }

    /// Carries out a CLI command for the background-mode plugins (privacy, location,
    /// VoIP push, BLE, accessories). Returns the message for the user.
    public func modeCommand(_ command: ModeCommand) throws(ControlError) -> String {
        var command = command
        // Every push has an apns-id, as on APNs: the sender's, or a new one (lowercase),
        // so what the app received can be matched to what was sent (events' `apnsID`).
        if case .push(var request) = command, request.apnsID == nil {
            request.apnsID = modes.makeMessageID()
            command = .push(request)
        }
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
        // Device memory is the host's, not a plugin's.
        if case .deviceMemory(let level) = command { return deviceMemoryCommand(level) }
        // Locking sends the app in front to the background first (willResignActive, then
        // didEnterBackground, then suspended as usual); it hears of its protected data while
        // it resigns. Unlocking brings it back before the apps hear of their data.
        if case .deviceLock(let lock) = command, lock != modes.deviceState.locked {
            if lock { leaveForegroundForLock() } else { returnToForegroundAfterUnlock() }
        }
        let (result, effects) = modes.command(command, at: hostNow())
        performMode(effects)
        switch command {
        case .devicePower, .deviceNetwork:
            let device = modes.deviceState
            sendToDaemon(.conditions(pluggedIn: device.pluggedIn, network: device.network))
        case .settingsBackgroundRefresh(let id, false):
            // As URLSession reports with `backgroundUpdatesDisabled`: the apps' discretionary
            // background transfers are cancelled (the others are the user's, and go on).
            guard case .success = result else { break }
            for app in id.map({ [$0] }) ?? apps.keys.sorted() {
                transfersCancelledBySystem(app, reason: .backgroundUpdatesDisabled, only: { $0.discretionary })
            }
        default:
            break
        }
        switch result {
        case .success(let message) where command == .deviceShow: return message + "\n" + memoryText()
        case .success(let message): return message
        case .failure(let error): throw ControlError(.refused, error.message)
        }
    }

    /// Answers a question for the plugins with data (`--json` of `settings show`,
    /// `device show`, `fetch schedule`, `bgtask list`).
    public func modeQuery(_ query: ModeQuery) throws(ControlError) -> ModeAnswer {
        if case .bgTasks(let id?) = query { _ = try installed(id) }
        switch modes.query(query, at: hostNow()) {
        case .success(.device(var device)):
            device.memory = memoryReading()
            return .device(device)
        case .success(let answer): return answer
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
        if case .voipPush = command {
            // The VoIP plugin's events do not know the apns-id: say it here, typed.
            events.append(.service, app: id, cause: "VoIP push accepted by the gateway, apns-id \(messageID)",
                          fields: .init(apnsID: messageID), time: now())
        }
        let (result, effects) = modes.command(command, at: hostNow())
        performMode(effects)
        if case .failure(let error) = result {
            // Accepted as APNs would; the device side refused it (logged).
            events.append(.service, app: id, cause: "push \(messageID) accepted by the gateway, not delivered: \(error.message)", time: now())
        }
        return .success(messageID)
    }

    /// What ``foreground(_:)`` did.
    public enum Foregrounded: Sendable, Equatable {
        /// The running app came to the front.
        case resumed
        /// It was not running but had a card in the app switcher (the system ended it):
        /// launched cold with the arguments of its last launch, as tapping the card does.
        case launchedFromSwitcher(pid: Int32)
    }

    /// Makes `id` the active app, sending the previously active app home.
    @discardableResult
    public func foreground(_ id: BundleID) async throws(ControlError) -> Foregrounded {
        _ = try installed(id)
        guard let rt = processes[id], rt.machine.isRunning else {
            // In the app switcher (jetsam or a crash ended it, not the user): tapping it
            // launches it cold, with the arguments of its last launch, as iOS does.
            if snapshots.keeper.switcher.contains(id) {
                let pid = try await launch(id, background: false, arguments: memory.device.coldLaunchArguments(id))
                return .launchedFromSwitcher(pid: pid)
            }
            throw ControlError(.notRunning, "\(id) is not running and has no card in the app switcher (start it with `apphost launch \(id)`)")
        }
        let mark = recordingMark()
        sendOthersHome(except: id)
        processes.watch(id, for: .front)
        feed(id, .foreground)
        try await checkRecorded(since: mark, "came to the foreground", id)
        return .resumed
    }

    /// Home button for `id`.
    public func background(_ id: BundleID) async throws(ControlError) {
        _ = try installed(id)
        guard let rt = processes[id], rt.machine.isRunning else {
            throw ControlError(.notRunning, "\(id) is not running")
        }
        let mark = recordingMark()
        feed(id, .home)
        try await checkRecorded(since: mark, "went home", id)
    }

    /// Terminates `id` (as a swipe in the app switcher) and waits until it is gone.
    public func terminate(_ id: BundleID) async throws(ControlError) {
        _ = try installed(id)
        guard let rt = processes[id], rt.machine.isRunning else {
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
    public func terminateMovingClock(_ id: BundleID) async {
        guard let rt = processes[id], rt.machine.isRunning else { return }
        feed(id, .terminate(.user))
        if configuration.clock == .virtual, processes[id]?.machine.isRunning == true {
            _ = try? await advanceClock(by: configuration.terminationGracePeriod + .seconds(1))
        }
        await waitForExit(id)
    }

    /// Status of one app or all installed apps. Stops the host has sent and the kernel has
    /// not confirmed yet are waited for first (see ``awaitStopConfirmations(_:)``), so an app
    /// listed as suspended is stopped in the kernel (`T` in /proc), and the reverse.
    public func status(_ id: BundleID?) async throws(ControlError) -> [AppStatus] {
        let ids: [BundleID]
        if let id {
            _ = try installed(id)
            ids = [id]
        } else {
            ids = apps.keys.sorted()
        }
        await awaitStopConfirmations(id)
        return ids.map { id in
            let rt = processes[id]
            let state = rt?.machine.state ?? .notRunning
            let since = lastStateChange[id] ?? apps[id]?.app.installedAt ?? now()
            let tasks = rt?.machine.tasks.sorted { $0.key < $1.key }.map { $0.value.name ?? "#\($0.key)" } ?? []
            // Bounded: one app's answer must fit a control frame whatever it holds.
            return AppStatus(bundleIdentifier: id, state: state, pid: state == .notRunning ? nil : rt?.pid,
                             since: since, backgroundTasks: AppStatus.bounded(tasks),
                             activities: AppStatus.bounded(rt?.machine.activities.sorted() ?? []),
                             isFrontmost: state == .active || (state == .inactive && rt?.machine.placement == .foreground),
                             footprint: state == .notRunning ? nil : memory.device.footprints[id])
        }
    }

    /// Waits until the kernel has confirmed every SIGSTOP sent to `id` (nil: to any app), or
    /// for at most ``stopConfirmationBound`` of real time (a report the reaper never got).
    /// Between a SIGSTOP and the reaper's report of it the process may already be `T` while
    /// its state still reads `background`: an answer given then would disagree with the
    /// kernel. The report comes within microseconds; the bound only keeps a lost one from
    /// holding `status` for good.
    func awaitStopConfirmations(_ id: BundleID?) async {
        let pending = (id.map { [$0] } ?? processes.watchList(.settle)).filter { processes[$0]?.machine.stopPending == true }
        guard !pending.isEmpty else { return }
        if stopWaitBound == nil {
            let input = self.input
            stopWaitBound = group.any().scheduleTask(in: .nanoseconds(Self.stopConfirmationBound.clampedNanoseconds)) {
                input.yield(.stopWaitsExpired)
            }
        }
        for app in pending where processes[app]?.machine.stopPending == true {
            await withCheckedContinuation { waiters.waitForStop(of: app, $0) }
        }
    }

    /// The longest `status` waits for the kernel's word on a stop (real time).
    static let stopConfirmationBound: Duration = .seconds(1)

    /// Resumes who waits for `id`'s stop once it is confirmed (or no longer pending), or
    /// everyone when `all` (the bound ran out).
    func resumeStopWaiters(_ id: BundleID?, all: Bool = false) {
        if all {
            stopWaitBound = nil
            for w in waiters.allStopWaiters() { w.resume() }
            return
        }
        guard let id, processes[id]?.machine.stopPending != true else { return }
        let settled = waiters.stopSettled(of: id)
        guard !settled.isEmpty else { return }
        for w in settled { w.resume() }
        if !waiters.waitsForStops {
            stopWaitBound?.cancel()
            stopWaitBound = nil
        }
    }

    /// Past events plus a live stream; call ``unsubscribe(_:)`` when done.
    public func subscribe(bundleIdentifier: BundleID?) -> (past: EventLogPast, live: HostEventStream, id: UInt64) {
        events.subscribe(filter: bundleIdentifier)
    }

    /// A follower of the control socket (`events --follow`): its live part holds at most
    /// ``HostConfiguration/followerBacklog`` events; one that falls further behind is ended
    /// (``HostEventStream/endedBehind``), its memory given back, and `dropped` called.
    func subscribeFollower(bundleIdentifier: BundleID?, dropped: @escaping @Sendable () -> Void) -> (past: EventLogPast, live: HostEventStream, id: UInt64) {
        events.subscribe(filter: bundleIdentifier, limit: configuration.followerBacklog, overflow: .end, onOverflow: dropped)
    }

    /// A follower was dropped for falling behind: said once in the event log.
    func noteDroppedFollower() {
        events.append(.warning, cause: "dropped an events follower that fell more than \(configuration.followerBacklog) events behind (it read too slowly)", time: now())
    }

    /// Suspends until `id` is in `state` (returns at once if it already is).
    public func waitUntil(_ id: BundleID, is state: AppState) async {
        let current = processes[id]?.machine.state ?? .notRunning
        if current == state { return }
        await withCheckedContinuation { waiters.wait(for: state, of: id, $0) }
    }

    /// Whether `id` is installed or has left events or reports behind.
    public func isKnown(_ id: BundleID) -> Bool {
        apps[id] != nil || lastStateChange[id] != nil || !((try? store.reports(bundleIdentifier: id)) ?? []).isEmpty
    }

    /// The cgroup `id`'s current process runs in, if it has one (tests).
    func cgroup(of id: BundleID) -> AppCgroup? {
        processes[id]?.cgroup
    }

    /// The pid of a running app.
    public func pid(of id: BundleID) -> Int32? {
        guard let rt = processes[id], rt.machine.isRunning else { return nil }
        return rt.pid
    }

    /// Ends a subscription.
    public func unsubscribe(_ id: UInt64) {
        events.unsubscribe(id)
    }

    /// Termination reports, oldest first.
    public func reports(_ id: BundleID?) throws(ControlError) -> [TerminationReport] {
        if let id, apps[id] == nil {
            // Reports of an uninstalled app are still readable.
            let r = (try? store.reports(bundleIdentifier: id)) ?? []
            if r.isEmpty { throw unknownBundle(id) }
            return r
        }
        do { return try store.reports(bundleIdentifier: id) } catch { throw ControlError(.internalError, "\(error)") }
    }

    func installed(_ id: BundleID) throws(ControlError) -> Store.AppRow {
        guard let row = apps[id] else { throw unknownBundle(id) }
        return row
    }

    func unknownBundle(_ id: BundleID) -> ControlError {
        let known = apps.keys.sorted()
        let hint = known.isEmpty ? "no apps are installed; install one with `apphost install <App.app>`"
            : "installed: \(known.map(\.rawValue).joined(separator: ", "))"
        return ControlError(.unknownBundle, "unknown bundle id \"\(id)\" (\(hint))")
    }

    func sendOthersHome(except id: BundleID) {
        sendFrontHome(except: id, cause: "\(id) came to the front")
    }

    /// Sends the apps in front (but `id`) to the background, saying why.
    private func sendFrontHome(except id: BundleID?, cause: String) {
        // In bundle-id order: two apps in front (a launch racing a foreground) go home in
        // the same order in every run.
        for other in processes.watched(for: .front, where: { _, rt in rt.machine.isRunning && rt.machine.placement == .foreground })
        where other != id {
            feed(other, .leaveForeground(cause: cause))
            if processes[other]?.machine.placement != .foreground { processes.unwatch(other, for: .front) }
        }
    }

    /// The device locks: the app in front leaves the foreground as it does for the home
    /// button, and is remembered to come back at the unlock (IOS-MODEL §1.14).
    private func leaveForegroundForLock() {
        let front = processes.watched(for: .front, where: { _, rt in rt.machine.isRunning && rt.machine.placement == .foreground })
        frontAtLock = front.first
        sendFrontHome(except: nil, cause: "device locked")
    }

    /// The device unlocks: the app that was in front at the lock comes back, if it still
    /// runs and no other app was brought to the front meanwhile.
    private func returnToForegroundAfterUnlock() {
        defer { frontAtLock = nil }
        guard let id = frontAtLock, processes[id]?.machine.isRunning == true,
              processes.watched(for: .front, where: { _, rt in rt.machine.isRunning && rt.machine.placement == .foreground }).isEmpty
        else { return }
        processes.watch(id, for: .front)
        feed(id, .foreground)
    }

    // MARK: - Who a process is

    /// The app `pid` belongs to: an app's own process, a process in an app's cgroup (what
    /// an app starts stays in it, even orphaned), or a descendant of an app's process
    /// (where there are no cgroups). Nil for anyone else (the CLI, a user's shell).
    public func appOwning(pid: Int32) -> BundleID? {
        if let app = processes.app(pid: pid) { return app }
        // An app's cgroup is `<apps' cgroup>/<bundle id>`: the last two components name it
        // (a folder name from /proc: checked before it names an app).
        for path in ProcessTree.cgroupPaths(of: pid) {
            let parts = path.split(separator: "/")
            guard parts.count >= 2, let app = BundleID(String(parts[parts.count - 1])), let rt = processes[app],
                  let dir = rt.cgroup?.directories.first, let name = dir.split(separator: "/").suffix(2).first,
                  parts[parts.count - 2] == name else { continue }
            return app
        }
        let table = processes
        return ProcessTree.ancestors(of: pid).lazy.compactMap { table.app(pid: $0) }.first
    }

    /// An app tried the control socket: said once per app and pid.
    public func noteRefusedControlPeer(pid: Int32, app: BundleID) {
        events.append(.warning, app: app, pid: pid, cause: "refused a control-socket connection from the app's process \(pid)", time: now())
    }

}
