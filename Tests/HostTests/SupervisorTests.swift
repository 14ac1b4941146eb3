import AppHostProtocol
import AppHostSystem
import Foundation
import TestSupport
import Testing
@testable import Host

/// The host with real processes: sample and probe apps spawned through the sandbox.
@Suite("Supervisor", .tags(.process), .timeLimit(.minutes(2)), .enabled(if: probeBuilt, "sample apps not built: run `swift build` first (scripts/test.sh does)"))
struct SupervisorTests {
    @Test func homeSuspendsWithSIGSTOPAndForegroundResumes() async throws {
        try await withHost { host in
            let id = try await host.installProbe("com.test.home")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [])
            try await host.waitUntil(id, is: .active)
            #expect(kernelState(pid) != "T")

            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .suspended)
            #expect(kernelState(pid) == "T", "suspended must be a real stop in /proc")

            try await host.supervisor.foreground(id)
            try await host.waitUntil(id, is: .active)
            #expect(kernelState(pid) != "T")

            let transitions = await host.events(id).filter { $0.kind == .transition }.map { [$0.from, $0.to] }
            #expect(transitions == [
                [.notRunning, .inactive], [.inactive, .active],
                [.active, .inactive], [.inactive, .background], [.background, .suspended],
                [.suspended, .background], [.background, .inactive], [.inactive, .active],
            ])
            let status = try await host.supervisor.status(id)
            #expect(status.first?.state == .active)
            #expect(status.first?.pid == pid)
        }
    }

    /// `status` agrees with the kernel: asked right after the host sent SIGSTOP (its event
    /// written, the kernel's confirmation perhaps not yet handled), it waits for the
    /// confirmation, so the app it lists as suspended is in state T, and one in state T
    /// is listed as suspended, never as `background`.
    @Test func statusRightAfterASIGSTOPAgreesWithTheKernel() async throws {
        try await withHost { host in
            for n in 1...5 {
                let id = try await host.installProbe("com.test.statusstop\(n)")
                let pid = try await host.supervisor.launch(id, background: false, arguments: [])
                try await host.supervisor.background(id)
                _ = await host.waitForEvent(id) { $0.kind == .signal && $0.signal == .stop && $0.confirmed == nil }
                let listed = try await host.supervisor.status(id).first?.state
                #expect(listed == .suspended, "listed \(listed?.rawValue ?? "nothing") right after SIGSTOP")
                #expect(kernelState(pid) == "T")
            }
        }
    }

    /// The hang check on the real clock: the app's CLOCK_MONOTONIC stamp against the
    /// host's own reading. `foregroundHang` is 1 s here so the test takes about that.
    @Test func aBlockedMainThreadIsKilledOnTheRealClockWithHowLongItWasBlocked() async throws {
        var profile = BudgetProfile.ios13
        profile.foregroundHang = 1
        try await withHost(label: "hang", profile: profile) { host in
            let id = try await host.installProbe("com.test.hang")
            let fifo = try makeContainerFIFO(host, id, "block.fifo")
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "active", "hang-fifo:\(fifo)"])
            // The app's main thread blocks opening the FIFO, then reading it. On a loaded
            // machine the watchdog may kill it before this side's open met it: a reader of
            // our own then ends that open (it would wait for ever for a reader otherwise).
            async let writerOpened = openFIFOForWriting(fifo)
            try await host.waitUntil(id, is: .notRunning)
            let releaser = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
            let writer = await writerOpened
            #expect(writer >= 0)
            close(writer)
            close(releaser)
            #expect(!processExists(pid))
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.terminationCode == "0x8badf00d")
            #expect(report.budget?.name == "foregroundHang")
            // "main run loop blocked for 1.004s while active": never less than the budget.
            let reason = report.reason
            #expect(reason.hasPrefix("main run loop blocked for ") && reason.hasSuffix("s while active"), "\(reason)")
            let seconds = Double(reason.dropFirst("main run loop blocked for ".count).dropLast("s while active".count))
            #expect((seconds ?? 0) >= 1, "\(reason)")
        }
    }

    @Test func aWaitThatRunsOutSaysWhatTheHostSaw() async throws {
        try await withHost { host in
            let id = try await host.installProbe("com.test.waitout")
            _ = try await host.supervisor.launch(id, background: false, arguments: [])
            try await host.waitUntil(id, is: .active)
            // Nobody sends it home: the wait runs out and names its state and last events.
            try await withKnownIssue {
                try await host.waitUntil(id, is: .suspended, timeout: .milliseconds(100))
            } matching: { issue in
                let said = issue.comments.map(\.rawValue).joined()
                return said.contains("\(id) not suspended after") && said.contains("it active, pid ")
                    && said.contains("transition notRunning→inactive") && said.contains("transition inactive→active")
            }
        }
    }

    @Test func aWaitForAnEventThatRunsOutSaysWhatTheHostSaw() async throws {
        try await withHost { host in
            let id = try await host.installProbe("com.test.eventout")
            _ = try await host.supervisor.launch(id, background: false, arguments: [])
            try await host.waitUntil(id, is: .active)
            // No report comes for a running app: the wait runs out and returns nil.
            var event: HostEvent?
            await withKnownIssue {
                event = await host.waitForEvent(id, timeout: .milliseconds(100)) { $0.kind == .report }
            } matching: { issue in
                let said = issue.comments.map(\.rawValue).joined()
                return said.contains("no event of \(id) matched within") && said.contains("it active, pid ")
                    && said.contains("transition inactive→active")
            }
            #expect(event == nil)
        }
    }

    /// A control connection's peer is checked against the apps' pids (an app may not
    /// drive the host): by an index, not a walk of every runtime.
    @Test func theAppOwningAPidIsFoundWhileItRunsAndForgottenWhenItExits() async throws {
        try await withHost { host in
            let id = try await host.installProbe("com.test.owner")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [])
            #expect(await host.supervisor.appOwning(pid: pid) == id)
            #expect(await host.supervisor.appOwning(pid: getpid()) == nil, "the test process is nobody's app")
            try await host.supervisor.terminate(id)
            try await host.waitUntil(id, is: .notRunning)
            #expect(await host.supervisor.appOwning(pid: pid) == nil, "a gone app's pid may be anyone's now")
        }
    }

    @Test func callbacksRunInIOSOrder() async throws {
        try await withHost { host in
            let id = try await host.installProbe("com.test.order")
            _ = try await host.supervisor.launch(id, background: false, arguments: [])
            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .suspended)
            try await host.supervisor.foreground(id)
            // A callback's return is reported after its transition: wait for the sixth.
            let counter = Counter()
            _ = await host.waitForEvent(id) { e in e.kind == .callback && counter.increment() == 6 }
            #expect(await host.callbacks(id) == [
                "didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground",
                "willEnterForeground", "didBecomeActive",
            ])
        }
    }

    @Test func heldBackgroundTaskKeepsAppRunningUntilEnded() async throws {
        try await withHost { host in
            let id = try await host.installProbe("com.test.task")
            // Begin "upload" when going home; end it when told to below (no timing involved).
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "background", "begin-task:upload", "--on", "foreground", "end-task:upload"])
            try await host.supervisor.background(id)
            _ = await host.waitForEvent(id) { $0.callback == "didEnterBackground" }
            #expect(try await host.supervisor.status(id).first?.state == .background)
            #expect(try await host.supervisor.status(id).first?.backgroundTasks == ["upload"])
            #expect(kernelState(pid) != "T", "an app holding a task is not stopped")
        }
    }

    @Test func endingTheTaskLetsSuspensionHappen() async throws {
        try await withHost { host in
            let id = try await host.installProbe("com.test.taskend")
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "background", "hold-task:sync:1"])
            try await host.supervisor.background(id)
            _ = await host.waitForEvent(id) { $0.began == true }
            try await host.waitUntil(id, is: .suspended)
            let events = await host.events(id)
            let ended = try #require(events.firstIndex { $0.began == false })
            let suspended = try #require(events.firstIndex { $0.kind == .transition && $0.to == .suspended })
            #expect(ended < suspended)
            #expect(kernelState(pid) == "T")
        }
    }

    @Test func onlyOneAppIsActive() async throws {
        try await withHost { host in
            let a = try await host.installProbe("com.test.one.a")
            let b = try await host.installProbe("com.test.one.b")
            _ = try await host.supervisor.launch(a, background: false, arguments: [])
            try await host.waitUntil(a, is: .active)
            _ = try await host.supervisor.launch(b, background: false, arguments: [])
            try await host.waitUntil(a, is: .suspended)
            try await host.waitUntil(b, is: .active)
            try await host.supervisor.foreground(a)
            try await host.waitUntil(b, is: .suspended)
            try await host.waitUntil(a, is: .active)
            let active = try await host.supervisor.status(nil).filter { $0.state == .active }
            #expect(active.map(\.bundleIdentifier) == [a])
        }
    }

    @Test func backgroundLaunchGoesStraightToBackgroundThenSuspends() async throws {
        try await withHost { host in
            let id = try await host.installProbe("com.test.bglaunch")
            let pid = try await host.supervisor.launch(id, background: true, arguments: [])
            try await host.waitUntil(id, is: .suspended)
            #expect(kernelState(pid) == "T")
            let transitions = await host.events(id).filter { $0.kind == .transition }.map { [$0.from, $0.to] }
            #expect(transitions == [[.notRunning, .background], [.background, .suspended]])
            #expect(await host.callbacks(id) == ["didFinishLaunching"])
        }
    }

    @Test func exitsOnSuspendTerminatesInsteadOfSuspending() async throws {
        try await withHost { host in
            let id = try await host.installProbe("com.test.exits", extra: ["UIApplicationExitsOnSuspend": true])
            let pid = try await host.supervisor.launch(id, background: false, arguments: [])
            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .notRunning)
            #expect(!processExists(pid))
            #expect(await host.callbacks(id).last == "willTerminate")
            #expect(try await host.supervisor.reports(id).isEmpty)
        }
    }

    @Test func userTerminateDeliversWillTerminateAndReapsTheProcess() async throws {
        try await withHost { host in
            let id = try await host.installProbe("com.test.term")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [])
            try await host.supervisor.terminate(id)
            #expect(try await host.supervisor.status(id).first?.state == .notRunning)
            #expect(try await host.supervisor.status(id).first?.pid == nil)
            #expect(!processExists(pid))
            #expect(await host.callbacks(id).last == "willTerminate")
            #expect(try await host.supervisor.reports(id).isEmpty, "a requested, clean exit is not a crash")
        }
    }

    @Test func appThatIgnoresWillTerminateIsKilledAfterGrace() async throws {
        try await withHost(grace: .milliseconds(300)) { host in
            let id = try await host.installProbe("com.test.stubborn")
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "terminate", "block:3600"])
            try await host.supervisor.terminate(id)
            #expect(!processExists(pid))
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.signalName == "SIGKILL")
            #expect(report.terminationCode == "0xdeadfa11", "user terminate of an unresponsive app")
            #expect(report.terminationNamespace == "FRONTBOARD")
            #expect(report.reason.contains("after willTerminate"))
        }
    }

    @Test(.tags(.virtualClock)) func terminateMovingClockKillsAnAppThatIgnoresWillTerminateOnTheVirtualClock() async throws {
        // Nobody advances a privacy check's clock: the host moves it past the grace period itself.
        try await withHost(grace: .seconds(5), clock: .virtual) { host in
            let id = try await host.installProbe("com.test.stubborn")
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "terminate", "block:forever"])
            await host.supervisor.terminateMovingClock(id)
            #expect(!processExists(pid))
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.reason.contains("after willTerminate"), "\(report.reason)")
            await host.supervisor.terminateMovingClock(id) // not running: returns at once
        }
    }

    @Test func crashDuringLaunchIsReportedAndLaunchFails() async throws {
        try await withHost { host in
            let id = try await host.installProbe("com.test.crash")
            await #expect(throws: ControlError.self) {
                _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "launch", "crash"])
            }
            #expect(try await host.supervisor.status(id).first?.state == .notRunning)
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.signal != nil)
            #expect(report.reason.contains("during launch"))
            #expect(report.lastStates.map(\.state).contains(.inactive))
            // The report is also a JSON file under reports/.
            let files = try FileManager.default.contentsOfDirectory(atPath: host.dir.path + "/reports")
            #expect(files.contains("\(report.id).json"))
        }
    }

    @Test func exitWithCodeIsReported() async throws {
        try await withHost { host in
            let id = try await host.installProbe("com.test.exit3")
            // An earlier, clean run: its states must not leak into the report.
            _ = try await host.supervisor.launch(id, background: false, arguments: [])
            try await host.supervisor.terminate(id)
            let pid = try await host.supervisor.launch(id, background: false, arguments: ["--on", "active", "exit:3"])
            try await host.waitUntil(id, is: .notRunning)
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.exitStatus == 3)
            #expect(report.bundleIdentifier == id)
            #expect(report.pid == pid)
            #expect(report.lastStates.map(\.state) == [.inactive, .active, .notRunning], "this run only, ending with notRunning")
        }
    }

    @Test(arguments: ["garbage", "oversized"])
    func misbehavingAppIsKilledAndOthersAreUnaffected(action: String) async throws {
        try await withHost { host in
            let good = try await host.installProbe("com.test.good.\(action)")
            let bad = try await host.installProbe("com.test.bad.\(action)")
            let goodPid = try await host.supervisor.launch(good, background: false, arguments: [])
            let badPid = try await host.supervisor.launch(bad, background: false, arguments: ["--on", "active", action])
            try await host.waitUntil(bad, is: .notRunning)
            #expect(!processExists(badPid))
            let report = try #require(try await host.supervisor.reports(bad).last)
            #expect(report.terminationNamespace == "APPHOST")
            #expect(report.reason.contains("IPC protocol violation"))
            #expect(report.signalName == "SIGKILL")
            // The other app still works: foreground it (it went home when bad launched).
            try await host.supervisor.foreground(good)
            try await host.waitUntil(good, is: .active)
            #expect(processExists(goodPid))
            #expect(await host.supervisor.pid(of: good) == goodPid)
        }
    }

    @Test func unknownBundleIdSaysWhatIsInstalled() async throws {
        try await withHost { host in
            try await host.installProbe("com.test.known")
            do throws(ControlError) {
                _ = try await host.supervisor.launch("com.test.nope", background: false, arguments: [])
                Issue.record("launch of an unknown id succeeded")
            } catch {
                #expect(error.code == .unknownBundle)
                #expect(error.message.contains("com.test.nope"))
                #expect(error.message.contains("com.test.known"))
            }
            await #expect(throws: ControlError.self) { try await host.supervisor.terminate("com.test.nope") }
        }
    }

    @Test func missingExecutableIsRefusedAtInstall() async throws {
        try await withHost { host in
            let path = try makeProbeBundle(in: host.dir.path, id: "com.test.noexe", executable: "NoSuchApp")
            do throws(ControlError) {
                _ = try await host.supervisor.install(path: path, settings: [:])
                Issue.record("install succeeded")
            } catch {
                #expect(error.code == .invalidManifest)
                #expect(error.message.contains("NoSuchApp"))
            }
            #expect(await host.supervisor.list().isEmpty)
        }
    }

    @Test func anExecutableOutsideTheBundleIsRefusedAtInstall() async throws {
        try await withHost { host in
            let outside = try TempDir("out")
            defer { outside.remove() }
            // A file beside the bundle: its folder would be granted read-execute to the app.
            let escaper = outside.path + "/escaper"
            try FileManager.default.copyItem(atPath: productsDirectory + "/ProbeApp", toPath: escaper)
            for (id, executable) in [("com.test.climb", "../escaper"), ("com.test.absolute", escaper)] {
                let path = try makeProbeBundle(in: outside.path, id: id, executable: executable)
                do throws(ControlError) {
                    _ = try await host.supervisor.install(path: path, settings: [:])
                    Issue.record("install of CFBundleExecutable \(executable) succeeded")
                } catch {
                    #expect(error.code == .invalidManifest)
                    #expect(error.message.contains("CFBundleExecutable: "), "\(error.message)")
                    #expect(error.message.contains("\"\(executable)\""), "\(error.message)")
                    #expect(error.message.contains("bundle folder"), "\(error.message)")
                }
            }
            #expect(await host.supervisor.list().isEmpty)
        }
    }

    @Test func executableRemovedAfterInstallFailsLaunchWithReport() async throws {
        try await withHost { host in
            let path = try makeProbeBundle(in: host.dir.path, id: "com.test.gone", executable: "GoneApp")
            try FileManager.default.copyItem(atPath: productsDirectory + "/ProbeApp", toPath: path + "/GoneApp")
            let app = try await host.supervisor.install(path: path, settings: [:])
            #expect(app.executablePath == path + "/GoneApp", "the bundle's own executable comes first")
            try FileManager.default.removeItem(atPath: path + "/GoneApp")
            do throws(ControlError) {
                _ = try await host.supervisor.launch(app.bundleIdentifier, background: false, arguments: [])
                Issue.record("launch succeeded without an executable")
            } catch {
                #expect(error.code == .spawnFailed)
                #expect(error.message.contains("execve"))
                #expect(error.message.contains("ENOENT"))
            }
            #expect(try await host.supervisor.status(app.bundleIdentifier).first?.state == .notRunning)
            let report = try #require(try await host.supervisor.reports(app.bundleIdentifier).last)
            #expect(report.exceptionType == "SPAWN_FAILED")
            // The host is fine: another app still launches.
            let other = try await host.installProbe("com.test.after")
            _ = try await host.supervisor.launch(other, background: false, arguments: [])
            try await host.waitUntil(other, is: .active)
        }
    }

    @Test func restartedHostListsWhatWasInstalled() async throws {
        try await withStateDirectory("h") { dir in
            let pid = try await withHost(directory: dir) { first in
                try await first.installProbe("com.test.persist")
                return try await first.supervisor.launch("com.test.persist", background: false, arguments: [])
            }
            #expect(!processExists(pid), "shutdown leaves nothing running")

            try await withHost(reopening: dir) { second in
                let ids = await second.supervisor.list().map(\.bundleIdentifier)
                #expect(ids == ["com.test.persist"])
                // History survived too.
                let store = try Store(path: dir.path + "/apphost.sqlite")
                let states = try store.recentStates(bundleIdentifier: "com.test.persist", limit: 50).map(\.state)
                #expect(states.first == .inactive)
                #expect(states.last == .notRunning)
            }
        }
    }

    @Test func sampleAppsFromManifestsFolderLaunch() async throws {
        try await withHost { host in
            let plain = try await host.supervisor.install(path: packageRoot + "/manifests/Plain.app", settings: [:])
            #expect(plain.bundleIdentifier == "com.example.plain")
            #expect(plain.executablePath.hasSuffix("/PlainApp"))
            let holder = try await host.supervisor.install(path: packageRoot + "/manifests/TaskHolder.app", settings: [:])
            _ = try await host.supervisor.launch(plain.bundleIdentifier, background: false, arguments: [])
            _ = try await host.supervisor.launch(holder.bundleIdentifier, background: false, arguments: ["--hold", "1"])
            try await host.waitUntil(plain.bundleIdentifier, is: .suspended)
            try await host.supervisor.background(holder.bundleIdentifier)
            _ = await host.waitForEvent(holder.bundleIdentifier) { $0.kind == .backgroundTask && $0.cause.contains("upload") }
            try await host.waitUntil(holder.bundleIdentifier, is: .suspended)
        }
    }

    @Test func shutdownTerminatesSuspendedAppsWithWillTerminate() async throws {
        try await withHost { host in
            let id = try await host.installProbe("com.test.shutdown")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [])
            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .suspended)
            await host.supervisor.shutdown()
            #expect(!processExists(pid))
            #expect(await host.callbacks(id).last == "willTerminate")
        }
    }
}
