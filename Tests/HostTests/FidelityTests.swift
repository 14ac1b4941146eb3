import AppHostProtocol
import AppHostSystem
import Foundation
import TestSupport
import Testing
@testable import Host

/// Issue 18's points of "where it differs", through real ProbeApps on the virtual clock:
/// the way home (willResignActive before the background, didEnterBackground's 5 s from
/// when it is sent), UIApplicationExitsOnSuspend, an update over a running app, and
/// programmer errors ending as iOS's crash (SIGABRT, the exception in the report).
@Suite("Fidelity (issue 18)", .tags(.process, .virtualClock), .timeLimit(.minutes(2)),
       .enabled(if: probeBuilt, "sample apps not built: run `swift build` first (scripts/test.sh does)"))
struct FidelityTests {
    func withVirtualHost<T>(_ body: (TestHost) async throws -> T) async throws -> T {
        try await withHost(label: "fid", clock: .virtual, body)
    }

    func advance(_ host: TestHost, _ amount: Duration) async throws {
        _ = try await host.supervisor.advanceClock(by: amount)
    }

    func state(_ host: TestHost, _ id: BundleID) async throws -> AppState? {
        try await host.supervisor.status(id).first?.state
    }

    func transitions(_ host: TestHost, _ id: BundleID) async -> [String] {
        await host.events(id).compactMap { e in
            guard e.kind == .transition, let from = e.from, let to = e.to else { return nil }
            return "\(from.rawValue)→\(to.rawValue)"
        }
    }

    // MARK: 1. didEnterBackground's 5 s, and inactive until willResignActive returns

    @Test func aSlowWillResignActiveIsInactiveAndDidEnterBackgroundGetsItsFiveSecondsFromWhenItIsSent() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.fid.slowresign")
            let fifo = try makeContainerFIFO(host, id, "resign.fifo")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [
                "--on", "resign", "wait-fifo:\(fifo)", "--on", "background", "block:forever",
            ])
            try await host.supervisor.background(id)
            // The main thread is in willResignActive once the probe opened the FIFO.
            let writer = await openFIFOForWriting(fifo)
            #expect(writer >= 0)
            try await advance(host, .seconds(8))
            #expect(try await state(host, id) == .inactive, "inactive until willResignActive has returned")
            #expect(processExists(pid), "8 s in willResignActive: not charged to didEnterBackground")
            #expect(try await host.supervisor.reports(id).isEmpty)
            // Release willResignActive at +8 s: now the background and didEnterBackground's 5 s begin.
            var byte: UInt8 = 1
            #expect(write(writer, &byte, 1) == 1)
            close(writer)
            _ = await host.waitForEvent(id) { $0.callback == "willResignActive" }
            try await host.waitUntil(id, is: .background)
            try await advance(host, .milliseconds(4900))
            #expect(processExists(pid), "4.9 s after didEnterBackground was sent")
            try await advance(host, .milliseconds(100))
            try await host.waitUntil(id, is: .notRunning)
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.reason == "didEnterBackground did not return within 5s", "\(report.reason)")
            #expect(report.budget?.name == "didEnterBackground")
            #expect(await transitions(host, id) == ["notRunning→inactive", "inactive→active", "active→inactive",
                                                   "inactive→background", "background→notRunning"])
        }
    }

    @Test func aWillResignActiveThatNeverReturnsIsKilledAtTheHangBudgetNamingIt() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.fid.hungresign")
            let pid = try await host.supervisor.launch(id, background: false,
                                                       arguments: ["--on", "resign", "block:forever"])
            try await host.supervisor.background(id)
            try await advance(host, .milliseconds(9900))
            #expect(processExists(pid))
            #expect(try await state(host, id) == .inactive)
            try await advance(host, .milliseconds(100))
            try await host.waitUntil(id, is: .notRunning)
            let report = try #require(try await host.supervisor.reports(id).last)
            #expect(report.reason == "willResignActive did not return within 10s", "\(report.reason)")
            #expect(report.terminationCode == "0x8badf00d" && report.terminationNamespace == "FRONTBOARD")
            #expect(report.budget?.name == "foregroundHang")
            #expect(!(await host.callbacks(id)).contains("didEnterBackground"), "never sent")
            #expect(await transitions(host, id).last == "inactive→notRunning")
        }
    }

    // MARK: 2. UIApplicationExitsOnSuspend

    @Test func anAppThatOptsOutGetsWillResignActiveThenWillTerminateAndNeverEntersTheBackground() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.fid.exits", extra: ["UIApplicationExitsOnSuspend": true])
            let pid = try await host.supervisor.launch(id, background: false, arguments: [])
            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .notRunning)
            #expect(!processExists(pid))
            #expect(await host.callbacks(id) == ["didFinishLaunching", "didBecomeActive", "willResignActive", "willTerminate"])
            #expect(await transitions(host, id) == ["notRunning→inactive", "inactive→active", "active→inactive", "inactive→notRunning"])
            let log = try String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)
            #expect(log.contains("[ProbeApp] willTerminate state=inactive"), "\(log)")
            #expect(try await host.supervisor.reports(id).isEmpty, "a requested exit is no crash")
        }
    }

    // MARK: 3. An update terminates the running app

    @Test func installingOverARunningAppTerminatesItAndTheNewSettingsApplyFromItsNextLaunch() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.fid.update")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [])
            // The update opts out of the background: the running process keeps its old settings
            // until it ends, which the install itself brings about.
            _ = try await host.installProbe(id, extra: ["UIApplicationExitsOnSuspend": true])
            #expect(try await state(host, id) == .notRunning, "install returns once the old process is gone")
            #expect(!processExists(pid))
            #expect(await host.callbacks(id).last == "willTerminate")
            let ended = await host.events(id).last { $0.kind == .transition && $0.to == .notRunning }
            #expect(ended?.cause.hasPrefix("updated") == true, "\(String(describing: ended?.cause))")
            #expect(await host.events(id).contains { $0.kind == .installed && $0.cause.hasPrefix("updated from") })
            #expect(try await host.supervisor.reports(id).isEmpty)
            _ = try await host.supervisor.launch(id, background: false, arguments: [])
            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .notRunning)
            #expect(await host.callbacks(id).suffix(2) == ["willResignActive", "willTerminate"], "the new bundle's ExitsOnSuspend")
        }
    }

    @Test func updatingASuspendedAppKillsItWithoutACallback() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.fid.update.suspended")
            _ = try await host.supervisor.launch(id, background: false, arguments: [])
            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .suspended)
            _ = try await host.installProbe(id)
            #expect(try await state(host, id) == .notRunning)
            #expect(!(await host.callbacks(id)).contains("willTerminate"))
            #expect(try await host.supervisor.reports(id).isEmpty)
        }
    }

    @Test func aBundleThatCannotBeInstalledLeavesTheRunningAppBe() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.fid.update.bad")
            let pid = try await host.supervisor.launch(id, background: false, arguments: [])
            _ = try makeProbeBundle(in: host.dir.path, id: id.rawValue, extra: ["UIBackgroundModes": ["audoi"]])
            await #expect(throws: ControlError.self) {
                _ = try await host.supervisor.install(path: host.dir.path + "/\(id).app", settings: [:])
            }
            #expect(try await state(host, id) == .active)
            #expect(processExists(pid))
        }
    }

    // MARK: 4. Programmer errors end as iOS's crash

    func expectAbort(_ host: TestHost, _ id: BundleID, name: ExceptionName, reason: String,
                     sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await host.waitUntil(id, is: .notRunning, sourceLocation: sourceLocation)
        let report = try #require(try await host.supervisor.reports(id).last, sourceLocation: sourceLocation)
        #expect(report.exceptionType == "EXC_CRASH (SIGABRT)", sourceLocation: sourceLocation)
        #expect(report.signalName == "SIGABRT", sourceLocation: sourceLocation)
        #expect(report.exception == UncaughtException(name: name, reason: reason), sourceLocation: sourceLocation)
        #expect(report.terminationNamespace == nil && report.terminationCode == nil, "the app's own crash", sourceLocation: sourceLocation)
        #expect(report.reason.hasPrefix("*** Terminating app due to uncaught exception '\(name)', reason: '\(reason)'"),
                "\(report.reason)", sourceLocation: sourceLocation)
        let log = try String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)
        #expect(log.contains("*** Terminating app due to uncaught exception '\(name)'"), "\(log)", sourceLocation: sourceLocation)
    }

    @Test func backgroundLocationUpdatesWithoutTheModeAbortWithNSInternalInconsistencyException() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.fid.location")
            _ = try await host.supervisor.modeCommand(.privacy(action: .grant, service: .service(.locationAlways), bundleIdentifier: id))
            _ = try await host.supervisor.launch(id, background: false,
                                                 arguments: ["--on", "active", "location-background:on"])
            try await expectAbort(host, id, name: .internalInconsistency,
                                  reason: "Invalid parameter not satisfying: !stayUp || CLClientIsBackgroundable(internal->fClient)")
            #expect(!(await host.events(id)).contains { $0.kind == .signal && $0.signal == .kill }, "not killed by the host")
        }
    }

    @Test func aDataTaskOnABackgroundSessionAbortsWithNSGenericException() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.fid.datatask")
            _ = try await host.supervisor.launch(id, background: false,
                                                 arguments: ["--on", "active", "data-task:s:https://example.com/x"])
            try await expectAbort(host, id, name: .generic, reason: "Data tasks are not supported in background sessions")
        }
    }

    @Test func aBGTaskLaunchWithNoRegisteredHandlerAbortsWithNSInternalInconsistencyException() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.fid.bgtask", extra: [
                "UIBackgroundModes": ["fetch"], "BGTaskSchedulerPermittedIdentifiers": ["com.fid.refresh"],
            ])
            _ = try await host.supervisor.launch(id, background: false,
                                                 arguments: ["--on", "launch", "bg-submit:refresh:com.fid.refresh:86400"])
            try await host.supervisor.background(id)
            try await host.waitUntil(id, is: .suspended)
            _ = try await host.supervisor.modeCommand(.bgTaskRun(bundleIdentifier: id, identifier: "com.fid.refresh"))
            try await expectAbort(host, id, name: .internalInconsistency,
                                  reason: "No launch handler registered for task with identifier com.fid.refresh")
        }
    }

    @Test func aSecondRegistrationOfOneIdentifierAbortsWithNSInternalInconsistencyException() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.fid.register2", extra: [
                "UIBackgroundModes": ["fetch"], "BGTaskSchedulerPermittedIdentifiers": ["com.fid.refresh"],
            ])
            _ = try? await host.supervisor.launch(id, background: false, arguments: [
                "--on", "launch", "bg-register:com.fid.refresh", "--on", "launch", "bg-register:com.fid.refresh",
            ])
            try await expectAbort(host, id, name: .internalInconsistency,
                                  reason: "Launch handler for task with identifier com.fid.refresh has already been registered")
        }
    }

    @Test func aRegistrationAfterLaunchingAbortsWithNSInternalInconsistencyException() async throws {
        try await withVirtualHost { host in
            let id = try await host.installProbe("com.fid.registerlate", extra: [
                "UIBackgroundModes": ["fetch"], "BGTaskSchedulerPermittedIdentifiers": ["com.fid.refresh"],
            ])
            _ = try await host.supervisor.launch(id, background: false, arguments: ["--on", "active", "bg-register:com.fid.refresh"])
            try await expectAbort(host, id, name: .internalInconsistency,
                                  reason: "All launch handlers must be registered before application finishes launching")
        }
    }
}
