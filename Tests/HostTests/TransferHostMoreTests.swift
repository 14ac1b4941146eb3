import AppHostProtocol
import AppHostSystem
import Foundation
import HTTPTestServer
import TestSupport
import Testing
@testable import Host

/// More of background URLSession through the host, each with real processes: the host
/// in-process, the real `apphost-transferd`, ProbeApp, and an HTTPTestServer on
/// loopback. Device conditions (discretionary, Wi-Fi only), the 0x2182bad3 kill,
/// uploads and the container rule, redirects, and HTTPS with an extra CA.
@Suite("Background transfers through the host, more", .tags(.process, .network), .timeLimit(.minutes(3)),
       .enabled(if: probeBuilt && transferDaemonBuilt, "ProbeApp or apphost-transferd not built: run `swift build` first (scripts/test.sh does)"))
struct TransferHostMoreTests {
    // MARK: Helpers

    func container(_ host: TestHost, _ id: BundleID) -> String { host.dir.path + "/containers/\(id)" }

    func appLog(_ host: TestHost, _ id: BundleID) -> String {
        (try? String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)) ?? ""
    }

    func download(_ host: TestHost, _ id: BundleID, task: Int) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: container(host, id) + "/Documents/downloads/\(task)"))
    }

    /// The `nth` event of `id` (past or future) matching `predicate`. Bounded so a
    /// failure shows what the host, the app and the daemon saw instead of hitting the
    /// suite's time limit; nil (and an issue recorded) when it does not come.
    @discardableResult
    func event(_ host: TestHost, _ id: BundleID, _ what: String, nth n: Int = 1, within timeout: Duration = .seconds(60),
               sourceLocation: SourceLocation = #_sourceLocation,
               _ predicate: @escaping @Sendable (HostEvent) -> Bool) async -> HostEvent? {
        let found = await withTaskGroup(of: HostEvent?.self) { group in
            group.addTask {
                let seen = Counter()
                return await host.waitForEvent(id) { predicate($0) && seen.increment() == n }
            }
            group.addTask { try? await Task.sleep(for: timeout); return nil }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        if found == nil {
            let trace = await host.events(id).map { "\($0.kind) \($0.cause)" }.joined(separator: "\n")
            let hostEvents = await host.supervisor.subscribe(bundleIdentifier: nil).past.filter { $0.bundleIdentifier == nil }
                .map(\.cause).joined(separator: "\n")
            let daemon = (try? String(contentsOfFile: host.dir.path + "/logs/apphost-transferd.log", encoding: .utf8)) ?? "-"
            Issue.record("no \(what) (#\(n)) within \(timeout):\n\(trace)\nhost:\n\(hostEvents)\napp log:\n\(appLog(host, id))\ndaemon log:\n\(daemon)",
                         sourceLocation: sourceLocation)
        }
        return found
    }

    /// The `nth` return of callback `cause` (as the host names it).
    @discardableResult
    func returned(_ host: TestHost, _ id: BundleID, _ cause: String, nth n: Int = 1,
                  sourceLocation: SourceLocation = #_sourceLocation) async -> HostEvent? {
        await event(host, id, "\(cause) returned", nth: n, sourceLocation: sourceLocation) {
            $0.callback == cause
        }
    }

    /// A service event "transfer N waiting: REASON" whose reason contains every one of `words`.
    @discardableResult
    func waiting(_ host: TestHost, _ id: BundleID, _ words: [String], nth n: Int = 1,
                 sourceLocation: SourceLocation = #_sourceLocation) async -> HostEvent? {
        await event(host, id, "a waiting event with \(words)", nth: n, sourceLocation: sourceLocation) { e in
            guard e.transfer == .waiting, let r = e.cause.range(of: " waiting: ") else { return false }
            let reason = e.cause[r.upperBound...].lowercased()
            return words.allSatisfy { reason.contains($0.lowercased()) }
        }
    }

    /// Waits until the host has heard the daemon's `ready` (and so sent it the device
    /// conditions). A job the host sends earlier can reach the daemon before the
    /// conditions do, and runs under its defaults (Wi-Fi) whatever the device says.
    func daemonReady(_ host: TestHost) async {
        let (past, live, sub) = await host.supervisor.subscribe(bundleIdentifier: nil)
        defer { Task { await host.supervisor.unsubscribe(sub) } }
        if past.contains(where: { $0.transfer == .daemonReady }) { return }
        for await e in live where e.transfer == .daemonReady { return }
    }

    func device(_ host: TestHost, plugged: Bool? = nil, network: DeviceNetwork? = nil) async throws {
        if let plugged { _ = try await host.supervisor.modeCommand(.devicePower(plugged: plugged)) }
        if let network { _ = try await host.supervisor.modeCommand(.deviceNetwork(network)) }
    }

    func startServer(tls: HTTPTestServer.TLSFiles? = nil) async throws -> HTTPTestServer {
        try await HTTPTestServer.start(tls: tls)
    }

    // MARK: Device conditions

    @Test func aDiscretionaryDownloadWaitsForPowerAndWiFiThenCompletes() async throws {
        let server = try await startServer()
        let resource = Resource.generated(size: 256 << 10, seed: 3)
        server.serve("/file", resource: resource)
        try await withHost(label: "txd", configure: patientLaunch) { host in
            await daemonReady(host)
            try await device(host, plugged: false, network: .wifi)
            let id = try await host.installProbe("com.txm.discretionary")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s:discretionary", "--on", "launch", "download:s:\(server.url("/file"))",
            ])
            // On battery (Wi-Fi is not enough).
            await waiting(host, id, ["discretionary", "power", "Wi-Fi"])
            // Through "no network", so the daemon, which reports a reason when it changes,
            // reports the next one: plugged in on cellular still waits (power is not enough).
            try await device(host, network: DeviceNetwork.none)
            await waiting(host, id, ["no network"])
            try await device(host, plugged: true, network: .cellular)
            await waiting(host, id, ["discretionary", "power", "Wi-Fi"], nth: 2)
            #expect(server.requests("/file").isEmpty, "nothing was fetched while it waited")
            let finishedEarly = await host.events(id).contains { $0.transfer == .finished }
            #expect(!finishedEarly)
            // Plugged in and on Wi-Fi: it runs.
            try await device(host, network: .wifi)
            await returned(host, id, "didCompleteWithError(task 1, nil)")
            #expect(try download(host, id, task: 1) == resource.bytes(in: 0..<resource.size))
            #expect(server.requests("/file").map(\.status) == [200])
        }
        try await server.stop()
    }

    @Test func aWiFiOnlyDownloadWaitsOnCellularWhileAnotherSessionRuns() async throws {
        let server = try await startServer()
        let wifiOnly = Resource.generated(size: 200 << 10, seed: 4)
        let any = Resource.generated(size: 100 << 10, seed: 5)
        server.serve("/wifi", resource: wifiOnly)
        server.serve("/any", resource: any)
        try await withHost(label: "txw", configure: patientLaunch) { host in
            await daemonReady(host)
            try await device(host, plugged: false, network: .cellular)
            let id = try await host.installProbe("com.txm.wifionly")
            // Session w does not allow cellular; session c (made after it) does.
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:w:wifi-only", "--on", "launch", "download:w:\(server.url("/wifi"))",
                "--on", "launch", "url-session:c", "--on", "launch", "download:c:\(server.url("/any"))",
            ])
            await waiting(host, id, ["Wi-Fi", "cellular"])
            // c's transfer was queued after w's, so had w been let through it would have started first.
            await event(host, id, "c's transfer finished") { $0.transfer == .finished && $0.session == "c" && $0.transferTask == 1 }
            await returned(host, id, "didCompleteWithError(task 1, nil)")
            #expect(try download(host, id, task: 1) == any.bytes(in: 0..<any.size), "the cellular session ran on cellular")
            #expect(server.requests("/wifi").isEmpty, "the Wi-Fi-only one did not")
            // On Wi-Fi (still on battery: power does not matter for it) it runs.
            try await device(host, network: .wifi)
            await event(host, id, "w's transfer finished") { $0.transfer == .finished && $0.session == "w" && $0.transferTask == 1 }
            await returned(host, id, "didCompleteWithError(task 1, nil)", nth: 2)
            #expect(try download(host, id, task: 1) == wifiOnly.bytes(in: 0..<wifiOnly.size))
            #expect(server.requests("/wifi").map(\.status) == [200])
        }
        try await server.stop()
    }

    // MARK: The background budget of session events

    @Test(.tags(.virtualClock)) func anAppThatNeverCallsTheEventsCompletionIsKilledWith2182bad3() async throws {
        let server = try await startServer()
        server.serve("/file", resource: .generated(size: 64 << 10, seed: 6))
        try await withHost(label: "txk", clock: .virtual, configure: patientLaunch) { host in
            let id = try await host.installProbe("com.txm.never")
            // No network: the transfer waits until the app is suspended.
            await daemonReady(host)
            try await device(host, network: DeviceNetwork.none)
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--events-completion", "never",
                "--on", "launch", "url-session:s", "--on", "launch", "download:s:\(server.url("/file"))",
            ])
            await waiting(host, id, ["no network"])
            try await host.supervisor.background(id)
            await returned(host, id, "didEnterBackground")
            _ = try await host.supervisor.advanceClock(by: .zero)
            #expect(try await host.supervisor.status(id).first?.state == .suspended)
            // The transfer ends while it is suspended: woken, handleEvents, the task's events,
            // urlSessionDidFinishEvents; and the completion is never called.
            try await device(host, network: .wifi)
            await returned(host, id, "handleEventsForBackgroundURLSession(s)")
            await returned(host, id, "didCompleteWithError(task 1, nil)")
            await returned(host, id, "urlSessionDidFinishEvents(s)")
            let wake = await host.events(id).last { $0.kind == .transition && $0.from == .suspended }
            #expect(wake?.to == .background, "woken, not relaunched")
            #expect(try await host.supervisor.status(id).first?.state == .background, "kept running for the completion")
            // The budget is the background task time (30 s, ios13): not a second earlier.
            _ = try await host.supervisor.advanceClock(by: .seconds(29))
            #expect(try await host.supervisor.status(id).first?.state == .background)
            _ = try await host.supervisor.advanceClock(by: .seconds(1))
            try await host.waitUntil(id, is: .notRunning)
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.terminationCode == "0x2182bad3")
            #expect(report.reason.contains("handleEventsForBackgroundURLSession(s)"), "\(report.reason)")
            #expect(!appLog(host, id).contains("events completed s"))
        }
        try await server.stop()
    }

    /// Issue 33, point 4: iOS resumes the app for a background session "when all of the
    /// tasks associated with a session are complete" (Apple, "Downloading files in the
    /// background"; Quinn, developer.apple.com/forums/thread/14854: "Eventually all the
    /// tasks complete and nsurlsessiond resumes your app"), once, not per finished batch.
    @Test(.tags(.virtualClock)) func manyDownloadsWakeTheSuspendedAppOnce() async throws {
        let count = 12
        let server = try await startServer()
        for n in 1...count { server.serve("/f/\(n)", resource: .generated(size: 16 << 10, seed: UInt64(n))) }
        // The last download is held mid-body until the test lets it go: the others all
        // finish while it runs, whatever the machine's speed.
        server.serve("/f/\(count)", resource: .generated(size: 64 << 10, seed: 99))
        server.inject("/f/\(count)", [.holdAfter(bytes: 16 << 10)])
        try await withHost(label: "txw", clock: .virtual, configure: patientLaunch) { host in
            let id = try await host.installProbe("com.txm.once")
            await daemonReady(host)
            try await device(host, network: DeviceNetwork.none)
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s", "--on", "launch", "downloads:s:\(count):\(server.url("/f/{n}"))",
            ])
            await waiting(host, id, ["no network"], nth: count)
            try await host.supervisor.background(id)
            await returned(host, id, "didEnterBackground")
            _ = try await host.supervisor.advanceClock(by: .zero)
            #expect(try await host.supervisor.status(id).first?.state == .suspended)
            try await device(host, network: .wifi)
            await event(host, id, "the finished transfers but the held one", nth: count - 1) { $0.transfer == .finished }
            await server.waitUntilHeld("/f/\(count)")
            // A wake would have been decided in the same step as the last finished note.
            let early = await host.events(id)
            #expect(!early.contains { $0.kind == .signal && $0.cause.hasPrefix("SIGCONT") }, "woken while a task still ran")
            #expect(!early.contains { $0.kind == .callback && $0.callback?.hasPrefix("handleEvents") == true })
            #expect(try await host.supervisor.status(id).first?.state == .suspended)
            server.release("/f/\(count)")
            await returned(host, id, "urlSessionDidFinishEvents(s)")
            let all = await host.events(id)
            #expect(all.filter { $0.kind == .signal && $0.cause.hasPrefix("SIGCONT") }.count == 1, "one wake")
            #expect(all.filter { $0.kind == .callback && $0.callback == "handleEventsForBackgroundURLSession(s)" }.count == 1)
            let completed = all.filter { $0.kind == .callback && $0.success != nil }
            #expect(Set(completed.compactMap(\.transferTask?.rawValue)) == Set(1...count))
            #expect(completed.allSatisfy { $0.success == true })
            for task in 1..<count { #expect(try download(host, id, task: task).count == 16 << 10) }
            #expect(try download(host, id, task: count).count == 64 << 10)
        }
        try await server.stop()
    }

    /// Scripts the app's next launches: the host relaunches an app in the background with
    /// no arguments, so the probe reads them from its container.
    func saveProbeArguments(_ host: TestHost, _ id: BundleID, _ arguments: [String]) throws {
        let dir = container(host, id) + "/Library/Preferences"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try (arguments.joined(separator: "\n") + "\n").write(toFile: dir + "/ProbeApp.args", atomically: true, encoding: .utf8)
    }

    /// Launches the probe with `count` downloads of session s waiting for the network,
    /// then kills it (the system, not the user: the transfers go on). Returns the URLs' server.
    func transfersOfAKilledApp(_ host: TestHost, _ id: BundleID, count: Int) async throws -> HTTPTestServer {
        let server = try await startServer()
        for n in 1...count { server.serve("/f/\(n)", resource: .generated(size: 16 << 10, seed: UInt64(n))) }
        await daemonReady(host)
        try await device(host, network: DeviceNetwork.none)
        let pid = try await host.supervisor.launch(id, background: false, arguments: [
            "--on", "launch", "url-session:s", "--on", "launch", "downloads:s:\(count):\(server.url("/f/{n}"))",
        ])
        await waiting(host, id, ["no network"], nth: count)
        kill(pid, SIGKILL)
        try await host.waitUntil(id, is: .notRunning)
        return server
    }

    @Test func transfersThatFinishWhileTheAppLaunchesShareOneRoundOfEvents() async throws {
        let server = try await withHost(label: "txr", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.txm.round")
            let server = try await transfersOfAKilledApp(host, id, count: 4)
            // The background launch blocks in didFinishLaunching until the test lets it go, so
            // all four transfers have finished by then, whatever the machine's speed.
            let fifo = try makeContainerFIFO(host, id, "release.fifo")
            try saveProbeArguments(host, id, ["--on", "launch", "wait-fifo:\(fifo)"])
            try await device(host, network: .wifi)
            await event(host, id, "the fourth finished transfer", nth: 4) { $0.transfer == .finished }
            // Opened read-write, a FIFO opens at once; kept open until the end, so the app
            // reads the byte whenever it gets to it.
            let writer = open(fifo, O_RDWR | O_CLOEXEC)
            #expect(writer >= 0)
            defer { close(writer) }
            var byte: UInt8 = 1
            #expect(write(writer, &byte, 1) == 1)
            await returned(host, id, "urlSessionDidFinishEvents(s)")
            let callbacks = await host.callbacks(id).filter { $0.lowercased().contains("urlsession") || $0.contains("(task ") }
            #expect(callbacks.first == "handleEventsForBackgroundURLSession(s)")
            #expect(callbacks.last == "urlSessionDidFinishEvents(s)")
            #expect(callbacks.filter { $0.hasPrefix("handleEvents") }.count == 1, "one round: \(callbacks)")
            #expect(callbacks.filter { $0.hasPrefix("urlSessionDidFinishEvents") }.count == 1, "\(callbacks)")
            #expect(Set(callbacks.filter { $0.hasPrefix("didCompleteWithError") }) == Set((1...4).map { "didCompleteWithError(task \($0), nil)" }))
            // The same in typed fields: each task's session, task and success, and the
            // finished notes' success.
            let all = await host.events(id)
            let completed = all.filter { $0.kind == .callback && $0.success != nil }
            #expect(completed.map(\.session) == Array(repeating: "s", count: 4))
            #expect(Set(completed.compactMap(\.transferTask?.rawValue)) == Set(1...4))
            #expect(completed.allSatisfy { $0.success == true })
            let downloaded = all.filter { $0.kind == .callback && $0.callback?.hasPrefix("didFinishDownloadingTo") == true }
            #expect(Set(downloaded.compactMap(\.transferTask?.rawValue)) == Set(1...4))
            #expect(all.filter { $0.transfer == .finished }.allSatisfy { $0.success == true })
            #expect(all.filter { $0.kind == .callback && $0.callback?.hasPrefix("handleEvents") == true }.map(\.session) == ["s"])
            let launches = await host.events(id).filter { $0.kind == .transition && $0.from == .notRunning }
            #expect(launches.count == 2, "the user's launch and one background launch")
            for task in 1...4 { #expect(try download(host, id, task: task).count == 16 << 10) }
            return server
        }
        try await server.stop()
    }

    @Test(.tags(.virtualClock)) func anAppRelaunchedInTheBackgroundThatNeverCallsTheCompletionIsKilledWith2182bad3() async throws {
        let server = try await withHost(label: "txk", clock: .virtual, configure: patientLaunch) { host in
            let id = try await host.installProbe("com.txm.relaunch-never")
            let server = try await transfersOfAKilledApp(host, id, count: 1)
            try saveProbeArguments(host, id, ["--events-completion", "never"])
            try await device(host, network: .wifi)
            await returned(host, id, "urlSessionDidFinishEvents(s)")
            let relaunch = await host.events(id).last { $0.kind == .transition && $0.from == .notRunning }
            #expect(relaunch?.to == .background)
            #expect(relaunch?.cause.contains("handleEventsForBackgroundURLSession") == true)
            _ = try await host.supervisor.advanceClock(by: .seconds(29))
            #expect(try await host.supervisor.status(id).first?.state == .background, "kept running for the completion")
            _ = try await host.supervisor.advanceClock(by: .seconds(1))
            try await host.waitUntil(id, is: .notRunning)
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.terminationCode == "0x2182bad3")
            #expect(report.reason.contains("handleEventsForBackgroundURLSession(s)"), "\(report.reason)")
            return server
        }
        try await server.stop()
    }

    // MARK: Uploads

    @Test func anUploadOfAFileInTheContainerSendsExactlyItsBytes() async throws {
        let server = try await startServer()
        try await withHost(label: "txu", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.txm.upload")
            // Under the server's 1 MiB kept prefix, so every byte received is compared.
            let payload = Resource.generated(size: 700_001, seed: 7).bytes(in: 0..<700_001)
            try FileManager.default.createDirectory(atPath: container(host, id) + "/Documents", withIntermediateDirectories: true)
            try payload.write(to: URL(fileURLWithPath: container(host, id) + "/Documents/x.bin"))
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s", "--on", "launch", "upload:s:\(server.url("/up")):Documents/x.bin",
            ])
            await returned(host, id, "didCompleteWithError(task 1, nil)")
            #expect(server.uploads("/up") == [Int64(payload.count)])
            #expect(server.uploadPrefixes("/up") == [payload], "the server received exactly the file's bytes")
            #expect(server.requests("/up").map(\.method) == ["POST"])
            #expect(server.requests("/up").map(\.status) == [201])
            #expect(appLog(host, id).contains("upload started task=1"))
            #expect(FileManager.default.fileExists(atPath: container(host, id) + "/Documents/x.bin"), "the app's file is left alone")
        }
        try await server.stop()
    }

    @Test func anUploadOfAFileOutsideTheContainerIsRefused() async throws {
        let server = try await startServer()
        try await withHost(label: "txr", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.txm.outside")
            let docs = container(host, id) + "/Documents"
            try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
            // Readable files outside: in the state directory (what ../../ reaches) and behind a symlink.
            let outside = host.dir.path + "/other"
            try Data("not the app's".utf8).write(to: URL(fileURLWithPath: outside))
            try FileManager.default.createSymbolicLink(atPath: docs + "/link.bin", withDestinationPath: outside)
            try Data("mine".utf8).write(to: URL(fileURLWithPath: docs + "/ok.bin"))
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s",
                "--on", "launch", "upload:s:\(server.url("/up")):/etc/passwd",
                "--on", "launch", "upload:s:\(server.url("/up")):../../other",
                "--on", "launch", "upload:s:\(server.url("/up")):Documents/link.bin",
                // One inside, last: once it is through, the others would have been too.
                "--on", "launch", "upload:s:\(server.url("/up")):Documents/ok.bin",
            ])
            await returned(host, id, "didCompleteWithError(task 1, nil)")
            let refusals = appLog(host, id).split(separator: "\n").filter { $0.contains("upload: failed: noPermissionsToReadFile") }
            #expect(refusals.count == 3, "\(appLog(host, id))")
            #expect(refusals.contains { $0.contains("/etc/passwd") })
            #expect(appLog(host, id).contains("upload started task=1"), "the refused ones got no task number")
            #expect(server.uploadPrefixes("/up") == [Data("mine".utf8)], "only the file inside was sent")
            let queued = await host.events(id).filter { $0.transfer == .queued }
            #expect(queued.count == 1, "\(queued.map(\.cause))")
        }
        try await server.stop()
    }

    // MARK: Redirects

    @Test func aRedirectedDownloadCompletesWithTheTargetsBytes() async throws {
        let server = try await startServer()
        let other = try await startServer()
        let a = Resource.generated(size: 300 << 10, seed: 8)
        let b = Resource.generated(size: 50 << 10, seed: 9)
        let c = Resource.bytes(Data("elsewhere\n".utf8))
        server.serve("/a", resource: a)
        server.serve("/b", resource: b)
        other.serve("/c", resource: c)
        server.redirect("/moved", to: "/a", status: 301)
        server.redirect("/found", to: "/b", status: 302)
        server.redirect("/away", to: other.url("/c"), status: 307)
        try await withHost(label: "txh", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.txm.redirect")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s",
                "--on", "launch", "download:s:\(server.url("/moved"))",
                "--on", "launch", "download:s:\(server.url("/found"))",
                "--on", "launch", "download:s:\(server.url("/away"))",
            ])
            for task in 1...3 { await returned(host, id, "didCompleteWithError(task \(task), nil)") }
            #expect(try download(host, id, task: 1) == a.bytes(in: 0..<a.size))
            #expect(try download(host, id, task: 2) == b.bytes(in: 0..<b.size))
            #expect(try download(host, id, task: 3) == c.bytes(in: 0..<c.size), "to another origin too")
            #expect(server.requests("/moved").map(\.status) == [301])
            #expect(server.requests("/found").map(\.status) == [302])
            #expect(server.requests("/a").map(\.status) == [200])
            #expect(other.requests("/c").map(\.status) == [200])
        }
        try await server.stop()
        try await other.stop()
    }

    // MARK: HTTPS

    @Test func anHTTPSDownloadCompletesWhenTheHostTrustsTheServersCA() async throws {
        let certDir = try TempDir("tls")
        defer { certDir.remove() }
        let certs = try await TestCertificates.generate(in: certDir.path)
        let server = try await startServer(tls: certs.serverFiles)
        let resource = Resource.generated(size: 512 << 10, seed: 10)
        server.serve("/file", resource: resource)
        #expect(server.url("/file").hasPrefix("https://127.0.0.1:"))
        try await withHost(label: "txs", configure: { patientLaunch(&$0); $0.transferSettings.extraCA = certs.caCertificate }) { host in
            let id = try await host.installProbe("com.txm.https")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s", "--on", "launch", "download:s:\(server.url("/file"))",
            ])
            await returned(host, id, "didCompleteWithError(task 1, nil)")
            #expect(try download(host, id, task: 1) == resource.bytes(in: 0..<resource.size))
            #expect(server.requests("/file").map(\.status) == [200])
        }
        try await server.stop()
    }

    @Test func anHTTPSDownloadFromAnUntrustedServerFailsWithServerCertificateUntrusted() async throws {
        let certDir = try TempDir("tls")
        defer { certDir.remove() }
        let certs = try await TestCertificates.generate(in: certDir.path)
        let server = try await startServer(tls: certs.serverFiles)
        server.serve("/file", resource: .generated(size: 64 << 10, seed: 11))
        // No extra CA (and the daemon's default retries).
        try await withHost(label: "txn", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.txm.untrusted")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s", "--on", "launch", "download:s:\(server.url("/file"))",
            ])
            // One attempt takes the daemon's 30 s connect timeout: AsyncHTTPClient retries a
            // connection whose handshake fails until then. A retry would take as long again.
            let completed = await event(host, id, "didCompleteWithError of task 1", within: .seconds(75)) {
                $0.callback?.hasPrefix("didCompleteWithError(task 1, ") == true
            }
            let code = completed?.callback.map { String($0.dropFirst("didCompleteWithError(task 1, ".count).dropLast(")".count)) }
            let events = await host.events(id)
            let finished = events.first { $0.transfer == .finished && $0.session == "s" && $0.transferTask == 1 }
            // As iOS: NSURLErrorServerCertificateUntrusted, not a network error, and not retried.
            #expect(code == "serverCertificateUntrusted", "\(finished?.cause ?? "-")")
            #expect(finished?.cause.lowercased().contains("certificate") == true, "the reason says why: \(finished?.cause ?? "-")")
            #expect(!events.contains { $0.cause.contains("waiting: retry") }, "a trust failure is final")
            #expect(server.requests("/file").isEmpty, "no request got through the handshake")
            #expect(!FileManager.default.fileExists(atPath: container(host, id) + "/Documents/downloads/1"))
        }
        try await server.stop()
    }
}
