import Foundation
import NIOCore
import NIOPosix

/// Where the transfer daemon's time comes from: one source for "now" and for its one
/// timer (retry backoffs, resource timeouts). Times are wall-clock seconds since 1970,
/// since they are stored with the jobs and outlive the daemon's process.
public protocol TransferClock: Sendable {
    /// Seconds since 1970.
    func now() -> Double
    /// Calls `fire` once, at `at` (seconds since 1970) or as soon after as it can;
    /// cancelling the returned timer stops it.
    func schedule(at: Double, _ fire: @escaping @Sendable () -> Void) -> any TransferTimer
}

/// A timer of a ``TransferClock``.
public protocol TransferTimer: Sendable {
    /// Stops the timer if it has not fired.
    func cancel()
}

/// The machine's clock, with timers on an event loop (`scheduleTask`, which cancelling
/// disarms; a cancelled `Task.sleep` leaves its dispatch timer armed on Linux).
public struct SystemTransferClock: TransferClock {
    private let loop: any EventLoop

    public init(loop: any EventLoop = MultiThreadedEventLoopGroup.singleton.any()) {
        self.loop = loop
    }

    public func now() -> Double { Date().timeIntervalSince1970 }

    public func schedule(at: Double, _ fire: @escaping @Sendable () -> Void) -> any TransferTimer {
        // At most 30 days ahead (also for a time that is not a number): a later wake-up
        // re-arms, and nothing overflows.
        let seconds = at.isFinite ? min(max(0, at - now()), 86_400 * 30) : 86_400 * 30
        return LoopTimer(scheduled: loop.scheduleTask(in: .nanoseconds(Int64(seconds * 1e9))) { fire() })
    }

    private struct LoopTimer: TransferTimer {
        let scheduled: Scheduled<Void>
        func cancel() { scheduled.cancel() }
    }
}
