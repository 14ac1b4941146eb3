import AppHostProtocol
import Foundation

/// The app's audio session and player, like `AVAudioSession` with a tiny
/// `AVAudioPlayer`: activate a category, queue PCM, stop. One per process,
/// ``shared``. Audio keeps a backgrounded app running only with `audio` in
/// `UIBackgroundModes`; without it the host refuses to start audio in the
/// background and interrupts what plays when the app goes home.
///
/// Every call asks the host and blocks until it answers.
@MainActor
public final class AudioSession {
    /// The process's audio session.
    public static let shared = AudioSession(router: .shared)

    /// Most samples sent in one request, so each fits in one IPC frame (JSON
    /// carries the bytes as base64); longer sounds are sent in consecutive
    /// requests, which the host queues back to back.
    nonisolated static let maximumSamplesPerRequest = 256 * 1024

    /// Runs on the main queue when an interruption begins (`began` true, e.g. the
    /// app went home without the audio mode) or ends, with the host's reason;
    /// like observing `AVAudioSession.interruptionNotification`.
    public var interruptionHandler: (@MainActor (_ began: Bool, _ reason: String) -> Void)?

    /// Whether the session was activated and neither deactivated nor interrupted since.
    public private(set) var isActive = false

    /// The category of the last activation (`playback` until one is made).
    public private(set) var category = "playback"

    private let router: ServiceRouter

    init(router: ServiceRouter) {
        self.router = router
        router.register(self)
    }

    /// Activates the session with `category` (`playback`, `ambient`, ...), or
    /// deactivates it (which stops playback), like `AVAudioSession.setActive(_:)`.
    /// - Throws: ``ServiceError``, e.g. when activating in the background without the audio mode.
    public func setActive(_ active: Bool, category: String = "playback") throws(ServiceError) {
        if active {
            try router.requestOK(.audioActivate(category: category))
            self.category = category
            isActive = true
        } else {
            try router.requestOK(.audioStop)
            isActive = false
        }
    }

    /// Queues 16-bit mono PCM `samples` at `sampleRate` Hz for playback and returns
    /// once the host has queued them (playback goes on after that). Sounds longer
    /// than ``maximumSamplesPerRequest`` samples are sent in several requests; the
    /// first refusal stops there and is thrown.
    /// - Throws: ``ServiceError``, e.g. when playing in the background without the audio mode.
    public func play(samples: [Int16], sampleRate: Int) throws(ServiceError) {
        var start = samples.startIndex
        repeat {
            let end = min(start + Self.maximumSamplesPerRequest, samples.endIndex)
            try router.requestOK(.audioPlay(samples: Self.encode(samples[start..<end]), sampleRate: sampleRate))
            start = end
        } while start < samples.endIndex
    }

    /// Stops playback and deactivates the session; a failure is logged to stderr.
    public func stop() {
        router.requestLoggingFailure(.audioStop)
        isActive = false
    }

    /// 16-bit little-endian mono PCM, as the host takes it.
    nonisolated static func encode(_ samples: ArraySlice<Int16>) -> Data {
        let littleEndian = samples.map(\.littleEndian)
        return littleEndian.withUnsafeBytes { Data($0) }
    }

    /// An interruption event from the host.
    func interruption(began: Bool, reason: String) {
        if began { isActive = false }
        interruptionHandler?(began, reason)
    }
}
