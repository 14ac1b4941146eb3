import AppHostSystem
import Dispatch
import Foundation
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// How a program run by ``Tool/run(_:_:environment:stdin:)`` ended, with everything it wrote.
public struct ToolResult: Sendable {
    public var status: ExitStatus
    public var stdout: Data
    public var stderr: Data

    /// 0 for `exit 0`; the exit code, or 128 + the signal, as a shell says.
    public var exitCode: Int32 {
        switch status {
        case .exited(let code): code
        case .signaled(let signal, _): 128 + signal
        }
    }
}

/// Runs programs the tests need (openssl, curl, sha256sum) to completion.
///
/// They are started by the project's own spawn (`ProcessReaper`: pidfd-tracked, every
/// descriptor above stdio closed in the child), never by Foundation's `Process`: on
/// Linux, Swift 6.3's `Process.run()` copies a whole `d_name[256]` out of each
/// `/proc/self/fd` entry and now and then reads past the end of glibc's buffer and
/// crashes (swift-corelibs-foundation#5472), which took whole test runs down with it.
public enum Tool {
    /// A spawn or a pipe failed.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// ``run(_:_:environment:stdin:)`` from async code, waited for on a thread of its own:
    /// a test waiting on a tool must not hold one of Swift's cooperative threads (two on a
    /// 2-CPU machine, shared by every test of the run).
    public static func runOnThread(_ path: String, _ arguments: [String], environment: [String: String]? = nil) async throws -> ToolResult {
        try await withCheckedThrowingContinuation { c in
            Thread.detachNewThread { c.resume(with: Result { try run(path, arguments, environment: environment) }) }
        }
    }

    /// Runs `path arguments...` and waits for it. `stdin` (on a thread of its own) writes
    /// the program's standard input, closed after it returns; without it stdin is
    /// /dev/null. Stdout and stderr are read to their end. `environment` defaults to
    /// this process's.
    public static func run(_ path: String, _ arguments: [String], environment: [String: String]? = nil,
                           stdin: ((FileHandle) throws -> Void)? = nil) throws -> ToolResult {
        let out = try makePipe(), err = try makePipe()
        let input = stdin == nil ? nil : try makePipe()
        var childEnds = [out.write, err.write]
        if let input { childEnds.append(input.read) }
        var parentEnds = [out.read, err.read]
        if let input { parentEnds.append(input.write) }

        let settings = SpawnSettings(
            executablePath: path, arguments: [path] + arguments,
            environment: environment ?? ProcessInfo.processInfo.environment,
            standardInput: input?.read, standardOutput: out.write, standardError: err.write,
            seccomp: .none, dropsCapabilities: false)
        let spawned = Spawned()
        ProcessReaper.shared.spawn(settings, onEvent: { event in
            if case .exited(let status) = event { spawned.exited(status) }
        }, completion: { spawned.started($0) })
        let started = spawned.waitForStart()
        for fd in childEnds { try? fd.close() }
        guard case .success = started else {
            for fd in parentEnds { try? fd.close() }
            if case .failure(let error) = started { throw Failure(description: "cannot run \(path): \(error)") }
            throw Failure(description: "cannot run \(path)")
        }

        // Stdout and stderr are read on threads of their own while this thread writes stdin.
        let group = DispatchGroup()
        let stdout = Box(), stderr = Box()
        background(group) { stdout.data = readToEnd(out.read) }
        background(group) { stderr.data = readToEnd(err.read) }
        var inputError: (any Error)?
        if let stdin, let input {
            let handle = FileHandle(fileDescriptor: input.write.rawValue, closeOnDealloc: false)
            do { try stdin(handle) } catch { inputError = error }
            try? input.write.close()
        }
        group.wait()
        try? out.read.close()
        try? err.read.close()
        let status = spawned.waitForExit()
        if let inputError { throw Failure(description: "writing the standard input of \(path): \(inputError)") }
        return ToolResult(status: status, stdout: stdout.data, stderr: stderr.data)
    }

    private static func readToEnd(_ fd: FileDescriptor) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd.rawValue, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return data }
            data.append(contentsOf: buffer[0..<n])
        }
    }

    /// Runs `body` on a thread of its own (blocking I/O stays off Swift's cooperative pool).
    private static func background(_ group: DispatchGroup, _ body: @escaping @Sendable () -> Void) {
        group.enter()
        Thread {
            body()
            group.leave()
        }.start()
    }

    /// What the helper threads leave (read after `DispatchGroup.wait()`).
    private final class Box: @unchecked Sendable {
        var data = Data()
    }

    /// The spawn's completion and the child's exit, waited for from a synchronous caller.
    private final class Spawned: @unchecked Sendable {
        private let lock = NSLock()
        private let startSignal = DispatchSemaphore(value: 0)
        private let exitSignal = DispatchSemaphore(value: 0)
        private var start: Result<ChildProcess, SpawnError>?
        private var status: ExitStatus?

        func started(_ result: Result<ChildProcess, SpawnError>) {
            lock.withLock { start = result }
            startSignal.signal()
        }

        func exited(_ status: ExitStatus) {
            lock.withLock { self.status = status }
            exitSignal.signal()
        }

        func waitForStart() -> Result<ChildProcess, SpawnError> {
            startSignal.wait()
            return lock.withLock { start! }
        }

        func waitForExit() -> ExitStatus {
            exitSignal.wait()
            return lock.withLock { status! }
        }
    }
}
