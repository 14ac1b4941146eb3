import AppHostProtocol
import Foundation

/// The order in which the host, on the virtual clock, takes what separate processes
/// say at one instant: one *party* at a time (an app, or the transfer daemon).
///
/// Apps and the daemon run in parallel and answer in whatever order the kernel
/// schedules them; on the virtual clock no time passes while they do, so the host may
/// take their answers in an order of its own choosing without changing what any of
/// them sees. A party joins the queue when the host gives it something to do (a
/// callback, a signal, a spawn, a transfer to accept), in the order of the host's
/// steps, which is the same in every run. The holder's inputs are handled as they
/// come; another party's inputs wait, in the order they came, until its turn. A turn
/// ends when its holder has nothing left that the host waits for (see
/// `Supervisor.turnBusy`). So two runs of a scenario log the same events in the same
/// order, even where two apps answer at the same virtual instant.
///
/// On the real clock none of this applies: time passes while a party waits.
struct TurnOrder {
    enum Party: Hashable, Sendable, CustomStringConvertible {
        case app(BundleID)
        case daemon

        var description: String {
            switch self {
            case .app(let id): id.rawValue
            case .daemon: "the transfer daemon"
            }
        }
    }

    /// Inputs kept for later, in all (a bound: past it, inputs are handled as they come).
    static let stashLimit = 65_536

    /// Whose inputs are handled now.
    private(set) var holder: Party?
    /// Who comes next, in the order the host gave them work.
    private(set) var queue: [Party] = []
    /// What each waiting party said, in order.
    private var stashed: [Party: [Supervisor.Input]] = [:]
    private(set) var stashedCount = 0
    /// Process instances the host stopped waiting for (the safety net ran out on them):
    /// their inputs are handled as they come, and they never join the line.
    private var excused: Set<UInt64> = []
    /// Inside ``Supervisor/passTurns()`` (the inputs it hands out may pass turns again).
    var passing = false

    /// The host stops waiting for this process instance (see ``excused``).
    mutating func excuse(instance: UInt64) { excused.insert(instance) }

    /// Whether the host stopped waiting for this process instance.
    func isExcused(_ instance: UInt64) -> Bool { excused.contains(instance) }

    /// The host gave `party` work: it takes the turn if nobody holds it, else waits in
    /// line (once).
    mutating func expect(_ party: Party) {
        if holder == nil {
            holder = party
        } else if holder != party, !queue.contains(party) {
            queue.append(party)
        }
    }

    /// `party` said something: whether it is handled now. If not, it is kept for the
    /// party's turn, and a party the host did not expect joins the line here.
    mutating func admit(_ party: Party, _ input: Supervisor.Input) -> Bool {
        if holder == nil { holder = party }
        if holder == party { return true }
        guard stashedCount < Self.stashLimit else { return true }
        stashed[party, default: []].append(input)
        stashedCount += 1
        if !queue.contains(party) { queue.append(party) }
        return false
    }

    /// Ends the holder's turn and gives it to the next in line, with what that party said
    /// meanwhile; nil when nobody holds it or nobody is left (then nobody holds it). The
    /// caller first finds the holder has nothing left (``Supervisor/turnBusy(_:)`` reads
    /// this value, so it is asked before this mutating call, not from inside it).
    mutating func passOn() -> (party: Party, inputs: [Supervisor.Input])? {
        guard holder != nil else { return nil }
        guard !queue.isEmpty else {
            holder = nil
            return nil
        }
        let party = queue.removeFirst()
        holder = party
        let inputs = stashed.removeValue(forKey: party) ?? []
        stashedCount -= inputs.count
        return (party, inputs)
    }

    /// Takes `party` out of the line (or the turn) with what it said meanwhile, in order:
    /// for a party the host stops waiting for (the daemon at shutdown).
    /// If it held the turn, the next in line takes it, and what that one said follows.
    mutating func take(_ party: Party) -> [Supervisor.Input] {
        queue.removeAll { $0 == party }
        var inputs = stashed.removeValue(forKey: party) ?? []
        if holder == party {
            holder = queue.isEmpty ? nil : queue.removeFirst()
            if let next = holder { inputs += stashed.removeValue(forKey: next) ?? [] }
        }
        stashedCount -= inputs.count
        return inputs
    }

    /// Nothing waits: nobody holds the turn, or its holder has nothing left.
    func isIdle(busy: (Party) -> Bool) -> Bool {
        guard let holder else { return true }
        return queue.isEmpty && !busy(holder)
    }
}

extension Supervisor.Input {
    /// Whose input this is, for ``TurnOrder``: nil for the host's own (timers, the
    /// daemon's start and exit, database answers, shutdown), handled as they come.
    var party: TurnOrder.Party? {
        switch self {
        case .spawned(let app, _, _), .spawnFailed(let app, _, _), .connected(let app, _, _, _, _),
             .message(let app, _, _), .messages(let app, _, _), .violation(let app, _, _),
             .disconnected(let app, _), .drainExpired(let app, _), .child(let app, _, _, _),
             .lockVerdict(let app, _, _, _):
            .app(app)
        case .transferEvent, .transferEvents, .transferDaemonStarted, .transferDaemonFailed, .transferDaemonExited:
            .daemon
        case .deadlinesDue, .settleTimerFired, .stopWaitsExpired, .quietProbe, .transferDaemonRestart, .transferBatchSaved,
             .shutdownGraceOver, .memoryPressureReported:
            nil
        }
    }

    /// The process instance of an app's input.
    var instance: UInt64? {
        switch self {
        case .spawned(_, let i, _), .spawnFailed(_, let i, _), .connected(_, let i, _, _, _),
             .message(_, let i, _), .messages(_, let i, _), .violation(_, let i, _),
             .disconnected(_, let i), .drainExpired(_, let i), .child(_, let i, _, _),
             .lockVerdict(_, let i, _, _):
            i
        default:
            nil
        }
    }
}

extension Supervisor {
    /// Whether the host takes inputs in turns (the virtual clock).
    var takesTurns: Bool { configuration.clock == .virtual }

    /// The host gave an app work (a callback, a signal, a spawn): it is in line.
    func expectTurn(_ party: TurnOrder.Party) {
        guard takesTurns else { return }
        if case .app(let id) = party, let instance = processes[id]?.instance, turns.isExcused(instance) { return }
        turns.expect(party)
    }

    /// Whether `item` is handled now; if not, it waits for its party's turn.
    func admitForTurn(_ item: Input) -> Bool {
        guard takesTurns, let party = item.party else { return true }
        if let instance = item.instance, turns.isExcused(instance) { return true }
        if turns.admit(party, item) { return true }
        // Kept for its turn. But an app's frames held for its SIGCONT's confirmation go
        // now that the kernel has confirmed it (the confirmation itself is handled, and
        // logged, at the app's turn, before anything the app answers): apps woken at one
        // instant run together, and only the handling of what they say waits in line.
        if case .child(let id, let instance, .continued, _) = item, processes[id]?.instance == instance,
           let held = processes[id]?.heldForContinue {
            processes[id]?.heldForContinue = nil
            if !held.isEmpty { sendFrames(id, held) }
        }
        return false
    }

    /// Whether the host still waits for something of `party`: an app being spawned, with a
    /// stop, continue, lock check, kill or exit the kernel has not confirmed, or awake (it
    /// may still say something: see ``Quiescence``); the daemon with jobs it has not
    /// accepted, or starting and not yet ready. An app that is quiet holds nothing up,
    /// whatever it was sent: it is blocked until the host gives it something more.
    func turnBusy(_ party: TurnOrder.Party) -> Bool {
        switch party {
        case .daemon:
            return transfers.daemonStarting || (transfers.channel != nil && !transfers.awaitingAccept.isEmpty)
        case .app(let id):
            guard let rt = processes[id], !turns.isExcused(rt.instance) else { return false }
            if rt.pendingExit != nil { return true }
            guard rt.machine.isRunning else { return false }
            if rt.machine.killSent || rt.machine.stopPending || rt.lockCheck != nil || rt.heldForContinue != nil { return true }
            if rt.child == nil || rt.channel == nil { return true }
            return !quiescence.isQuiet(.init(app: id, instance: rt.instance))
        }
    }

    /// Passes the turn on while its holder is done, handling what the next party said
    /// while it waited. Called after every input and before a settle is judged.
    func passTurns() {
        guard takesTurns, !turns.passing else { return }
        turns.passing = true
        defer { turns.passing = false }
        // The holder is judged, then the turn passed: `turnBusy` reads `turns` (who is
        // excused), which it may not while `turns` is being changed.
        while let holder = turns.holder, !turnBusy(holder), let (_, inputs) = turns.passOn() {
            for input in inputs { handle(input) }
        }
    }

    /// The safety net ran out: whoever the host still waits for is excused from turns
    /// (its inputs are handled as they come from now on), and everything kept is handled,
    /// in line order. The run has already failed (see ``Supervisor/safetyNetRanOut()``).
    func excuseTurns() {
        guard takesTurns else { return }
        for party in [turns.holder].compactMap({ $0 }) + turns.queue where turnBusy(party) {
            switch party {
            case .daemon:
                logger.warning("the transfer daemon did not accept \(transfers.awaitingAccept.count) transfer(s) within the safety net")
                transfers.awaitingAccept.removeAll()
                transfers.daemonStarting = false
            case .app(let id):
                if let instance = processes[id]?.instance { turns.excuse(instance: instance) }
            }
        }
        passTurns()
    }
}
