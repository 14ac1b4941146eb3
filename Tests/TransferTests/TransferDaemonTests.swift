import AppHostProtocol
import AppHostSystem
import Foundation
import HTTPTestServer
import TestSupport
import Testing

/// End-to-end tests of the real `apphost-transferd` binary against HTTPTestServer.
@Suite(.tags(.process, .network), .serialized)
struct TransferDaemonTests {
    /// Starts a server, a temp dir and a daemon; always stops all three.
    func withSetup(_ label: String, arguments: [String] = [], limits: [ResourceLimit] = [],
                   _ body: (HTTPTestServer, TempDir, Daemon) async throws -> Void) async throws {
        let dir = try TempDir(label)
        defer { dir.remove() }
        let server = try await HTTPTestServer.start()
        do {
            let daemon = try await Daemon.spawn(stateDir: dir.path + "/state", arguments: arguments, limits: limits,
                                                stderrPath: dir.path + "/stderr")
            do {
                try await body(server, dir, daemon)
            } catch {
                _ = await daemon.kill9()
                throw error
            }
            let status = await daemon.stop()
            #expect(status == .exited(code: 0), "daemon stderr: \((try? String(contentsOfFile: dir.path + "/stderr", encoding: .utf8)) ?? "")")
        } catch {
            try? await server.stop()
            throw error
        }
        try await server.stop()
    }

    func expectedSHA(_ resource: Resource) throws -> String {
        try sha256 { h in
            var at: Int64 = 0
            while at < resource.size {
                let end = min(resource.size, at + 4 << 20)
                try h.write(contentsOf: resource.bytes(in: at..<end))
                at = end
            }
        }
    }

    @Test func downloadCompletesAndAppearsOnlyWhenComplete() async throws {
        try await withSetup("dl") { server, dir, daemon in
            let ready = try await daemon.next()
            guard case .ready(_, let unfinished) = ready else { Issue.record("first event \(ready)"); return }
            #expect(unfinished == 0)
            let resource = Resource.generated(size: 8 << 20, seed: 1)
            server.serve("/file", resource: resource)
            // Held after 1 MiB until released: the download is in progress while the test
            // looks, however slowly this machine runs (no timing involved).
            server.inject("/file", [.holdAfter(bytes: 1 << 20)])
            let dest = dir.path + "/file.bin"
            try daemon.send(.enqueue(job(1, url: server.url("/file"), destination: dest)))
            try await daemon.next("accepted", where: isAccepted(1))
            try await daemon.next("progress") { if case .progress(1, _, _) = $0 { return true }; return false }
            #expect(!FileManager.default.fileExists(atPath: dest))
            #expect(FileManager.default.fileExists(atPath: dest + ".part"))
            server.release("/file")
            let fin = try await daemon.next("finished", where: isFinished(1))
            #expect(finishedOutcome(fin) == .completed(status: 200, bytes: 8 << 20))
            #expect(!FileManager.default.fileExists(atPath: dest + ".part"))
            #expect(try sha256(file: dest) == expectedSHA(resource))
            // Reported until acknowledged, then forgotten.
            try daemon.send(.list)
            let list = try await daemon.next("transfers") { if case .transfers = $0 { return true }; return false }
            if case .transfers(let ts) = list { #expect(ts.map(\.state) == [.finished]) }
            try daemon.send(.acknowledge(id: 1))
            try daemon.send(.list)
            let list2 = try await daemon.next("transfers") { if case .transfers = $0 { return true }; return false }
            if case .transfers(let ts) = list2 { #expect(ts.isEmpty) }
        }
    }

    @Test func killNineMidDownloadResumesFromPersistedOffset() async throws {
        let dir = try TempDir("kill")
        defer { dir.remove() }
        let server = try await HTTPTestServer.start()
        let size: Int64 = 256 << 20
        let resource = Resource.generated(size: size, seed: 42)
        server.serve("/big", resource: resource)
        // Paced first response, so what the server counts as sent is what the daemon got
        // (not megabytes sitting in loopback socket buffers when the daemon is killed).
        server.inject("/big", [.slow(bytesPerSecond: 48 << 20)])
        let dest = dir.path + "/big.bin"
        let state = dir.path + "/state"
        let first = try await Daemon.spawn(stateDir: state, stderrPath: dir.path + "/stderr")
        var killedAt: Int64 = 0
        do {
            try await first.next("ready")
            try first.send(.enqueue(job(7, url: server.url("/big"), destination: dest)))
            try await first.next("accepted", where: isAccepted(7))
            let p = try await first.next(timeout: 120, "progress ≥ 32 MiB") {
                if case .progress(7, let done, _) = $0 { return done >= 32 << 20 }
                return false
            }
            if case .progress(_, let done, _) = p { killedAt = done }
        } catch {
            _ = await first.kill9()
            try? await server.stop()
            throw error
        }
        let killed = await first.kill9()
        #expect(killed == .signaled(signal: SIGKILL, coreDumped: false))
        #expect(!FileManager.default.fileExists(atPath: dest))

        let second = try await Daemon.spawn(stateDir: state, stderrPath: dir.path + "/stderr")
        do {
            let ready = try await second.next("ready")
            #expect(ready == .ready(pid: second.process.pid, unfinished: 1))
            let fin = try await second.next(timeout: 300, "finished", where: isFinished(7))
            #expect(finishedOutcome(fin) == .completed(status: 200, bytes: size))
        } catch {
            _ = await second.kill9()
            try? await server.stop()
            throw error
        }
        #expect(await second.stop() == .exited(code: 0))
        try await server.stop()

        let requests = server.requests("/big")
        #expect(requests.count == 2)
        if requests.count == 2 {
            let resumeFrom = Int64(requests[1].range?.dropFirst("bytes=".count).split(separator: "-").first ?? "") ?? -1
            #expect(requests[1].status == 206)
            #expect(requests[1].ifRange == resource.derivedETag)
            #expect(resumeFrom >= killedAt)
            let sentTwice = requests[0].bodyBytesSent - resumeFrom
            #expect(sentTwice >= 0 && sentTwice <= 1 << 20, "sent twice: \(sentTwice) bytes")
            print("kill -9 at progress \(killedAt); resumed from \(resumeFrom); first response sent \(requests[0].bodyBytesSent); sent twice \(sentTwice) bytes")
            #expect(requests[1].bodyBytesSent == size - resumeFrom)
        }
        #expect(try sha256(file: dest) == expectedSHA(resource))
    }

    @Test func connectionResetResumes() async throws {
        try await withSetup("reset", arguments: ["--retry-base", "0.05"]) { server, dir, daemon in
            try await daemon.next("ready")
            let resource = Resource.generated(size: 4 << 20, seed: 3)
            server.serve("/r", resource: resource)
            server.inject("/r", [.dropAfter(bytes: (1 << 20) + 12345)])
            let dest = dir.path + "/r.bin"
            try daemon.send(.enqueue(job(1, url: server.url("/r"), destination: dest)))
            let fin = try await daemon.next("finished", where: isFinished(1))
            #expect(finishedOutcome(fin) == .completed(status: 200, bytes: 4 << 20))
            let reqs = server.requests("/r")
            #expect(reqs.count == 2)
            #expect(reqs.last?.status == 206)
            #expect(try sha256(file: dest) == expectedSHA(resource))
        }
    }

    @Test func serverErrorRetriedThenCompletes() async throws {
        try await withSetup("500", arguments: ["--retry-base", "0.05"]) { server, dir, daemon in
            try await daemon.next("ready")
            let resource = Resource.generated(size: 100_000, seed: 5)
            server.serve("/e", resource: resource)
            server.inject("/e", [.status(500)])
            let dest = dir.path + "/e.bin"
            try daemon.send(.enqueue(job(1, url: server.url("/e"), destination: dest)))
            try await daemon.next("waiting") { if case .waiting(1, _) = $0 { return true }; return false }
            let fin = try await daemon.next("finished", where: isFinished(1))
            #expect(finishedOutcome(fin) == .completed(status: 200, bytes: 100_000))
            #expect(server.requests("/e").map(\.status) == [500, 200])
            #expect(try sha256(file: dest) == expectedSHA(resource))
        }
    }

    @Test func serverErrorGivesUpAfterMaxAttempts() async throws {
        try await withSetup("500x", arguments: ["--retry-base", "0.01", "--max-attempts", "3"]) { server, dir, daemon in
            try await daemon.next("ready")
            server.serve("/e", resource: .generated(size: 1000, seed: 5))
            server.inject("/e", [.status(500), .status(500), .status(500), .status(500)])
            let dest = dir.path + "/e.bin"
            try daemon.send(.enqueue(job(1, url: server.url("/e"), destination: dest)))
            let fin = try await daemon.next("finished", where: isFinished(1))
            guard case .failed(let code, _)? = finishedOutcome(fin) else { Issue.record("\(fin)"); return }
            #expect(code == "badServerResponse")
            #expect(server.requests("/e").count == 3)
            #expect(!FileManager.default.fileExists(atPath: dest))
            #expect(!FileManager.default.fileExists(atPath: dest + ".part"))
        }
    }

    @Test func changedResourceRestartsFromZero() async throws {
        try await withSetup("etag", arguments: ["--retry-base", "1"]) { server, dir, daemon in
            try await daemon.next("ready")
            let v1 = Resource.generated(size: 4 << 20, seed: 10, etag: "\"v1\"")
            let v2 = Resource.generated(size: 3 << 20, seed: 11, etag: "\"v2\"")
            server.serve("/c", resource: v1)
            server.inject("/c", [.dropAfter(bytes: 2 << 20)])
            let dest = dir.path + "/c.bin"
            try daemon.send(.enqueue(job(1, url: server.url("/c"), destination: dest)))
            // The drop makes the daemon wait `--retry-base` before resuming: change the resource now.
            try await daemon.next("waiting") { if case .waiting(1, _) = $0 { return true }; return false }
            server.replace("/c", resource: v2)
            let fin = try await daemon.next("finished", where: isFinished(1))
            #expect(finishedOutcome(fin) == .completed(status: 200, bytes: 3 << 20))
            let reqs = server.requests("/c")
            #expect(reqs.count == 2)
            if reqs.count == 2 {
                #expect(reqs[1].range != nil)
                #expect(reqs[1].ifRange == "\"v1\"")
                #expect(reqs[1].status == 200)
            }
            #expect(try sha256(file: dest) == expectedSHA(v2))
        }
    }

    /// A page-aligned limit cuts a direct write short; an unaligned one makes it fail with
    /// EINVAL, after which the daemon writes through the page cache and meets EFBIG.
    @Test(arguments: [UInt64(2 << 20), UInt64(2 << 20) + 100])
    func fileSizeLimitFailsCannotWriteToFile(limitBytes: UInt64) async throws {
        let limit = ResourceLimit(.fileSize, soft: limitBytes)
        try await withSetup("fsize", limits: [limit]) { server, dir, daemon in
            try await daemon.next("ready")
            server.serve("/f", resource: .generated(size: 8 << 20, seed: 2))
            let dest = dir.path + "/f.bin"
            try daemon.send(.enqueue(job(1, url: server.url("/f"), destination: dest)))
            let fin = try await daemon.next("finished", where: isFinished(1))
            guard case .failed(let code, _)? = finishedOutcome(fin) else { Issue.record("\(fin)"); return }
            #expect(code == "cannotWriteToFile")
            #expect(!FileManager.default.fileExists(atPath: dest))
            #expect(!FileManager.default.fileExists(atPath: dest + ".part"))
        }
    }

    @Test func thousandQueuedTransfersWithBoundedMemory() async throws {
        try await withSetup("many") { server, dir, daemon in
            try await daemon.next("ready")
            let resource = Resource.generated(size: 32 << 10, seed: 9)
            for i in 0..<10 { server.serve("/s\(i)", resource: resource) }
            let n: UInt64 = 1000
            try FileManager.default.createDirectory(atPath: dir.path + "/out", withIntermediateDirectories: true)
            for id in 1...n {
                // Across 10 apps, as the host would queue them.
                try daemon.send(.enqueue(job(id, url: server.url("/s\(id % 10)"), destination: dir.path + "/out/\(id)",
                                             app: "com.example.app\(id % 10)")))
            }
            try daemon.send(.list)
            let list = try await daemon.next("transfers") { if case .transfers = $0 { return true }; return false }
            if case .transfers(let ts) = list {
                // Connections in use: a received download waiting for its batch to be
                // recorded is still `running` in the list, but its slot is free (all its
                // bytes are in), and on a loaded machine many wait.
                let receiving = ts.filter { $0.state == .running && $0.bytesDone < ($0.bytesExpected ?? .max) }
                #expect(receiving.count <= 16)
            }
            // Finished events may have arrived before the list answer: count every event seen.
            var finished = Set<TransferID>()
            var failures: [TransferEvent] = []
            func note(_ e: TransferEvent) {
                if case .finished(let id, let outcome) = e, finished.insert(id).inserted,
                   outcome != .completed(status: 200, bytes: 32 << 10) {
                    failures.append(e)
                }
            }
            daemon.seen.forEach(note)
            while finished.count < Int(n) {
                note(try await daemon.next(timeout: 120, "finished #\(finished.count + 1)") {
                    if case .finished = $0 { return true }; return false
                })
            }
            #expect(failures.isEmpty, "\(failures.prefix(3))")
            let files = try FileManager.default.contentsOfDirectory(atPath: dir.path + "/out")
            #expect(files.count == Int(n))
            let hwm = peakRSSKiB(daemon.process.pid) ?? Int.max
            // Bound: 128 MiB peak RSS for the debug-built daemon (measured ~40-60 MiB).
            #expect(hwm < 128 * 1024, "VmHWM \(hwm) KiB")
            print("transferd VmHWM after 1000 transfers: \(hwm) KiB")
        }
    }

    @Test func unsupportedSchemeRefused() async throws {
        try await withSetup("scheme") { _, dir, daemon in
            try await daemon.next("ready")
            try daemon.send(.enqueue(job(1, url: "ftp://example.com/x", destination: dir.path + "/x")))
            try await daemon.next("accepted", where: isAccepted(1))
            let fin = try await daemon.next("finished", where: isFinished(1))
            guard case .failed(let code, _)? = finishedOutcome(fin) else { Issue.record("\(fin)"); return }
            #expect(code == "unsupportedURL")
            #expect(!FileManager.default.fileExists(atPath: dir.path + "/x"))
        }
    }

    @Test func finishedRepeatedAfterRestartUntilAcknowledged() async throws {
        let dir = try TempDir("ack")
        defer { dir.remove() }
        let state = dir.path + "/state"
        let d1 = try await Daemon.spawn(stateDir: state, stderrPath: dir.path + "/stderr")
        do {
            try await d1.next("ready")
            try d1.send(.enqueue(job(5, url: "gopher://x/y", destination: dir.path + "/y")))
            try await d1.next("finished", where: isFinished(5))
        } catch {
            _ = await d1.kill9()
            throw error
        }
        #expect(await d1.stop() == .exited(code: 0))
        let d2 = try await Daemon.spawn(stateDir: state, stderrPath: dir.path + "/stderr")
        do {
            #expect(try await d2.next("ready") == .ready(pid: d2.process.pid, unfinished: 0))
            let again = try await d2.next("finished again")
            #expect(isFinished(5)(again))
            try d2.send(.acknowledge(id: 5))
            try d2.send(.list)
            #expect(try await d2.next("transfers") == .transfers([]))
        } catch {
            _ = await d2.kill9()
            throw error
        }
        #expect(await d2.stop() == .exited(code: 0))
    }

    @Test func uploadStreamsFileAndRestartsFromZeroAfterDrop() async throws {
        try await withSetup("up", arguments: ["--retry-base", "0.05"]) { server, dir, daemon in
            try await daemon.next("ready")
            let size = 3 << 20
            let body = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
            let file = dir.path + "/body.bin"
            try body.write(to: URL(fileURLWithPath: file))
            server.inject("/u", [.dropAfter(bytes: 1 << 20)])
            try daemon.send(.enqueue(job(1, url: server.url("/u"), destination: "", kind: .upload, method: "PUT",
                                         uploadFile: file)))
            let fin = try await daemon.next("finished", where: isFinished(1))
            #expect(finishedOutcome(fin) == .completed(status: 201, bytes: Int64(size)))
            #expect(server.uploads("/u") == [Int64(size)])
            #expect(server.uploadPrefixes("/u").first == body.prefix(1 << 20))
            #expect(server.requests("/u").count == 2)
        }
    }

    @Test func discretionaryAndCellularRulesWaitForConditions() async throws {
        try await withSetup("cond") { server, dir, daemon in
            try await daemon.next("ready")
            server.serve("/d", resource: .generated(size: 10_000, seed: 4))
            try daemon.send(.conditions(pluggedIn: false, network: .cellular))
            var discretionary = job(1, url: server.url("/d"), destination: dir.path + "/d1")
            discretionary.discretionary = true
            var wifiOnly = job(2, url: server.url("/d"), destination: dir.path + "/d2")
            wifiOnly.allowsCellularAccess = false
            try daemon.send(.enqueue(discretionary))
            try daemon.send(.enqueue(wifiOnly))
            try await daemon.next("waiting 1") { if case .waiting(1, _) = $0 { return true }; return false }
            try await daemon.next("waiting 2") { if case .waiting(2, _) = $0 { return true }; return false }
            try daemon.send(.conditions(pluggedIn: false, network: .wifi))
            let f2 = try await daemon.next("finished 2", where: isFinished(2))
            #expect(finishedOutcome(f2) == .completed(status: 200, bytes: 10_000))
            #expect(server.requests("/d").count == 1)
            try daemon.send(.conditions(pluggedIn: true, network: .wifi))
            let f1 = try await daemon.next("finished 1", where: isFinished(1))
            #expect(finishedOutcome(f1) == .completed(status: 200, bytes: 10_000))
        }
    }

    /// The per-host and global connection limits hold under a queue larger than both, a
    /// transfer cancelled while queued never reaches the server, and the rest all finish.
    @Test func perHostAndGlobalLimitsHold() async throws {
        try await withSetup("limits", arguments: ["--per-host", "2", "--max-concurrent", "3"]) { server, dir, daemon in
            try await daemon.next("ready")
            let n: UInt64 = 20
            for id in 1...n {
                server.serve("/p\(id)", resource: .generated(size: 64 << 10, seed: id))
                // About 0.25 s per body, so transfers overlap whenever the limits allow it.
                server.inject("/p\(id)", [.slow(bytesPerSecond: 256 << 10)])
            }
            let local = server.url("/").replacingOccurrences(of: "127.0.0.1", with: "localhost")
            for id in 1...n {
                let url = id % 2 == 0 ? server.url("/p\(id)") : local + "p\(id)"
                try daemon.send(.enqueue(job(id, url: url, destination: dir.path + "/out\(id)")))
            }
            try daemon.send(.cancel(id: TransferID(n)))
            // Transfers finish in any order: collect every outcome.
            var outcomes: [TransferID: TransferOutcome] = [:]
            while outcomes.count < Int(n) {
                let e = try await daemon.next("finished #\(outcomes.count + 1)") { if case .finished = $0 { return true }; return false }
                if case .finished(let id, let outcome) = e { outcomes[id] = outcome }
            }
            #expect(outcomes[TransferID(n)] == .cancelled)
            for id in 1..<n { #expect(outcomes[TransferID(id)] == .completed(status: 200, bytes: 64 << 10), "transfer \(id)") }
            #expect(server.requests("/p\(n)").isEmpty)
            let port = URL(string: server.url("/"))!.port!
            #expect(server.peakConcurrentResponses(host: "127.0.0.1:\(port)") == 2)
            #expect(server.peakConcurrentResponses(host: "localhost:\(port)") == 2)
            #expect(server.peakConcurrentResponses() == 3)
        }
    }

    /// Received downloads are synced, moved and recorded in batches; with at most one
    /// waiting (`--max-finishing 1`) new attempts wait for each batch, and still every
    /// download completes with its own bytes, reported once, no partial file left.
    @Test func downloadsFinishUnderATightFinishingBound() async throws {
        try await withSetup("finishing", arguments: ["--max-finishing", "1", "--per-host", "4"]) { server, dir, daemon in
            try await daemon.next("ready")
            let n: UInt64 = 40
            var resources: [UInt64: Resource] = [:]
            for id in 1...n {
                resources[id] = .generated(size: 1000 + Int64(id) * 37, seed: id)
                server.serve("/s\(id)", resource: resources[id]!)
            }
            for id in 1...n {
                try daemon.send(.enqueue(job(id, url: server.url("/s\(id)"), destination: dir.path + "/s\(id)")))
            }
            var outcomes: [TransferID: TransferOutcome] = [:]
            while outcomes.count < Int(n) {
                let e = try await daemon.next("finished #\(outcomes.count + 1)") { if case .finished = $0 { return true }; return false }
                if case .finished(let id, let outcome) = e {
                    #expect(outcomes[id] == nil, "transfer \(id) reported twice")
                    outcomes[id] = outcome
                }
            }
            for id in 1...n {
                let size = resources[id]!.size
                #expect(outcomes[TransferID(id)] == .completed(status: 200, bytes: size), "transfer \(id)")
                let data = FileManager.default.contents(atPath: dir.path + "/s\(id)")
                #expect(data == resources[id]!.bytes(in: 0..<size), "file \(id)")
                #expect(!FileManager.default.fileExists(atPath: dir.path + "/s\(id).part"))
                #expect(server.requests("/s\(id)").count == 1)
            }
        }
    }

    /// The daemon runs its transfers on as many event loops as `--event-loops` asks (one
    /// by default: no thread hop within a transfer's cycle), and on either all of them
    /// complete with their own bytes.
    @Test(arguments: [nil, 3])
    func downloadsCompleteOnTheEventLoopsAsked(loops: Int?) async throws {
        let arguments = loops.map { ["--event-loops", String($0), "--per-host", "4"] } ?? ["--per-host", "4"]
        try await withSetup("loops", arguments: arguments) { server, dir, daemon in
            let ready = try await daemon.next("ready") { if case .ready = $0 { return true }; return false }
            guard case .ready(let pid, _) = ready else { return }
            let names = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").compactMap {
                try? String(contentsOfFile: "/proc/\(pid)/task/\($0)/comm", encoding: .utf8)
            }
            // Loops are named NIO-SGLTN-1-#1, #2...; a thread a loop starts (the host link's
            // reader) carries its creator's name, so names are counted, not threads.
            #expect(Set(names.filter { $0.hasPrefix("NIO-SGLTN-1-") }).count == (loops ?? 1), "threads: \(names.sorted())")
            let n: UInt64 = 12
            for id in 1...n {
                server.serve("/l\(id)", resource: .generated(size: 3000 + Int64(id) * 11, seed: id))
                try daemon.send(.enqueue(job(id, url: server.url("/l\(id)"), destination: dir.path + "/l\(id)")))
            }
            var done: Set<TransferID> = []
            while done.count < Int(n) {
                let e = try await daemon.next("finished #\(done.count + 1)") { if case .finished = $0 { return true }; return false }
                if case .finished(let id, let outcome) = e {
                    #expect(outcome == .completed(status: 200, bytes: 3000 + Int64(id.rawValue) * 11), "transfer \(id)")
                    done.insert(id)
                }
            }
            for id in 1...n {
                let data = FileManager.default.contents(atPath: dir.path + "/l\(id)")
                #expect(data == Resource.generated(size: 3000 + Int64(id) * 11, seed: id).bytes(in: 0..<(3000 + Int64(id) * 11)), "file \(id)")
            }
        }
    }

    /// `--event-loops` takes 1 to 64: outside that (or not a number) the daemon refuses
    /// to start, with why, its usage and exit status 64, before touching NIO's singletons.
    @Test(arguments: ["0", "65", "-1", "many"])
    func eventLoopsOutOfBoundsAreRefused(value: String) async throws {
        let dir = try TempDir("loops-bad")
        defer { dir.remove() }
        let daemon = try await Daemon.spawn(stateDir: dir.path + "/state", arguments: ["--event-loops", value],
                                            stderrPath: dir.path + "/stderr")
        #expect(await daemon.waitExit() == .exited(code: 64))
        let stderr = (try? String(contentsOfFile: dir.path + "/stderr", encoding: .utf8)) ?? ""
        let why = value == "many" ? "'many' is invalid for '--event-loops <n>'" : "--event-loops must be from 1 to 64, got \(value)"
        #expect(stderr.contains(why), "stderr: \(stderr)")
        #expect(stderr.contains("Usage: apphost-transferd [<options>] --state-dir <dir>"), "stderr: \(stderr)")
    }

    /// A restarted host offers its undelivered transfers again: one the daemon has is
    /// accepted again, not fetched twice; a different job under a known id is refused.
    @Test func aTransferOfferedAgainIsAcceptedOnce() async throws {
        try await withSetup("again") { server, dir, daemon in
            try await daemon.next("ready")
            server.serve("/a", resource: .generated(size: 10_000, seed: 12))
            let first = job(1, url: server.url("/a"), destination: dir.path + "/a")
            try daemon.send(.enqueue(first))
            let done = try await daemon.next("finished 1", where: isFinished(1))
            #expect(finishedOutcome(done) == .completed(status: 200, bytes: 10_000))
            try daemon.send(.enqueue(first))
            try await daemon.next("accepted again", where: isAccepted(1))
            try daemon.send(.enqueue(job(1, url: server.url("/other"), destination: dir.path + "/b")))
            try await daemon.next("refused") { if case .error(let text) = $0 { return text.contains("another transfer") }; return false }
            #expect(server.requests("/a").count == 1)
        }
    }

    @Test func cancelRemovesPartialAndReportsCancelled() async throws {
        try await withSetup("cancel") { server, dir, daemon in
            try await daemon.next("ready")
            server.serve("/slow", resource: .generated(size: 64 << 20, seed: 8))
            server.inject("/slow", [.slow(bytesPerSecond: 1 << 20)])
            let dest = dir.path + "/slow.bin"
            try daemon.send(.enqueue(job(1, url: server.url("/slow"), destination: dest)))
            try await daemon.next("progress") { if case .progress(1, _, _) = $0 { return true }; return false }
            try daemon.send(.cancelApp(bundleIdentifier: "com.example.t"))
            let fin = try await daemon.next("finished", where: isFinished(1))
            #expect(finishedOutcome(fin) == .cancelled)
            #expect(!FileManager.default.fileExists(atPath: dest))
            #expect(!FileManager.default.fileExists(atPath: dest + ".part"))
        }
    }

    @Test func cancelProducingResumeDataKeepsThePartialAndAResumedJobFetchesOnlyTheRest() async throws {
        try await withSetup("resume") { server, dir, daemon in
            try await daemon.next("ready")
            let resource = Resource.generated(size: 16 << 20, seed: 12, etag: "\"r1\"")
            server.serve("/r", resource: resource)
            // Held after 2 MiB until released: the cancel comes before the end however slow the
            // machine (a paced body could finish first under load).
            server.inject("/r", [.holdAfter(bytes: 2 << 20)])
            let first = dir.path + "/r1.bin"
            try daemon.send(.enqueue(job(1, url: server.url("/r"), destination: first)))
            try await daemon.next("progress ≥ 1 MiB") { if case .progress(1, let done, _) = $0 { return done >= 1 << 20 }; return false }
            try daemon.send(.cancelProducingResumeData(id: 1))
            let fin = try await daemon.next("finished", where: isFinished(1))
            guard case .cancelledResumable(let resume)? = finishedOutcome(fin) else {
                Issue.record("expected cancelledResumable, got \(fin)")
                return
            }
            #expect(resume.partialFile == first + ".part")
            #expect(resume.etag == "\"r1\"")
            #expect(resume.bytes >= 1 << 20 && resume.bytes < 16 << 20)
            let partSize = (try FileManager.default.attributesOfItem(atPath: resume.partialFile)[.size] as? Int).map(Int64.init) ?? -1
            #expect(partSize >= resume.bytes, "the partial file holds at least what the resume data counts")
            #expect(!FileManager.default.fileExists(atPath: first))

            // A new job with the resume point: the partial moves to it, and the server sends only the rest.
            let second = dir.path + "/r2.bin"
            var resumed = job(2, url: server.url("/r"), destination: second)
            resumed.resume = resume
            try daemon.send(.enqueue(resumed))
            let done = try await daemon.next("finished", where: isFinished(2))
            #expect(finishedOutcome(done) == .completed(status: 200, bytes: 16 << 20))
            #expect(try sha256(file: second) == expectedSHA(resource))
            #expect(!FileManager.default.fileExists(atPath: resume.partialFile))
            let requests = server.requests("/r")
            #expect(requests.count == 2)
            if requests.count == 2 {
                #expect(requests[1].range == "bytes=\(resume.bytes)-")
                #expect(requests[1].ifRange == "\"r1\"")
                #expect(requests[1].status == 206)
                #expect(requests[1].bodyBytesSent == resource.size - resume.bytes)
            }
        }
    }

    /// Direct I/O needs page-aligned offsets: a partial that ends mid-page is completed
    /// through the page cache up to the boundary, then page-wise, then the odd tail.
    @Test func resumeFromAnOffsetInsideAPageCompletesTheFileExactly() async throws {
        try await withSetup("odd") { server, dir, daemon in
            try await daemon.next("ready")
            let size: Int64 = (5 << 20) + 777
            let resource = Resource.generated(size: size, seed: 21, etag: "\"o1\"")
            server.serve("/o", resource: resource)
            let have: Int64 = (3 << 20) + 1234
            let partial = dir.path + "/o-old.part"
            try resource.bytes(in: 0..<have).write(to: URL(fileURLWithPath: partial))
            var resumed = job(1, url: server.url("/o"), destination: dir.path + "/o.bin")
            resumed.resume = TransferResume(partialFile: partial, bytes: have, etag: "\"o1\"", lastModified: nil)
            try daemon.send(.enqueue(resumed))
            let fin = try await daemon.next("finished", where: isFinished(1))
            #expect(finishedOutcome(fin) == .completed(status: 200, bytes: size))
            #expect(try sha256(file: dir.path + "/o.bin") == expectedSHA(resource))
            let requests = server.requests("/o")
            #expect(requests.map(\.range) == ["bytes=\(have)-"])
            #expect(requests.first?.bodyBytesSent == size - have)
        }
    }

    @Test func resumeDataOfAChangedResourceStartsOverAndNoResumeDataWithoutAValidator() async throws {
        try await withSetup("resume2") { server, dir, daemon in
            try await daemon.next("ready")
            let v1 = Resource.generated(size: 8 << 20, seed: 13, etag: "\"a\"")
            let v2 = Resource.generated(size: 5 << 20, seed: 14, etag: "\"b\"")
            server.serve("/v", resource: v1)
            server.inject("/v", [.holdAfter(bytes: 1 << 20)])
            let first = dir.path + "/v1.bin"
            try daemon.send(.enqueue(job(1, url: server.url("/v"), destination: first)))
            try await daemon.next("progress") { if case .progress(1, _, _) = $0 { return true }; return false }
            try daemon.send(.cancelProducingResumeData(id: 1))
            guard case .cancelledResumable(let resume)? = finishedOutcome(try await daemon.next("finished", where: isFinished(1))) else {
                Issue.record("expected cancelledResumable")
                return
            }
            server.replace("/v", resource: v2)
            var resumed = job(2, url: server.url("/v"), destination: dir.path + "/v2.bin")
            resumed.resume = resume
            try daemon.send(.enqueue(resumed))
            let done = try await daemon.next("finished", where: isFinished(2))
            #expect(finishedOutcome(done) == .completed(status: 200, bytes: 5 << 20))
            #expect(try sha256(file: dir.path + "/v2.bin") == expectedSHA(v2), "If-Range failed: the whole new resource, no mix")

            // A job not yet started (discretionary, waiting for power) has nothing to resume.
            var waiting = job(3, url: server.url("/v"), destination: dir.path + "/v3.bin")
            waiting.discretionary = true
            try daemon.send(.enqueue(waiting))
            try await daemon.next("waiting") { if case .waiting(3, _) = $0 { return true }; return false }
            try daemon.send(.cancelProducingResumeData(id: 3))
            #expect(finishedOutcome(try await daemon.next("finished", where: isFinished(3))) == .cancelled)
        }
    }

    @Test func resourceTimeoutFailsTimedOut() async throws {
        try await withSetup("timeout") { server, dir, daemon in
            try await daemon.next("ready")
            server.serve("/t", resource: .generated(size: 64 << 20, seed: 6))
            server.inject("/t", [.slow(bytesPerSecond: 1 << 20)])
            let dest = dir.path + "/t.bin"
            var j = job(1, url: server.url("/t"), destination: dest)
            j.timeoutForResource = 1
            try daemon.send(.enqueue(j))
            let fin = try await daemon.next("finished", where: isFinished(1))
            guard case .failed(let code, _)? = finishedOutcome(fin) else { Issue.record("\(fin)"); return }
            #expect(code == "timedOut")
            #expect(!FileManager.default.fileExists(atPath: dest))
            #expect(!FileManager.default.fileExists(atPath: dest + ".part"))
        }
    }

    @Test func hostEOFStopsCleanlyAndRestartResumes() async throws {
        let dir = try TempDir("eof")
        defer { dir.remove() }
        let server = try await HTTPTestServer.start()
        let resource = Resource.generated(size: 16 << 20, seed: 12)
        server.serve("/e", resource: resource)
        // Held after 4 MiB: the host's EOF comes before the end however slow the machine.
        server.inject("/e", [.holdAfter(bytes: 4 << 20)])
        let dest = dir.path + "/e.bin"
        let state = dir.path + "/state"
        let d1 = try await Daemon.spawn(stateDir: state, stderrPath: dir.path + "/stderr")
        do {
            try await d1.next("ready")
            try d1.send(.enqueue(job(3, url: server.url("/e"), destination: dest)))
            try await d1.next("progress ≥ 2 MiB") { if case .progress(3, let d, _) = $0 { return d >= 2 << 20 }; return false }
        } catch {
            _ = await d1.kill9()
            try? await server.stop()
            throw error
        }
        #expect(await d1.stop() == .exited(code: 0))
        #expect(FileManager.default.fileExists(atPath: dest + ".part"))
        #expect(!FileManager.default.fileExists(atPath: dest))
        let d2 = try await Daemon.spawn(stateDir: state, stderrPath: dir.path + "/stderr")
        do {
            #expect(try await d2.next("ready") == .ready(pid: d2.process.pid, unfinished: 1))
            let fin = try await d2.next("finished", where: isFinished(3))
            #expect(finishedOutcome(fin) == .completed(status: 200, bytes: 16 << 20))
        } catch {
            _ = await d2.kill9()
            try? await server.stop()
            throw error
        }
        #expect(await d2.stop() == .exited(code: 0))
        try await server.stop()
        let reqs = server.requests("/e")
        #expect(reqs.count == 2)
        #expect(reqs.last?.status == 206)
        #expect(try sha256(file: dest) == expectedSHA(resource))
    }
}
