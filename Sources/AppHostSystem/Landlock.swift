import CAppHostSys
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// How a `PathGrant` lets a child use what lies beneath its path.
public enum PathAccess: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Read files and list directories.
    case readOnly
    /// Read, list and execute: libraries, the Swift runtime, the executable.
    case readExecute
    /// Read, write, create, remove, rename and truncate: an app's own
    /// containers. Not execute (an app cannot `execve` what it wrote or
    /// downloaded; Landlock does not check `mmap`, so a library it wrote can
    /// still be loaded) and not make device nodes.
    case readWrite
    /// Open a device for reading and writing, truncate it (`> /dev/null`)
    /// and use its ioctls: `/dev/null`, a sound card, a serial line.
    case device

    /// The Landlock file-system rights (before narrowing to the ABI).
    var rights: LandlockFileAccess {
        switch self {
        case .readOnly: [.readFile, .readDirectory]
        case .readExecute: [.readFile, .readDirectory, .execute]
        case .readWrite: LandlockFileAccess.all.subtracting([.execute, .makeCharacterDevice, .makeBlockDevice, .ioctlDevice])
        case .device: [.readFile, .writeFile, .truncate, .ioctlDevice]
        }
    }

    /// "read-only", "read-execute", "read-write", "device".
    public var description: String {
        switch self {
        case .readOnly: "read-only"
        case .readExecute: "read-execute"
        case .readWrite: "read-write"
        case .device: "device"
        }
    }
}

/// One grant of a `LandlockPolicy`: `access` to `path` and everything beneath it.
public struct PathGrant: Sendable, Hashable, CustomStringConvertible {
    /// An absolute path. Symbolic links in it are followed when the ruleset
    /// is built: the rule holds the file or directory they lead to (`/lib64`
    /// on a merged-/usr system grants `/usr/lib64`). The last component may
    /// hold `*` wildcards (`/dev/ttyUSB*`): every entry of the directory that
    /// matches when the ruleset is built gets the grant; one that appears
    /// later does not. A path that does not exist grants nothing.
    public var path: String
    /// What the grant allows.
    public var access: PathAccess
    /// A path every app is granted (`/usr`, files of `/etc`, `/sys`, devices), not
    /// one of the app's own: a kept ruleset looks it up at most once a second to
    /// see whether it still names the same inode, not at every spawn (see
    /// `LandlockRulesetCache`).
    public var isSystemPath: Bool

    /// Grants `access` beneath `path`.
    public init(_ path: String, _ access: PathAccess, isSystemPath: Bool = false) {
        self.path = path
        self.access = access
        self.isSystemPath = isSystemPath
    }

    /// "/usr read-execute".
    public var description: String { "\(path) \(access)" }
}

/// What a child may reach once Landlock confines it (`SpawnSettings.landlock`).
///
/// An allow-list: the ruleset handles every file-system right of the ABI in
/// use, so the child can open, create, remove, rename, truncate or execute
/// nothing but what `grants` allow. Beyond files, where the ABI offers it:
/// binding TCP sockets to any port (ABI 4), and signals and abstract Unix
/// sockets reaching outside the child's own Landlock domain (ABI 6). Ptrace
/// and the ptrace-checked `/proc/<pid>` files (`mem`, `environ`, `maps`,
/// `fd`, ...) of processes outside its domain are refused at every ABI.
/// Each child that enforces a policy gets a domain of its own, shared only
/// with its own descendants.
///
/// What Landlock does not see: path lookup, `stat`, `readlink`, `access`,
/// `chdir`, and connecting to a Unix socket by path (no Landlock right for
/// it up to ABI 7); descriptors the child inherits or receives keep the
/// access they were opened with.
public struct LandlockPolicy: Sendable, Hashable {
    /// What the child may reach.
    public var grants: [PathGrant]
    /// Paths no grant may reach by containing them. A granted directory that
    /// holds one of these is split: its entries get the grant, except those
    /// on the way to the excluded path, which are split in turn, so the
    /// excluded path and what lies beneath it stay out of reach (the host's
    /// state directory, should it lie under `/usr`). A split directory
    /// itself cannot be listed (the right would reach the listing of the
    /// excluded path too), and entries added to it later are not reachable.
    /// A grant at or beneath an excluded path applies as given (an app's
    /// container inside the state directory).
    public var excluded: [String]
    /// Refuse `bind(2)` of TCP sockets to every port (ABI 4; handled, no
    /// port granted). `listen(2)` on an unbound socket still picks a port:
    /// deny `listen` with seccomp for "no TCP server".
    public var deniesTCPBind: Bool
    /// Refuse signals to processes outside the child's domain (ABI 6).
    public var scopesSignals: Bool
    /// Refuse connecting or sending to abstract Unix sockets made outside
    /// the child's domain (ABI 6).
    public var scopesAbstractUnixSockets: Bool
    /// Build the ruleset for at most this ABI; nil for the kernel's. A lower
    /// number leaves out what later ABIs add (and warnings about it stay the
    /// caller's): tests, or a kernel whose newer feature misbehaves.
    public var abiLimit: Int?

    /// Creates a policy; by default everything the ABI can restrict is.
    public init(grants: [PathGrant], excluded: [String] = [], deniesTCPBind: Bool = true,
                scopesSignals: Bool = true, scopesAbstractUnixSockets: Bool = true, abiLimit: Int? = nil) {
        self.grants = grants
        self.excluded = excluded
        self.deniesTCPBind = deniesTCPBind
        self.scopesSignals = scopesSignals
        self.scopesAbstractUnixSockets = scopesAbstractUnixSockets
        self.abiLimit = abiLimit
    }
}

/// The kernel's Landlock LSM: which ABI it offers and what each ABI restricts.
public enum Landlock {
    /// The Landlock ABI version of the running kernel (1, 2, ...), or nil
    /// when the kernel has no Landlock or has it disabled (ENOSYS,
    /// EOPNOTSUPP). With nil, children start without their `LandlockPolicy`.
    public static var abiVersion: Int? { landlockABIVersion }

    /// ABI 2: renaming and linking between granted directories (before it,
    /// any rename or link across directories fails with EXDEV).
    public static func controlsRenames(abi: Int) -> Bool { abi >= 2 }
    /// ABI 3: `truncate(2)` and `O_TRUNC` are checked (before it, any file
    /// the user may write can be truncated, granted or not).
    public static func controlsTruncation(abi: Int) -> Bool { abi >= 3 }
    /// ABI 4: TCP `bind(2)` and `connect(2)` by port.
    public static func controlsTCP(abi: Int) -> Bool { abi >= 4 }
    /// ABI 5: ioctl on character and block devices.
    public static func controlsDeviceIoctl(abi: Int) -> Bool { abi >= 5 }
    /// ABI 6: signals and abstract Unix sockets scoped to the domain.
    public static func scopesProcesses(abi: Int) -> Bool { abi >= 6 }
}

/// Asked once: the LSM cannot appear or vanish while the host runs.
private let landlockABIVersion: Int? = {
    var abi: Int32 = 0
    return aph_landlock_abi_version(&abi) == 0 && abi > 0 ? Int(abi) : nil
}()

/// Landlock's file-system access rights (`LANDLOCK_ACCESS_FS_*`).
struct LandlockFileAccess: OptionSet, Hashable {
    let rawValue: UInt64

    static let execute = Self(rawValue: 1 << 0)
    static let writeFile = Self(rawValue: 1 << 1)
    static let readFile = Self(rawValue: 1 << 2)
    static let readDirectory = Self(rawValue: 1 << 3)
    static let removeDirectory = Self(rawValue: 1 << 4)
    static let removeFile = Self(rawValue: 1 << 5)
    static let makeCharacterDevice = Self(rawValue: 1 << 6)
    static let makeDirectory = Self(rawValue: 1 << 7)
    static let makeRegular = Self(rawValue: 1 << 8)
    static let makeSocket = Self(rawValue: 1 << 9)
    static let makeFIFO = Self(rawValue: 1 << 10)
    static let makeBlockDevice = Self(rawValue: 1 << 11)
    static let makeSymbolicLink = Self(rawValue: 1 << 12)
    /// ABI 2: link or rename into another directory.
    static let refer = Self(rawValue: 1 << 13)
    /// ABI 3.
    static let truncate = Self(rawValue: 1 << 14)
    /// ABI 5.
    static let ioctlDevice = Self(rawValue: 1 << 15)

    /// Every right some ABI knows.
    static let all = Self(rawValue: (1 << 16) - 1)

    /// The rights ABI `abi` handles.
    static func handled(abi: Int) -> Self { Self(rawValue: aph_landlock_fs_rights(Int32(abi))) }
}

// MARK: - Building a ruleset

/// A Landlock ruleset descriptor owned by the host (close-on-exec), built
/// for one spawn and closed when the spawn is done with it.
final class LandlockRuleset {
    /// The ruleset descriptor for `aph_spawn_settings.landlock_ruleset_fd`.
    let descriptor: Int32

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { _ = Glibc.close(descriptor) }

    /// Builds the ruleset of `policy` for `kernelABI` (capped by the policy's
    /// `abiLimit`); nil when the cap is below 1.
    ///
    /// Rules hold inodes, so a ruleset is built for each spawn: a container
    /// made again after a reinstall, or an `/etc/resolv.conf` replaced by
    /// rename, is granted as it is now. About 9 µs a grant in a debug build
    /// (open with `O_PATH`, `fstat`, `landlock_add_rule`, close), plus a
    /// directory listing for each wildcard and each split. ``LandlockRulesetCache``
    /// reuses a ruleset whose paths all still name the same inodes.
    static func build(_ policy: LandlockPolicy, kernelABI: Int) throws(SpawnError) -> LandlockRuleset? {
        try buildRecording(policy, kernelABI: kernelABI)?.ruleset
    }

    /// `build`, also returning what each grant resolved to, or nil for the
    /// resolutions when the ruleset depends on more than its paths' inodes (a
    /// wildcard, a split or an excluded path: directory listings).
    fileprivate static func buildRecording(_ policy: LandlockPolicy, kernelABI: Int) throws(SpawnError)
        -> (ruleset: LandlockRuleset, resolutions: [GrantResolution]?)? {
        let abi = min(kernelABI, policy.abiLimit ?? kernelABI)
        guard abi >= 1 else { return nil }
        try validate(policy)
        let handled = LandlockFileAccess.handled(abi: abi)
        var network: UInt64 = 0
        if Landlock.controlsTCP(abi: abi), policy.deniesTCPBind {
            network |= UInt64(APH_LANDLOCK_ACCESS_NET_BIND_TCP)
        }
        var scoped: UInt64 = 0
        if Landlock.scopesProcesses(abi: abi) {
            if policy.scopesSignals { scoped |= UInt64(APH_LANDLOCK_SCOPE_SIGNAL) }
            if policy.scopesAbstractUnixSockets { scoped |= UInt64(APH_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET) }
        }
        var fd: Int32 = -1
        let rc = aph_landlock_create_ruleset(handled.rawValue, network, scoped, &fd)
        guard rc == 0 else {
            throw SpawnError(code: .landlockRuleset, errno: Errno(rawValue: rc), detail: "landlock_create_ruleset")
        }
        let ruleset = LandlockRuleset(descriptor: fd)
        var builder = RuleBuilder(ruleset: fd, excluded: excludedInodes(policy.excluded))
        var resolutions: [GrantResolution] = []
        resolutions.reserveCapacity(policy.grants.count)
        for grant in policy.grants {
            let rights = grant.access.rights.intersection(handled)
            resolutions.append(try builder.grant(grant.path, rights))
        }
        return (ruleset, builder.listed ? nil : resolutions)
    }

    /// Refuses what no kernel would make sense of.
    static func validate(_ policy: LandlockPolicy) throws(SpawnError) {
        for (index, grant) in policy.grants.enumerated() {
            func invalid(_ why: String) -> SpawnError {
                SpawnError(code: .invalidSettings, detail: "landlock.grants[\(index)] \"\(grant.path)\": \(why)")
            }
            guard grant.path.hasPrefix("/") else { throw invalid("not an absolute path") }
            guard !grant.path.utf8.contains(0) else { throw invalid("NUL byte") }
            let components = grant.path.split(separator: "/")
            if components.contains(where: { $0 == "." || $0 == ".." }) {
                throw invalid("\".\" and \"..\" are not allowed")
            }
            if components.dropLast().contains(where: { $0.contains("*") }) {
                throw invalid("\"*\" is allowed in the last component only")
            }
        }
        for (index, path) in policy.excluded.enumerated() where !path.hasPrefix("/") || path.utf8.contains(0) {
            throw SpawnError(code: .invalidSettings, detail: "landlock.excluded[\(index)] \"\(path)\": not an absolute path")
        }
    }

    /// Each excluded path that exists, with its ancestors, by (device, inode):
    /// a grant on any of those directories must be split.
    fileprivate static func excludedInodes(_ paths: [String]) -> ExcludedTree {
        var tree = ExcludedTree()
        for path in paths {
            guard let resolved = realpath(path, nil) else { continue }
            defer { free(resolved) }
            var current = String(cString: resolved)
            guard let target = FileIdentity(path: current) else { continue }
            tree.targets.insert(target)
            // Walk up: each ancestor is "on the way" to this target.
            var child = target
            while current != "/" {
                let parent = current.lastIndex(of: "/").map { String(current[..<$0]) } ?? "/"
                let parentPath = parent.isEmpty ? "/" : parent
                guard let identity = FileIdentity(path: parentPath) else { break }
                tree.onTheWay[identity, default: []].insert(child)
                child = identity
                current = parentPath
            }
        }
        return tree
    }
}

/// Rulesets kept for later spawns of the same policy, on one thread (the
/// reaper's). A kept ruleset is used again only when every literal grant's path
/// still names the inode it named at the build (or still names nothing), and
/// none of the ruleset's inodes is now the excluded path or on the way to it:
/// the rules a fresh build would make. Policies whose rules come from directory
/// listings (wildcards, splits) are built each time. Checking costs one `stat`
/// a grant, where building costs an `O_PATH` open, an `fstat`, a
/// `landlock_add_rule` and a close.
///
/// A grant marked ``PathGrant/isSystemPath`` (`/usr`, files of `/etc`, `/sys`,
/// devices: the same for every app) is looked up at most once in
/// `systemRecheck`, its answer shared by every policy: an app's 45 grants took
/// about 80 µs to check at every spawn, on the launch's critical path, and all
/// but its own few (container, bundle, executable, App Groups) are system
/// paths. The way to the excluded paths is walked at every check and compared
/// with the inodes the ruleset holds, so the state directory stays out of reach
/// exactly; what may lag by up to `systemRecheck` is a system path replaced by
/// rename (a new `/etc/resolv.conf`), which a kept ruleset does not grant
/// (Landlock rules hold inodes) until the next look finds the change.
struct LandlockRulesetCache {
    private struct Entry {
        let ruleset: LandlockRuleset
        let resolutions: [GrantResolution]
    }

    private var entries: [LandlockPolicy: Entry] = [:]
    /// System paths' last lookups (CLOCK_MONOTONIC ns), shared by every policy.
    private var systemLookups: [String: (resolution: GrantResolution, at: UInt64)] = [:]
    /// At most this many rulesets (one descriptor each) are kept.
    let capacity: Int
    /// How long a system path's lookup is trusted, in nanoseconds.
    static let systemRecheck: UInt64 = 1_000_000_000
    /// At most this many system paths' lookups are kept (then all are dropped).
    static let systemLookupCapacity = 4096

    init(capacity: Int = 64) { self.capacity = capacity }

    /// How many system paths' lookups are kept (tests).
    var systemLookupCount: Int { systemLookups.count }

    /// The ruleset of `policy`: a kept one if it is still exact, else a new one.
    /// `now`: CLOCK_MONOTONIC in nanoseconds.
    mutating func ruleset(_ policy: LandlockPolicy, kernelABI: Int, now: UInt64) throws(SpawnError) -> LandlockRuleset? {
        if let entry = entries[policy] {
            if stillExact(entry, policy, now: now) { return entry.ruleset }
            entries[policy] = nil
        }
        guard let (ruleset, resolutions) = try LandlockRuleset.buildRecording(policy, kernelABI: kernelABI) else {
            return nil
        }
        if let resolutions {
            if entries.count >= capacity, let any = entries.keys.first { entries[any] = nil }
            entries[policy] = Entry(ruleset: ruleset, resolutions: resolutions)
            for (grant, resolved) in zip(policy.grants, resolutions) where grant.isSystemPath {
                remember(grant.path, resolved, now: now)
            }
        }
        return ruleset
    }

    private mutating func remember(_ path: String, _ resolution: GrantResolution, now: UInt64) {
        if case .skipped = resolution { return }
        if systemLookups.count >= Self.systemLookupCapacity { systemLookups.removeAll() }
        systemLookups[path] = (resolution, now)
    }

    private mutating func stillExact(_ entry: Entry, _ policy: LandlockPolicy, now: UInt64) -> Bool {
        var identities: [FileIdentity] = []
        for (grant, resolved) in zip(policy.grants, entry.resolutions) {
            switch resolved {
            case .skipped: continue
            case .absent, .file, .unknown:
                let current: GrantResolution
                if grant.isSystemPath, let seen = systemLookups[grant.path], now >= seen.at,
                   now - seen.at < Self.systemRecheck {
                    current = seen.resolution
                } else {
                    current = GrantResolution(resolving: grant.path)
                    if grant.isSystemPath { remember(grant.path, current, now: now) }
                }
                guard current == resolved else { return false }
                if case .file(let identity) = resolved { identities.append(identity) }
            }
        }
        let excluded = LandlockRuleset.excludedInodes(policy.excluded)
        return !identities.contains { excluded.targets.contains($0) || excluded.onTheWay[$0] != nil }
    }
}

/// A file by device and inode.
struct FileIdentity: Hashable {
    let device: UInt64
    let inode: UInt64

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }

    init?(path: String) {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        self.init(st)
    }

    init?(descriptor: Int32) {
        var st = stat()
        guard fstat(descriptor, &st) == 0 else { return nil }
        self.init(st)
    }
}

/// The excluded paths and the directories on the way to them.
struct ExcludedTree {
    /// The excluded directories (or files) themselves.
    var targets: Set<FileIdentity> = []
    /// Directory → its entries on the way to an excluded path.
    var onTheWay: [FileIdentity: Set<FileIdentity>] = [:]
}

/// What one grant's path named when its rule was added.
enum GrantResolution: Equatable {
    /// No rule asked for (no right of the grant is handled at this ABI).
    case skipped
    /// Nothing there (or not reachable): no rule.
    case absent
    /// A rule on this inode.
    case file(FileIdentity)
    /// Could not be told (a build would fail on it): never equal to what a build recorded.
    case unknown

    /// What `path` names now, as a literal grant's `O_PATH` open (links followed) would find it.
    init(resolving path: String) {
        var st = stat()
        if stat(path, &st) == 0 {
            self = .file(FileIdentity(st))
        } else {
            let e = errno
            // The errors a build takes for "nothing to grant" (RuleBuilder.addRule).
            self = e == ENOENT || e == ENOTDIR || e == EACCES || e == ELOOP ? .absent : .unknown
        }
    }
}

/// Adds path rules to one ruleset, splitting grants around excluded paths.
private struct RuleBuilder {
    let ruleset: Int32
    let excluded: ExcludedTree
    /// True once a rule came from a directory listing (a wildcard, a split) or a
    /// grant met an excluded path: the rules then depend on more than the inodes.
    var listed = false

    init(ruleset: Int32, excluded: ExcludedTree) {
        self.ruleset = ruleset
        self.excluded = excluded
    }

    /// Grants `rights` beneath `path` (a literal path, or a directory and a
    /// wildcard pattern); returns what a literal path named.
    mutating func grant(_ path: String, _ rights: LandlockFileAccess) throws(SpawnError) -> GrantResolution {
        guard !rights.isEmpty else { return .skipped }
        let slash = path.lastIndex(of: "/") ?? path.startIndex
        let last = path[path.index(after: slash)...]
        guard last.contains("*") else {
            return try grantLiteral(path, rights)
        }
        listed = true
        let directory = slash == path.startIndex ? "/" : String(path[..<slash])
        let pattern = NamePattern(last)
        try forEachEntry(of: AT_FDCWD, named: directory, display: directory) { (dirFD, name, shown) throws(SpawnError) in
            guard pattern.matches(name) else { return }
            // Follow a matching symbolic link (`/dev/serial0` -> `ttyS0`).
            _ = try addRule(opened: openPath(dirFD, name, follow: true), rights, path: shown, splitting: true)
        }
        return .absent
    }

    private mutating func grantLiteral(_ path: String, _ rights: LandlockFileAccess) throws(SpawnError) -> GrantResolution {
        let (resolution, plain) = try addRule(opened: openPath(AT_FDCWD, Array(path.utf8), follow: true), rights,
                                              path: path, splitting: true)
        if !plain { listed = true }
        return resolution
    }

    /// An `O_PATH` descriptor for `name` in the directory `dirFD`, or the errno.
    private func openPath(_ dirFD: Int32, _ name: [UInt8], follow: Bool) -> Result<Int32, Errno> {
        var fd: Int32 = -1
        let rc = name.withUnsafeBufferPointer { bytes in
            withNameCString(bytes) { aph_open_path(dirFD, $0, follow ? 1 : 0, &fd) }
        }
        return rc == 0 ? .success(fd) : .failure(Errno(rawValue: rc))
    }

    /// Adds the rule for the opened descriptor (closed here). A directory that
    /// is or holds an excluded path is split when `splitting`. Returns what the
    /// descriptor named, and false when the rule was not one plain rule on it
    /// (split, or left out as excluded).
    @discardableResult
    private func addRule(opened: Result<Int32, Errno>, _ rights: LandlockFileAccess, path: String,
                         splitting: Bool) throws(SpawnError) -> (GrantResolution, plain: Bool) {
        let fd: Int32
        switch opened {
        case .success(let descriptor): fd = descriptor
        case .failure(let e):
            // Gone, never there, or not ours to open: nothing to grant.
            if e == .noSuchFileOrDirectory || e == .notDirectory || e == .permissionDenied || e == .tooManySymbolicLinkLevels {
                return (.absent, true)
            }
            throw SpawnError(code: .landlockRuleset, errno: e, path: path)
        }
        defer { _ = Glibc.close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            throw SpawnError(code: .landlockRuleset, errno: Errno(rawValue: errno), path: path)
        }
        let identity = FileIdentity(st)
        if splitting {
            if excluded.targets.contains(identity) { return (.file(identity), false) }
            if let ways = excluded.onTheWay[identity] {
                try split(fd, path: path, rights, around: ways)
                return (.file(identity), false)
            }
        }
        let rc = aph_landlock_add_path_rule_stat(ruleset, fd, rights.rawValue, (st.st_mode & S_IFMT) == S_IFDIR ? 1 : 0)
        guard rc == 0 else {
            throw SpawnError(code: .landlockRuleset, errno: Errno(rawValue: rc), path: path)
        }
        return (.file(identity), true)
    }

    /// Grants every entry of the directory `fd` except those in `ways`,
    /// which are split in turn (or skipped when excluded themselves).
    private func split(_ fd: Int32, path: String, _ rights: LandlockFileAccess,
                       around ways: Set<FileIdentity>) throws(SpawnError) {
        try forEachEntry(of: fd, named: ".", display: path) { (dirFD, name, shown) throws(SpawnError) in
            // The entry itself, not where a link leads: a link gets a rule on
            // itself (granting nothing), so no link can reach around the split.
            let entry = openPath(dirFD, name, follow: false)
            if case .success(let fd) = entry, let identity = FileIdentity(descriptor: fd), ways.contains(identity) {
                _ = try addRule(opened: entry, rights, path: shown, splitting: true)
            } else {
                _ = try addRule(opened: entry, rights, path: shown, splitting: false)
            }
        }
    }

    /// Calls `body` with each entry name of the directory `name` (relative
    /// to `base`) but `.` and `..`, and the directory's descriptor.
    private func forEachEntry(
        of base: Int32, named name: String, display: String,
        _ body: (Int32, [UInt8], String) throws(SpawnError) -> Void
    ) throws(SpawnError) {
        let dirFD = openat(base, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dirFD >= 0 else {
            let e = errno
            if e == ENOENT || e == ENOTDIR || e == EACCES { return }
            throw SpawnError(code: .landlockRuleset, errno: Errno(rawValue: e), path: display)
        }
        guard let stream = fdopendir(dirFD) else {
            let e = errno
            _ = Glibc.close(dirFD)
            throw SpawnError(code: .landlockRuleset, errno: Errno(rawValue: e), path: display)
        }
        defer { closedir(stream) }
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                let e = errno
                if e == 0 { return }
                throw SpawnError(code: .landlockRuleset, errno: Errno(rawValue: e), path: display)
            }
            let entryName: [UInt8] = withUnsafePointer(to: &entry.pointee.d_name) { tuple in
                tuple.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: tuple.pointee)) { cName in
                    Array(UnsafeRawBufferPointer(start: cName, count: strlen(cName)))
                }
            }
            if entryName == [UInt8(ascii: ".")] || entryName == [UInt8(ascii: "."), UInt8(ascii: ".")] { continue }
            let shown = (display == "/" ? "" : display) + "/" + String(decoding: entryName, as: UTF8.self)
            try body(dirfd(stream), entryName, shown)
        }
    }
}

/// Calls `body` with `bytes` as a NUL-terminated C string.
private func withNameCString<R>(_ bytes: UnsafeBufferPointer<UInt8>, _ body: (UnsafePointer<CChar>) -> R) -> R {
    var copy = Array(bytes)
    copy.append(0)
    return copy.withUnsafeBufferPointer { buffer in
        buffer.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
    }
}

/// The last component of a wildcard grant: literal bytes around `*`s.
struct NamePattern: Hashable {
    /// The pattern split at each `*` (one part: a literal name).
    let parts: [[UInt8]]

    init(_ component: Substring) {
        parts = component.utf8.split(separator: UInt8(ascii: "*"), omittingEmptySubsequences: false)
            .map(Array.init)
    }

    /// Whether `name` matches; `*` matches any run of bytes, a leading dot included.
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
