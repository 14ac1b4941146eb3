import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a whole file of at most a given size: the property lists and `.xcconfig`
/// files of a project, which a user names and AppHost must not read without a bound.
///
/// The file is opened without blocking (a FIFO would wait for a writer), sized with
/// `fstat` on that descriptor (so the size checked is the size of what is read), and
/// read at most one byte past the limit, so a file growing meanwhile is refused too.
enum BoundedFile {
    /// Why a file was not read.
    enum Problem: Error, Equatable {
        /// Nothing at that path.
        case notFound
        /// A directory.
        case directory
        /// A FIFO, a device, a socket.
        case notRegularFile
        /// `open` or `read` failed; the system's reason.
        case unreadable(String)
        /// Larger than the limit: the size seen.
        case tooLarge(Int64)
    }

    /// The bytes of `path`, or why they were not read.
    static func read(path: String, limit: Int) -> Result<Data, Problem> {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return .failure(.notFound) }
        if isDirectory.boolValue { return .failure(.directory) }
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return .failure(.unreadable(String(cString: strerror(errno)))) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .failure(.unreadable(String(cString: strerror(errno)))) }
        guard (st.st_mode & mode_t(S_IFMT)) == mode_t(S_IFREG) else { return .failure(.notRegularFile) }
        guard Int64(st.st_size) <= Int64(limit) else { return .failure(.tooLarge(Int64(st.st_size))) }
        var data = Data(count: Int(st.st_size) + 1)
        var got = 0
        while got < data.count {
            let n = data.withUnsafeMutableBytes { raw in
                readBytes(fd, raw.baseAddress! + got, raw.count - got)
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return .failure(.unreadable(String(cString: strerror(errno)))) }
            if n == 0 { break }
            got += n
            if got > limit { return .failure(.tooLarge(Int64(got))) }
            if got == data.count { data.count += 4096 }
        }
        data.count = got
        return .success(data)
    }
}

/// read(2), out of reach of ``BoundedFile``'s own `read`.
private func readBytes(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
    read(fd, buffer, count)
}
