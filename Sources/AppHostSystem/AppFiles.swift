import Foundation
import Synchronization
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Where a privileged process touches the apps' files: the transfer daemon's downloads,
/// uploads and partial files, the host's hand-over and removal of a delivered download.
/// Both run as root (the daemon with `CAP_DAC_OVERRIDE` when apps have uids of their
/// own) in folders the apps own, so a symbolic link an app plants there must never
/// lead them elsewhere:
///
/// - the last component of a path is never followed (`O_NOFOLLOW`, `renameat`,
///   `unlinkat`, `fstatat(AT_SYMLINK_NOFOLLOW)` in the folder's descriptor), so a
///   `NAME.part` that is a link to `/etc/passwd` fails the download instead of
///   overwriting that file with the app's bytes;
/// - with a root (`--containers`, the host's containers folder) every path must lie
///   below it, and its folders are opened one at a time from the root, none through a
///   link ("`Library`" replaced by a link to `/etc` fails too).
///
/// Folders are opened once and their descriptors kept (at most ``cacheLimit``): each
/// open of a file is then one `openat` of its name, not a walk of the whole path (the
/// walk was a third of the cost of making a small download's file). A kept folder that
/// was removed meanwhile (an app uninstalled, a folder made again) answers `ENOENT` and
/// has no links left; the path is then resolved once more. (An `ENOENT` in a folder
/// that is still there, such as the removal of a file already gone, is the answer.)
public final class AppFiles: Sendable {
    /// A folder's descriptor (`O_PATH`), closed when nothing holds it any more: a file
    /// operation holds it while it runs, so dropping it from the cache never closes a
    /// descriptor another thread is using.
    final class Folder: Sendable {
        let fd: Int32
        init(fd: Int32) { self.fd = fd }
        deinit { close(fd) }
    }

    public static let cacheLimit = 64

    /// The folder below which every path must lie; nil: paths as given (the last
    /// component still not followed).
    public let root: String?
    private let rootFolder: Folder?
    private let folders = Mutex<[String: Folder]>([:])

    /// No root: paths are used as given (the last component still never followed).
    public init() {
        root = nil
        rootFolder = nil
    }

    /// Opens `root` (the caller's own folder, trusted: it may itself be reached through a link).
    public init(root: String?) throws {
        if let root {
            let trimmed = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
            let fd = Glibc.open(trimmed, BeneathPath.pathOnly | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else {
                throw AppFilesError(description: "cannot open the containers folder \(root): \(String(cString: strerror(errno)))")
            }
            self.root = trimmed
            rootFolder = Folder(fd: fd)
        } else {
            self.root = nil
            rootFolder = nil
        }
    }

    // MARK: Files

    /// Opens the file at `path` with `flags` (`O_NOFOLLOW` and `O_CLOEXEC` added).
    public func open(_ path: String, flags: Int32, mode: mode_t = 0o644) -> Result<Int32, Errno> {
        inFolder(of: path) { folder, name in
            let fd = openat(folder.fd, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)
            return fd >= 0 ? .success(fd) : .failure(Errno(rawValue: errno))
        }
    }

    /// Renames `from` to `to` (neither followed if a link). 0 or an errno value.
    public func rename(_ from: String, to: String) -> Errno? {
        let result: Result<Void, Errno> = inFolder(of: from) { source, fromName in
            inFolder(of: to) { target, toName in
                renameat(source.fd, fromName, target.fd, toName) == 0 ? .success(()) : .failure(Errno(rawValue: errno))
            }
        }
        if case .failure(let e) = result { return e }
        return nil
    }

    /// Removes the file at `path` (a link itself, not what it names); errors are ignored.
    public func unlink(_ path: String) {
        let _: Result<Void, Errno> = inFolder(of: path) { folder, name in
            unlinkat(folder.fd, name, 0) == 0 ? .success(()) : .failure(Errno(rawValue: errno))
        }
    }

    /// What is at `path`, a link not followed; nil if nothing (or it cannot be reached).
    public func status(_ path: String) -> stat? {
        let result: Result<stat, Errno> = inFolder(of: path) { folder, name in
            var st = stat()
            return fstatat(folder.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? .success(st) : .failure(Errno(rawValue: errno))
        }
        return try? result.get()
    }

    /// Gives the file at `path` (a link itself, not what it names) to `uid`:`gid`.
    @discardableResult
    public func changeOwner(_ path: String, uid: uid_t, gid: gid_t) -> Errno? {
        let result: Result<Void, Errno> = inFolder(of: path) { folder, name in
            fchownat(folder.fd, name, uid, gid, AT_SYMLINK_NOFOLLOW) == 0 ? .success(()) : .failure(Errno(rawValue: errno))
        }
        if case .failure(let e) = result { return e }
        return nil
    }

    /// Makes the folder `path` below the root and every missing folder on the way, each
    /// in turn and none through a link (`mkdirat`, then opened with `O_NOFOLLOW`): the
    /// folders it makes and `path` itself get `owner` (when given) and `mode`; folders
    /// that were there are left as they are. A link on the way fails (`ELOOP` or
    /// `ENOTDIR`): nothing is made where it points. Needs a root. 0 or an errno value.
    public func makeFolders(_ path: String, mode: mode_t, owner: (uid: uid_t, gid: gid_t)?) -> Errno? {
        guard let root, let rootFolder else { return .invalidArgument }
        guard path.hasPrefix(root + "/") || root == "/" else { return .permissionDenied }
        let names = path.dropFirst(root == "/" ? 1 : root.count + 1).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard !names.isEmpty, !names.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) else { return .invalidArgument }
        var current = dup(rootFolder.fd)
        guard current >= 0 else { return Errno(rawValue: errno) }
        defer { close(current) }
        for (index, name) in names.enumerated() {
            let made = mkdirat(current, name, mode) == 0
            if !made && errno != EEXIST { return Errno(rawValue: errno) }
            let next = openat(current, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard next >= 0 else { return Errno(rawValue: errno) }
            close(current)
            current = next
            guard made || index == names.count - 1 else { continue }
            var st = stat()
            guard fstat(current, &st) == 0 else { return Errno(rawValue: errno) }
            if let owner, st.st_uid != owner.uid || st.st_gid != owner.gid, fchown(current, owner.uid, owner.gid) != 0 {
                return Errno(rawValue: errno)
            }
            // (mkdir's mode went through the umask.)
            if st.st_mode & 0o7777 != mode, fchmod(current, mode) != 0 { return Errno(rawValue: errno) }
        }
        return nil
    }

    // MARK: Folders

    /// Runs `body` with the folder holding `path` and the path's last component; a kept
    /// folder that answers `ENOENT` is opened again and `body` runs once more.
    private func inFolder<T>(of path: String, _ body: (Folder, String) -> Result<T, Errno>) -> Result<T, Errno> {
        guard let slash = path.lastIndex(of: "/") else { return .failure(.invalidArgument) }
        let directory = slash == path.startIndex ? "/" : String(path[..<slash])
        let name = String(path[path.index(after: slash)...])
        guard !name.isEmpty, name != ".", name != ".." else { return .failure(.invalidArgument) }
        var kept = true
        var folder: Folder
        if let cached = folders.withLock({ $0[directory] }) {
            folder = cached
        } else {
            switch openFolder(directory) {
            case .success(let f): folder = f
            case .failure(let e): return .failure(e)
            }
            keep(folder, for: directory)
            kept = false
        }
        let result = body(folder, name)
        guard kept, case .failure(.noSuchFileOrDirectory) = result, Self.isRemoved(folder) else { return result }
        // The kept folder is gone (removed, perhaps made again): once more from the path.
        folders.withLock { _ = $0.removeValue(forKey: directory) }
        switch openFolder(directory) {
        case .success(let f): folder = f
        case .failure(let e): return .failure(e)
        }
        keep(folder, for: directory)
        return body(folder, name)
    }

    /// Whether a kept folder was removed (no name links to it any more): then `ENOENT`
    /// in it says nothing about the path, which may name a folder made since.
    private static func isRemoved(_ folder: Folder) -> Bool {
        var st = stat()
        return fstat(folder.fd, &st) != 0 || st.st_nlink == 0
    }

    /// How many folders are kept now (at most ``cacheLimit``).
    public var keptFolders: Int { folders.withLock { $0.count } }

    private func keep(_ folder: Folder, for directory: String) {
        folders.withLock { cache in
            if cache.count >= Self.cacheLimit { cache.removeAll() }
            cache[directory] = folder
        }
    }

    /// Opens `directory`: below the root without following a link, or as given.
    private func openFolder(_ directory: String) -> Result<Folder, Errno> {
        guard let root, let rootFolder else {
            let fd = Glibc.open(directory, BeneathPath.pathOnly | O_DIRECTORY | O_CLOEXEC)
            return fd >= 0 ? .success(Folder(fd: fd)) : .failure(Errno(rawValue: errno))
        }
        if directory == root {
            let fd = dup(rootFolder.fd)
            return fd >= 0 ? .success(Folder(fd: fd)) : .failure(Errno(rawValue: errno))
        }
        guard directory.hasPrefix(root + "/") || root == "/" else { return .failure(.permissionDenied) }
        let relative = String(directory.dropFirst(root == "/" ? 1 : root.count + 1))
        return BeneathPath.open(relative, below: rootFolder.fd, flags: BeneathPath.pathOnly | O_DIRECTORY).map { Folder(fd: $0) }
    }
}

/// The containers folder given to the daemon cannot be opened.
public struct AppFilesError: Error, CustomStringConvertible {
    public let description: String
}
