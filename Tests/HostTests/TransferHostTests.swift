import AppHostProtocol
import AppHostSystem
import Foundation
import HTTPTestServer
import TestSupport
import Testing
@testable import Host

let transferDaemonBuilt = productBuilt("apphost-transferd")

/// Background URLSession through the host and the real transfer daemon, against a real
/// HTTP server on loopback: delivery in front, waking a suspended app, launching a
/// killed one, and a user terminate cancelling.
@Suite("Background transfers through the host", .tags(.process, .network), .timeLimit(.minutes(2)),
       .enabled(if: probeBuilt && transferDaemonBuilt, "ProbeApp or apphost-transferd not built: run `swift build` first (scripts/test.sh does)"))
struct TransferHostTests {
    func returned(_ host: TestHost, _ id: BundleID, _ cause: String) async {
        _ = await host.waitForEvent(id) { $0.callback == cause }
    }

    func container(_ host: TestHost, _ id: BundleID) -> String { host.dir.path + "/containers/\(id)" }

    func startServer(size: Int, faults: [Fault] = []) async throws -> (HTTPTestServer, Resource) {
        let server = try await HTTPTestServer.start()
        let resource = Resource.generated(size: Int64(size), seed: 42)
        server.serve("/file", resource: resource)
        if !faults.isEmpty { server.inject("/file", faults) }
        return (server, resource)
    }

    @Test func aDownloadInTheForegroundReachesTheDelegateAndTheTemporaryFileIsRemoved() async throws {
        let (server, resource) = try await startServer(size: 1 << 20)
        try await withHost(label: "tx", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.tx.front")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s", "--on", "launch", "download:s:\(server.url("/file"))",
            ])
            await returned(host, id, "didCompleteWithError(task 1, nil)")
            let moved = try Data(contentsOf: URL(fileURLWithPath: container(host, id) + "/Documents/downloads/1"))
            #expect(moved == resource.bytes(in: 0..<(1 << 20)), "the app got the whole file")
            let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: container(host, id) + "/Library/Caches/com.apphost.transfers")) ?? []
            #expect(leftovers.isEmpty, "the temporary file is gone once the delegate returned: \(leftovers)")
        }
        try await server.stop()
    }

    @Test func aSuspendedAppIsWokenForItsSessionEventsAndSuspendedAgain() async throws {
        // Held after 64 KiB until the app is suspended: a loaded machine (CI) once took
        // longer to send it home than a paced 2 s download took to end.
        let (server, _) = try await startServer(size: 256 << 10, faults: [.holdAfter(bytes: 64 << 10)])
        try await withHost(label: "tx", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.tx.wake")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s", "--on", "launch", "download:s:\(server.url("/file"))",
            ])
            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .suspended)
            server.release("/file")
            // Bounded, so a failure shows what the host saw instead of hitting the time limit.
            let seen = await withTaskGroup(of: Bool.self) { group in
                group.addTask { await host.waitForEvent(id) { $0.transfer == .finished } != nil }
                group.addTask { try? await Task.sleep(for: .seconds(30)); return false }
                let first = await group.next() ?? false
                group.cancelAll()
                return first
            }
            if !seen {
                let trace = await host.events(id).map { "\($0.kind) \($0.cause)" }.joined(separator: "\n")
                let all = await host.supervisor.subscribe(bundleIdentifier: nil).past.filter { $0.bundleIdentifier == nil }.map(\.cause).joined(separator: "\n")
                Issue.record("the transfer never finished:\n\(trace)\nhost:\n\(all)\ndaemon log:\n\((try? String(contentsOfFile: host.dir.path + "/logs/apphost-transferd.log", encoding: .utf8)) ?? "-")")
                return
            }
            await returned(host, id, "handleEventsForBackgroundURLSession(s)")
            await returned(host, id, "urlSessionDidFinishEvents(s)")
            try await host.waitUntil(id, is: .suspended)
            #expect(kernelState(pid) == "T")
            let callbacks = await host.callbacks(id).filter { $0.lowercased().contains("urlsession") || $0.contains("task 1") }
            #expect(callbacks == ["handleEventsForBackgroundURLSession(s)", "didFinishDownloadingTo(task 1)",
                                  "didCompleteWithError(task 1, nil)", "urlSessionDidFinishEvents(s)"])
            #expect(FileManager.default.fileExists(atPath: container(host, id) + "/Documents/downloads/1"))
        }
        try await server.stop()
    }

    @Test func anAppKilledMidTransferIsLaunchedInTheBackgroundToCollectIt() async throws {
        // Held after 64 KiB until the app is dead: the kill certainly comes first.
        let (server, resource) = try await startServer(size: 256 << 10, faults: [.holdAfter(bytes: 64 << 10)])
        try await withHost(label: "tx", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.tx.killed")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s", "--on", "launch", "download:s:\(server.url("/file"))",
            ])
            _ = await host.waitForEvent(id) { $0.transfer == .queued }
            kill(pid, SIGKILL)
            try await host.waitUntil(id, is: .notRunning)
            server.release("/file")
            await returned(host, id, "didCompleteWithError(task 1, nil)")
            let relaunch = await host.events(id).last { $0.kind == .transition && $0.from == .notRunning }
            #expect(relaunch?.to == .background)
            #expect(relaunch?.cause.contains("handleEventsForBackgroundURLSession") == true)
            let moved = try Data(contentsOf: URL(fileURLWithPath: container(host, id) + "/Documents/downloads/1"))
            #expect(moved.count == 256 << 10)
            #expect(moved == resource.bytes(in: 0..<(256 << 10)))
            // ProbeApp calls the completion at once, before the events: the app still runs
            // until urlSessionDidFinishEvents, then is stopped once (not stopped between the
            // events and woken again).
            await returned(host, id, "urlSessionDidFinishEvents(s)")
            try await host.waitUntil(id, is: .suspended)
            let signals = await host.events(id).filter { $0.kind == .signal && $0.pid != pid }.map(\.cause)
            #expect(signals.filter { $0.hasPrefix("SIGSTOP") }.count == 1, "\(signals)")
            #expect(!signals.contains { $0.hasPrefix("SIGCONT") }, "\(signals)")
        }
        try await server.stop()
    }

    /// `sessionSendsLaunchEvents = false`: a transfer that finishes while the app is dead
    /// launches nothing; its events wait until the app makes the session again.
    @Test func withoutLaunchEventsTheEventsWaitForTheNextLaunch() async throws {
        let (server, resource) = try await startServer(size: 128 << 10, faults: [.holdAfter(bytes: 32 << 10)])
        try await withHost(label: "tx", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.tx.nolaunch")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s:no-launch-events", "--on", "launch", "download:s:\(server.url("/file"))",
            ])
            _ = await host.waitForEvent(id) { $0.transfer == .queued }
            kill(pid, SIGKILL)
            try await host.waitUntil(id, is: .notRunning)
            server.release("/file")
            let held = await host.waitForEvent(id) { $0.transfer == .heldForNextLaunch }
            #expect(held != nil)
            #expect(try await host.supervisor.status(id).first?.state == .notRunning, "no background launch")
            #expect(await host.events(id).filter { $0.kind == .transition && $0.from == .notRunning }.count == 1, "launched once, by the test")
            // The user opens the app; it makes the session again and collects the download.
            _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "url-session:s:no-launch-events"])
            await returned(host, id, "didCompleteWithError(task 1, nil)")
            let moved = try Data(contentsOf: URL(fileURLWithPath: container(host, id) + "/Documents/downloads/1"))
            #expect(moved == resource.bytes(in: 0..<(128 << 10)))
        }
        try await server.stop()
    }

    /// `sessionSendsLaunchEvents = false` and the app suspended: it is not resumed for
    /// the events ("whether the app should be resumed or launched in the background when
    /// transfers finish": neither); they reach it when it runs again, without
    /// handleEventsForBackgroundURLSession.
    @Test func withoutLaunchEventsASuspendedAppIsNotResumedForTheEvents() async throws {
        let (server, resource) = try await startServer(size: 128 << 10, faults: [.holdAfter(bytes: 32 << 10)])
        try await withHost(label: "tx", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.tx.nolaunch.suspended")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s:no-launch-events", "--on", "launch", "download:s:\(server.url("/file"))",
            ])
            _ = await host.waitForEvent(id) { $0.transfer == .queued }
            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .suspended)
            server.release("/file")
            let held = await host.waitForEvent(id) { $0.transfer == .heldUntilResumed }
            #expect(held != nil)
            #expect(try await host.supervisor.status(id).first?.state == .suspended, "not resumed for the events")
            #expect(await host.events(id).filter { $0.kind == .signal && $0.cause.hasPrefix("SIGCONT") }.isEmpty)
            // The user brings it to the front: the delegate hears the download, with no
            // handleEventsForBackgroundURLSession (the app was not woken for them).
            try await host.supervisor.foreground(id)
            await returned(host, id, "didCompleteWithError(task 1, nil)")
            let moved = try Data(contentsOf: URL(fileURLWithPath: container(host, id) + "/Documents/downloads/1"))
            #expect(moved == resource.bytes(in: 0..<(128 << 10)))
            #expect(await host.events(id).filter { $0.kind == .callback && ($0.callback ?? "").hasPrefix("handleEventsForBackgroundURLSession") }.isEmpty)
        }
        try await server.stop()
    }

    /// The host supervises the daemon: killed with SIGKILL mid-download, it is started
    /// again (after its backoff) and the download resumes and reaches the app whole.
    @Test func aKilledDaemonIsRestartedAndTheDownloadStillArrives() async throws {
        let size = 512 << 10
        // Held after 256 KiB: the daemon is certainly killed before the end, however slow the machine.
        let (server, resource) = try await startServer(size: size, faults: [.holdAfter(bytes: 256 << 10)])
        try await withHost(label: "tx", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.tx.daemonkill")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s", "--on", "launch", "download:s:\(server.url("/file"))",
            ])
            _ = await host.waitForEvent(id) { $0.transfer == .queued }
            // The first daemon is in the middle of the download (the server holds its body
            // after 256 KiB): killed before that, it had not taken the job, and the second
            // daemon's request was the one held, for ever (seen when the test ran alone).
            await server.waitUntilHeld("/file")
            let (_, live, sub) = await host.supervisor.subscribe(bundleIdentifier: nil)
            let first = try #require(await host.supervisor.transferDaemonPID())
            kill(first, SIGKILL)
            var restarted = false
            for await e in live where e.bundleIdentifier == nil {
                if e.transfer == .daemonReady { restarted = true; break }
            }
            await host.supervisor.unsubscribe(sub)
            #expect(restarted)
            let second = await host.supervisor.transferDaemonPID()
            #expect(second != nil && second != first, "a new daemon process")
            await returned(host, id, "didCompleteWithError(task 1, nil)")
            let moved = try Data(contentsOf: URL(fileURLWithPath: container(host, id) + "/Documents/downloads/1"))
            #expect(moved == resource.bytes(in: 0..<Int64(size)))
            let (past, _, again) = await host.supervisor.subscribe(bundleIdentifier: nil)
            await host.supervisor.unsubscribe(again)
            #expect(past.contains { $0.cause.contains("transfer daemon exited") }, "the host saw the daemon die and said so")
        }
        try await server.stop()
    }

    @Test func aTransferOutlivesAHostRestartAndIsDeliveredByABackgroundLaunch() async throws {
        // The first request's body stops after 64 KiB until released: the first host stops
        // with the download certainly unfinished, however fast or slow the machine.
        let (server, resource) = try await startServer(size: 192 << 10, faults: [.holdAfter(bytes: 64 << 10)])
        try await withStateDirectory("tx") { dir in
            let id = try await withHost(directory: dir, configure: patientLaunch) { first in
                let id = try await first.installProbe("com.tx.restart")
                _ = try await first.supervisor.launch(id, background: false, arguments: [
                    "--on", "launch", "url-session:s", "--on", "launch", "download:s:\(server.url("/file"))",
                ])
                _ = await first.waitForEvent(id) { $0.transfer == .queued }
                return id
            }
            server.release("/file")

            // The records are in apphost.sqlite; the new host's daemon resumes the download
            // and the app, ended by the shutdown (not by the user), is launched to collect it.
            try await withHost(reopening: dir, configure: patientLaunch) { second in
                await returned(second, id, "didCompleteWithError(task 1, nil)")
                let relaunch = await second.events(id).last { $0.kind == .transition && $0.from == .notRunning }
                #expect(relaunch?.to == .background)
                let moved = try Data(contentsOf: URL(fileURLWithPath: container(second, id) + "/Documents/downloads/1"))
                #expect(moved == resource.bytes(in: 0..<(192 << 10)))
                // The session's task numbers go on from where they were.
                try await second.supervisor.terminate(id)
                try await second.waitUntil(id, is: .notRunning)
                _ = try await second.supervisor.launch(id, background: false, arguments: [
                    "--on", "launch", "url-session:s", "--on", "launch", "download:s:\(server.url("/file"))",
                ])
                await returned(second, id, "didCompleteWithError(task 2, nil)")
            }
        }
        try await server.stop()
    }

    @Test func aUserTerminateCancelsTheAppsTransfers() async throws {
        // Held after 64 KiB: in progress when the user terminates, however slow the machine.
        let (server, _) = try await startServer(size: 4 << 20, faults: [.holdAfter(bytes: 64 << 10)])
        try await withHost(label: "tx", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.tx.swiped")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s", "--on", "launch", "download:s:\(server.url("/file"))",
            ])
            _ = await host.waitForEvent(id) { $0.transfer == .queued }
            try await host.supervisor.terminate(id)
            let cancelled = await host.waitForEvent(id) { $0.transfer == .cancelledByUser }
            #expect(cancelled != nil)
        }
        try await server.stop()
    }

    @Test func uninstallingCancelsTheAppsTransfersAndForgetsItsSessions() async throws {
        let (server, _) = try await startServer(size: 4 << 20, faults: [.holdAfter(bytes: 64 << 10)])
        try await withHost(label: "tx", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.tx.gone")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s", "--on", "launch", "download:s:\(server.url("/file"))",
            ])
            _ = await host.waitForEvent(id) { $0.transfer == .queued }
            try await host.supervisor.uninstall(id)
            let cancelled = await host.waitForEvent(id) { $0.transfer == .cancelledByUninstall && $0.cause.contains("1 background transfer(s)") }
            #expect(cancelled != nil)
            let store = try Store(path: host.dir.path + "/apphost.sqlite")
            #expect(try store.transfers().isEmpty)
            #expect(try store.transferSessions().isEmpty)
        }
        try await server.stop()
    }

    @Test func theDaemonStartsWithTheDevicesConditionsSoNoJobRunsWithoutNetwork() async throws {
        let (server, resource) = try await startServer(size: 64 << 10)
        try await withStateDirectory("tx") { dir in
            let id = try await withHost(directory: dir, configure: patientLaunch) { first in
                let id = try await first.installProbe("com.tx.offline")
                _ = try await first.supervisor.modeCommand(.deviceNetwork(.none))
                return id
            }
            // The setting is persisted; the new host's daemon is spawned knowing it, and a job
            // made at once (while the daemon may still be starting) waits.
            try await withHost(reopening: dir, configure: patientLaunch) { second in
                _ = try await second.supervisor.launch(id, background: false, arguments: [
                    "--on", "launch", "url-session:s", "--on", "launch", "download:s:\(server.url("/file"))",
                ])
                let waiting = await second.waitForEvent(id) { $0.transfer == .waiting && $0.cause.contains("no network") }
                #expect(waiting != nil)
                #expect(server.requests("/file").isEmpty, "nothing was fetched without a network")
                _ = try await second.supervisor.modeCommand(.deviceNetwork(.wifi))
                await returned(second, id, "didCompleteWithError(task 1, nil)")
                let moved = try Data(contentsOf: URL(fileURLWithPath: container(second, id) + "/Documents/downloads/1"))
                #expect(moved == resource.bytes(in: 0..<(64 << 10)))
            }
        }
        try await server.stop()
    }

    @Test func cancelWithResumeDataThenResumeFetchesOnlyTheRest() async throws {
        // Held after 768 KiB (past the first progress, which the daemon reports every 512 KiB
        // committed): the cancel at the first progress comes before the end, however slow the
        // machine; the resumed request is not held.
        let (server, resource) = try await startServer(size: 2 << 20, faults: [.holdAfter(bytes: 768 << 10)])
        try await withHost(label: "tx", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.tx.resume")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s", "--on", "launch", "download:s:\(server.url("/file"))",
                "--on", "progress", "cancel-resume:s:1",
                "--on", "task-completed", "download-resume:s:Documents/resume-1.plist",
            ])
            await returned(host, id, "cancel(byProducingResumeData:) completion(task 1, data)")
            await returned(host, id, "didCompleteWithError(task 1, cancelled)")
            await returned(host, id, "didCompleteWithError(task 2, nil)")
            let queued = await host.events(id).first { $0.transfer == .queued && $0.session == "s" && $0.transferTask == 2 }
            #expect(queued?.cause.contains("resuming at byte") == true, "\(queued?.cause ?? "no task 2")")
            let moved = try Data(contentsOf: URL(fileURLWithPath: container(host, id) + "/Documents/downloads/2"))
            #expect(moved == resource.bytes(in: 0..<(2 << 20)))
            let requests = server.requests("/file")
            #expect(requests.count == 2)
            if requests.count == 2 {
                #expect(requests[1].status == 206, "the resumed task asked for the rest only")
                #expect(requests[1].ifRange == resource.derivedETag)
                #expect(requests[0].bodyBytesSent + requests[1].bodyBytesSent >= 2 << 20)
            }
            let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: container(host, id) + "/Library/Caches/com.apphost.transfers")) ?? []
            #expect(leftovers.isEmpty, "the partial file moved to the resumed task and was handed over: \(leftovers)")
        }
        try await server.stop()
    }

    /// A resume's batch is written on the database's queue while the host goes on: a
    /// cancel asked right after it must still find the task written and reach the daemon
    /// after the job, and the answers keep the order of the questions.
    @Test func aCancelRightAfterResumeComesAfterItsTask() async throws {
        let (server, _) = try await startServer(size: 4 << 20, faults: [.holdAfter(bytes: 64 << 10)])
        try await withHost(label: "tx", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.tx.cancelnow")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s", "--on", "launch", "download:s:\(server.url("/file"))",
                "--on", "launch", "cancel-task:s:1",
            ])
            await returned(host, id, "didCompleteWithError(task 1, cancelled)")
            let events = await host.events(id)
            let queued = events.firstIndex { $0.transfer == .queued && $0.transferTask == 1 }
            let cancelled = events.firstIndex { $0.callback == "didCompleteWithError(task 1, cancelled)" }
            #expect(queued != nil && cancelled != nil && queued! < cancelled!, "queued, then cancelled")
            #expect(!events.contains { $0.callback == "didCompleteWithError(task 1, nil)" }, "never completed")
            #expect(!FileManager.default.fileExists(atPath: container(host, id) + "/Documents/downloads/1"))
        }
        try await server.stop()
    }

    @Test func aNonHTTPURLIsRefused() async throws {
        try await withHost(label: "tx", configure: patientLaunch) { host in
            let id = try await host.installProbe("com.tx.ftp")
            _ = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "url-session:s", "--on", "launch", "download:s:ftp://example.com/x",
            ])
            let log = (try? String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)) ?? ""
            #expect(log.contains("unsupportedURL") || log.contains("http and https"), "\(log)")
        }
    }
}

/// Apps reach the daemon only through the host: it listens on nothing (no path, no
/// port); its one socket is the host's end of a socketpair made at spawn.
@Suite("Transfer daemon isolation", .tags(.process), .timeLimit(.minutes(3)), .enabled(if: transferDaemonBuilt, "apphost-transferd not built: run `swift build` first"))
struct TransferDaemonIsolationTests {
    @Test func theDaemonHasNoListeningSocketAnAppCouldConnectTo() async throws {
        try await withHost(label: "txi", configure: patientLaunch) { host in
            let (past, live, sub) = await host.supervisor.subscribe(bundleIdentifier: nil)
            if !past.contains(where: { $0.transfer == .daemonReady }) {
                for await e in live where e.transfer == .daemonReady { break }
            }
            await host.supervisor.unsubscribe(sub)
            let pid = try #require(await host.supervisor.transferDaemonPID())
            // Socket inodes the daemon holds.
            var inodes: Set<String> = []
            for fd in try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") {
                if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"),
                   target.hasPrefix("socket:[") {
                    inodes.insert(String(target.dropFirst("socket:[".count).dropLast()))
                }
            }
            #expect(!inodes.isEmpty, "the daemon holds its socket to the host")
            // /proc/net/unix: Num RefCount Protocol Flags Type St Inode Path; Flags 00010000 = listening.
            // Read to the end (a /proc file reports size 0; a one-shot read can stop early).
            func procFile(_ path: String) -> String {
                guard let h = FileHandle(forReadingAtPath: path) else { return "" }
                defer { try? h.close() }
                return String(decoding: h.readDataToEndOfFile(), as: UTF8.self)
            }
            let unix = procFile("/proc/net/unix").split(separator: "\n").dropFirst()
            let mine = unix.map { $0.split(separator: " ", omittingEmptySubsequences: true) }.filter { $0.count >= 7 && inodes.contains(String($0[6])) }
            #expect(!mine.isEmpty, "its sockets are unix sockets")
            #expect(mine.allSatisfy { $0[3] != "00010000" }, "none listens: \(mine)")
            #expect(mine.allSatisfy { $0.count == 7 }, "none has a path: \(mine)")
            // And no TCP or UDP socket at all.
            for table in ["/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6"] {
                let rows = procFile(table).split(separator: "\n").dropFirst()
                let inet = rows.map { $0.split(separator: " ", omittingEmptySubsequences: true) }.filter { $0.count > 9 && inodes.contains(String($0[9])) }
                #expect(inet.isEmpty, "\(table): \(inet)")
            }
        }
    }
}
