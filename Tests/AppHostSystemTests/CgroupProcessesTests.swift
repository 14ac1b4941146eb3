import AppHostSystem
import Foundation
import SystemPackage
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A cgroup of a test's own, under this process's (v1 `pids` hierarchy, else cgroup v2);
/// `remove()` it once its processes are gone.
struct TestCgroup {
    /// Its directory.
    let directory: String
    /// Its path as /proc/<pid>/cgroup shows it ("/aph-test-1234abcd").
    let relative: String
    var procs: String { directory + "/cgroup.procs" }

    /// Makes one, or nil where this process cannot (not root, no writable cgroupfs).
    static func make() -> TestCgroup? {
        guard let text = try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8) else { return nil }
        var pids: String?
        var unified: String?
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3 else { continue }
            if parts[1].split(separator: ",").contains("pids") { pids = parts[2] }
            if parts[0] == "0" && parts[1].isEmpty { unified = parts[2] }
        }
        let name = "aph-test-\(UUID().uuidString.prefix(8))"
        var candidates: [(base: String, path: String)] = []
        if let pids { candidates.append(("/sys/fs/cgroup/pids", pids)) }
        if let unified, FileManager.default.fileExists(atPath: "/sys/fs/cgroup/cgroup.controllers") {
            candidates.append(("/sys/fs/cgroup", unified))
        }
        for (base, path) in candidates {
            let parent = base + (path == "/" ? "" : path)
            let directory = parent + "/" + name
            guard mkdir(directory, 0o755) == 0 else { continue }
            guard FileManager.default.fileExists(atPath: directory + "/cgroup.procs") else {
                rmdir(directory)
                continue
            }
            return TestCgroup(directory: directory, relative: (path == "/" ? "" : path) + "/" + name)
        }
        return nil
    }

    func remove() { rmdir(directory) }
}

let testCgroupsPossible: Bool = {
    guard let cgroup = TestCgroup.make() else { return false }
    cgroup.remove()
    return true
}()

/// `SpawnSettings.cgroupProcsFiles` and `CgroupProcesses`: a child is in its cgroup
/// before `execve`, and a cgroup's processes are signalled and killed as one set.
@Suite("Cgroup processes", .tags(.process), .timeLimit(.minutes(3)))
struct CgroupProcessesTests {
    @Test(.enabled(if: testCgroupsPossible, "cannot make a cgroup here (not root, or a read-only cgroupfs)"))
    func aChildIsInItsCgroupFromItsFirstInstruction() async throws {
        let cgroup = try #require(TestCgroup.make())
        defer { cgroup.remove() }
        // cat reads /proc/self/cgroup as soon as it runs: a move after the spawn
        // returned would come too late for it.
        let result = try await runToExit(SpawnSettings(
            executablePath: "/bin/cat", arguments: ["cat", "/proc/self/cgroup"], cgroupProcsFiles: [cgroup.procs]))
        #expect(result.events == [.exited(.exited(code: 0))])
        #expect(result.stdout.split(separator: "\n").contains { $0.hasSuffix(":" + cgroup.relative) },
                "not in \(cgroup.relative) at exec:\n\(result.stdout)")
    }

    @Test func aCgroupItCannotJoinFailsTheSpawn() async throws {
        let file = "/nonexistent/aph-cgroup/cgroup.procs"
        let error = await #expect(throws: SpawnError.self) {
            _ = try await ProcessReaper.shared.spawn(SpawnSettings(executablePath: "/bin/true", cgroupProcsFiles: [file]))
        }
        #expect(error?.code == .joinCgroup)
        #expect(error?.errno == .noSuchFileOrDirectory)
        #expect(error?.path == file)
        #expect(error?.description == "joining the cgroup (writing the child's pid to \(file)) failed: No such file or directory (ENOENT)")
    }

    @Test(.enabled(if: testCgroupsPossible, "cannot make a cgroup here (not root, or a read-only cgroupfs)"))
    func everyProcessOfTheCgroupIsSignalledAndKilled() async throws {
        let cgroup = try #require(TestCgroup.make())
        defer { cgroup.remove() }
        let (read, write) = try makePipe()
        defer { try? read.close() }
        let spawned: (process: ChildProcess, events: AsyncStream<ChildEvent>)
        do {
            // Two grandchildren, forked before "ready" is written.
            spawned = try await ProcessReaper.shared.spawn(SpawnSettings(
                executablePath: "/bin/sh", arguments: ["sh", "-c", "sleep 1000 & sleep 1000 & echo ready; wait"],
                standardOutput: write, cgroupProcsFiles: [cgroup.procs]))
        } catch {
            try? write.close()
            throw error
        }
        try write.close()
        var output = ""
        var chunk = [UInt8](repeating: 0, count: 64)
        while !output.contains("ready\n") {
            let n = try chunk.withUnsafeMutableBytes { try read.read(into: $0) }
            if n == 0 { break }
            output += String(decoding: chunk[0..<n], as: UTF8.self)
        }
        let shell = spawned.process.pid
        let members = CgroupProcesses.list(cgroup.procs)
        #expect(members.count == 3 && members.contains(shell), "\(members)")

        let others = CgroupProcesses.signal(SIGSTOP, in: cgroup.procs, except: [shell])
        #expect(Set(others) == Set(members).subtracting([shell]))
        #expect(Set(CgroupProcesses.signal(SIGCONT, in: cgroup.procs, except: [shell])) == Set(others))

        #expect(CgroupProcesses.killAll(procsFile: cgroup.procs).isEmpty, "every process is gone")
        #expect(CgroupProcesses.list(cgroup.procs).isEmpty)
        let events = await collect(spawned.events)
        #expect(events.last == .exited(.signaled(signal: SIGKILL, coreDumped: false)))
        for pid in others {
            let state = (try? ProcStat.read(pid: pid))?.state
            #expect(state == nil || state == "Z", "grandchild \(pid) is gone (state \(state.map(String.init) ?? "none"))")
        }
    }
}
