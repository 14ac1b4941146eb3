import AppHostSystem
import Foundation
import SystemPackage
import Testing

/// A private temporary directory, removed on deinit.
final class TemporaryDirectory {
    let path: String

    init(_ label: String = #function) throws {
        let base = FileManager.default.temporaryDirectory.resolvingSymlinksInPath().path
        let name = "aph-system-\(label.filter { $0.isLetter || $0.isNumber })-\(UUID().uuidString.prefix(8))"
        path = base + "/" + name
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// The products directory holding the test bundle (and the other products).
func productsDirectory() -> String {
    let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    var dir = exe.deletingLastPathComponent()
    // On some setups the test binary sits inside a .xctest directory.
    if dir.lastPathComponent.hasSuffix(".xctest") { dir = dir.deletingLastPathComponent() }
    return dir.path
}

/// The path of the built `aph-sandbox-check`, or nil (with a test issue).
func sandboxCheckPath(sourceLocation: SourceLocation = #_sourceLocation) -> String? {
    let path = productsDirectory() + "/aph-sandbox-check"
    guard FileManager.default.isExecutableFile(atPath: path) else {
        Issue.record("""
            aph-sandbox-check not found at \(path): run `swift build --product aph-sandbox-check` \
            (with the same --scratch-path) before `swift test`.
            """, sourceLocation: sourceLocation)
        return nil
    }
    return path
}

/// Reads until EOF (call after the writer exited and every write end is closed).
func readAll(_ fd: FileDescriptor) throws -> String {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = try chunk.withUnsafeMutableBytes { try fd.read(into: $0) }
        if n == 0 { break }
        bytes += chunk[0..<n]
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// Every event until the stream finishes (after `.exited`).
func collect(_ events: AsyncStream<ChildEvent>) async -> [ChildEvent] {
    var all: [ChildEvent] = []
    for await event in events { all.append(event) }
    return all
}

/// Spawns, waits for the exit, and returns the events and the captured stdout.
func runToExit(_ settings: SpawnSettings) async throws -> (events: [ChildEvent], stdout: String) {
    let (read, write) = try makePipe()
    defer { try? read.close() }
    var settings = settings
    settings.standardOutput = write
    let spawned: (process: ChildProcess, events: AsyncStream<ChildEvent>)
    do {
        spawned = try await ProcessReaper.shared.spawn(settings)
    } catch {
        try? write.close()
        throw error
    }
    try write.close()
    let events = await collect(spawned.events)
    return (events, try readAll(read))
}

/// Runs `aph-sandbox-check` with check options under `seccomp`; returns label → verdict
/// ("open /dev/null" → "ok", "fork -" → "EPERM") and expects a clean exit.
func sandboxCheck(_ arguments: [String], seccomp: SeccompPolicy = .baseline, appLockdown: Bool = false,
                  sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String: String] {
    let result = try await runToExit(SpawnSettings(
        executablePath: try #require(sandboxCheckPath(), sourceLocation: sourceLocation),
        arguments: ["aph-sandbox-check"] + arguments,
        seccomp: seccomp, appLockdown: appLockdown))
    #expect(result.events == [.exited(.exited(code: 0))], "stdout:\n\(result.stdout)",
            sourceLocation: sourceLocation)
    #expect(result.stdout.hasSuffix("done\n"), "stdout:\n\(result.stdout)", sourceLocation: sourceLocation)
    return sandboxVerdicts(result.stdout)
}

/// "label: verdict" lines of `aph-sandbox-check`'s output (split at the last ": ").
func sandboxVerdicts(_ stdout: String) -> [String: String] {
    var verdicts: [String: String] = [:]
    for line in stdout.split(separator: "\n") {
        guard let colon = line.range(of: ": ", options: .backwards) else { continue }
        verdicts[String(line[..<colon.lowerBound])] = String(line[colon.upperBound...])
    }
    return verdicts
}

/// The `syscall <name> <errno> <NAME>` lines of a full `aph-sandbox-check` report, which
/// also starts a thread (so "thread ok" must be in it whatever the policy).
func sandboxSyscallProbes(seccomp: SeccompPolicy) async throws -> [String: String] {
    let result = try await runToExit(SpawnSettings(
        executablePath: try #require(sandboxCheckPath()),
        arguments: ["aph-sandbox-check"],
        seccomp: seccomp))
    #expect(result.events == [.exited(.exited(code: 0))], "stdout:\n\(result.stdout)")
    #expect(result.stdout.contains("thread ok\n"), "stdout:\n\(result.stdout)")
    var probes: [String: String] = [:]
    for line in result.stdout.split(separator: "\n") where line.hasPrefix("syscall ") {
        let parts = line.split(separator: " ", maxSplits: 2)
        if parts.count == 3 { probes[String(parts[1])] = String(parts[2]) }
    }
    return probes
}
