import AppHostProtocol
import AppHostSystem
import Foundation
import HostConfig
import Logging

/// What the supervisor holds for device memory: the part (``DeviceMemory``), which owns
/// the footprints, recency and pressure, and the shell's own: the PSI watch and when an
/// evaluation runs.
struct MemoryState {
    var device: DeviceMemory
    /// Inside an evaluation's effects (they feed apps, whose feeds would evaluate again).
    var evaluating = false
    /// Real clock: an evaluation is scheduled as an actor job of its own (see
    /// ``Supervisor/evaluateMemoryAfterStep()``).
    var evaluationScheduled = false
    /// The PSI triggers being waited on (nil: the computed source alone).
    var watch: PressureStallWatch?

    init(device: UInt64, cuesPerSecond: Int) {
        self.device = DeviceMemory(device: device, cuesPerSecond: cuesPerSecond)
    }
}

/// The kernel as the memory part reads it: each app's memory cgroup, else its process's
/// `statm` and `smaps_rollup`.
struct KernelFootprints: FootprintSource {
    let processes: ProcessTable

    func pid(of app: BundleID) -> Int32? {
        guard let rt = processes[app], rt.machine.isRunning else { return nil }
        return rt.pid
    }
    func cgroupCharge(of app: BundleID) -> UInt64? { processes[app]?.cgroup?.memoryCurrent }
    func resident(pid: Int32) -> UInt64? { try? ProcStatm.residentBytes(pid: pid) }
    func proportional(pid: Int32) -> UInt64? { try? SmapsRollup.read(pid: pid).pss }
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

    /// A state change: the memory part notes it (the footprint is read again at the
    /// step's end).
    func memoryTransition(_ id: BundleID, from: AppState, to: AppState) {
        memory.device.transition(id, from: from, to: to, at: hostNow())
    }

    /// The app said its footprint changed: judged at once if the part takes the cue.
    func memoryCue(_ id: BundleID) {
        if memory.device.cue(id, at: hostNow()) { evaluateMemory() }
    }

    /// The band of an app jetsam may choose: running, not already ending.
    func jetsamBand(_ id: BundleID) -> JetsamBand? {
        guard let machine = processes[id]?.machine, machine.isRunning, !machine.killSent, machine.terminating == nil else { return nil }
        return JetsamBand.of(state: machine.state, placement: machine.placement, hasActivity: !machine.activities.isEmpty)
    }

    /// The running apps, and whether each runs code (what the part reads on a refresh).
    func runningApps() -> [(app: BundleID, runsCode: Bool)] {
        processes.entries.compactMap { id, rt in rt.machine.isRunning ? (id, rt.machine.isRunningCode) : nil }
    }

    /// The part judges the footprints marked stale; what it decides (warnings, kills)
    /// is carried out at once. Called at a step's end (after a feed), on a footprint cue,
    /// at each step of a virtual `advance`.
    @discardableResult
    func evaluateMemory() -> [MemoryPressure.Effect] {
        guard !memory.evaluating else { return [] }
        let fx = memory.device.evaluate(KernelFootprints(processes: processes), band: jetsamBand)
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

    /// A level reported from outside: `apphost device memory` (forced) or a PSI trigger.
    func memoryReported(_ level: MemoryPressureLevel, by reporter: MemoryPressure.Reporter) -> [MemoryPressure.Effect] {
        let fx = memory.device.reported(level, by: reporter, running: runningApps(), KernelFootprints(processes: processes), band: jetsamBand)
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
                for id in processes.ids.sorted() {
                    guard let m = processes[id]?.machine, m.isRunningCode, m.launched, m.terminating == nil, !m.killSent else { continue }
                    events.append(.memory, app: id, pid: processes[id]?.pid, cause: "memory warning (pressure \(level.rawValue)): didReceiveMemoryWarning",
                                  fields: .init(callback: LifecycleCallback.didReceiveMemoryWarning.name, footprint: memory.device.footprints[id], pressure: level),
                                  time: now())
                    feed(id, .memoryWarning)
                }
            case .jetsam(let victim):
                guard processes[victim.app]?.machine.isRunning == true else { continue }
                let band = victim.band
                events.append(.memory, app: victim.app, pid: processes[victim.app]?.pid,
                              cause: "jetsam: killing \(victim.app), the least valuable app left (band \(band)), for vm-pageshortage",
                              fields: .init(footprint: victim.footprint, pressure: .critical, band: band), time: now())
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
        let p = memory.device.pressure
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
            guard processes[app]?.machine.isRunningCode == true else { return false }
            memory.device.markStale(app)
        } else {
            memory.device.refresh(runningApps())
        }
        return evaluateMemory().contains { if case .jetsam = $0 { true } else { false } }
    }
}
