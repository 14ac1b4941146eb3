import AppHostProtocol
import Foundation
import LoopbackHTTP
import TestSupport
import Testing
@testable import TransferCore

/// The daemon writes downloads into, and reads uploads from, folders the apps own, as
/// root: a link an app plants there must never take the daemon elsewhere. With
/// `--containers DIR` nothing below DIR is resolved through a symbolic link; the last
/// component of a path is never followed in any case.
@Suite struct DaemonFileSafetyTests {
    /// Runs `body` with a server and a daemon (with `--containers root` when given), then
    /// stops both; the daemon must exit cleanly.
    private func withDaemon(_ dir: TempDir, containers root: String?,
                            _ body: (HTTPTestServer, Daemon) async throws -> Void) async throws {
        let server = try await HTTPTestServer.start()
        do {
            let daemon = try await Daemon.spawn(stateDir: dir.path + "/state", arguments: root.map { ["--containers", $0] } ?? [],
                                                stderrPath: dir.path + "/stderr")
            do {
                try await daemon.next("ready")
                try await body(server, daemon)
            } catch {
                _ = await daemon.kill9()
                throw error
            }
            #expect(await daemon.stop() == .exited(code: 0))
        } catch {
            try? await server.stop()
            throw error
        }
        try await server.stop()
    }

    /// The failure code of transfer 1, which must fail.
    private func failureCode(_ daemon: Daemon) async throws -> String? {
        let done = try await daemon.next("finished 1", where: isFinished(1))
        guard case .failed(let code, _)? = finishedOutcome(done) else {
            Issue.record("finished \(String(describing: finishedOutcome(done)))")
            return nil
        }
        return code
    }

    /// A file outside the apps' folders that a planted link points at.
    private func victim(_ dir: TempDir) throws -> (path: String, bytes: Data) {
        let path = dir.path + "/victim"
        let bytes = Data("root's own file\n".utf8)
        try bytes.write(to: URL(fileURLWithPath: path))
        return (path, bytes)
    }

    /// The app plants `NAME.part` (and the destination itself) as links to a file of
    /// root's: the download fails, and that file is untouched. (Before, the daemon opened
    /// the link with O_TRUNC and wrote the app's bytes into whatever it named.)
    @Test(arguments: [false, true])
    func aPlantedPartialFileLinkIsNotFollowed(containers: Bool) async throws {
        let dir = try TempDir("safety-part")
        defer { dir.remove() }
        let root = dir.path + "/containers"
        let app = root + "/com.example.t/Library/Caches/com.apphost.transfers"
        try FileManager.default.createDirectory(atPath: app, withIntermediateDirectories: true)
        let target = try victim(dir)
        let destination = app + "/CFNetworkDownload_1.tmp"
        #expect(symlink(target.path, destination + ".part") == 0)
        try await withDaemon(dir, containers: containers ? root : nil) { server, daemon in
            server.serve("/x", resource: .generated(size: 5000, seed: 3))
            try daemon.send(.enqueue(job(1, url: server.url("/x"), destination: destination)))
            #expect(try await failureCode(daemon) == "cannotCreateFile")
            #expect(FileManager.default.contents(atPath: target.path) == target.bytes)
        }
    }

    /// With `--containers`, a folder the app replaced by a link (to a folder of root's)
    /// is not followed: the download fails and nothing is made there.
    @Test func aPlantedFolderLinkIsNotFollowedBelowTheContainers() async throws {
        let dir = try TempDir("safety-dir")
        defer { dir.remove() }
        let root = dir.path + "/containers"
        let caches = root + "/com.example.t/Library/Caches"
        let elsewhere = dir.path + "/elsewhere"
        try FileManager.default.createDirectory(atPath: caches, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        #expect(symlink(elsewhere, caches + "/com.apphost.transfers") == 0)
        try await withDaemon(dir, containers: root) { server, daemon in
            server.serve("/x", resource: .generated(size: 5000, seed: 4))
            try daemon.send(.enqueue(job(1, url: server.url("/x"), destination: caches + "/com.apphost.transfers/CFNetworkDownload_1.tmp")))
            #expect(try await failureCode(daemon) == "cannotCreateFile")
            #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty)
        }
    }

    /// An upload file the app swaps for a link after the host checked it (to a file of
    /// root's) is not read: the upload fails and nothing of that file is sent.
    @Test(arguments: [false, true])
    func anUploadFileSwappedForALinkIsNotRead(containers: Bool) async throws {
        let dir = try TempDir("safety-up")
        defer { dir.remove() }
        let root = dir.path + "/containers"
        let documents = root + "/com.example.t/Documents"
        try FileManager.default.createDirectory(atPath: documents, withIntermediateDirectories: true)
        let target = try victim(dir)
        #expect(symlink(target.path, documents + "/up.bin") == 0)
        try await withDaemon(dir, containers: containers ? root : nil) { server, daemon in
            try daemon.send(.enqueue(job(1, url: server.url("/u"), destination: "", kind: .upload, method: "PUT",
                                         uploadFile: documents + "/up.bin")))
            #expect(try await failureCode(daemon) != nil)
            #expect(server.uploads("/u").isEmpty)
        }
    }
}
