import AppHostProtocol
import ArgumentParser
import Foundation
import Host

/// simctl's device argument, where simctl puts it: right after the verb (and the verb's
/// options), before everything else: `apphost push booted <id> <file>`, `apphost privacy
/// booted grant location <id>`, `apphost io booted screenshot shot.png`. A state directory
/// is one device, so the argument only has to name this one: `booted`, its name or its
/// UDID (`apphost list-devices`). It is checked and taken out of the command line before
/// swift-argument-parser reads it; any other device is refused, saying which this one is.
///
/// The verb's options are read from swift-argument-parser itself (its
/// `--experimental-dump-help` description of the verb), so an option that takes a value
/// (`--state-dir DIR`) is never mistaken for the device, whatever options a verb gains.
enum DeviceArgument {
    /// The verbs simctl has an equivalent of, which therefore take its device argument.
    static let verbs: Set<String> = [
        "install", "uninstall", "launch", "terminate", "push", "privacy", "location", "io",
        "get_app_container", "listapps", "shutdown",
    ]

    /// The paragraph each of those verbs' help carries.
    static func help(_ example: String) -> String {
        "As with simctl, a device may come first: `\(example)`. It must name this host: booted, "
            + "or the name or UDID `apphost list-devices` shows; any other device is refused (exit 64)."
    }

    /// A device argument that names another device (exit 64).
    struct Mismatch: Error, CustomStringConvertible {
        var description: String
    }

    /// `arguments` (without the program name) with a device argument taken out, checked
    /// against the device of the state directory the command line selects.
    static func strip(_ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment) throws(Mismatch) -> [String] {
        guard let verb = arguments.first, verbs.contains(verb), let shape = VerbShape.of([verb]) else { return arguments }
        let end = arguments.firstIndex(of: "--") ?? arguments.count
        let stateDirectory = resolvedStateDirectory(stateDirectoryFlag(arguments[..<end]), environment)
        var positionals: [Int] = []
        var i = 1
        while i < end {
            let word = arguments[i]
            if isOption(word) {
                let name = word.split(separator: "=", maxSplits: 1).first.map(String.init) ?? word
                if shape.valueOptions.contains(name) || name == "--state-dir", !word.contains("=") { i += 1 }
            } else {
                positionals.append(i)
            }
            i += 1
        }
        guard let first = positionals.first else { return arguments }
        let candidate = arguments[first]
        if !shape.subcommands.isEmpty {
            // A verb of subcommands: the device comes before the subcommand's name, and
            // options written before that name belong to the subcommand (`privacy
            // --state-dir D grant ...` read so when privacy had no subcommands).
            var nameIndex = first
            if !shape.subcommands.contains(candidate) {
                try check(candidate, stateDirectory: stateDirectory)
                guard let next = positionals.dropFirst().first else {
                    return arguments.enumerated().filter { $0.offset != first }.map(\.element)
                }
                nameIndex = next
            }
            let options = arguments[1..<nameIndex].enumerated().filter { $0.offset + 1 != first || nameIndex == first }.map(\.element)
            return [verb, arguments[nameIndex]] + options + arguments[(nameIndex + 1)...]
        }
        let isDevice: Bool
        if let maximum = shape.maximumPositionals {
            // One positional more than the verb takes is a device, whatever it says.
            isDevice = positionals.count > maximum || looksLikeDevice(candidate, stateDirectory: stateDirectory)
        } else {
            // `launch "iPhone 15" com.example.app`: a name that is no bundle id, before one.
            let next = positionals.dropFirst().first.map { arguments[$0] }
            isDevice = looksLikeDevice(candidate, stateDirectory: stateDirectory)
                || (candidate.contains(where: \.isWhitespace) && next.flatMap { BundleID($0) } != nil)
        }
        guard isDevice else { return arguments }
        try check(candidate, stateDirectory: stateDirectory)
        var out = arguments
        out.remove(at: first)
        return out
    }

    /// An option or flag (`-5` and `-33.86` are numbers: `location set -33.86 151.2`).
    static func isOption(_ word: String) -> Bool {
        word.hasPrefix("-") && word.count > 1 && Double(word) == nil
    }

    /// The last `--state-dir DIR` (or `--state-dir=DIR`), as swift-argument-parser takes it.
    static func stateDirectoryFlag(_ words: ArraySlice<String>) -> String? {
        var found: String?
        var i = words.startIndex
        while i < words.endIndex {
            if words[i] == "--state-dir", i + 1 < words.endIndex {
                found = words[i + 1]
                i += 1
            } else if words[i].hasPrefix("--state-dir=") {
                found = String(words[i].dropFirst("--state-dir=".count))
            }
            i += 1
        }
        return found
    }

    /// `booted`, a UUID, or this device's name.
    static func looksLikeDevice(_ word: String, stateDirectory: String) -> Bool {
        if word.lowercased() == "booted" || UUID(uuidString: word) != nil { return true }
        return (try? DeviceIdentity.load(stateDirectory: stateDirectory))??.name == word
    }

    /// Throws unless `word` names this state directory's device.
    static func check(_ word: String, stateDirectory: String) throws(Mismatch) {
        if word.lowercased() == "booted" { return }
        let identity: DeviceIdentity?
        do {
            identity = try DeviceIdentity.load(stateDirectory: stateDirectory)
        } catch {
            throw Mismatch(description: "device \"\(word)\": \(error)")
        }
        guard let identity else {
            throw Mismatch(description: "device \"\(word)\" is not this host's: no host has used \(stateDirectory) yet, so it has no "
                + "UDID (`apphost list-devices --state-dir \(stateDirectory)` makes one); give booted instead")
        }
        guard !identity.isNamed(by: word) else { return }
        throw Mismatch(description: "device \"\(word)\" is not this host's: \(stateDirectory) is \"\(identity.name)\" (\(identity.udid)); "
            + "give booted, that name or that UDID (apphost list-devices), or --state-dir for another host")
    }

    static func resolvedStateDirectory(_ flag: String?, _ environment: [String: String]) -> String {
        StateOptions.resolve(flag: flag, environment: environment)
    }
}

/// What swift-argument-parser says a verb takes: its options that take a value, its
/// subcommands, and how many positional arguments (nil: any number).
struct VerbShape {
    var valueOptions: Set<String> = []
    var subcommands: Set<String> = []
    var maximumPositionals: Int? = 0

    /// The shape of `apphost <path...>`; nil if swift-argument-parser does not describe it.
    static func of(_ path: [String]) -> VerbShape? {
        let text: String
        do {
            _ = try AppHostCommand.parseAsRoot(path + ["--experimental-dump-help"])
            return nil
        } catch {
            text = AppHostCommand.fullMessage(for: error)
        }
        guard let info = try? JSONDecoder().decode(ToolInfo.self, from: Data(text.utf8)) else { return nil }
        var shape = VerbShape()
        // swift-argument-parser lists its own `help` subcommand under every command.
        shape.subcommands = Set((info.command.subcommands ?? []).map(\.commandName).filter { $0 != "help" })
        for argument in info.command.arguments ?? [] {
            switch argument.kind {
            case "option":
                for name in argument.names ?? [] {
                    shape.valueOptions.insert(name.kind == "long" ? "--" + name.name : "-" + name.name)
                }
            case "positional":
                if argument.isRepeating { shape.maximumPositionals = nil }
                else { shape.maximumPositionals = shape.maximumPositionals.map { $0 + 1 } }
            default:
                break
            }
        }
        return shape
    }

    /// The part of swift-argument-parser's ToolInfoV0 read here.
    private struct ToolInfo: Decodable {
        struct Name: Decodable { var kind: String; var name: String }
        struct Argument: Decodable { var kind: String; var names: [Name]?; var isRepeating: Bool }
        struct Command: Decodable { var commandName: String; var arguments: [Argument]?; var subcommands: [Command]? }
        var command: Command
    }
}
