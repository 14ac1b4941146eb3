import AppHostProtocol
/// Virtual clock: which app processes are known to be *quiet* — asleep, and so unable to
/// say anything more until the host (or something outside it) wakes them — and the
/// probes that find out.
///
/// On the virtual clock no host time passes while apps run, so the host may move time
/// (or take a scenario's next step) only once every app has answered what it was given
/// or is blocked. Real time cannot tell the two apart on a loaded machine (a slow app
/// and a hung one both fail to answer within any bound), so the host asks the kernel:
/// a probe reads the process's threads twice (``AppHostSystem/ThreadActivity``) and
/// calls it quiet when every thread slept in both readings and none was scheduled in
/// between, with nothing of its unread by the host. Every exchange with the process (a
/// frame either way, a signal, a spawn) makes it *awake* again; a quiet process stays
/// quiet until the next one. So the outcome of a step depends on what the apps do, not
/// on how fast the machine lets them do it.
///
/// The supervisor says what happened and runs the probes; the rules are here, tested
/// without a process.
struct Quiescence {
    /// One process instance of an app.
    struct Process: Hashable, Sendable {
        var app: BundleID
        var instance: UInt64
    }

    /// What a probe's reading means.
    enum Verdict: Equatable {
        /// Asleep since the probe began: quiet until the next exchange.
        case quiet
        /// Still running (or unreadable): probe again after this much real time, with
        /// this token (the retry counts as the probe in flight).
        case awake(retryAfter: Duration, token: UInt64)
        /// An exchange happened while the probe ran, or it is not the current probe:
        /// its reading says nothing (a new probe may start at once).
        case stale
    }

    private struct Entry {
        /// Bumped by every exchange with the process.
        var activity: UInt64 = 1
        /// The activity at which it was last found quiet (0: never).
        var quietAt: UInt64 = 0
        /// The probe in flight: its token and the activity when it began.
        var probe: (token: UInt64, activity: UInt64)?
        /// Probes in a row that found it running (for the retry's backoff).
        var misses = 0
    }

    private var entries: [Process: Entry] = [:]
    private var lastToken: UInt64 = 0
    /// Processes not known to be quiet.
    private(set) var awake: Set<Process> = []
    /// The awake processes with no probe in flight: those the host may start a probe of.
    /// Kept apart so that a step looks at these, not at every awake process (a coalesced
    /// fetch wakes 100 apps at once, and every frame from one of them is a step).
    private(set) var unprobed: Set<Process> = []

    /// The first retry's delay; each later one doubles, up to ``longestRetry``.
    static let firstRetry: Duration = .microseconds(100)
    static let longestRetry: Duration = .milliseconds(10)

    /// The host gave the process something, or heard from it: it may act again.
    mutating func touched(_ process: Process) {
        var entry = entries[process, default: Entry()]
        entry.activity &+= 1
        entry.misses = 0
        // A probe begun before this exchange can only end stale: it no longer holds the
        // process's one probe slot, so the next probe starts now rather than when the old
        // one (perhaps waiting out a delay, or backing off) comes back. Its verdict, when
        // it comes, matches no token and is dropped.
        entry.probe = nil
        entries[process] = entry
        awake.insert(process)
        unprobed.insert(process)
    }

    /// The kernel confirmed the process stopped (SIGSTOP): it runs no code until the host
    /// continues it, which touches it.
    mutating func stopped(_ process: Process) {
        var entry = entries[process, default: Entry()]
        entry.quietAt = entry.activity
        entry.misses = 0
        entries[process] = entry
        awake.remove(process)
        unprobed.remove(process)
    }

    /// Whether the process is known to be quiet since its last exchange.
    func isQuiet(_ process: Process) -> Bool {
        guard let entry = entries[process] else { return false }
        return entry.quietAt == entry.activity
    }

    /// Starts a probe of an awake process: its token, or nil when it is quiet already or
    /// a probe of it is in flight.
    mutating func beginProbe(_ process: Process) -> UInt64? {
        var entry = entries[process, default: Entry()]
        guard entry.quietAt != entry.activity, entry.probe == nil else { return nil }
        lastToken &+= 1
        entry.probe = (lastToken, entry.activity)
        entries[process] = entry
        unprobed.remove(process)
        return lastToken
    }

    /// Whether a probe of the process is in flight.
    func isProbing(_ process: Process) -> Bool {
        entries[process]?.probe != nil
    }

    /// A probe's reading: `asleep` when every thread slept throughout it and nothing the
    /// process wrote was left unread.
    mutating func probeEnded(_ process: Process, token: UInt64, asleep: Bool) -> Verdict {
        guard var entry = entries[process], let probe = entry.probe, probe.token == token else { return .stale }
        entry.probe = nil
        defer { entries[process] = entry }
        guard probe.activity == entry.activity else {
            unprobed.insert(process)
            return .stale
        }
        guard asleep else {
            entry.misses += 1
            lastToken &+= 1
            entry.probe = (lastToken, entry.activity)
            return .awake(retryAfter: Self.retryDelay(after: entry.misses), token: lastToken)
        }
        entry.quietAt = entry.activity
        entry.misses = 0
        awake.remove(process)
        unprobed.remove(process)
        return .quiet
    }

    /// The probe in flight will not run (its process is gone or cannot be probed now).
    mutating func probeAbandoned(_ process: Process) {
        guard entries[process]?.probe != nil else { return }
        entries[process]?.probe = nil
        if awake.contains(process) { unprobed.insert(process) }
    }

    /// The delay before the next probe of a process found running `misses` times in a row:
    /// 100 µs, doubling, at most 10 ms (a slow app costs little; a busy one few readings).
    static func retryDelay(after misses: Int) -> Duration {
        guard misses > 0 else { return .zero }
        let doublings = min(misses - 1, 20)
        return min(firstRetry * (1 << doublings), longestRetry)
    }

    /// The safety net ran out on it: treated as quiet at its current activity (the host no
    /// longer waits for it; the run has failed).
    mutating func excuse(_ process: Process) {
        guard var entry = entries[process] else { return }
        entry.quietAt = entry.activity
        entry.probe = nil
        entries[process] = entry
        awake.remove(process)
        unprobed.remove(process)
    }

    /// The process is gone.
    mutating func exited(_ process: Process) {
        entries.removeValue(forKey: process)
        awake.remove(process)
        unprobed.remove(process)
    }
}
