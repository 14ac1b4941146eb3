import AppHostProtocol
import Foundation
import Plugins

/// Where apps' audio goes (`audioSink` in the host config).
public enum AudioSinkKind: String, Sendable, Codable, CaseIterable {
    /// A WAV file per audio session in the app's container (`Library/Audio/output-N.wav`).
    case wav
    /// Discarded (the session and its background rules still apply).
    case null
}

/// One audio session's WAV file: 16-bit mono PCM, the header's sizes rewritten after
/// every write so the file is valid at any moment (an app killed mid-song leaves a
/// playable file). A change of sample rate starts the next file.
final class AudioSink {
    private let directory: String
    private var handle: FileHandle?
    private var rate = 0
    private var dataBytes: UInt32 = 0
    private(set) var path: String?

    init(directory: String) {
        self.directory = directory
    }

    func write(_ samples: Data, sampleRate: Int) throws {
        if handle == nil || sampleRate != rate {
            close()
            try open(rate: sampleRate)
        }
        guard let handle else { return }
        try handle.seekToEnd()
        try handle.write(contentsOf: samples)
        dataBytes &+= UInt32(truncatingIfNeeded: samples.count)
        try handle.seek(toOffset: 4)
        try handle.write(contentsOf: le32(36 &+ dataBytes))
        try handle.seek(toOffset: 40)
        try handle.write(contentsOf: le32(dataBytes))
    }

    func close() {
        try? handle?.close()
        handle = nil
    }

    private func open(rate: Int) throws {
        let fm = FileManager.default
        try fm.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var n = 1
        while fm.fileExists(atPath: directory + "/output-\(n).wav") { n += 1 }
        let path = directory + "/output-\(n).wav"
        self.rate = rate
        dataBytes = 0
        var header = Data("RIFF".utf8) + le32(36) + Data("WAVE".utf8)
        header += Data("fmt ".utf8) + le32(16) + le16(1) + le16(1) + le32(UInt32(rate)) + le32(UInt32(rate * 2)) + le16(2) + le16(16)
        header += Data("data".utf8) + le32(0)
        guard fm.createFile(atPath: path, contents: header) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
        }
        handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        self.path = path
    }

    private func le32(_ v: UInt32) -> Data { withUnsafeBytes(of: v.littleEndian) { Data($0) } }
    private func le16(_ v: UInt16) -> Data { withUnsafeBytes(of: v.littleEndian) { Data($0) } }
}

/// The audio sinks of the apps with an open audio session, keyed by app.
struct AudioSinks {
    private var sinks: [BundleID: AudioSink] = [:]

    /// Carries out one audio effect of `app`, whose container is `container`.
    mutating func play(_ output: AudioOutput, app: BundleID, container: String) throws {
        switch output {
        case .open:
            if sinks[app] == nil { sinks[app] = AudioSink(directory: container + "/Library/Audio") }
        case .write(let samples, let rate):
            let sink = sinks[app] ?? AudioSink(directory: container + "/Library/Audio")
            sinks[app] = sink
            try sink.write(samples, sampleRate: rate)
        case .close:
            sinks.removeValue(forKey: app)?.close()
        }
    }
}
