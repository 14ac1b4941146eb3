import CAppHostSys
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Why a `FileLock` could not be taken.
public enum FileLockError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Someone else holds the lock; `holderPID` is the pid written in the file, if any.
    case held(path: String, holderPID: Int32?)
    /// A system call on the lock file failed.
    case failed(path: String, operation: String, errno: Errno)

    /// "/state/apphost.lock is held by pid 1234 (is another daemon running?)".
    public var description: String {
        switch self {
        case .held(let path, let pid?):
            "\(path) is held by pid \(pid) (is another instance running on this state directory?)"
        case .held(let path, nil):
            "\(path) is held by another process (is another instance running on this state directory?)"
        case .failed(let path, let operation, let errno):
            "\(path): \(operation) failed: \(errno.explained)"
        }
    }
}

/// An exclusive, non-blocking `flock` on a file that also records the holder's
/// pid, so a second instance can be refused with a useful message. Released
/// by `release()` or when the object is deinitialised (and by the kernel when
/// the process dies).
public final class FileLock: Sendable {
    /// The lock file's path.
    public let path: String
    private let descriptor: Mutex<Int32> // -1 once released

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = Mutex(descriptor)
    }

    deinit { release() }

    /// Takes the lock on `path` (creating the file, mode 0600) and writes this
    /// process's pid into it. Throws `.held` with the holder's pid when taken.
    public static func acquire(path: String) throws(FileLockError) -> FileLock {
        let fd = retryingEINTR { Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { throw .failed(path: path, operation: "open", errno: Errno(rawValue: errno)) }
        _ = fchmod(fd, 0o600) // whatever the umask, and for a file made earlier with another mode
        let rc = aph_flock_exclusive_nonblocking(fd)
        guard rc == 0 else {
            let holder = rc == EWOULDBLOCK ? readPID(fd) : nil
            _ = Glibc.close(fd)
            if rc == EWOULDBLOCK { throw .held(path: path, holderPID: holder) }
            throw .failed(path: path, operation: "flock", errno: Errno(rawValue: rc))
        }
        let text = Array("\(getpid())\n".utf8)
        let written = text.withUnsafeBytes { buffer -> Int in
            guard ftruncate(fd, 0) == 0 else { return -1 }
            return retryingEINTR { pwrite(fd, buffer.baseAddress, buffer.count, 0) }
        }
        guard written == text.count else {
            let error = Errno(rawValue: written < 0 ? errno : EIO)
            _ = Glibc.close(fd)
            throw .failed(path: path, operation: "writing the pid", errno: error)
        }
        return FileLock(path: path, descriptor: fd)
    }

    /// Whether this object still holds the lock.
    public var isHeld: Bool { descriptor.withLock { $0 >= 0 } }

    /// Clears the pid and releases the lock; idempotent.
    public func release() {
        descriptor.withLock { fd in
            guard fd >= 0 else { return }
            _ = ftruncate(fd, 0)
            // Unlock explicitly: a child forked this instant shares the open
            // file description until its close_range, and close alone would
            // leave the lock held by that copy.
            _ = aph_flock_unlock(fd)
            _ = Glibc.close(fd)
            fd = -1
        }
    }

    private static func readPID(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = buffer.withUnsafeMutableBytes { raw in
            retryingEINTR { pread(fd, raw.baseAddress, raw.count, 0) }
        }
        guard n > 0 else { return nil }
        let text = String(decoding: buffer[0..<n], as: UTF8.self)
        return Int32(text.trimmingSpaces)
    }
}
