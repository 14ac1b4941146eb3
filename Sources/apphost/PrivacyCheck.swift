import AppHostProtocol
import ArgumentParser
import Foundation
import Host
import HostConfig
import Scenarios
import Logging
import Snapshots

extension AppHostCommand {
    struct PrivacyCheck: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "privacy-check",
            abstract: "Check that apps' app-switcher snapshots never show what they mark sensitive.",
            discussion: """
                Each bundle is installed on a private host (its own temporary state directory, \
                virtual clock) and taken through foreground → background, then a background \
                fetch if it declares fetch and a silent push if it declares remote-notification; \
                the host snapshots it after each (after a fetch or push, when the app calls the \
                completion handler). A snapshot fails if its text layer shows the text of a \
                privacy-sensitive view (isPrivacySensitive) or of a secure text field, or if the \
                pixels inside such a view's frame are not blanked (one colour: the redaction \
                grey, or a cover the app drew on top). The policy is the app's own \
                (AppHost.SnapshotPolicy) or the one in --config when stricter.

                Exit status: 0 all pass, 1 a leak, 2 an app could not be checked (or the \
                --junit file could not be written).

                Examples:
                  apphost privacy-check manifests/Bank.app manifests/BankCover.app
                  apphost privacy-check --keep manifests/BankLeaky.app   # and look at the PNGs
                  apphost privacy-check MyApp.app --junit privacy.xml    # for CI
                """)

        @Argument(help: ArgumentHelp("App bundles (App.app folders) to check.", valueName: "bundle"))
        var bundles: [String]

        @Option(name: .long, help: ArgumentHelp("Write a JUnit XML report to this file (one testsuite per app, one testcase per snapshot).", valueName: "file.xml"))
        var junit: String?

        @Flag(name: .long, help: "Keep the private host's state directory (the snapshots' PNGs and text layers, events.jsonl) and print where.")
        var keep = false

        @Option(name: .long, help: ArgumentHelp(
            #"Host config file, as for `apphost daemon`: its "snapshots": {"policy": ..., "screen": "1170x2532@3"} apply (the policy when stricter than an app's)."#,
            valueName: "file"))
        var config: String?

        @Option(name: .long, help: ArgumentHelp(
            "Real time to wait for an app still at work after a step (a completion it calls later) before the virtual clock is moved past its fetch and push budgets.",
            valueName: "seconds"))
        var waitForApp: Double = 10

        @Option(name: .long, help: ArgumentHelp("Extra directory to search for app executables (repeatable; also $APPHOST_PRODUCTS_DIR).", valueName: "dir"))
        var productsDir: [String] = []

        @Option(name: .long, help: "How much the private host logs to stderr.")
        var logLevel: Logger.Level = .warning

        func validate() throws {
            guard waitForApp.isFinite, waitForApp >= 0, waitForApp <= 3600 else {
                throw ValidationError("--wait-for-app: expected seconds from 0 to 3600, got \(waitForApp)")
            }
            _ = try hostOptions()
            // A report that cannot be written is refused before any app is checked.
            if let junit {
                do throws(OutputFile.Failure) { try junitFile(junit).check() } catch { throw ValidationError(error.description) }
            }
        }

        private func junitFile(_ path: String) -> OutputFile {
            OutputFile(path, example: "privacy.xml")
        }

        /// The private host's options, parsed as `apphost daemon` parses its own (so --config
        /// is read and checked alike).
        private func hostOptions() throws -> HostOptions {
            try HostOptions.privateHost(logLevel: logLevel, config: config, productsDirectories: productsDir)
        }

        func run() async throws {
            // One private host for all the apps, each checked in turn (its own snapshots
            // directory); an app is terminated before the next starts.
            let dir = NSTemporaryDirectory() + "apphost-privacy-" + UUID().uuidString.prefix(8)
            let host = try hostOptions()
            var config = host.configuration(stateDirectory: dir)
            config.transferDaemon = false
            let logger = host.logger("apphost.privacy-check")
            let box = ResultBox()
            let paths = bundles.map(absolute)
            let patience = Duration.seconds(waitForApp)
            let service = HostService(configuration: config, logger: logger) { s in
                for path in paths {
                    await box.append(await PrivacyRun(supervisor: s, bundle: path, patience: patience).run())
                }
                // A host serves until asked to stop: ask, or the check never ends.
                await s.requestShutdown()
            }
            try await runHost(service, logger: logger)
            var results = await box.values
            for path in paths.dropFirst(results.count) {
                results.append(AppCheck(bundle: path, bundleIdentifier: nil, error: "the private host stopped before this app was checked"))
            }
            if !keep { try? FileManager.default.removeItem(atPath: dir) }
            for r in results { print(r.report(pictures: keep)) }
            let leaks = results.reduce(0) { $0 + $1.snapshots.filter { !$0.leaks.isEmpty }.count }
            let errors = results.filter { $0.error != nil }.count
            print("\(results.count) app(s), \(results.reduce(0) { $0 + $1.snapshots.count }) snapshot(s): \(leaks) leaking, \(errors) not checked")
            if keep {
                print("kept: \(dir) (snapshots/<bundle-id>/switcher.png and .json: the last picture; events.jsonl)")
            } else if leaks > 0 {
                print("run with --keep to look at the leaking pictures")
            }
            if let junit {
                do throws(OutputFile.Failure) {
                    try junitFile(junit).write(Array(JUnitReport.xml(results).utf8))
                } catch {
                    FileHandle.standardError.write(Data("apphost: \(error.description)\n".utf8))
                    throw ExitCode(2)
                }
            }
            if errors > 0 { throw ExitCode(2) }
            if leaks > 0 { throw ExitCode(1) }
        }
    }
}

/// Carries the check's result out of the host's body.
actor ResultBox {
    var values: [AppCheck] = []
    func append(_ v: AppCheck) { values.append(v) }
}

/// One snapshot's verdict.
struct SnapshotCheck: Sendable {
    var info: SnapshotInfo
    var leaks: [Leak]
    /// Sensitive views found in the window (checked, leaking or not).
    var sensitiveViews: Int
}

/// One app's verdict.
struct AppCheck: Sendable {
    var bundle: String
    var bundleIdentifier: BundleID?
    var snapshots: [SnapshotCheck] = []
    var error: String?

    init(bundle: String, bundleIdentifier: BundleID?, error: String? = nil) {
        self.bundle = bundle
        self.bundleIdentifier = bundleIdentifier
        self.error = error
    }

    /// The readable report; with `pictures`, each snapshot's PNG path (kept by --keep).
    func report(pictures: Bool) -> String {
        let name = bundleIdentifier?.rawValue ?? bundle
        // An app that could not be checked to the end still shows the snapshots it had.
        if let error, snapshots.isEmpty { return "ERROR \(name): \(error)" }
        var lines: [String] = []
        let failed = snapshots.contains { !$0.leaks.isEmpty }
        if let error {
            lines.append("ERROR \(name) (\(bundle)): \(error)")
        } else {
            lines.append("\(failed ? "FAIL" : "PASS") \(name) (\(bundle))")
        }
        for s in snapshots {
            let picture = pictures ? "  [\(s.info.png ?? "no picture kept")]" : ""
            if s.leaks.isEmpty {
                lines.append("  ok    snapshot \(s.info.number) after \(s.info.reason), policy \(s.info.policy.rawValue): \(s.sensitiveViews) sensitive view(s), none shown\(picture)")
            } else {
                lines.append("  LEAK  snapshot \(s.info.number) after \(s.info.reason), policy \(s.info.policy.rawValue)\(picture)")
                for leak in s.leaks {
                    lines.append("        \(leak.kind): \(leak.view): \(leak.detail)")
                }
            }
        }
        if snapshots.isEmpty { lines.append("  no snapshot was taken") }
        return lines.joined(separator: "\n")
    }
}

/// The steps on one private host.
struct PrivacyRun {
    let supervisor: Supervisor
    let bundle: String
    /// Real time to wait for an app still at work before moving the virtual clock on.
    var patience: Duration = .seconds(10)

    func run() async -> AppCheck {
        let app: InstalledApp
        do {
            app = try await supervisor.install(path: bundle, settings: [:])
        } catch {
            return AppCheck(bundle: bundle, bundleIdentifier: nil, error: "cannot install: \(error.message)")
        }
        let id = app.bundleIdentifier
        var check = AppCheck(bundle: bundle, bundleIdentifier: id)
        // Only this run's pictures: the same bundle (or another with its identifier) may
        // have been checked before on this host.
        let mark = await supervisor.snapshotMark()
        // Each step's pictures are checked when it ends: the host keeps one picture per
        // app, and the next step's replaces it.
        var seen: Set<UInt64> = []
        do {
            _ = try await supervisor.launch(id, background: false, arguments: [])
            await supervisor.waitUntil(id, is: .active)
            try await step(id, "the home button") {
                try await supervisor.background(id)
                return nil
            }
            await inspect(id, since: mark, bundlePath: app.bundlePath, into: &check, seen: &seen)
            if app.backgroundModes.contains(.fetch) {
                try await step(id, "a background fetch") { try await supervisor.modeCommand(.fetchNow(bundleIdentifier: id)) }
                await inspect(id, since: mark, bundlePath: app.bundlePath, into: &check, seen: &seen)
            }
            if app.backgroundModes.contains(.remoteNotification) {
                try await step(id, "a silent push") {
                    try await supervisor.modeCommand(.push(PushRequest(
                        bundleIdentifier: id, payload: #"{"aps": {"content-available": 1}}"#, pushType: "background", priority: 5, source: "privacy-check")))
                }
            }
        } catch let error as StepError {
            check.error = error.message
        } catch let error as ControlError {
            check.error = error.message
        } catch {
            check.error = "\(error)"
        }
        await supervisor.waitForSnapshots()
        await inspect(id, since: mark, bundlePath: app.bundlePath, into: &check, seen: &seen)
        // Gone before the next app starts (and before the host shuts down).
        await supervisor.terminateMovingClock(id)
        return check
    }

    /// Checks the snapshots of `id` taken since `mark` and not yet in `seen`, in the order
    /// taken. A drawn picture whose file already holds a newer one cannot be checked: the
    /// app is reported as not checked, never as passing.
    private func inspect(_ id: BundleID, since mark: UInt64, bundlePath: String, into check: inout AppCheck, seen: inout Set<UInt64>) async {
        await supervisor.waitForSnapshots()
        let screen = await supervisor.configuration.screen
        for taken in await supervisor.takenSnapshots(id, since: mark) where seen.insert(taken.serial).inserted {
            let sensitive = Self.sensitiveViews(taken.tree.views)
            var leaks: [Leak] = []
            if taken.drawing != nil {
                guard let rendered = taken.rendered else {
                    if check.error == nil {
                        check.error = "snapshot \(taken.info.number) (\(taken.info.reason)) was replaced by a newer one before it could be checked"
                    }
                    continue
                }
                leaks = PrivacyInspector.inspect(tree: taken.tree, snapshot: rendered, screen: screen, bundlePath: bundlePath)
            }
            check.snapshots.append(SnapshotCheck(info: taken.info, leaks: leaks, sensitiveViews: sensitive))
        }
    }

    /// Privacy-sensitive views and secure fields in a window (a sensitive view's subviews count with it).
    static func sensitiveViews(_ views: [ViewNode]) -> Int {
        views.reduce(0) { n, v in
            if v.isHidden { return n }
            if v.isPrivacySensitive { return n + 1 }
            if case .secureTextField = v.content { return n + 1 + sensitiveViews(v.subviews) }
            return n + sensitiveViews(v.subviews)
        }
    }

    struct StepError: Error {
        let message: String
    }

    /// Runs an action that should end in a snapshot, and waits for that snapshot's event.
    /// The action returns what the host answered (said when no snapshot comes of it).
    private func step(_ id: BundleID, _ what: String, _ action: () async throws -> String?) async throws {
        let before = await supervisor.snapshotMark()
        let (_, live, sub) = await supervisor.subscribe(bundleIdentifier: id)
        defer { Task { await supervisor.unsubscribe(sub) } }
        let answer = try await action()
        // The host settles what the action started (callbacks returned, stops confirmed).
        _ = try await supervisor.advanceClock(by: .seconds(1))
        await supervisor.waitForSnapshots()
        if await !supervisor.takenSnapshots(id, since: before).isEmpty { return }
        // Settled and not running: nothing woke it (a push not delivered, say), and no
        // event is coming to wait for. (A snapshot on a completion is taken before the
        // suspension that follows it.)
        let state = try await supervisor.status(id).first?.state
        if state == .suspended || state == .notRunning {
            throw StepError(message: "no snapshot after \(what): the app was not woken for it\(answer.map { " (\($0))" } ?? "")")
        }
        // Not yet: the app is still at work (a completion it calls later, on a timer of its
        // own). Wait for the snapshot event, or for the app to end without one; after
        // `patience` of real time, move the virtual clock past the budgets of a fetch and a
        // push, so the app either completes or its watchdog ends it: the check never hangs.
        let profile = await supervisor.configuration.profile
        let budgetSeconds = max(profile.fetch, profile.silentPush, profile.wake) + 1
        let budgets = Duration.seconds(budgetSeconds)
        let outcome = await withTaskGroup(of: StepOutcome?.self) { group in
            group.addTask { await Self.watch(live, supervisor: supervisor, id: id, since: before, what: what) }
            group.addTask { [patience] in
                try? await Task.sleep(for: patience)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        switch outcome {
        case .snapshot?:
            return
        case .failed(let message)?:
            throw StepError(message: message)
        case nil:
            _ = try await supervisor.advanceClock(by: budgets)
            await supervisor.waitForSnapshots()
            if await !supervisor.takenSnapshots(id, since: before).isEmpty { return }
            let ended = await supervisor.subscribe(bundleIdentifier: id).past.last { $0.kind == .transition && $0.to == .notRunning }
            throw StepError(message: "no snapshot after \(what): the app did not complete it within \(DurationText.format(budgetSeconds))\(ended.map { " and was ended: \($0.cause)" } ?? "")")
        }
    }

    enum StepOutcome: Sendable {
        case snapshot
        case failed(String)
    }

    /// The events after an action, until its snapshot, or the app's end or suspension without one.
    private static func watch(_ live: HostEventStream, supervisor: Supervisor, id: BundleID, since before: UInt64,
                              what: String) async -> StepOutcome? {
        for await event in live {
            if event.kind == .snapshot || event.kind == .warning && event.cause.hasPrefix("snapshot") { return .snapshot }
            if event.kind == .transition, event.to == .notRunning {
                return .failed("the app ended during \(what): \(event.cause)")
            }
            if event.kind == .transition, event.to == .suspended {
                await supervisor.waitForSnapshots()
                if await !supervisor.takenSnapshots(id, since: before).isEmpty { return .snapshot }
                return .failed("no snapshot after \(what): the app was suspended without one (did it run its callbacks?)")
            }
        }
        return nil
    }
}

/// JUnit XML: one testsuite per app, one testcase per snapshot.
enum JUnitReport {
    /// Escaped, and without the characters XML 1.0 forbids (leak details quote app text).
    static func escape(_ s: String) -> String { Escape.xml(s) }

    /// Whether an app gets the `check` testcase: it could not be checked (an error), or
    /// no snapshot was taken (so the suite is not empty).
    static func hasCheckCase(_ r: AppCheck) -> Bool {
        r.error != nil || r.snapshots.isEmpty
    }

    /// The testcases of one app: one per snapshot, plus the `check` case.
    static func testCount(_ r: AppCheck) -> Int {
        r.snapshots.count + (hasCheckCase(r) ? 1 : 0)
    }

    static func xml(_ results: [AppCheck]) -> String {
        var out = #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n"
        let tests = results.reduce(0) { $0 + testCount($1) }
        let failures = results.reduce(0) { $0 + $1.snapshots.filter { !$0.leaks.isEmpty }.count }
        let errors = results.filter { $0.error != nil }.count
        out += #"<testsuites name="apphost privacy-check" tests="\#(tests)" failures="\#(failures)" errors="\#(errors)">"# + "\n"
        for r in results {
            let name = escape(r.bundleIdentifier?.rawValue ?? r.bundle)
            let f = r.snapshots.filter { !$0.leaks.isEmpty }.count
            out += #"  <testsuite name="\#(name)" tests="\#(testCount(r))" failures="\#(f)" errors="\#(r.error == nil ? 0 : 1)">"# + "\n"
            if let error = r.error {
                out += #"    <testcase classname="\#(name)" name="check"><error message="\#(escape(error))"/></testcase>"# + "\n"
            } else if hasCheckCase(r) {
                out += #"    <testcase classname="\#(name)" name="check"><system-out>no snapshot was taken</system-out></testcase>"# + "\n"
            }
            for s in r.snapshots {
                let caseName = escape("snapshot \(s.info.number) after \(s.info.reason) (policy \(s.info.policy.rawValue))")
                if s.leaks.isEmpty {
                    out += #"    <testcase classname="\#(name)" name="\#(caseName)"/>"# + "\n"
                } else {
                    let text = s.leaks.map { "\($0.kind): \($0.view): \($0.detail)" }.joined(separator: "\n")
                    out += #"    <testcase classname="\#(name)" name="\#(caseName)"><failure message="\#(escape(s.leaks[0].view)) leaked" type="leak">\#(escape(text))</failure></testcase>"# + "\n"
                }
            }
            out += "  </testsuite>\n"
        }
        out += "</testsuites>\n"
        return out
    }
}
