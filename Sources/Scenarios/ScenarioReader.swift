import AppHostProtocol
import Foundation
import HostConfig
import Plugins
import Yams

/// Reads a scenario file (YAML, or JSON by the same reader) into a ``Scenario``.
/// Every mistake is a ``ScenarioError`` with file, line and column, and for an unknown
/// key the nearest known one.
public enum ScenarioReader {
    /// A scenario file is at most this big (1 MiB).
    public static let maximumFileBytes = 1 << 20
    /// At most this many steps, apps, list items; strings at most this many bytes.
    public static let maximumSteps = 10_000
    public static let maximumApps = 64
    public static let maximumListCount = 1_000
    public static let maximumStringBytes = 64 * 1024

    static let topKeys = ["name", "rule", "source", "profile", "epoch", "settle", "deviceMemory", "requires", "apps", "steps"]
    static let appKeys = ["bundle", "args", "settings", "install"]
    /// Step verbs, as the CLI names them (`home` is `background`).
    public static let verbs = ["install", "uninstall", "launch", "foreground", "background", "home", "terminate", "kill",
                               "advance", "push", "fetch", "bgtask", "location", "privacy", "settings", "device",
                               "ble", "accessory", "snapshot", "expect"]
    /// Keys of an expectation that are not app aliases.
    static let expectKeys = ["report", "reports", "events", "event", "push", "within", "refused"]

    /// Reads and checks `path`.
    public static func read(path: String) throws(ScenarioError) -> Scenario {
        let file = (path as NSString).standardizingPath
        guard let handle = FileHandle(forReadingAtPath: file) else {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) {
                throw ScenarioError(file: path, isDirectory.boolValue ? "is a directory, not a scenario file" : "cannot be read (permissions?)")
            }
            throw ScenarioError(file: path, "no such file")
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: maximumFileBytes + 1)) ?? Data()
        guard data.count <= maximumFileBytes else {
            throw ScenarioError(file: path, "over \(maximumFileBytes) bytes; a scenario file is at most 1 MiB")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ScenarioError(file: path, "is not UTF-8 text")
        }
        return try parse(text, file: file)
    }

    /// Parses `text` as the scenario file `file` (relative paths in it are relative to
    /// the file's directory).
    public static func parse(_ text: String, file: String) throws(ScenarioError) -> Scenario {
        let root: Node
        do {
            guard let node = try Yams.compose(yaml: text) else { throw ScenarioError(file: file, "is empty") }
            root = node
        } catch let error as ScenarioError {
            throw error
        } catch let error as YamlError {
            throw yamlError(error, file: file)
        } catch {
            throw ScenarioError(file: file, "not YAML: \(error)")
        }
        return try Builder(file: file).scenario(Located(node: root, file: file))
    }

    static func yamlError(_ error: YamlError, file: String) -> ScenarioError {
        switch error {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _), .composer(_, let problem, let mark, _):
            return ScenarioError(file: file, line: mark.line, column: mark.column, "not valid YAML: \(problem)")
        default:
            return ScenarioError(file: file, "not valid YAML: \(error)")
        }
    }
}

/// Builds a scenario from its nodes.
struct Builder {
    let file: String
    var directory: String { (file as NSString).deletingLastPathComponent }

    func path(_ p: String) -> String {
        p.hasPrefix("/") ? (p as NSString).standardizingPath : ((directory + "/" + p) as NSString).standardizingPath
    }

    func scenario(_ root: Located) throws(ScenarioError) -> Scenario {
        var name: String?
        var rule: String?
        var source: String?
        var profile = "ios13"
        var epoch = ScenarioDefaults.epoch
        var settle = Duration.seconds(60)
        var deviceMemory: UInt64?
        var requires: [Scenario.Requirement] = []
        var appsNode: Located?
        var stepsNode: Located?
        for (key, keyNode, value) in try root.mapping("the scenario") {
            switch key {
            case "name": name = try value.string("name")
            case "rule": rule = try value.string("rule")
            case "source": source = try value.string("source")
            case "profile":
                profile = try value.string("profile")
                guard BudgetProfile.named(profile) != nil else {
                    throw value.error(unknown("profile", profile, known: BudgetProfile.all.map(\.name)))
                }
            case "epoch":
                let text = try value.string("epoch")
                guard let date = ISO8601DateFormatter().date(from: text) else {
                    throw value.error("epoch: \"\(text)\" is not an ISO 8601 date and time (e.g. 2025-01-01T00:00:00Z)")
                }
                epoch = date
            case "settle":
                settle = try value.duration("settle")
                guard settle > .zero, settle <= .seconds(600) else { throw value.error("settle: from 1ms to 600s of real time (the safety net)") }
            case "deviceMemory":
                // As the host config's "memory": {"device": ...}, with its bounds.
                let text = try value.string("deviceMemory")
                do {
                    deviceMemory = try MemorySettings.device(text)
                } catch {
                    throw value.error("deviceMemory: \(error.message)")
                }
            case "requires":
                // One word or a list of them (bounded as every list).
                for word in try value.strings("requires") {
                    guard let requirement = Scenario.Requirement(rawValue: word) else {
                        throw value.error(unknown("requirement", word, known: Scenario.Requirement.allCases.map(\.rawValue)))
                    }
                    if !requires.contains(requirement) { requires.append(requirement) }
                }
            case "apps": appsNode = value
            case "steps": stepsNode = value
            default:
                throw keyNode.error(unknown("key", key, known: ScenarioReader.topKeys))
            }
        }
        guard let name else { throw root.error("no name: every scenario says what it checks (name: ...)") }
        guard let appsNode else { throw root.error("no apps: name the apps the steps use (apps: {probe: ../manifests/Probe.app})") }
        guard let stepsNode else { throw root.error("no steps (steps: [...])") }
        let apps = try self.apps(appsNode)
        let steps = try self.steps(stepsNode, aliases: apps.map(\.alias))
        var scenario = Scenario(name: name, file: file, rule: rule, source: source, profile: profile, epoch: epoch,
                                settle: settle, apps: apps, steps: steps)
        scenario.deviceMemory = deviceMemory
        scenario.requires = requires
        return scenario
    }

    func apps(_ node: Located) throws(ScenarioError) -> [Scenario.App] {
        let pairs = try node.mapping("apps")
        guard !pairs.isEmpty else { throw node.error("apps: at least one app") }
        guard pairs.count <= ScenarioReader.maximumApps else { throw node.error("apps: at most \(ScenarioReader.maximumApps)") }
        var out: [Scenario.App] = []
        for (alias, keyNode, value) in pairs {
            guard !ScenarioReader.expectKeys.contains(alias) else {
                throw keyNode.error("\"\(alias)\" cannot name an app: expectations use it (\(ScenarioReader.expectKeys.joined(separator: ", ")))")
            }
            var app = Scenario.App(alias: alias, bundle: "", args: [], settings: [:], installFirst: true)
            if value.isMapping {
                var bundle: String?
                for (key, k, v) in try value.mapping("app \(alias)") {
                    switch key {
                    case "bundle": bundle = try v.string("bundle")
                    case "args": app.args = try v.strings("args")
                    case "install": app.installFirst = try v.bool("install")
                    case "settings":
                        for (sk, _, sv) in try v.mapping("settings") { app.settings[sk] = try sv.scalar("settings.\(sk)") }
                    default: throw k.error(unknown("key of an app", key, known: ScenarioReader.appKeys))
                    }
                }
                guard let bundle else { throw value.error("app \(alias): no bundle (bundle: path/to/App.app)") }
                app.bundle = path(bundle)
            } else {
                app.bundle = path(try value.string("app \(alias)"))
            }
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: app.bundle, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw value.error("app \(alias): no bundle at \(app.bundle) (paths are relative to the scenario file)")
            }
            out.append(app)
        }
        return out
    }

    func steps(_ node: Located, aliases: [String]) throws(ScenarioError) -> [Scenario.Step] {
        guard case .sequence(let seq) = node.node else { throw node.error("steps: expected a list (- launch: probe)") }
        guard seq.count <= ScenarioReader.maximumSteps else { throw node.error("steps: at most \(ScenarioReader.maximumSteps)") }
        var out: [Scenario.Step] = []
        for item in seq {
            let step = Located(node: item, file: file)
            let pairs = try step.mapping("a step")
            guard pairs.count == 1, let (verb, verbNode, value) = pairs.first else {
                throw step.error("a step is one verb (- advance: 30s); this one has \(pairs.count): \(pairs.map(\.key).joined(separator: ", "))")
            }
            let action = try StepBuilder(builder: self, aliases: aliases).action(verb, verbNode, value)
            out.append(Scenario.Step(action: action, position: .init(line: step.line ?? 0, column: step.column ?? 0),
                                     text: Self.oneLine(verb, value.node)))
        }
        return out
    }

    /// `verb: value` on one line, at most 160 characters.
    static func oneLine(_ verb: String, _ node: Node) -> String {
        func flat(_ n: Node) -> String {
            switch n {
            case .scalar(let s): return s.string.contains(where: { " :,{}[]".contains($0) }) ? "\"\(s.string)\"" : s.string
            case .sequence(let seq): return "[" + seq.map(flat).joined(separator: ", ") + "]"
            case .mapping(let m): return "{" + m.map { "\(flat($0.key)): \(flat($0.value))" }.joined(separator: ", ") + "}"
            case .alias: return "*alias"
            }
        }
        let s = "\(verb): \(flat(node))"
        return s.count > 160 ? String(s.prefix(159)) + "…" : s
    }
}
