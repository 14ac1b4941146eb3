import AppHostSystem
import AppHostProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where per-app identities come from (`"identities"` in the host config).
///
/// A host running as root runs each app as a uid of its own, as Android gives each app
/// a uid at install and systemd's `DynamicUser=` gives each service one: another app's
/// files, the host's and root's are then closed to it by the kernel's own permission
/// checks (chmod, chown, xattrs, utimes, prlimit, inotify, stat), before any policy of
/// ours is asked. Each App Group gets a gid of its own, shared by the group's apps.
public struct IdentitySettings: Sendable, Equatable {
    /// The first id of the range (uids and gids alike).
    public var first: UInt32
    /// How many ids the range holds.
    public var count: UInt32
    /// The machine-wide claims, one file per id in use (`<dir>/<id>` holding the
    /// state directory and the app or group), so that two hosts on one machine never
    /// hand out the same id. Ids of a state directory that no longer exists are
    /// taken back.
    public var registryDirectory: String

    /// 200000–299999, above the ids distributions give users and systemd's dynamic
    /// users (61184–65519), below the subordinate ranges `useradd` hands out per user
    /// from 100000 upwards in steps of 65536 only by coincidence; change it where that
    /// range is in use (`"identities": {"first": N, "count": M}`).
    public static let standard = IdentitySettings(first: 200_000, count: 100_000,
                                                  registryDirectory: "/var/lib/apphost/ids")

    public init(first: UInt32, count: UInt32, registryDirectory: String) {
        self.first = first
        self.count = count
        self.registryDirectory = registryDirectory
    }
}

/// Why an identity could not be given.
struct IdentityError: Error, CustomStringConvertible {
    var description: String
}

/// The uids of apps and gids of App Groups of one state directory: allocated from the
/// configured range, kept in the database for the app's life, claimed machine-wide.
/// Owned by the ``Supervisor`` actor (not thread-safe on its own).
final class AppIdentities {
    enum Kind: String {
        case app
        case group
    }

    private struct Key: Hashable {
        var kind: Kind
        var name: String
    }

    let settings: IdentitySettings
    private let stateDirectory: String
    private let store: Store
    private var ids: [Key: UInt32] = [:]
    /// Ids whose machine-wide claim this host has checked since it started.
    private var claimed: Set<UInt32> = []

    init(settings: IdentitySettings, stateDirectory: String, store: Store) throws {
        self.settings = settings
        self.stateDirectory = stateDirectory
        self.store = store
        for row in try store.identities() {
            guard let kind = Kind(rawValue: row.kind) else { continue }
            ids[Key(kind: kind, name: row.name)] = row.id
        }
    }

    /// The identity `app` runs as: its own uid, a gid of the same number, and the gids
    /// of its App Groups as supplementary groups.
    func identity(app: BundleID, groups: [String]) throws -> ProcessIdentity {
        let uid = try id(.app, app.rawValue)
        let gids = try groups.map { try id(.group, $0) }
        return ProcessIdentity(uid: uid, gid: uid, groups: gids)
    }

    /// The gid of an App Group.
    func groupID(_ group: String) throws -> UInt32 {
        try id(.group, group)
    }

    /// The gid an App Group has been given, if any (without allocating one).
    func existingGroupID(_ group: String) -> UInt32? {
        ids[Key(kind: .group, name: group)]
    }

    /// The uid an app has been given, if any (without allocating one).
    func existingUID(app: BundleID) -> UInt32? {
        ids[Key(kind: .app, name: app.rawValue)]
    }

    /// Forgets an app's uid (uninstall) and gives back its claim.
    func release(app: BundleID) {
        let key = Key(kind: .app, name: app.rawValue)
        guard let id = ids.removeValue(forKey: key) else { return }
        try? store.deleteIdentity(kind: key.kind.rawValue, name: app.rawValue)
        withRegistryLock { unclaim(id) }
        claimed.remove(id)
    }

    private func id(_ kind: Kind, _ name: String) throws -> UInt32 {
        let key = Key(kind: kind, name: name)
        if let id = ids[key], claimed.contains(id) { return id }
        return try withRegistryLock { () throws -> UInt32 in
            if let id = ids[key] {
                // Kept in the database: still ours unless another live host took it
                // meanwhile (its state directory moved here from elsewhere).
                if claim(id, for: key) {
                    claimed.insert(id)
                    return id
                }
            }
            let id = try allocate(for: key)
            try store.saveIdentity(kind: kind.rawValue, name: name, id: id)
            ids[key] = id
            claimed.insert(id)
            return id
        }
    }

    /// A free id of the range, claimed: first the one the name hashes to (stable across
    /// a reinstall), then the next ones.
    private func allocate(for key: Key) throws -> UInt32 {
        let used = Set(ids.values)
        let start = UInt32(truncatingIfNeeded: Self.hash(stateDirectory + "\u{0}" + key.kind.rawValue + ":" + key.name)) % settings.count
        for step in 0..<settings.count {
            let id = settings.first + (start &+ step) % settings.count
            if used.contains(id) || Self.namesAccount(id) { continue }
            if claim(id, for: key) { return id }
        }
        throw IdentityError(description: "no free id left in \(settings.first)...\(settings.first + settings.count - 1) (\(settings.registryDirectory) lists the ids in use); widen \"identities\" in the host config")
    }

    /// Claims `id` for `key` in the registry: a new claim file, our own one, or a stale
    /// one (its state directory has no database any more). Caller holds the lock.
    private func claim(_ id: UInt32, for key: Key) -> Bool {
        let path = settings.registryDirectory + "/\(id)"
        let mine = stateDirectory + "\n" + key.kind.rawValue + ":" + key.name + "\n"
        if let existing = try? String(contentsOfFile: path, encoding: .utf8) {
            if existing == mine { return true }
            let owner = existing.split(separator: "\n", maxSplits: 1).first.map(String.init) ?? ""
            if owner == stateDirectory {
                // Ours, for another app or group of this state directory.
                return false
            }
            if !owner.isEmpty, FileManager.default.fileExists(atPath: owner + "/apphost.sqlite") {
                return false
            }
        }
        let temp = path + ".new"
        let fd = open(temp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return false }
        let bytes = Array(mine.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count, rename(temp, path) == 0 else {
            unlink(temp)
            return false
        }
        return true
    }

    private func unclaim(_ id: UInt32) {
        let path = settings.registryDirectory + "/\(id)"
        guard let existing = try? String(contentsOfFile: path, encoding: .utf8),
              existing.hasPrefix(stateDirectory + "\n") else { return }
        unlink(path)
    }

    /// Runs `body` holding the registry's lock (flock on the directory), so two hosts
    /// never claim one id.
    private func withRegistryLock<T>(_ body: () throws -> T) throws -> T {
        let dir = settings.registryDirectory
        do {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw IdentityError(description: "cannot create the identity registry \(dir): \(error)")
        }
        let fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            throw IdentityError(description: "cannot open the identity registry \(dir): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else {
                throw IdentityError(description: "cannot lock the identity registry \(dir): \(String(cString: strerror(errno)))")
            }
        }
        defer { _ = flock(fd, LOCK_UN) }
        return try body()
    }

    private func withRegistryLock(_ body: () -> Void) {
        _ = try? withRegistryLock { () throws -> Int in body(); return 0 }
    }

    /// Whether `id` is a user or a group of the machine (`/etc/passwd`, `/etc/group`, NSS).
    /// The reentrant lookups: several hosts in one process (tests) ask at once, and
    /// `getpwuid`/`getgrgid` share one static buffer.
    private static func namesAccount(_ id: UInt32) -> Bool {
        var buffer = [CChar](repeating: 0, count: 16 << 10)
        var user = passwd()
        var userResult: UnsafeMutablePointer<passwd>?
        if getpwuid_r(id, &user, &buffer, buffer.count, &userResult) == 0, userResult != nil { return true }
        var groupEntry = group()
        var groupResult: UnsafeMutablePointer<group>?
        if getgrgid_r(id, &groupEntry, &buffer, buffer.count, &groupResult) == 0, groupResult != nil { return true }
        return false
    }

    /// FNV-1a, stable across runs (Swift's `hashValue` is seeded per process).
    private static func hash(_ text: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            h ^= UInt64(byte)
            h = h &* 0x0000_0100_0000_01b3
        }
        return h
    }
}

/// Files and folders the host makes for an app, owned by the app's identity.
enum AppOwnership {
    /// Makes `path` and every missing folder above it up to (not including) `root`,
    /// owned by `identity` with `mode`; an existing `path` gets the owner and mode too.
    static func makeDirectory(_ path: String, below root: String, identity: ProcessIdentity?, mode: mode_t) throws {
        var missing: [String] = []
        var current = path
        while current.count > root.count, !FileManager.default.fileExists(atPath: current) {
            missing.append(current)
            current = (current as NSString).deletingLastPathComponent
        }
        for dir in missing.reversed() {
            if mkdir(dir, mode) != 0, errno != EEXIST {
                throw IdentityError(description: "cannot create \(dir): \(String(cString: strerror(errno)))")
            }
        }
        try own(path, identity: identity, mode: mode)
        for dir in missing where dir != path {
            try own(dir, identity: identity, mode: mode)
        }
    }

    /// Gives `path` (not following a link) to `identity` with `mode`, when it is not so already.
    static func own(_ path: String, identity: ProcessIdentity?, mode: mode_t) throws {
        var st = stat()
        guard lstat(path, &st) == 0 else {
            throw IdentityError(description: "cannot stat \(path): \(String(cString: strerror(errno)))")
        }
        if let identity, st.st_uid != identity.uid || st.st_gid != identity.gid {
            guard lchown(path, identity.uid, identity.gid) == 0 else {
                throw IdentityError(description: "cannot give \(path) to \(identity): \(String(cString: strerror(errno)))")
            }
        }
        if (st.st_mode & 0o7777) != mode, (st.st_mode & S_IFMT) != S_IFLNK {
            guard chmod(path, mode) == 0 else {
                throw IdentityError(description: "cannot chmod \(path): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Gives every file below `path` (and `path`) to `identity`, not following links:
    /// a container made by an earlier host (as root, or for another uid).
    static func ownTree(_ path: String, identity: ProcessIdentity) {
        _ = lchown(path, identity.uid, identity.gid)
        guard let walker = FileManager.default.enumerator(atPath: path) else { return }
        while let sub = walker.nextObject() as? String {
            _ = lchown(path + "/" + sub, identity.uid, identity.gid)
        }
    }
}

extension AppIdentities {
    /// Kills the processes still running as the uid of one of `apps`: left by a host that
    /// ended without shutting down, whose apps outlived it (see ``LeftoverProcesses``).
    /// A uid is the app's alone (claimed machine-wide), so whatever runs as it is the
    /// app's. Returns, per app, the pids killed and those that would not die.
    func killLeftovers(of apps: [BundleID]) -> [BundleID: (killed: [Int32], remaining: [Int32])] {
        var owner: [UInt32: BundleID] = [:]
        for app in apps {
            if let uid = existingUID(app: app) { owner[uid] = app }
        }
        let found = LeftoverProcesses.find(uids: Set(owner.keys))
        guard !found.isEmpty else { return [:] }
        let (killed, remaining) = LeftoverProcesses.kill(found)
        var result: [BundleID: (killed: [Int32], remaining: [Int32])] = [:]
        for process in found {
            guard let app = owner[process.uid] else { continue }
            if killed.contains(process.pid) { result[app, default: ([], [])].killed.append(process.pid) }
            if remaining.contains(process.pid) { result[app, default: ([], [])].remaining.append(process.pid) }
        }
        return result
    }
}
