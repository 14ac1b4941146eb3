import AppHostProtocol
import AppHostSystem
import Foundation
import Host
import Logging
import NIOPosix
import Plugins
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Runs a ``Scenario`` on a private host of its own: a temporary state directory, the
/// virtual clock starting at the scenario's epoch, driven through the supervisor's
/// in-process API (as `privacy-check` drives it). A value in, a ``ScenarioResult`` out;
/// the host is stopped (its apps reaped) and its directory removed however it ends.
public struct ScenarioRunner: Sendable {
    /// The host configuration every scenario starts from (products directories, limits,
    /// identities); the runner sets the state directory, clock, epoch, profile and settle.
    public var template: HostConfiguration
    public var logLevel: Logger.Level
    /// Keep each scenario's state directory (printed in its result's `error`/report) instead of removing it.
    public var keepStateDirectories: Bool
    /// Where everything random in a run comes from (device tokens, apns-ids): one seed,
    /// printed with every failure, so a failure replays exactly (`apphost test --seed`).
    public var seed: UInt64 = ScenarioDefaults.seed
    /// The uid the private hosts run as (what `requires:` is judged against).
    var hostUID: uid_t = geteuid()

    public init(template: HostConfiguration, logLevel: Logger.Level = .critical, keepStateDirectories: Bool = false) {
        self.template = template
        self.logLevel = logLevel
        self.keepStateDirectories = keepStateDirectories
    }

    /// Reads and runs the file at `path`; `display` is how reports name it.
    public func run(path: String, display: String) async -> ScenarioResult {
        let scenario: Scenario
        do {
            scenario = try ScenarioReader.read(path: path)
        } catch {
            return ScenarioResult(name: (display as NSString).lastPathComponent, file: display, status: .error,
                                  error: error.description)
        }
        return await run(scenario, display: display)
    }

    public func run(_ scenario: Scenario, display: String) async -> ScenarioResult {
        let unmet = scenario.requires.compactMap { $0.unmet(uid: hostUID) }
        guard unmet.isEmpty else {
            return ScenarioResult(name: scenario.name, file: display, rule: scenario.rule, source: scenario.source,
                                  status: .skipped, error: unmet.joined(separator: "; "),
                                  start: scenario.epoch, end: scenario.epoch)
        }
        let clock = ContinuousClock()
        let started = clock.now
        var result = ScenarioResult(name: scenario.name, file: display, rule: scenario.rule, source: scenario.source,
                                    status: .passed, start: scenario.epoch, end: scenario.epoch)
        result.seed = seed
        let dir = NSTemporaryDirectory() + "apphost-scenario-" + UUID().uuidString.prefix(8).lowercased()
        var config = template
        config.stateDirectory = dir
        config.clock = .virtual
        config.virtualEpoch = scenario.epoch
        config.settleTimeout = scenario.settle
        // Most scenarios use no background session: the daemon starts at the first request.
        config.transferDaemonOnDemand = true
        config.profile = BudgetProfile.named(scenario.profile) ?? .default
        config.memory.device = scenario.deviceMemory
        var logger = Logger(label: "apphost.test")
        logger.logLevel = logLevel
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let supervisor: Supervisor
        do {
            supervisor = try Supervisor(configuration: config, group: group, logger: logger)
            // Scenarios give the same events every run: tokens and apns-ids from a seed.
            await supervisor.useSeededIdentifiers(seed: seed)
        } catch {
            try? await group.shutdownGracefully()
            try? FileManager.default.removeItem(atPath: dir)
            result.status = .error
            result.error = "the private host could not start: \(error)"
            return result
        }
        let loop = Task { await supervisor.run() }
        var run = ScenarioRun(scenario: scenario, supervisor: supervisor)
        if scenario.requires.contains(.dataProtection), let why = await supervisor.dataProtectionUnenforced {
            result.status = .skipped
            result.error = "needs data protection: \(why)"
        } else {
            await run.perform(into: &result)
        }
        result.end = await supervisor.clockReading().date
        // Stopped however the steps ended: every app terminated and reaped.
        await supervisor.shutdown()
        // Snapshots still being drawn would be written after the directory is removed.
        await supervisor.waitForSnapshots()
        await supervisor.finish()
        await loop.value
        for task in run.pending { _ = await task.value }
        result.events = Array(await supervisor.subscribe(bundleIdentifier: nil).past)
        result.reports = (try? await supervisor.reports(nil)) ?? []
        try? await group.shutdownGracefully()
        if keepStateDirectories {
            if result.status == .passed { result.error = "state directory kept: \(dir)" } else {
                result.error = (result.error.map { $0 + "\n" } ?? "") + "state directory kept: \(dir)"
            }
        } else {
            try? FileManager.default.removeItem(atPath: dir)
        }
        result.seconds = (clock.now - started).seconds
        return result
    }
}

extension Duration {
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

/// One scenario's steps against its host.
struct ScenarioRun {
    let scenario: Scenario
    let supervisor: Supervisor
    /// Alias → bundle id, known once installed.
    var ids: [String: BundleID] = [:]
    /// The last push step's answer: (status, reason).
    var pushAnswer: (status: Int, reason: String)?
    /// The last action's refusal, for an `expect: {refused: ...}` right after it.
    var refusal: String?
    /// Actions still waiting for an app (awaited once the host has stopped).
    var pending: [Task<String?, Never>] = []

    init(scenario: Scenario, supervisor: Supervisor) {
        self.scenario = scenario
        self.supervisor = supervisor
    }

    struct StepFailure: Error {
        var expected: String
        var seen: String
    }

    mutating func perform(into result: inout ScenarioResult) async {
        for app in scenario.apps where app.installFirst {
            do {
                let installed = try await supervisor.install(path: app.bundle, settings: app.settings)
                ids[app.alias] = installed.bundleIdentifier
            } catch {
                result.status = .error
                result.error = "\(scenario.file): app \(app.alias): cannot install \(app.bundle): \(error.message)"
                return
            }
        }
        result.apps = scenario.apps.map { ScenarioResult.AppAlias(alias: $0.alias, bundleIdentifier: ids[$0.alias]?.rawValue ?? "") }
        for (index, step) in scenario.steps.enumerated() {
            do {
                try await perform(step)
                // The safety net ran out in the step: what follows would depend on the machine.
                let caught = await supervisor.takeSafetyNetFailures()
                if !caught.isEmpty {
                    throw StepFailure(expected: "every app to answer or block within the safety net (settle: \(scenario.settle))",
                                      seen: caught.joined(separator: "; "))
                }
            } catch let failure as StepFailure {
                result.status = .failed
                let time = await supervisor.clockReading().date
                result.failure = ScenarioResult.Failure(
                    step: index, line: step.position.line, column: step.position.column, stepText: step.text,
                    expected: failure.expected, seen: failure.seen, time: time, recentEvents: await recentEvents(for: step))
                return
            } catch {
                result.status = .failed
                result.failure = ScenarioResult.Failure(
                    step: index, line: step.position.line, column: step.position.column, stepText: step.text,
                    expected: "the step to run", seen: "\(error)", time: nil, recentEvents: await recentEvents(for: step))
                return
            }
        }
        result.apps = scenario.apps.map { ScenarioResult.AppAlias(alias: $0.alias, bundleIdentifier: ids[$0.alias]?.rawValue ?? "") }
    }

    func id(_ alias: String) throws(StepFailure) -> BundleID {
        guard let id = ids[alias] else {
            throw StepFailure(expected: "app \(alias) installed", seen: "it is not installed (install: false, and no install step before)")
        }
        return id
    }

    /// Runs an action the host may refuse; a refusal fails the step unless the next
    /// expectation is about it (`refused:`). An action that waits for an app the host has
    /// found blocked (a launch whose didFinishLaunching never returns: the host has settled
    /// and the verb still waits) is left running: the next steps go on (an `advance` then
    /// fires the watchdog that ends it), so a hung app never hangs the run. Real time
    /// decides nothing here: a slow app is waited for, a blocked one is not.
    mutating func act(_ body: @escaping @Sendable (Supervisor) async throws(ControlError) -> Void) async throws(StepFailure) {
        refusal = nil
        let supervisor = self.supervisor
        let mark = await supervisor.verbWaitMark()
        let task = Task { () -> String? in
            do throws(ControlError) {
                try await body(supervisor)
                return nil
            } catch {
                return error.message
            }
        }
        let outcome = await firstOf({ await task.value }, { await supervisor.untilVerbStuck(after: mark) })
        guard case .first(let result) = outcome else {
            pending.append(task)
            return
        }
        await supervisor.endStuckVerbWaits()
        if let message = result {
            refusal = message
            return
        }
        _ = try? await supervisor.advanceClock(by: .zero)
        // Snapshots the action caused are drawn (and logged) within the step.
        await supervisor.waitForSnapshots()
    }

    mutating func perform(_ step: Scenario.Step) async throws {
        // A refusal not checked by the step right after it fails the scenario there.
        if let refused = refusal {
            if case .expect(let e) = step.action, e.refused != nil {} else {
                throw StepFailure(expected: "the previous step to be done", seen: "the host refused it: \(refused)")
            }
        }
        switch step.action {
        case .install(let alias):
            guard let app = scenario.apps.first(where: { $0.alias == alias }) else { return }
            // An update over a running app waits for its exit: bounded by `settle` as any action.
            let (bundle, settings) = (app.bundle, app.settings)
            let installed = InstalledID()
            try await act { (s: Supervisor) async throws(ControlError) in
                installed.set(try await s.install(path: bundle, settings: settings).bundleIdentifier)
            }
            if let id = installed.value { ids[alias] = id }
        case .uninstall(let alias):
            let id = try id(alias)
            try await act { (s: Supervisor) async throws(ControlError) in try await s.uninstall(id) }
        case .launch(let alias, let background, let args):
            let id = try id(alias)
            let arguments = args ?? scenario.apps.first { $0.alias == alias }?.args ?? []
            try await act { (s: Supervisor) async throws(ControlError) in
                _ = try await s.launch(id, background: background, arguments: arguments)
            }
        case .foreground(let alias):
            let id = try id(alias)
            try await act { (s: Supervisor) async throws(ControlError) in try await s.foreground(id) }
        case .background(let alias):
            let id = try id(alias)
            try await act { (s: Supervisor) async throws(ControlError) in try await s.background(id) }
        case .terminate(let alias):
            let id = try id(alias)
            try await act { (s: Supervisor) async throws(ControlError) in try await s.terminate(id) }
        case .kill(let alias):
            try await kill(try id(alias))
        case .advance(let d):
            // Not bounded by the settle time: the host bounds each wait of an advance itself.
            refusal = nil
            do throws(ControlError) {
                _ = try await supervisor.advanceClock(by: d)
                await supervisor.waitForSnapshots()
            } catch {
                refusal = error.message
            }
        case .fetch(let alias):
            let id = try id(alias)
            try await act { (s: Supervisor) async throws(ControlError) in _ = try await s.modeCommand(.fetchNow(bundleIdentifier: id)) }
        case .bgtask(let alias, let run, let identifier):
            let id = try id(alias)
            try await act { (s: Supervisor) async throws(ControlError) in
                _ = try await s.modeCommand(run ? .bgTaskRun(bundleIdentifier: id, identifier: identifier)
                                                         : .bgTaskExpire(bundleIdentifier: id, identifier: identifier))
            }
        case .mode(let command, _):
            try await act { (s: Supervisor) async throws(ControlError) in _ = try await s.modeCommand(command) }
        case .privacy(let action, let service, let alias, _):
            let command = ModeCommand.privacy(action: action, service: service, bundleIdentifier: try alias.map(id))
            try await act { (s: Supervisor) async throws(ControlError) in _ = try await s.modeCommand(command) }
        case .backgroundRefresh(let alias, let on, _):
            let command = ModeCommand.settingsBackgroundRefresh(bundleIdentifier: try alias.map(id), on: on)
            try await act { (s: Supervisor) async throws(ControlError) in _ = try await s.modeCommand(command) }
        case .snapshot(let alias):
            let id = try id(alias)
            try await act { (s: Supervisor) async throws(ControlError) in
                _ = try await s.snapshot(id)
                await s.waitForSnapshots()
            }
        case .push(let push):
            try await self.push(push)
        case .expect(let e):
            try await ExpectationCheck(run: self).check(e)
            refusal = nil
        }
    }

    /// A push as `simctl push` sends it; the answer is kept as the gateway's would be:
    /// 200, or the status and reason APNs gives a bad payload, or 400 with the host's refusal.
    mutating func push(_ push: Scenario.Push) async throws {
        let id = try id(push.app)
        refusal = nil
        if push.type == "voip" {
            do {
                _ = try await supervisor.modeCommand(.voipPush(bundleIdentifier: id, payload: push.payload))
                pushAnswer = (200, "")
            } catch {
                pushAnswer = (400, error.message)
            }
            _ = try? await supervisor.advanceClock(by: .zero)
            return
        }
        let payload: APNsPayload
        do throws(APNsRejection) {
            payload = try APNsPayload.parse(Data(push.payload.utf8), name: "push payload")
        } catch {
            pushAnswer = (error.status, error.reason)
            return
        }
        let type = push.type ?? payload.inferredPushType
        // The headers APNs checks, with its answers (as the push gateway gives them).
        if let rejection = Self.headerRejection(type: type, priority: push.priority, expiration: push.expiration,
                                                collapseID: push.collapseID, apnsID: push.apnsID) {
            pushAnswer = (rejection.status, rejection.reason)
            return
        }
        do {
            _ = try await supervisor.modeCommand(.push(PushRequest(bundleIdentifier: id, payload: payload.json, pushType: type,
                                                                    priority: push.priority, collapseID: push.collapseID,
                                                                    apnsID: push.apnsID, expiration: push.expiration,
                                                                    source: "scenario")))
            pushAnswer = (200, "")
        } catch {
            pushAnswer = (400, error.message)
        }
        _ = try? await supervisor.advanceClock(by: .zero)
    }

    /// What APNs answers a push's headers (the checks of the push gateway's
    /// `APNsRequest.validate` that do not concern the device token), or nil.
    static func headerRejection(type: String, priority: Int?, expiration: Int?, collapseID: String?, apnsID: String?) -> APNsRejection? {
        if let priority, ![1, 5, 10].contains(priority) { return APNsRejection(.badPriority, "apns-priority must be 10, 5 or 1") }
        if type == "background", priority == 10 { return APNsRejection(.badPriority, "a background push must have apns-priority 5") }
        if let expiration, expiration < 0 { return APNsRejection(.badExpirationDate, "apns-expiration must be a UNIX time in seconds or 0") }
        if let collapseID, collapseID.utf8.count > 64 { return APNsRejection(.badCollapseId, "apns-collapse-id may have at most 64 bytes") }
        if let apnsID, UUID(uuidString: apnsID) == nil { return APNsRejection(.badMessageId, "apns-id must be a UUID (8-4-4-4-12 hex digits)") }
        return nil
    }

    /// SIGKILL from outside the host (as the system would kill it), then waits until the
    /// host has seen the app exit.
    func kill(_ id: BundleID) async throws {
        guard let pid = await supervisor.pid(of: id) else {
            throw StepFailure(expected: "\(id) running, to be killed", seen: "it is not running")
        }
        _ = Glibc.kill(pid, SIGKILL)
        let supervisor = self.supervisor
        // The kernel's word, which comes: real time only as the safety net.
        let exited = await firstOf({ await supervisor.waitUntil(id, is: .notRunning) }, limit: scenario.settle) != nil
        guard exited else {
            throw StepFailure(expected: "\(id) (pid \(pid)) to exit after SIGKILL",
                              seen: "the machine did not let the host see it exit within \(scenario.settle) of real time (the safety net)")
        }
        _ = try? await supervisor.advanceClock(by: .zero)
    }

    /// The last events of the scenario's apps, one a line.
    func recentEvents(for step: Scenario.Step, count: Int = 12) async -> [String] {
        let past = await supervisor.subscribe(bundleIdentifier: nil)
        defer { Task { [supervisor] in await supervisor.unsubscribe(past.id) } }
        var ring: [HostEvent] = []
        for e in past.past where e.bundleIdentifier.map({ ids.values.contains($0) }) ?? false {
            ring.append(e)
            if ring.count > count { ring.removeFirst() }
        }
        return ring.map(EventText.line)
    }
}

/// The bundle id an `install` step's action found, read once the action is done.
private final class InstalledID: Sendable {
    private let id = Mutex<BundleID?>(nil)
    var value: BundleID? { id.withLock { $0 } }
    func set(_ value: BundleID) { id.withLock { $0 = value } }
}
