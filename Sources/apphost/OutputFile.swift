import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A file the user named on the command line for the CLI to write (`snapshot -o`,
/// `switcher --sheet`, `privacy-check --junit`), written carefully: nothing is ever
/// deleted first, a directory is refused, and the file appears whole or not at all
/// (written to a temporary file in the same folder, then renamed over the target).
/// Because the bytes are in memory before the target is touched, the target may be
/// the very file they were read from.
struct OutputFile {
    /// Why a path cannot be written, as plain text (`cannot write X: ...`).
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The path as given (for messages) and as an absolute path.
    let given: String
    let path: String
    /// A file name to suggest when the path is a directory (e.g. `com.example.bank.png`).
    let example: String

    init(_ given: String, example: String) {
        self.given = given
        self.path = absolute(given)
        self.example = example
    }

    /// Whether the path can be written as far as can be told without writing: not a
    /// directory, and its folder exists and is a directory. For `validate()`, so a bad
    /// path is refused before any work.
    func check() throws(Failure) {
        var info = stat()
        if stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            throw Failure(description: "cannot write \(given): it is a directory; name a file in it, e.g. \(suggestion)")
        }
        let folder = (path as NSString).deletingLastPathComponent
        guard stat(folder, &info) == 0 else {
            throw Failure(description: "cannot write \(given): its folder \(folder): \(Self.reason(errno))")
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw Failure(description: "cannot write \(given): \(folder) is not a directory")
        }
    }

    /// `example` inside the directory the user named.
    private var suggestion: String {
        (given.hasSuffix("/") ? given : given + "/") + example
    }

    /// Writes `bytes` to a temporary file beside the target, then renames it over the target.
    func write(_ bytes: [UInt8]) throws(Failure) {
        try check()
        let folder = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        let temporary = folder + "/.\(name).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw Failure(description: "cannot write \(given): creating a file in \(folder): \(Self.reason(errno))")
        }
        var failure: Int32?
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                offset += n
            }
        }
        if failure == nil, fsync(fd) != 0 { failure = errno }
        if close(fd) != 0, failure == nil { failure = errno }
        if let failure {
            unlink(temporary)
            throw Failure(description: "cannot write \(given): \(Self.reason(failure))")
        }
        guard rename(temporary, path) == 0 else {
            let e = errno
            unlink(temporary)
            if e == EISDIR || e == ENOTEMPTY || e == EEXIST {
                throw Failure(description: "cannot write \(given): it is a directory; name a file in it, e.g. \(suggestion)")
            }
            throw Failure(description: "cannot write \(given): \(Self.reason(e))")
        }
    }

    /// `write(_:)` for `Data`.
    func write(_ data: Data) throws(Failure) {
        try write([UInt8](data))
    }

    /// The whole of the file at `path`, with a plain-text reason when it cannot be read.
    static func read(_ path: String) throws(Failure) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(description: "cannot read \(path): \(reason(errno))") }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                bytes += chunk[0..<n]
            } else if n == 0 {
                return bytes
            } else if errno != EINTR {
                throw Failure(description: "cannot read \(path): \(reason(errno))")
            }
        }
    }

    /// strerror's text, e.g. "No such file or directory".
    static func reason(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}
