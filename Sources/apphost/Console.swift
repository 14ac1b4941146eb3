import AppHostProtocol
import Foundation
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// `apphost launch --console` (simctl's `--console` / `--console-pty`): the app's output as
/// it writes it, until it exits. An app's stdout and stderr go to one file,
/// `logs/<bundle-id>.log` in the state directory (opened by the host, appended to): this
/// follows that file from where it ended before the launch, woken by inotify when it
/// grows, and stops when the host's event stream says that process has exited. Nothing
/// polls: one `poll(2)` waits on both descriptors.
struct ConsoleFollower {
    let logPath: String
    /// Where the app's output starts: the file's size before the launch.
    private(set) var offset: UInt64
    private let inotify: Int32
    private let events: FileDescriptor
    private var reader = ResponseReader()
    /// Exit events seen so far, by pid (they may come before the launch's answer).
    private var exits: [Int32: String] = [:]

    /// Watches the logs folder and opens the app's event stream; call before the launch.
    init(stateDirectory: String, bundleIdentifier: BundleID, client: ControlClient) throws {
        let logs = stateDirectory + "/logs"
        logPath = logs + "/\(bundleIdentifier.rawValue).log"
        var info = stat()
        offset = stat(logPath, &info) == 0 ? UInt64(info.st_size) : 0
        // The daemon first: without one, the usual "no AppHost daemon" answer (exit 69).
        let events = try client.open(.events(follow: true, bundleIdentifier: bundleIdentifier))
        inotify = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard inotify >= 0 else {
            try? events.close()
            throw CLIError(description: "inotify_init1: \(Errno(rawValue: errno))")
        }
        // The folder, not the file: the host creates the file at the first launch.
        guard inotify_add_watch(inotify, logs, UInt32(IN_MODIFY | IN_CREATE)) >= 0 else {
            let error = Errno(rawValue: errno)
            close(inotify)
            try? events.close()
            throw CLIError(description: "cannot watch \(logs): \(error)")
        }
        self.events = events
    }

    /// Copies the app's output to standard output until process `pid` has exited; returns
    /// how it ended (the event's cause), or nil if the host stopped first.
    mutating func follow(pid: Int32) throws -> String? {
        defer {
            close(inotify)
            try? events.close()
        }
        while true {
            if let cause = exits[pid] {
                copyNewOutput()
                return cause
            }
            if reader.ended {
                copyNewOutput()
                return nil
            }
            var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: events.rawValue, events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 2, -1)
            if n < 0 {
                if errno == EINTR { continue }
                throw CLIError(description: "poll: \(Errno(rawValue: errno))")
            }
            if fds[0].revents != 0 {
                drainInotify()
                copyNewOutput()
            }
            if fds[1].revents != 0 {
                for response in try reader.read(from: events) {
                    note(response)
                }
            }
        }
    }

    private mutating func note(_ response: ControlResponse) {
        guard case .event(let e) = response, let pid = e.pid else { return }
        if e.kind == .exited || e.to == .notRunning {
            exits[pid] = exits[pid] ?? e.cause
        }
    }

    private func drainInotify() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while buffer.withUnsafeMutableBytes({ read(inotify, $0.baseAddress, $0.count) }) > 0 {}
    }

    /// Writes what the app added to its log since `offset`.
    private mutating func copyNewOutput() {
        let fd = open(logPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var info = stat()
        // A log that shrank was replaced: its output starts over.
        if fstat(fd, &info) == 0, UInt64(info.st_size) < offset { offset = 0 }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            offset += UInt64(n)
            FileHandle.standardOutput.write(Data(buffer[0..<n]))
        }
    }
}
