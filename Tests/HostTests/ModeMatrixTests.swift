import AppHostProtocol
import AppHostSystem
import Foundation
import Plugins
import TestSupport
import Testing
@testable import Host

#if canImport(Glibc)
import Glibc
#endif

/// One row of the enforcement matrix: a mode, declared or not, the app in the
/// foreground or sent home, and what the host must do.
struct MatrixCase: Sendable, CustomTestStringConvertible {
    var mode: BackgroundMode
    var declared: Bool
    var background: Bool
    var expected: String

    init(_ mode: BackgroundMode, _ declared: Bool, _ background: Bool, _ expected: String) {
        self.mode = mode
        self.declared = declared
        self.background = background
        self.expected = expected
    }

    var testDescription: String {
        "\(mode.rawValue) \(declared ? "declared" : "undeclared") \(background ? "background" : "foreground") → \(expected)"
    }
}

/// The whole enforcement matrix, every emulated or registered mode × (declared, not
/// declared) × (foreground, background), against real probe processes on the
/// virtual clock. Each case has a host of its own. The app runs the same script
/// whether it declares the mode or not (location: it sets
/// `allowsBackgroundLocationUpdates` only when declared, since doing so without the
/// mode is a programmer error that kills it, tested on its own below).
@Suite("Enforcement matrix", .tags(.process, .virtualClock), .timeLimit(.minutes(3)), .enabled(if: probeBuilt, "sample apps not built: run `swift build` first (scripts/test.sh does)"))
struct ModeMatrixTests {
    static let table: [MatrixCase] = [
        .init(.audio, true, false, "plays"),
        .init(.audio, false, false, "plays"),
        .init(.audio, true, true, "keeps running while playing, suspended once idle"),
        .init(.audio, false, true, "interrupted, suspended"),

        .init(.location, true, false, "receives fixes"),
        .init(.location, false, false, "receives fixes"),
        .init(.location, true, true, "keeps running, receives fixes"),
        .init(.location, false, true, "suspended, no fixes"),

        .init(.voip, true, false, "push delivered, call reported"),
        .init(.voip, false, false, "push refused"),
        .init(.voip, true, true, "woken by the push, kept running by the call"),
        .init(.voip, false, true, "push refused, stays suspended"),

        .init(.bluetoothCentral, true, false, "notification delivered"),
        .init(.bluetoothCentral, false, false, "notification delivered"),
        .init(.bluetoothCentral, true, true, "woken by the notification, suspended again"),
        .init(.bluetoothCentral, false, true, "stays suspended, notification not delivered"),

        .init(.bluetoothPeripheral, true, false, "advertising"),
        .init(.bluetoothPeripheral, false, false, "advertising"),
        .init(.bluetoothPeripheral, true, true, "suspended, still advertising"),
        .init(.bluetoothPeripheral, false, true, "suspended, advertising paused"),

        .init(.externalAccessory, true, false, "bytes delivered"),
        .init(.externalAccessory, false, false, "bytes delivered"),
        .init(.externalAccessory, true, true, "woken for the bytes, suspended again"),
        .init(.externalAccessory, false, true, "stays suspended, bytes not delivered"),

        // Declaring them keeps nothing running by itself: they wake or launch an app
        // for a fetch, a task or a push (BackgroundWorkTests), then it is suspended.
        .init(.fetch, true, false, "active"),
        .init(.fetch, false, false, "active"),
        .init(.fetch, true, true, "suspended"),
        .init(.fetch, false, true, "suspended"),
        .init(.remoteNotification, true, false, "active"),
        .init(.remoteNotification, false, false, "active"),
        .init(.remoteNotification, true, true, "suspended"),
        .init(.remoteNotification, false, true, "suspended"),
        .init(.processing, true, false, "active"),
        .init(.processing, false, false, "active"),
        .init(.processing, true, true, "suspended"),
        .init(.processing, false, true, "suspended"),
    ]

    @Test("the table covers every mode that has a plugin rule")
    func tableIsComplete() {
        for plugin in ModeRegistry.all {
            if case .notEmulated = plugin.emulation { continue }
            for declared in [true, false] {
                for background in [true, false] {
                    #expect(Self.table.contains { $0.mode == plugin.mode && $0.declared == declared && $0.background == background },
                            "\(plugin.mode.rawValue) declared=\(declared) background=\(background)")
                }
            }
        }
    }

    @Test(arguments: table)
    func enforcement(_ row: MatrixCase) async throws {
        let (outcome, log) = try await withHost(label: "mx", clock: .virtual) { host in
            let world = MatrixWorld(host: host, row: row)
            let outcome = try await world.run()
            return (outcome, world.log())
        }
        #expect(outcome == row.expected, "app log:\n\(log)")
    }

    @Test func allowsBackgroundLocationUpdatesWithoutTheModeAbortsWithAReport() async throws {
        try await withHost(label: "mxl", clock: .virtual) { host in
            let id = try await host.installProbe("com.matrix.loc.error")
            _ = try await host.supervisor.modeCommand(.privacy(action: .grant, service: .service(.locationAlways), bundleIdentifier: id))
            do {
                _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "location-background:on"])
            } catch {
                // Aborted inside didFinishLaunching: the launch fails, as it should.
            }
            try await host.waitUntil(id, is: .notRunning)
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.exception?.name == .internalInconsistency)
            #expect(report.reason.contains("CLClientIsBackgroundable"))
            #expect(report.exceptionType == "EXC_CRASH (SIGABRT)")
            let refused = await host.events(id).filter { $0.kind == .modeRefused }
            #expect(refused.map(\.mode) == [.location])
        }
    }

    /// A delegate that blocks (never returns, never reports): callservicesd's check.
    @Test func anUnreportedVoIPPushKillsWithBaadca11() async throws {
        try await withHost(label: "mxv", clock: .virtual) { host in
            let id = try await host.installProbe("com.matrix.voip.bad", extra: ["UIBackgroundModes": ["voip"]])
            _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "voip-push", "block:forever"])
            try await host.supervisor.background(id)
            _ = try await host.supervisor.advanceClock(by: .zero)
            #expect(try await host.supervisor.status(id).first?.state == .suspended)
            _ = try await host.supervisor.modeCommand(.voipPush(bundleIdentifier: id, payload: #"{"caller":"bob"}"#))
            _ = await host.waitForEvent(id) { $0.kind == .service && $0.cause.contains("didReceiveIncomingPush") }
            _ = try await host.supervisor.advanceClock(by: .seconds(6))
            #expect(try await host.supervisor.status(id).first?.state == .background, "alive (blocked in its delegate) inside the report window")
            _ = try await host.supervisor.advanceClock(by: .seconds(1))
            #expect(try await host.supervisor.status(id).first?.state == .notRunning)
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.terminationCode == "0xbaadca11")
            #expect(report.terminationNamespace == "FRONTBOARD")
        }
    }

    @Test func aVoIPPushLaunchesATerminatedAppInTheBackground() async throws {
        try await withHost(label: "mxw", clock: .virtual) { host in
            let id = try await host.installProbe("com.matrix.voip.launch", extra: ["UIBackgroundModes": ["voip"]])
            _ = try await host.supervisor.modeCommand(.voipPush(bundleIdentifier: id, payload: "{}"))
            // The probe reports nothing: PushKit's check ends it as its delegate returns
            // (no `callback` event: the delegate never returned to the host).
            _ = await host.waitForEvent(id) { $0.kind == .exited }
            let launch = await host.events(id).first { $0.kind == .transition }
            #expect(launch?.to == .background)
            #expect(launch?.cause.contains("didReceiveIncomingPush") == true)
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.exceptionType == "EXC_CRASH (SIGABRT)")
            #expect(report.exception?.name == .internalInconsistency)
        }
    }
}

/// Runs one matrix row: installs a probe declaring (or not) the mode, drives it and
/// the world, and says what happened in the row's words.
struct MatrixWorld {
    let host: TestHost
    let row: MatrixCase
    var supervisor: Supervisor { host.supervisor }
    var id: BundleID { "com.matrix.\(row.mode.rawValue).\(row.declared ? "d" : "u").\(row.background ? "bg" : "fg")" }

    func log() -> String {
        (try? String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)) ?? "(no log)"
    }

    func state() async throws -> AppState? { try await supervisor.status(id).first?.state }
    func activities() async throws -> [String] { try await supervisor.status(id).first?.activities ?? [] }

    func returned(_ callback: String) async {
        _ = await host.waitForEvent(id) { $0.callback == callback }
    }

    func hasReturned(_ callback: String) async -> Bool {
        await host.events(id).contains { $0.callback == callback }
    }

    /// Home button, then everything settles (callbacks returned, stop confirmed).
    func goHome() async throws {
        try await supervisor.background(id)
        await returned("didEnterBackground")
        _ = try await supervisor.advanceClock(by: .zero)
    }

    func settle(_ seconds: Int = 0) async throws {
        _ = try await supervisor.advanceClock(by: .seconds(seconds))
    }

    /// The mode command's message, or "refused: ..." if the host refused it.
    func command(_ c: ModeCommand) async -> String {
        do { return try await supervisor.modeCommand(c) } catch { return "refused: \(error)" }
    }

    func install(extra: [String: Any] = [:]) async throws {
        var keys = extra
        if row.declared { keys["UIBackgroundModes"] = [row.mode.rawValue] }
        try await host.installProbe(id, extra: keys)
    }

    func launch(_ arguments: [String], extra: [String: Any] = [:], installed: Bool = false) async throws {
        if !installed { try await install(extra: extra) }
        _ = try await supervisor.launch(id, background: false, arguments: arguments)
        await returned("didBecomeActive")
    }

    func run() async throws -> String {
        switch row.mode {
        case .audio: return try await audio()
        case .location: return try await location()
        case .voip: return try await voip()
        case .bluetoothCentral: return try await central()
        case .bluetoothPeripheral: return try await peripheral()
        case .externalAccessory: return try await accessory()
        default: return try await registeredOnly()
        }
    }

    func audio() async throws -> String {
        try await launch(["--on", "active", "audio-play:30"])
        guard log().contains("[ProbeApp] audio-play: ok") else { return "play failed" }
        let wav = host.dir.path + "/containers/\(id)/Library/Audio/output-1.wav"
        let size = (try? FileManager.default.attributesOfItem(atPath: wav)[.size] as? Int) ?? 0
        guard size == 44 + 30 * 8000 * 2 else { return "sink holds \(size) bytes" }
        guard row.background else { return "plays" }
        try await goHome()
        if row.declared {
            guard try await state() == .background, try await activities() == ["audio playback"] else {
                return "not kept running: \(try await state().map { $0.rawValue } ?? "?")"
            }
            try await settle(35)  // 30 s of frames + 5 s: still inside the idle grace
            guard try await state() == .background else { return "suspended while playing" }
            try await settle(10)
            return try await state() == .suspended ? "keeps running while playing, suspended once idle" : "never suspended"
        }
        let interrupted = await hasReturned("audioInterruption(began)")
        let s = try await state()
        return interrupted && s == .suspended ? "interrupted, suspended" : "interrupted=\(interrupted) state=\(s.map { $0.rawValue } ?? "?")"
    }

    func location() async throws -> String {
        try await install()
        _ = await command(.privacy(action: .grant, service: .service(.locationAlways), bundleIdentifier: id))
        var script = ["--on", "active", "location-auth:always", "--on", "active", "location-start"]
        if row.declared { script += ["--on", "active", "location-background:on"] }
        try await launch(script, installed: true)
        guard log().contains("location-start: ok") else { return "start failed" }
        if row.background {
            try await goHome()
            if row.declared, try await state() != .background { return "suspended despite the mode" }
        }
        _ = await command(.locationSet(LocationFix(latitude: 59.33, longitude: 18.06)))
        try await settle(60)
        let got = log().contains("[ProbeApp] location 59.33,18.06")
        let s = try await state()
        switch (row.background, got, s) {
        case (false, true, .active?): return "receives fixes"
        case (true, true, .background?): return "keeps running, receives fixes"
        case (true, false, .suspended?): return "suspended, no fixes"
        default: return "fix \(got ? "delivered" : "not delivered"), state \(s.map { $0.rawValue } ?? "?")"
        }
    }

    func voip() async throws -> String {
        try await launch(["--on", "launch", "voip-register", "--on", "voip-push", "report-call"])
        if row.background {
            try await goHome()
            guard try await state() == .suspended else { return "not suspended before the push" }
        }
        let answer = await command(.voipPush(bundleIdentifier: id, payload: #"{"caller":"alice"}"#))
        if answer.hasPrefix("refused") {
            try await settle(30)
            let s = try await state()
            return row.background ? (s == .suspended ? "push refused, stays suspended" : "push refused, state \(s?.rawValue ?? "?")")
                : "push refused"
        }
        await returned("didReceiveIncomingPush(voIP)")
        guard log().contains("reporting call"), try await activities().contains(where: { $0.hasPrefix("VoIP call") }) else {
            return "no call reported"
        }
        if !row.background { return "push delivered, call reported" }
        try await settle(60)
        return try await state() == .background ? "woken by the push, kept running by the call" : "not kept running"
    }

    func central() async throws -> String {
        _ = await command(.bleAdd(BLEPeripheral(id: "hr", name: "HR", services: ["180D"])))
        try await host.installProbe(id, extra: row.declared ? ["UIBackgroundModes": [row.mode.rawValue]] : [:])
        _ = try await supervisor.launch(id, background: false, arguments: ["--on", "active", "ble-scan:180D", "--on", "active", "ble-connect:hr"])
        await returned("didConnect(hr)")
        if row.background {
            try await goHome()
            guard try await state() == .suspended else { return "BLE kept the app running" }
        }
        _ = await command(.bleNotify(peripheral: "hr", characteristic: "2a37", value: Data("72".utf8)))
        try await settle()
        let got = await hasReturned("didUpdateValue(hr 2A37)")
        let s = try await state()
        switch (row.background, got, s) {
        case (false, true, _): return "notification delivered"
        case (true, true, .suspended?): return "woken by the notification, suspended again"
        case (true, false, .suspended?): return "stays suspended, notification not delivered"
        default: return "notification \(got ? "delivered" : "not delivered"), state \(s.map { $0.rawValue } ?? "?")"
        }
    }

    func peripheral() async throws -> String {
        try await launch(["--on", "active", "ble-advertise:FFF0"])
        guard log().contains("ble-advertise: ok") else { return "advertise failed" }
        if row.background { try await goHome() }
        let list = await command(.bleList)
        let advertising = list.contains("app:\(id) \"ProbeApp\" services FFF0")
        let paused = list.contains("app:\(id) (advertising paused")
        let s = try await state()
        switch (row.background, advertising, paused, s) {
        case (false, true, false, .active?): return "advertising"
        case (true, true, false, .suspended?): return "suspended, still advertising"
        case (true, false, true, .suspended?): return "suspended, advertising paused"
        default: return "advertising=\(advertising) paused=\(paused) state=\(s.map { $0.rawValue } ?? "?")\n\(list)"
        }
    }

    func accessory() async throws -> String {
        let proto = "com.acme.matrix"
        try await launch([], extra: ["UISupportedExternalAccessoryProtocols": [proto]])
        if row.background {
            try await goHome()
            guard try await state() == .suspended else { return "not suspended" }
        }
        _ = await command(.accessoryConnect(name: "Printer", protocols: [proto]))
        try await settle()
        _ = await command(.accessorySend(protocolString: proto, bytes: Data("hi".utf8)))
        try await settle()
        let got = await hasReturned("EASession(Printer \(proto)) 2 bytes")
        let s = try await state()
        switch (row.background, got, s) {
        case (false, true, .active?): return "bytes delivered"
        case (true, true, .suspended?): return "woken for the bytes, suspended again"
        case (true, false, .suspended?): return "stays suspended, bytes not delivered"
        default: return "bytes \(got ? "delivered" : "not delivered"), state \(s.map { $0.rawValue } ?? "?")"
        }
    }

    func registeredOnly() async throws -> String {
        try await launch([], extra: row.mode == .processing ? ["BGTaskSchedulerPermittedIdentifiers": ["com.matrix.task"]] : [:])
        if row.background {
            try await goHome()
            try await settle(60)
        }
        return try await state()?.rawValue ?? "?"
    }
}
