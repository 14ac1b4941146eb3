import AppHostProtocol
@testable import AppKitLess
import Dispatch
import Foundation
import Synchronization
import Testing

/// Marks the main queue so a handler can tell it runs there.
private let servicesMainQueueKey: DispatchSpecificKey<Bool> = {
    let key = DispatchSpecificKey<Bool>()
    DispatchQueue.main.setSpecific(key: key, value: true)
    return key
}()

@MainActor private func onMainQueue() -> Bool {
    DispatchQueue.getSpecific(key: servicesMainQueueKey) == true
}

/// What `registerForRemoteNotifications` told the application delegate.
private enum RegistrationOutcome: Sendable, Equatable {
    case token(String)
    case failure(ServiceError)
}

/// An application delegate that reports remote-notification registration on a stream.
@MainActor
private final class RegistrationDelegate: ApplicationDelegate {
    let outcomes: AsyncStream<RegistrationOutcome>
    private let continuation: AsyncStream<RegistrationOutcome>.Continuation
    /// How many outcomes arrived, to check none arrives before the call returns.
    var count = 0

    init() {
        (outcomes, continuation) = AsyncStream.makeStream()
    }

    func didRegisterForRemoteNotifications(_ application: Application, deviceToken: String) {
        count += 1
        continuation.yield(.token(deviceToken))
    }
    func didFailToRegisterForRemoteNotifications(_ application: Application, error: ServiceError) {
        count += 1
        continuation.yield(.failure(error))
    }
}

/// An application with its own service router over a socketpair whose host end the test drives.
private typealias Fixture = AppHarness<RegistrationDelegate, ServicesExtras>

private struct ServicesExtras: Sendable {
    let router: ServiceRouter
}

private extension AppHarness where Delegate == RegistrationDelegate, Extra == ServicesExtras {
    init() async throws {
        _ = servicesMainQueueKey
        try await self.init { connection, effects in
            let delegate = RegistrationDelegate()
            let router = ServiceRouter()
            let app = Application(bundleIdentifier: "com.example.services", delegate: delegate, connection: connection, effects: effects, services: router)
            return (delegate, app, ServicesExtras(router: router))
        }
    }
}

/// Runs `body` on the main queue (where apps make service calls) at once, and
/// lets the test await its result after playing the host's part on the socket.
private final class OnMain<T: Sendable>: Sendable {
    private let state = Mutex<(result: Result<T, ServiceError>?, waiter: CheckedContinuation<Result<T, ServiceError>, Never>?)>((nil, nil))

    init(_ body: @escaping @MainActor @Sendable () throws(ServiceError) -> T) {
        DispatchQueue.main.async {
            let result = MainActor.assumeIsolated { Result { () throws(ServiceError) -> T in try body() } }
            self.finish(result)
        }
    }

    private func finish(_ result: Result<T, ServiceError>) {
        let waiter = state.withLock { s -> CheckedContinuation<Result<T, ServiceError>, Never>? in
            s.result = result
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: result)
    }

    /// The body's result, once it has returned.
    var result: Result<T, ServiceError> {
        get async {
            await withCheckedContinuation { c in
                let done = state.withLock { s -> Result<T, ServiceError>? in
                    if s.result == nil { s.waiter = c }
                    return s.result
                }
                if let done { c.resume(returning: done) }
            }
        }
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}

/// Records every service delegate call as a line, notes calls off the main queue,
/// and runs an optional hook inside a call (by line prefix).
@MainActor
private final class ServiceRecorder: LocationManagerDelegate, PushRegistryDelegate, CentralManagerDelegate, AccessoryManagerDelegate {
    var calls: [String] = []
    var offMainQueue: [String] = []
    var hooks: [String: @MainActor () -> Void] = [:]
    /// Yields each line too, for calls that come later on the main queue.
    let lines: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation

    init() {
        (lines, continuation) = AsyncStream.makeStream()
    }

    func record(_ line: String) {
        calls.append(line)
        continuation.yield(line)
        if !onMainQueue() { offMainQueue.append(line) }
        if let key = line.split(separator: " ").first.map(String.init) { hooks[key]?() }
    }

    func didUpdateLocations(_ manager: LocationManager, _ locations: [LocationFix]) {
        record("location \(locations.map { "\($0.latitude),\($0.longitude)" }.joined(separator: " "))")
    }
    func didChangeAuthorization(_ manager: LocationManager, _ status: LocationAuthorization) {
        record("authorization \(status.rawValue)")
    }
    func didReceiveIncomingPush(_ registry: PushRegistry, payload: PushPayload) {
        record("push \(payload.dictionary["caller"] as? String ?? "?") \(payload.json)")
    }
    func didDiscover(_ central: CentralManager, peripheral: BLEPeripheral) {
        record("discovered \(peripheral.id)")
    }
    func didConnect(_ central: CentralManager, peripheral: String) {
        record("connected \(peripheral)")
    }
    func didDisconnect(_ central: CentralManager, peripheral: String) {
        record("disconnected \(peripheral)")
    }
    func didUpdateValue(_ central: CentralManager, peripheral: String, characteristic: String, value: Data) {
        record("value \(peripheral) \(characteristic) \(Array(value))")
    }
    func didConnect(_ manager: AccessoryManager, accessory: Accessory) {
        record("accessory-connected \(accessory.name)")
    }
    func didDisconnect(_ manager: AccessoryManager, accessory: Accessory) {
        record("accessory-disconnected \(accessory.name)")
    }
    func didReceive(_ manager: AccessoryManager, bytes: Data, from accessory: Accessory, protocolString: String) {
        record("accessory-data \(accessory.name) \(protocolString) \(String(decoding: bytes, as: UTF8.self))")
    }
}

@Suite("Services", .serialized, .timeLimit(.minutes(3)))
struct ServicesTests {
    @Test("each service call sends its ServiceRequest and blocks for the reply: .ok returns, a refusal throws its reason")
    func requestsAndReplies() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        let host = fixture.host, router = fixture.router
        let (audio, location, calls, central, peripheral) = await MainActor.run {
            (AudioSession(router: router), LocationManager(router: router), CallProvider(router: router),
             CentralManager(delegate: nil, router: router), PeripheralManager(router: router))
        }
        let uuid = UUID()
        let cases: [(ServiceRequest, @MainActor @Sendable () throws(ServiceError) -> Void)] = [
            (.audioActivate(category: "ambient"), { () throws(ServiceError) in try audio.setActive(true, category: "ambient") }),
            (.audioStop, { () throws(ServiceError) in try audio.setActive(false) }),
            (.audioPlay(samples: Data([0x01, 0x00, 0xfe, 0xff, 0x34, 0x12]), sampleRate: 8000),
             { () throws(ServiceError) in try audio.play(samples: [1, -2, 0x1234], sampleRate: 8000) }),
            (.locationStart, { () throws(ServiceError) in try location.startUpdatingLocation() }),
            (.locationAllowsBackgroundUpdates(false), { () throws(ServiceError) in try location.setAllowsBackgroundLocationUpdates(false) }),
            (.voipReportIncomingCall(uuid: uuid.uuidString, handle: "alice"),
             { () throws(ServiceError) in try calls.reportNewIncomingCall(uuid: uuid, handle: "alice") }),
            (.voipEndCall(uuid: uuid.uuidString), { () throws(ServiceError) in try calls.reportCallEnded(uuid: uuid) }),
            (.bleScan(services: ["180D"]), { () throws(ServiceError) in try central.scanForPeripherals(withServices: ["180D"]) }),
            (.bleScan(services: nil), { () throws(ServiceError) in try central.scanForPeripherals(withServices: nil) }),
            (.bleConnect(peripheral: "P1"), { () throws(ServiceError) in try central.connect("P1") }),
            (.bleStartAdvertising(services: ["FEED"], localName: "Probe"),
             { () throws(ServiceError) in try peripheral.startAdvertising(services: ["FEED"], localName: "Probe") }),
        ]
        var id: UInt64 = 0
        for (expected, call) in cases {
            for refuse in [false, true] {
                id += 1
                let pending = OnMain(call)
                let reason = "refused \(expected.apiName)"
                #expect(try await host.receive(replying: .reply(id: id, reply: .service(refuse ? .refused(reason: reason) : .ok)))
                        == .request(id: id, request: .service(expected)))
                let failure = await pending.result.failure
                #expect(failure == (refuse ? ServiceError.refused(reason) : nil), "\(expected.apiName)")
                if let failure, refuse { #expect(failure.description == reason) }
            }
        }
        #expect(fixture.recorder.log == [
            "CLLocationManager.allowsBackgroundLocationUpdates = false: refused: refused CLLocationManager.allowsBackgroundLocationUpdates",
        ])

        // A reply of the wrong shape, and the host failing to answer, are failures too.
        let wrong = OnMain { () throws(ServiceError) in try central.connect("P2") }
        #expect(try await host.receive(replying: .reply(id: id + 1, reply: .service(.token("beef")))) == .request(id: id + 1, request: .service(.bleConnect(peripheral: "P2"))))
        #expect(await wrong.result.failure?.kind == .failed)
        let unanswered = OnMain { () throws(ServiceError) in try central.connect("P3") }
        #expect(try await host.receive(replying: .reply(id: id + 2, reply: .failed(reason: "busy"))) == .request(id: id + 2, request: .service(.bleConnect(peripheral: "P3"))))
        #expect(await unanswered.result.failure == ServiceError(.failed, reason: "busy"))

        let (active, updating, scanning, advertising) = await MainActor.run {
            (audio.isActive, location.isUpdatingLocation, central.isScanning, peripheral.isAdvertising)
        }
        #expect(!active)  // the last audio call was a refused activation after a deactivation
        #expect(updating && scanning && advertising)
    }

    @Test("replies carrying values: a VoIP token, an authorization, the accessories; a long sound goes in several requests")
    func valuedReplies() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        let host = fixture.host, router = fixture.router
        let recorder = await MainActor.run { ServiceRecorder() }
        let (registry, location, accessories, audio) = await MainActor.run {
            let location = LocationManager(router: router)
            location.delegate = recorder
            return (PushRegistry(delegate: recorder, router: router), location, AccessoryManager(router: router), AudioSession(router: router))
        }

        let register = OnMain { () throws(ServiceError) in try registry.register() }
        #expect(try await host.receive(replying: .reply(id: 1, reply: .service(.token("c0ffee")))) == .request(id: 1, request: .service(.voipRegister)))
        #expect(try await register.result.get() == "c0ffee")
        #expect(await MainActor.run { registry.pushToken } == "c0ffee")

        // The status is there when the request returns; the delegate hears of the
        // change afterwards, on the main queue.
        let authorize = OnMain { () throws(ServiceError) -> [String] in
            location.requestAlwaysAuthorization()
            return recorder.calls
        }
        #expect(try await host.receive(replying: .reply(id: 2, reply: .service(.authorization(.always)))) == .request(id: 2, request: .service(.locationRequestAuthorization(always: true))))
        #expect(try await authorize.result.get() == [], "no delegate call before the request returned")
        #expect(await MainActor.run { location.authorizationStatus } == .always)
        var lines = recorder.lines.makeAsyncIterator()
        #expect(await lines.next() == "authorization always")

        let printer = Accessory(id: 7, name: "Printer", protocols: ["com.example.printer"])
        let list = OnMain { () throws(ServiceError) in accessories.connectedAccessories }
        #expect(try await host.receive(replying: .reply(id: 3, reply: .service(.accessories([printer])))) == .request(id: 3, request: .service(.accessoryList)))
        #expect(try await list.result.get() == [printer])

        let samples = (0..<300_000).map { Int16(truncatingIfNeeded: $0) }
        let play = OnMain { () throws(ServiceError) in try audio.play(samples: samples, sampleRate: 8000) }
        let split = AudioSession.maximumSamplesPerRequest
        #expect(try await host.receive(replying: .reply(id: 4, reply: .service(.ok))) == .request(id: 4, request: .service(.audioPlay(samples: AudioSession.encode(samples[..<split]), sampleRate: 8000))))
        #expect(try await host.receive(replying: .reply(id: 5, reply: .service(.ok))) == .request(id: 5, request: .service(.audioPlay(samples: AudioSession.encode(samples[split...]), sampleRate: 8000))))
        #expect(await play.result.failure == nil)
        #expect(AudioSession.encode(samples[..<2]) == Data([0x00, 0x00, 0x01, 0x00]))
        #expect(fixture.recorder.log.isEmpty)
    }

    @Test("calls that cannot throw log a failure to stderr; allowsBackgroundLocationUpdates refused stays false")
    func failuresLogged() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        let host = fixture.host, router = fixture.router
        let (location, central) = await MainActor.run { (LocationManager(router: router), CentralManager(delegate: nil, router: router)) }

        let stop = OnMain { () throws(ServiceError) in central.stopScan() }
        #expect(try await host.receive(replying: .reply(id: 1, reply: .service(.refused(reason: "no plugin")))) == .request(id: 1, request: .service(.bleStopScan)))
        #expect(await stop.result.failure == nil)

        let allow = OnMain { () throws(ServiceError) -> Bool in
            location.allowsBackgroundLocationUpdates = true
            return location.allowsBackgroundLocationUpdates
        }
        // (Without the mode the host answers `raise` and the app aborts: ProgrammerErrorTests
        // try that with a real process.)
        #expect(try await host.receive(replying: .reply(id: 2, reply: .service(.refused(reason: "the host is shutting down")))) == .request(id: 2, request: .service(.locationAllowsBackgroundUpdates(true))))
        #expect(try await allow.result.get() == false)

        let oddAnswer = OnMain { () throws(ServiceError) -> LocationAuthorization in
            location.requestWhenInUseAuthorization()
            return location.authorizationStatus
        }
        #expect(try await host.receive(replying: .reply(id: 3, reply: .service(.ok))) == .request(id: 3, request: .service(.locationRequestAuthorization(always: false))))
        #expect(try await oddAnswer.result.get() == .notDetermined)

        let log = fixture.recorder.log
        #expect(log.count == 3, "\(log)")
        #expect(log.first == "CBCentralManager.stopScan: refused: no plugin")
        #expect(log.dropFirst().first == "CLLocationManager.allowsBackgroundLocationUpdates = true: refused: the host is shutting down")
        #expect(log.last?.hasPrefix("CLLocationManager.requestWhenInUseAuthorization: the host could not carry out the call") == true)
    }

    @Test("a service event reaches its object's delegate on the main thread and is acknowledged after the handler returns")
    func eventsRouted() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        let host = fixture.host, router = fixture.router, app = fixture.application
        let recorder = await MainActor.run { ServiceRecorder() }
        let interruptions = await MainActor.run { InterruptionLog() }
        let printer = Accessory(id: 3, name: "Printer", protocols: ["com.example.printer"])
        let (location, silent, registry, central, accessories, audio, calls) = await MainActor.run {
            let location = LocationManager(router: router)
            location.delegate = recorder
            let accessories = AccessoryManager(router: router)
            accessories.delegate = recorder
            let audio = AudioSession(router: router)
            audio.interruptionHandler = { began, reason in
                interruptions.entries.append("\(began ? "began" : "ended") \(reason) main=\(onMainQueue())")
            }
            return (location, LocationManager(router: router), PushRegistry(delegate: recorder, router: router),
                    CentralManager(delegate: recorder, router: router), accessories, audio, CallProvider(router: router))
        }
        // As iOS requires, the push handler reports a call before it returns.
        let uuid = UUID()
        let reported = await MainActor.run { ReportBox() }
        await MainActor.run {
            recorder.hooks["push"] = {
                do {
                    try calls.reportNewIncomingCall(uuid: uuid, handle: "bob")
                    reported.ok = true
                } catch {
                    reported.ok = false
                }
            }
        }

        let fixes = [LocationFix(latitude: 48.5, longitude: 2.25), LocationFix(latitude: 48.75, longitude: 2.5)]
        try host.send(.callback(seq: 1, callback: .service(.locationUpdate(fixes)), state: .background))
        #expect(try await host.receive() == .callbackReturned(seq: 1))

        try host.send(.callback(seq: 2, callback: .service(.voipPush(payload: #"{"caller":"bob"}"#)), state: .background))
        #expect(try await host.receive(replying: .reply(id: 1, reply: .service(.ok))) == .request(id: 1, request: .service(.voipReportIncomingCall(uuid: uuid.uuidString, handle: "bob"))))
        #expect(try await host.receive() == .callbackReturned(seq: 2))

        let events: [ServiceEvent] = [
            .bleDiscovered(BLEPeripheral(id: "P2", services: ["180D"])),
            .bleConnected(peripheral: "P2"),
            .bleNotification(peripheral: "P2", characteristic: "2A37", value: Data([1, 2])),
            .bleDisconnected(peripheral: "P2"),
            .accessoryConnected(printer),
            .accessoryData(accessory: printer, protocolString: "com.example.printer", bytes: Data("hi".utf8)),
            .accessoryDisconnected(printer),
            .audioInterruption(began: true, reason: "went home"),
            .locationAuthorizationChanged(.denied),
        ]
        for (index, event) in events.enumerated() {
            try host.send(.callback(seq: UInt64(index + 3), callback: .service(event), state: .active))
        }
        for index in events.indices {
            #expect(try await host.receive() == .callbackReturned(seq: UInt64(index + 3)))
        }

        let (calledBack, offMain, latest, silentLatest, status, ok, interrupted, active, state) = await MainActor.run {
            (recorder.calls, recorder.offMainQueue, location.location, silent.location, location.authorizationStatus,
             reported.ok, interruptions.entries, audio.isActive, app.applicationState)
        }
        #expect(calledBack == [
            "location 48.5,2.25 48.75,2.5",
            #"push bob {"caller":"bob"}"#,
            "discovered P2",
            "connected P2",
            "value P2 2A37 [1, 2]",
            "disconnected P2",
            "accessory-connected Printer",
            "accessory-data Printer com.example.printer hi",
            "accessory-disconnected Printer",
            // Both managers are alive; only one has a delegate.
            "authorization denied",
        ])
        #expect(offMain.isEmpty)
        #expect(latest == fixes.last)
        #expect(silentLatest == fixes.last, "every live manager gets the fixes")
        #expect(status == .denied)
        #expect(ok == true)
        #expect(interrupted == ["began went home main=true"])
        #expect(!active)
        #expect(state == .active)
        #expect(fixture.recorder.log.isEmpty)
        withExtendedLifetime((registry, central, accessories)) {}
    }

    @Test("an event nobody can receive is logged, dropped and still acknowledged; a released manager no longer receives")
    func unreceivedEvents() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        let host = fixture.host, router = fixture.router
        // Created and released at once: the router holds it weakly.
        await MainActor.run { _ = LocationManager(router: router) }

        let accessory = Accessory(id: 1, name: "Scale", protocols: ["com.example.scale"])
        let events: [ServiceEvent] = [
            .voipPush(payload: "{}"),
            .locationUpdate([LocationFix(latitude: 1, longitude: 2)]),
            .audioInterruption(began: false, reason: "back"),
            .bleConnected(peripheral: "P9"),
            .accessoryConnected(accessory),
        ]
        for (index, event) in events.enumerated() {
            try host.send(.callback(seq: UInt64(index + 1), callback: .service(event), state: .background))
            #expect(try await host.receive() == .callbackReturned(seq: UInt64(index + 1)))
        }
        #expect(fixture.recorder.log == [
            "didReceiveIncomingPush(voIP): no PushRegistry exists in this app to receive it; the event is dropped",
            "didUpdateLocations(1): no LocationManager exists in this app to receive it; the event is dropped",
            "audioInterruption(ended): no AudioSession exists in this app to receive it; the event is dropped",
            "didConnect(P9): no CentralManager exists in this app to receive it; the event is dropped",
            "accessoryDidConnect(Scale): no AccessoryManager exists in this app to receive it; the event is dropped",
        ])

        // An authorization change with no manager is still remembered for the next one.
        try host.send(.callback(seq: 6, callback: .service(.locationAuthorizationChanged(.whenInUse)), state: .background))
        #expect(try await host.receive() == .callbackReturned(seq: 6))
        #expect(await MainActor.run { LocationManager(router: router).authorizationStatus } == .whenInUse)
        #expect(fixture.recorder.log.count == 6)
    }

    @Test("registerForRemoteNotifications tells the delegate after it returns: the token, or the refusal")
    func remoteNotifications() async throws {
        let fixture = try await Fixture()
        defer { fixture.tearDown() }
        let host = fixture.host, app = fixture.application, delegate = fixture.delegate
        var outcomes = delegate.outcomes.makeAsyncIterator()

        let first = OnMain { () throws(ServiceError) -> Int in
            app.registerForRemoteNotifications()
            return delegate.count
        }
        #expect(try await host.receive(replying: .reply(id: 1, reply: .service(.token("00ff")))) == .request(id: 1, request: .service(.registerForRemoteNotifications)))
        #expect(try await first.result.get() == 0, "the delegate hears only after the call returned")
        #expect(await outcomes.next() == .token("00ff"))

        let second = OnMain { () throws(ServiceError) -> Int in
            app.registerForRemoteNotifications()
            return delegate.count
        }
        #expect(try await host.receive(replying: .reply(id: 2, reply: .service(.refused(reason: "no valid \"aps-environment\" entitlement")))) == .request(id: 2, request: .service(.registerForRemoteNotifications)))
        #expect(try await second.result.get() == 1)
        #expect(await outcomes.next() == .failure(.refused("no valid \"aps-environment\" entitlement")))
        #expect(fixture.recorder.log.isEmpty)
    }
}

/// Interruptions an audio handler saw.
@MainActor private final class InterruptionLog {
    var entries: [String] = []
}

/// Whether a handler's call report succeeded.
@MainActor private final class ReportBox {
    var ok: Bool?
}
