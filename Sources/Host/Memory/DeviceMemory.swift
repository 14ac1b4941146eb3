import AppHostProtocol
import AppHostSystem

/// What the memory part asks of the kernel. The host answers from each app's memory
/// cgroup and `/proc` (``KernelFootprints``); a test answers from a table, so the part is
/// read and tested without a process (`DeviceMemoryTests`).
protocol FootprintSource {
    /// The app's process, nil when it has none.
    func pid(of app: BundleID) -> Int32?
    /// The charge of the app's memory cgroup, where it has one (nil: none, or unreadable).
    func cgroupCharge(of app: BundleID) -> UInt64?
    /// The process's resident set (`statm`: microseconds), nil when it is gone.
    func resident(pid: Int32) -> UInt64?
    /// The process's proportional set (`smaps_rollup`'s Pss: a walk of its page tables,
    /// 0.3 ms for an idle app), nil when it is gone.
    func proportional(pid: Int32) -> UInt64?
}

/// The memory part: the footprints the host read, who was used when, the pressure value
/// (``MemoryPressure``), jetsam's memory of whom it ended, and the footprint cues' bound.
///
/// It owns that state alone. Its inputs are typed calls (a state change, a cue, a launch,
/// a kill sent, an uninstall, a level reported); its outputs are ``MemoryPressure/Effect``s
/// that the supervisor carries out (events, `didReceiveMemoryWarning`, SIGKILL). Time is
/// host time, so on the virtual clock its verdicts (the cue bound among them) do not
/// depend on the machine's speed. The kernel is reached through a ``FootprintSource``.
struct DeviceMemory {
    private(set) var pressure: MemoryPressure
    /// Bytes per running app, as last read from the kernel.
    private(set) var footprints: [BundleID: UInt64] = [:]
    /// Apps whose footprint may have changed since it was read: read at the next evaluation.
    private var stale: Set<BundleID> = []
    /// Host time each app was last in front (or launched, if never), and the use's number
    /// (uses at one host time keep their order): jetsam's recency.
    private var lastUsed: [BundleID: (time: Duration, order: UInt64)] = [:]
    private var uses: UInt64 = 0
    /// Apps jetsam ended that have not been launched by the user since: their next
    /// user launch says `LaunchOptions.afterJetsam`.
    private var jetsammed: Set<BundleID> = []
    /// The arguments of each app's last user launch, for a cold launch from the switcher.
    private var lastArguments: [BundleID: [String]] = [:]
    /// Footprint cues (``AppMessage/memoryFootprintChanged``) per app, bounded in host time.
    private var cueLimiters: [BundleID: MessageRateLimiter] = [:]
    /// Cues acted on each second (and as many at once).
    let cuesPerSecond: Int
    /// Footprint cues acted on and dropped at the bound, so far.
    private(set) var cuesTaken = 0
    private(set) var cuesDropped = 0
    /// Apps the host sent SIGKILL and has not seen exit: their footprints no longer count
    /// (a set, so the total costs no look at every app).
    private var beingKilled: Set<BundleID> = []
    /// Footprint reads so far (tests and benches count them): smaps_rollup or cgroup reads.
    private(set) var reads = 0
    /// The resident set of each app's process when its Pss was last read: within
    /// ``rssSlack`` of it, the Pss read then stands (a suspended app, a home button).
    private var residentAtRead: [BundleID: (pid: Int32, rss: UInt64)] = [:]
    /// How far the resident set may move before the Pss is read again.
    static let rssSlack: UInt64 = 1 << 20

    init(device: UInt64, cuesPerSecond: Int) {
        pressure = MemoryPressure(device: device)
        self.cuesPerSecond = cuesPerSecond
    }

    /// Some footprint may have changed since it was read.
    var hasStale: Bool { !stale.isEmpty }

    /// Whether the app was ended by jetsam and not launched by the user since.
    func wasJetsammed(_ app: BundleID) -> Bool { jetsammed.contains(app) }

    /// The arguments of the app's last user launch (a cold launch from the switcher).
    func coldLaunchArguments(_ app: BundleID) -> [String] { lastArguments[app] ?? [] }

    // MARK: - Inputs

    /// A state change at host time `now`: the footprint is read again at the next
    /// evaluation, and the app's recency noted when it comes to or leaves the front.
    mutating func transition(_ app: BundleID, from: AppState, to: AppState, at now: Duration) {
        if to == .active || from == .active || lastUsed[app] == nil {
            uses += 1
            lastUsed[app] = (now, uses)
        }
        switch to {
        case .notRunning:
            footprints.removeValue(forKey: app)
            residentAtRead.removeValue(forKey: app)
            cueLimiters.removeValue(forKey: app)
            stale.insert(app)
        case .active, .background, .suspended:
            stale.insert(app)
        case .inactive:
            break
        }
    }

    /// The app said its footprint changed: read again, at most ``cuesPerSecond`` a second
    /// of host time (with as many at once); over that the cue is dropped (its next state
    /// change or advance reads it anyway), not the app killed: a cue costs the host a read.
    /// True when the cue is taken (evaluate now).
    mutating func cue(_ app: BundleID, at now: Duration) -> Bool {
        var limiter = cueLimiters[app] ?? MessageRateLimiter(burst: cuesPerSecond, perSecond: cuesPerSecond, at: now)
        let taken = limiter.take(at: now)
        cueLimiters[app] = limiter
        guard taken else {
            cuesDropped += 1
            return false
        }
        cuesTaken += 1
        stale.insert(app)
        return true
    }

    /// A launch: by the user it says whether jetsam ended the app since the user last
    /// launched it (and forgets that), and keeps its arguments for a cold launch from the
    /// switcher; a background launch leaves both for the user's.
    /// True: launched by the user after jetsam ended it (`LaunchOptions.afterJetsam`).
    mutating func launching(_ app: BundleID, byUser: Bool, arguments: [String]) -> Bool {
        guard byUser else { return false }
        lastArguments[app] = arguments
        return jetsammed.remove(app) != nil
    }

    /// The host sent the app SIGKILL: its footprint no longer counts.
    mutating func killSent(_ app: BundleID) { beingKilled.insert(app) }

    /// The app's process ended, or a new one is made: a kill sent is no longer pending.
    mutating func processGone(_ app: BundleID) { beingKilled.remove(app) }

    /// Marks for reading every app running code, and every running app never read (an
    /// advance step, a forced level, a PSI report).
    mutating func refresh(_ running: some Sequence<(app: BundleID, runsCode: Bool)>) {
        for (app, runsCode) in running where runsCode || footprints[app] == nil {
            stale.insert(app)
        }
    }

    /// Marks one app for reading (an advance's deadline fired for an app running code).
    mutating func markStale(_ app: BundleID) { stale.insert(app) }

    /// Uninstalled: nothing of it is kept.
    mutating func uninstalled(_ app: BundleID) {
        footprints.removeValue(forKey: app)
        residentAtRead.removeValue(forKey: app)
        lastUsed.removeValue(forKey: app)
        jetsammed.remove(app)
        lastArguments.removeValue(forKey: app)
        cueLimiters.removeValue(forKey: app)
        stale.remove(app)
        beingKilled.remove(app)
    }

    // MARK: - Judging

    /// Reads the footprints marked stale through `source` and judges the pressure.
    /// `band` gives the band of an app jetsam may choose (running, not already ending),
    /// nil for one it may not; it is asked only when the level is critical. The apps it
    /// kills are remembered for their next user launch.
    mutating func evaluate(_ source: some FootprintSource, band: (BundleID) -> JetsamBand?) -> [MemoryPressure.Effect] {
        guard !stale.isEmpty else { return [] }
        readStale(source)
        let sum = total
        let chosen = pressure.level(for: sum) == .critical ? candidates(band) : []
        return remember(pressure.handle(.measured(total: sum, candidates: chosen)))
    }

    /// A level reported from outside: `apphost device memory` (forced) or a PSI trigger.
    /// `running` are the running apps (see ``refresh(_:)``).
    mutating func reported(_ level: MemoryPressureLevel, by reporter: MemoryPressure.Reporter,
                           running: some Sequence<(app: BundleID, runsCode: Bool)>,
                           _ source: some FootprintSource, band: (BundleID) -> JetsamBand?) -> [MemoryPressure.Effect] {
        refresh(running)
        readStale(source)
        let sum = total
        // Candidates (a look at every running app) only where jetsam may choose.
        let chosen = level == .critical || pressure.level(for: sum) == .critical ? candidates(band) : []
        return remember(pressure.handle(.reported(level, by: reporter, total: sum, candidates: chosen)))
    }

    /// The sum of the footprints of every running app not already being killed.
    var total: UInt64 {
        var sum: UInt64 = 0
        for (app, bytes) in footprints where !beingKilled.contains(app) { sum &+= bytes }
        return sum
    }

    private mutating func readStale(_ source: some FootprintSource) {
        for app in stale {
            if let bytes = read(app, source) { footprints[app] = bytes } else { footprints.removeValue(forKey: app) }
        }
        stale.removeAll()
    }

    /// The app's footprint: its memory cgroup's charge where it has one, else its Pss.
    /// When the resident set moved less than ``rssSlack`` since the Pss was last read,
    /// that reading stands. Nil when it cannot be read (gone).
    private mutating func read(_ app: BundleID, _ source: some FootprintSource) -> UInt64? {
        guard let pid = source.pid(of: app) else { return nil }
        if let charge = source.cgroupCharge(of: app) {
            reads += 1
            return charge
        }
        let rss = source.resident(pid: pid)
        if let rss, let last = residentAtRead[app], last.pid == pid, let known = footprints[app],
           (rss > last.rss ? rss - last.rss : last.rss - rss) < Self.rssSlack {
            return known
        }
        reads += 1
        guard let pss = source.proportional(pid: pid) else { return nil }
        if let rss { residentAtRead[app] = (pid, rss) }
        return pss
    }

    /// The apps jetsam may choose: measured, and given a band.
    private func candidates(_ band: (BundleID) -> JetsamBand?) -> [JetsamPolicy.Candidate] {
        footprints.compactMap { app, bytes in
            guard !beingKilled.contains(app), let b = band(app) else { return nil }
            let used = lastUsed[app]
            return JetsamPolicy.Candidate(app: app, band: b, footprint: bytes, lastUsed: used?.time ?? .zero, useOrder: used?.order ?? 0)
        }
    }

    private mutating func remember(_ effects: [MemoryPressure.Effect]) -> [MemoryPressure.Effect] {
        for case .jetsam(let victim) in effects { jetsammed.insert(victim.app) }
        return effects
    }
}
