import AppHostProtocol
import Foundation
import NIOCore
import Plugins

/// What the supervisor's current step defers to its end, and how deep it is.
///
/// A *step* is one input handled (``Supervisor/step(_:)``); inside it, a ``Lifecycle``
/// event may be fed (``Supervisor/feed(_:_:)``), and a feed's effects may feed again.
/// Four things wait for the right end:
///
/// - **mode effects** asked for while a feed runs (a plugin reacting to a state change)
///   run once the outermost feed is done, so that a plugin never sees the host mid-change;
/// - **transitions** are written to the database once per feed, in one transaction;
/// - **frames** for the apps are written once the input's handling ends, one write per
///   connection (an app woken by a frame in the middle of a step was often queued on the
///   host's CPU and took it from the rest of the step);
/// - **the real-clock timer** is re-armed once, when nothing is in progress (re-arming is
///   a syscall, and a step often moves the earliest deadline several times).
///
/// The supervisor says where it is and hands over what it made; this part says what is
/// due when, and is tested without a process (`StepScopeTests`).
struct StepScope {
    /// Inputs being handled (0 or 1).
    private(set) var inputDepth = 0
    /// Lifecycle feeds in progress (a feed's effects may feed again).
    private(set) var feedDepth = 0
    /// While a kernel report is fed on the real clock: the app and when the reaper got
    /// it (its transitions are timed then, not when the actor came to them).
    var observedTime: (app: BundleID, date: Date)?

    private var frames = StepFrames()
    private var transitions: [Store.TransitionRow] = []
    private var modeEffects: [ModeEffect] = []
    private var timerMoved = false

    /// Nothing in progress: neither an input nor a feed.
    var isIdle: Bool { inputDepth == 0 && feedDepth == 0 }
    /// An input is being handled.
    var inInput: Bool { inputDepth > 0 }
    /// A feed is in progress.
    var feeding: Bool { feedDepth > 0 }

    // MARK: inputs

    mutating func beginInput() { inputDepth += 1 }

    /// The frames kept during the input, in the order each connection got them, to be
    /// written now that its handling is over.
    mutating func takeFrames() -> [StepFrames.Pending] {
        frames.isEmpty ? [] : frames.take()
    }

    mutating func endInput() { inputDepth = max(0, inputDepth - 1) }

    /// Keeps `bytes` for `channel` until the input ends; false outside an input (the
    /// caller writes them now).
    mutating func keep(_ bytes: [UInt8], channel: any Channel, writer: SocketWriter?) -> Bool {
        guard inInput else { return false }
        frames.add(bytes, channel: channel, writer: writer)
        return true
    }

    // MARK: feeds

    mutating func beginFeed() { feedDepth += 1 }

    /// Ends a feed: the mode effects deferred until now when it was the outermost (to be
    /// performed in the order they were asked for), else none.
    mutating func endFeed() -> [ModeEffect] {
        feedDepth = max(0, feedDepth - 1)
        guard feedDepth == 0, !modeEffects.isEmpty else { return [] }
        defer { modeEffects.removeAll() }
        return modeEffects
    }

    /// The plugins' effects: kept for the end of the outermost feed while one runs
    /// (returns none), else returned to be performed now.
    mutating func modeEffects(_ effects: [ModeEffect]) -> [ModeEffect] {
        guard feeding else { return effects }
        modeEffects += effects
        return []
    }

    /// A transition, written with the others of its feed.
    mutating func record(_ transition: Store.TransitionRow) { transitions.append(transition) }

    /// The transitions recorded since the last call, to be written in one transaction.
    mutating func takeTransitions() -> [Store.TransitionRow] {
        defer { transitions.removeAll() }
        return transitions
    }

    // MARK: the real-clock timer

    /// The earliest deadline moved: whether to re-arm the timer now (nothing in
    /// progress). Otherwise it is re-armed when ``takeTimerMove()`` says so.
    mutating func timerMovedNow() -> Bool {
        guard isIdle else {
            timerMoved = true
            return false
        }
        return true
    }

    /// Whether the timer must be re-armed now: it moved during what just ended, and
    /// nothing is in progress any more. Says so once.
    mutating func takeTimerMove() -> Bool {
        guard timerMoved, isIdle else { return false }
        timerMoved = false
        return true
    }
}

/// Frames made during a step, by connection (the channel they were made for, so that a
/// frame never reaches a later process of the same app), in the order they were made.
struct StepFrames {
    struct Pending {
        let channel: any Channel
        let writer: SocketWriter?
        var bytes: [UInt8]
    }

    private var pending: [Pending] = []
    private var index: [ObjectIdentifier: Int] = [:]

    var isEmpty: Bool { pending.isEmpty }

    mutating func add(_ bytes: [UInt8], channel: any Channel, writer: SocketWriter?) {
        let key = ObjectIdentifier(channel)
        if let i = index[key] {
            pending[i].bytes += bytes
        } else {
            index[key] = pending.count
            pending.append(Pending(channel: channel, writer: writer, bytes: bytes))
        }
    }

    mutating func take() -> [Pending] {
        let taken = pending
        pending = []
        index = [:]
        return taken
    }
}
