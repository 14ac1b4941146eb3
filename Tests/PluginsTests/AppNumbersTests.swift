import AppHostProtocol
import Foundation
import Testing
@testable import Plugins

/// Numbers an app sends (seconds as `Double`, which JSON and `"inf"`/`"nan"` can make
/// anything) must not trap the host. Each of these killed it before: found while fuzzing
/// the plugins (`scripts/fuzz.sh mode-hub`); the inputs are in Fuzz/regressions/mode-hub.
@Suite("ModeHub with numbers from apps")
struct AppNumbersTests {
    func hub() -> ModeHub {
        makeHub([modeApp("a", modes: BackgroundMode.allCases, ids: ["a.task"], state: .background)])
    }

    /// Fires every timer the effects start, on the hub's clock, a few rounds deep.
    func fireTimers(_ h: ModeHub, _ effects: [ModeEffect], from now: Duration) {
        var pending = effects
        for _ in 0..<5 {
            var next: [ModeEffect] = []
            for case .startTimer(let app, let timer, let after) in pending {
                next += h.timerFired(timer, app: app, at: now + after)
            }
            pending = next
        }
    }

    @Test(arguments: [Double.infinity, -.infinity, .nan, -1])
    func aFetchIntervalThatIsNotANumberOfSecondsIsRefused(_ seconds: Double) {
        let h = hub()
        let (reply, effects) = h.request(.fetchSetMinimumInterval(.seconds(seconds)), from: "a", at: .zero)
        guard case .failed("invalidArgument", let reason) = reply else { Issue.record("\(reply)"); return }
        #expect(reason.contains("not a number of seconds"))
        #expect(effects.isEmpty)
    }

    @Test(arguments: [1e12, 1e300, Double.greatestFiniteMagnitude])
    func aHugeFetchIntervalMeansAlmostNever(_ seconds: Double) throws {
        let h = hub()
        let (reply, effects) = h.request(.fetchSetMinimumInterval(.seconds(seconds)), from: "a", at: .zero)
        #expect(reply == .ok)
        for case .startTimer(_, _, let after) in effects { #expect(after <= .longestWait) }
        let schedule = try h.command(.fetchSchedule, at: .seconds(1)).0.get()
        #expect(schedule.contains("a: next fetch in"), "\(schedule)")
        fireTimers(h, effects, from: .zero)  // a century later: the fetch runs, nothing traps
    }

    @Test func anEarliestBeginThatIsNotANumberIsRefused() {
        let h = hub()
        for begin in [Double.infinity, .nan] {
            let reply = h.request(.bgSubmit(BGTaskRequestInfo(kind: .processing, identifier: "a.task", earliestBegin: begin)), from: "a", at: .zero).0
            guard case .failed("invalidArgument", _) = reply else { Issue.record("\(begin): \(reply)"); continue }
        }
        #expect(h.request(.bgPending, from: "a", at: .zero).0 == .bgRequests([]))
    }

    @Test func aFarEarliestBeginIsKeptAndWaitsWithoutTrapping() {
        let h = hub()
        let info = BGTaskRequestInfo(kind: .processing, identifier: "a.task", earliestBegin: 1e300)
        let (reply, effects) = h.request(.bgSubmit(info), from: "a", at: .zero)
        #expect(reply == .ok)
        #expect(h.request(.bgPending, from: "a", at: .seconds(1)).0 == .bgRequests([info]))
        fireTimers(h, effects, from: .zero)  // a century later: the task launches, nothing traps
    }

    /// The inputs kept from the fuzzer, one AppMessage a line, replayed as the harness does
    /// (service requests from an app declaring every mode, then its timers).
    @Test(arguments: Self.fuzzInputs())
    func theKeptInputsReplayWithoutTrapping(path: String) throws {
        let h = hub()
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var now = Duration.zero
        for line in text.split(separator: "\n") {
            now += .seconds(1)
            guard let message = try? Frame.decode(AppMessage.self, from: Array(line.utf8)),
                  case .request(_, .service(let request)) = message else { continue }
            fireTimers(h, h.request(request, from: "a", at: now).1, from: now)
        }
    }

    static func fuzzInputs() -> [String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let dir = root.appendingPathComponent("Fuzz/regressions/mode-hub").path
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted().map { dir + "/" + $0 }
    }
}
