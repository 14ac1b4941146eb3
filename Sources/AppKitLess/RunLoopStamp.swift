import AppHostProtocol
import CAppHostStamp
import CoreFoundation
import Foundation

/// The main run loop's stamp (issue 18): on the page the host gave this process
/// (descriptor ``IPCProtocol/stampDescriptor``), the run loop stores a counter of its
/// turns and when the current turn began (CLOCK_MONOTONIC; 0 while it waits for
/// work). The host's foreground hang watchdog reads the page at its deadline, so a
/// healthy app is never asked anything: no message, no wake-up.
///
/// A turn begins when the run loop wakes (`kCFRunLoopAfterWaiting`) and ends when it
/// is about to wait (`kCFRunLoopBeforeWaiting`); everything the main thread runs in
/// between (main-queue blocks, callbacks, timers, main-actor tasks) is one turn. A
/// turn costs two release stores and one `clock_gettime` (vDSO).
enum RunLoopStamp {
    /// Maps the page named in `environment` and starts stamping the main run loop
    /// (the first turn begins now: the caller is running). Without a page (a host
    /// that made none) nothing is stamped and the host cannot watch the main thread;
    /// a page that cannot be used is said once on stderr.
    @MainActor
    static func start(environment: [String: String]) {
        guard let value = environment[IPCProtocol.stampDescriptorEnvironmentKey] else { return }
        guard let descriptor = Int32(value), descriptor >= 0 else {
            writeStandardError("\(programName): \(IPCProtocol.stampDescriptorEnvironmentKey)=\(value) is no descriptor; the main run loop is not stamped")
            return
        }
        var mapped: UnsafeMutableRawPointer?
        let rc = aph_stamp_map_writable(descriptor, &mapped)
        // The mapping keeps the page; the descriptor is no longer needed.
        _ = close(descriptor)
        guard rc == 0, let page = mapped else {
            writeStandardError("\(programName): the run-loop stamp page (descriptor \(descriptor)) could not be mapped (errno \(rc)); the main run loop is not stamped")
            return
        }
        aph_stamp_begin_turn(page)
        let main = CFRunLoopGetMain()
        var context = CFRunLoopObserverContext(version: 0, info: page, retain: nil, release: nil, copyDescription: nil)
        // First of the wake-up observers, last of the about-to-wait ones: the turn
        // covers every other observer's work too.
        let begin = CFRunLoopObserverCreate(nil, CFRunLoopActivity.afterWaiting.rawValue, true, CFIndex.min, { _, _, info in
            if let info { aph_stamp_begin_turn(info) }
        }, &context)
        let end = CFRunLoopObserverCreate(nil, CFRunLoopActivity.beforeWaiting.rawValue, true, CFIndex.max, { _, _, info in
            if let info { aph_stamp_end_turn(info) }
        }, &context)
        CFRunLoopAddObserver(main, begin, kCFRunLoopCommonModes)
        CFRunLoopAddObserver(main, end, kCFRunLoopCommonModes)
    }
}
