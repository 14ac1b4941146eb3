// libFuzzer target `mode-hub`: what an app asks the host for, through the background-mode
// plugins. The input is one message payload a line (JSON has no raw newlines; the
// framing itself is the `frame` target's, and length prefixes would break under most
// mutations), each decoded as an AppMessage; service requests go to a `ModeHub` holding two apps
// (one declaring every mode, one none), and the rest of the messages drive the world
// around them: lifecycle moves, user launches, time jumps, the app's handlers returning.
// Timers the plugins start fire on a virtual clock. `apphost` control commands
// (`.mode`) in ControlRequest frames go to the hub too. The harness checks nothing but
// that the hub survives: what the plugins compute from an app's numbers must not trap.
// Seeds (`APPHOST_FUZZ_MAKE_SEEDS=DIR harness`): one input per request in
// Fuzz/SeedMessages.swift, after moves that put the app in the background.
@testable import Plugins
@testable import AppHostProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

private let everything = SeedMessages.id("com.fuzz.all")
private let nothing = SeedMessages.id("com.fuzz.none")

private func makeApp(_ id: BundleID, modes: [BackgroundMode], state: AppState) -> ModeApp {
    var m = Manifest(bundleIdentifier: id.rawValue, executable: "X", name: "X", sourcePath: "/fuzz/\(id)/Info.plist")
    m.backgroundModes = modes
    if !modes.isEmpty {
        m.bgTaskIdentifiers = ["com.example.refresh", "com.example.db", "r"]
        m.externalAccessoryProtocols = ["com.acme.printer", "p"]
    }
    return ModeApp(bundleIdentifier: id, manifest: m, entitlements: modes.isEmpty ? [] : ["aps-environment"],
                   container: "/fuzz/containers/\(id)", state: state, isRunningCode: state != .suspended && state != .notRunning)
}

private struct World {
    let hub = ModeHub(profile: .default)
    var now = Duration.zero
    var states = [everything: AppState.background, nothing: AppState.active]
    var timers: [(at: Duration, app: BundleID?, timer: PluginTimer)] = []
    var budget = 400  // hub calls per input, so that timers restarting themselves end

    init() {
        for (id, state) in states {
            let app = makeApp(id, modes: id == everything ? BackgroundMode.allCases : [], state: state)
            _ = hub.install(app)
            _ = hub.appMoved(id, from: .notRunning, to: state, runningCode: app.isRunningCode, at: .zero)
        }
    }

    /// Applies what the host would: timers are kept, delivered events "return" at once.
    mutating func run(_ effects: [ModeEffect]) {
        for effect in effects {
            guard budget > 0 else { return }
            switch effect {
            case .startTimer(let app, let timer, let after):
                timers.append((now + after, app, timer))
            case .cancelTimer(let app, let timer):
                timers.removeAll { $0.app == app && $0.timer == timer }
            case .deliver(let app, let event, _, _):
                budget -= 1
                run(hub.callbackReturned(event, app: app, at: now))
            default:
                break
            }
        }
    }

    mutating func advance(to time: Duration) {
        while budget > 0, let next = timers.indices.min(by: { timers[$0].at < timers[$1].at }), timers[next].at <= time {
            let timer = timers.remove(at: next)
            now = max(now, timer.at)
            budget -= 1
            run(hub.timerFired(timer.timer, app: timer.app, at: now))
        }
        now = max(now, time)
    }

    mutating func move(_ id: BundleID, to state: AppState, byUser: Bool) {
        let from = states[id] ?? .notRunning
        guard from != state else { return }
        states[id] = state
        if state == .notRunning {
            run(hub.appExited(id, byUser: byUser, at: now))
        } else {
            run(hub.appMoved(id, from: from, to: state, runningCode: state != .suspended, at: now))
        }
    }

    mutating func handle(_ message: AppMessage, step: Int) {
        let app = step % 4 == 3 ? nothing : everything
        budget -= 1
        switch message {
        case .request(_, .service(let request)):
            run(hub.request(request, from: app, at: now).1)
        case .callbackReturned(let seq):
            move(app, to: AppState.allCases[Int(seq % UInt64(AppState.allCases.count))], byUser: seq & 8 != 0)
        case .beginBackgroundTask:
            run(hub.userLaunched(app, at: now))
        case .endBackgroundTask(let id):
            // A jump of up to a month: long enough for every budget and backoff.
            advance(to: now + .seconds(Int64(id.rawValue.magnitude % (31 * 86_400))))
        default:
            break
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ bytes: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = UnsafeBufferPointer(start: bytes, count: size)
    var world = World()
    var step = 0
    for line in input.split(separator: 0x0A) {
        guard world.budget > 0 else { break }
        let payload = Array(line)
        step += 1
        world.advance(to: world.now + .seconds(1))
        if let message = try? Frame.decode(AppMessage.self, from: payload) {
            world.handle(message, step: step)
        } else if case .mode(let command)? = try? Frame.decode(ControlRequest.self, from: payload) {
            world.budget -= 1
            world.run(world.hub.command(command, at: world.now).1)
        }
    }
    world.advance(to: world.now + .seconds(31 * 86_400))
    return 0
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<Int32>,
                           _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> Int32 {
    guard let seeds = seedRequest() else { return 0 }
    func lines<M: Encodable>(_ messages: [M]) -> Data {
        Data(messages.compactMap { try? Frame.encode($0).dropFirst(Frame.headerSize) + [0x0A] }.joined())
    }
    // Launched by the user, in front, then home: background with every mode.
    let moves: [AppMessage] = [.beginBackgroundTask(id: 1, name: nil), .callbackReturned(seq: 2), .callbackReturned(seq: 3)]
    var count = 0
    for (i, request) in SeedMessages.requests.enumerated() {
        let stream = moves + [.request(id: 1, request: .service(request)), .endBackgroundTask(id: 3600),
                              .callbackReturned(seq: 4), .endBackgroundTask(id: 86_400)]
        writeSeed(lines(stream), named: "request-\(i).jsonl", in: seeds.directory)
        count += 1
    }
    writeSeed(lines(moves + SeedMessages.requests.map { .request(id: 1, request: .service($0)) }), named: "all.jsonl", in: seeds.directory)
    writeSeed(lines(SeedMessages.control), named: "control.jsonl", in: seeds.directory)
    print("mode-hub: \(count + 2) seeds written")
    exit(0)
}
