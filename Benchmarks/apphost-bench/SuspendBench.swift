import AppHostProtocol
import AppHostSystem
import Foundation
import Host

/// Benchmark 2: home button → suspended (state T confirmed), and foreground → active,
/// against raw SIGSTOP/SIGCONT + waitid on the same binary.
struct SuspendBench {
    let iterations: Int
    let warmup: Int
    let executable: String

    /// Baseline and host alternate in chunks of this many iterations, so both see the same machine.
    static let chunk = 10

    func run() async throws -> [Section] {
        progress("suspend: raw baselines (helper process) and host, alternating in chunks of \(Self.chunk)")
        var raw = RawSignalSamples()
        let clock = ContinuousClock()
        let host = try InProcessHost(label: "suspend")
        let id = "com.bench.suspend"
        var failure: (any Error)?
        var suspendCaller = Samples(), noAssertionToT = Samples(), returnToStop = Samples(), stopToT = Samples()
        var resumeCaller = Samples(), resumeToCont = Samples(), resumeToRunning = Samples(), resumeToActiveEvent = Samples(), resumeToReturned = Samples()
        var notStopped = 0, stillStopped = 0
        var threads = 0
        do {
            try await host.install(id: id, executable: executable)
            let (_, live, subscription) = await host.supervisor.subscribe(bundleIdentifier: try BundleID(validating: id))
            var events = live.makeAsyncIterator()
            func next(_ what: String, _ predicate: (HostEvent) -> Bool) async throws -> HostEvent {
                while let e = await events.next() {
                    if predicate(e) { return e }
                }
                throw BenchError("event stream ended before \(what)")
            }
            let bundle = try BundleID(validating: id)
            let pid = try await host.supervisor.launch(bundle, background: false, arguments: [])
            _ = try await next("didBecomeActive returned") { $0.isReturn(of: "didBecomeActive") }
            threads = (try? ProcStat.read(pid: pid).threadCount) ?? 0

            for i in 0..<(warmup + iterations) {
                let measured = i >= warmup
                if measured && (i - warmup) % Self.chunk == 0 {
                    // The next chunk of raw baselines, in a helper process (see RawSignals for why not here).
                    let n = Swift.min(Self.chunk, iterations - (i - warmup))
                    raw.append(try await RawSignals.runHelper(iterations: n, warmup: warmup, executable: executable))
                }
                // Home button → suspended (the kernel has reported the stop).
                let t0 = clock.now
                try await host.supervisor.background(bundle)
                await host.supervisor.waitUntil(try BundleID(validating: id), is: .suspended)
                let t1 = clock.now
                let returned = try await next("didEnterBackground returned") { $0.isReturn(of: "didEnterBackground") }
                let stop = try await next("SIGSTOP") { $0.signal == .stop && $0.confirmed == nil }
                let suspended = try await next("suspended") { $0.isTransition(to: .suspended) }
                if (try? ProcStat.read(pid: pid).state) != "T" { notStopped += 1 }

                // Foreground → active; then until the app has run didBecomeActive.
                let t2 = clock.now
                try await host.supervisor.foreground(bundle)
                await host.supervisor.waitUntil(try BundleID(validating: id), is: .active)
                let t3 = clock.now
                let cont = try await next("SIGCONT") { $0.signal == .cont && $0.confirmed == nil }
                let active = try await next("active") { $0.isTransition(to: .active) }
                // The kernel's continue confirmation and didBecomeActive's return, in either order.
                var running: HostEvent?
                var back: HostEvent?
                while running == nil || back == nil {
                    let e = try await next("running again / didBecomeActive returned") {
                        ($0.signal == .cont && $0.confirmed == true) || $0.isReturn(of: "didBecomeActive")
                    }
                    if e.kind == .signal { running = e } else { back = e }
                }
                guard let running, let back else { throw BenchError("unreachable") }
                // In the host's clock, as its events are stamped (outside the timed interval).
                let called = await host.supervisor.hostDate(at: t2)
                if (try? ProcStat.read(pid: pid).state) == "T" { stillStopped += 1 }

                if measured {
                    suspendCaller.add(t1 - t0)
                    noAssertionToT.add(nanoseconds(from: returned.time, to: suspended.time))
                    returnToStop.add(nanoseconds(from: returned.time, to: stop.time))
                    stopToT.add(nanoseconds(from: stop.time, to: suspended.time))
                    resumeCaller.add(t3 - t2)
                    resumeToCont.add(nanoseconds(from: called, to: cont.time))
                    resumeToRunning.add(nanoseconds(from: called, to: running.time))
                    resumeToActiveEvent.add(nanoseconds(from: called, to: active.time))
                    resumeToReturned.add(nanoseconds(from: called, to: back.time))
                }
            }
            await host.supervisor.unsubscribe(subscription)
        } catch {
            failure = error
        }
        await host.stop()
        if let failure { throw failure }

        let rawStop = Row("raw SIGSTOP + waitid(WSTOPPED), same binary", raw.stopApp)
        let rawCont = Row("raw SIGCONT + waitid(WCONTINUED), same binary", raw.continueApp)
        let protoSuspend = Row("bare: willResignActive+didEnterBackground returned, SIGSTOP+waitid", raw.protocolSuspend,
                               against: rawStop, note: "the same work as the host's home button, with no host")
        let protoResume = Row("bare: SIGCONT, willEnterForeground+didBecomeActive returned", raw.protocolResume,
                              against: rawCont, note: "the same work as the host's foreground, with no host")
        let suspend = Section(
            title: "Suspend (\(executable), \(threads) threads; \(iterations) iterations after \(warmup) warm-up, \(buildConfiguration) build)",
            rows: [
                rawStop,
                Row("raw SIGSTOP + waitid(WSTOPPED), /bin/sleep", raw.stopSleep, against: rawStop, note: "one thread (the app has \(raw.appThreads))"),
                protoSuspend,
                Row("host: didEnterBackground returned → suspended (T)", noAssertionToT, against: rawStop,
                    note: "\"no assertion left\" → stop confirmed; from the host's event timestamps"),
                Row("  of which: returned → SIGSTOP sent", returnToStop, against: rawStop,
                    note: "the decision; sent: when the host calls kill(2), as the raw loop's clock starts (issue 31's target: ≤ 30 µs)"),
                Row("  of which: SIGSTOP sent → stop confirmed, suspended", stopToT, against: rawStop, target: 1.5,
                    note: "kill(2) itself, then the kernel's stop and its report: the raw loop's interval"),
                Row("host: background() → waitUntil(.suspended)", suspendCaller, against: rawStop,
                    note: "whole home button: 2 callbacks round trips + stop"),
                Row("host: background() → waitUntil(.suspended)", suspendCaller, against: protoSuspend),
            ],
            notes: ["kernel check after each suspend: \(notStopped == 0 ? "state T every time" : "\(notStopped) time(s) NOT in state T")"])
        let resume = Section(
            title: "Resume (same app and run)",
            rows: [
                rawCont,
                Row("raw SIGCONT + waitid(WCONTINUED), /bin/sleep", raw.continueSleep, against: rawCont),
                protoResume,
                Row("host: foreground() → SIGCONT sent", resumeToCont, against: rawCont),
                Row("host: foreground() → running, kernel confirmed (WCONTINUED)", resumeToRunning, against: rawCont, target: 10,
                    note: "the resume the target speaks of: SIGCONT → running confirmed, as the raw loop times it"),
                Row("host: foreground() → waitUntil(.active)", resumeCaller, against: rawCont,
                    note: "the host enters active without waiting for the kernel or the callbacks"),
                Row("host: foreground() → suspended…active recorded", resumeToActiveEvent, against: rawCont),
                Row("host: foreground() → didBecomeActive returned", resumeToReturned, against: protoResume,
                    note: "the app has run again: proof it was continued"),
            ],
            notes: ["kernel check after each resume: \(stillStopped == 0 ? "never in state T" : "\(stillStopped) time(s) still in state T")",
                    "raw baselines ran in a helper process (the host's reaper thread waits in waitid(P_ALL) and would steal their reports),",
                    "alternating with the host in chunks of \(Self.chunk) iterations; each helper run has its own \(warmup) warm-up iterations."])
        return [suspend, resume]
    }
}
