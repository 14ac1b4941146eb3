// HostileApp: an untrusted app that tries to get out of its sandbox. At launch
// (didFinishLaunching) it runs every attempt in Attempts.swift, each on its own
// (one that fails or is refused does not stop the next), and prints one line per
// attempt to stdout (its log in the host's state directory):
//
//   [Hostile] ATTEMPT <name> denied|ALLOWED|skipped <detail>
//   [Hostile] done <count>
//
// The targets come from the arguments (the escape suite gives them all; see
// `HostileApp --help`), else it finds them itself, so `apphost launch
// com.example.hostile` on any host shows what an app can reach there.
import AppHostProtocol
import AppKitLess

#if canImport(Glibc)
import Glibc
#endif

// First, before anything opens a descriptor: what this process was given.
let startupDescriptors = openDescriptors()

/// Prints a line and flushes (stdout is a log file).
func say(_ line: String) {
    print(line)
    fflush(nil)
}

/// Runs the attempts when launched.
final class HostileDelegate: ApplicationDelegate {
    let context: AttackContext

    init(context: AttackContext) {
        self.context = context
    }

    func didFinishLaunching(_ application: Application, options: LaunchOptions) -> Bool {
        let t = context.targets
        func show<T>(_ value: T?) -> String { value.map { "\($0)" } ?? "-" }
        say("[Hostile] targets state=\(show(t.stateDirectory)) host=\(show(t.hostPID)) victim=\(show(t.victimPID)) victim-container=\(show(t.victimContainer)) transferd=\(show(t.transferdPID)) control=\(show(t.controlSocket)) abstract=\(show(t.abstractName)) outside=\(show(t.outsideFile))")
        say("[Hostile] \(Privileges.current().line)")
        let attempts = allAttempts()
        for attempt in attempts {
            let outcome = attempt.run(context)
            let detail = outcome.detail.map { $0.isNewline ? " " : $0 }
            say("[Hostile] ATTEMPT \(attempt.name) \(outcome.verdict.rawValue) \(String(detail))")
        }
        say("[Hostile] done \(attempts.count)")
        return true
    }
}

switch Targets.parse(Array(CommandLine.arguments.dropFirst())) {
case .success(.help):
    print(Targets.usage)
    exit(0)
case .success(.reportPrivileges):
    print(Privileges.current().line)
    exit(0)
case .success(.attack(var targets)):
    let home = getenv("HOME").map { String(cString: $0) }
    targets.discover(home: home, ownPID: getpid())
    targetsExist = targets.vouched
    let ipc = getenv(IPCProtocol.descriptorEnvironmentKey).flatMap { Int32(String(cString: $0)) } ?? IPCProtocol.descriptor
// A socket the host closes on it (the control socket refuses apps) must give EPIPE, not kill it.
signal(SIGPIPE, SIG_IGN)
    ApplicationMain(delegate: HostileDelegate(context: AttackContext(
        targets: targets, startupDescriptors: startupDescriptors, ipcDescriptor: ipc)))
case .failure(let error):
    let message = Array("HostileApp: \(error)\n\(Targets.usage)\n".utf8)
    _ = writeAll(2, message)
    exit(64)
}
