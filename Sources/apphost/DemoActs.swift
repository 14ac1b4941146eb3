import AppHostProtocol
import Foundation
import Host
import LoopbackHTTP

extension DemoNarrator {
    /// Waits for the first event of `id` (past or future) matching `predicate`, at most
    /// `limit` of real time; nil (and a line saying so) after that.
    @discardableResult
    func waitForEvent(_ id: BundleID, _ what: String, limit: Duration,
                      where predicate: @escaping @Sendable (HostEvent) -> Bool) async -> HostEvent? {
        let (past, live, subscription) = await supervisor.subscribe(bundleIdentifier: id)
        defer { Task { await supervisor.unsubscribe(subscription) } }
        if let event = past.first(where: predicate) { return event }
        let event = await firstEvent(in: live, within: limit, where: predicate)
        if event == nil { line("   (gave up waiting for \(id)'s \(what))") }
        return event
    }
}

/// Act 4: a background download that outlives a dropped connection and the app itself,
/// on the real clock, from a real HTTP server on loopback, through apphost-transferd.
struct TransfersDemo: DemoNarrator {
    let supervisor: Supervisor
    let manifests: String
    let stateDirectory: String
    let cursor = EventCursor()
    let probe = BundleID.sample("com.example.probe")
    let size: Int64 = 8 << 20
    let dropAfter: Int64 = 3 << 20

    func run() async {
        let server: HTTPTestServer
        do {
            server = try await HTTPTestServer.start()
        } catch {
            line("act 4 skipped: cannot start an HTTP server on loopback: \(error)")
            await supervisor.requestShutdown()
            return
        }
        let resource = Resource.generated(size: size, seed: 7, etag: "\"v1\"")
        server.serve("/big.bin", resource: resource)
        // The first answer is cut after 3 MiB; the rest comes at 2 MiB/s, so the app can be
        // killed while it downloads.
        server.inject("/big.bin", [.dropAfter(bytes: dropAfter), .slow(bytesPerSecond: 2 << 20)])
        let url = server.url("/big.bin")
        await narrate {
            await say("act 4: a background download (apphost-transferd), on the real clock; \(size >> 20) MiB from a server on \(server.host):\(server.port)")
            await say("$ apphost install manifests/Probe.app")
            _ = try await supervisor.install(path: manifests + "/Probe.app", settings: [:])
            await say("$ apphost launch \(probe) -- --on launch url-session:dl --on launch download:dl:\(url)")
            var pid: Int32 = 0
            try await expectEvent(probe, "the download queued", after: {
                pid = try await supervisor.launch(probe, background: false, arguments: [
                    "--on", "launch", "url-session:dl", "--on", "launch", "download:dl:\(url)",
                ])
            }, where: { $0.kind == .service && $0.cause.contains("queued") })
            await show("   \(probe): \(pid)")

            await say("$ apphost background \(probe)   (nothing holds it: suspended while the daemon downloads)")
            try await supervisor.background(probe)
            await supervisor.waitUntil(probe, is: .suspended)
            await show(await status(probe))

            await say("(the server cuts the connection after \(dropAfter >> 20) MiB: the daemon waits, then asks for the rest)")
            await waitForEvent(probe, "the transfer's retry", limit: .seconds(20)) { $0.kind == .service && $0.cause.contains("waiting") }

            await say("$ kill -9 \(pid)   (the system ends the suspended app, as jetsam would; the download goes on)")
            kill(pid, SIGKILL)
            await supervisor.waitUntil(probe, is: .notRunning)
            await say("(when the download ends, the host launches the app in the background to collect it)")
            await waitForEvent(probe, "didCompleteWithError", limit: .seconds(30)) {
                $0.kind == .callback && $0.cause == "didCompleteWithError(task 1, nil) returned"
            }
            for text in logLines(probe, containing: "task 1") { await show("   logs/\(probe).log: \(text)") }

            await say("what the server saw, and what the app got")
            for request in server.requests("/big.bin") {
                let range = request.range.map { "Range: \($0), If-Range: \(request.ifRange ?? "-")" } ?? "no Range"
                await show("   server: \(request.method) /big.bin (\(range)) → \(request.status), \(request.bodyBytesSent) bytes sent")
            }
            let path = stateDirectory + "/containers/\(probe)/Documents/downloads/1"
            let got = FileManager.default.contents(atPath: path)
            let same = got == resource.bytes(in: 0..<size)
            await show("   containers/\(probe)/Documents/downloads/1: \(got?.count ?? 0) bytes, \(same ? "byte for byte the server's file" : "NOT the server's file")")
            await supervisor.waitUntil(probe, is: .suspended)
            await show(await status(probe))
        }
        try? await server.stop()
    }
}

/// Act 5: app-switcher snapshots and the privacy check, on the virtual clock.
struct SnapshotsDemo: DemoNarrator {
    let supervisor: Supervisor
    let manifests: String
    let stateDirectory: String
    let cursor = EventCursor()
    let bank = BundleID.sample("com.example.bank")

    func run() async {
        await narrate {
            await say("act 5: app-switcher snapshots (virtual clock)")
            await say("$ apphost install manifests/Bank.app; apphost launch \(bank)")
            _ = try await supervisor.install(path: manifests + "/Bank.app", settings: [:])
            _ = try await supervisor.launch(bank, background: false, arguments: [])
            await supervisor.waitUntil(bank, is: .active)
            await say("$ apphost background \(bank)   (its Info.plist says AppHost.SnapshotPolicy = redact)")
            try await expectEvent(bank, "its snapshot", after: { try await supervisor.background(bank) },
                                  where: { $0.kind == .snapshot })
            let info = try await supervisor.snapshot(bank)
            if let layer = info.textLayer, let data = FileManager.default.contents(atPath: layer),
               let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
               let texts = object["texts"] as? [[String: Any]] {
                let shown = texts.compactMap { $0["text"] as? String }.map { "\"\($0)\"" }.joined(separator: ", ")
                await show("   text layer \(layer): \(shown) (no balance, no password)")
            }
            await say("$ apphost terminate \(bank)")
            try await supervisor.terminate(bank)

            await say("$ apphost privacy-check manifests/Bank.app manifests/BankLeaky.app manifests/BankCover.app")
            await show("   (each app: foreground, home button, a background fetch if it has the mode; every snapshot checked)")
            var reports: [String] = []
            await quietly {
                for name in ["Bank", "BankLeaky", "BankCover"] {
                    reports.append(await PrivacyRun(supervisor: supervisor, bundle: manifests + "/\(name).app").run().report(pictures: false))
                }
            }
            for report in reports {
                await show(report.split(separator: "\n").map { "   " + $0 }.joined(separator: "\n"))
            }
        }
    }
}
