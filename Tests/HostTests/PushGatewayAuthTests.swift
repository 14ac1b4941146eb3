import Foundation
import HTTPTestServer
import JWTKit
import Logging
import NIOPosix
import Plugins
import Synchronization
import TestSupport
import Testing
@testable import Host

// Provider authentication: tokens as APNs checks them (Apple, "Establishing a
// token-based connection to APNs"), driven over h2c by the gateway's NIO client against
// a gateway whose responder only echoes; certificates are in PushGatewayHTTPClientTests.

/// A provider's signing key as Apple gives it (`AuthKey_<KEYID>.p8`, PKCS#8 P-256), made
/// with openssl, and a signer for tokens as a provider library makes them.
struct ProviderSigningKey {
    let keyID: String
    let teamID: String
    let path: String
    let keys: JWTKeyCollection

    struct Claims: JWTPayload {
        var iss: IssuerClaim
        var iat: IssuedAtClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    static func make(keyID: String, teamID: String, in dir: String) async throws -> ProviderSigningKey {
        let path = dir + "/AuthKey_\(keyID).p8"
        let openssl = try #require(Tool.find("openssl"), "openssl (scripts/setup.sh installs it)")
        let made = try await Tool.run(openssl, ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path])
        try #require(made.status == 0, "openssl genpkey: \(made.stderr)")
        let pem = try String(contentsOfFile: path, encoding: .utf8)
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"), "a .p8 is PKCS#8")
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PrivateKey(pem: pem), kid: JWKIdentifier(string: keyID))
        return ProviderSigningKey(keyID: keyID, teamID: teamID, path: path, keys: keys)
    }

    var provider: ProviderKey { ProviderKey(keyID: keyID, teamID: teamID, path: path) }

    /// `bearer <jwt>` with `kid` (default: this key's id) in the header and `iss`, `iat` claims.
    func bearer(iss: String? = nil, issuedAt: Date, kid: String? = nil) async throws -> String {
        var header = JWTHeader()
        header.kid = kid ?? keyID
        // Signed with this key whatever kid the header names (a token for another key).
        let token = try await keys.sign(Claims(iss: .init(value: iss ?? teamID), iat: .init(value: issuedAt)),
                                        kid: JWKIdentifier(string: keyID), header: header)
        guard kid == nil || kid == keyID else {
            // The collection wrote this key's id: put the other kid back in the header.
            let parts = token.split(separator: ".")
            let headerJSON = #"{"alg":"ES256","kid":"\#(kid!)","typ":"JWT"}"#
            return "bearer " + base64URL(Data(headerJSON.utf8)) + "." + parts[1] + "." + parts[2]
        }
        return "bearer " + token
    }
}

func base64URL(_ data: Data) -> String {
    data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// A wall clock a test sets.
final class TestWallClock: Sendable {
    private let date = Mutex(Date())
    var now: Date { date.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { date.withLock { $0 += seconds } }
}

@Suite("Push gateway: provider authentication", .tags(.network), .timeLimit(.minutes(2)),
       .enabled(if: Tool.find("openssl") != nil, "needs openssl to make keys"))
struct PushGatewayAuthTests {
    static let token = String(repeating: "ab", count: 32)

    /// A gateway whose responder accepts everything with its apns-id (authentication is
    /// the gateway's, before any responder).
    func withAuthGateway(_ settings: PushGatewaySettings.Authentication, clock: TestWallClock = TestWallClock(),
                         _ body: (PushGateway, PushGatewayClient) async throws -> Void) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var logger = Logger(label: "test.auth")
        logger.logLevel = .warning
        let gateway = try await PushGateway.bind(settings: .init(authentication: settings), group: group, logger: logger,
                                                 now: { clock.now }) { request in
            .success(request.apnsID ?? APNsRequest.makeID())
        }
        let serving = Task { try await gateway.serve() }
        let client = try await PushGatewayClient.connect(host: "127.0.0.1", port: gateway.port, group: group)
        do {
            try await body(gateway, client)
        } catch {
            Issue.record(error)
        }
        await client.close()
        gateway.close()
        try await serving.value
        try await group.shutdownGracefully()
    }

    func push(_ client: PushGatewayClient, authorization: String?, apnsID: String? = nil) async throws -> PushGatewayClient.Response {
        try await client.push(token: Self.token, topic: "com.example.app", apnsID: apnsID,
                              extraHeaders: authorization.map { [("authorization", $0)] } ?? [],
                              payload: Data(alertPayload.utf8))
    }

    @Test func tokensAreCheckedAsAPNsChecksThem() async throws {
        let dir = try TempDir("auth")
        defer { dir.remove() }
        let k1 = try await ProviderSigningKey.make(keyID: "ABC123DEFG", teamID: "TEAM000001", in: dir.path)
        let k2 = try await ProviderSigningKey.make(keyID: "XYZ987WVUT", teamID: "TEAM000002", in: dir.path)
        let clock = TestWallClock()
        try await withAuthGateway(.init(keys: [k1.provider, k2.provider]), clock: clock) { gateway, client in
            let now = clock.now
            let good = try await k1.bearer(issuedAt: now)
            let id = "5f0c8d2e-7a1b-4c3d-9e8f-0a1b2c3d4e5f"
            let ok = try await push(client, authorization: good, apnsID: id)
            #expect(ok.status == 200 && ok.apnsID == id, "\(ok)")
            #expect(try await push(client, authorization: try await k2.bearer(issuedAt: now)).status == 200, "either key")

            let cases: [(String, String?, String)] = [
                ("no authorization", nil, "MissingProviderToken"),
                ("not bearer", "Basic dXNlcjpwYXNz", "MissingProviderToken"),
                ("not a JWT", "bearer not.a.jwt", "InvalidProviderToken"),
                ("an unknown kid", try await k1.bearer(issuedAt: now, kid: "UNKNOWN123"), "InvalidProviderToken"),
                ("k2's kid, signed by k1", try await k1.bearer(issuedAt: now, kid: k2.keyID), "InvalidProviderToken"),
                ("another team's iss", try await k1.bearer(iss: "TEAM000002", issuedAt: now), "InvalidProviderToken"),
                ("issued an hour and a second ago", try await k1.bearer(issuedAt: now - 3601), "ExpiredProviderToken"),
                ("issued ten minutes from now", try await k1.bearer(issuedAt: now + 600), "InvalidProviderToken"),
                ("HS256", "bearer " + (try await hs256(kid: k1.keyID, iss: k1.teamID, iat: now)), "InvalidProviderToken"),
            ]
            for (name, authorization, reason) in cases {
                let sent = UUID().uuidString.lowercased()
                let a = try await push(client, authorization: authorization, apnsID: sent)
                #expect(a.status == 403 && a.reason == reason, "\(name): \(a)")
                #expect(a.apnsID == sent, "\(name): a refusal echoes the apns-id too")
            }
            // Still valid at 59 minutes; the remembered token expires with the clock.
            clock.advance(59 * 60)
            #expect(try await push(client, authorization: good).status == 200)
            clock.advance(2 * 60)
            let stale = try await push(client, authorization: good)
            #expect(stale.status == 403 && stale.reason == "ExpiredProviderToken", "\(stale)")
            #expect(gateway.statistics.connections == 1, "a refusal does not cost the connection")
        }
    }

    @Test func theAuthorizationHeaderIsBounded() async throws {
        let dir = try TempDir("auth-bound")
        defer { dir.remove() }
        let k1 = try await ProviderSigningKey.make(keyID: "ABC123DEFG", teamID: "TEAM000001", in: dir.path)
        try await withAuthGateway(.init(keys: [k1.provider])) { _, client in
            let limit = ProviderTokenVerifier.maximumAuthorizationLength
            let over = try await push(client, authorization: "bearer " + String(repeating: "a", count: limit - 6))
            #expect(over.status == 403 && over.reason == "InvalidProviderToken")
            #expect(over.headers.contains { $0.hasPrefix("apphost-message:") && $0.contains("at most \(limit)") }, "\(over.headers)")
            let at = try await push(client, authorization: "bearer " + String(repeating: "a", count: limit - 7))
            #expect(at.status == 403 && at.reason == "InvalidProviderToken")
            #expect(!at.headers.contains { $0.contains("at most \(limit)") }, "at the bound it is read (and found no JWT): \(at.headers)")
            // Twice is refused, as APNs refuses repeated headers.
            let good = try await k1.bearer(issuedAt: Date())
            let twice = try await client.push(token: Self.token, topic: "com.example.app",
                                              extraHeaders: [("authorization", good), ("authorization", good)],
                                              payload: Data(alertPayload.utf8))
            #expect(twice.status == 400 && twice.reason == "DuplicateHeaders", "\(twice)")
        }
    }

    @Test func keysAreCheckedAtStart() async throws {
        let dir = try TempDir("auth-keys")
        defer { dir.remove() }
        let k1 = try await ProviderSigningKey.make(keyID: "ABC123DEFG", teamID: "TEAM000001", in: dir.path)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        func bind(_ auth: PushGatewaySettings.Authentication) async -> String? {
            do {
                let g = try await PushGateway.bind(settings: .init(authentication: auth), group: group, logger: Logger(label: "t")) { _ in .success("x") }
                let serving = Task { try await g.serve() }
                g.close()
                try? await serving.value
                return nil
            } catch {
                return "\(error)"
            }
        }
        let garbage = dir.path + "/garbage.p8"
        try Data("hello".utf8).write(to: URL(fileURLWithPath: garbage))
        #expect(await bind(.init(keys: [ProviderKey(keyID: "K", teamID: "T", path: dir.path + "/none.p8")]))?.contains("no such readable file") == true)
        #expect(await bind(.init(keys: [ProviderKey(keyID: "K", teamID: "T", path: garbage)]))?.contains("not a P-256 (ES256) key") == true)
        #expect(await bind(.init(keys: [k1.provider, k1.provider]))?.contains("given twice") == true)
        #expect(await bind(.init(clientCAPath: dir.path + "/ca.pem"))?.contains("need TLS") == true)
        // The public half alone is enough (the host need not hold the provider's secret).
        let pub = dir.path + "/key.pub.pem"
        let made = try await Tool.run(try #require(Tool.find("openssl")), ["pkey", "-in", k1.path, "-pubout", "-out", pub])
        try #require(made.status == 0, "\(made.stderr)")
        #expect(await bind(.init(keys: [ProviderKey(keyID: k1.keyID, teamID: k1.teamID, path: pub)])) == nil)
        try await group.shutdownGracefully()
    }

    @Test func providerKeyArguments() throws {
        #expect(try ProviderKey(parsing: "ABC123DEFG:TEAM000001:keys/AuthKey_ABC123DEFG.p8")
                == ProviderKey(keyID: "ABC123DEFG", teamID: "TEAM000001", path: "keys/AuthKey_ABC123DEFG.p8"))
        #expect(try ProviderKey(parsing: "K:T:/a:b.p8").path == "/a:b.p8", "the path keeps its colons")
        let long = String(repeating: "K", count: ProviderKey.maximumIDLength + 1)
        for bad in ["", "K", "K:T", "K:T:", ":T:f.p8", "K::f.p8", "K-1:T:f.p8", "\(long):T:f.p8"] {
            #expect(throws: PushGatewayError.self, "\(bad)") { try ProviderKey(parsing: bad) }
        }
        #expect(throws: Never.self) { try ProviderKey(parsing: String(repeating: "K", count: ProviderKey.maximumIDLength) + ":T:f.p8") }
    }

    /// An HS256 token: APNs takes ES256 only, whatever the signature.
    func hs256(kid: String, iss: String, iat: Date) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: String(repeating: "s", count: 32)), digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
        return try await keys.sign(ProviderSigningKey.Claims(iss: .init(value: iss), iat: .init(value: iat)), kid: JWKIdentifier(string: kid))
    }
}
