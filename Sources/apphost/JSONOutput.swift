import AppHostProtocol
import ArgumentParser
import Foundation

/// Every `--json` output has one shape, an envelope:
///
///     {"version": 1, "kind": "status", "apps": [...]}
///
/// `version` is the version of that kind's schema (`docs/schemas/<kind>.schema.json`):
/// it changes only when a field is renamed, removed or changes meaning; new fields
/// may appear without a change (readers skip what they do not know). `kind` names the
/// output, and the payload sits under one key named after what it holds. `events
/// --json` prints one envelope per line (JSON Lines), each with one event.
enum JSONOutput: String, CaseIterable, Sendable {
    case status, list, install, reports, event, clock, profile, fetchSchedule, bgtaskList
    case settings, device, snapshot, switcher, manifest, listDevices, listapps, bleList, accessoryList

    /// The version of every kind's schema today.
    static let version = 1

    /// The key the payload is written under.
    var payloadKey: String {
        switch self {
        case .status, .list, .switcher, .listapps: "apps"
        case .listDevices: "devices"
        case .install: "app"
        case .reports: "reports"
        case .event: "event"
        case .clock: "clock"
        case .profile: "profiles"
        case .fetchSchedule: "schedule"
        case .bgtaskList: "tasks"
        case .settings: "settings"
        case .device: "device"
        case .snapshot: "snapshot"
        case .manifest: "manifest"
        case .bleList: "world"
        case .accessoryList: "accessories"
        }
    }

    /// Its schema's file name under `docs/schemas/`.
    var schemaFile: String { "\(rawValue).schema.json" }
}

/// The envelope around one payload; `extra` holds the few string fields a kind has
/// beside its payload (`profile`'s `source`).
struct JSONEnvelope<Payload: Encodable>: Encodable {
    var kind: JSONOutput
    var payload: Payload
    var extra: [String: String] = [:]

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ s: String) { stringValue = s }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(JSONOutput.version, forKey: Key("version"))
        try c.encode(kind.rawValue, forKey: Key("kind"))
        try c.encode(payload, forKey: Key(kind.payloadKey))
        for (k, v) in extra { try c.encode(v, forKey: Key(k)) }
    }
}

/// Prints `payload` in its envelope (pretty-printed, keys sorted).
func printJSON<T: Encodable>(_ kind: JSONOutput, _ payload: T, extra: [String: String] = [:]) throws {
    let data = try WireJSON.encoder(pretty: true).encode(JSONEnvelope(kind: kind, payload: payload, extra: extra))
    print(String(decoding: data, as: UTF8.self))
}

/// One line of JSON Lines output: the envelope on one line.
func jsonLine<T: Encodable>(_ kind: JSONOutput, _ payload: T) throws -> String {
    String(decoding: try WireJSON.encoder().encode(JSONEnvelope(kind: kind, payload: payload)), as: UTF8.self)
}

extension StateOptions {
    /// Asks the plugins a question whose answer is data (`--json` of the mode verbs).
    func query(_ query: ModeQuery) throws -> ModeAnswer {
        let r = try client.request(.modeQuery(query)).checked()
        guard case .modeAnswer(let answer) = r else { throw unexpected(r) }
        return answer
    }
}
