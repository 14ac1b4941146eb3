import AppHostManifest
import AppHostProtocol
import Foundation

/// What `apphost lint` found in one bundle.
public struct LintReport: Codable, Sendable, Equatable {
    /// The bundle as the caller named it.
    public var bundle: String
    /// Its Info.plist, as named in findings.
    public var manifestPath: String
    /// `CFBundleIdentifier`, expanded; nil if it could not be resolved.
    public var bundleIdentifier: String?
    /// The known `UIBackgroundModes`, in file order, without duplicates.
    public var backgroundModes: [String]
    /// Every finding, in the order checked: manifest, modes, entitlements, trace.
    public var findings: [LintFinding]

    public init(bundle: String, manifestPath: String, bundleIdentifier: String?, backgroundModes: [String],
                findings: [LintFinding]) {
        self.bundle = bundle
        self.manifestPath = manifestPath
        self.bundleIdentifier = bundleIdentifier
        self.backgroundModes = backgroundModes
        self.findings = findings
    }

    /// Whether any finding is an error (`apphost lint` then exits 1).
    public var hasErrors: Bool { findings.contains { $0.severity == .error } }
    public var errorCount: Int { findings.count { $0.severity == .error } }
    public var warningCount: Int { findings.count { $0.severity == .warning } }

    private enum CodingKeys: String, CodingKey {
        case bundle, manifestPath, bundleIdentifier, backgroundModes, findings
        case hasErrors, errors, warnings
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        bundle = try c.decode(String.self, forKey: .bundle)
        manifestPath = try c.decode(String.self, forKey: .manifestPath)
        bundleIdentifier = try c.decodeIfPresent(String.self, forKey: .bundleIdentifier)
        backgroundModes = try c.decodeIfPresent([String].self, forKey: .backgroundModes) ?? []
        findings = try c.decode([LintFinding].self, forKey: .findings)
    }

    /// The stored fields plus `hasErrors`, `errors` and `warnings` (derived, for scripts).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(bundle, forKey: .bundle)
        try c.encode(manifestPath, forKey: .manifestPath)
        try c.encodeIfPresent(bundleIdentifier, forKey: .bundleIdentifier)
        try c.encode(backgroundModes, forKey: .backgroundModes)
        try c.encode(findings, forKey: .findings)
        try c.encode(hasErrors, forKey: .hasErrors)
        try c.encode(errorCount, forKey: .errors)
        try c.encode(warningCount, forKey: .warnings)
    }
}

/// A trace (an `events.jsonl`) that could not be read: `events.jsonl:12: detail`, the
/// line of the malformed entry (none when the file itself is the problem).
public typealias TraceError = FileLineError

/// `apphost lint`: checks an app bundle as written, without a host.
///
/// 1. The manifest must read. Every problem is an error naming the file and key
///    (every unknown background mode, each with its "did you mean"); the rest is
///    checked with what did read.
/// 2. Each declared mode's plugin ``BackgroundModePlugin/lint(_:)`` findings; a mode listed
///    twice is a warning; a mode AppHost knows but does not emulate yet is a note.
/// 3. The entitlements file (`Name.entitlements` beside Info.plist, as the loader finds
///    it): its keys and values as a note; App Group identifiers the host would refuse
///    to install (not `group.…`, not a plain file name, an unset build setting) as errors.
/// 4. With a trace (the host's `events.jsonl`), for the events of this bundle id:
///    declared emulated modes never used (`modeUsed`) are warnings (App Review rejects
///    unused modes); services refused for lack of a mode (`modeRefused`) are counted per
///    cause. A refusal is a warning: on iOS the service silently does not run (audio
///    stops on going home, no location fix while suspended). It is an error when iOS
///    terminates the app for it: a programmer error such as setting
///    `allowsBackgroundLocationUpdates` without the mode, known by its cause or shown in
///    the trace by the host killing the app (or its termination report) for the missing mode.
public enum Linter {
    /// Refusals iOS punishes by terminating the app, by mode: causes starting with these.
    static let fatalRefusals: [String: [String]] = [
        BackgroundMode.location.rawValue: ["allowsBackgroundLocationUpdates"],
    ]

    /// Where the bundle loader looks for the entitlements of the manifest at `file`:
    /// `<folder>/<BundleName>.entitlements`.
    public static func entitlementsPath(forManifestAt file: String) -> String {
        AppBundleLoader.defaultEntitlementsPath(forManifestAt: file)
    }

    /// Each entitlement as `key = value`, in key order.
    public static func describe(_ entitlements: Entitlements) -> [String] {
        let dictionary = entitlements.propertyList()
        return entitlements.keys.map { "\($0) = \(render(dictionary[$0] as Any))" }
    }

    /// Lints the bundle at `bundlePath` (an App.app folder or an Info.plist file).
    /// `settings` fill build-setting references as `apphost --setting` does; `trace` is
    /// the events of a host run (see ``readTrace(path:)``); `entitlements` names the
    /// entitlements file when it is not `<Name>.entitlements` beside the Info.plist.
    public static func lint(bundlePath: String, settings: [String: String] = [:], trace: [HostEvent]? = nil,
                            entitlements entitlementsOverride: String? = nil) -> LintReport {
        let asManifest = ManifestReader.manifestPath(for: bundlePath)
        if AppBundleLoader.isEntitlementsFile(asManifest) {
            return lintEntitlementsGivenAsBundle(asManifest, bundle: bundlePath, settings: settings)
        }
        let read = ManifestReader.readLenient(path: bundlePath, settings: settings)
        let file = read.displayPath
        var findings: [LintFinding] = read.problems.map(finding(for:))
        guard let manifest = read.manifest else {
            return LintReport(bundle: bundlePath, manifestPath: file, bundleIdentifier: nil, backgroundModes: [], findings: findings)
        }
        findings += read.warnings.map { LintFinding(.warning, file: $0.file, key: $0.key, ($0.key.map { "\($0): " } ?? "") + $0.detail) }
        let modeKey = ManifestReader.backgroundModesKey

        // The executable: the host refuses one outside the bundle and its products directories.
        let executableKey = ManifestReader.executableKey
        if let problem = AppBundleLoader.executableNameProblem(manifest.executable) {
            findings.append(LintFinding(.error, file: file, key: executableKey, "\(executableKey): \(problem)"))
        } else if manifest.executable.hasPrefix("/") {
            findings.append(LintFinding(.warning, file: file, key: executableKey,
                "\(executableKey): \"\(manifest.executable)\" is an absolute path: the host accepts it only inside the bundle folder or a products directory; name it relative to them"))
        }

        // Modes: duplicates, then each mode's plugin.
        var modes: [BackgroundMode] = []
        for mode in manifest.backgroundModes where !modes.contains(mode) { modes.append(mode) }
        for mode in modes {
            let indices = (read.writtenBackgroundModes ?? []).indices.filter { read.writtenBackgroundModes?[$0] == mode.rawValue }
            if indices.count > 1 {
                let at = indices.map { "\(modeKey)[\($0)]" }.joined(separator: ", ")
                findings.append(LintFinding(.warning, file: file, key: modeKey, mode: mode.rawValue,
                    "background mode \"\(mode.rawValue)\" is listed \(indices.count) times (\(at)); list it once"))
            }
        }

        // Opting out of the background: a key Apple deprecated with iOS 13.
        if manifest.exitsOnSuspend {
            findings.append(LintFinding(.note, file: file, key: "UIApplicationExitsOnSuspend",
                "UIApplicationExitsOnSuspend is true: home terminates the app (willResignActive, then willTerminate) instead of moving it to the background, as iOS 4 to 12 did; Apple deprecated the key with iOS 13 (its page lists it for iOS 4.0–13.0), so a current iPhone may suspend the app as any other"))
        }

        // Accessory protocols without the mode: the app talks to them only while it runs.
        let protocolsKey = ManifestReader.externalAccessoryProtocolsKey
        if !manifest.externalAccessoryProtocols.isEmpty, !modes.contains(.externalAccessory) {
            findings.append(LintFinding(.warning, file: file, key: protocolsKey, mode: BackgroundMode.externalAccessory.rawValue,
                "\(protocolsKey) lists \(manifest.externalAccessoryProtocols.count) protocol(s) but UIBackgroundModes has no \"external-accessory\": the app reaches its accessories only while it runs in front, and is not woken or kept running for them in the background (declare the mode if it should be)"))
        }

        // Entitlements: the file named, or where the bundle loader looks for them.
        let entitlementsFile = entitlementsOverride ?? entitlementsPath(forManifestAt: file)
        var entitlements: Entitlements?
        var entitlementFindings: [LintFinding] = []
        if entitlementsOverride == nil, let misnamed = AppBundleLoader.misnamedEntitlementsWarning(forManifestAt: file) {
            entitlementFindings.append(LintFinding(.warning, file: file, misnamed))
        }
        if entitlementsOverride != nil || FileManager.default.fileExists(atPath: entitlementsFile) {
            do {
                let e = try Entitlements.read(path: entitlementsFile)
                entitlements = e
                let shown = describe(e)
                entitlementFindings.append(LintFinding(.note, file: entitlementsFile,
                    "entitlements: " + (shown.isEmpty ? "none (the file has no keys)" : shown.joined(separator: ", "))))
                // The identifiers name shared folders: the host refuses to install what it cannot use.
                do {
                    _ = try e.applicationGroups(settings: settings)
                } catch {
                    entitlementFindings.append(finding(for: error))
                }
            } catch {
                entitlementFindings.append(finding(for: error))
            }
        } else {
            entitlementFindings.append(LintFinding(.note, file: file,
                "no entitlements file (\(entitlementsFile) does not exist): the app claims no entitlements"))
        }

        let subject = LintSubject(manifestPath: file, manifest: manifest,
                                  entitlementsPath: entitlements != nil ? entitlementsFile : nil,
                                  entitlementKeys: entitlements?.keys ?? [], settings: settings)
        for mode in modes {
            guard let plugin = ModeRegistry.plugin(for: mode) else { continue }
            findings += plugin.lint(subject)
            if case .registered(let why) = plugin.emulation {
                findings.append(LintFinding(.note, file: file, key: modeKey, mode: mode.rawValue,
                    "background mode \"\(mode.rawValue)\" is accepted but not emulated yet: \(why)"))
            }
        }
        findings += entitlementFindings

        if let trace {
            findings += traceFindings(trace, read: read, manifest: manifest, modes: modes, file: file)
        }
        return LintReport(bundle: bundlePath, manifestPath: file,
                          bundleIdentifier: read.bundleIdentifierResolved ? manifest.bundleIdentifier : nil,
                          backgroundModes: modes.map(\.rawValue), findings: findings)
    }

    /// `apphost lint X.entitlements`: the file is not a bundle. Says so (an error: nothing
    /// was linted), shows what it holds and checks its App Groups, as for a bundle's.
    private static func lintEntitlementsGivenAsBundle(_ file: String, bundle: String, settings: [String: String]) -> LintReport {
        var findings = [LintFinding(.error, file: file,
            "this is an entitlements file, not an app bundle or Info.plist: lint the app's bundle or Info.plist and name this file with --entitlements (apphost lint --entitlements \(file) App.app)")]
        do {
            let e = try Entitlements.read(path: file)
            let shown = describe(e)
            findings.append(LintFinding(.note, file: file,
                "entitlements: " + (shown.isEmpty ? "none (the file has no keys)" : shown.joined(separator: ", "))))
            do {
                _ = try e.applicationGroups(settings: settings)
            } catch {
                findings.append(finding(for: error))
            }
        } catch {
            findings.append(finding(for: error))
        }
        return LintReport(bundle: bundle, manifestPath: file, bundleIdentifier: nil, backgroundModes: [], findings: findings)
    }

    /// Reads a host's `events.jsonl`: one ``HostEvent`` a line, as ``WireJSON`` writes them.
    /// Blank lines are skipped, and so are events of a kind this build does not know (a
    /// newer host's); any other line that does not parse is an error naming it.
    public static func readTrace(path: String) throws(TraceError) -> [HostEvent] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw TraceError(file: path, detail: "trace not found (the host writes events.jsonl in its state directory)")
        }
        guard !isDirectory.boolValue else {
            throw TraceError(file: path, detail: "is a directory; pass its events.jsonl")
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw TraceError(file: path, detail: "cannot be read (\(error.localizedDescription))")
        }
        let decoder = WireJSON.decoder()
        var events: [HostEvent] = []
        for (i, line) in data.split(separator: 0x0a, omittingEmptySubsequences: false).enumerated() {
            let text = line.last == 0x0d ? line.dropLast() : line[...]
            if text.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            do {
                events.append(try decoder.decode(HostEvent.self, from: Data(text)))
            } catch {
                struct KindOnly: Decodable { var kind: String }
                if let probe = try? decoder.decode(KindOnly.self, from: Data(text)), HostEvent.Kind(rawValue: probe.kind) == nil {
                    continue
                }
                throw TraceError(file: path, line: i + 1, detail: "not a host event: \(describe(error))")
            }
        }
        return events
    }

    // MARK: - trace

    private static func traceFindings(_ trace: [HostEvent], read: LenientManifest, manifest: Manifest,
                                      modes: [BackgroundMode], file: String) -> [LintFinding] {
        let modeKey = ManifestReader.backgroundModesKey
        guard read.bundleIdentifierResolved else {
            return [LintFinding(.note, file: file, key: ManifestReader.bundleIdentifierKey,
                "the trace was not checked: CFBundleIdentifier did not resolve, so no app in it can be matched")]
        }
        let id = manifest.bundleIdentifier
        let events = trace.filter { $0.bundleIdentifier?.rawValue == id }
        guard !events.isEmpty else {
            return [LintFinding(.warning, file: file, key: ManifestReader.bundleIdentifierKey,
                "the trace has no events of \(id): nothing in it to judge the background modes by (was it installed under another id?)")]
        }
        var out: [LintFinding] = []

        // Declared, never used.
        let used = Set(events.filter { $0.kind == .modeUsed }.compactMap(\.mode))
        for mode in modes {
            guard let plugin = ModeRegistry.plugin(for: mode) else { continue }
            switch plugin.emulation {
            case .emulated:
                if !used.contains(mode) {
                    out.append(LintFinding(.warning, file: file, key: modeKey, mode: mode.rawValue,
                        "background mode \"\(mode.rawValue)\" is declared but never used in the trace (App Review rejects unused modes)"))
                }
            case .registered:
                out.append(LintFinding(.note, file: file, key: modeKey, mode: mode.rawValue,
                    "background mode \"\(mode.rawValue)\": whether it is used cannot be judged from this trace yet (AppHost does not emulate it yet)"))
            case .notEmulated:
                out.append(LintFinding(.note, file: file, key: modeKey, mode: mode.rawValue,
                    "background mode \"\(mode.rawValue)\": whether it is used cannot be judged from a trace (AppHost does not emulate it)"))
            }
        }

        // Refused for lack of a mode: one finding per (mode, cause), counted, in first-seen order.
        struct Refusal { var mode: String; var cause: String; var count = 0; var fatal = false }
        var refusals: [Refusal] = []
        for (i, event) in events.enumerated() where event.kind == .modeRefused {
            let mode = event.mode?.rawValue ?? "?"
            // The host appends what the plugin said with `: needs "mode" in UIBackgroundModes`;
            // the finding says what to declare itself.
            var cause = event.cause
            let needs = ": needs \"\(mode)\" in UIBackgroundModes"
            if cause.hasSuffix(needs) { cause.removeLast(needs.count) }
            let index = refusals.firstIndex { $0.mode == mode && $0.cause == cause } ?? {
                refusals.append(Refusal(mode: mode, cause: cause))
                return refusals.count - 1
            }()
            refusals[index].count += 1
            if !refusals[index].fatal, isFatal(mode: mode, cause: cause, later: events[(i + 1)...]) {
                refusals[index].fatal = true
            }
        }
        for r in refusals {
            let times = r.count == 1 ? "once" : "\(r.count) times"
            if let known = BackgroundMode(rawValue: r.mode), modes.contains(known) {
                // The manifest declares it now: the trace is older, or the refusal had another reason.
                out.append(LintFinding(.note, file: file, key: modeKey, mode: r.mode,
                    "refused \(times) in the trace although \"\(r.mode)\" is declared: \(r.cause)"))
            } else if r.fatal {
                out.append(LintFinding(.error, file: file, key: modeKey, mode: r.mode,
                    "refused \(times) in the trace, and iOS terminates the app for it: \(r.cause) (declare \"\(r.mode)\" in UIBackgroundModes, or stop doing this)"))
            } else {
                out.append(LintFinding(.warning, file: file, key: modeKey, mode: r.mode,
                    "refused \(times) in the trace: \(r.cause) (declare \"\(r.mode)\" in UIBackgroundModes)"))
            }
        }
        return out
    }

    /// Whether iOS terminates an app for this refusal: a cause known to be a programmer
    /// error, or, before the app is spawned again, the host killing it (a `warning`
    /// "killing: ...") or a termination report that blames the missing mode.
    private static func isFatal(mode: String, cause: String, later: ArraySlice<HostEvent>) -> Bool {
        if fatalRefusals[mode, default: []].contains(where: { cause.hasPrefix($0) }) { return true }
        let blame = "\"\(mode)\" in UIBackgroundModes"
        for event in later {
            if event.kind == .spawned { return false }
            let killed = event.kind == .report || (event.kind == .warning && event.cause.hasPrefix("killing: "))
            if killed, event.cause.contains(blame) { return true }
        }
        return false
    }

    // MARK: - helpers

    /// A manifest or entitlements read problem as an error finding: `key[index]: detail`.
    static func finding(for error: ManifestError) -> LintFinding {
        var message = error.detail
        if let key = error.key {
            message = (error.index.map { "\(key)[\($0)]" } ?? key) + ": " + message
        }
        return LintFinding(.error, file: error.file, key: error.key,
                           mode: error.code == .unknownBackgroundMode ? error.value : nil, message)
    }

    /// A property list value on one line: strings as written, `true`/`false`, `[a, b]`, `{k = v; ...}`.
    static func render(_ value: Any) -> String {
        if let b = value as? Bool, type(of: value) == Bool.self { return b ? "true" : "false" }
        switch value {
        case let s as String:
            return s
        case let n as NSNumber:
            if String(cString: n.objCType) == "c" { return n.boolValue ? "true" : "false" }
            return n.stringValue
        case let a as [Any]:
            return "[" + a.map(render).joined(separator: ", ") + "]"
        case let d as [String: Any]:
            return "{" + d.keys.sorted().map { "\($0) = \(render(d[$0] as Any))" }.joined(separator: "; ") + "}"
        case let date as Date:
            return Timestamp.format(date)
        case let data as Data:
            return "<\(data.count) bytes>"
        default:
            return "\(value)"
        }
    }

    /// A decoding error on one line: where, and what.
    private static func describe(_ error: any Error) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return keys.isEmpty ? "" : "\"\(keys.joined(separator: "."))\": "
        }
        switch error as? DecodingError {
        case .keyNotFound(let key, let context)?:
            return "\(path(context))missing key \"\(key.stringValue)\""
        case .typeMismatch(let type, let context)?:
            return "\(path(context))expected \(type)"
        case .valueNotFound(let type, let context)?:
            return "\(path(context))expected \(type), found null"
        case .dataCorrupted(let context)?:
            let underlying = (context.underlyingError as NSError?)?.userInfo[NSDebugDescriptionErrorKey] as? String
            return "\(path(context))\(underlying ?? context.debugDescription)"
        default:
            return "\(error)"
        }
    }
}
