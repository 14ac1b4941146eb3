import AppHostSystem
import Foundation
import SystemPackage
import Testing

/// Covers in an app's own mount namespace: how a host whose apps share its uid closes a
/// locked device's protected files (decision 0050).
@Suite("Namespaces: covering a protected file")
struct NamespaceCoverTests {
    @Test func mountInfoGivesTheCoversMountPointsWithTheKernelsEscapesUndone() {
        let text = """
            22 1 0:21 / / ro,relatime shared:1 - ext4 /dev/vda1 rw
            41 22 0:40 / /tmp/s ro,nosuid,nodev,noexec - tmpfs apphost rw,mode=711
            45 41 0:44 /protected /tmp/s/containers/com.a/Documents/secret.txt ro,nosuid,nodev,noexec - tmpfs apphost-protected rw,size=4k
            46 41 0:45 /protected /tmp/s/containers/com.a/My\\040Files/a\\134b.txt ro,nosuid - tmpfs apphost-protected rw
            47 41 0:46 / /tmp/x ro master:3 - tmpfs apphost-protected-not rw
            48 41 0:47 / /tmp/y ro - tmpfs other rw

            """
        #expect(MountInfo.mountPoints(in: text, source: AppNamespaces.coverSource) == [
            "/tmp/s/containers/com.a/Documents/secret.txt",
            "/tmp/s/containers/com.a/My Files/a\\b.txt",
        ])
        #expect(MountInfo.mountPoints(in: "garbage\n- - -\n", source: AppNamespaces.coverSource).isEmpty)
    }

    /// A child in namespaces of its own (as a user's host gives its apps) reads a file of
    /// its container; covered, the path denies it while the host still reads the file;
    /// uncovered, it reads it again. The covers are what its mountinfo lists.
    @Test func aCoverClosesAPathToTheAppAloneAndItsRemovalOpensIt() async throws {
        let dir = try TemporaryDirectory("cover")
        let container = dir.path + "/containers/com.example.a"
        try FileManager.default.createDirectory(atPath: container + "/Documents", withIntermediateDirectories: true)
        let secret = container + "/Documents/secret.txt"
        try "secret\n".write(toFile: secret, atomically: false, encoding: .utf8)
        let namespaces = AppNamespaces(hidden: dir.path, writable: [container])
        if let refused = namespaces.probe() {
            withKnownIssue("this machine refuses user namespaces: \(refused)") { Issue.record("\(refused)") }
            return
        }
        let input = try FileDescriptor.pipe(), output = try FileDescriptor.pipe()
        // One `cat` per line read from the host: the reads happen when the test asks.
        let script = "while read line; do cat \"$1\" 2>&1 || echo denied; echo done; done"
        let (child, events) = try await ProcessReaper.shared.spawn(SpawnSettings(
            executablePath: "/bin/sh", arguments: ["sh", "-c", script, "sh", secret],
            standardInput: input.readEnd, standardOutput: output.writeEnd, standardError: output.writeEnd,
            seccomp: .none, dropsCapabilities: true, namespaces: namespaces))
        try input.readEnd.close()
        try output.writeEnd.close()
        defer {
            try? child.signal(SIGKILL)
            try? input.writeEnd.close()
            try? output.readEnd.close()
        }
        var reader = LineReader(fd: output.readEnd)
        func readNow() throws -> [String] {
            _ = try input.writeEnd.writeAll(Array("go\n".utf8))
            return try reader.lines(until: "done")
        }

        #expect(try readNow() == ["secret"])
        #expect(AppNamespaces.coveredFiles(pid: child.pid) == [])

        let covered = try AppNamespaces.cover(in: child, files: [secret, container + "/Documents/gone.txt"], uncover: [])
        #expect(covered.covered.map(\.path) == [secret, container + "/Documents/gone.txt"])
        #expect(covered.covered.map(\.errno) == [nil, .noSuchFileOrDirectory], "a file gone since is skipped")
        let denied = try readNow()
        #expect(denied.last == "denied" && denied.contains { $0.contains("Permission denied") }, "\(denied)")
        #expect(AppNamespaces.coveredFiles(pid: child.pid) == [secret])
        // The host's own view, and the file, are untouched.
        #expect(try String(contentsOfFile: secret, encoding: .utf8) == "secret\n")
        #expect(AppNamespaces.coveredFiles(pid: getpid()) == [])

        let opened = try AppNamespaces.cover(in: child, files: [], uncover: [secret])
        #expect(opened.uncovered.map(\.errno) == [nil])
        #expect(try readNow() == ["secret"])
        #expect(AppNamespaces.coveredFiles(pid: child.pid) == [])

        try child.signal(SIGKILL)
        _ = await collect(events)
        // Gone: nothing to join.
        #expect(throws: Errno.noSuchProcess) { try AppNamespaces.cover(in: child, files: [secret], uncover: []) }
    }

    /// The spawn covers before the program runs: its first read is denied.
    @Test func aSpawnWithCoversDeniesTheFileFromTheFirstInstruction() async throws {
        let dir = try TemporaryDirectory("coverspawn")
        let container = dir.path + "/containers/com.example.b"
        try FileManager.default.createDirectory(atPath: container, withIntermediateDirectories: true)
        let secret = container + "/secret.txt", plain = container + "/plain.txt"
        try "secret\n".write(toFile: secret, atomically: false, encoding: .utf8)
        try "plain\n".write(toFile: plain, atomically: false, encoding: .utf8)
        var namespaces = AppNamespaces(hidden: dir.path, writable: [container])
        if let refused = namespaces.probe() {
            withKnownIssue("this machine refuses user namespaces: \(refused)") { Issue.record("\(refused)") }
            return
        }
        namespaces.covered = [secret, container + "/removed-before-the-launch.txt"]
        let result = try await runToExit(SpawnSettings(
            executablePath: "/bin/sh", arguments: ["sh", "-c", "cat \"$1\" 2>/dev/null || echo denied; cat \"$2\"", "sh", secret, plain],
            seccomp: .none, dropsCapabilities: true, namespaces: namespaces))
        #expect(result.stdout == "denied\nplain\n")
    }

    /// Bounds: at most `maximumCovered` covers per call and per spawn.
    @Test func coversAreBounded() async throws {
        let (child, events) = try await ProcessReaper.shared.spawn(
            SpawnSettings(executablePath: "/bin/sleep", arguments: ["sleep", "1000"], seccomp: .none))
        defer { try? child.signal(SIGKILL) }
        let many = (0...AppNamespaces.maximumCovered).map { "/tmp/f\($0)" }
        #expect(throws: Errno.argListTooLong) { try AppNamespaces.cover(in: child, files: many, uncover: []) }
        #expect(throws: Errno.argListTooLong) { try AppNamespaces.cover(in: child, files: [], uncover: many) }
        try child.signal(SIGKILL)
        _ = await collect(events)

        let dir = try TemporaryDirectory("coverbound")
        try FileManager.default.createDirectory(atPath: dir.path + "/c", withIntermediateDirectories: true)
        var namespaces = AppNamespaces(hidden: dir.path, writable: [dir.path + "/c"])
        namespaces.covered = many
        let error = await #expect(throws: SpawnError.self) {
            _ = try await ProcessReaper.shared.spawn(SpawnSettings(executablePath: "/bin/true", seccomp: .none, namespaces: namespaces))
        }
        #expect(error?.errno == .argListTooLong)
    }
}

/// Lines from a pipe, read as they come (the child answers each request before the next).
private struct LineReader {
    let fd: FileDescriptor
    var buffered: [UInt8] = []

    /// The lines up to (not including) `marker`; throws at end of file.
    mutating func lines(until marker: String) throws -> [String] {
        var lines: [String] = []
        while true {
            if let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffered[..<newline], as: UTF8.self)
                buffered.removeSubrange(...newline)
                if line == marker { return lines }
                lines.append(line)
                continue
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = try chunk.withUnsafeMutableBytes { try fd.read(into: $0) }
            guard n > 0 else { throw Errno.ioError }
            buffered += chunk[..<n]
        }
    }
}
