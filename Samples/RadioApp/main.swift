// RadioApp: plays a tune through the host's audio session (AudioSession, category
// playback) for `--seconds N` (default 20), then stops. The sound goes in chunks of
// two seconds, the next one queued from a main-queue timer shortly before the
// previous one runs out, so playback is continuous while it lasts. With `audio` in
// UIBackgroundModes (manifests/Radio.app) it keeps running in the background while
// it plays and is suspended about `audioIdle` after it stops; without the mode
// (the demo's Mute.app) going home interrupts it and it is suspended at once.
import AppKitLess
import Foundation

/// Parses `--seconds N` from the launch arguments; exits 64 on anything else.
func playSeconds(from arguments: [String]) -> Double {
    var seconds = 20.0
    var rest = arguments[...]
    while let argument = rest.popFirst() {
        if argument == "--seconds", let value = rest.popFirst(), let n = Double(value), n > 0, n.isFinite {
            seconds = n
        } else {
            FileHandle.standardError.write(Data("RadioApp: usage: RadioApp [--seconds N] (got \(arguments))\n".utf8))
            exit(64)
        }
    }
    return seconds
}

/// The tune: four notes of half a second each, looped, as 16-bit mono PCM at 8 kHz.
enum Tune {
    static let sampleRate = 8_000
    static let notes: [(name: String, hertz: Double)] = [("C5", 523.25), ("E5", 659.26), ("G5", 783.99), ("C6", 1046.50)]
    static let samplesPerNote = sampleRate / 2
    /// A 10 ms fade at both ends of each note, so the steps between notes do not click.
    static let fade = sampleRate / 100

    /// Samples `start..<start + count` of the endless tune.
    static func samples(from start: Int, count: Int) -> [Int16] {
        (start..<start + count).map { i in
            let note = notes[(i / samplesPerNote) % notes.count]
            let offset = i % samplesPerNote
            let envelope = min(1, Double(min(offset, samplesPerNote - 1 - offset)) / Double(fade))
            let value = sin(2 * Double.pi * note.hertz * Double(i) / Double(sampleRate)) * envelope * 0.3
            return Int16(value * Double(Int16.max))
        }
    }

    static var description: String { notes.map(\.name).joined(separator: " ") }
}

/// Feeds the tune to the audio session chunk by chunk until `total` samples have been queued.
@MainActor
final class Player {
    let totalSamples: Int
    let chunkSamples = 2 * Tune.sampleRate
    /// How long before the queued sound runs out the next chunk is queued.
    let lead = 0.5

    private let session = AudioSession.shared
    private(set) var queuedSamples = 0
    private var playing = false
    /// When the sound queued so far runs out (as the host counts it).
    private var playsUntil = DispatchTime.now()
    /// Bumped to cancel the pending timer (stop, interruption).
    private var generation = 0

    init(seconds: Double) {
        totalSamples = Int((seconds * Double(Tune.sampleRate)).rounded())
        session.interruptionHandler = { [weak self] began, reason in
            self?.interruption(began: began, reason: reason)
        }
    }

    /// Activates the session and starts (or resumes) playing what is left.
    func start() {
        guard !playing, queuedSamples < totalSamples else { return }
        do {
            try session.setActive(true, category: "playback")
        } catch {
            log("could not activate the audio session: \(error)")
            return
        }
        playing = true
        playsUntil = .now()
        queueNext()
    }

    /// Stops playing and deactivates the session.
    func stop() {
        generation += 1
        playing = false
        session.stop()
        log("stopped after \(format(queuedSamples)) s")
    }

    private func queueNext() {
        let count = min(chunkSamples, totalSamples - queuedSamples)
        let from = queuedSamples
        do {
            try session.play(samples: Tune.samples(from: from, count: count), sampleRate: Tune.sampleRate)
        } catch {
            log("play refused: \(error)")
            generation += 1
            playing = false
            return
        }
        queuedSamples += count
        playsUntil = max(playsUntil, .now()) + Double(count) / Double(Tune.sampleRate)
        log("playing \(Tune.description), \(format(from))-\(format(queuedSamples)) s of \(format(totalSamples)) s (16-bit, \(Tune.sampleRate) Hz)")
        if queuedSamples >= totalSamples {
            after(playsUntil) { $0.stop() }
        } else {
            after(playsUntil - lead) { $0.queueNext() }
        }
    }

    private func interruption(began: Bool, reason: String) {
        if began {
            generation += 1
            playing = false
            log("interruption began: \(reason)")
        } else {
            log("interruption ended: \(reason)")
            start()
        }
    }

    /// Runs `work` on the main queue at `deadline` unless cancelled by then.
    private func after(_ deadline: DispatchTime, _ work: @escaping @Sendable @MainActor (Player) -> Void) {
        let generation = self.generation
        DispatchQueue.main.asyncAfter(deadline: deadline) { [weak self] in
            MainActor.assumeIsolated {
                guard let self, self.generation == generation else { return }
                work(self)
            }
        }
    }

    private func format(_ samples: Int) -> String {
        String(format: "%g", Double(samples) / Double(Tune.sampleRate))
    }
}

/// Starts the tune on launch and logs every callback.
final class RadioDelegate: ApplicationDelegate {
    let seconds: Double
    private var player: Player?

    init(seconds: Double) {
        self.seconds = seconds
    }

    func didFinishLaunching(_ application: Application, options: LaunchOptions) -> Bool {
        log("didFinishLaunching state=\(application.applicationState)")
        let player = Player(seconds: seconds)
        self.player = player
        player.start()
        return true
    }
    func willResignActive(_ application: Application) { log("willResignActive state=\(application.applicationState)") }
    func didEnterBackground(_ application: Application) { log("didEnterBackground state=\(application.applicationState)") }
    func willEnterForeground(_ application: Application) { log("willEnterForeground state=\(application.applicationState)") }
    func didBecomeActive(_ application: Application) { log("didBecomeActive state=\(application.applicationState)") }
    func willTerminate(_ application: Application) { log("willTerminate state=\(application.applicationState)") }
}

/// Prints `[RadioApp] <line>` and flushes (stdout is the app's log file).
func log(_ line: String) {
    print("[RadioApp] \(line)")
    fflush(nil)
}

ApplicationMain(delegate: RadioDelegate(seconds: playSeconds(from: Array(CommandLine.arguments.dropFirst()))))
