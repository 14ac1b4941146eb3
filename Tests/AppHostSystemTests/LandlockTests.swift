import AppHostSystem
import Foundation
import SystemPackage
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

let landlockABI = Landlock.abiVersion ?? 0

/// `LandlockPolicy` seen from inside a real child: `aph-sandbox-check` runs its
/// checks under a policy and prints one verdict a line. Every child is reaped
/// before its test ends; every directory is the test's own.
@Suite("Landlock", .tags(.process), .serialized, .timeLimit(.minutes(3)),
       .enabled(if: Landlock.abiVersion != nil, "Landlock is not available in this kernel (landlock_create_ruleset: ENOSYS or EOPNOTSUPP)"))
struct LandlockTests {
    /// What any child needs to start: programs and libraries, the runtime this
    /// process loaded, the products folder, the loader's cache, /dev/null, /proc.
    static var runGrants: [PathGrant] {
        ["/usr", "/bin", "/lib", "/lib64"].map { PathGrant($0, .readExecute) }
            + LoadedLibraries.directories().map { PathGrant($0, .readExecute) }
            + [PathGrant(productsDirectory(), .readExecute), PathGrant("/etc/ld.so.cache", .readOnly),
               PathGrant("/dev/null", .device), PathGrant("/proc", .readOnly)]
    }

    @Test func onlyGrantedPathsCanBeReached() async throws {
        let container = try TemporaryDirectory("container")
        let readable = try TemporaryDirectory("readable")
        let other = try TemporaryDirectory("other")
        for dir in [container, readable, other] { try touch(dir.path + "/file") }
        try FileManager.default.createDirectory(atPath: container.path + "/a", withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: container.path + "/b", withIntermediateDirectories: false)
        try touch(container.path + "/a/moved")
        // A program the child "downloaded": present in its container, executable by mode bits.
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: container.path + "/true")
        let policy = LandlockPolicy(grants: Self.runGrants + [
            PathGrant(container.path, .readWrite), PathGrant(readable.path, .readOnly), PathGrant("/etc/passwd", .readOnly),
        ])
        let arguments = [
            "--read", container.path + "/file", "--create", container.path + "/new",
            "--rename", container.path + "/a/moved->" + container.path + "/b/moved",
            "--read", readable.path + "/file", "--create", readable.path + "/new", "--open", readable.path,
            "--read", other.path + "/file", "--create", other.path + "/new", "--open", other.path,
            "--read", "/etc/passwd", "--read", "/etc/shadow", "--read", "/etc/hostname", "--open", "/",
            "--exec", "/bin/true", "--exec", container.path + "/true",
        ]
        let free = try await check(arguments, landlock: nil, workingDirectory: container.path)
        #expect(free.values.allSatisfy { $0 == "ok" }, "\(free)")
        for name in ["/new"] {
            try FileManager.default.removeItem(atPath: container.path + name)
            try FileManager.default.removeItem(atPath: readable.path + name)
            try FileManager.default.removeItem(atPath: other.path + name)
        }
        try FileManager.default.moveItem(atPath: container.path + "/b/moved", toPath: container.path + "/a/moved")

        let ruled = try await check(arguments, landlock: policy, workingDirectory: container.path)
        #expect(ruled.count == arguments.count / 2, "\(ruled)")
        #expect(ruled["read \(container.path)/file"] == "ok")
        #expect(ruled["create \(container.path)/new"] == "ok")
        if landlockABI >= 2 {
            #expect(ruled["rename \(container.path)/a/moved->\(container.path)/b/moved"] == "ok", "between folders of one grant")
        }
        #expect(ruled["read \(readable.path)/file"] == "ok")
        #expect(ruled["create \(readable.path)/new"] == "EACCES", "read-only")
        #expect(ruled["open \(readable.path)"] == "ok", "a read-only folder can be listed")
        #expect(ruled["read \(other.path)/file"] == "EACCES")
        #expect(ruled["create \(other.path)/new"] == "EACCES")
        #expect(ruled["open \(other.path)"] == "EACCES")
        #expect(ruled["read /etc/passwd"] == "ok")
        #expect(ruled["read /etc/shadow"] == "EACCES")
        #expect(ruled["read /etc/hostname"] == "EACCES", "only the named /etc files")
        #expect(ruled["open /"] == "EACCES", "/ itself cannot be listed")
        #expect(ruled["exec /bin/true"] == "ok")
        #expect(ruled["exec \(container.path)/true"] == "EACCES", "nothing written into a read-write grant runs")
        #expect(!FileManager.default.fileExists(atPath: other.path + "/new"))
        #expect(!FileManager.default.fileExists(atPath: readable.path + "/new"))
    }

    @Test func aGrantHoldingAnExcludedPathIsSplitAroundIt() async throws {
        // /top holds the "state directory": granting /top read-only must not reach it,
        // while a grant beneath it (an app's container) still applies.
        let top = try TemporaryDirectory("top")
        let fm = FileManager.default
        for dir in ["/lib", "/state/containers/app", "/state/containers/other"] {
            try fm.createDirectory(atPath: top.path + dir, withIntermediateDirectories: true)
        }
        for file in ["/lib/file", "/state/apphost.sqlite", "/state/containers/app/mine", "/state/containers/other/theirs", "/loose"] {
            try touch(top.path + file)
        }
        try fm.createSymbolicLink(atPath: top.path + "/link-to-state", withDestinationPath: top.path + "/state")
        let policy = LandlockPolicy(
            grants: Self.runGrants + [PathGrant(top.path, .readOnly), PathGrant(top.path + "/state/containers/app", .readWrite)],
            excluded: [top.path + "/state"])
        let verdict = try await check([
            "--read", top.path + "/lib/file", "--read", top.path + "/loose", "--open", top.path,
            "--read", top.path + "/state/apphost.sqlite", "--open", top.path + "/state",
            "--read", top.path + "/state/containers/other/theirs", "--read", top.path + "/link-to-state/apphost.sqlite",
            "--read", top.path + "/state/containers/app/mine", "--create", top.path + "/state/containers/app/new",
        ], landlock: policy)
        #expect(verdict["read \(top.path)/lib/file"] == "ok")
        #expect(verdict["read \(top.path)/loose"] == "ok")
        // A listing right on the split folder would reach the excluded folder's listing too.
        #expect(verdict["open \(top.path)"] == "EACCES", "the split folder itself cannot be listed")
        #expect(verdict["read \(top.path)/state/apphost.sqlite"] == "EACCES")
        #expect(verdict["open \(top.path)/state"] == "EACCES")
        #expect(verdict["read \(top.path)/state/containers/other/theirs"] == "EACCES")
        #expect(verdict["read \(top.path)/link-to-state/apphost.sqlite"] == "EACCES", "a link does not reach around the split")
        #expect(verdict["read \(top.path)/state/containers/app/mine"] == "ok")
        #expect(verdict["create \(top.path)/state/containers/app/new"] == "ok")
    }

    @Test func wildcardGrantsCoverTheEntriesPresentAtSpawn() async throws {
        let devices = try TemporaryDirectory("devices")
        for name in ["ttyUSB0", "ttyUSB1", "other"] { try touch(devices.path + "/" + name) }
        let policy = LandlockPolicy(grants: Self.runGrants + [PathGrant(devices.path + "/ttyUSB*", .device)])
        let plugged = devices.path + "/ttyUSB2"

        // A child already running when ttyUSB2 appears cannot open it.
        let (stdinRead, stdinWrite) = try makePipe()
        let (stdoutRead, stdoutWrite) = try makePipe()
        defer { try? stdoutRead.close() }
        let settings = SpawnSettings(
            executablePath: try #require(sandboxCheckPath()),
            arguments: ["aph-sandbox-check", "--wait-stdin", "--open", devices.path + "/ttyUSB0",
                        "--open", devices.path + "/ttyUSB1", "--open", devices.path + "/other", "--open", plugged],
            standardInput: stdinRead, standardOutput: stdoutWrite, landlock: policy)
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
        try touch(plugged)
        try stdinWrite.close()
        let events = await collect(spawned.events)
        let running = verdicts(try readAll(stdoutRead))
        #expect(events == [.exited(.exited(code: 0))])
        #expect(running["open \(devices.path)/ttyUSB0"] == "ok")
        #expect(running["open \(devices.path)/ttyUSB1"] == "ok")
        #expect(running["open \(devices.path)/other"] == "EACCES")
        #expect(running["open \(plugged)"] == "EACCES", "plugged in after the child started")

        // The next spawn builds its ruleset again and sees it.
        let next = try await check(["--open", plugged], landlock: policy)
        #expect(next["open \(plugged)"] == "ok")
    }

    @Test(.enabled(if: landlockABI >= 4, "TCP rules need Landlock ABI 4"))
    func tcpBindIsDeniedButListenStillPicksAPort() async throws {
        let arguments = ["--bind-tcp", "-", "--listen-tcp", "-"]
        let denied = try await check(arguments, landlock: LandlockPolicy(grants: Self.runGrants))
        #expect(denied["bind-tcp -"] == "EACCES")
        // Landlock has no hook for the implicit bind of listen(2): the host denies
        // listen with seccomp for that.
        #expect(denied["listen-tcp -"] == "ok")
        let allowed = try await check(arguments, landlock: LandlockPolicy(grants: Self.runGrants, deniesTCPBind: false))
        #expect(allowed["bind-tcp -"] == "ok")
    }

    @Test(.enabled(if: landlockABI >= 6, "signal scoping needs Landlock ABI 6"))
    func signalsStayInsideTheChildsDomain() async throws {
        let host = getpid()
        let policy = LandlockPolicy(grants: Self.runGrants)
        // A sibling confined the same way, waiting on its stdin.
        let (verdict, siblingPID, siblingEvents) = try await Sibling.with(landlock: policy) { sibling in
            try await check(["--kill", "\(host):0", "--kill", "\(sibling.pid):\(SIGKILL)", "--kill", "\(sibling.pid):0"],
                            landlock: policy)
        }
        #expect(verdict["kill \(host):0"] == "EPERM", "the host (this test process)")
        #expect(verdict["kill \(siblingPID):\(SIGKILL)"] == "EPERM", "another app")
        #expect(verdict["kill \(siblingPID):0"] == "EPERM")
        // The sibling lived through it and exited when told.
        #expect(siblingEvents == [.exited(.exited(code: 0))])

        // Without the scope, the same uid may signal: the EPERM above is Landlock's.
        let unscoped = try await check(["--kill", "\(host):0"], landlock: LandlockPolicy(grants: Self.runGrants, scopesSignals: false))
        #expect(unscoped["kill \(host):0"] == "ok")
    }

    @Test(.enabled(if: landlockABI >= 6, "abstract socket scoping needs Landlock ABI 6"))
    func abstractUnixSocketsOfOthersCannotBeReached() async throws {
        let name = "aph-test-\(UUID().uuidString.prefix(8))"
        let listener = try listenAbstract(name)
        defer { close(listener) }
        let scoped = try await check(["--connect-unix", "@" + name], landlock: LandlockPolicy(grants: Self.runGrants))
        #expect(scoped["connect-unix @\(name)"] == "EPERM")
        let open = try await check(["--connect-unix", "@" + name],
                                   landlock: LandlockPolicy(grants: Self.runGrants, scopesAbstractUnixSockets: false))
        #expect(open["connect-unix @\(name)"] == "ok")
    }

    @Test func ptraceChecksOfProcOutsideTheDomainFail() async throws {
        let host = getpid()
        // An unconfined sibling with the same uid and no capabilities: only
        // Landlock stands between the checker and its /proc details.
        let ((unconfined, confined), pid, events) = try await Sibling.with(landlock: nil) { sibling in
            let arguments = ["--read", "/proc/\(sibling.pid)/environ", "--read", "/proc/\(sibling.pid)/maps",
                             "--read", "/proc/\(sibling.pid)/fd/1", "--read", "/proc/\(sibling.pid)/cmdline",
                             "--read", "/proc/\(sibling.pid)/stat", "--read", "/proc/\(host)/environ",
                             "--read", "/proc/self/environ", "--read", "/proc/self/maps"]
            return (try await check(arguments, landlock: nil),
                    try await check(arguments, landlock: LandlockPolicy(grants: Self.runGrants)))
        }
        #expect(events == [.exited(.exited(code: 0))])

        #expect(unconfined["read /proc/\(pid)/environ"] == "ok", "same uid, no capabilities on either side")
        #expect(confined["read /proc/\(pid)/environ"] == "EACCES")
        #expect(confined["read /proc/\(pid)/maps"] == "EACCES")
        #expect(confined["read /proc/\(pid)/fd/1"] == "EACCES", "its descriptors")
        #expect(confined["read /proc/\(host)/environ"] == "EACCES")
        // Not ptrace-checked: a process's command line and state stay readable.
        #expect(confined["read /proc/\(pid)/cmdline"] == "ok")
        #expect(confined["read /proc/\(pid)/stat"] == "ok")
        #expect(confined["read /proc/self/environ"] == "ok")
        #expect(confined["read /proc/self/maps"] == "ok")
    }

    @Test(.enabled(if: landlockABI >= 4, "needs an ABI above the limit used"))
    func anABILimitLeavesOutWhatLaterABIsAdd() async throws {
        let other = try TemporaryDirectory("other")
        try touch(other.path + "/file")
        let policy = LandlockPolicy(grants: Self.runGrants, abiLimit: 3)
        let verdict = try await check(["--bind-tcp", "-", "--kill", "\(getpid()):0", "--read", other.path + "/file"],
                                      landlock: policy)
        #expect(verdict["bind-tcp -"] == "ok")
        #expect(verdict["kill \(getpid()):0"] == "ok")
        #expect(verdict["read \(other.path)/file"] == "EACCES", "files are still allow-listed")
    }

    @Test func badGrantsAreInvalidSettings() async throws {
        for path in ["dev/ttyUSB*", "/dev/*/x", "/dev/../etc"] {
            await #expect {
                _ = try await ProcessReaper.shared.spawn(SpawnSettings(
                    executablePath: "/bin/true", landlock: LandlockPolicy(grants: [PathGrant(path, .readOnly)])))
            } throws: { error in
                let spawnError = error as? SpawnError
                return spawnError?.code == .invalidSettings && spawnError?.description.contains("\"\(path)\"") == true
            }
        }
    }

    @Test func theRulesetDescriptorDoesNotReachTheChild() async throws {
        let result = try await runToExit(SpawnSettings(
            executablePath: try #require(sandboxCheckPath()), arguments: ["aph-sandbox-check"],
            landlock: LandlockPolicy(grants: Self.runGrants)))
        #expect(result.events == [.exited(.exited(code: 0))], "stdout:\n\(result.stdout)")
        #expect(result.stdout.contains("\nfds 0 1 2\n"), "stdout:\n\(result.stdout)")
    }

    /// The reaper keeps a policy's ruleset for later spawns only while every path
    /// names the inode it named: a container made again (a reinstall) and a path
    /// that did not exist at the first spawn are granted as they are now.
    @Test func aKeptRulesetFollowsPathsMadeAgainOrMadeLater() async throws {
        let root = try TemporaryDirectory("kept")
        let container = root.path + "/container"
        let later = root.path + "/later"
        try FileManager.default.createDirectory(atPath: container, withIntermediateDirectories: false)
        try touch(container + "/file")
        let policy = LandlockPolicy(grants: Self.runGrants + [
            PathGrant(container, .readWrite), PathGrant(later, .readOnly),
        ])
        let arguments = ["--read", container + "/file", "--read", later + "/file"]

        let first = try await check(arguments, landlock: policy)
        #expect(first["read \(container)/file"] == "ok")
        #expect(first["read \(later)/file"] == "ENOENT")

        // The same paths, new inodes: the container removed and made again, `later` made.
        try FileManager.default.removeItem(atPath: container)
        try FileManager.default.createDirectory(atPath: container, withIntermediateDirectories: false)
        try touch(container + "/file")
        try FileManager.default.createDirectory(atPath: later, withIntermediateDirectories: false)
        try touch(later + "/file")
        let second = try await check(arguments, landlock: policy)
        #expect(second["read \(container)/file"] == "ok", "the container made again is granted")
        #expect(second["read \(later)/file"] == "ok", "a grant made after the first spawn is granted")

        // And a path that goes away is no longer granted through a stale rule: a new
        // folder in its place (another inode) is reachable only because it is granted again.
        try FileManager.default.removeItem(atPath: later)
        let third = try await check(arguments, landlock: policy)
        #expect(third["read \(later)/file"] == "ENOENT")
        #expect(third["read \(container)/file"] == "ok")
    }

    // MARK: - Helpers

    /// Runs `aph-sandbox-check` with check options; returns label → verdict.
    func check(_ arguments: [String], landlock: LandlockPolicy?, workingDirectory: String? = nil,
               sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String: String] {
        let result = try await runToExit(SpawnSettings(
            executablePath: try #require(sandboxCheckPath(), sourceLocation: sourceLocation),
            arguments: ["aph-sandbox-check"] + arguments,
            workingDirectory: workingDirectory,
            landlock: landlock))
        #expect(result.events == [.exited(.exited(code: 0))], "stdout:\n\(result.stdout)", sourceLocation: sourceLocation)
        #expect(result.stdout.hasSuffix("done\n"), "stdout:\n\(result.stdout)", sourceLocation: sourceLocation)
        return verdicts(result.stdout)
    }

    /// A listening abstract Unix socket (`\0name`) of this process.
    func listenAbstract(_ name: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Errno(rawValue: errno) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = [0] + Array(name.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard rc == 0, listen(fd, 4) == 0 else {
            let e = errno
            close(fd)
            throw Errno(rawValue: e)
        }
        return fd
    }
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

/// An `aph-sandbox-check --wait-stdin` that runs until `finish()` closes its stdin.
struct Sibling {
    let process: ChildProcess
    let events: AsyncStream<ChildEvent>
    let stdin: FileDescriptor
    var pid: Int32 { process.pid }

    /// Runs `body` with a sibling, then lets the sibling exit (whether `body`
    /// threw or not) and returns what `body` returned, the sibling's pid and events.
    static func with<T>(landlock: LandlockPolicy?, _ body: (Sibling) async throws -> T)
        async throws -> (T, Int32, [ChildEvent])
    {
        let sibling = try await start(landlock: landlock)
        let result: Result<T, any Error>
        do {
            result = .success(try await body(sibling))
        } catch {
            result = .failure(error)
        }
        let events = await sibling.finish()
        return (try result.get(), sibling.pid, events)
    }

    static func start(landlock: LandlockPolicy?) async throws -> Sibling {
        let (read, write) = try makePipe()
        let settings = SpawnSettings(
            executablePath: try #require(sandboxCheckPath()),
            arguments: ["aph-sandbox-check", "--wait-stdin"], standardInput: read, landlock: landlock)
        do {
            let (process, events) = try await ProcessReaper.shared.spawn(settings)
            try? read.close()
            return Sibling(process: process, events: events, stdin: write)
        } catch {
            try? read.close()
            try? write.close()
            throw error
        }
    }

    /// Lets it exit and returns its events (it is reaped by then).
    func finish() async -> [ChildEvent] {
        try? stdin.close()
        return await collect(events)
    }
}
