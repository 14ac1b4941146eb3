import AppHostProtocol
import AppHostSystem
import Foundation
import Host

/// What the demo's later acts share: the host's events printed as they happen, the
/// script's own lines printed after the events they report on, and waits on real events.
protocol DemoNarrator: Sendable {
    var supervisor: Supervisor { get }
    var stateDirectory: String { get }
    /// How far the event printer has got.
    var cursor: EventCursor { get }
}

extension DemoNarrator {
    func line(_ text: String) {
        print(text)
        fflush(nil)
    }

    /// Waits until the printer has printed every event recorded so far.
    func caughtUp() async {
        let (past, _, subscription) = await supervisor.subscribe(bundleIdentifier: nil)
        await supervisor.unsubscribe(subscription)
        await cursor.wait(for: past.lastSeq)
    }

    /// Prints a line of the script once every event so far has been printed.
    func show(_ text: String) async {
        await caughtUp()
        line(text)
    }

    func say(_ text: String) async {
        await show(isatty(1) == 1 ? "\n\u{1B}[1m== \(text)\u{1B}[0m" : "\n== \(text)")
    }

    func procState(_ id: BundleID) async -> String {
        guard let pid = await supervisor.pid(of: id), let stat = try? ProcStat.read(pid: pid) else { return "-" }
        return "/proc/\(pid)/stat state \(stat.state)"
    }

    /// `com.example.radio   background   activities ["audio playback"]   /proc/123/stat state S`.
    func status(_ id: BundleID) async -> String {
        await caughtUp()
        guard let s = try? await supervisor.status(id).first else { return "   \(id): unknown" }
        let activities = "[" + s.activities.map { "\"\($0)\"" }.joined(separator: ", ") + "]"
        return "   \(id.rawValue.padding(toLength: 20, withPad: " ", startingAt: 0)) \(s.state.rawValue.padding(toLength: 11, withPad: " ", startingAt: 0)) activities \(activities)   \(await procState(id))"
    }

    /// The lines of `id`'s log (its stdout) that contain `text`.
    func logLines(_ id: BundleID, containing text: String) -> [String] {
        let path = stateDirectory + "/logs/" + id.rawValue + ".log"
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init).filter { $0.contains(text) }
    }

    /// Runs `action`, then waits until an event of `id` (or of the host, for nil) matches
    /// `predicate`. Gives up after `limit` of real time so a broken app cannot hang the
    /// demo; nil then.
    @discardableResult
    func expectEvent(_ id: BundleID?, _ what: String, limit: Duration = .seconds(10), after action: () async throws -> Void,
                     where predicate: @escaping @Sendable (HostEvent) -> Bool) async throws -> HostEvent? {
        let (_, live, subscription) = await supervisor.subscribe(bundleIdentifier: id)
        do {
            try await action()
        } catch {
            await supervisor.unsubscribe(subscription)
            throw error
        }
        let event = await firstEvent(in: live, within: limit, where: predicate)
        await supervisor.unsubscribe(subscription)
        if event == nil { line("   (gave up waiting for \(id?.rawValue ?? "the host")'s \(what))") }
        return event
    }

    /// The first event of `live` matching `predicate`, or nil after `limit` of real time.
    func firstEvent(in live: HostEventStream, within limit: Duration,
                    where predicate: @escaping @Sendable (HostEvent) -> Bool) async -> HostEvent? {
        await withTaskGroup(of: HostEvent?.self) { group in
            group.addTask {
                for await event in live where predicate(event) { return event }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// Runs `action`, then waits until `id`'s callback `name` has returned.
    @discardableResult
    func expectCallback(_ id: BundleID, _ name: String, limit: Duration = .seconds(10),
                        after action: () async throws -> Void) async throws -> HostEvent? {
        let cause = "\(name) returned"
        return try await expectEvent(id, cause, limit: limit, after: action) { $0.kind == .callback && $0.cause == cause }
    }

    /// Runs `body` without printing the host's events (a step that reports on its own).
    func quietly(_ body: () async throws -> Void) async rethrows {
        await caughtUp()
        await cursor.setQuiet(true)
        defer { Task { await cursor.setQuiet(false) } }
        try await body()
        await caughtUp()
    }

    /// Prints every event (but callbacks and installs) while `body` runs, then shuts the
    /// host down and prints its last events.
    func narrate(_ body: () async throws -> Void) async {
        let (past, live, _) = await supervisor.subscribe(bundleIdentifier: nil)
        await cursor.saw(past.lastSeq)
        let printer = Task {
            for await event in live {
                if event.kind != .callback && event.kind != .installed, await !cursor.quiet {
                    line("   " + EventFormatter.line(event))
                }
                await cursor.saw(event.seq)
            }
        }
        do {
            try await body()
            await say("$ apphost shutdown")
        } catch {
            line("demo failed: \(error)")
        }
        await supervisor.requestShutdown()
        await printer.value
    }
}
