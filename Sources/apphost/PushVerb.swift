import AppHostProtocol
import ArgumentParser
import Foundation
import Plugins

// `apphost push`: an alert, silent or VoIP push to an app in a running daemon, as a
// provider sends it to APNs (see ModeVerbs.swift for the other mode verbs).

extension AppHostCommand {
    struct Push: ParsableCommand {
        /// The push types AppHost delivers (`apns-push-type`).
        enum Kind: String, CaseIterable {
            case alert, background, voip
        }

        /// `apns-push-type` values APNs knows but AppHost does not deliver.
        static let otherAPNsTypes = ["complication", "fileprovider", "mdm", "location", "liveactivity", "pushtotalk", "controls", "widgets"]

        static let configuration = CommandConfiguration(
            commandName: "push",
            abstract: "Send a remote notification (alert or silent) or a VoIP push to an app, as `simctl push`.",
            usage: """
                apphost push [--type alert|background|voip] [--dry-run] [--priority 5|10]
                             [--collapse-id <id>] [--apns-id <uuid>] [<bundle-id>] <payload-file|->
                """,
            discussion: """
                As `xcrun simctl push <device> [<bundle identifier>] (<json file> | -)`: the \
                payload is a JSON object with an "aps" dictionary, at most \(APNsPayload.maximumSize) bytes, from \
                a file (.apns or .json) or from standard input (-). The bundle id may be left out \
                when the payload names its app with a top-level "\(APNsPayload.targetKey)" key; \
                when both are given the argument wins. The payload must be strict JSON (no \
                trailing commas, no comments), as simctl and APNs read it.

                --type is the apns-push-type. Without it the payload decides, as APNs infers it: \
                background for a pure silent push ("content-available": 1 with no alert, badge or \
                sound), else alert.

                alert: a notification the user sees. With "content-available": 1 as well, an app \
                with "remote-notification" in UIBackgroundModes is also woken in the background.

                background: a silent push. An app with "remote-notification" in \
                UIBackgroundModes is woken (or launched) in the background and its \
                application(_:didReceiveRemoteNotification:fetchCompletionHandler:) is called, \
                while Background App Refresh is on (`apphost settings`). Use --priority 5; APNs \
                refuses 10.

                voip: a PushKit push. The app is woken or launched for \
                pushRegistry(_:didReceiveIncomingPushWith:for:completion:) and must report an \
                incoming call to CallKit within the voipReport budget (`apphost profile show`) \
                or it is killed (0xbaadca11); after \(VoIPPlugin.maximumUnreported) unreported pushes in a row \
                no more are delivered until it is reinstalled. Needs "voip" in \
                UIBackgroundModes. The payload is any JSON object (no "aps" needed), at most \
                \(ModeInput.voipPayloadLimit) bytes; --priority, --collapse-id and --apns-id do not apply.

                --dry-run checks the payload and prints what would be delivered (target, type, \
                priority, silent or visible, alert text, size) without contacting the daemon.

                \(DeviceArgument.help("apphost push booted com.example.app payload.apns"))

                Exit status: 64 for a command-line mistake (no bundle id anywhere, a bad \
                --priority), 65 for a bad payload, 66 for a missing file.

                Examples:
                  apphost push com.example.app payload.apns
                  apphost push payload.apns           # the payload names the app
                  apphost push --type background --priority 5 com.example.app silent.apns
                  echo '{"aps": {"alert": "Hello"}}' | apphost push com.example.app -
                  apphost push --dry-run payload.apns # check it; send nothing
                  apphost push --type voip com.example.phone call.json
                """)

        @Option(name: .long, help: ArgumentHelp(
            "apns-push-type: alert, background or voip (default: background for a pure content-available payload, else alert).",
            valueName: "type"))
        var type: String?
        @Flag(name: .long, help: "Check the payload and print what would be delivered; send nothing (no daemon needed).")
        var dryRun = false
        @Option(name: .long, help: ArgumentHelp("apns-priority: 10 (at once) or 5 (when convenient; the only one for --type background).", valueName: "5|10"))
        var priority: Int?
        @Option(name: .customLong("collapse-id"), help: ArgumentHelp("apns-collapse-id: a newer push with the same id replaces the older one (at most \(ModeInput.collapseIDLimit) bytes).", valueName: "id"))
        var collapseID: String?
        @Option(name: .customLong("apns-id"), help: ArgumentHelp("apns-id: the notification's UUID, as APNs takes it (default: a new lowercase one). The answer and the app's delivery events carry it, as sent.", valueName: "uuid"))
        var apnsID: String?
        @Argument(help: ArgumentHelp(
            "The app; optional when the payload has \"\(APNsPayload.targetKey)\" (given here, it overrides the payload's).",
            valueName: "bundle-id"), completion: Completion.bundleIdentifiers)
        var first: String?
        @Argument(help: ArgumentHelp("The payload: a JSON (.apns) file, or - for standard input.", valueName: "payload-file|-"))
        var second: String?
        @OptionGroup var state: StateOptions

        func run() throws {
            var request = ModeCommand.locationClear
            var preview = ""
            try reportingErrors {
                let (argumentTarget, source) = try ModeInput.pushOperands(first, second)
                let kind = try ModeInput.pushKind(type)
                if let priority, ![5, 10].contains(priority) {
                    throw ModeInput.usage("--priority must be 10 (deliver at once) or 5 (when convenient), got \(priority)")
                }
                if let collapseID {
                    guard !collapseID.isEmpty, collapseID.utf8.count <= ModeInput.collapseIDLimit else {
                        throw ModeInput.usage("--collapse-id must be 1...\(ModeInput.collapseIDLimit) bytes (APNs BadCollapseId), got \(collapseID.utf8.count)")
                    }
                }
                if let apnsID, UUID(uuidString: apnsID) == nil {
                    throw ModeInput.usage("--apns-id \"\(apnsID)\" is not a UUID (8-4-4-4-12 hex digits, e.g. 123e4567-e89b-12d3-a456-4266554400a0; APNs BadMessageId)")
                }
                if let target = argumentTarget { _ = try ModeInput.bundleID(target) }

                if kind == .voip {
                    let text = try ModeInput.payload(source, limit: ModeInput.voipPayloadLimit)
                    let named = ModeInput.payloadTarget(text)
                    guard let written = argumentTarget ?? named else { throw ModeInput.noPushTarget(source) }
                    let target = try ModeInput.bundleID(try matchTeamPrefixed(written))
                    if !dryRun, priority != nil || collapseID != nil || apnsID != nil {
                        FileHandle.standardError.write(Data("apphost: note: --priority, --collapse-id and --apns-id do not apply to a VoIP push; ignored\n".utf8))
                    }
                    request = .voipPush(bundleIdentifier: target, payload: text)
                    preview = ModeInput.pushPreview(
                        target: target.rawValue, targetNote: ModeInput.targetNote(argument: argumentTarget, payload: named)
                            + ModeInput.teamPrefixNote(written, matched: target.rawValue, dryRun: dryRun),
                        type: "voip", typeNote: "--type", priority: nil, collapseID: nil, apnsID: nil,
                        delivery: "PushKit: pushRegistry(_:didReceiveIncomingPushWith:for:completion:); the app must report a call to CallKit",
                        alert: nil, size: text.utf8.count, limit: ModeInput.voipPayloadLimit)
                    return
                }

                let (data, label) = try ModeInput.readPayload(source)
                let payload: APNsPayload
                do throws(APNsRejection) {
                    payload = try APNsPayload.parse(data, name: label)
                } catch {
                    var message = error.message
                    if error.kind == .payloadEmpty, message.contains("no \"aps\" key") {
                        message += " (a VoIP payload needs none: apphost push --type voip ...)"
                    }
                    throw ModeInput.dataError(message)
                }
                guard let written = argumentTarget ?? payload.target else {
                    throw ModeInput.noPushTarget(source, misspelled: payload.misspelledTarget)
                }
                for warning in payload.warnings {
                    FileHandle.standardError.write(Data("apphost: warning: \(label): \(warning)\n".utf8))
                }
                if argumentTarget == nil { _ = try ModeInput.bundleID(written, from: "\(label): \"\(APNsPayload.targetKey)\"") }
                let target = try ModeInput.bundleID(try matchTeamPrefixed(written))
                let pushType = kind?.rawValue ?? payload.inferredPushType
                if pushType == "background" {
                    if priority == 10 {
                        throw ModeInput.usage("--priority 10 with a background push: APNs refuses it; background pushes are sent at --priority 5")
                    }
                    if !payload.contentAvailable {
                        FileHandle.standardError.write(Data("apphost: note: a background push without \"content-available\": 1 in \"aps\" does not wake the app\n".utf8))
                    }
                }
                request = .push(PushRequest(bundleIdentifier: target, payload: payload.json, pushType: pushType, priority: priority,
                                            collapseID: collapseID, apnsID: apnsID, source: "cli"))
                let delivery: String
                switch (payload.contentAvailable, payload.isVisible) {
                case (true, false): delivery = "silent: content-available, nothing shown; wakes the app in the background"
                case (true, true): delivery = "visible, with content-available: shown, and the app is woken in the background"
                case (false, true): delivery = "visible: shown to the user; the app is not woken"
                case (false, false): delivery = "nothing shown and no content-available: the app is not woken"
                }
                preview = ModeInput.pushPreview(
                    target: target.rawValue, targetNote: ModeInput.targetNote(argument: argumentTarget, payload: payload.target)
                        + ModeInput.teamPrefixNote(written, matched: target.rawValue, dryRun: dryRun),
                    type: pushType, typeNote: kind == nil ? "inferred from the payload" : "--type",
                    priority: priority, collapseID: collapseID, apnsID: apnsID,
                    delivery: delivery, alert: payload.summary, size: data.count, limit: APNsPayload.maximumSize)
            }
            if dryRun {
                print(preview)
                return
            }
            try state.perform(.mode(request))
        }

        /// `written` itself, or, when it carries a team ID prefix (`ABCDE12345.com.example.app`,
        /// an application identifier as provisioning profiles write it) and only the id
        /// without it is installed on the host, that id, with a note on standard error.
        /// With --dry-run (no host asked) `written` is kept and the preview says what a host does.
        func matchTeamPrefixed(_ written: String) throws -> String {
            guard !dryRun, let stripped = ModeInput.withoutTeamPrefix(written) else { return written }
            let installed = try state.client.collect(.list) { r -> String? in
                if case .app(let app) = r { return app.bundleIdentifier.rawValue }
                return nil
            }
            guard !installed.contains(written), installed.contains(stripped) else { return written }
            let team = written.prefix(written.count - stripped.count - 1)
            FileHandle.standardError.write(Data("apphost: note: \"\(written)\" starts with the team ID \(team) (an application identifier); pushing to the installed \(stripped)\n".utf8))
            return stripped
        }
    }
}

extension ModeInput {
    /// APNs' limit for `apns-collapse-id`.
    static let collapseIDLimit = 64

    /// `[<bundle-id>] <payload-file|->`: the bundle id given (if any) and the payload source.
    static func pushOperands(_ first: String?, _ second: String?) throws(CLIError) -> (bundleIdentifier: String?, source: String) {
        switch (first, second) {
        case (let id?, let source?): return (id, source)
        case (let source?, nil): return (nil, source)
        default: throw usage("give a payload: apphost push [<bundle-id>] <payload-file|->")
        }
    }

    /// `--type`: nil (infer from the payload), or one AppHost delivers.
    static func pushKind(_ type: String?) throws(CLIError) -> AppHostCommand.Push.Kind? {
        guard let type else { return nil }
        if let kind = AppHostCommand.Push.Kind(rawValue: type.lowercased()) { return kind }
        if AppHostCommand.Push.otherAPNsTypes.contains(type.lowercased()) {
            throw usage("--type \(type): AppHost does not deliver \(type) pushes; it delivers alert, background and voip")
        }
        throw usage("--type \(type): unknown push type; one of alert, background, voip")
    }

    /// The `"Simulator Target Bundle"` of a JSON payload, if it has one.
    static func payloadTarget(_ text: String) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
              let target = object[APNsPayload.targetKey] as? String, !target.isEmpty else { return nil }
        return target
    }

    /// Neither an argument nor the payload names the app. `misspelled`: a key of the
    /// payload that looks like a misspelled `"Simulator Target Bundle"`.
    static func noPushTarget(_ source: String, misspelled: String? = nil) -> CLIError {
        let label = source == "-" ? "standard input" : source
        let hint = misspelled.map { " (\(label) has \"\($0)\", which simctl does not read: did you mean \"\(APNsPayload.targetKey)\"?)" } ?? ""
        return usage("no app to push to\(hint): give a bundle id (apphost push <bundle-id> \(source)) or put \"\(APNsPayload.targetKey)\": \"<bundle-id>\" in \(label)")
    }

    /// `com.example.app` for `ABCDE12345.com.example.app`: the id without a leading Apple
    /// team ID (10 characters, upper-case letters and digits, at least one digit); nil
    /// when `id` has no such prefix.
    static func withoutTeamPrefix(_ id: String) -> String? {
        let parts = id.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[1].isEmpty, parts[0].count == 10,
              parts[0].allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) }),
              parts[0].contains(where: \.isNumber) else { return nil }
        return String(parts[1])
    }

    /// For --dry-run's target line: what a host does with a team ID prefix.
    static func teamPrefixNote(_ written: String, matched: String, dryRun: Bool) -> String {
        guard let stripped = withoutTeamPrefix(written) else { return "" }
        if matched == stripped { return "; \"\(written)\" without its team ID prefix" }
        return dryRun ? "; it starts with a team ID: a host with \(stripped) installed, and not \(written), delivers to \(stripped)" : ""
    }

    /// Where the target came from, for --dry-run.
    static func targetNote(argument: String?, payload: String?) -> String {
        switch (argument, payload) {
        case (.some, .some(let p)) where p != argument: "the argument; it overrides the payload's \"\(p)\""
        case (.some, _): "the argument"
        case (nil, _): "the payload's \"\(APNsPayload.targetKey)\""
        }
    }

    /// What `push --dry-run` prints.
    static func pushPreview(target: String, targetNote: String, type: String, typeNote: String, priority: Int?,
                            collapseID: String?, apnsID: String?, delivery: String, alert: String?, size: Int, limit: Int) -> String {
        var rows: [(String, String)] = [
            ("target", "\(target) (\(targetNote))"),
            ("push type", "\(type) (\(typeNote))"),
        ]
        if type != "voip" {
            rows.append(("priority", priority.map(String.init) ?? "not set (APNs takes 10)"))
            if let collapseID { rows.append(("collapse id", collapseID)) }
            if let apnsID { rows.append(("apns id", apnsID)) }
        }
        rows.append(("delivery", delivery))
        if let alert { rows.append(("alert", "\"\(alert)\"")) }
        rows.append(("size", "\(size) of \(limit) bytes"))
        let width = rows.map(\.0.count).max() ?? 0
        let lines = rows.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }
        return (["dry run: nothing sent"] + lines).joined(separator: "\n")
    }
}
