import AppHostProtocol
import CAppHostStamp
import Foundation
import TestSupport
import Testing
@testable import Host

#if canImport(Glibc)
import Glibc
#endif

/// Closing and opening an app's protected files on disk (``ProtectedFiles``), as root,
/// with files owned by a uid standing in for the app's; no process.
@Suite("Protected files", .enabled(if: geteuid() == 0, "changing a file's owner needs root"))
struct ProtectedFilesTests {
    let uid: uid_t = 299_990

    func owner(_ path: String) -> (uid: uid_t, mode: mode_t) {
        var st = stat()
        _ = lstat(path, &st)
        return (st.st_uid, st.st_mode & 0o7777)
    }

    func file(_ path: String, _ protection: FileProtectionClass?, uid: uid_t? = nil) throws {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data("secret".utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o660)
        if let protection { #expect(aph_xattr_set(path, FileProtectionClass.attribute, protection.rawValue, protection.rawValue.utf8.count) == 0) }
        #expect(chown(path, uid ?? self.uid, uid ?? self.uid) == 0)
    }

    @Test func lockClosesCompleteFilesAndUnlockGivesThemBack() throws {
        let dir = try TempDir("protect")
        defer { dir.remove() }
        let root = dir.path
        try file(root + "/Documents/secret", .complete)
        try file(root + "/Documents/deep/er/vault", .complete)
        try file(root + "/Documents/plain", FileProtectionClass.none)
        try file(root + "/Library/prefs", nil)
        try file(root + "/Library/other", .complete, uid: uid + 1)
        let locked = ProtectedFiles.apply(.locked, root: root, uid: uid, gid: uid)
        #expect(locked == ProtectedFiles.Outcome(closed: 2))
        #expect(owner(root + "/Documents/secret") == (0, 0))
        #expect(owner(root + "/Documents/deep/er/vault") == (0, 0))
        #expect(owner(root + "/Documents/plain") == (uid, 0o660))
        #expect(owner(root + "/Library/prefs") == (uid, 0o660), "the default class stays open after the first unlock")
        #expect(owner(root + "/Library/other") == (uid + 1, 0o660), "not the app's: not touched")
        #expect(ProtectedFiles.apply(.locked, root: root, uid: uid, gid: uid) == ProtectedFiles.Outcome(), "closing twice changes nothing")
        let opened = ProtectedFiles.apply(.open, root: root, uid: uid, gid: uid)
        #expect(opened == ProtectedFiles.Outcome(opened: 2))
        #expect(owner(root + "/Documents/secret") == (uid, 0o660))
        var length = 0
        #expect(aph_xattr_get(root + "/Documents/secret", ProtectedFiles.ownerAttribute, nil, 0, &length) == ENODATA, "the saved owner is gone")
    }

    @Test func beforeTheFirstUnlockTheDefaultClassClosesToo() throws {
        let dir = try TempDir("protect-boot")
        defer { dir.remove() }
        try file(dir.path + "/a", nil)
        try file(dir.path + "/b", FileProtectionClass.none)
        #expect(ProtectedFiles.apply(.lockedSinceBoot, root: dir.path, uid: uid, gid: uid).closed == 1)
        #expect(owner(dir.path + "/a") == (0, 0))
        #expect(ProtectedFiles.apply(.open, root: dir.path, uid: uid, gid: uid).opened == 1)
    }

    @Test func symbolicLinksAreNeverFollowed() throws {
        let dir = try TempDir("protect-links")
        defer { dir.remove() }
        let outside = try TempDir("protect-outside")
        defer { outside.remove() }
        try file(outside.path + "/target", .complete)
        try FileManager.default.createDirectory(atPath: dir.path + "/c", withIntermediateDirectories: true)
        #expect(symlink(outside.path + "/target", dir.path + "/c/link") == 0)
        #expect(symlink(outside.path, dir.path + "/c/dirlink") == 0)
        #expect(ProtectedFiles.apply(.locked, root: dir.path + "/c", uid: uid, gid: uid) == ProtectedFiles.Outcome())
        #expect(owner(outside.path + "/target") == (uid, 0o660))
    }

    @Test func aForgedSavedOwnerOnTheAppsOwnFileIsIgnored() throws {
        let dir = try TempDir("protect-forge")
        defer { dir.remove() }
        try file(dir.path + "/f", FileProtectionClass.none)
        let forged = "0:0:4755"
        #expect(aph_xattr_set(dir.path + "/f", ProtectedFiles.ownerAttribute, forged, forged.utf8.count) == 0)
        #expect(ProtectedFiles.apply(.open, root: dir.path, uid: uid, gid: uid) == ProtectedFiles.Outcome())
        #expect(owner(dir.path + "/f") == (uid, 0o660))
    }

    @Test func theWalkIsBounded() throws {
        let dir = try TempDir("protect-deep")
        defer { dir.remove() }
        var path = dir.path
        for _ in 0..<(ProtectedFiles.maximumDepth + 2) { path += "/d" }
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try file(path + "/f", .complete)
        let outcome = ProtectedFiles.apply(.locked, root: dir.path, uid: uid, gid: uid)
        #expect(outcome.cut)
        #expect(outcome.closed == 0)
    }
}
