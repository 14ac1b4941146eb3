#if canImport(Glibc)
import Glibc
#endif
import CAppHostSys
import SystemPackage

private final class ThreadBody {
    let name: String
    let run: @Sendable () -> Void
    init(name: String, _ run: @escaping @Sendable () -> Void) {
        self.name = name
        self.run = run
    }
}

/// Starts a detached OS thread (not part of Swift's cooperative pool) that runs
/// `body`. Asynchronous signals are blocked in it, so process-directed
/// signals are handled by other threads and its blocking calls stay quiet.
func startDetachedThread(name: String, _ body: @escaping @Sendable () -> Void) throws(Errno) {
    let box = Unmanaged.passRetained(ThreadBody(name: name, body))
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let rc = pthread_create(&thread, &attributes, { raw in
        var mask = sigset_t()
        sigfillset(&mask)
        for sig in [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS] { sigdelset(&mask, sig) }
        pthread_sigmask(SIG_BLOCK, &mask, nil)
        let body = Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue()
        _ = aph_set_thread_name(body.name)
        body.run()
        return nil
    }, box.toOpaque())
    guard rc == 0 else {
        box.release()
        throw Errno(rawValue: rc)
    }
}
