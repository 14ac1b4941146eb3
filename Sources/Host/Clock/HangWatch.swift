import AppHostProtocol
import AppHostSystem

/// The foreground hang watchdog's view of one process's run-loop stamp page (issue 18),
/// turned into what the lifecycle rules decide on (``Lifecycle/MainRunLoop``).
///
/// The app's main run loop stamps a turn counter and when the current turn began
/// (CLOCK_MONOTONIC, 0 while it waits). The host reads the page only at its hang-check
/// deadline (and, on the virtual clock, when host time is about to move): a memory
/// read, nothing sent to the app. The page is the app's to write, so nothing in it is
/// trusted beyond "how long has the current turn been running", and that is bounded:
/// a start in the future reads as "just began", one before the app became active is
/// cut to its activation (by the lifecycle), and a page that changes while it is read
/// reads as "making progress".
///
/// - Real clock: blocked = now − busy since, both CLOCK_MONOTONIC (the host's own
///   reading, not the app's), mapped onto host time.
/// - Virtual clock: the app's real time means nothing in host time, so the turn
///   counter decides. A busy turn N first seen at host time h has been running since
///   at least h: the same turn number busy at two readings means one turn lasted from
///   the first to the second (the counter only grows). ``observe(_:at:)`` notes the turn
///   every time host time is about to move, so h is the host time at which the app was
///   last seen making progress or earlier; an idle page or a new turn forgets it. Host
///   time moves only once the host has settled — every app asleep (see ``Quiescence``)
///   — so a turn still running then is one the app is blocked in, not one a loaded
///   machine has not let it finish: host time alone decides, as it does for every
///   other watchdog.
struct HangWatch: Sendable, Equatable {
    /// The busy turn last seen and the host time it was first seen busy (virtual clock).
    private(set) var busyTurn: UInt64?
    private(set) var busySince: Duration = .zero

    /// Virtual clock: notes the page at host time `now` (before time moves on).
    mutating func observe(_ reading: RunLoopStampReading, at now: Duration) {
        guard reading.turn != 0, reading.busySince != 0, reading.consistent else {
            busyTurn = nil
            return
        }
        if busyTurn != reading.turn {
            busyTurn = reading.turn
            busySince = now
        }
    }

    /// What the hang check at host time `now` sees. `monotonicNow`: the host's
    /// CLOCK_MONOTONIC nanoseconds, read with the page (real clock).
    mutating func check(_ reading: RunLoopStampReading, at now: Duration, clock: ClockMode,
                        monotonicNow: UInt64) -> Lifecycle.MainRunLoop {
        guard reading.turn != 0 else {
            // AppKitLess stamps its first turn before it says hello: an app that never
            // stamped does not use this page (raw IPC, or an SDK without stamps).
            busyTurn = nil
            return .unwatched("the app never stamped its run-loop page (it does not run AppKitLess's main run loop)")
        }
        guard reading.busySince != 0, reading.consistent else {
            busyTurn = nil
            return .idle
        }
        switch clock {
        case .real:
            // A start in the future (a clock the host does not share, or garbage) reads
            // as a turn that just began; a start before the host's time began is cut.
            let blocked = monotonicNow > reading.busySince ? monotonicNow - reading.busySince : 0
            let nanoseconds = Int64(clamping: blocked)
            let elapsed = Duration.nanoseconds(nanoseconds)
            return .busy(since: elapsed >= now ? .zero : now - elapsed)
        case .virtual:
            observe(reading, at: now)
            return .busy(since: busySince)
        }
    }
}
