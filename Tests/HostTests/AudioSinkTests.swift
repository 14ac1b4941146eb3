import AppHostProtocol
import Foundation
import HostConfig
import TestSupport
import Testing
@testable import Host

/// Where an app's audio goes: a valid WAV file in its container, or nowhere.
@Suite("Audio sink", .tags(.process, .virtualClock), .timeLimit(.minutes(2)), .enabled(if: probeBuilt, "sample apps not built: run `swift build` first (scripts/test.sh does)"))
struct AudioSinkTests {
    func le32(_ d: Data, _ at: Int) -> UInt32 { d[at..<at + 4].enumerated().reduce(0) { $0 | UInt32($1.element) << (8 * $1.offset) } }

    @Test func theWAVSinkWritesAValidFileInTheContainer() async throws {
        let data = try await withHost(label: "wav", clock: .virtual) { host in
            let id = try await host.installProbe("com.sink.wav")
            _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "audio-play:1", "--on", "launch", "audio-stop"])
            let path = host.dir.path + "/containers/\(id)/Library/Audio/output-1.wav"
            return try Data(contentsOf: URL(fileURLWithPath: path))
        }
        #expect(String(decoding: data[0..<4], as: UTF8.self) == "RIFF")
        #expect(String(decoding: data[8..<16], as: UTF8.self) == "WAVEfmt ")
        #expect(le32(data, 24) == 8000, "sample rate")
        #expect(le32(data, 40) == 16_000, "1 s of 16-bit mono at 8 kHz")
        #expect(le32(data, 4) == UInt32(data.count - 8), "RIFF size matches the file")
    }

    @Test func theNullSinkWritesNothingButTheRulesStillApply() async throws {
        try await withHost(label: "null", clock: .virtual, audioSink: .null) { host in
            let id = try await host.installProbe("com.sink.null", extra: ["UIBackgroundModes": ["audio"]])
            _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "audio-play:20"])
            try await host.supervisor.background(id)
            _ = try await host.supervisor.advanceClock(by: .seconds(5))
            #expect(try await host.supervisor.status(id).first?.activities == ["audio playback"])
            #expect(!FileManager.default.fileExists(atPath: host.dir.path + "/containers/\(id)/Library/Audio"))
        }
    }

    @Test func theConfigFileChoosesTheSink() throws {
        let dir = try TempDir("cfg")
        defer { dir.remove() }
        let file = dir.path + "/config.json"
        try Data(#"{"audioSink": "null"}"#.utf8).write(to: URL(fileURLWithPath: file))
        #expect(try HostConfigFile.load(path: file).audioSink == "null")
        try Data(#"{"audioSink": "speakers"}"#.utf8).write(to: URL(fileURLWithPath: file))
        #expect(throws: BudgetError.self) { try HostConfigFile.load(path: file) }
    }
}
