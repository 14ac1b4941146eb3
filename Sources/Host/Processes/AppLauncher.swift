import AppHostProtocol
import Logging
import AppHostSystem
import Foundation
import HostConfig
import NIOCore
import Plugins

/// How an app is started: the plan (its limits as rlimits and a cgroup, its confinement,
/// environment and identity), then the start itself (container folders, ``ChildLauncher``,
/// the connection). A value: the supervisor asks for a plan, keeps the cgroup in the app's
/// runtime, and runs ``start(_:app:instance:input:group:bounds:)`` off the actor.
struct AppLauncher {
    /// Everything a start needs, decided on the supervisor.
    struct Plan: Sendable {
        var settings: SpawnSettings
        var container: String
        var groups: [(id: String, path: String)]
        var identity: ProcessIdentity?
        var cgroup: AppCgroup?
        var memoryLimit: UInt64?
        var logPath: String
        /// The run-loop stamp page (its descriptor goes to the child as 4; closed here
        /// once the spawn is over); nil when the host could make none.
        var stampPage: RunLoopStampPage?
        /// What answers the app's `hello` (see ``HelloAnswer``); nil: the supervisor answers.
        var helloAnswer: HelloAnswer?
        /// The callbacks sent to this process (see ``CallbacksSent``), shared with its runtime.
        var callbacks = CallbacksSent()
        /// Its stdout and stderr, read by the host into its log (see ``AppLogPump``), and the
        /// pipe's end the child gets; nil: the child writes the log file itself.
        var logPump: AppLogPump?
        var logPipeChildEnd: Int32 = -1
    }

    /// Something the host says once about what it can enforce: an event (`service` or
    /// `warning`), or a line of its log.
    struct Notice: Equatable {
        enum Kind { case service, warning, log }
        var kind: Kind
        var text: String
    }

    let configuration: HostConfiguration
    let sandbox: SandboxSummary
    let identities: AppIdentities?
    /// The per-app cgroups, made at the first launch that needs them (nil inside: none possible).
    private(set) var cgroups: AppCgroups??
    /// Limits the host could not enforce as configured, warned about once each.
    private var warnedLimits: Set<String> = []
    /// ``confinement(for:)`` per set of declared modes (at most 64 sets kept).
    private var confinements: [[BackgroundMode]: (SeccompPolicy, [String])] = [:]

    /// What every app's log shares (see ``AppLogBudget``).
    let logBudget: AppLogBudget

    init(configuration: HostConfiguration, sandbox: SandboxSummary, identities: AppIdentities?, logger: Logger) {
        self.configuration = configuration
        self.sandbox = sandbox
        self.identities = identities
        logBudget = AppLogBudget(directory: configuration.logsDirectory, limits: configuration.appLogs, logger: logger)
    }

    /// The cgroups made so far (to remove at shutdown).
    var madeCgroups: AppCgroups? { cgroups ?? nil }

    /// The plan of a launch of `app` with `options`, and what to say about it; throws when
    /// the app's identity cannot be had.
    mutating func plan(_ app: InstalledApp, options: LaunchOptions) throws -> (Plan, [Notice]) {
        let config = configuration
        let id = app.bundleIdentifier
        let container = config.containersDirectory + "/" + id.rawValue
        let limits = config.limits.limits(for: id)
        var notices: [Notice] = []
        let (rlimits, cgroup) = enforcement(of: limits, for: id, notices: &notices)
        let groups = (app.applicationGroups ?? []).map { (id: $0, path: config.groupsDirectory + "/" + $0) }
        // The confinement (Confinement.swift): AF_BLUETOOTH sockets only with a
        // bluetooth mode, no Unix sockets of its own, no listen, no new process
        // (seccomp); its containers, system paths read-only, sound and serial
        // devices only with audio / external-accessory (Landlock).
        let modes = app.manifest.backgroundModes
        let (seccomp, devices) = confinement(for: modes)
        let landlock: LandlockPolicy? = sandbox.abi == nil ? nil : AppConfinement.landlockPolicy(
            app: app, container: container, groupContainers: groups.map(\.path),
            devices: devices, stateDirectory: config.stateDirectory, abiLimit: sandbox.abi)
        var environment = [
            "HOME": container,
            "TMPDIR": container + "/tmp",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            IPCProtocol.descriptorEnvironmentKey: String(IPCProtocol.descriptor),
            IPCProtocol.bundleIdentifierEnvironmentKey: id.rawValue,
            IPCProtocol.bundlePathEnvironmentKey: app.bundlePath,
        ]
        if !groups.isEmpty {
            let map = Dictionary(groups.map { ($0.id, $0.path) }, uniquingKeysWith: { first, _ in first })
            if let data = try? JSONSerialization.data(withJSONObject: map, options: [.sortedKeys, .withoutEscapingSlashes]) {
                environment[IPCProtocol.applicationGroupContainersEnvironmentKey] = String(decoding: data, as: UTF8.self)
            }
        }
        // Its own uid (a host running as root): the container is made its own, 0700, and
        // each App Group container is shared through the group's gid (setgid, 2770).
        let identity = try identities?.identity(app: id, groups: groups.map(\.id))
        let settings = SpawnSettings(
            executablePath: app.executablePath,
            arguments: [app.executablePath] + options.arguments,
            environment: environment,
            workingDirectory: container,
            resourceLimits: rlimits,
            seccomp: seccomp,
            landlock: landlock,
            cgroupProcsFiles: cgroup?.procsFiles ?? [],
            identity: identity,
            // Group-writable for App Group containers (setgid folders); the
            // app's own files are its uid's and its own gid's.
            umask: identity == nil ? nil : 0o007,
            // No code after the launch, as iOS code signing; only its own scheduling.
            appLockdown: true,
            // Namespaces of its own: its container and App Groups the only writable
            // folders (noexec); a host without per-app uids: nothing of the host's in sight.
            namespaces: sandbox.namespaces == .used ? namespaces(container: container, groups: groups.map(\.path), isolatesUser: identity == nil) : nil)
        let plan = Plan(settings: settings, container: container, groups: groups, identity: identity, cgroup: cgroup,
                        memoryLimit: limits.memory, logPath: config.logsDirectory + "/\(id).log")
        return (plan, notices)
    }

    /// The namespaces of an app of a host without per-app uids: the state directory
    /// hidden but `container` and `groups`, by their canonical paths (the mounts are made
    /// on what the kernel resolves).
    private func namespaces(container: String, groups: [String], isolatesUser: Bool) -> AppNamespaces {
        let state = AppConfinement.canonical(configuration.stateDirectory)
        let given = configuration.stateDirectory.hasSuffix("/") ? String(configuration.stateDirectory.dropLast()) : configuration.stateDirectory
        func beneath(_ path: String) -> String {
            path.hasPrefix(given + "/") ? state + path.dropFirst(given.count) : AppConfinement.canonical(path)
        }
        return AppNamespaces(isolatesUser: isolatesUser, hidden: state, writable: ([container] + groups).map(beneath))
    }

    /// The seccomp policy and the devices of an app declaring `modes`: a function of the
    /// modes and the host's configuration, kept per set of modes (computing it again was
    /// a tenth of the launch's planning).
    private mutating func confinement(for modes: [BackgroundMode]) -> (SeccompPolicy, [String]) {
        if let known = confinements[modes] { return known }
        let config = configuration
        let made = (AppConfinement.seccomp(config.seccomp,
                                           deniedSocketFamilies: config.modeRules ? ModeRegistry.denials(for: modes).socketFamilies : []),
                    AppConfinement.devices(for: modes, modeRules: config.modeRules))
        if confinements.count < 64 { confinements[modes] = made }
        return made
    }

    /// The rlimits and cgroup that enforce `id`'s configured limits: descriptors and file
    /// size by rlimit; memory and processes by cgroup where the host can make one, else
    /// memory by RLIMIT_AS (an address-space cap: an app over it fails to allocate rather
    /// than being killed with a report) and processes not at all (RLIMIT_NPROC counts
    /// every process of the user, the host's included). Each fallback is warned about once.
    /// Only an app with a memory or processes limit gets a cgroup: joining one takes the
    /// kernel's cgroup_threadgroup_rwsem for writing, an RCU grace period (13-15 ms here)
    /// on every launch. Apps cannot make processes (seccomp), so there is nothing else of
    /// an app's for a cgroup to hold.
    private mutating func enforcement(of limits: AppLimits, for id: BundleID,
                                      notices: inout [Notice]) -> (rlimits: [ResourceLimit], cgroup: AppCgroup?) {
        var rlimits: [ResourceLimit] = []
        if let n = limits.openFiles { rlimits.append(ResourceLimit(.openFiles, soft: UInt64(n))) }
        if let n = limits.fileSize { rlimits.append(ResourceLimit(.fileSize, soft: n)) }
        guard limits.memory != nil || limits.processes != nil else { return (rlimits, nil) }
        if cgroups == nil {
            let (made, why) = AppCgroups.make()
            cgroups = .some(made)
            if let made {
                notices.append(Notice(kind: .service, text: "per-app cgroups: \(made.layout) (memory limits: \(made.limitsMemory ? "yes" : "no"), process limits: \(made.limitsProcesses ? "yes" : "no"))"))
            } else {
                // What it costs (limits that fall back or go) is warned about per limit below.
                notices.append(Notice(kind: .log, text: "no per-app cgroups: \(why ?? "unknown")"))
            }
        }
        let made = cgroups ?? nil
        var cgroup: AppCgroup?
        if let made {
            do {
                cgroup = try made.prepare(id, memory: made.limitsMemory ? limits.memory : nil,
                                          processes: made.limitsProcesses ? limits.processes : nil)
            } catch {
                warnLimit("cgroup \(id)", "could not prepare \(id)'s cgroup (\(error)): its memory and process limits fall back to rlimits", &notices)
            }
        }
        if let memory = limits.memory, cgroup == nil || made?.limitsMemory != true {
            rlimits.append(ResourceLimit(.addressSpace, soft: memory))
            warnLimit("memory", "no memory cgroup: memory limits are enforced with RLIMIT_AS (address space); an app over its limit fails to allocate instead of being killed with a jetsam report", &notices)
        }
        if limits.processes != nil, cgroup == nil || made?.limitsProcesses != true {
            warnLimit("processes", "no pids cgroup: process/thread limits are not enforced (RLIMIT_NPROC would count every process of the host's user)", &notices)
        }
        return (rlimits, cgroup)
    }

    private mutating func warnLimit(_ key: String, _ message: String, _ notices: inout [Notice]) {
        guard warnedLimits.insert(key).inserted else { return }
        notices.append(Notice(kind: .warning, text: message))
    }

    /// Starts a planned launch: the container and App Group folders (owned by the app's
    /// uid), the spawn, the connection. Says each step on `input`: `.spawned` as soon as
    /// the child runs, `.connected` once its socket is attached (nothing is read before),
    /// or `.spawnFailed` / `.violation`. Runs on the caller (the supervisor): the folders
    /// are a few `mkdir`s that exist already after the first launch, and the spawn itself
    /// is handed to the reaper thread, so the launch's critical path is one thread wake.
    /// Only a container an earlier host left with another owner (its whole tree to
    /// re-own, as large as the app made it) is done off the caller first.
    static func start(_ plan: Plan, app id: BundleID, instance: UInt64, input: AsyncStream<Supervisor.Input>.Continuation,
                      group: any EventLoopGroup, containers: String, groupsDirectory: String, bounds: AppBounds) {
        if let identity = plan.identity {
            var st = stat()
            if lstat(plan.container, &st) == 0, st.st_uid != identity.uid {
                Task.detached {
                    // Made by an earlier host (as root, or for another uid): all of it becomes the app's.
                    AppOwnership.ownTree(plan.container, identity: identity)
                    startOwned(plan, app: id, instance: instance, input: input, group: group,
                               containers: containers, groupsDirectory: groupsDirectory, bounds: bounds)
                }
                return
            }
        }
        startOwned(plan, app: id, instance: instance, input: input, group: group,
                   containers: containers, groupsDirectory: groupsDirectory, bounds: bounds)
    }

    private static func startOwned(_ plan: Plan, app id: BundleID, instance: UInt64, input: AsyncStream<Supervisor.Input>.Continuation,
                                   group: any EventLoopGroup, containers: String, groupsDirectory: String, bounds: AppBounds) {
        let container = plan.container
        do {
            try AppOwnership.makeDirectory(container, below: containers, identity: plan.identity, mode: 0o700)
            for sub in ["Documents", "Library", "tmp"] {
                try AppOwnership.makeDirectory(container + "/" + sub, below: container, identity: plan.identity, mode: 0o700)
            }
            for (group, gid) in zip(plan.groups, plan.identity?.groups ?? plan.groups.map { _ in UInt32.max }) {
                let owner = plan.identity.map { _ in ProcessIdentity(uid: 0, gid: gid) }
                try AppOwnership.makeDirectory(group.path, below: groupsDirectory, identity: owner,
                                               mode: owner == nil ? 0o700 : 0o2770)
            }
        } catch {
            plan.stampPage?.closeDescriptor()
            if plan.logPipeChildEnd >= 0 { _ = Glibc.close(plan.logPipeChildEnd) }
            if let pump = plan.logPump { pump.loop.execute { pump.finish() } }
            input.yield(.spawnFailed(app: id, instance: instance, error: "\(error)"))
            return
        }
        let answer = plan.helloAnswer ?? HelloAnswer(welcome: [])
        let pump = plan.logPump
        let childEnd = plan.logPipeChildEnd
        let callbacks = plan.callbacks
        // Events go straight to the input stream (one hop); any that beat `.spawned` there
        // are held by the supervisor until it arrives. Nothing is read before `.connected`
        // is in the stream.
        // The IPC socket and the log pipe on one event loop: the pump drains the pipe before
        // the socket's messages go on, and before the reaper's word of the exit does.
        ChildLauncher.start(
            plan.settings, logPath: plan.logPath, output: childEnd >= 0 ? childEnd : nil,
            group: pump?.loop ?? group, autoRead: false,
            writeBufferWaterMark: .init(low: bounds.unreadBytes / 2, high: bounds.unreadBytes),
            makeHandler: { AppConnectionHandler(app: id, instance: instance, input: input, bounds: bounds, hello: answer,
                                                callbacks: callbacks, logPump: pump) },
            onEvent: { event in
                let observed = ContinuousClock.now
                if case .exited = event, let pump {
                    pump.loop.execute {
                        pump.finish()
                        input.yield(.child(app: id, instance: instance, event, observed: observed))
                    }
                } else {
                    input.yield(.child(app: id, instance: instance, event, observed: observed))
                }
            },
            spawned: { child in input.yield(.spawned(app: id, instance: instance, child: child)) },
            duplicateForWriting: true
        ) { result in
            // The child has its copy once the spawn is over (or there is none): the host
            // keeps only its mapping, and its end of the log pipe.
            plan.stampPage?.closeDescriptor()
            if let pump {
                if case .failure(.spawn) = result {
                    pump.loop.execute { pump.finish() }
                } else {
                    pump.register()
                }
            }
            switch result {
            case .success(let (_, channel, writeDescriptor)):
                let writer = writeDescriptor.map { SocketWriter(descriptor: $0) }
                // Before anything is read: the handler answers `hello` through it.
                answer.writer = writer
                input.yield(.connected(app: id, instance: instance, channel: channel, writer: writer, hello: answer))
                channel.setOption(.autoRead, value: true).whenFailure { error in
                    input.yield(.violation(app: id, instance: instance, "could not read the IPC socket: \(error)"))
                }
            case .failure(.attach(_, let error)):
                input.yield(.violation(app: id, instance: instance, "could not attach the IPC socket: \(error)"))
            case .failure(.spawn(let error)):
                input.yield(.spawnFailed(app: id, instance: instance, error: "\(error)"))
            }
        }
    }
}

extension Supervisor {
    /// Carries out a `.spawn` effect: the plan on the actor, the start off it.
    func spawn(_ id: BundleID, options: LaunchOptions) {
        guard let row = apps[id], let instance = processes[id]?.instance else { return }
        var plan: AppLauncher.Plan
        do {
            let notices: [AppLauncher.Notice]
            (plan, notices) = try launcher.plan(row.app, options: options)
            // A locked device: its protected files covered before its first instruction.
            if plan.settings.namespaces != nil, let covers = protectedCoversAtLaunch(of: id) {
                plan.settings.namespaces?.covered = covers
            }
            for notice in notices {
                switch notice.kind {
                case .service: events.append(.service, cause: notice.text, time: now())
                case .warning: events.append(.warning, cause: notice.text, time: now())
                case .log: logger.info("\(notice.text)")
                }
            }
        } catch {
            input.yield(.spawnFailed(app: id, instance: instance, error: "\(error)"))
            return
        }
        // The page the app's main run loop stamps and the hang watchdog reads (issue 18).
        // Without one the app runs unwatched (said at its first hang check).
        do {
            let page = try spareStampPage.take() ?? RunLoopStampPage()
            plan.stampPage = page
            plan.settings.stampDescriptor = page.descriptor
            plan.settings.environment[IPCProtocol.stampDescriptorEnvironmentKey] = String(IPCProtocol.stampDescriptor)
            processes[id]?.stampPage = page
        } catch {
            logger.warning("\(id): no run-loop stamp page (memfd: \(error)); its main run loop is not watched")
        }
        // The welcome and, in the same write, the first callback (the one the handshake
        // will send: didFinishLaunching with this launch's options and the state it has
        // now), sent where the hello is read; withdrawn if the state changes first.
        let welcome = (try? Frame.encode(HostMessage.welcome(version: IPCProtocol.version, bundleIdentifier: id.rawValue,
                                                             screen: configuration.screen))) ?? []
        var first: [UInt8]?
        let sequence = (processes[id]?.seq ?? 0) + 1
        let state = processes[id]?.machine.state
        if let machine = processes[id]?.machine, !machine.connected {
            first = try? Frame.encode(HostMessage.callback(seq: sequence, callback: .didFinishLaunching(options: machine.launchOptions),
                                                           state: machine.state))
        }
        let answer = HelloAnswer(welcome: welcome, firstCallback: first, state: state, sequence: sequence, callbacks: plan.callbacks)
        plan.helloAnswer = answer
        processes[id]?.helloAnswer = answer
        processes[id]?.callbacksSent = plan.callbacks
        processes[id]?.cgroup = plan.cgroup
        processes[id]?.oomKillsBefore = plan.cgroup?.oomKills ?? 0
        processes[id]?.oomKillsAtHostKill = nil
        processes[id]?.memoryLimit = plan.memoryLimit
        // Its stdout and stderr through the host, within the logs' bounds; without a pipe
        // (descriptors exhausted) the child writes its log file as before, unbounded.
        if let (host, child) = try? AppLogPump.makePipe() {
            let pump = AppLogPump(app: id, path: plan.logPath, readEnd: host, loop: group.next(), budget: launcher.logBudget)
            plan.logPump = pump
            plan.logPipeChildEnd = child
            processes[id]?.logPump = pump
        } else {
            logger.warning("\(id): no pipe for its output; it writes its log file itself, unbounded")
        }
        AppLauncher.start(plan, app: id, instance: instance, input: input, group: group,
                          containers: configuration.containersDirectory, groupsDirectory: configuration.groupsDirectory,
                          bounds: configuration.bounds)
        // The next launch's page (a memfd, its seals, its mapping: 20 µs), made while
        // this child starts rather than on the next launch's path. Never given to anyone yet.
        if spareStampPage == nil { spareStampPage = try? RunLoopStampPage() }
    }
}
