import AppHostProtocol
import Foundation
import TestSupport
import GRDB
import Testing
@testable import Host

/// Privacy decisions in `apphost.sqlite`: typed in, the same strings on disk, and rows
/// this build does not know never stop a host from starting.
@Suite struct PrivacyStoreTests {
    @Test func typedDecisionsAreStoredAsTheOldStrings() throws {
        let dir = try TempDir("privacy")
        defer { dir.remove() }
        let store = try Store(path: dir.path + "/apphost.sqlite")
        try store.setPrivacy(bundleIdentifier: "com.example.a", service: .locationAlways, value: .granted)
        try store.setPrivacy(bundleIdentifier: "com.example.a", service: .camera, value: .denied)
        #expect(try store.privacy().map { "\($0.service)=\($0.value)" } == ["camera=denied", "location-always=granted"])
        try store.setPrivacy(bundleIdentifier: "com.example.a", service: .camera, value: nil)
        #expect(try store.privacy().map(\.service) == ["location-always"])
    }

    /// A service or decision unknown to this host (a newer host's) counts as not
    /// determined: the host starts, and the rows stay for the host that wrote them.
    @Test func aHostStartsOverUnknownRows() async throws {
        let first = try TestHost(label: "privacy")
        await first.stop(removing: false)
        let path = first.dir.path + "/apphost.sqlite"
        try await DatabaseQueue(path: path).write { db in
            for (service, value) in [("location", "granted"), ("telepathy", "granted"), ("camera", "maybe")] {
                try db.execute(sql: "INSERT INTO privacy (bundleIdentifier, service, value) VALUES (?, ?, ?)",
                               arguments: ["com.example.a", service, value])
            }
        }
        let again = try TestHost(reopening: first.dir)
        #expect(try await again.supervisor.status(nil).isEmpty)
        await again.stop(removing: false)
        #expect(try Store(path: path).privacy().count == 3)
        first.dir.remove()
    }
}
