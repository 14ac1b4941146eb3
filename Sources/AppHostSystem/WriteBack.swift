import CAppHostSys
import SystemPackage

/// Page-cache control for large writes (the transfer daemon's downloads): start and
/// wait for writeback of a range, drop it from the cache, and direct I/O.
public enum WriteBack {
    /// Starts writeback of `length` bytes at `offset` of `fd` without waiting
    /// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`).
    @discardableResult
    public static func start(_ fd: Int32, offset: Int64, length: Int64) -> Errno? {
        let rc = aph_writeback_start(fd, offset, length)
        return rc == 0 ? nil : Errno(rawValue: rc)
    }

    /// Waits until the range is written back (starting what is not yet), then, with
    /// `drop`, drops it from the page cache (`POSIX_FADV_DONTNEED`).
    @discardableResult
    public static func wait(_ fd: Int32, offset: Int64, length: Int64, drop: Bool) -> Errno? {
        let rc = aph_writeback_wait(fd, offset, length, drop ? 1 : 0)
        return rc == 0 ? nil : Errno(rawValue: rc)
    }

    /// `O_DIRECT`, for an `open` of one's own (Swift's Glibc module does not export it).
    public static let directFlag: Int32 = aph_o_direct_flag()
}
