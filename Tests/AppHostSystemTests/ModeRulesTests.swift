import AppHostSystem
import Foundation
import SystemPackage
import Testing

/// The kernel rules behind background modes: socket families denied by
/// seccomp, device paths denied by Landlock (`FileRules`). Each test spawns
/// `aph-sandbox-check` with check options and reads its one-line verdicts.
@Suite("ModeRules", .timeLimit(.minutes(1)))
struct ModeRulesTests {
    /// AF_BLUETOOTH.
    static let bluetooth: Int32 = 31

    // MARK: - Socket families (seccomp)

    @Test func bluetoothSocketsAreDeniedOnlyWhenTheFamilyIs() async throws {
        let arguments = [
            "--socket", "bluetooth", "--socketpair", "bluetooth", "--socket-high", "bluetooth",
            "--socket", "unix", "--socketpair", "unix", "--socket-high", "unix",
        ]
        let open = try await check(arguments, seccomp: .baseline)
        // Not EPERM: the filter let it through. Without a bluetooth stack the
        // kernel answers EAFNOSUPPORT; with one the socket would be made.
        for label in ["socket bluetooth", "socketpair bluetooth", "socket-high bluetooth"] {
            #expect(open[label] != nil && open[label] != "EPERM", "\(label): \(open[label] ?? "missing")")
        }
        #expect(open["socket unix"] == "ok")
        #expect(open["socketpair unix"] == "ok")
        #expect(open["socket-high unix"] == "ok", "the kernel reads the family as an int")

        var policy = SeccompPolicy.baseline
        policy.deniedSocketFamilies = [Self.bluetooth]
        let denied = try await check(arguments, seccomp: policy)
        #expect(denied["socket bluetooth"] == "EPERM")
        #expect(denied["socketpair bluetooth"] == "EPERM")
        // Garbage in the upper half of the register does not get around it.
        #expect(denied["socket-high bluetooth"] == "EPERM")
        #expect(denied["socket unix"] == "ok")
        #expect(denied["socketpair unix"] == "ok")
        #expect(denied["socket-high unix"] == "ok")
    }

    @Test func deniedFamiliesAlsoDenyIOURing() async throws {
        // io_uring's IORING_OP_SOCKET would make the socket without the syscall.
        var policy = SeccompPolicy.baseline
        policy.deniedSocketFamilies = [Self.bluetooth]
        let denied = try await syscallProbes(seccomp: policy)
        #expect(denied["io_uring_setup"] == "1 EPERM")
        let allowed = try await syscallProbes(seccomp: .baseline)
        #expect(allowed["io_uring_setup"] == "14 EFAULT", "NULL params, past the filter")
    }

    @Test func negativeFamilyIsRefused() throws {
        #expect {
            _ = try SeccompProgram.compile(SeccompPolicy(deniedSocketFamilies: [-1]))
        } throws: { error in
            (error as? SpawnError)?.code == .seccompCompile
        }
        let plain = try #require(try SeccompProgram.compile(.baseline))
        let more = try #require(try SeccompProgram.compile(SeccompPolicy(deniedSocketFamilies: [Self.bluetooth])))
        #expect(more.instructionCount > plain.instructionCount)
    }

    // MARK: - File rules (Landlock)

    @Test(.enabled(if: Landlock.abiVersion != nil,
                   "Landlock is not available in this kernel (landlock_create_ruleset: ENOSYS or EOPNOTSUPP)"))
    func deniedPathsCannotBeOpened() async throws {
        let devices = try TemporaryDirectory()
        let container = try TemporaryDirectory()
        for name in ["ttyUSB0", "ttyUSB1", "other"] { try touch(devices.path + "/" + name) }
        try FileManager.default.createDirectory(atPath: devices.path + "/snd", withIntermediateDirectories: false)
        try touch(devices.path + "/snd/controlC0")
        try touch(container.path + "/data")
        let rules = FileRules(deniedPaths: [devices.path + "/ttyUSB*", devices.path + "/snd"])
        let arguments = [
            "--open", devices.path + "/ttyUSB0", "--open", devices.path + "/ttyUSB1",
            "--open", devices.path + "/snd/controlC0", "--open", devices.path + "/snd",
            "--open", devices.path + "/other", "--open", devices.path,
            "--open", container.path + "/data", "--create", container.path + "/new",
            "--open", "/dev/null", "--create", devices.path + "/made-by-child",
        ]

        let free = try await check(arguments, fileRules: nil, workingDirectory: container.path)
        #expect(free.values.allSatisfy { $0 == "ok" }, "\(free)")
        try FileManager.default.removeItem(atPath: container.path + "/new")
        try FileManager.default.removeItem(atPath: devices.path + "/made-by-child")

        let ruled = try await check(arguments, fileRules: rules, workingDirectory: container.path)
        #expect(ruled["open \(devices.path)/ttyUSB0"] == "EACCES")
        #expect(ruled["open \(devices.path)/ttyUSB1"] == "EACCES")
        #expect(ruled["open \(devices.path)/snd/controlC0"] == "EACCES", "beneath a denied directory")
        // Listing is a right `/` grants to every directory beneath it, and
        // Landlock cannot take a right back lower down: a denied directory
        // can still be listed (names only; nothing in it can be opened).
        #expect(ruled["open \(devices.path)/snd"] == "ok")
        #expect(ruled["open \(devices.path)/other"] == "ok")
        #expect(ruled["open \(devices.path)"] == "ok", "the directory itself can be listed")
        #expect(ruled["open \(container.path)/data"] == "ok")
        #expect(ruled["create \(container.path)/new"] == "ok")
        #expect(ruled["open /dev/null"] == "ok")
        // Nothing can be created directly in a directory on the way to a
        // denied path: it only has what it inherits from `/` (listing).
        #expect(ruled["create \(devices.path)/made-by-child"] == "EACCES")
        #expect(ruled.count == arguments.count / 2)
    }

    @Test(.enabled(if: Landlock.abiVersion != nil,
                   "Landlock is not available in this kernel (landlock_create_ruleset: ENOSYS or EOPNOTSUPP)"))
    func entriesThatAppearLater() async throws {
        let devices = try TemporaryDirectory()
        try touch(devices.path + "/other")
        let rules = FileRules(deniedPaths: [devices.path + "/ttyUSB*"])
        let late = devices.path + "/late", plugged = devices.path + "/ttyUSB0"

        // A child already running when the entries appear: neither has a
        // rule in its ruleset, so it can open neither (a hot-plugged device
        // and any other new name in that directory alike).
        let (stdinRead, stdinWrite) = try makePipe()
        let (stdoutRead, stdoutWrite) = try makePipe()
        defer { try? stdoutRead.close() }
        let settings = SpawnSettings(
            executablePath: try #require(sandboxCheckPath()),
            arguments: ["aph-sandbox-check", "--wait-stdin", "--open", late, "--open", plugged,
                        "--open", devices.path + "/other"],
            standardInput: stdinRead, standardOutput: stdoutWrite, fileRules: rules)
        let spawned: (process: ChildProcess, events: AsyncStream<ChildEvent>)
        do {
            spawned = try await ProcessReaper.shared.spawn(settings)
        } catch {
            for fd in [stdinRead, stdinWrite, stdoutWrite] { try? fd.close() }
            throw error
        }
        try stdinRead.close()
        try stdoutWrite.close()
        // The spawn returned after execve: the ruleset is in force.
        try touch(late)
        try touch(plugged)
        try stdinWrite.close()
        let events = await collect(spawned.events)
        let running = verdicts(try readAll(stdoutRead))
        #expect(events == [.exited(.exited(code: 0))])
        #expect(running["wait-stdin"] == "ok")
        #expect(running["open \(late)"] == "EACCES")
        #expect(running["open \(plugged)"] == "EACCES")
        #expect(running["open \(devices.path)/other"] == "ok")

        // A child spawned afterwards gets a rebuilt ruleset (the directory's
        // mtime changed): the new name is allowed, the device still denied.
        let next = try await check(["--open", late, "--open", plugged], fileRules: rules)
        #expect(next["open \(late)"] == "ok")
        #expect(next["open \(plugged)"] == "EACCES")
    }

    @Test(.enabled(if: Landlock.abiVersion != nil,
                   "Landlock is not available in this kernel (landlock_create_ruleset: ENOSYS or EOPNOTSUPP)"))
    func hostDevicePatternsLeaveTheRestAlone() async throws {
        let container = try TemporaryDirectory()
        try touch(container.path + "/existing")
        // None of these exist here; the ruleset still builds (and would deny
        // them if they were plugged in).
        let rules = FileRules(deniedPaths: ["/dev/snd", "/dev/dsp*", "/dev/ttyUSB*", "/dev/ttyACM*"])
        let verdict = try await check(
            ["--open", "/dev/null", "--open", "/dev/urandom", "--open", "/dev/zero",
             "--open", "/proc/self/status", "--open", "/etc/passwd",
             "--open", "existing", "--create", "created", "--socket", "unix"],
            fileRules: rules, workingDirectory: container.path)
        #expect(verdict.count == 8)
        #expect(verdict.values.allSatisfy { $0 == "ok" }, "\(verdict)")
        #expect(FileManager.default.fileExists(atPath: container.path + "/created"))
    }

    @Test(.enabled(if: Landlock.abiVersion != nil,
                   "Landlock is not available in this kernel (landlock_create_ruleset: ENOSYS or EOPNOTSUPP)"))
    func rulesetDescriptorDoesNotReachTheChild() async throws {
        let dir = try TemporaryDirectory()
        let result = try await runToExit(SpawnSettings(
            executablePath: try #require(sandboxCheckPath()),
            arguments: ["aph-sandbox-check"],
            workingDirectory: dir.path,
            fileRules: FileRules(deniedPaths: ["/dev/ttyUSB*"])))
        #expect(result.events == [.exited(.exited(code: 0))], "stdout:\n\(result.stdout)")
        #expect(result.stdout.contains("\nfds 0 1 2\n"), "stdout:\n\(result.stdout)")
    }

    @Test func badPatternsAreInvalidSettings() async throws {
        for pattern in ["dev/ttyUSB*", "/dev/*/x", "/dev/../etc", "/"] {
            await #expect {
                _ = try await ProcessReaper.shared.spawn(SpawnSettings(
                    executablePath: "/bin/true", fileRules: FileRules(deniedPaths: [pattern])))
            } throws: { error in
                // Refused with or without Landlock in the kernel.
                let spawnError = error as? SpawnError
                return spawnError?.code == .invalidSettings
                    && spawnError?.description.contains("\"\(pattern)\"") == true
            }
        }
    }

    @Test func emptyRulesDenyNothing() async throws {
        let verdict = try await check(["--open", "/dev/null"], fileRules: FileRules(deniedPaths: []))
        #expect(verdict["open /dev/null"] == "ok")
    }

    // MARK: - Helpers

    /// Runs `aph-sandbox-check` with check options; returns label → verdict
    /// ("open /dev/null" → "ok") and expects a clean exit.
    func check(_ arguments: [String], seccomp: SeccompPolicy = .baseline, fileRules: FileRules? = nil,
               workingDirectory: String? = nil,
               sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String: String] {
        let result = try await runToExit(SpawnSettings(
            executablePath: try #require(sandboxCheckPath(), sourceLocation: sourceLocation),
            arguments: ["aph-sandbox-check"] + arguments,
            workingDirectory: workingDirectory,
            seccomp: seccomp,
            fileRules: fileRules))
        #expect(result.events == [.exited(.exited(code: 0))], "stdout:\n\(result.stdout)",
                sourceLocation: sourceLocation)
        #expect(result.stdout.hasSuffix("done\n"), "stdout:\n\(result.stdout)", sourceLocation: sourceLocation)
        return verdicts(result.stdout)
    }

    /// The `syscall <name> <errno> <NAME>` lines of a full report.
    func syscallProbes(seccomp: SeccompPolicy) async throws -> [String: String] {
        let result = try await runToExit(SpawnSettings(
            executablePath: try #require(sandboxCheckPath()),
            arguments: ["aph-sandbox-check"],
            seccomp: seccomp))
        #expect(result.events == [.exited(.exited(code: 0))], "stdout:\n\(result.stdout)")
        var probes: [String: String] = [:]
        for line in result.stdout.split(separator: "\n") where line.hasPrefix("syscall ") {
            let parts = line.split(separator: " ", maxSplits: 2)
            if parts.count == 3 { probes[String(parts[1])] = String(parts[2]) }
        }
        return probes
    }

    /// "label: verdict" lines by label.
    func verdicts(_ stdout: String) -> [String: String] {
        var verdicts: [String: String] = [:]
        for line in stdout.split(separator: "\n") {
            guard let colon = line.range(of: ": ", options: .backwards) else { continue }
            verdicts[String(line[..<colon.lowerBound])] = String(line[colon.upperBound...])
        }
        return verdicts
    }

    func touch(_ path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data("x".utf8)) else {
            throw Errno(rawValue: errno)
        }
    }
}
