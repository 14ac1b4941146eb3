// Shared by every libFuzzer harness in Fuzz/Targets (built by scripts/fuzz.sh, not by
// SwiftPM). Each harness is one module: this file, its target file and, for the
// manifest targets, ManifestFuzzing.swift.
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The fuzzer's input as `Data` (copied: the harness must not keep libFuzzer's buffer).
func fuzzInput(_ bytes: UnsafePointer<UInt8>, _ size: Int) -> Data {
    Data(bytes: bytes, count: size)
}

/// Stops the run as a crash when a property the code promises does not hold, saying
/// which. libFuzzer then writes the input to the crash directory.
func invariant(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
               file: StaticString = #fileID, line: UInt = #line) {
    guard !condition() else { return }
    printError("apphost-fuzz: invariant failed at \(file):\(line): \(message())")
    abort()
}

/// Seed making, run by scripts/fuzz.sh before fuzzing: with `APPHOST_FUZZ_MAKE_SEEDS=DIR`
/// in the environment, the harness writes seeds into DIR (from the files named on its
/// command line, or from values of its own) and exits instead of fuzzing. Returns the
/// directory and the input files, or nil when fuzzing.
func seedRequest() -> (directory: String, inputs: [String])? {
    guard let dir = ProcessInfo.processInfo.environment["APPHOST_FUZZ_MAKE_SEEDS"], !dir.isEmpty else { return nil }
    let inputs = CommandLine.arguments.dropFirst().filter { !$0.hasPrefix("-") }
    return (dir, Array(inputs))
}

/// Writes one seed file as `name` in `directory` (callers make names unique).
func writeSeed(_ data: Data, named name: String, in directory: String) {
    let url = URL(fileURLWithPath: directory).appendingPathComponent(name)
    do {
        try data.write(to: url)
    } catch {
        printError("apphost-fuzz: cannot write seed \(url.path): \(error)")
        exit(1)
    }
}

/// One line on standard error.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}
