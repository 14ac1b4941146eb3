import AppHostSystem
import Foundation
import SystemPackage
import TestSupport
import Testing

@Suite("ProcLocks", .tags(.process), .timeLimit(.minutes(3)))
struct ProcLocksTests {
    // MARK: Parsing

    @Test func parsesPOSIXFlockAndOFDLines() {
        let text = """
            1: POSIX  ADVISORY  WRITE 1234 fd:01:5678 0 EOF
            2: FLOCK  ADVISORY  READ  3456 08:02:42 0 EOF
            3: OFDLCK ADVISORY  READ  -1 103:0a:18446744073709551615 100 199
            4: POSIX  ADVISORY  READ  77 00:2e:9 1073741824 1073742335

            """
        #expect(ProcLocks.parse(text) == [
            .init(id: 1, kind: .posix, exclusive: true, pid: 1234,
                  device: "fd:01", deviceMajor: 0xfd, deviceMinor: 1, inode: 5678, start: 0, end: nil),
            .init(id: 2, kind: .flock, exclusive: false, pid: 3456,
                  device: "08:02", deviceMajor: 8, deviceMinor: 2, inode: 42, start: 0, end: nil),
            .init(id: 3, kind: .ofd, exclusive: false, pid: -1,
                  device: "103:0a", deviceMajor: 0x103, deviceMinor: 10, inode: UInt64.max, start: 100, end: 199),
            .init(id: 4, kind: .posix, exclusive: false, pid: 77,
                  device: "00:2e", deviceMajor: 0, deviceMinor: 0x2e, inode: 9,
                  start: 1_073_741_824, end: 1_073_742_335),
        ])
    }

    @Test func skipsWaitersOtherKindsAndMalformedLines() {
        let text = """
            1: POSIX  ADVISORY  WRITE 1234 fd:01:5678 0 EOF
            1: -> POSIX  ADVISORY  WRITE 999 fd:01:5678 0 EOF
            1:  -> FLOCK  ADVISORY  WRITE 998 fd:01:5678 0 EOF
            2: LEASE  ACTIVE    READ  55 fd:01:7 0 EOF
            3: DELEG  ACTIVE    READ  56 fd:01:8 0 EOF
            4: ACCESS MANDATORY WRITE 57 fd:01:9 0 EOF
            5: FLOCK  ADVISORY  UNLCK 58 fd:01:10 0 EOF
            6: FLOCK  ADVISORY  WRITE 59 <none>:0 0 EOF
            7: POSIX  ADVISORY  WRITE
            garbage line
            8 POSIX  ADVISORY  WRITE 60 fd:01:11 0 EOF
            9: POSIX  ADVISORY  WRITE x61 fd:01:12 0 EOF
            10: POSIX  ADVISORY  WRITE 62 zz:01:13 0 EOF
            11: POSIX  ADVISORY  WRITE 63 fd:01 0 EOF
            12: POSIX  ADVISORY  WRITE 64 fd:01:15 0 END
            13: FLOCK  ADVISORY  WRITE 4321 08:02:99 0 EOF
            """
        let parsed = ProcLocks.parse(text)
        #expect(parsed.map(\.id) == [1, 13])
        #expect(parsed.map(\.pid) == [1234, 4321])
        #expect(ProcLocks.parse("") == [])
    }

    // MARK: Real locks

    @Test func aChildsFlockIsFoundWithItsPath() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/flocked"
        try await withLockingChild(SpawnSettings(
            executablePath: "/usr/bin/flock",
            arguments: ["flock", path, "/bin/sh", "-c", "echo ready; read line"],
            environment: ["PATH": "/usr/bin:/bin"],
            seccomp: .none)) { child in
            let locks = try ProcLocks.held(by: child.pid)
            #expect(locks == [HeldFileLock(
                kind: .flock, exclusive: true, device: try deviceString(path), inode: try inode(path), path: path)])
        }
    }

    @Test func aChildsPOSIXAndOFDLocksAreFoundWithTheirPaths() async throws {
        let dir = try TemporaryDirectory()
        let posixPath = dir.path + "/posix"
        let ofdPath = dir.path + "/ofd"
        // 37 is F_OFD_SETLK; struct flock is {short type, short whence, off_t start, off_t len, pid_t pid}.
        let script = """
            import fcntl, struct, sys
            a = open(sys.argv[1], 'w')
            fcntl.lockf(a, fcntl.LOCK_EX | fcntl.LOCK_NB)
            b = open(sys.argv[2], 'r+')
            fcntl.fcntl(b, 37, struct.pack('hhqqi', fcntl.F_RDLCK, 0, 0, 0, 0))
            print('ready', flush=True)
            sys.stdin.read()
            """
        _ = FileManager.default.createFile(atPath: ofdPath, contents: Data())
        try await withLockingChild(SpawnSettings(
            executablePath: "/usr/bin/python3",
            arguments: ["python3", "-c", script, posixPath, ofdPath],
            seccomp: .none)) { child in
            let locks = try ProcLocks.held(by: child.pid)
            #expect(locks.count == 2, "\(locks)")
            #expect(locks.contains(HeldFileLock(
                kind: .posix, exclusive: true,
                device: try deviceString(posixPath), inode: try inode(posixPath), path: posixPath)), "\(locks)")
            #expect(locks.contains(HeldFileLock(
                kind: .ofd, exclusive: false,
                device: try deviceString(ofdPath), inode: try inode(ofdPath), path: ofdPath)), "\(locks)")
        }
    }

    @Test func aProcessHoldingNoLocksHasNone() async throws {
        try await withLockingChild(SpawnSettings(
            executablePath: "/bin/sh",
            arguments: ["sh", "-c", "echo ready; read line"],
            seccomp: .none)) { child in
            let locks = try ProcLocks.held(by: child.pid)
            #expect(locks == [])
        }
    }

    @Test func thisProcesssFlockAndOFDLockAreFound() throws {
        let dir = try TemporaryDirectory()
        let flockPath = dir.path + "/mine.lock"
        let lock = try FileLock.acquire(path: flockPath)
        defer { lock.release() }

        let ofdPath = dir.path + "/mine.ofd"
        let fd = try FileDescriptor.open(
            ofdPath, .readWrite, options: [.create, .closeOnExec], permissions: [.ownerReadWrite])
        defer { try? fd.close() }
        var request = Glibc.flock()
        request.l_type = Int16(F_WRLCK)
        request.l_whence = Int16(SEEK_SET)
        #expect(fcntl(fd.rawValue, 37 /* F_OFD_SETLK */, &request) == 0, "errno \(errno)")

        let locks = try ProcLocks.held(by: getpid())
        #expect(locks.contains(HeldFileLock(
            kind: .flock, exclusive: true,
            device: try deviceString(flockPath), inode: try inode(flockPath), path: flockPath)), "\(locks)")
        #expect(locks.contains(HeldFileLock(
            kind: .ofd, exclusive: true,
            device: try deviceString(ofdPath), inode: try inode(ofdPath), path: ofdPath)), "\(locks)")

        lock.release()
        let after = try ProcLocks.held(by: getpid())
        #expect(!after.contains { $0.path == flockPath }, "\(after)")
    }

    @Test func aMissingProcessIsReportedAsGone() {
        do {
            _ = try ProcLocks.held(by: 5_000_000) // above the largest pid_max (2^22)
            Issue.record("read the locks of a nonexistent pid")
        } catch {
            #expect(error.processIsGone, "\(error)")
        }
    }
}

// MARK: Helpers

private struct StatFailed: Error { var path: String; var errno: Int32 }

private func statOf(_ path: String) throws -> stat {
    var info = stat()
    guard stat(path, &info) == 0 else { throw StatFailed(path: path, errno: errno) }
    return info
}

private func inode(_ path: String) throws -> UInt64 { UInt64(try statOf(path).st_ino) }

/// "fe:00", as /proc/locks prints a device: st_dev decoded with glibc's
/// encoding. (That the code under test decodes it the same way as the kernel
/// prints it is shown by the paths it resolves.)
private func deviceString(_ path: String) throws -> String {
    let dev = UInt64(try statOf(path).st_dev)
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfff)
    let minor = (dev & 0xff) | ((dev >> 12) & ~0xff)
    return String(format: "%02llx:%02llx", major, minor)
}

/// Spawns a child whose stdin and stdout are pipes, waits (by reading, not
/// sleeping) for its "ready" line, runs `body`, then kills the child through
/// its pidfd, closes its stdin and reaps it. The children below block reading
/// stdin, so a grandchild (flock(1) forks its command, which inherits the lock)
/// sees EOF and exits too.
func withLockingChild(
    _ settings: SpawnSettings,
    _ body: (ChildProcess) throws -> Void
) async throws {
    let (stdoutRead, stdoutWrite) = try makePipe()
    defer { try? stdoutRead.close() }
    let stdinRead: FileDescriptor, stdinWrite: FileDescriptor
    do {
        (stdinRead, stdinWrite) = try makePipe()
    } catch {
        try? stdoutWrite.close()
        throw error
    }
    var stdinOpen = true
    defer { if stdinOpen { try? stdinWrite.close() } }
    var settings = settings
    settings.standardInput = stdinRead
    settings.standardOutput = stdoutWrite
    let spawned: (process: ChildProcess, events: AsyncStream<ChildEvent>)
    do {
        spawned = try await ProcessReaper.shared.spawn(settings)
    } catch {
        try? stdinRead.close()
        try? stdoutWrite.close()
        throw error
    }
    try? stdinRead.close()
    try? stdoutWrite.close()
    let child = spawned.process
    var failure: (any Error)?
    do {
        let line = try readLine(stdoutRead)
        #expect(line == "ready", "child said \"\(line)\"")
        if line == "ready" { try body(child) }
    } catch {
        failure = error
    }
    try? child.signal(SIGKILL)
    try? stdinWrite.close()
    stdinOpen = false
    let events = await collect(spawned.events)
    #expect(events.last == .exited(.signaled(signal: SIGKILL, coreDumped: false)), "\(events)")
    if let failure { throw failure }
}

/// Reads one line (without the newline), or what came before EOF.
private func readLine(_ fd: FileDescriptor) throws -> String {
    var bytes: [UInt8] = []
    var byte: UInt8 = 0
    while true {
        let n = try withUnsafeMutableBytes(of: &byte) { try fd.read(into: $0) }
        if n == 0 || byte == UInt8(ascii: "\n") { break }
        bytes.append(byte)
    }
    return String(decoding: bytes, as: UTF8.self)
}
