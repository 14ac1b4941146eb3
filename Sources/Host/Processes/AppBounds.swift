import Foundation

/// What one app can make the host keep or do (issue 14): every input an app controls
/// has a bound, and an app past one is killed with a report (namespace APPHOST) rather
/// than slowing or filling the host for everyone.
public struct AppBounds: Sendable, Equatable {
    /// IPC messages an app may send at once, and per second after that (a token bucket
    /// on the real clock, whatever the host's clock). Ten thousand background downloads
    /// enqueued at once fit in the burst; a flood at full speed is stopped within a
    /// fraction of a second. The returns of callbacks the host sent are not counted
    /// (``CallbacksSent``): the host decides how many there are.
    public var messageBurst: Int = 20_000
    /// See ``messageBurst``.
    public var messagesPerSecond: Int = 2_000
    /// Bytes the host may have written to an app that it has not read (the socket's
    /// write buffer above the kernel's): an app that asks and never reads the answers is
    /// killed past it.
    public var unreadBytes: Int = 4 << 20
    /// Background tasks one app may hold at once (iOS names no limit; an app holding a
    /// thousand has lost count of them).
    public var heldTasks: Int = 1_000
    /// The longest background-task name kept, in characters: a longer one is cut there
    /// (iOS keeps any name, for debugging only).
    public var taskNameLength: Int = 256
    /// Host-clock timers (AppKitLess `HostTimer`) one app process may have live at once:
    /// one more is refused, with a reason the app's `scheduledTimer` throws (the app
    /// goes on; Foundation names no limit, and an app with hundreds of timers has lost
    /// count of them). Each is a deadline the host keeps and orders.
    public var liveTimers: Int = 256
    /// Footprint cues (``AppMessage/memoryFootprintChanged``: "I allocated") the host acts
    /// on per app, at once and per second after that: each costs a read of the app's
    /// `smaps_rollup` (a page-table walk, milliseconds for a large app). Past it a cue is
    /// dropped, not the app killed: its footprint is read again at its next state change
    /// or clock step.
    public var footprintCues: Int = 32

    public init() {}

    /// The bounds in force unless the configuration says otherwise.
    public static let standard = AppBounds()

    /// `name` cut to ``taskNameLength`` characters, with "…" saying so.
    func taskName(_ name: String?) -> String? {
        guard let name, name.count > taskNameLength else { return name }
        return String(name.prefix(taskNameLength)) + "…"
    }
}

/// A token bucket: `burst` tokens, refilled at `perSecond`; each message takes one.
/// Time is a `Duration` since any origin the owner keeps: host time for a part on the
/// virtual clock (the same verdicts whatever the machine's speed), real time elapsed for
/// a connection's handler.
struct MessageRateLimiter: Equatable {
    private let burst: Double
    private let perSecond: Double
    private var tokens: Double
    private var last: Duration

    init(burst: Int, perSecond: Int, at start: Duration) {
        self.burst = Double(max(1, burst))
        self.perSecond = Double(max(0, perSecond))
        tokens = self.burst
        last = start
    }

    /// Takes one token at `now`; false when none is left (the sender is over its rate).
    /// A time before the last one refills nothing.
    mutating func take(at now: Duration) -> Bool {
        let elapsed = max(.zero, now - last)
        last = max(last, now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        tokens = min(burst, tokens + seconds * perSecond)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
