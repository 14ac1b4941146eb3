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
        case app(String)
        case daemon

        var description: String {
            switch self {
            case .app(let id): id
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

    /// Ends the holder's turn if `busy` says it has nothing left, and gives it to the
    /// next in line: that party and what it said meanwhile (to be handled now). Nil when
    /// the holder is still busy or nobody is left (then nobody holds the turn).
    mutating func next(busy: (Party) -> Bool) -> (party: Party, inputs: [Supervisor.Input])? {
        guard let current = holder, !busy(current) else { return nil }
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
             .lockVerdict(let app, _, _, _), .hangRecheck(let app, _):
            .app(app)
        case .transferEvent, .transferEvents:
            .daemon
        case .deadlinesDue, .settleTimerFired, .transferDaemonStarted, .transferDaemonFailed,
             .transferDaemonExited, .transferDaemonRestart, .transferBatchSaved, .shutdownGraceOver,
             .memoryPressureReported:
            nil
        }
    }

    /// The process instance of an app's input.
    var instance: UInt64? {
        switch self {
        case .spawned(_, let i, _), .spawnFailed(_, let i, _), .connected(_, let i, _, _, _),
             .message(_, let i, _), .messages(_, let i, _), .violation(_, let i, _),
             .disconnected(_, let i), .drainExpired(_, let i), .child(_, let i, _, _),
             .lockVerdict(_, let i, _, _), .hangRecheck(_, let i):
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
        if case .app(let id) = party, let instance = runtimes[id]?.instance, turnExcused.contains(instance) { return }
        turns.expect(party)
    }

    /// Whether `item` is handled now; if not, it waits for its party's turn.
    func admitForTurn(_ item: Input) -> Bool {
        guard takesTurns, let party = item.party else { return true }
        if let instance = item.instance, turnExcused.contains(instance) { return true }
        if turns.admit(party, item) { return true }
        // Kept for its turn. But an app's frames held for its SIGCONT's confirmation go
        // now that the kernel has confirmed it (the confirmation itself is handled, and
        // logged, at the app's turn, before anything the app answers): apps woken at one
        // instant run together, and only the handling of what they say waits in line.
        if case .child(let id, let instance, .continued, _) = item, runtimes[id]?.instance == instance,
           let held = runtimes[id]?.heldForContinue {
            runtimes[id]?.heldForContinue = nil
            if !held.isEmpty { sendFrames(id, held) }
        }
        return false
    }

    /// Whether the host still waits for something of `party`: an app with a callback
    /// in flight, being launched, or with a stop, continue, lock check, kill or exit the
    /// kernel has not confirmed (what a settle waits for); the daemon with jobs it has
    /// not accepted.
    func turnBusy(_ party: TurnOrder.Party) -> Bool {
        switch party {
        case .daemon:
            return transfers.channel != nil && !transfers.awaitingAccept.isEmpty
        case .app(let id):
            guard let rt = runtimes[id], !turnExcused.contains(rt.instance) else { return false }
            if rt.pendingExit != nil { return true }
            guard rt.machine.isRunning else { return false }
            if rt.machine.killSent { return true }
            return !rt.pending.isEmpty || !rt.machine.launched || rt.machine.stopPending
                || rt.lockCheck != nil || rt.heldForContinue != nil
                || (rt.machine.terminating != nil && rt.child != nil)
        }
    }

    /// Passes the turn on while its holder is done, handling what the next party said
    /// while it waited. Called after every input and before a settle is judged.
    func passTurns() {
        guard takesTurns, !passingTurns else { return }
        passingTurns = true
        defer { passingTurns = false }
        while let (_, inputs) = turns.next(busy: { turnBusy($0) }) {
            for input in inputs { handle(input) }
        }
    }

    /// The settle time ran out: whoever the host still waits for is excused from turns
    /// (its inputs are handled as they come from now on: a hung app must not hold the
    /// others), and everything kept is handled, in line order.
    func excuseTurns() {
        guard takesTurns else { return }
        for party in [turns.holder].compactMap({ $0 }) + turns.queue where turnBusy(party) {
            switch party {
            case .daemon:
                logger.warning("the transfer daemon did not accept \(transfers.awaitingAccept.count) transfer(s) within the settle time")
                transfers.awaitingAccept.removeAll()
            case .app(let id):
                if let instance = runtimes[id]?.instance { turnExcused.insert(instance) }
            }
        }
        passTurns()
    }

}
