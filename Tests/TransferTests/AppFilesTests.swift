import AppHostSystem
import Foundation
import SystemPackage
import TestSupport
import Testing
@testable import TransferCore

/// The daemon's way to the apps' files on its own: below the root, through no link.
@Suite struct AppFilesTests {
    private func write(_ path: String, _ text: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    /// Below the root a file is made, read, renamed and removed; a path outside the
    /// root, one through a folder link, and a last component that is a link are refused.
    @Test func filesBelowTheRootAndNothingThroughALink() throws {
        let dir = try TempDir("appfiles")
        defer { dir.remove() }
        let root = dir.path + "/containers"
        try FileManager.default.createDirectory(atPath: root + "/app/a/b", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir.path + "/outside", withIntermediateDirectories: true)
        try write(dir.path + "/outside/secret", "secret")
        let files = try AppFiles(root: root + "/")

        let fd = try files.open(root + "/app/a/b/f.part", flags: O_WRONLY | O_CREAT | O_TRUNC).get()
        #expect(Glibc.write(fd, "hello", 5) == 5)
        close(fd)
        #expect(files.rename(root + "/app/a/b/f.part", to: root + "/app/a/b/f") == nil)
        #expect(FileManager.default.contents(atPath: root + "/app/a/b/f") == Data("hello".utf8))
        #expect(files.status(root + "/app/a/b/f")?.st_size == 5)
        files.unlink(root + "/app/a/b/f")
        #expect(!FileManager.default.fileExists(atPath: root + "/app/a/b/f"))

        // Outside the root.
        #expect(throws: Errno.permissionDenied) { try files.open(dir.path + "/outside/secret", flags: O_RDONLY).get() }
        // A climb out of it.
        #expect(throws: Errno.permissionDenied) { try files.open(root + "/app/../../outside/secret", flags: O_RDONLY).get() }
        // A folder replaced by a link.
        #expect(symlink(dir.path + "/outside", root + "/app/a/link") == 0)
        #expect(throws: (any Error).self) { try files.open(root + "/app/a/link/secret", flags: O_RDONLY).get() }
        #expect(throws: (any Error).self) { try files.open(root + "/app/a/link/new", flags: O_WRONLY | O_CREAT).get() }
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/outside/new"))
        // The host's hand-over of a download: not through the folder link either.
        let before = try FileManager.default.attributesOfItem(atPath: dir.path + "/outside/secret")[.ownerAccountID] as? Int
        #expect(files.changeOwner(root + "/app/a/link/secret", uid: 54321, gid: 54321) != nil)
        #expect(try FileManager.default.attributesOfItem(atPath: dir.path + "/outside/secret")[.ownerAccountID] as? Int == before)
        if geteuid() == 0 {
            close(try files.open(root + "/app/a/b/mine", flags: O_WRONLY | O_CREAT).get())
            #expect(files.changeOwner(root + "/app/a/b/mine", uid: 54321, gid: 54321) == nil)
            #expect(files.status(root + "/app/a/b/mine")?.st_uid == 54321)
        }
        // A last component that is a link.
        #expect(symlink(dir.path + "/outside/secret", root + "/app/a/b/s") == 0)
        #expect(throws: Errno.tooManySymbolicLinkLevels) { try files.open(root + "/app/a/b/s", flags: O_WRONLY | O_TRUNC).get() }
        #expect(FileManager.default.contents(atPath: dir.path + "/outside/secret") == Data("secret".utf8))
        #expect(files.status(root + "/app/a/b/s").map { $0.st_mode & S_IFMT } == S_IFLNK)
    }

    /// A kept folder that was removed and made again is found again (the app was
    /// uninstalled and installed); one replaced by a link is not followed after that.
    @Test func aFolderMadeAgainIsFoundAgain() throws {
        let dir = try TempDir("appfiles-again")
        defer { dir.remove() }
        let root = dir.path + "/containers"
        let folder = root + "/app/t"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let files = try AppFiles(root: root)
        close(try files.open(folder + "/one", flags: O_WRONLY | O_CREAT).get())
        try FileManager.default.removeItem(atPath: root + "/app")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        close(try files.open(folder + "/two", flags: O_WRONLY | O_CREAT).get())
        #expect(FileManager.default.fileExists(atPath: folder + "/two"))

        try FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: dir.path + "/elsewhere", withIntermediateDirectories: true)
        #expect(symlink(dir.path + "/elsewhere", folder) == 0)
        #expect(throws: (any Error).self) { try files.open(folder + "/three", flags: O_WRONLY | O_CREAT).get() }
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/elsewhere/three"))
    }

    /// BeneathPath on its own: relative paths only, no "." or "..", no empty component.
    @Test func beneathPathRefusesWhatIsNotAPlainRelativePath() throws {
        let dir = try TempDir("beneath")
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.path + "/a", withIntermediateDirectories: true)
        let top = open(dir.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(top) }
        #expect(throws: Errno.invalidArgument) { try BeneathPath.open("/etc/passwd", below: top, flags: O_RDONLY).get() }
        #expect(throws: Errno.invalidArgument) { try BeneathPath.open("", below: top, flags: O_RDONLY).get() }
        #expect(throws: Errno.invalidArgument) { try BeneathPath.open("a//b", below: top, flags: O_RDONLY).get() }
        #expect(throws: Errno.permissionDenied) { try BeneathPath.open("./x", below: top, flags: O_RDONLY).get() }
        #expect(throws: Errno.permissionDenied) { try BeneathPath.open("../x", below: top, flags: O_RDONLY).get() }
        let fd = try BeneathPath.open("made", below: top, flags: O_WRONLY | O_CREAT, mode: 0o600).get()
        close(fd)
        #expect(FileManager.default.fileExists(atPath: dir.path + "/made"))
    }

    /// The host's transfers folder in an app's container: made folder by folder with the
    /// mode (and owner) asked; through a folder the app swapped for a link, nothing is
    /// made where the link points.
    @Test func foldersAreMadeBelowTheRootAndNotThroughALink() throws {
        let dir = try TempDir("appfiles-mkdir")
        defer { dir.remove() }
        let root = dir.path + "/containers"
        try FileManager.default.createDirectory(atPath: root + "/app", withIntermediateDirectories: true)
        let files = try AppFiles(root: root)
        let owner: (uid: uid_t, gid: gid_t)? = geteuid() == 0 ? (uid: 54321, gid: 54321) : nil
        #expect(files.makeFolders(root + "/app/Library/Caches/t", mode: 0o700, owner: owner) == nil)
        for folder in ["/app/Library", "/app/Library/Caches", "/app/Library/Caches/t"] {
            let st = files.status(root + folder)
            #expect(st.map { $0.st_mode & S_IFMT } == S_IFDIR, "\(folder)")
            #expect(st.map { $0.st_mode & 0o7777 } == 0o700, "\(folder)")
            if let owner { #expect(st?.st_uid == owner.uid, "\(folder)") }
        }
        // Made again: nothing to do.
        #expect(files.makeFolders(root + "/app/Library/Caches/t", mode: 0o700, owner: owner) == nil)

        try FileManager.default.createDirectory(atPath: dir.path + "/elsewhere", withIntermediateDirectories: true)
        try FileManager.default.removeItem(atPath: root + "/app/Library")
        #expect(symlink(dir.path + "/elsewhere", root + "/app/Library") == 0)
        #expect(files.makeFolders(root + "/app/Library/Caches/t", mode: 0o700, owner: owner) != nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path + "/elsewhere").isEmpty)
        // Outside the root, or climbing out of it.
        #expect(files.makeFolders(dir.path + "/elsewhere/x", mode: 0o700, owner: nil) == .permissionDenied)
        #expect(files.makeFolders(root + "/app/../../elsewhere/x", mode: 0o700, owner: nil) == .invalidArgument)
    }

    /// Kept folders are bounded: past ``AppFiles/cacheLimit`` the cache starts again,
    /// and every file is still reached (a dropped folder's descriptor is closed only
    /// once nothing uses it).
    @Test func keptFoldersStayWithinTheBound() throws {
        let dir = try TempDir("appfiles-bound")
        defer { dir.remove() }
        let root = dir.path + "/containers"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let files = try AppFiles(root: root)
        let count = AppFiles.cacheLimit * 2 + 5
        for i in 0..<count {
            try FileManager.default.createDirectory(atPath: root + "/app\(i)", withIntermediateDirectories: true)
            close(try files.open(root + "/app\(i)/f", flags: O_WRONLY | O_CREAT).get())
            #expect(files.keptFolders <= AppFiles.cacheLimit)
        }
        for i in 0..<count {
            #expect(files.status(root + "/app\(i)/f") != nil, "app\(i)")
        }
        #expect(files.keptFolders <= AppFiles.cacheLimit)
    }
}
