import AppHostProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs an AppHost app, like `UIApplicationMain`: connects to the host on the IPC
/// descriptor it was given, completes the handshake, then runs the main run loop,
/// calling `delegate` as the host moves the app through its states. Never returns;
/// the process exits after `willTerminate`, or when the host goes away.
///
/// Call it from `main.swift`:
/// ```swift
/// import AppKitLess
/// final class AppDelegate: ApplicationDelegate {}
/// ApplicationMain(delegate: AppDelegate())
/// ```
/// Started outside a host (no `APPHOST_IPC_FD`, or no socket there), it prints how
/// to start it and exits with status 64.
@MainActor
public func ApplicationMain(delegate: some ApplicationDelegate) -> Never {
    let environment = ProcessInfo.processInfo.environment
    guard let value = environment[IPCProtocol.descriptorEnvironmentKey],
          let descriptor = Int32(value), isStreamSocket(descriptor)
    else {
        writeStandardError("\(programName): this program is an AppHost app; start it with `apphost launch` or `apphost run`")
        exit(64)
    }
    // Keep the host's socket out of anything the app itself spawns.
    _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
    // Over the host's file-size limit a write fails with EFBIG, as a full disk would,
    // instead of SIGXFSZ killing the app.
    signal(SIGXFSZ, SIG_IGN)
    let connection = Connection(descriptor: descriptor)
    let welcome: Connection.Welcome
    do {
        welcome = try connection.handshake(pid: getpid()) {
            // While the host answers, what the first callback needs: the main run loop
            // (its epoll, timer and wake-up descriptors) with the stamp the host's hang
            // watchdog reads when its current turn began, the main queue's wake-up, and
            // the reader thread.
            RunLoopStamp.start(environment: environment)
            _ = RunLoop.main
            DispatchQueue.main.async {}
            connection.prepareReader()
        }
    } catch {
        writeStandardError("\(programName): \(error)")
        exit(1)
    }
    // Before any window is made: Window.bounds is the host's screen.
    Window.useScreen(welcome.screen)

    let application = Application(bundleIdentifier: welcome.bundleIdentifier, delegate: delegate, connection: connection)
    Application.install(application)
    // The host's first message after the welcome (didFinishLaunching) is read and run
    // here, on the main thread, before the run loop starts: one thread wake, not the
    // reader's and then the main run loop's. The reader thread takes everything after
    // it, and the callbacks it hands on run once this one has returned.
    let first: HostMessage
    do {
        first = try connection.receive()
    } catch {
        writeStandardError("\(programName): \(error)")
        exit(1)
    }
    application.startReceivingCallbacks()
    application.runFirst(first)

    // The main run loop: drains the main dispatch queue on the main thread, so
    // callbacks, DispatchQueue.main work, main-actor tasks and Timers all run there.
    // (dispatchMain() would park the main thread and drain the queue elsewhere.)
    while true {
        RunLoop.main.run()
    }
}

/// True if `descriptor` is an open stream socket.
private func isStreamSocket(_ descriptor: Int32) -> Bool {
    var type: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    guard getsockopt(descriptor, SOL_SOCKET, SO_TYPE, &type, &length) == 0 else { return false }
    #if os(Linux)
    return type == Int32(SOCK_STREAM.rawValue)
    #else
    return type == SOCK_STREAM
    #endif
}
