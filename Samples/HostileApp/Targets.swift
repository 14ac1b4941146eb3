// What the attempts aim at: given on the command line (tests give all of them), or
// found the way an attacker would (the parent is the host, the state directory is
// two levels above the container, the other apps are the host's other children,
// the transfer daemon is the one named apphost-transferd).
#if canImport(Glibc)
import Glibc
#endif

/// The targets of the attempts. A nil target makes the attempts on it report
/// `skipped`.
struct Targets {
    /// This app's container (HOME).
    var container: String?
    /// The host's state directory.
    var stateDirectory: String?
    /// The host's pid.
    var hostPID: Int32?
    /// Another app's container and a file in it.
    var victimContainer: String?
    var victimFile: String?
    /// Another app's pid.
    var victimPID: Int32?
    /// The transfer daemon's pid.
    var transferdPID: Int32?
    /// The host's control socket.
    var controlSocket: String?
    /// An abstract UNIX socket name (without the leading NUL) someone else listens on.
    var abstractName: String?
    /// A file no app may read.
    var secretFile = "/etc/shadow"
    /// A file outside every container that is not this app's (its mode, owner,
    /// times and extended attributes): the test's root-owned file, else the
    /// state directory's `containers` folder.
    var outsideFile: String?
    /// A descriptor number the host may have leaked to this app.
    var leakedDescriptor: Int32?
    /// A setuid executable that prints `privileges ...` when run with
    /// `--report-privileges` (default: a setuid copy of this app it makes itself).
    var setuidHelper: String?
    /// `--targets-exist`: the harness vouches that every target it gave exists, so one the
    /// app cannot find was hidden from it (denied), not missing (skipped).
    var vouched = false

    static let usage = """
        usage: HostileApp [--state-dir DIR] [--host-pid N] [--victim-container DIR] [--victim-file FILE]
                          [--victim-pid N] [--transferd-pid N] [--control-socket PATH] [--abstract-name NAME]
                          [--secret-file FILE] [--outside-file FILE] [--leaked-fd N] [--setuid-helper PATH]
                          [--targets-exist]
               HostileApp --report-privileges
               HostileApp --help

        An AppHost app that tries to escape its sandbox, each way in its own attempt, at launch
        (didFinishLaunching). One line per attempt on stdout:
          [Hostile] ATTEMPT <name> denied|ALLOWED|skipped <detail>
        then `[Hostile] done <count>`. Targets not given are looked for: the state directory two
        levels above HOME, the host as the parent process, the victim as another child of the host
        and its container (guessed from its executable's name, as the folder cannot be listed),
        the transfer daemon as the host's child named apphost-transferd,
        the outside file as the state directory's containers folder, an abstract socket as one
        the host or anyone else listens on.
        --targets-exist says that every target given exists: one the app cannot find (ENOENT,
        ESRCH) was hidden from it, and the attempt is denied rather than skipped.
        --report-privileges prints `privileges uid=.. euid=.. capeff=.. capprm=.. nnp=..` and exits
        (what the exec attempts run).
        """

    /// What the command line asks for.
    enum Command {
        case attack(Targets)
        case reportPrivileges
        case help
    }

    /// Parses the arguments after the program name.
    static func parse(_ arguments: [String]) -> Result<Command, ParseError> {
        var t = Targets()
        var rest = arguments[...]
        while let option = rest.popFirst() {
            switch option {
            case "--help", "-h": return .success(.help)
            case "--report-privileges": return .success(.reportPrivileges)
            case "--targets-exist": t.vouched = true; continue
            default: break
            }
            guard let value = rest.popFirst() else { return .failure(ParseError("\(option) needs a value")) }
            func pid() -> Int32? { Int32(value).flatMap { $0 > 0 ? $0 : nil } }
            switch option {
            case "--state-dir": t.stateDirectory = value
            case "--host-pid": guard let p = pid() else { return .failure(ParseError("--host-pid: not a pid: \(value)")) }; t.hostPID = p
            case "--victim-container": t.victimContainer = value
            case "--victim-file": t.victimFile = value
            case "--victim-pid": guard let p = pid() else { return .failure(ParseError("--victim-pid: not a pid: \(value)")) }; t.victimPID = p
            case "--transferd-pid": guard let p = pid() else { return .failure(ParseError("--transferd-pid: not a pid: \(value)")) }; t.transferdPID = p
            case "--control-socket": t.controlSocket = value
            case "--abstract-name": t.abstractName = value
            case "--secret-file": t.secretFile = value
            case "--outside-file": t.outsideFile = value
            case "--leaked-fd":
                guard let fd = Int32(value), fd >= 0 else { return .failure(ParseError("--leaked-fd: not a descriptor: \(value)")) }
                t.leakedDescriptor = fd
            case "--setuid-helper": t.setuidHelper = value
            default: return .failure(ParseError("unknown option \(option)"))
            }
        }
        return .success(.attack(t))
    }

    /// Fills in what was not given, as an attacker would find it. Lookups that the
    /// sandbox refuses leave the target nil.
    mutating func discover(home: String?, ownPID: Int32) {
        if container == nil { container = home }
        if stateDirectory == nil, let home {
            // HOME is <state>/containers/<bundle-id>.
            let parts = home.split(separator: "/", omittingEmptySubsequences: true)
            if parts.count >= 2, parts[parts.count - 2] == "containers" {
                stateDirectory = "/" + parts.dropLast(2).joined(separator: "/")
            }
        }
        if controlSocket == nil, let stateDirectory { controlSocket = stateDirectory + "/control.sock" }
        if hostPID == nil {
            let parent = getppid()
            if parent > 1 { hostPID = parent }
        }
        let mine = container.map { String($0.split(separator: "/").last ?? "") }
        if victimContainer == nil, let stateDirectory {
            // Listed, where the sandbox allows it (it does not: the containers folder
            // is outside this app's grants).
            let others = listDirectory(stateDirectory + "/containers").names.filter { $0 != mine }.sorted()
            if let first = others.first { victimContainer = stateDirectory + "/containers/" + first }
        }
        // The host's other children: the transfer daemon (by its name, which
        // /proc/<pid>/comm shows to anyone) and the other apps.
        var otherApps: [Int32] = []
        if let hostPID {
            for pid in Self.children(of: hostPID) where pid != ownPID {
                if commandName(of: pid)?.hasPrefix("apphost-transfe") == true {
                    if transferdPID == nil { transferdPID = pid }
                } else {
                    otherApps.append(pid)
                }
            }
        }
        if let stateDirectory, victimContainer == nil || victimPID == nil {
            // An app's HOME (environ, cwd) is ptrace-checked and the containers folder
            // cannot be listed, but a container's name is a bundle identifier and a
            // lookup by name is not refused: guess it from another app's executable
            // (/proc/<pid>/cmdline), under this app's own prefix (com.example.hostile:
            // com.example.), and keep the guess that exists.
            for pid in otherApps where victimPID == nil || victimPID == pid {
                guard let found = Self.guessContainer(of: pid, in: stateDirectory + "/containers", mine: mine),
                      victimContainer == nil || victimContainer == found else { continue }
                victimContainer = found
                victimPID = pid
                break
            }
        }
        if victimFile == nil, let victimContainer {
            victimFile = Self.firstFile(in: victimContainer, depth: 3)
        }
        if victimPID == nil, let victimContainer {
            victimPID = otherApps.first { Self.home(of: $0) == victimContainer }
        }
        // Whose container it is cannot always be told: another app's process will do.
        if victimPID == nil { victimPID = otherApps.first }
        // The folder of every container: the host's, outside this app's, and nothing
        // writes it but an install (the host's database and event log are written all
        // the time, and an mtime set back to what it was could undo a write's).
        if outsideFile == nil, let stateDirectory { outsideFile = stateDirectory + "/containers" }
        if abstractName == nil, let hostPID {
            // An abstract socket the host listens on, if it has one (its descriptors
            // are ptrace-checked: hidden from a sandboxed app).
            let bound = boundUnixSockets()
            for socket in ProcessDescriptors(of: hostPID).sockets {
                if case .abstract(let name)? = bound[socket.inode] {
                    abstractName = name
                    break
                }
            }
        }
        if abstractName == nil {
            // Else anyone's: /proc/net/unix lists every listening abstract socket.
            abstractName = listeningAbstractSockets().first
        }
    }

    /// A file of another app: the victim file, else its container's Documents
    /// folder, which every launched app has (the sandbox refuses the container's
    /// listing, not a lookup by name).
    var victimPath: String? {
        victimFile ?? victimContainer.map { $0 + "/Documents" }
    }

    /// The container (`containers/<bundle-id>`) of the app running as `pid`, guessed
    /// from its executable's name (`ProbeApp`: `probe`, `probeapp`, `ProbeApp`, under
    /// this app's identifier prefix and bare), or nil when no guess exists.
    static func guessContainer(of pid: Int32, in containers: String, mine: String?) -> String? {
        guard let cmdline = readText("/proc/\(pid)/cmdline", limit: 4096),
              let argv0 = cmdline.split(separator: "\u{0}").first,
              let name = argv0.split(separator: "/").last.map(String.init), !name.isEmpty else { return nil }
        var stems = [name.lowercased(), name]
        if name.hasSuffix("App"), name.count > 3 { stems.insert(String(name.dropLast(3)).lowercased(), at: 0) }
        var prefixes = [""]
        if let mine, let dot = mine.lastIndex(of: ".") { prefixes.insert(String(mine[...dot]), at: 0) }
        for prefix in prefixes {
            for stem in stems {
                let candidate = prefix + stem
                guard candidate != mine, !candidate.contains("/") else { continue }
                var st = stat()
                let path = containers + "/" + candidate
                if stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR { return path }
            }
        }
        return nil
    }

    /// A process's HOME (from `/proc/<pid>/environ`, else its working directory).
    static func home(of pid: Int32) -> String? {
        let (bytes, e) = readFile("/proc/\(pid)/environ", limit: 64 * 1024)
        if e == 0, let home = bytes.split(separator: 0).lazy.map({ String(decoding: $0, as: UTF8.self) })
            .first(where: { $0.hasPrefix("HOME=") }) {
            return String(home.dropFirst(5))
        }
        return readLink("/proc/\(pid)/cwd")
    }

    /// The processes whose parent is `parent` (a `/proc` scan).
    static func children(of parent: Int32) -> [Int32] {
        listDirectory("/proc").names.compactMap { Int32($0) }.filter { parentPID(of: $0) == parent }.sorted()
    }

    /// The first regular file under `dir` (breadth first, names sorted), or nil.
    static func firstFile(in dir: String, depth: Int) -> String? {
        var level = [dir]
        for _ in 0..<depth {
            var next: [String] = []
            for d in level {
                for name in listDirectory(d).names.sorted() {
                    let path = d + "/" + name
                    var st = stat()
                    guard lstat(path, &st) == 0 else { continue }
                    if (st.st_mode & S_IFMT) == S_IFREG { return path }
                    if (st.st_mode & S_IFMT) == S_IFDIR { next.append(path) }
                }
            }
            level = next
        }
        return nil
    }
}

/// A command line the app does not understand.
struct ParseError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
