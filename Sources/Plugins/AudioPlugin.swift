import AppHostProtocol
import Foundation
import HostConfig

/// `audio`: an audio session to the host's sink. With the mode, a backgrounded app
/// that is playing keeps running; once it has stopped playing (or run out of
/// queued frames) for longer than the `audioIdle` budget, it is suspended. Without
/// the mode, going home interrupts its audio (an interruption callback) and it is
/// suspended; playing from the background is refused.
public struct AudioPlugin: BackgroundModePlugin {
    public init() {}
    public var mode: BackgroundMode { .audio }
    public var emulation: ModeEmulation { .emulated }
    public var summary: String { "play audio in the background (AVAudioSession, playback)" }
    public var services: [String] { ["AudioSession.setActive", "AudioSession.play", "AudioSession.stop"] }
    public var keepsRunning: [String] { ["playing audio (until idle for the audioIdle budget)"] }
    public var sandbox: SandboxGrant { SandboxGrant(devicePaths: ["/dev/snd", "/dev/dsp*", "/dev/audio*", "/dev/mixer*"]) }

    /// The activity name in the lifecycle.
    static let activity = "audio playback"

    struct Session: Sendable {
        var category: String?
        var playing = false
        /// Host time when the frames queued so far have been played.
        var playsUntil: Duration = .zero
        var interrupted = false
    }
    struct State: PluginState {
        var sessions: [BundleID: Session] = [:]
        init() {}
    }

    public func handle(_ request: ServiceRequest, from app: BundleID, in ctx: ModeContext) -> ServiceReply? {
        guard let info = ctx.apps[app] else { return nil }
        switch request {
        case .audioActivate(let category):
            if !info.isForeground && !info.declares(.audio) {
                ctx.emit(.refused(app: app, mode: mode, "AVAudioSession.setActive in the background"))
                return .refused(reason: "cannot activate an audio session in the background without \"audio\" in UIBackgroundModes")
            }
            ctx.update(State.self) { $0.sessions[app, default: Session()].category = category }
            ctx.emit(.audio(app: app, .open(category: category)))
            return .ok
        case .audioPlay(let samples, let rate):
            guard rate > 0, rate <= 384_000 else { return .refused(reason: "sample rate \(rate) Hz is out of range (1-384000)") }
            if !info.isForeground && !info.declares(.audio) {
                ctx.emit(.refused(app: app, mode: mode, "audio playback in the background"))
                return .refused(reason: "audio cannot play in the background without \"audio\" in UIBackgroundModes")
            }
            let seconds = Double(samples.count / 2) / Double(rate)
            let length = Duration.milliseconds(Int64((seconds * 1000).rounded(.up)))
            let wasPlaying = ctx.update(State.self) { state -> Bool in
                var s = state.sessions[app, default: Session()]
                let was = s.playing
                if s.category == nil {
                    s.category = "playback"
                }
                s.playing = true
                s.interrupted = false
                s.playsUntil = max(s.playsUntil, ctx.now) + length
                state.sessions[app] = s
                return was
            }
            let session = ctx.state(State.self).sessions[app] ?? Session()
            if !wasPlaying, session.category != nil { ctx.emit(.audio(app: app, .open(category: session.category ?? "playback"))) }
            ctx.emit(.audio(app: app, .write(samples: samples, sampleRate: rate)))
            if info.declares(.audio) {
                if !wasPlaying {
                    ctx.emit(.beginActivity(app: app, name: Self.activity))
                    ctx.emit(.used(app: app, mode: mode, "playing audio"))
                }
                // Kept running while frames last, then for the idle grace.
                ctx.emit(.startTimer(app: app, timer: PluginTimer(mode, "idle"), after: (session.playsUntil - ctx.now) + ctx.profile.duration(.audioIdle)))
            }
            return .ok
        case .audioStop:
            let was = ctx.update(State.self) { state -> Bool in
                let was = state.sessions[app]?.playing ?? false
                state.sessions[app]?.playing = false
                state.sessions[app]?.playsUntil = ctx.now
                return was
            }
            ctx.emit(.audio(app: app, .close))
            if was, info.declares(.audio) {
                ctx.emit(.startTimer(app: app, timer: PluginTimer(mode, "idle"), after: ctx.profile.duration(.audioIdle)))
            }
            return .ok
        default:
            return nil
        }
    }

    public func timerFired(_ name: String, app: BundleID?, in ctx: ModeContext) {
        guard name == "idle", let app, let session = ctx.state(State.self).sessions[app] else { return }
        guard !session.playing || session.playsUntil <= ctx.now else { return }
        ctx.update(State.self) { $0.sessions[app]?.playing = false }
        ctx.emit(.note(app: app, "no audio played for \(DurationText.format(ctx.profile[.audioIdle])): audio no longer keeps the app running"))
        ctx.emit(.endActivity(app: app, name: Self.activity))
    }

    public func appMoved(_ app: BundleID, from: AppState, to: AppState, in ctx: ModeContext) {
        guard let info = ctx.apps[app], let session = ctx.state(State.self).sessions[app] else { return }
        let wasForeground = from == .active || from == .inactive
        if wasForeground, to == .background, session.playing, session.playsUntil > ctx.now {
            if info.declares(.audio) {
                ctx.emit(.used(app: app, mode: mode, "audio keeps playing in the background"))
            } else {
                ctx.update(State.self) {
                    $0.sessions[app]?.playing = false
                    $0.sessions[app]?.interrupted = true
                }
                ctx.emit(.audio(app: app, .close))
                ctx.emit(.refused(app: app, mode: mode, "audio playback stopped on going home"))
                ctx.emit(.deliver(app: app, .audioInterruption(began: true, reason: "the app went to the background without \"audio\" in UIBackgroundModes"),
                                  wake: .ifRunning, because: "audio interrupted on going home"))
            }
        } else if to == .active, session.interrupted {
            ctx.update(State.self) { $0.sessions[app]?.interrupted = false }
            ctx.emit(.deliver(app: app, .audioInterruption(began: false, reason: "back in the foreground"), wake: .ifRunning,
                              because: "audio interruption ended"))
        }
    }

    public func appExited(_ app: BundleID, byUser: Bool, in ctx: ModeContext) {
        if ctx.state(State.self).sessions[app] != nil {
            ctx.update(State.self) { $0.sessions.removeValue(forKey: app) }
            ctx.emit(.audio(app: app, .close))
            ctx.emit(.cancelTimer(app: app, timer: PluginTimer(mode, "idle")))
        }
    }

    public func lint(_ app: LintSubject) -> [LintFinding] { [] }
}
