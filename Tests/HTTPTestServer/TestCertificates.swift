import Foundation

/// A throwaway certificate authority and a server certificate it signed, made with
/// the `openssl` command-line tool (scripts/setup.sh installs it) for HTTPS tests.
///
/// ```swift
/// let certs = try await TestCertificates.generate(in: dir)
/// let server = try await HTTPTestServer.start(tls: certs.serverFiles)
/// // trust certs.caCertificate in the client (e.g. curl --cacert, the transfer daemon's --extra-ca)
/// ```
public struct TestCertificates: Sendable, Equatable {
    /// The CA's certificate (PEM): what a client must trust.
    public var caCertificate: String
    /// The server's certificate (PEM), signed by the CA, for `127.0.0.1`, `::1` and `localhost`.
    public var serverCertificate: String
    /// The server certificate's private key (PEM).
    public var serverKey: String

    /// What ``HTTPTestServer/start(host:port:tls:)`` takes.
    public var serverFiles: HTTPTestServer.TLSFiles {
        HTTPTestServer.TLSFiles(certificateChain: serverCertificate, privateKey: serverKey)
    }

    /// `openssl` failed or is missing.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Makes a CA (P-256, valid one day) and a server certificate it signed for
    /// `127.0.0.1`, `::1` and `localhost` (serverAuth) in `directory`, which must exist.
    public static func generate(in directory: String) async throws -> TestCertificates {
        let ca = directory + "/ca.pem", caKey = directory + "/ca.key"
        let cert = directory + "/server.pem", key = directory + "/server.key"
        let csr = directory + "/server.csr", ext = directory + "/server.ext"
        try Data("""
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = serverAuth
            subjectAltName = IP:127.0.0.1, IP:::1, DNS:localhost

            """.utf8).write(to: URL(fileURLWithPath: ext))
        try await openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", caKey, "-out", ca, "-days", "1", "-subj", "/CN=AppHost Test CA",
                     "-addext", "basicConstraints=critical,CA:TRUE",
                     "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        try await openssl(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"])
        try await openssl(["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", caKey, "-set_serial", "2",
                     "-out", cert, "-days", "1", "-sha256", "-extfile", ext])
        return TestCertificates(caCertificate: ca, serverCertificate: cert, serverKey: key)
    }

    /// Makes a client certificate (clientAuth, P-256, valid one day) for `name`, signed by
    /// this CA, in the CA's directory: what a provider presents for certificate-based
    /// authentication. Returns the certificate and key files (PEM).
    public func makeClientCertificate(name: String) async throws -> (certificate: String, key: String) {
        let directory = (caCertificate as NSString).deletingLastPathComponent
        let caKey = directory + "/ca.key"
        let cert = directory + "/\(name).pem", key = directory + "/\(name).key"
        let csr = directory + "/\(name).csr", ext = directory + "/\(name).ext"
        try Data("""
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = clientAuth

            """.utf8).write(to: URL(fileURLWithPath: ext))
        try await Self.openssl(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                          "-keyout", key, "-out", csr, "-subj", "/CN=\(name)"])
        try await Self.openssl(["x509", "-req", "-in", csr, "-CA", caCertificate, "-CAkey", caKey, "-set_serial", "3",
                          "-out", cert, "-days", "1", "-sha256", "-extfile", ext])
        return (cert, key)
    }

    /// Runs `openssl` (found on PATH) with `arguments`; throws with its stderr if it fails.
    private static func openssl(_ arguments: [String]) async throws {
        let result: ToolResult
        do {
            result = try await Tool.runOnThread("/usr/bin/env", ["openssl"] + arguments)
        } catch {
            throw Failure(description: "cannot run openssl: \(error) (scripts/setup.sh installs it)")
        }
        guard result.exitCode == 0 else {
            let text = String(decoding: result.stderr, as: UTF8.self)
            throw Failure(description: "openssl \(arguments.prefix(2).joined(separator: " ")) failed (\(result.status); is openssl installed? scripts/setup.sh installs it): \(text)")
        }
    }
}
