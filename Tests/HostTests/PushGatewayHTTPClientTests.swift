import AppHostProtocol
import AsyncHTTPClient
import Foundation
import HTTPTestServer
import NIOCore
import NIOPosix
import NIOSSL
import Plugins
import TestSupport
import Testing
@testable import Host

// The gateway as a real provider library uses it: AsyncHTTPClient (not curl, not the
// gateway's own client) over TLS with ALPN h2, many pushes at once on one connection,
// each answer matched to its request by the apns-id it sent (as provider libraries do);
// certificate-based provider authentication; and the apns-id of each delivery in the
// event log. Device tokens: random per install and host, kept across restarts.

@Suite("Push gateway (AsyncHTTPClient over TLS)", .tags(.process, .network), .timeLimit(.minutes(2)),
       .enabled(if: probeBuilt, "sample apps not built: run `swift build` first (scripts/test.sh does)"),
       .enabled(if: Tool.find("openssl") != nil, "needs openssl to make certificates"))
struct PushGatewayHTTPClientTests {
    /// An HTTP/2 client over TLS trusting `ca`, presenting `client` (certificate, key) if given.
    /// `retry: false` for a client that is to be refused: AsyncHTTPClient otherwise opens
    /// connection after connection (15 in its 10 s connect timeout) before it gives up.
    func makeClient(ca: String, client: (certificate: String, key: String)?, group: any EventLoopGroup, retry: Bool = true) throws -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(ca)
        if let client {
            tls.certificateChain = try NIOSSLCertificate.fromPEMFile(client.certificate).map { .certificate($0) }
            tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: client.key, format: .pem))
        }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.httpVersion = .automatic  // ALPN: h2 when the server offers it
        configuration.connectionPool.retryConnectionEstablishment = retry
        return HTTPClient(eventLoopGroupProvider: .shared(group), configuration: configuration)
    }

    func push(_ client: HTTPClient, url: String, topic: String, apnsID: String) async throws -> HTTPClientResponse {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "apns-topic", value: topic)
        request.headers.add(name: "apns-push-type", value: "alert")
        request.headers.add(name: "apns-id", value: apnsID)
        request.body = .bytes(ByteBuffer(string: alertPayload))
        return try await client.execute(request, timeout: .seconds(30))
    }

    @Test func concurrentPushesOnOneConnectionAreAnsweredByTheirOwnAPNsID() async throws {
        let dir = try TempDir("gw-ahc")
        defer { dir.remove() }
        let certs = try await TestCertificates.generate(in: dir.path)
        let provider = try await certs.makeClientCertificate(name: "provider")
        // A client certificate from another CA: refused as one without any.
        let otherDir = try TempDir("gw-ahc-other")
        defer { otherDir.remove() }
        let stranger = try await TestCertificates.generate(in: otherDir.path).makeClientCertificate(name: "stranger")

        try await withGateway("gw-ahc", tls: .init(certificatePath: certs.serverCertificate, privateKeyPath: certs.serverKey),
                              authentication: .init(clientCAPath: certs.caCertificate)) { g in
            let id: BundleID = "com.test.gw.ahc"
            let token = try await g.installPushProbe(id)
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)

            for (name, identity) in [("no client certificate", nil), ("another CA's certificate", stranger)] as [(String, (certificate: String, key: String)?)] {
                let refused = try makeClient(ca: certs.caCertificate, client: identity, group: group, retry: false)
                do {
                    _ = try await push(refused, url: g.url(token), topic: id.rawValue, apnsID: UUID().uuidString.lowercased())
                    Issue.record("\(name): the push was answered; the handshake should have failed")
                } catch {
                    // The server refused (a TLS alert, or the connection closed): not the
                    // client giving up on its own.
                    let gaveUp = (error as? HTTPClientError).map { $0 == .connectTimeout || $0 == .deadlineExceeded } ?? false
                    #expect(!gaveUp, "\(name): \(error)")
                }
                try await refused.shutdown()
            }
            #expect(g.gateway.statistics.streams == 0, "nothing got past a handshake without a valid certificate")

            let client = try makeClient(ca: certs.caCertificate, client: provider, group: group)
            // One push first: the connection is open and known to speak h2 before the rest.
            let first = UUID().uuidString.lowercased()
            let warm = try await push(client, url: g.url(token), topic: id.rawValue, apnsID: first)
            #expect(warm.status == .ok && warm.version == .http2, "\(warm.status) \(warm.version)")
            #expect(warm.headers.first(name: "apns-id") == first)
            let connectionsBefore = g.gateway.statistics.connections

            // Ids as libraries send them: lowercase (most), upper-case (Foundation's
            // uuidString), mixed: each must come back exactly as sent.
            let n = 20
            let ids = (0..<n).map { i -> String in
                let u = UUID().uuidString
                switch i % 3 {
                case 0: return u.lowercased()
                case 1: return u
                default: return String(u.enumerated().map { $0.offset % 2 == 0 ? Character($0.element.lowercased()) : $0.element })
                }
            }
            let answers = try await withThrowingTaskGroup(of: (String, String?, UInt, Bool).self) { tasks in
                for sent in ids {
                    tasks.addTask {
                        let r = try await push(client, url: g.url(token), topic: id.rawValue, apnsID: sent)
                        return (sent, r.headers.first(name: "apns-id"), r.status.code, r.version == .http2)
                    }
                }
                var out: [(String, String?, UInt, Bool)] = []
                for try await a in tasks { out.append(a) }
                return out
            }
            try await client.shutdown()
            try await group.shutdownGracefully()
            #expect(answers.count == n)
            for (sent, echoed, status, http2) in answers {
                #expect(status == 200 && http2, "\(sent): \(status), HTTP/2: \(http2)")
                #expect(echoed == sent, "the answer carries the apns-id exactly as sent: \(sent) → \(echoed ?? "none")")
            }
            #expect(g.gateway.statistics.connections == connectionsBefore, "all \(n) on the one connection")
            #expect(g.gateway.statistics.streams == n + 1)

            // The event log says which apns-id each delivery was (a provider's answer is
            // matched to what the app received).
            let logged = await g.host.events(id).compactMap(\.apnsID)
            #expect(Set(logged) == Set(ids + [first]), "\(logged)")
        }
    }
}

@Suite("Device tokens", .tags(.process), .timeLimit(.minutes(2)),
       .enabled(if: probeBuilt, "sample apps not built: run `swift build` first (scripts/test.sh does)"))
struct DeviceTokenHostTests {
    let entitled: [String: Any] = ["aps-environment": "development"]

    @Test func randomPerHostAndKeptAcrossRestarts() async throws {
        let a = try TestHost(label: "tok-a")
        let b = try TestHost(label: "tok-b")
        try await a.installProbe("com.test.tok", entitlements: entitled)
        try await b.installProbe("com.test.tok", entitlements: entitled)
        let ta = try #require(await a.supervisor.deviceToken(of: "com.test.tok"))
        let tb = try #require(await b.supervisor.deviceToken(of: "com.test.tok"))
        #expect(ta != tb, "two hosts (state dirs) give the same app different tokens")
        let voip = try #require(await a.supervisor.deviceToken(of: "com.test.tok", .voip))
        #expect(voip != ta)
        await b.stop()

        // Restart: the same tokens; uninstall: 410 for the old one, even after a restart.
        await a.stop(removing: false)
        let again = try TestHost(reopening: a.dir)
        #expect(await again.supervisor.deviceToken(of: "com.test.tok") == ta)
        #expect(await again.supervisor.deviceToken(of: "com.test.tok", .voip) == voip)
        try await again.supervisor.uninstall("com.test.tok")
        await again.stop(removing: false)
        let third = try TestHost(reopening: a.dir)
        let request = APNsRequest(token: ta, topic: "com.test.tok", payload: Data(alertPayload.utf8))
        if case .failure(let refused) = await third.supervisor.apnsPush(request) {
            #expect(refused.kind == .unregistered, "\(refused)")
        } else {
            Issue.record("a push to an uninstalled app's token was accepted")
        }
        try await third.installProbe("com.test.tok", entitlements: entitled)
        let reinstalled = try #require(await third.supervisor.deviceToken(of: "com.test.tok"))
        #expect(reinstalled != ta, "a reinstalled app gets a new token, as on iOS")
        await third.stop()
    }

    /// A host before v8 kept uninstalled apps' tokens as settings: they stay retired (410).
    @Test func theMigrationKeepsRetiredTokens() throws {
        let dir = try TempDir("tok-mig")
        defer { dir.remove() }
        let path = dir.path + "/apphost.sqlite"
        let old = String(repeating: "cd", count: 32)
        do {
            let store = try Store(path: path)
            try store.pool.write { db in
                try db.execute(sql: "DROP TABLE deviceToken")
                try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v8: device tokens'")
            }
            try store.setSetting(key: "retiredToken.\(old)", value: "com.example.gone")
            try store.setSetting(key: "device.power", value: "battery")
        }
        let store = try Store(path: path)
        #expect(try store.deviceTokens() == [DeviceTokenRecord(token: old, bundleIdentifier: "com.example.gone", kind: .apns, retired: true)])
        #expect(try store.settings().map(\.key) == ["device.power"], "the old rows moved, the others stay")
    }
}
