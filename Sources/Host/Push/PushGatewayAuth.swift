import Foundation
import JWTKit
import NIOSSL
import Plugins
import Synchronization

// Provider authentication as APNs does it (Apple, "Establishing a token-based connection
// to APNs" and "Establishing a certificate-based connection to APNs"): off by default; a
// provider token (an ES256 JWT in `authorization: bearer <jwt>`, `kid` = key id, `iss` =
// team id, `iat` at most an hour old) checked against the keys the host is given, and/or
// a TLS client certificate chained to a trust root the host is given. Signatures are
// jwt-kit's (over swift-crypto), certificate checks NIOSSL's.

// MARK: - Settings

/// A provider signing key the gateway accepts tokens from: Apple's key id and team id,
/// and the key (`AuthKey_<KEYID>.p8` as Apple gives it, or its public key as PEM).
public struct ProviderKey: Sendable, Equatable, CustomStringConvertible {
    /// The key id (`kid`): 10 characters for Apple's keys.
    public var keyID: String
    /// The team id the token's `iss` must name: 10 characters for Apple's teams.
    public var teamID: String
    /// The PEM file: a PKCS#8 private key (`.p8`, -----BEGIN PRIVATE KEY-----), of which
    /// only the public half is kept, or a public key (-----BEGIN PUBLIC KEY-----).
    public var path: String

    /// The longest key id or team id taken (Apple's are 10 characters).
    public static let maximumIDLength = 64

    public init(keyID: String, teamID: String, path: String) {
        self.keyID = keyID
        self.teamID = teamID
        self.path = path
    }

    /// Parses `KEYID:TEAMID:PATH` (the path may itself hold colons).
    public init(parsing text: String) throws(PushGatewayError) {
        let parts = text.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        let example = "e.g. ABC123DEFG:DEF123GHIJ:AuthKey_ABC123DEFG.p8"
        guard parts.count == 3, !parts[2].isEmpty else {
            throw PushGatewayError("--apns-auth-key \"\(text)\": expected KEYID:TEAMID:PATH, \(example)")
        }
        for (what, value) in [("key id", parts[0]), ("team id", parts[1])] {
            guard !value.isEmpty, value.count <= Self.maximumIDLength, value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
                throw PushGatewayError("--apns-auth-key \"\(text)\": the \(what) must be 1...\(Self.maximumIDLength) letters and digits (Apple's are 10), \(example)")
            }
        }
        self.init(keyID: String(parts[0]), teamID: String(parts[1]), path: String(parts[2]))
    }

    /// `KEYID (team TEAMID)`.
    public var description: String { "\(keyID) (team \(teamID))" }
}

extension PushGatewaySettings {
    /// How providers prove who they are. Both off (the default): anyone who reaches the
    /// address may push, as suits a gateway on loopback.
    public struct Authentication: Sendable, Equatable {
        /// Token-based: every request carries an ES256 provider token signed by one of these.
        public var keys: [ProviderKey]
        /// Certificate-based: a PEM file of CA certificates; every TLS connection must
        /// present a client certificate chained to one of them (needs ``PushGatewaySettings/tls``).
        public var clientCAPath: String?

        public init(keys: [ProviderKey] = [], clientCAPath: String? = nil) {
            self.keys = keys
            self.clientCAPath = clientCAPath
        }

        /// Neither is on.
        public var isOff: Bool { keys.isEmpty && clientCAPath == nil }

        /// `token (2 keys), client certificates`, or `none`.
        public var summary: String {
            var parts: [String] = []
            if !keys.isEmpty { parts.append("provider tokens (\(keys.map(\.description).joined(separator: ", ")))") }
            if clientCAPath != nil { parts.append("client certificates") }
            return parts.isEmpty ? "none" : parts.joined(separator: " and ")
        }
    }
}

// MARK: - Token checks

/// Checks provider tokens as APNs does. Verified tokens are remembered (at most
/// ``cacheSize``), so a provider that reuses its token, as Apple asks, costs one
/// signature check per token rather than per push; each use still checks its age.
final class ProviderTokenVerifier: Sendable {
    /// The longest `authorization` value read (an ES256 token with Apple's claims is
    /// about 200 bytes); longer ones are refused before any parsing.
    static let maximumAuthorizationLength = 1024
    /// APNs refuses tokens issued more than an hour ago (ExpiredProviderToken).
    static let maximumAge: TimeInterval = 3600
    /// How far in the future `iat` may be (the provider's clock ahead of the host's).
    static let allowedClockSkew: TimeInterval = 300
    /// Verified tokens remembered.
    static let cacheSize = 64

    private struct Verified {
        var issuedAt: Date
    }

    private let keys: JWTKeyCollection
    private let teams: [String: String]
    private let cache = Mutex<[String: Verified]>([:])

    private init(keys: JWTKeyCollection, teams: [String: String]) {
        self.keys = keys
        self.teams = teams
    }

    /// Loads the keys' public halves; throws ``PushGatewayError`` naming a file that is
    /// missing or holds no P-256 key.
    static func load(_ providerKeys: [ProviderKey]) async throws -> ProviderTokenVerifier {
        let collection = JWTKeyCollection()
        var teams: [String: String] = [:]
        for key in providerKeys {
            if teams[key.keyID] != nil {
                throw PushGatewayError("--apns-auth-key: key id \(key.keyID) is given twice; each key id names one key")
            }
            let publicKey = try loadPublicKey(key)
            await collection.add(ecdsa: publicKey, kid: JWKIdentifier(string: key.keyID))
            teams[key.keyID] = key.teamID
        }
        return ProviderTokenVerifier(keys: collection, teams: teams)
    }

    /// The largest key file read.
    static let maximumKeyFile = 64 * 1024

    private static func loadPublicKey(_ key: ProviderKey) throws -> ES256PublicKey {
        guard let handle = FileHandle(forReadingAtPath: key.path) else {
            throw PushGatewayError("--apns-auth-key \(key.keyID): \(key.path): no such readable file")
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: maximumKeyFile + 1)) ?? Data()
        guard data.count <= maximumKeyFile, let pem = String(data: data, encoding: .utf8) else {
            throw PushGatewayError("--apns-auth-key \(key.keyID): \(key.path): not a PEM key file (expected AuthKey_\(key.keyID).p8 as Apple gives it)")
        }
        if pem.contains("PUBLIC KEY-----") {
            do { return try ES256PublicKey(pem: pem) } catch {
                throw PushGatewayError("--apns-auth-key \(key.keyID): \(key.path): not a P-256 public key: \(error)")
            }
        }
        do { return try ES256PrivateKey(pem: pem).publicKey } catch {
            throw PushGatewayError("--apns-auth-key \(key.keyID): \(key.path): not a P-256 (ES256) key as APNs uses: \(error); expected -----BEGIN PRIVATE KEY----- (AuthKey_\(key.keyID).p8) or -----BEGIN PUBLIC KEY-----")
        }
    }

    /// The claims of an APNs provider token.
    struct Claims: JWTPayload {
        var iss: IssuerClaim
        var iat: IssuedAtClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// Nil when `authorization` carries a valid provider token at `now`; else APNs' 403.
    func check(_ authorization: String?, now: Date) async -> APNsRejection? {
        guard let authorization, !authorization.isEmpty else {
            return APNsRejection(.missingProviderToken, "no authorization header: with token-based authentication on, send authorization: bearer <provider token>")
        }
        guard authorization.utf8.count <= Self.maximumAuthorizationLength else {
            return APNsRejection(.invalidProviderToken, "the authorization header is \(authorization.utf8.count) bytes; a provider token is at most \(Self.maximumAuthorizationLength)")
        }
        let scheme = "bearer "
        guard authorization.count > scheme.count, authorization.prefix(scheme.count).lowercased() == scheme else {
            return APNsRejection(.missingProviderToken, "the authorization header is not \"bearer <provider token>\"")
        }
        let token = String(authorization.dropFirst(scheme.count)).trimmingCharacters(in: .whitespaces)
        if let known = cache.withLock({ $0[token] }) {
            return Self.age(known.issuedAt, now: now)
        }
        let header: JWTHeader
        do {
            header = try DefaultJWTParser().parse(Array(token.utf8), as: Claims.self).header
        } catch {
            return APNsRejection(.invalidProviderToken, "the provider token is not a JWT with iss and iat claims: \(error)")
        }
        guard header.alg == "ES256" else {
            return APNsRejection(.invalidProviderToken, "the provider token's alg is \(header.alg ?? "missing"); APNs takes ES256")
        }
        guard let kid = header.kid, let team = teams[kid] else {
            return APNsRejection(.invalidProviderToken, "the provider token's kid \(header.kid.map { "\"\($0)\"" } ?? "is missing"); this gateway knows the keys \(teams.keys.sorted().joined(separator: ", "))")
        }
        let claims: Claims
        do {
            claims = try await keys.verify(token, as: Claims.self)
        } catch {
            return APNsRejection(.invalidProviderToken, "the provider token's signature does not verify with key \(kid)")
        }
        guard claims.iss.value == team else {
            return APNsRejection(.invalidProviderToken, "the provider token's iss is \"\(claims.iss.value)\"; key \(kid) belongs to team \(team)")
        }
        if let rejection = Self.age(claims.iat.value, now: now) { return rejection }
        cache.withLock { c in
            if c.count >= Self.cacheSize { c.removeAll(keepingCapacity: true) }
            c[token] = Verified(issuedAt: claims.iat.value)
        }
        return nil
    }

    private static func age(_ issuedAt: Date, now: Date) -> APNsRejection? {
        let age = now.timeIntervalSince(issuedAt)
        if age > maximumAge {
            return APNsRejection(.expiredProviderToken, "the provider token was issued \(Int(age)) s ago; APNs takes tokens at most \(Int(maximumAge)) s old: make a new one")
        }
        if age < -allowedClockSkew {
            return APNsRejection(.invalidProviderToken, "the provider token's iat is \(Int(-age)) s in the future (more than \(Int(allowedClockSkew)) s ahead of this host's clock)")
        }
        return nil
    }
}

// MARK: - Certificate checks

extension PushGatewaySettings.Authentication {
    /// The trust roots client certificates must chain to, read now so that a bad file is
    /// a start error naming it.
    func clientTrustRoots() throws -> NIOSSLTrustRoots? {
        guard let path = clientCAPath else { return nil }
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw PushGatewayError("--apns-client-ca \(path): no such readable file")
        }
        let roots: [NIOSSLCertificate]
        do {
            roots = try NIOSSLCertificate.fromPEMFile(path)
        } catch {
            throw PushGatewayError("--apns-client-ca \(path): \(error); expected PEM CA certificates (-----BEGIN CERTIFICATE-----)")
        }
        guard !roots.isEmpty else {
            throw PushGatewayError("--apns-client-ca \(path): no certificate in it; expected PEM CA certificates (-----BEGIN CERTIFICATE-----)")
        }
        return .certificates(roots)
    }
}
