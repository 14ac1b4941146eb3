import AppHostProtocol
import NIOCore
import Synchronization

/// The live part of an event subscription (``Supervisor/subscribe(bundleIdentifier:)``):
/// every event the host writes after the subscription's cut, in order, one consumer.
///
/// The host hands a step's events over together: the consumer is woken once a step, not
/// once an event. (An `AsyncStream` yields one element at a time and wakes a waiting
/// consumer for each: with 10,000 transfers and four events each, the wake-ups were a
/// tenth of the host's CPU in `apphost-bench transfers`.)
///
/// Bounded like the stream it replaced: at most ``limit`` events wait; past that the
/// oldest are dropped (a consumer that stalls loses the oldest, the host never blocks).
/// The sequence ends when the subscription ends (``Supervisor/unsubscribe(_:)``) or the
/// host stops, after the events already waiting, or at once when the consuming task is
/// cancelled.
public struct HostEventStream: AsyncSequence, Sendable {
    public typealias Element = HostEvent
    public typealias Failure = Never

    /// The default bound of waiting events.
    public static let defaultLimit = 10_000

    let channel: HostEventChannel

    /// `overflow`: what happens when ``limit`` events wait (see ``HostEventChannel/Overflow``).
    init(limit: Int = HostEventStream.defaultLimit, overflow: HostEventChannel.Overflow = .dropOldest,
         onOverflow: (@Sendable () -> Void)? = nil) {
        channel = HostEventChannel(limit: limit, overflow: overflow, onOverflow: onOverflow)
    }

    /// The subscription was ended because its consumer fell ``HostEventChannel/limit``
    /// events behind (with ``HostEventChannel/Overflow/end``).
    public var endedBehind: Bool { channel.overflowed }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let channel: HostEventChannel

        public mutating func next() async -> HostEvent? {
            await channel.next()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(Never) -> HostEvent? {
            await channel.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(channel: channel)
    }
}

/// The buffer between the event log (producer, on the host's actor) and one consumer.
final class HostEventChannel: Sendable {
    /// What a full buffer does with the next event.
    enum Overflow: Sendable {
        /// The oldest waiting event is dropped (an in-process consumer that stalls).
        case dropOldest
        /// The subscription ends: the consumer gets nil at once and ``overflowed`` is set
        /// (a client of the control socket that reads too slowly is dropped with a notice,
        /// rather than silently missing events or holding the host's memory).
        case end
    }

    private struct State {
        var buffer = CircularBuffer<HostEvent>()
        var waiter: UnsafeContinuation<HostEvent?, Never>?
        var finished = false
        var dropped: UInt64 = 0
        var overflowed = false
    }

    let limit: Int
    let overflow: Overflow
    /// Called once, outside the lock, when the subscription ends full (``Overflow/end``):
    /// the consumer may be blocked writing to a client that does not read, so whoever owns
    /// the connection is told here.
    private let onOverflow: (@Sendable () -> Void)?
    private let state = Mutex(State())

    init(limit: Int, overflow: Overflow = .dropOldest, onOverflow: (@Sendable () -> Void)? = nil) {
        self.limit = max(1, limit)
        self.overflow = overflow
        self.onOverflow = onOverflow
    }

    /// Whether the subscription ended because the buffer was full (``Overflow/end``).
    var overflowed: Bool { state.withLock { $0.overflowed } }

    /// Adds the events of `batch` that pass `filter` (nil: all; else the app's own), and
    /// wakes the consumer once if it waits.
    func yield(_ batch: [HostEvent], filter: BundleID?) {
        var overflowedNow = false
        let wake: (UnsafeContinuation<HostEvent?, Never>, HostEvent?)? = state.withLock { s in
            guard !s.finished else { return nil }
            for event in batch where filter == nil || event.bundleIdentifier == filter {
                if s.buffer.count >= limit {
                    if overflow == .end {
                        // Nothing more is kept for it: what waits is dropped and the memory
                        // given back now.
                        s.dropped += UInt64(s.buffer.count) + 1
                        s.buffer = CircularBuffer()
                        s.overflowed = true
                        s.finished = true
                        overflowedNow = true
                        break
                    }
                    s.buffer.removeFirst()
                    s.dropped += 1
                }
                s.buffer.append(event)
            }
            guard let waiter = s.waiter else { return nil }
            if s.overflowed {
                s.waiter = nil
                return (waiter, nil)
            }
            guard let first = s.buffer.popFirst() else { return nil }
            s.waiter = nil
            return (waiter, first)
        }
        if let (waiter, event) = wake { waiter.resume(returning: event) }
        if overflowedNow { onOverflow?() }
    }

    /// Ends the sequence once the waiting events are taken.
    func finish() {
        let waiter: UnsafeContinuation<HostEvent?, Never>? = state.withLock { s in
            s.finished = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// Events dropped because the consumer fell more than ``limit`` behind.
    var dropped: UInt64 { state.withLock { $0.dropped } }

    /// Events waiting now.
    var waiting: Int { state.withLock { $0.buffer.count } }

    func next() async -> HostEvent? {
        if Task.isCancelled {
            cancel()
            return nil
        }
        // The common case once woken: the rest of the step's events are here already.
        let ready: HostEvent?? = state.withLock { s in
            if let event = s.buffer.popFirst() { return .some(event) }
            return s.finished ? .some(nil) : nil
        }
        if let ready { return ready }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<HostEvent?, Never>) in
                let now: HostEvent?? = state.withLock { s in
                    if let event = s.buffer.popFirst() { return .some(event) }
                    if s.finished { return .some(nil) }
                    s.waiter = continuation
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            cancel()
        }
    }

    /// As AsyncStream does: a cancelled consumer ends the sequence.
    private func cancel() {
        let waiter: UnsafeContinuation<HostEvent?, Never>? = state.withLock { s in
            s.finished = true
            s.buffer.removeAll()
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }
}
