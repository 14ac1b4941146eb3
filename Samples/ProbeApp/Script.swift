// The ProbeApp's argument grammar: what to do at which callback.

/// The callbacks a probe can act on, by short name.
enum Trigger: String, CaseIterable, Sendable {
    case launch, resign, background, foreground, active, terminate
}

/// One thing the probe does when its trigger fires.
enum Action: Equatable, Sendable {
    /// Print `text` on its own line to stdout.
    case print(String)
    /// Begin a task named `name`; end it after `seconds` (0: never), unless it already ended.
    case holdTask(name: String, seconds: Double)
    /// Begin `count` tasks named `prefix`1 ... `prefix``count`.
    case holdTasks(count: Int, prefix: String)
    /// Begin a task named `name`.
    case beginTask(name: String)
    /// End the latest task begun as `name` (again, if it already ended).
    case endTask(name: String)
    /// Block the main thread for `seconds`.
    case block(seconds: Double)
    /// Block the main thread forever, asleep.
    case blockForever
    /// Once the current callback has returned, block the main thread forever.
    case hang
    /// Take an exclusive `flock` on `path` (created if missing) and keep it.
    case lock(path: String)
    /// Take a POSIX (`fcntl` F_SETLK) write lock on all of `path` (created if missing) and keep it.
    case posixLock(path: String)
    /// Release every lock held on `path` (as spelled in `lock`/`posix-lock`).
    case unlock(path: String)
    /// Exit at once with `code`.
    case exit(code: Int32)
    /// Crash (fatalError).
    case crash
    /// Write a frame whose payload is not JSON straight to the IPC socket.
    case garbage
    /// Write a frame header announcing 100 MiB straight to the IPC socket.
    case oversized
    /// Print `backgroundTimeRemaining`.
    case timeRemaining
}

/// A parsed command line.
struct Script: Equatable, Sendable {
    /// Actions per trigger, in command-line order.
    var actions: [Trigger: [Action]] = [:]
    /// Expiration handlers log but do not end their task.
    var ignoreExpiration = false

    /// Most tasks one `hold-tasks` may begin.
    static let maximumTaskCount = 10_000

    static let usage = """
        usage: ProbeApp [--on CALLBACK ACTION]... [--ignore-expiration] [--help]

        A scripted AppHost app: at each callback it runs the actions given for it,
        in order, after printing "[ProbeApp] <delegate method> state=<state>".
        Each action prints a "[ProbeApp] ..." line (print:TEXT prints TEXT);
        failures go to stderr as "ProbeApp: ...".

        CALLBACK: launch | resign | background | foreground | active | terminate
        ACTION:
          print:TEXT               print TEXT on its own line
          hold-task:NAME:SECONDS   begin task NAME, end it after SECONDS (0 = never);
                                   not again if it already ended (e.g. on expiration)
          hold-tasks:N:PREFIX      begin N tasks (1-\(maximumTaskCount)) named PREFIX1 ... PREFIXN
          begin-task:NAME          begin task NAME
          end-task:NAME            end the latest task begun as NAME (again if ended)
          block:SECONDS            block the main thread for SECONDS (0 = not at all)
          block:forever            block the main thread forever (asleep in pause(),
                                   no CPU); the callback never returns
          hang                     once this callback has returned, block the main
                                   thread forever (queued on the main queue), so
                                   heartbeats go unanswered
          lock:PATH                flock(LOCK_EX|LOCK_NB) PATH, created if missing
                                   (mode 0644, parent must exist); the fd stays open
          posix-lock:PATH          fcntl(F_SETLK) write lock on all of PATH, created if
                                   missing; the fd stays open
          unlock:PATH              release every lock taken on PATH (same spelling)
                                   and close those fds
          time-remaining           print backgroundTimeRemaining
          exit:CODE                exit at once with status CODE (0-255)
          crash                    crash (fatalError)
          garbage                  write a frame with a non-JSON payload to the socket
          oversized                write a frame header announcing 100 MiB
        --ignore-expiration        expiration handlers only log; by default each
                                   task's handler ends its task

        A relative PATH is taken from the app's working directory (its container).
        A lock that is taken by someone else fails at once (it does not wait).

        examples:
          ProbeApp --on background hold-task:upload:10 --on active print:hello
          ProbeApp --on background begin-task:sync             handler ends it at expiration
          ProbeApp --ignore-expiration --on background hold-tasks:3:t
          ProbeApp --on launch block:forever                   never finishes launching
          ProbeApp --on background block:forever               never returns from didEnterBackground
          ProbeApp --on active hang                            active, then unresponsive
          ProbeApp --on background lock:/tmp/shared/db --on foreground unlock:/tmp/shared/db
        """

    /// What the command line asks for.
    enum Command: Equatable {
        case help
        case run(Script)
    }

    /// Parses the arguments after the program name.
    static func parse(_ arguments: [String]) throws(ScriptError) -> Command {
        var script = Script()
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            switch argument {
            case "--help", "-h":
                return .help
            case "--ignore-expiration":
                script.ignoreExpiration = true
            case "--on":
                guard let name = rest.popFirst(), let actionText = rest.popFirst() else {
                    throw ScriptError("--on needs CALLBACK and ACTION")
                }
                guard let trigger = Trigger(rawValue: name) else {
                    throw ScriptError("unknown callback \"\(name)\" (one of: \(Trigger.allCases.map(\.rawValue).joined(separator: ", ")))")
                }
                script.actions[trigger, default: []].append(try parseAction(actionText))
            default:
                throw ScriptError("unknown argument \"\(argument)\"")
            }
        }
        return .run(script)
    }

    /// Parses one ACTION.
    static func parseAction(_ text: String) throws(ScriptError) -> Action {
        let keyword = text.prefix { $0 != ":" }
        let argument = text.count > keyword.count ? String(text.dropFirst(keyword.count + 1)) : nil
        switch (keyword, argument) {
        case ("print", let text?):
            return .print(text)
        case ("hold-task", let argument?):
            guard let colon = argument.lastIndex(of: ":"), colon != argument.startIndex else {
                throw ScriptError("hold-task needs NAME:SECONDS, got \"\(text)\"")
            }
            return .holdTask(name: String(argument[..<colon]),
                             seconds: try seconds(String(argument[argument.index(after: colon)...]), in: text))
        case ("hold-tasks", let argument?):
            guard let colon = argument.firstIndex(of: ":"),
                  let count = Int(argument[..<colon]), (1...maximumTaskCount).contains(count),
                  argument.index(after: colon) != argument.endIndex
            else {
                throw ScriptError("hold-tasks needs N:PREFIX with N 1-\(maximumTaskCount) and a PREFIX, got \"\(text)\"")
            }
            return .holdTasks(count: count, prefix: String(argument[argument.index(after: colon)...]))
        case ("begin-task", let name?) where !name.isEmpty:
            return .beginTask(name: name)
        case ("end-task", let name?) where !name.isEmpty:
            return .endTask(name: name)
        case ("block", "forever"):
            return .blockForever
        case ("block", let value?):
            guard let seconds = Double(value), seconds.isFinite, seconds >= 0 else {
                throw ScriptError("block needs SECONDS or forever, got \"\(text)\"")
            }
            return .block(seconds: seconds)
        case ("hang", nil):
            return .hang
        case ("lock", let path?) where !path.isEmpty:
            return .lock(path: path)
        case ("posix-lock", let path?) where !path.isEmpty:
            return .posixLock(path: path)
        case ("unlock", let path?) where !path.isEmpty:
            return .unlock(path: path)
        case ("exit", let value?):
            guard let code = Int32(value), (0...255).contains(code) else {
                throw ScriptError("exit needs a status 0-255, got \"\(text)\"")
            }
            return .exit(code: code)
        case ("crash", nil): return .crash
        case ("garbage", nil): return .garbage
        case ("oversized", nil): return .oversized
        case ("time-remaining", nil): return .timeRemaining
        default:
            throw ScriptError("unknown or malformed action \"\(text)\"")
        }
    }

    private static func seconds(_ value: String, in text: String) throws(ScriptError) -> Double {
        guard let seconds = Double(value), seconds.isFinite, seconds >= 0 else {
            throw ScriptError("expected a number of seconds in \"\(text)\"")
        }
        return seconds
    }
}

/// A command line the grammar does not accept.
struct ScriptError: Error, Equatable, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
