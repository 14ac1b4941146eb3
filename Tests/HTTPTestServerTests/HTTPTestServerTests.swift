import Foundation
import HTTPTestServer
import TestSupport
import Testing

/// What curl saw.
struct CurlResult {
    var exitCode: Int32
    var status: Int
    var headers: [String: String]
    var body: Data
    var stdout: String
}

/// Runs `/usr/bin/curl` (the client side; URLSession is unreliable on Linux) and waits for
/// it on a thread of its own: a test waiting on a tool must not hold one of Swift's
/// cooperative threads (there are two on a 2-CPU machine, shared by every test of the run).
func curl(_ args: [String]) async throws -> CurlResult {
    try await withCheckedThrowingContinuation { c in
        Thread.detachNewThread { c.resume(with: Result { try curlBlocking(args) }) }
    }
}

/// ``curl(_:)`` on the calling thread.
func curlBlocking(_ args: [String]) throws -> CurlResult {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hts-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let headerFile = dir.appendingPathComponent("h").path
    let bodyFile = dir.appendingPathComponent("b").path
    let run = try Tool.run("/usr/bin/curl", ["-s", "--max-time", "30", "-D", headerFile, "-o", bodyFile] + args)
    let stdout = String(decoding: run.stdout, as: UTF8.self)
    let headerText = (try? String(contentsOfFile: headerFile, encoding: .utf8)) ?? ""
    // With -L several header blocks are written; keep the last one.
    let blocks = headerText.components(separatedBy: "\r\n\r\n").filter { !$0.isEmpty }
    var status = 0
    var headers: [String: String] = [:]
    if let last = blocks.last {
        for (i, line) in last.components(separatedBy: "\r\n").enumerated() {
            if i == 0 {
                status = Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
            } else if let c = line.firstIndex(of: ":") {
                headers[line[..<c].lowercased()] = line[line.index(after: c)...].trimmingCharacters(in: .whitespaces)
            }
        }
    }
    let body = FileManager.default.contents(atPath: bodyFile) ?? Data()
    return CurlResult(exitCode: run.exitCode, status: status, headers: headers, body: body, stdout: stdout)
}

@Suite("HTTPTestServer", .tags(.network, .process))
struct HTTPTestServerTests {
    @Test func fullGetAndHead() async throws {
        let server = try await HTTPTestServer.start()
        let data = Data((0..<1000).map { UInt8($0 % 251) })
        server.serve("/a", resource: .bytes(data))
        let r = try await curl([server.url("/a")])
        #expect(r.status == 200)
        #expect(r.body == data)
        #expect(r.headers["content-length"] == "1000")
        #expect(r.headers["etag"] == server.etag("/a"))
        let h = try await curl(["-I", server.url("/a")])
        #expect(h.status == 200)
        #expect(h.headers["content-length"] == "1000")
        #expect(server.requests("/a").last?.bodyBytesSent == 0)
        #expect(server.requests("/a").map(\.method) == ["GET", "HEAD"])
        #expect(server.bytesSent("/a") == 1000)
        let nf = try await curl([server.url("/missing")])
        #expect(nf.status == 404)
        try await server.stop()
    }

    @Test func ranges() async throws {
        let server = try await HTTPTestServer.start()
        let res = Resource.generated(size: 300_000, seed: 42)
        server.serve("/g", resource: res)
        let open = try await curl(["-H", "Range: bytes=100000-", server.url("/g")])
        #expect(open.status == 206)
        #expect(open.headers["content-range"] == "bytes 100000-299999/300000")
        #expect(open.headers["content-length"] == "200000")
        #expect(open.body == res.bytes(in: 100_000..<300_000))
        let closed = try await curl(["-H", "Range: bytes=10-19", server.url("/g")])
        #expect(closed.status == 206)
        #expect(closed.headers["content-range"] == "bytes 10-19/300000")
        #expect(closed.body == res.bytes(in: 10..<20))
        let bad = try await curl(["-H", "Range: bytes=400000-", server.url("/g")])
        #expect(bad.status == 416)
        #expect(server.requests("/g").map(\.range) == ["bytes=100000-", "bytes=10-19", "bytes=400000-"])
        try await server.stop()
    }

    @Test func generatedBytesConsistentAcrossRanges() async throws {
        let res = Resource.generated(size: 1_000_003, seed: 0xDEAD_BEEF)
        let whole = res.bytes(in: 0..<res.size)
        #expect(whole.count == 1_000_003)
        var stitched = Data()
        var at: Int64 = 0
        for step: Int64 in [1, 7, 13, 65536, 3, 99_999, 400_000] where at < res.size {
            stitched.append(res.bytes(in: at..<min(res.size, at + step)))
            at += step
        }
        stitched.append(res.bytes(in: at..<res.size))
        #expect(stitched == whole)
        #expect(Resource.generated(size: 64, seed: 1).bytes(in: 0..<64) != Resource.generated(size: 64, seed: 2).bytes(in: 0..<64))

        let server = try await HTTPTestServer.start()
        server.serve("/g", resource: res)
        let full = try await curl([server.url("/g")])
        #expect(full.body == whole)
        let tail = try await curl(["-H", "Range: bytes=123457-", server.url("/g")])
        #expect(full.body.prefix(123_457) + tail.body == whole)
        try await server.stop()
    }

    @Test func ifRange() async throws {
        let server = try await HTTPTestServer.start()
        server.serve("/r", resource: .generated(size: 5000, seed: 9))
        let etag = try #require(server.etag("/r"))
        let lm = try #require(server.lastModified("/r"))
        let m = try await curl(["-H", "Range: bytes=1000-", "-H", "If-Range: \(etag)", server.url("/r")])
        #expect(m.status == 206)
        #expect(m.body.count == 4000)
        let d = try await curl(["-H", "Range: bytes=1000-", "-H", "If-Range: \(lm)", server.url("/r")])
        #expect(d.status == 206)
        let x = try await curl(["-H", "Range: bytes=1000-", "-H", "If-Range: \"nope\"", server.url("/r")])
        #expect(x.status == 200)
        #expect(x.body.count == 5000)

        // Replacing changes the ETag (even for the same content) and Last-Modified.
        server.replace("/r", resource: .generated(size: 5000, seed: 9))
        #expect(server.etag("/r") != etag)
        #expect(server.lastModified("/r") != lm)
        let stale = try await curl(["-H", "Range: bytes=1000-", "-H", "If-Range: \(etag)", server.url("/r")])
        #expect(stale.status == 200)
        #expect(stale.body.count == 5000)
        #expect(server.requests("/r").map(\.status) == [206, 206, 200, 200])
        #expect(server.requests("/r").last?.ifRange == etag)
        try await server.stop()
    }

    @Test func dropAfterAndStatusFaults() async throws {
        let server = try await HTTPTestServer.start()
        let res = Resource.generated(size: 1 << 20, seed: 3)
        server.serve("/f", resource: res)
        server.inject("/f", [.dropAfter(bytes: 100_000), .status(503), .none])
        let dropped = try await curl([server.url("/f")])
        #expect(dropped.exitCode == 18)  // CURLE_PARTIAL_FILE
        #expect(dropped.body == res.bytes(in: 0..<100_000))
        let unavailable = try await curl([server.url("/f")])
        #expect(unavailable.status == 503)
        let ok = try await curl([server.url("/f")])
        #expect(ok.status == 200)
        #expect(ok.body.count == 1 << 20)
        #expect(server.pendingFaults("/f").isEmpty)
        let reqs = server.requests("/f")
        #expect(reqs.map(\.fault) == [.dropAfter(bytes: 100_000), .status(503), .none])
        #expect(reqs[0].bodyBytesSent == 100_000)
        #expect(reqs[2].bodyBytesSent == 1 << 20)

        // dropAfter counts from the range start.
        server.inject("/f", [.dropAfter(bytes: 10)])
        let r = try await curl(["-H", "Range: bytes=500-", server.url("/f")])
        #expect(r.exitCode == 18)
        #expect(r.body == res.bytes(in: 500..<510))
        try await server.stop()
    }

    /// `.holdAfter` stops the body at its point until `release`; `waitUntilHeld` returns once
    /// a body got there (the client is certainly mid-download), and at once after that.
    @Test func holdAfterWaitsForReleaseAndWaitUntilHeldSeesIt() async throws {
        let server = try await HTTPTestServer.start()
        let res = Resource.generated(size: 256 << 10, seed: 5)
        server.serve("/h", resource: res)
        server.inject("/h", [.holdAfter(bytes: 64 << 10)])
        // curl blocks: on a thread of its own, not on the test's cooperative pool.
        let fetched: CurlResult = try await withCheckedThrowingContinuation { c in
            Thread.detachNewThread { c.resume(with: Result { try curlBlocking([server.url("/h")]) }) }
            Task {
                await server.waitUntilHeld("/h")
                #expect(server.bytesSent("/h") == 64 << 10, "held at its point")
                await server.waitUntilHeld("/h") // at once, now
                server.release("/h")
            }
        }
        #expect(fetched.status == 200)
        #expect(fetched.body == res.bytes(in: 0..<(256 << 10)))
        try await server.stop()
    }

    @Test func slowFault() async throws {
        let server = try await HTTPTestServer.start()
        server.serve("/s", resource: .generated(size: 40_000, seed: 5))
        server.inject("/s", [.slow(bytesPerSecond: 100_000)])
        let start = Date()
        let r = try await curl([server.url("/s")])
        let elapsed = Date().timeIntervalSince(start)
        #expect(r.status == 200)
        #expect(r.body.count == 40_000)
        #expect(elapsed >= 0.3)
        try await server.stop()
    }

    @Test func redirect() async throws {
        let server = try await HTTPTestServer.start()
        server.serve("/target", resource: .bytes(Data("hello".utf8)))
        server.redirect("/from", to: "/target", status: 301)
        let noFollow = try await curl([server.url("/from")])
        #expect(noFollow.status == 301)
        #expect(noFollow.headers["location"] == server.url("/target"))
        let follow = try await curl(["-L", server.url("/from")])
        #expect(follow.status == 200)
        #expect(follow.body == Data("hello".utf8))
        try await server.stop()
    }

    @Test func uploads() async throws {
        let server = try await HTTPTestServer.start()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hts-up-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("payload")
        let payload = Resource.generated(size: 3_000_000, seed: 11).bytes(in: 0..<3_000_000)
        try payload.write(to: file)
        let put = try await curl(["-T", file.path, server.url("/up")])
        #expect(put.status == 201)
        let post = try await curl(["--data-binary", "@\(file.path)", server.url("/up")])
        #expect(post.status == 201)
        #expect(server.uploads("/up") == [3_000_000, 3_000_000])
        #expect(server.uploadPrefixes("/up").first == payload.prefix(1 << 20))
        #expect(server.requests("/up").map(\.bodyBytesReceived) == [3_000_000, 3_000_000])

        server.inject("/up", [.status(500)])
        let failed = try await curl(["-T", file.path, server.url("/up")])
        #expect(failed.status == 500)
        #expect(server.uploads("/up").count == 2)
        try await server.stop()
    }

    @Test func bytesSentAccounting() async throws {
        let server = try await HTTPTestServer.start()
        let res = Resource.generated(size: 2_000_000, seed: 77)
        server.serve("/c", resource: res)
        server.inject("/c", [.dropAfter(bytes: 500_000)])
        _ = try await curl([server.url("/c")])
        _ = try await curl(["-H", "Range: bytes=500000-", server.url("/c")])
        _ = try await curl(["-I", server.url("/c")])
        #expect(server.bytesSent("/c") == 2_000_000)
        #expect(server.requests("/c").map(\.bodyBytesSent) == [500_000, 1_500_000, 0])
        server.resetLog()
        #expect(server.bytesSent("/c") == 0)
        #expect(server.requests("/c").isEmpty)
        try await server.stop()
    }

    @Test func largeGeneratedStreamsWithoutBuffering() async throws {
        let server = try await HTTPTestServer.start()
        let size: Int64 = 64 << 20
        server.serve("/big", resource: .generated(size: size, seed: 1))
        let r = try await curl([server.url("/big")])
        #expect(r.body.count == Int(size))
        #expect(r.exitCode == 0)
        #expect(server.bytesSent("/big") == size)
        try await server.stop()
    }

    @Test func uploadDropAfter() async throws {
        let server = try await HTTPTestServer.start()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hts-up-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("payload")
        try Resource.generated(size: 4_000_000, seed: 12).bytes(in: 0..<4_000_000).write(to: file)
        server.inject("/up", [.dropAfter(bytes: 1_000_000)])
        let r = try await curl(["-T", file.path, server.url("/up")])
        #expect(r.exitCode != 0)
        #expect(server.uploads("/up").isEmpty)
        let rec = try #require(server.requests("/up").first)
        #expect(rec.bodyBytesReceived >= 1_000_000)
        #expect(rec.status == 0)
        let again = try await curl(["-T", file.path, server.url("/up")])
        #expect(again.status == 201)
        #expect(server.uploads("/up") == [4_000_000])
        try await server.stop()
    }

    @Test func keepAliveConnectionServesSeveralRequests() async throws {
        let server = try await HTTPTestServer.start()
        server.serve("/k", resource: .generated(size: 200_000, seed: 8))
        server.inject("/k", [.status(503)])
        // Three requests on one connection: the fault applies to the first only.
        let r = try await curl(["-o", "/dev/null", "-o", "/dev/null", "-w", "%{http_code} %{num_connects}\n",
                          server.url("/k"), server.url("/k"), server.url("/k")])
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines == ["503 1", "200 0", "200 0"])
        #expect(server.requests("/k").map(\.status) == [503, 200, 200])
        #expect(server.bytesSent("/k") == 400_000 + Int64("injected status 503\n".utf8.count))
        try await server.stop()
    }
}

@Suite("HTTPTestServer over TLS", .tags(.network, .process))
struct HTTPTestServerTLSTests {
    @Test func servesHTTPSWithAThrowawayCAThatCurlTrustsOnlyWhenTold() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hts-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let certs = try await TestCertificates.generate(in: dir)
        let server = try await HTTPTestServer.start(tls: certs.serverFiles)
        let res = Resource.generated(size: 200_000, seed: 21)
        server.serve("/g", resource: res)
        server.redirect("/r", to: "/g")
        #expect(server.scheme == "https")
        #expect(server.url("/g") == "https://127.0.0.1:\(server.port)/g")

        let untrusted = try await curl([server.url("/g")])
        #expect(untrusted.exitCode == 60, "curl: the peer's certificate cannot be verified")
        #expect(server.requests("/g").isEmpty, "no request gets through a failed handshake")

        let trusted = try await curl(["--cacert", certs.caCertificate, server.url("/g")])
        #expect(trusted.exitCode == 0)
        #expect(trusted.status == 200)
        #expect(trusted.body == res.bytes(in: 0..<200_000))
        let range = try await curl(["--cacert", certs.caCertificate, "-H", "Range: bytes=1000-1999", server.url("/g")])
        #expect(range.status == 206)
        #expect(range.body == res.bytes(in: 1000..<2000))
        let redirected = try await curl(["--cacert", certs.caCertificate, "-L", server.url("/r")])
        #expect(redirected.status == 200)
        #expect(redirected.body.count == 200_000)
        #expect(server.requests("/r").first?.status == 302)
        // The certificate names localhost too.
        let byName = try await curl(["--cacert", certs.caCertificate, "--resolve", "localhost:\(server.port):127.0.0.1",
                               "https://localhost:\(server.port)/g"])
        #expect(byName.status == 200)
        try await server.stop()
    }

    @Test func aPlainHTTPServerIsUnchanged() async throws {
        let server = try await HTTPTestServer.start()
        #expect(server.scheme == "http")
        #expect(server.url("x") == "http://127.0.0.1:\(server.port)/x")
        try await server.stop()
    }

    @Test func aMissingCertificateFailsAtStart() async throws {
        await #expect(throws: (any Error).self) {
            _ = try await HTTPTestServer.start(tls: .init(certificateChain: "/nonexistent/cert.pem", privateKey: "/nonexistent/key.pem"))
        }
    }
}
