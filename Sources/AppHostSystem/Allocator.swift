import CAppHostSys

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
    /// memory per app that way; with the threshold fixed, 26 KiB (BENCHMARKS.md, issue
    /// 17). Setting it also ends the dynamic adjustment. Process-wide; calling it again
    /// is harmless. Returns whether glibc took the setting.
    @discardableResult
    public static func holdLargeBlocksApart() -> Bool {
        aph_malloc_mmap_threshold(mmapThreshold) == 1
    }
}
