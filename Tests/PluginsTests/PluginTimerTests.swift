import AppHostProtocol
import Plugins
import Testing

/// A plugin that starts a timer, pretending to belong to another mode, and says which
/// of its timers fired.
private struct TimerStub: BackgroundModePlugin {
    var mode: BackgroundMode { .audio }
    var emulation: ModeEmulation { .emulated }
    var summary: String { "timer stub" }

    func handle(_ command: ModeCommand, in ctx: ModeContext) throws(ModeCommandError) -> String? {
        ctx.emit(.startTimer(app: "a", timer: PluginTimer(.fetch, "budget/7"), after: .seconds(3)))
        return "started"
    }

    func timerFired(_ name: String, app: BundleID?, in ctx: ModeContext) {
        ctx.emit(.note(app: app, "fired \(name)"))
    }
}

/// Plugin timers are routed by their mode, never by parsing a name.
@Suite struct PluginTimerTests {
    @Test func describesAsModeSlashName() {
        #expect(PluginTimer(.remoteNotification, "budget/1").description == "remote-notification/budget/1")
        #expect(PluginTimer(.fetch, "tick") != PluginTimer(.processing, "tick"))
    }

    /// The hub stamps the emitting plugin's mode: a plugin only ever owns its own timers.
    @Test func hubStampsThePluginsMode() {
        let h = ModeHub(plugins: [TimerStub()], profile: .default)
        let (answer, fx) = h.command(.privacy(action: .reset, service: .all, bundleIdentifier: nil), at: .zero)
        #expect((try? answer.get()) == "started")
        #expect(fx == [.startTimer(app: "a", timer: PluginTimer(.audio, "budget/7"), after: .seconds(3))])
    }

    /// The plugin of the timer's mode hears its own name, slashes and all; a timer of a
    /// mode no plugin has goes nowhere.
    @Test func firedTimersReachTheirPluginByMode() {
        let h = ModeHub(plugins: [TimerStub()], profile: .default)
        #expect(h.timerFired(PluginTimer(.audio, "warn/t.clean"), app: "a", at: .seconds(1)) == [.note(app: "a", "fired warn/t.clean")])
        #expect(h.timerFired(PluginTimer(.voip, "report"), app: "a", at: .seconds(1)).isEmpty)
    }
}
