import CAppHostStamp
import CAppHostSys
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// One app process's run-loop stamp page, host side: a sealed memfd the child gets as
/// descriptor 4 (`SpawnSettings.stampDescriptor`) and a read-only shared mapping the
/// host reads at its hang-check deadline (issue 18). The app writes the page, so
/// nothing read from it is trusted: ``read()`` returns two numbers to be bounded by
/// the caller. The seals (no shrink, no grow) mean the app cannot make the host's
/// mapping fault. Unmapped when the last reference goes.
public final class RunLoopStampPage: @unchecked Sendable {
    // @unchecked: the mapping is read-only here and only read with atomic loads; the
    // descriptor is closed once, by whoever spawns (see ``closeDescriptor()``).
    private let map: UnsafeMutableRawPointer
    /// The memfd to give the child; nil once closed.
    public private(set) var descriptor: FileDescriptor?

    /// Makes a page of zeroes (turn 0: the app has not stamped yet).
    public init() throws(Errno) {
        var fd: Int32 = -1
        var mapped: UnsafeMutableRawPointer?
        let rc = aph_stamp_page_create(&fd, &mapped)
        guard rc == 0, let mapped else { throw Errno(rawValue: rc == 0 ? EINVAL : rc) }
        map = mapped
        descriptor = FileDescriptor(rawValue: fd)
    }

    /// Closes the descriptor (after the spawn: the child has its copy, the host keeps
    /// its mapping). Idempotent.
    public func closeDescriptor() {
        try? descriptor?.close()
        descriptor = nil
    }

    /// What the page says now.
    public func read() -> RunLoopStampReading {
        var turn: UInt64 = 0, busy: UInt64 = 0
        var consistent: Int32 = 0
        aph_stamp_read(map, &turn, &busy, &consistent)
        return RunLoopStampReading(turn: turn, busySince: busy, consistent: consistent != 0)
    }

    /// CLOCK_MONOTONIC in nanoseconds, the clock the app stamps with.
    public static func monotonicNow() -> UInt64 { aph_stamp_now() }

    deinit {
        closeDescriptor()
        munmap(map, Int(APH_STAMP_PAGE_SIZE))
    }
}

/// The two words of a stamp page as read (untrusted: written by the app).
public struct RunLoopStampReading: Sendable, Equatable {
    /// Turns of the main run loop begun so far (0: the app never stamped).
    public var turn: UInt64
    /// CLOCK_MONOTONIC nanoseconds at which the current turn began; 0 while waiting.
    public var busySince: UInt64
    /// False when a turn began while the page was read (the app is making progress).
    public var consistent: Bool

    public init(turn: UInt64, busySince: UInt64, consistent: Bool = true) {
        self.turn = turn
        self.busySince = busySince
        self.consistent = consistent
    }
}
