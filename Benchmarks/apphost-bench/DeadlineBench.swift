import AppHostProtocol
import Foundation
import Host
import HostConfig
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Benchmark 4: how late the host acts after a real-clock deadline, against how late
/// a plain sleep wakes up in the same process.
///
/// The host's deadlines are its own hang checks (issue 18): one active app, a profile
/// whose `foregroundHang` is a few milliseconds (and `backgroundTask` an hour, so
/// nothing else falls due). Each hang check reads the app's run-loop stamp page, finds
/// the run loop waiting and arms the next one `foregroundHang` later, all on the actor
/// (nothing is sent to the app); `takeDeadlineLateness()` returns how late each one was
/// acted on (its own measurement: host time when the actor handles `deadlinesDue`,
/// minus the deadline). The bench only chooses a measurement window (one `Task.sleep`),
/// then sends the app home (no more checks) and reads the record. A main-run-loop turn
/// of the app as long as the interval at a check is a hang by this profile: the app is
/// killed and the bench says so and stops.
struct DeadlineBench {
    /// Deadlines measured for the host and for each baseline.
    let deadlines: Int
    /// Seconds between a deadline being armed and falling due.
    let interval: Double
    /// Host and baselines alternate in this many chunks, so all see the same machine.
    let chunks: Int
    let executable: String

    func run() async throws -> DeadlineReport {
        let perChunk = (deadlines + chunks - 1) / chunks
        let intervalDuration = Duration.nanoseconds(Int64((interval * 1e9).rounded()))
        var taskSleep = Samples(), taskStream = Samples(), scheduled = Samples(), thread = Samples(), host = Samples()
        var windows: [Double] = [], fired: [Int] = []
        var period = interval  // the host's hang-check period, refined from what each window yields
        var report = DeadlineReport(deadlines: deadlines, intervalSeconds: interval, chunks: chunks, executable: executable)

        let profile = BudgetProfile(name: "bench-deadlines", backgroundTask: 3600, foregroundHang: interval,
                                    expirationWarning: 5)
        try profile.validate()
        let hostObject = try InProcessHost(label: "deadlines") { config in
            config.clock = .real
            config.profile = profile
        }
        let supervisor = hostObject.supervisor
        let id = "com.bench.deadlines"
        var failure: (any Error)?
        do {
            try await hostObject.install(id: id, executable: executable)
            var launched = false
            for chunk in 0..<chunks {
                let n = Swift.min(perChunk, deadlines - chunk * perChunk)
                guard n > 0 else { break }
                progress("deadlines: chunk \(chunk + 1)/\(chunks): \(n) sleeps × 4 baselines, then \(n) host deadlines")
                taskSleep.values += try await Self.taskSleepLateness(count: n, interval: intervalDuration)
                taskStream.values += try await Self.taskStreamLateness(count: n, interval: intervalDuration)
                scheduled.values += try await Self.scheduledTaskLateness(count: n, interval: intervalDuration, on: hostObject.group.any())
                thread.values += try await Self.threadLateness(count: n, interval: interval)

                // The host: hang checks of the active app until this chunk has n deadlines.
                var got: [Int64] = []
                var windowsThisChunk = 0
                while got.count < n {
                    windowsThisChunk += 1
                    guard windowsThisChunk <= 10 else { throw BenchError("the host fired only \(got.count) of \(n) deadlines in 10 windows") }
                    if !launched {
                        _ = try await supervisor.launch(try BundleID(validating: id), background: false, arguments: [])
                        launched = true
                    } else {
                        try await supervisor.foreground(try BundleID(validating: id))
                    }
                    _ = await supervisor.takeDeadlineLateness()  // nothing of the launch or the resume
                    let window = Double(n - got.count) * period * 1.03
                    let clock = ContinuousClock()
                    let w0 = clock.now
                    // The measurement window: the host fires its hang checks meanwhile.
                    try await Task.sleep(for: .nanoseconds(Int64(window * 1e9)))
                    do {
                        try await supervisor.background(try BundleID(validating: id))  // stops the hang checks
                    } catch {
                        let reason = (try? await supervisor.reports(try BundleID(validating: id)).last?.reason) ?? nil
                        throw BenchError("the app ended during the window (\(reason ?? "\(error)")): a main-run-loop turn of \(DurationText.format(interval)) is a hang by this profile; try a longer --deadline-interval on a busy machine")
                    }
                    let w1 = clock.now
                    await supervisor.waitUntil(try BundleID(validating: id), is: .suspended)
                    let late = await supervisor.takeDeadlineLateness()
                    got += late.map(\.nanoseconds)
                    let seconds = Double((w1 - w0).nanoseconds) / 1e9
                    windows.append(seconds)
                    fired.append(late.count)
                    if !late.isEmpty { period = seconds / Double(late.count) }
                }
                host.values += got.prefix(n)
            }
            let reports = try await supervisor.reports(try BundleID(validating: id))
            report.appKilled = !reports.isEmpty
        } catch {
            failure = error
        }
        await hostObject.stop()
        if let failure { throw failure }

        let base = DistributionRow("[A] Task.sleep(until:) on ContinuousClock, in one task", taskSleep,
                                   note: "re-armed interval after each wake-up, as the host re-arms after each answer")
        let stream = DistributionRow("[B] a new Task per deadline: Task.sleep, then AsyncStream yield → consumer task", taskStream,
                                     against: base, note: "the host's timer mechanism before it moved to NIO scheduleTask (Task.sleep, then run()), without the host")
        let nio = DistributionRow("[D] NIO scheduleTask(in:) on the host's event loop, then AsyncStream yield → consumer task", scheduled,
                                  against: base, note: "the host's timer mechanism until issue 15 (scheduleTask moved from the actor, then run()), without the host")
        let nano = DistributionRow("[C] clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) on a thread", thread,
                                   against: base, note: "the kernel's timer alone, no Swift runtime; the host's DeadlineTimer is a timerfd its own thread waits on")
        let hostRow = DistributionRow("[H] host: hang-check deadline → fired on the supervisor actor", host, against: base,
                                      note: "DeadlineTimer (timerfd, its thread) → AsyncStream → run(); Supervisor.takeDeadlineLateness(): hostNow() − deadline in fireDue()")
        let hostVsNIO = DistributionRow("[H] host, against [D]", host, against: nio)
        let hostVsThread = DistributionRow("[H] host, against [C]", host, against: nano)
        report.rows = [base, stream, nano, nio, hostRow, hostVsNIO, hostVsThread]
        report.hostWindowsSeconds = windows
        report.hostFiredPerWindow = fired
        report.hostP99Nanoseconds = host.percentile(0.99)
        report.targetMet = report.hostP99Nanoseconds <= 5e6 && !report.appKilled
        return report
    }

    /// `count` sleeps of `interval` in this task; how late each woke up.
    static func taskSleepLateness(count: Int, interval: Duration) async throws -> [Int64] {
        let clock = ContinuousClock()
        var out: [Int64] = []
        out.reserveCapacity(count)
        for _ in 0..<count {
            let deadline = clock.now.advanced(by: interval)
            try await Task.sleep(until: deadline, clock: clock)
            out.append((clock.now - deadline).nanoseconds)
        }
        return out
    }

    /// As the host armed a deadline until it moved to NIO: a new Task sleeps until it,
    /// then yields into an AsyncStream; the consumer (this task) reads the clock when it
    /// receives the item.
    static func taskStreamLateness(count: Int, interval: Duration) async throws -> [Int64] {
        let clock = ContinuousClock()
        let (stream, continuation) = AsyncStream<ContinuousClock.Instant>.makeStream()
        var iterator = stream.makeAsyncIterator()
        var out: [Int64] = []
        out.reserveCapacity(count)
        for _ in 0..<count {
            let deadline = clock.now.advanced(by: interval)
            let timer = Task {
                try await Task.sleep(until: deadline, clock: .continuous)
                continuation.yield(deadline)
            }
            guard let due = await iterator.next() else { throw BenchError("stream ended") }
            out.append((clock.now - due).nanoseconds)
            _ = await timer.result
        }
        continuation.finish()
        return out
    }

    /// As the host arms a deadline (`Supervisor.rearm`): an NIO `scheduleTask(in:)` on the
    /// host's own event loop (idle meanwhile: its one app is suspended) yields into an
    /// AsyncStream; the consumer (this task) reads the clock when it receives the item.
    static func scheduledTaskLateness(count: Int, interval: Duration, on loop: any EventLoop) async throws -> [Int64] {
        let clock = ContinuousClock()
        let (stream, continuation) = AsyncStream<ContinuousClock.Instant>.makeStream()
        var iterator = stream.makeAsyncIterator()
        var out: [Int64] = []
        out.reserveCapacity(count)
        for _ in 0..<count {
            let deadline = clock.now.advanced(by: interval)
            let delay = clock.now.duration(to: deadline)
            _ = loop.scheduleTask(in: .nanoseconds(delay.nanoseconds)) {
                continuation.yield(deadline)
            }
            guard let due = await iterator.next() else { throw BenchError("stream ended") }
            out.append((clock.now - due).nanoseconds)
        }
        continuation.finish()
        return out
    }

    /// `count` absolute sleeps with clock_nanosleep on a thread of its own.
    static func threadLateness(count: Int, interval: Double) async throws -> [Int64] {
        try await onThread("ahb-nanosleep") {
            func now() -> Int64 {
                var ts = timespec()
                clock_gettime(CLOCK_MONOTONIC, &ts)
                return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
            }
            let step = Int64((interval * 1e9).rounded())
            var out: [Int64] = []
            out.reserveCapacity(count)
            for _ in 0..<count {
                let deadline = now() + step
                var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
                while true {
                    let rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil)
                    if rc == 0 { break }
                    if rc != EINTR { throw BenchError("clock_nanosleep: \(String(cString: strerror(rc)))") }
                }
                out.append(now() - deadline)
            }
            return out
        }
    }
}

extension Samples {
    /// Nearest-rank percentile (`p` in 0...1).
    func percentile(_ p: Double) -> Double {
        let s = values.sorted()
        guard !s.isEmpty else { return .nan }
        let rank = Int((p * Double(s.count)).rounded(.up))
        return Double(s[Swift.max(0, Swift.min(s.count - 1, rank - 1))])
    }
}

/// One distribution as printed: median, p90, p99, max, and ratios to a baseline.
struct DistributionRow: Codable, Sendable {
    var label: String
    var count: Int
    var medianNanoseconds: Double
    var p90Nanoseconds: Double
    var p99Nanoseconds: Double
    var maxNanoseconds: Double
    var minNanoseconds: Double
    var baseline: String?
    var ratioMedian: Double?
    var ratioP99: Double?
    var note: String?

    init(_ label: String, _ s: Samples, against base: DistributionRow? = nil, note: String? = nil) {
        self.label = label
        count = s.count
        medianNanoseconds = s.median
        p90Nanoseconds = s.percentile(0.9)
        p99Nanoseconds = s.percentile(0.99)
        maxNanoseconds = s.max
        minNanoseconds = s.min
        if let base {
            baseline = base.label
            ratioMedian = medianNanoseconds / base.medianNanoseconds
            ratioP99 = p99Nanoseconds / base.p99Nanoseconds
        }
        self.note = note
    }
}

/// What `deadlines` measured.
struct DeadlineReport: Codable, Sendable {
    var deadlines: Int
    var intervalSeconds: Double
    var chunks: Int
    var executable: String
    var rows: [DistributionRow] = []
    /// Each host measurement window (seconds) and how many deadlines fired in it.
    var hostWindowsSeconds: [Double] = []
    var hostFiredPerWindow: [Int] = []
    var hostP99Nanoseconds = Double.nan
    var appKilled = false
    var targetMet = false
}

func printDeadlines(_ r: DeadlineReport) {
    print("")
    print("Deadlines (real clock; \(r.deadlines) deadlines of \(DurationText.format(r.intervalSeconds)) each for the host and each baseline, "
          + "\(r.chunks) alternating chunks, \(buildConfiguration) build)")
    let width = max(44, (r.rows.map(\.label.count).max() ?? 0) + 2)
    func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
    func lpad(_ s: String, _ n: Int) -> String { s.count >= n ? s : String(repeating: " ", count: n - s.count) + s }
    print("  " + pad("lateness after the deadline", width) + lpad("n", 6) + lpad("median", 10) + lpad("p90", 10)
          + lpad("p99", 10) + lpad("max", 10) + "   ratio (median, p99)")
    for row in r.rows {
        var line = "  " + pad(row.label, width) + lpad(String(row.count), 6) + lpad(formatDuration(row.medianNanoseconds), 10)
            + lpad(formatDuration(row.p90Nanoseconds), 10) + lpad(formatDuration(row.p99Nanoseconds), 10)
            + lpad(formatDuration(row.maxNanoseconds), 10)
        if let base = row.baseline, let m = row.ratioMedian, let p = row.ratioP99 {
            line += "   \(formatRatio(m)), \(formatRatio(p)) of \(base.prefix(3))"
        } else {
            line += "   baseline"
        }
        print(line)
        if let note = row.note { print("  " + pad("", width) + "      " + note) }
    }
    let total = r.hostFiredPerWindow.reduce(0, +)
    let seconds = r.hostWindowsSeconds.reduce(0, +)
    print(String(format: "  host windows: %d, %.2f s in all, %d hang-check deadlines fired (the first %d of each chunk kept); "
                 + "mean period %.2f ms (interval %@ + lateness + the re-arm; nothing sent to the app)",
                 r.hostWindowsSeconds.count, seconds, total, (r.deadlines + r.chunks - 1) / r.chunks,
                 total > 0 ? seconds / Double(total) * 1000 : .nan, DurationText.format(r.intervalSeconds)))
    print("  app killed during the run: \(r.appKilled ? "YES" : "no")")
    print("  target p99 ≤ 5 ms: \(r.targetMet ? "met" : "NOT met") (host p99 \(formatDuration(r.hostP99Nanoseconds)))")
}
