import AppHostProtocol
import ArgumentParser
import Foundation
import Host
import Logging
import NIOPosix
import Plugins

/// Benchmark: the push gateway (APNs provider API over HTTP/2).
///
/// (a) Throughput: pushes accepted per second over one HTTP/2 connection with N
///     concurrent streams, against the same client and the same HTTP/2 server code
///     answering 200 at once (no supervisor, no checks): the ratio is what the
///     host's work per push costs on top of NIO HTTP/2.
/// (b) Wake latency: a silent push (content-available, `apns-push-type: background`,
///     priority 5) sent to a suspended probe app, until the host records that the app's
///     `didReceiveRemoteNotification(background)` returned (the host's `callback`
///     event, stamped when the return is read from the app's socket); against SIGCONT
///     plus the IPC round trips of a bare resume of the same binary (raw-signals helper).
struct PushBench {
    /// Pushes per measured round (a).
    let pushes: Int
    /// Concurrent streams on the one connection (a).
    let streams: Int
    /// Measured rounds of (a), host and baseline alternating.
    let rounds: Int
    /// Measured wakes (b).
    let wakes: Int
    let warmup: Int

    /// The sample app (b) wakes; also the raw baselines' binary.
    static let executable = "ProbeApp"
    /// Baseline and host alternate in chunks of this many wakes.
    static let chunk = 10

    func run() async throws -> [Section] {
        try await [throughput(), wake()]
    }

    // MARK: (a) throughput

    private func throughput() async throws -> Section {
        progress("push (a): \(rounds) rounds of \(pushes) pushes on \(streams) streams of one connection, host and baseline alternating")
        var logger = Logger(label: "apphost-bench")
        logger.logLevel = .warning
        let host = try InProcessHost(label: "push") { $0.profile.silentPushesPerHour = 1e9 }
        let clientGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let baselineGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var failure: (any Error)?
        var hostPerPush = Samples(), basePerPush = Samples()
        var hostLatency = Samples(), baseLatency = Samples()
        var refused = 0
        var hostStats = PushGateway.Statistics(), baseStats = PushGateway.Statistics()
        let id = "com.bench.push.alert"
        do {
            let token = try await installPushApp(host, id: id, backgroundModes: [])
            // The host's gateway, on the host's event loop as in the daemon.
            let gateway = try await PushGateway.bind(settings: .init(), group: host.group, supervisor: host.supervisor, logger: logger)
            // The baseline: the same HTTP/2 server code answering 200 at once, on an event loop of its own.
            let fixedID = UUID().uuidString
            let baseline = try await PushGateway.bind(settings: .init(), group: baselineGroup, logger: logger) { _ in .success(fixedID) }
            let serving = [Task { try await gateway.serve() }, Task { try await baseline.serve() }]
            do {
                let toHost = try await PushGatewayClient.connect(host: "127.0.0.1", port: gateway.port, group: clientGroup)
                let toBase = try await PushGatewayClient.connect(host: "127.0.0.1", port: baseline.port, group: clientGroup)
                let payload = Data(#"{"aps":{"alert":{"title":"Bench","body":"throughput"}}}"#.utf8)
                for round in 0..<(1 + rounds) {
                    let measured = round > 0
                    for (client, isHost) in [(toBase, false), (toHost, true)] {
                        let r = try await load(client, token: token, topic: id, payload: payload)
                        refused += measured ? r.refused : 0
                        guard measured else { continue }
                        let perPush = Int64(Double(r.elapsed.nanoseconds) / Double(pushes))
                        if isHost {
                            hostPerPush.add(perPush)
                            hostLatency.values += r.latencies
                        } else {
                            basePerPush.add(perPush)
                            baseLatency.values += r.latencies
                        }
                    }
                }
                await toHost.close()
                await toBase.close()
                hostStats = gateway.statistics
                baseStats = baseline.statistics
            } catch {
                failure = error
            }
            gateway.close()
            baseline.close()
            for task in serving { try? await task.value }
        } catch {
            failure = error
        }
        await host.stop()
        try? await clientGroup.shutdownGracefully()
        try? await baselineGroup.shutdownGracefully()
        if let failure { throw failure }
        if refused > 0 { throw BenchError("push (a): \(refused) pushes were not answered 200") }

        let base = Row("baseline: NIO HTTP/2 server answering 200 at once, per push", basePerPush,
                       note: "same gateway HTTP/2 code and client; responder returns at once (no supervisor)")
        let gw = Row("gateway → Supervisor.apnsPush → 200, per push", hostPerPush, against: base,
                     note: "alert push to an installed app that is not running (checks, plugin, event log)")
        let baseLat = Row("baseline: one request, send → answer", baseLatency)
        let gwLat = Row("gateway: one request, send → answer", hostLatency, against: baseLat,
                        note: "with \(streams) requests in flight on the connection")
        func rate(_ row: Row) -> String { String(format: "%.0f", 1e9 / row.medianNanoseconds) }
        return Section(
            title: "Push gateway throughput (\(pushes) pushes × \(rounds) rounds after 1 warm-up round, \(streams) concurrent streams, 1 connection, \(buildConfiguration) build)",
            rows: [base, gw, baseLat, gwLat],
            notes: [
                "pushes/s (median round): baseline \(rate(base)), gateway \(rate(gw)) (\(formatRatio(base.medianNanoseconds / gw.medianNanoseconds)) of the baseline's rate)",
                "connections/streams served: gateway \(hostStats.connections)/\(hostStats.streams), baseline \(baseStats.connections)/\(baseStats.streams)",
                "client, baseline server and host each on one NIO event-loop thread; the supervisor actor on Swift's pool",
            ])
    }

    /// Sends `pushes` pushes, `streams` at a time on one connection; wall time and each request's latency.
    private func load(_ client: PushGatewayClient, token: String, topic: String, payload: Data) async throws
        -> (elapsed: Duration, latencies: [Int64], refused: Int)
    {
        let clock = ContinuousClock()
        let start = clock.now
        let (latencies, refused) = try await withThrowingTaskGroup(of: ([Int64], Int).self) { group in
            for worker in 0..<streams {
                let share = pushes / streams + (worker < pushes % streams ? 1 : 0)
                group.addTask {
                    var latencies: [Int64] = []
                    latencies.reserveCapacity(share)
                    var refused = 0
                    for _ in 0..<share {
                        let t0 = clock.now
                        let r = try await client.push(token: token, topic: topic, pushType: "alert", priority: 10, payload: payload)
                        latencies.append((clock.now - t0).nanoseconds)
                        if r.status != 200 { refused += 1 }
                    }
                    return (latencies, refused)
                }
            }
            var all: [Int64] = []
            var refused = 0
            for try await (l, r) in group {
                all += l
                refused += r
            }
            return (all, refused)
        }
        return (clock.now - start, latencies, refused)
    }

    // MARK: (b) wake latency

    private func wake() async throws -> Section {
        progress("push (b): \(wakes) silent pushes to a suspended \(Self.executable), raw baselines in a helper, alternating in chunks of \(Self.chunk)")
        var logger = Logger(label: "apphost-bench")
        logger.logLevel = .warning
        // Over the default budget (a few silent pushes an hour) the plugin holds pushes.
        let host = try InProcessHost(label: "wake") { $0.profile.silentPushesPerHour = 1e9 }
        let clientGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let baselineGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var raw = RawSignalSamples()
        var answered = Samples(), toCont = Samples(), toReturned = Samples(), toSuspended = Samples()
        var roundTrip = Samples()
        var failure: (any Error)?
        var pid: Int32 = 0
        let id = "com.bench.push.wake"
        do {
            let token = try await installPushApp(host, id: id, backgroundModes: ["remote-notification"])
            let gateway = try await PushGateway.bind(settings: .init(), group: host.group, supervisor: host.supervisor, logger: logger)
            let fixedID = UUID().uuidString
            let baseline = try await PushGateway.bind(settings: .init(), group: baselineGroup, logger: logger) { _ in .success(fixedID) }
            let serving = [Task { try await gateway.serve() }, Task { try await baseline.serve() }]
            let inbox = EventInbox()
            let (_, live, subscription) = await host.supervisor.subscribe(bundleIdentifier: try BundleID(validating: id))
            let forward = Task {
                for await e in live { await inbox.deliver(e) }
            }
            do {
                let client = try await PushGatewayClient.connect(host: "127.0.0.1", port: gateway.port, group: clientGroup)
                let toBase = try await PushGatewayClient.connect(host: "127.0.0.1", port: baseline.port, group: clientGroup)
                pid = try await host.supervisor.launch(try BundleID(validating: id), background: true, arguments: [])
                await host.supervisor.waitUntil(try BundleID(validating: id), is: .suspended)
                let clock = ContinuousClock()
                for i in 0..<(warmup + wakes) {
                    let measured = i >= warmup
                    if measured && (i - warmup) % Self.chunk == 0 {
                        let n = Swift.min(Self.chunk, wakes - (i - warmup))
                        raw.append(try await RawSignals.runHelper(iterations: n, warmup: warmup, executable: Self.executable))
                    }
                    // The transport's floor: the same push to the bare server, on an idle connection.
                    let b0 = clock.now
                    _ = try await toBase.push(token: token, topic: id, pushType: "background", priority: 5,
                                              payload: Data(#"{"aps":{"content-available":1},"i":\#(i)}"#.utf8))
                    if measured { roundTrip.add(clock.now - b0) }
                    await inbox.clear()
                    let t0 = clock.now
                    let r = try await client.push(token: token, topic: id, pushType: "background", priority: 5,
                                                  payload: Data(#"{"aps":{"content-available":1},"i":\#(i)}"#.utf8))
                    let t1 = clock.now
                    guard r.status == 200 else { throw BenchError("push (b): the gateway answered \(r.status) \(r.reason ?? "")") }
                    // In the host's clock, as its events are stamped (outside the timed interval).
                    let sent = await host.supervisor.hostDate(at: t0)
                    let cont = await inbox.next(within: .seconds(5)) { $0.signal == .cont && $0.confirmed == nil }
                    guard let returned = await inbox.next(within: .seconds(5), {
                        $0.isReturn(of: "didReceiveRemoteNotification(background)")
                    }) else {
                        throw BenchError("push (b): no didReceiveRemoteNotification(background) returned within 5 s of push \(i) (is the delivery held? events: apphost events)")
                    }
                    guard let suspended = await inbox.next(within: .seconds(10), { $0.isTransition(to: .suspended) }) else {
                        throw BenchError("push (b): the app was not suspended again within 10 s of push \(i)")
                    }
                    guard measured else { continue }
                    answered.add(t1 - t0)
                    if let cont { toCont.add(nanoseconds(from: sent, to: cont.time)) }
                    toReturned.add(nanoseconds(from: sent, to: returned.time))
                    toSuspended.add(nanoseconds(from: returned.time, to: suspended.time))
                }
                await client.close()
                await toBase.close()
            } catch {
                failure = error
            }
            await host.supervisor.unsubscribe(subscription)
            await forward.value
            gateway.close()
            baseline.close()
            for task in serving { try? await task.value }
        } catch {
            failure = error
        }
        await host.stop()
        try? await clientGroup.shutdownGracefully()
        try? await baselineGroup.shutdownGracefully()
        if let failure { throw failure }

        let rawCont = Row("raw SIGCONT + waitid(WCONTINUED), same binary", raw.continueApp)
        let bare = Row("bare: SIGCONT, 2 callbacks sent, both returns read", raw.protocolResume,
                       note: "SIGCONT + one pipelined IPC round trip (willEnterForeground, didBecomeActive), no host")
        let floor = Row("baseline: one push to the bare NIO HTTP/2 server → 200", roundTrip,
                        note: "same client, idle connection, server answering at once: the HTTP/2 round trip")
        var rows = [rawCont, bare, floor]
        rows.append(Row("gateway: push sent → 200 answered", answered, against: floor,
                        note: "answered once the host has checked the push and sent the wake (SIGCONT)"))
        if toCont.count > 0 {
            rows.append(Row("gateway: push sent → SIGCONT sent", toCont, slice: true))
        }
        rows.append(Row("gateway: push sent → didReceiveRemoteNotification returned", toReturned, against: bare,
                        note: "the host's callback event (its clock), from the client's send"))
        rows.append(Row("gateway: push sent → didReceiveRemoteNotification returned", toReturned, against: rawCont))
        rows.append(Row("  then: returned → suspended again (SIGSTOP confirmed)", toSuspended, slice: true))
        return Section(
            title: "Silent push wake (\(Self.executable) pid \(pid), suspended; \(wakes) pushes after \(warmup) warm-up, \(buildConfiguration) build)",
            rows: rows,
            notes: ["sum of the two floors (HTTP/2 round trip + bare resume), medians: \(formatDuration(floor.medianNanoseconds + bare.medianNanoseconds))",
                    "push: content-available 1, apns-push-type background, priority 5; silentPushesPerHour set to 1e9 so none is held",
                    "each push waits until the app is suspended again; raw baselines ran in a helper process, in chunks of \(Self.chunk)"])
    }

    /// Installs the probe as `id` with an `aps-environment` entitlement; returns its device token.
    private func installPushApp(_ host: InProcessHost, id: String, backgroundModes: [String]) async throws -> String {
        let bundle = host.dir.path + "/\(id).app"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let plist: [String: Any] = ["CFBundleIdentifier": id, "CFBundleExecutable": Self.executable, "CFBundleName": "Probe",
                                    "UIBackgroundModes": backgroundModes]
        try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0)
            .write(to: URL(fileURLWithPath: bundle + "/Info.plist"))
        // Named after the bundle folder, as the loader looks for it.
        try PropertyListSerialization.data(fromPropertyList: ["aps-environment": "development"], format: .xml, options: 0)
            .write(to: URL(fileURLWithPath: bundle + "/\(id).entitlements"))
        let app = try await host.supervisor.install(path: bundle, settings: [:])
        guard app.entitlements?.contains("aps-environment") == true else {
            throw BenchError("\(bundle): the aps-environment entitlement was not read")
        }
        guard let token = await host.supervisor.deviceToken(of: app.bundleIdentifier) else {
            throw BenchError("\(id): installed, yet the host has no device token for it")
        }
        return token
    }
}

/// The live events of one app, waited for one at a time with a deadline (events that
/// do not match are skipped, as a reader of the stream would).
actor EventInbox {
    private var buffer: [HostEvent] = []
    private var waiter: (token: UInt64, predicate: @Sendable (HostEvent) -> Bool, continuation: CheckedContinuation<HostEvent?, Never>)?
    private var nextToken: UInt64 = 0

    func deliver(_ event: HostEvent) {
        if let w = waiter, w.predicate(event) {
            waiter = nil
            w.continuation.resume(returning: event)
        } else if waiter == nil {
            buffer.append(event)
        }
    }

    /// Drops what arrived so far.
    func clear() { buffer.removeAll() }

    /// The next event matching `predicate`, or nil after `timeout`.
    func next(within timeout: Duration, _ predicate: @escaping @Sendable (HostEvent) -> Bool) async -> HostEvent? {
        if let i = buffer.firstIndex(where: predicate) {
            let e = buffer[i]
            buffer.removeFirst(i + 1)
            return e
        }
        buffer.removeAll()
        nextToken += 1
        let token = nextToken
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.expire(token)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { waiter = (token, predicate, $0) }
    }

    private func expire(_ token: UInt64) {
        guard let w = waiter, w.token == token else { return }
        waiter = nil
        w.continuation.resume(returning: nil)
    }
}

extension AppHostBench {
    struct PushCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "push",
            abstract: "Push gateway: pushes/s over one HTTP/2 connection vs a bare NIO HTTP/2 answer; silent push → suspended app's delegate vs SIGCONT + IPC.")
        @OptionGroup var common: CommonOptions

        @Option(help: "Pushes per measured round of the throughput run.")
        var pushes = 5000

        @Option(help: "Concurrent streams on the one connection.")
        var streams = 100

        @Option(help: "Measured rounds of the throughput run (host and baseline alternate).")
        var rounds = 5

        func validate() throws {
            guard pushes > 0, streams > 0, streams <= PushGateway.maximumConcurrentStreams else {
                throw ValidationError("--pushes must be positive and --streams 1...\(PushGateway.maximumConcurrentStreams)")
            }
            guard rounds > 0 else { throw ValidationError("--rounds must be positive") }
        }

        func run() async throws {
            var report = Report()
            report.sections = try await PushBench(pushes: pushes, streams: streams, rounds: rounds,
                                                  wakes: common.iterations, warmup: common.warmup).run()
            try report.emit(json: common.json)
        }
    }
}
