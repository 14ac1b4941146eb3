import CAppHostSys
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The C allocator's settings for a long-lived host process.
public enum Allocator {
    /// Allocations at least this large get a mapping of their own, unmapped on free.
    public static let mmapThreshold: Int32 = 128 * 1024

    /// Fixes glibc's mmap threshold at ``mmapThreshold``.
    ///
    /// By default glibc raises the threshold to the size of each mmapped block it frees
    /// (up to 32 MiB): after the first snapshot render frees its 11.3 MiB pixel buffer,
    /// the next renders' buffers come from the heap arenas instead, and once freed they
    /// stay there (not at the top of the heap, so never trimmed). An idle host with 30
    /// suspended apps, each with a picture of its own, measured 1.6 MiB of anonymous
    /// memory per app that way; with the threshold fixed, 26 KiB (docs/benchmarks/2026-11-26-issue-17.md, issue
    /// 17). Setting it also ends the dynamic adjustment. Process-wide; calling it again
    /// is harmless. Returns whether glibc took the setting.
    @discardableResult
    public static func holdLargeBlocksApart() -> Bool {
        aph_malloc_mmap_threshold(mmapThreshold) == 1
    }

    /// Gives the allocator's free memory back to the kernel (`malloc_trim(0)`: every
    /// arena, not only the main heap's top). What a burst of connections took stays in
    /// glibc's per-thread arenas otherwise, free but resident: 19,000 idle push
    /// connections left the host 26 MB larger after they closed. Takes a few ms on a large
    /// heap: call it off hot paths, once a burst is over (``BurstTrim``).
    @discardableResult
    public static func giveBack() -> Bool {
        aph_malloc_trim() == 1
    }
}

/// Gives memory back once a burst is over: counts what is open, and when the count
/// falls to zero after having reached `burst` or more since the last trim, calls
/// ``Allocator/giveBack()`` once, on a thread of its own.
public final class BurstTrim: Sendable {
    private let state = Mutex((open: 0, peak: 0))
    private let burst: Int
    private let trim: @Sendable () -> Void

    /// `burst`: how many open at once make a burst worth trimming after; `trim`: what
    /// gives the memory back (``Allocator/giveBack()``), run on a thread of its own.
    public init(burst: Int = 64, trim: @escaping @Sendable () -> Void = { Allocator.giveBack() }) {
        self.burst = burst
        self.trim = trim
    }

    /// One more is open.
    public func opened() {
        state.withLock { s in
            s.open += 1
            s.peak = max(s.peak, s.open)
        }
    }

    /// One closed; trims if it was the last of a burst.
    public func closed() {
        let trims = state.withLock { s -> Bool in
            s.open -= 1
            guard s.open == 0, s.peak >= burst else { return false }
            s.peak = 0
            return true
        }
        if trims {
            let thread = Thread { [self] in self.trim() }
            thread.name = "aph-trim"
            thread.start()
        }
    }
}

/// The host process's own resource limits.
public enum HostLimits {
    /// Raises the soft limit of open files to the hard one, and returns it.
    ///
    /// Each app costs the host descriptors (its socket, its pidfd, its stamp page while
    /// being mapped, its log while spawning): Debian's soft default of 1,024 would end a
    /// host near a thousand apps with EMFILE. The hard limit (systemd's default is
    /// 524,288) is the administrator's; the soft one is 1,024 only for programs that
    /// use select(2), which the host does not (systemd.exec(5), LimitNOFILE=).
    @discardableResult
    public static func raiseOpenFiles() -> UInt64 {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { return UInt64(raised.rlim_cur) }
        }
        return UInt64(limit.rlim_cur)
    }
}
