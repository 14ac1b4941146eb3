import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What the SDK does to the process itself; tests replace it to observe instead.
struct ProcessEffects: Sendable {
    /// Ends the process (`exit(3)` in an app).
    var exit: @Sendable (Int32) -> Void
    /// Writes one diagnostic line (stderr in an app).
    var log: @Sendable (String) -> Void
    /// Ends the process with `SIGABRT` (`abort(3)` in an app): an uncaught exception.
    var abort: @Sendable () -> Never = { Foundation.abort() }

    /// The real process: `exit` and stderr lines prefixed with the program name.
    static let live = ProcessEffects(
        exit: { code in Foundation.exit(code) },
        log: { line in writeStandardError("\(programName): \(line)") }
    )
}

/// The executable's name, for diagnostics.
let programName: String = {
    let name = CommandLine.arguments.first.map { ($0 as NSString).lastPathComponent } ?? ""
    return name.isEmpty ? "AppKitLess" : name
}()

/// Writes `line` and a newline to stderr with one unbuffered write.
func writeStandardError(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { write(2, $0.baseAddress! + offset, $0.count - offset) }
        if n > 0 {
            offset += n
        } else if n < 0 && errno == EINTR {
            continue
        } else {
            return
        }
    }
}
