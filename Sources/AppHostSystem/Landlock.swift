import CAppHostSys
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Paths a child may not open, enforced with Landlock (`SpawnSettings.fileRules`).
///
/// Each entry is an absolute path whose last component may hold `*`
/// wildcards, e.g. `/dev/snd` or `/dev/ttyUSB*`. A matching file cannot be
/// opened for reading, writing or execution, nor ioctl'ed; a matching
/// directory denies everything beneath it, though it can still be listed
/// (listing is granted at `/` and Landlock cannot withdraw a right further
/// down). Everything else keeps every
/// right, with two exceptions that follow from Landlock being an allow-list
/// (see `Landlock`): nothing can be created, removed or renamed directly in
/// a directory on the way to a denied path (`/`, `/dev`), and an entry that
/// appears in such a directory after the child started (a hot-plugged
/// `/dev/ttyUSB0`, but also any other new name there) cannot be opened by
/// that child. `*` matches any run of bytes, a leading dot included;
/// `stat` and `O_PATH` opens stay allowed (Landlock does not check them),
/// and a symbolic link that matches protects nothing but itself.
public struct FileRules: Sendable, Hashable {
    /// The denied paths (order and duplicates do not matter). An empty list
    /// denies nothing and installs no Landlock ruleset.
    public var deniedPaths: [String]

    /// Creates rules denying `deniedPaths`.
    public init(deniedPaths: [String]) {
        self.deniedPaths = deniedPaths
    }
}

/// The kernel's Landlock LSM, as AppHost uses it for `FileRules`.
///
/// Landlock only grants: a ruleset *handles* some access rights, and a
/// handled right is allowed beneath the files and directories that rules
/// name. "Deny these, allow the rest" is therefore built in the host, per
/// spawn settings: the ruleset handles every file-system right of the
/// running ABI; for each directory on the way to a denied path (say `/` and
/// `/dev`) every entry that is neither denied nor on the way to one gets a
/// rule granting everything; `/` itself gets a rule allowing only listing.
/// The child applies the ruleset with `landlock_restrict_self` right after
/// `PR_SET_NO_NEW_PRIVS`.
///
/// Rules pin the inodes present when they were added, so a ruleset is
/// cached per (sorted) list of paths and rebuilt when one of those
/// directories changes (its device, inode or mtime); a spawn normally reuses
/// the cached descriptor (two `lstat`s for `/dev` patterns). A build opens
/// every entry of those directories, about 4-5 µs each: keep denied paths
/// in small directories (`/` and `/dev`, 134 entries: ~0.55 ms here; a
/// `/tmp` with 3,800 entries: ~19 ms, on the reaper thread). A change that leaves the mtime as it was (a file system with
/// coarse timestamps, a change within the same tick) is missed until the
/// next one; the stale ruleset then denies too much, never too little:
/// new entries have no rule, and a replaced one is denied (its rule holds
/// the old inode).
public enum Landlock {
    /// The Landlock ABI version of the running kernel (1, 2, ...), or nil
    /// when the kernel has no Landlock or has it disabled (ENOSYS,
    /// EOPNOTSUPP). With nil, children start without their `FileRules`.
    public static var abiVersion: Int? { landlockABIVersion }
}

/// Asked once: the LSM cannot appear or vanish while the host runs.
private let landlockABIVersion: Int? = {
    var abi: Int32 = 0
    return aph_landlock_abi_version(&abi) == 0 && abi > 0 ? Int(abi) : nil
}()

// MARK: - Ruleset cache

/// A Landlock ruleset descriptor owned by the host (close-on-exec), closed
/// when the last spawn or cache entry using it lets go.
final class LandlockRuleset: Sendable {
    /// The ruleset descriptor for `aph_spawn_settings.landlock_ruleset_fd`.
    let descriptor: Int32

    init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { _ = Glibc.close(descriptor) }
}

/// Compiled rulesets by sorted path list, each with the state of the
/// directories it was built from. Entries are replaced, never evicted: a
/// host has a handful of path lists (one per combination of modes).
final class LandlockRulesetCache: Sendable {
    /// The cache the reaper uses for every spawn.
    static let shared = LandlockRulesetCache()

    private struct Entry {
        let plan: LandlockPlan
        let stamps: [DirectoryStamp]
        let ruleset: LandlockRuleset
    }

    private let entries = Mutex<[[String]: Entry]>([:])

    /// The ruleset for `rules`, built or reused; nil when the rules deny
    /// nothing or the kernel has no Landlock.
    func ruleset(for rules: FileRules) throws(SpawnError) -> LandlockRuleset? {
        let key = Array(Set(rules.deniedPaths)).sorted()
        guard !key.isEmpty else { return nil }
        guard let abi = Landlock.abiVersion else {
            // Bad paths are refused on every kernel, not only where they matter.
            _ = try LandlockPlan.parse(key)
            return nil
        }
        if let entry = entries.withLock({ $0[key] }), entry.plan.stamps() == entry.stamps {
            return entry.ruleset
        }
        let plan = try LandlockPlan(deniedPaths: key)
        // Stamped before listing: a change during the build shows up as a
        // newer stamp at the next spawn, which then rebuilds.
        let stamps = plan.stamps()
        let ruleset = try plan.build(abi: abi)
        entries.withLock { $0[key] = Entry(plan: plan, stamps: stamps, ruleset: ruleset) }
        return ruleset
    }
}

/// What a directory looked like: a new, removed or renamed entry changes
/// its mtime, a replaced directory its inode.
struct DirectoryStamp: Hashable {
    var path: String
    var device: UInt64 = 0
    var inode: UInt64 = 0
    var seconds: Int = 0
    var nanoseconds: Int = 0
    var error: Int32 = 0

    init(path: String) {
        self.path = path
        var st = stat()
        if lstat(path, &st) != 0 {
            error = errno
            return
        }
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        seconds = st.st_mtim.tv_sec
        nanoseconds = st.st_mtim.tv_nsec
    }
}

// MARK: - Plan

/// The last component of a denied path: literal bytes around `*`s.
struct NamePattern: Hashable {
    /// The pattern split at each `*` (one part: a literal name).
    let parts: [[UInt8]]

    init(_ component: Substring) {
        parts = component.utf8.split(separator: UInt8(ascii: "*"), omittingEmptySubsequences: false)
            .map(Array.init)
    }

    func matches(_ name: [UInt8]) -> Bool {
        guard parts.count > 1 else { return name == parts[0] }
        let first = parts[0], last = parts[parts.count - 1]
        guard name.count >= first.count + last.count,
              name.starts(with: first), name.suffix(last.count).elementsEqual(last) else { return false }
        // Each middle part at its leftmost place: enough for `*` alone.
        var start = first.count
        let end = name.count - last.count
        for part in parts[1..<(parts.count - 1)] where !part.isEmpty {
            guard let found = Self.firstIndex(of: part, in: name, from: start, to: end) else { return false }
            start = found + part.count
        }
        return true
    }

    private static func firstIndex(of part: [UInt8], in name: [UInt8], from start: Int, to end: Int) -> Int? {
        guard end - start >= part.count else { return nil }
        for index in start...(end - part.count) where name[index..<(index + part.count)].elementsEqual(part) {
            return index
        }
        return nil
    }
}

/// Which entries of which directories get rules, from a list of denied paths.
struct LandlockPlan {
    /// Canonical directory → patterns of its denied entries.
    var denied: [String: [NamePattern]] = [:]
    /// Canonical directories on the way to a denied path (`/` included) →
    /// names of their entries that are on the way too (these get no rule).
    var ancestors: [String: Set<[UInt8]>] = [:]
    /// Directories whose change makes the ruleset stale: the ancestors and
    /// the directories as written (which may go through symbolic links).
    var watched: [String] = []

    /// Checks each path; returns its directory components (as written) and
    /// its last component.
    static func parse(_ deniedPaths: [String]) throws(SpawnError) -> [(directory: [String], last: Substring)] {
        var parsed: [(directory: [String], last: Substring)] = []
        for (index, path) in deniedPaths.enumerated() {
            func invalid(_ why: String) -> SpawnError {
                SpawnError(code: .invalidSettings, detail: "fileRules.deniedPaths[\(index)] \"\(path)\": \(why)")
            }
            guard path.hasPrefix("/") else { throw invalid("not an absolute path") }
            guard !path.utf8.contains(0) else { throw invalid("NUL byte") }
            let components = path.split(separator: "/")
            guard let last = components.last else { throw invalid("denying / would deny everything") }
            if components.contains(where: { $0 == "." || $0 == ".." }) {
                throw invalid("\".\" and \"..\" are not allowed")
            }
            if components.dropLast().contains(where: { $0.contains("*") }) {
                throw invalid("\"*\" is allowed in the last component only")
            }
            parsed.append((components.dropLast().map(String.init), last))
        }
        return parsed
    }

    init(deniedPaths: [String]) throws(SpawnError) {
        var parsed: [(directory: [String], pattern: NamePattern)] = []
        var watched: Set<String> = []
        for (written, last) in try Self.parse(deniedPaths) {
            for depth in 0...written.count { watched.insert(Self.path(written[0..<depth])) }
            parsed.append((Self.canonical(written), NamePattern(last)))
        }
        for (directory, pattern) in parsed {
            denied[Self.path(directory[...]), default: []].append(pattern)
        }
        // Walk down to each denied entry; stop where a step is itself denied
        // (the whole subtree is then denied by that pattern).
        ancestors["/"] = []
        for (directory, _) in parsed {
            for depth in directory.indices {
                let parent = Self.path(directory[0..<depth])
                let name = Array(directory[depth].utf8)
                if isDenied(name, in: parent) { break }
                ancestors[parent, default: []].insert(name)
                let here = Self.path(directory[0...depth])
                if ancestors[here] == nil { ancestors[here] = [] }
            }
        }
        watched.formUnion(ancestors.keys)
        self.watched = watched.sorted()
    }

    func isDenied(_ name: [UInt8], in directory: String) -> Bool {
        denied[directory]?.contains { $0.matches(name) } ?? false
    }

    func stamps() -> [DirectoryStamp] { watched.map(DirectoryStamp.init(path:)) }

    /// Creates the ruleset and adds every rule.
    func build(abi: Int) throws(SpawnError) -> LandlockRuleset {
        let all = aph_landlock_fs_rights(Int32(abi))
        var fd: Int32 = -1
        var rc = aph_landlock_create_ruleset(all, &fd)
        guard rc == 0 else {
            throw SpawnError(code: .landlockRuleset, errno: Errno(rawValue: rc), detail: "landlock_create_ruleset")
        }
        let ruleset = LandlockRuleset(descriptor: fd)
        // `/` may be listed; everything else there comes from the rules below.
        rc = aph_landlock_allow(fd, AT_FDCWD, "/", UInt64(APH_LANDLOCK_ACCESS_READ_DIR))
        guard rc == 0 else { throw SpawnError(code: .landlockRuleset, errno: Errno(rawValue: rc), path: "/") }
        for (directory, onTheWay) in ancestors.sorted(by: { $0.key < $1.key }) {
            try allowEntries(of: directory, except: onTheWay, ruleset: fd, rights: all)
        }
        return ruleset
    }

    /// Grants `rights` beneath each entry of `directory` that is neither
    /// denied nor in `onTheWay`. A directory that does not exist (yet) has
    /// nothing to grant: whatever appears there later stays denied.
    private func allowEntries(of directory: String, except onTheWay: Set<[UInt8]>,
                              ruleset: Int32, rights: UInt64) throws(SpawnError) {
        guard let stream = opendir(directory) else {
            let e = errno
            if e == ENOENT || e == ENOTDIR || e == EACCES { return }
            throw SpawnError(code: .landlockRuleset, errno: Errno(rawValue: e), path: directory)
        }
        defer { closedir(stream) }
        let directoryFD = dirfd(stream)
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                let e = errno
                if e == 0 { return }
                throw SpawnError(code: .landlockRuleset, errno: Errno(rawValue: e), path: directory)
            }
            let rc: Int32 = withUnsafePointer(to: &entry.pointee.d_name) { tuple in
                tuple.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: tuple.pointee)) { cName in
                    let name = Array(UnsafeRawBufferPointer(start: cName, count: strlen(cName)))
                    if name == [UInt8(ascii: ".")] || name == [UInt8(ascii: "."), UInt8(ascii: ".")] { return 0 }
                    if onTheWay.contains(name) || isDenied(name, in: directory) { return 0 }
                    let rc = aph_landlock_allow(ruleset, directoryFD, cName, rights)
                    // Gone since the listing, or not ours to open: no rule.
                    return rc == ENOENT || rc == EACCES ? 0 : rc
                }
            }
            if rc != 0 {
                let name = withUnsafePointer(to: &entry.pointee.d_name) {
                    $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
                }
                throw SpawnError(code: .landlockRuleset, errno: Errno(rawValue: rc),
                                 path: directory == "/" ? "/" + name : directory + "/" + name)
            }
        }
    }

    private static func path(_ components: ArraySlice<String>) -> String {
        "/" + components.joined(separator: "/")
    }

    /// The components with the longest existing prefix resolved by realpath.
    private static func canonical(_ components: [String]) -> [String] {
        for depth in stride(from: components.count, through: 0, by: -1) {
            guard let resolved = realpath(path(components[0..<depth]), nil) else { continue }
            defer { free(resolved) }
            let real = String(cString: resolved).split(separator: "/").map(String.init)
            return real + components[depth...]
        }
        return components
    }
}
