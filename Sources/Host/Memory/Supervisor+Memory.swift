import AppHostProtocol
import AppHostSystem
import Foundation
import HostConfig
import Logging

/// The host's side of device memory: the footprints it read, who was used when, the
/// pressure value (``MemoryPressure``) and the PSI watch. Owns no process; the
/// supervisor reads footprints and carries out the effects (Supervisor+Memory.swift).
struct MemoryState {
    var pressure: MemoryPressure
    /// Bytes per running app, as last read from the kernel.
    var footprints: [BundleID: UInt64] = [:]
    /// Apps whose footprint may have changed since it was read: read at the end of the step.
    var stale: Set<BundleID> = []
    /// Host time each app was last in front (or launched, if never), and the use's number
    /// (uses at one host time keep their order): jetsam's recency.
    var lastUsed: [BundleID: (time: Duration, order: UInt64)] = [:]
    var uses: UInt64 = 0
    /// Apps jetsam ended that have not been launched by the user since: their next
    /// user launch says `LaunchOptions.afterJetsam`.
    var jetsammed: Set<BundleID> = []
    /// The arguments of each app's last user launch, for a cold launch from the switcher.
    var lastArguments: [BundleID: [String]] = [:]
    /// Footprint cues (``AppMessage/memoryFootprintChanged``) per app, bounded.
    var cueLimiters: [BundleID: MessageRateLimiter] = [:]
    /// Footprint cues acted on and dropped at the bound, so far.
    var cuesTaken = 0
    var cuesDropped = 0
    /// Apps the host sent SIGKILL and has not seen exit: their footprints no longer count
    /// (a set, so the total costs no look at every runtime: at 1,000 apps that look copied
    /// each runtime and made a state change 1.5× dearer).
    var beingKilled: Set<BundleID> = []
    /// Inside an evaluation (its effects feed apps, whose feeds would evaluate again).
    var evaluating = false
    /// Real clock: an evaluation is scheduled as an actor job of its own (see
    /// ``Supervisor/evaluateMemoryAfterStep()``).
    var evaluationScheduled = false
    /// The PSI triggers being waited on (nil: the computed source alone).
    var watch: PressureStallWatch?
    /// Footprint reads so far (tests and benches count them): smaps_rollup or cgroup reads.
    var reads = 0
    /// The resident set (statm) of each app's process when its Pss was last read: within
    /// ``rssSlack`` of it, the Pss read then stands (a suspended app, a home button).
    var residentAtRead: [BundleID: (pid: Int32, rss: UInt64)] = [:]
    /// How far the resident set may move before the Pss is read again.
    static let rssSlack: UInt64 = 1 << 20

    init(device: UInt64) {
        pressure = MemoryPressure(device: device)
    }
}

extension Supervisor {
    /// Starts the PSI watch where the configuration asks for it (from `init`, before the
    /// actor runs); says once, at start, why not where it cannot (no such file, no
    /// permission, a trigger refused), and the host then runs on the computed pressure.
    nonisolated static func startMemoryWatch(_ configuration: HostConfiguration, device: UInt64, input: AsyncStream<Input>.Continuation,
                                             events: EventLog, logger: Logger, time: Date) -> PressureStallWatch? {
        let settings = configuration.memory
        let source = settings.source == .psi ? "computed from the apps' footprints, and the kernel's PSI" : "computed from the apps' footprints"
        events.append(.service, cause: "device memory \(ByteCountText.format(device)) (\(settings.device == nil ? "profile \(configuration.profile.name)" : "config")); pressure \(source)", time: time)
        guard settings.source == .psi else { return nil }
        let triggers = configuration.memoryPSITriggers
        do {
            let watch = try PressureStallWatch(path: configuration.memoryPSIPath,
                                               triggers: triggers.enumerated().map { PressureStallWatch.Trigger($1.line, tag: $0) }) { tag in
                input.yield(.memoryPressureReported(triggers[tag].level, trigger: tag))
            }
            events.append(.service, cause: "memory pressure: waiting on PSI triggers \(triggers.map { "\"\($0.line)\" (\($0.level.rawValue))" }.joined(separator: ", ")) in \(configuration.memoryPSIPath)", time: time)
            return watch
        } catch {
            let text = "memory pressure: cannot use PSI (\(error)); the host computes pressure from the apps' footprints alone"
            events.append(.warning, cause: text, time: time)
            logger.warning("\(text)")
            return nil
        }
    }

    /// Reads `id`'s footprint from the kernel: its memory cgroup's charge where it has
    /// one, else `/proc/<pid>/smaps_rollup`'s Pss. Nil when it cannot be read (gone).
    ///
    /// smaps_rollup walks the page tables (0.3 ms for an idle probe, milliseconds for a
    /// large app): when the process's resident set (`statm`, microseconds) moved less
    /// than a MiB since the last reading, that reading stands.
    func readFootprint(_ id: BundleID) -> UInt64? {
        guard runtimes[id]?.machine.isRunning == true, let pid = runtimes[id]?.pid else { return nil }
        if let cgroup = runtimes[id]?.cgroup, let current = cgroup.memoryCurrent {
            memory.reads += 1
            return current
        }
        let rss = try? ProcStatm.residentBytes(pid: pid)
        if let rss, let last = memory.residentAtRead[id], last.pid == pid, let known = memory.footprints[id],
           (rss > last.rss ? rss - last.rss : last.rss - rss) < MemoryState.rssSlack {
            return known
        }
        memory.reads += 1
        guard let pss = try? SmapsRollup.read(pid: pid).pss else { return nil }
        if let rss { memory.residentAtRead[id] = (pid, rss) }
        return pss
    }

    /// A state change: the app's footprint is read again at the end of the step (and its
    /// recency noted when it comes to or leaves the front).
    func memoryTransition(_ id: BundleID, from: AppState, to: AppState) {
        if to == .active || from == .active || memory.lastUsed[id] == nil {
            memory.uses += 1
            memory.lastUsed[id] = (hostNow(), memory.uses)
        }
        switch to {
        case .notRunning:
            memory.footprints.removeValue(forKey: id)
            memory.residentAtRead.removeValue(forKey: id)
            memory.cueLimiters.removeValue(forKey: id)
            memory.stale.insert(id)
        case .active, .background, .suspended:
            memory.stale.insert(id)
        case .inactive:
            break
        }
    }

    /// The app said its footprint changed: read again, at most `footprintCues` a second
    /// (with as many at once); over that the cue is dropped (its next state change or
    /// advance reads it anyway), not the app killed: a cue costs the host a read.
    func memoryCue(_ id: BundleID) {
        let bounds = configuration.bounds
        var limiter = memory.cueLimiters[id] ?? MessageRateLimiter(burst: bounds.footprintCues, perSecond: bounds.footprintCues)
        let taken = limiter.take()
        memory.cueLimiters[id] = limiter
        guard taken else {
            memory.cuesDropped += 1
            return
        }
        memory.cuesTaken += 1
        memory.stale.insert(id)
        evaluateMemory()
    }

    /// Reads the footprints of the apps marked stale and evaluates the pressure; what it
    /// decides (warnings, kills) is carried out at once. Called at a step's end (after a
    /// feed), on a footprint cue, at each step of a virtual `advance`.
    @discardableResult
    func evaluateMemory() -> [MemoryPressure.Effect] {
        guard !memory.evaluating, !memory.stale.isEmpty else { return [] }
        for id in memory.stale {
            if let bytes = readFootprint(id) { memory.footprints[id] = bytes } else { memory.footprints.removeValue(forKey: id) }
        }
        memory.stale.removeAll()
        let total = memoryTotal()
        let candidates = memory.pressure.level(for: total) == .critical ? jetsamCandidates() : []
        let fx = memory.pressure.handle(.measured(total: total, candidates: candidates))
        performMemory(fx)
        return fx
    }

    /// The end of a step that left footprints stale. On the real clock the reads (a
    /// smaps_rollup walk, 0.3 ms an app) and the judgement run as an actor job of their
    /// own, at a lower priority than what the step resumed: a launch answers before its app's
    /// footprint is read (read in line, it made `launch()` 1.37× a bare spawn instead of
    /// 1.25×). On the virtual clock, in line: no time passes, and the log's order must
    /// not depend on when the job runs.
    func evaluateMemoryAfterStep() {
        guard configuration.clock == .real else {
            evaluateMemory()
            return
        }
        guard !memory.evaluationScheduled else { return }
        memory.evaluationScheduled = true
        // At a lower priority than the step's own jobs: the actor runs jobs by priority,
        // and at the same priority this one ran before the launch() the step had resumed
        // (a 0.3-0.5 ms wait in about half of the launches, measured with a trace).
        Task(priority: .utility) { self.scheduledMemoryEvaluation() }
    }

    private func scheduledMemoryEvaluation() {
        memory.evaluationScheduled = false
        events.beginBatch()
        evaluateMemory()
        events.endBatch()
    }

    /// Marks every app running code stale (and those never read), then evaluates: an
    /// advance step, a forced level, a PSI report.
    func memoryRefreshRunning() {
        for id in runtimes.keys where runtimes[id]?.machine.isRunning == true
            && (runtimes[id]?.machine.isRunningCode == true || memory.footprints[id] == nil) {
            memory.stale.insert(id)
        }
    }

    /// The sum of the footprints of every running app not already being killed.
    func memoryTotal() -> UInt64 {
        var total: UInt64 = 0
        for (id, bytes) in memory.footprints where !memory.beingKilled.contains(id) {
            total &+= bytes
        }
        return total
    }

    /// The apps jetsam may choose: running, measured, not already ending.
    func jetsamCandidates() -> [JetsamPolicy.Candidate] {
        memory.footprints.compactMap { id, bytes in
            guard let machine = runtimes[id]?.machine, machine.isRunning, !machine.killSent, machine.terminating == nil else { return nil }
            let band = JetsamBand.of(state: machine.state, placement: machine.placement, hasActivity: !machine.activities.isEmpty)
            let used = memory.lastUsed[id]
            return JetsamPolicy.Candidate(app: id, band: band, footprint: bytes, lastUsed: used?.time ?? .zero, useOrder: used?.order ?? 0)
        }
    }

    /// A level reported from outside: `apphost device memory` (forced) or a PSI trigger.
    func memoryReported(_ level: MemoryPressureLevel, by reporter: MemoryPressure.Reporter) -> [MemoryPressure.Effect] {
        memoryRefreshRunning()
        for id in memory.stale {
            if let bytes = readFootprint(id) { memory.footprints[id] = bytes } else { memory.footprints.removeValue(forKey: id) }
        }
        memory.stale.removeAll()
        let total = memoryTotal()
        // Candidates (a look at every running app) only where jetsam may choose.
        let candidates = level == .critical || memory.pressure.level(for: total) == .critical ? jetsamCandidates() : []
        let fx = memory.pressure.handle(.reported(level, by: reporter, total: total, candidates: candidates))
        performMemory(fx)
        return fx
    }

    /// Carries out what the pressure value decided.
    func performMemory(_ effects: [MemoryPressure.Effect]) {
        memory.evaluating = true
        defer { memory.evaluating = false }
        for effect in effects {
            switch effect {
            case .levelChanged(let from, let to, let total):
                events.append(.memory, cause: "memory pressure \(from.rawValue) → \(to.rawValue)",
                              fields: .init(footprint: total, pressure: to), time: now())
            case .warnRunningApps(let level):
                for id in runtimes.keys.sorted() {
                    guard let m = runtimes[id]?.machine, m.isRunningCode, m.launched, m.terminating == nil, !m.killSent else { continue }
                    events.append(.memory, app: id, pid: runtimes[id]?.pid, cause: "memory warning (pressure \(level.rawValue)): didReceiveMemoryWarning",
                                  fields: .init(callback: LifecycleCallback.didReceiveMemoryWarning.name, footprint: memory.footprints[id], pressure: level),
                                  time: now())
                    feed(id, .memoryWarning)
                }
            case .jetsam(let victim):
                guard runtimes[victim.app]?.machine.isRunning == true else { continue }
                let band = victim.band
                events.append(.memory, app: victim.app, pid: runtimes[victim.app]?.pid,
                              cause: "jetsam: killing \(victim.app), the least valuable app left (band \(band)), for vm-pageshortage",
                              fields: .init(footprint: victim.footprint, pressure: .critical, band: band), time: now())
                memory.jetsammed.insert(victim.app)
                let record = Lifecycle.TerminationRecord(
                    namespace: "JETSAM", code: nil,
                    reason: "vm-pageshortage: the device was short of memory (pressure critical) and jetsam ended the least valuable app first: this one, in band \(band)",
                    footprint: victim.footprint, band: band)
                feed(victim.app, .modeViolation(record))
            }
        }
    }

    /// `apphost device memory LEVEL`: the level forced, and what it did, for the user.
    func deviceMemoryCommand(_ level: MemoryPressureLevel) -> String {
        let fx = memoryReported(level, by: .forced)
        var lines = [memoryText()]
        let warned = fx.contains { if case .warnRunningApps = $0 { true } else { false } }
        if warned { lines.append("memory warnings sent to the apps running code") }
        for case .jetsam(let v) in fx {
            lines.append("jetsam killed \(v.app) (band \(v.band.rawValue), footprint \(ByteCountText.format(v.footprint)))")
        }
        return lines.joined(separator: "\n")
    }

    /// "memory: 412 MiB of 3 GiB in use (13 %), pressure normal (computed; warning at 80 %, critical at 95 %)".
    func memoryText() -> String {
        let m = memoryReading()
        let how = m.forced.map { "forced \($0.rawValue) until `apphost device memory normal`" } ?? "computed"
        let source = m.psiPath.map { "; PSI triggers in \($0)" } ?? ""
        return "memory: \(ByteCountText.format(m.inUse)) of \(ByteCountText.format(m.device)) in use by apps (\(m.percent) %), pressure \(m.pressure.rawValue) (\(how); warning at \(m.warningPercent) %, critical at \(m.criticalPercent) %\(source))"
    }

    /// The device memory and its pressure, as `device show` prints them.
    func memoryReading() -> DeviceMemoryReading {
        let p = memory.pressure
        let share = p.device == 0 ? 0 : Int((Double(p.total) / Double(p.device) * 100).rounded())
        return DeviceMemoryReading(inUse: p.total, device: p.device, percent: share, pressure: p.level, forced: p.forced,
                                   warningPercent: Int(MemoryPressure.warningShare * 100), criticalPercent: Int(MemoryPressure.criticalShare * 100),
                                   psiPath: memory.watch != nil ? configuration.memoryPSIPath : nil)
    }

    /// A PSI trigger fired (on the watch's thread; handled as the host's own input).
    func memoryPressureReported(_ level: MemoryPressureLevel, trigger: Int) {
        let line = configuration.memoryPSITriggers.indices.contains(trigger) ? configuration.memoryPSITriggers[trigger].line : "?"
        events.append(.memory, cause: "PSI trigger \"\(line)\" fired in \(configuration.memoryPSIPath): the kernel reports memory pressure \(level.rawValue)",
                      fields: .init(pressure: level), time: now())
        _ = memoryReported(level, by: .psi)
    }

    /// Virtual clock, after a deadline of an advance fired for `app` (its footprint is
    /// read again if it runs code), and at the advance's end (nil: every app running
    /// code); evaluates. True when it killed (the caller settles the kills).
    func memoryAdvanceStep(_ app: BundleID?) -> Bool {
        if let app {
            guard runtimes[app]?.machine.isRunningCode == true else { return false }
            memory.stale.insert(app)
        } else {
            memoryRefreshRunning()
        }
        return evaluateMemory().contains { if case .jetsam = $0 { true } else { false } }
    }

    /// Uninstalled: nothing of it is kept.
    func memoryAppUninstalled(_ id: BundleID) {
        memory.footprints.removeValue(forKey: id)
        memory.residentAtRead.removeValue(forKey: id)
        memory.lastUsed.removeValue(forKey: id)
        memory.jetsammed.remove(id)
        memory.lastArguments.removeValue(forKey: id)
        memory.cueLimiters.removeValue(forKey: id)
        memory.stale.remove(id)
    }
}
