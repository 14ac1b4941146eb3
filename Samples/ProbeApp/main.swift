// ProbeApp: a scripted fixture for host tests. It does at each callback what its
// arguments say (see Script.swift or `ProbeApp --help`), so a test can make an
// app hold tasks, misbehave at expiration, block or hang its main thread, hold
// file locks, crash or break the protocol exactly when it wants, call the host's
// services (audio, location, VoIP, BLE, accessories, push registration, background
// fetch, BGTaskScheduler, background URLSession) and react to their events, or probe what the sandbox
// lets it open.
import AppHostProtocol
import AppKitLess
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Prints a line to stdout and flushes (stdout is a log file).
func say(_ line: String) {
    print(line)
    fflush(nil)
}

/// Writes a diagnostic line to stderr (also the app's log).
func complain(_ line: String) {
    FileHandle.standardError.write(Data("ProbeApp: \(line)\n".utf8))
}

/// Blocks the calling thread until one byte can be read from the FIFO at `path`.
func waitFIFO(_ path: String) {
    say("[ProbeApp] waiting on \(path)")
    let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
    var byte: UInt8 = 0
    if fd < 0 || read(fd, &byte, 1) != 1 {
        FileHandle.standardError.write(Data("ProbeApp: wait-fifo \(path): \(String(cString: strerror(errno)))\n".utf8))
    }
    if fd >= 0 { close(fd) }
    say("[ProbeApp] \(path) released")
}

/// Blocks the calling (main) thread for good, asleep: `pause()` returns only when a
/// signal handler ran, so it is called again.
func blockForever() -> Never {
    while true {
        pause()
    }
}

/// `strerror` and the number, for failure lines.
func describeErrno(_ code: Int32) -> String {
    "\(String(cString: strerror(code))) (errno \(code))"
}

/// The symbolic name of an errno ("EPERM"), or "errno N".
func errnoName(_ code: Int32) -> String {
    let names: [Int32: String] = [
        EPERM: "EPERM", ENOENT: "ENOENT", EINTR: "EINTR", EIO: "EIO", ENXIO: "ENXIO",
        EBADF: "EBADF", EAGAIN: "EAGAIN", ENOMEM: "ENOMEM", EACCES: "EACCES", EFAULT: "EFAULT",
        EBUSY: "EBUSY", EEXIST: "EEXIST", ENODEV: "ENODEV", ENOTDIR: "ENOTDIR", EISDIR: "EISDIR",
        EINVAL: "EINVAL", ENFILE: "ENFILE", EMFILE: "EMFILE", ETXTBSY: "ETXTBSY", EROFS: "EROFS",
        ELOOP: "ELOOP", ENAMETOOLONG: "ENAMETOOLONG", ENOSYS: "ENOSYS", EPROTOTYPE: "EPROTOTYPE",
        EPROTONOSUPPORT: "EPROTONOSUPPORT", ESOCKTNOSUPPORT: "ESOCKTNOSUPPORT",
        EOPNOTSUPP: "EOPNOTSUPP", EAFNOSUPPORT: "EAFNOSUPPORT", EPFNOSUPPORT: "EPFNOSUPPORT",
    ]
    return names[code] ?? "errno \(code)"
}

/// A service call's outcome line: "<action>: ok", "<action>: refused: <reason>",
/// or "<action>: failed: <error>".
func outcome(_ action: String, _ error: ServiceError?) -> String {
    guard let error else { return "[ProbeApp] \(action): ok" }
    switch error.kind {
    case .refused: return "[ProbeApp] \(action): refused: \(error.reason)"
    default: return "[ProbeApp] \(action): failed: \(error)"
    }
}

/// Runs a service call and prints its outcome line.
@MainActor func report(_ action: String, _ call: () throws(ServiceError) -> Void) {
    do {
        try call()
        say(outcome(action, nil))
    } catch {
        say(outcome(action, error))
    }
}

/// Bytes as UTF-8 text when they are printable, else as 0x-hex.
func printable(_ bytes: Data) -> String {
    if let text = String(data: bytes, encoding: .utf8),
       !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control && $0 != "\t" }) {
        return text
    }
    return "0x" + bytes.map { String(format: "%02x", $0) }.joined()
}

/// `count` samples of a 440 Hz sine at `rate` Hz, at a third of full scale.
func tone(seconds: Double, rate: Int) -> [Int16] {
    let count = Int((seconds * Double(rate)).rounded())
    let step = 2 * Double.pi * 440 / Double(rate)
    return (0..<count).map { Int16((sin(Double($0) * step) * 32767 / 3).rounded()) }
}

/// A task id filled in after `beginBackgroundTask` returns.
@MainActor final class TaskRef {
    var id = BackgroundTaskIdentifier.invalid
}

/// Whether the probe already completed a BGTask (from its plan or its expiration handler).
@MainActor final class BGTaskRef {
    let task: BGTask
    var completed = false
    init(_ task: BGTask) { self.task = task }
}

/// A BGTaskScheduler error's outcome line: "refused: REASON" for a refusal by the
/// host, else "failed: CODE REASON".
func outcome(_ action: String, _ error: BGTaskScheduler.Error) -> String {
    if let service = error.serviceError, service.kind == .refused {
        return "[ProbeApp] \(action): refused: \(service.reason)"
    }
    return "[ProbeApp] \(action): failed: \(error.code.rawValue) \(error.reason)"
}

/// JSON on one line: as sent when it is, else re-serialized compactly.
func oneLine(_ json: String) -> String {
    guard json.contains(where: \.isNewline) else { return json }
    if let data = json.data(using: .utf8),
       let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]),
       let compact = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed]) {
        return String(decoding: compact, as: UTF8.self)
    }
    return json.split(whereSeparator: \.isNewline).joined(separator: " ")
}

/// A lock the probe holds: how it was taken and the descriptor that keeps it.
struct HeldLock {
    enum Kind: String {
        case flock, posix
    }
    var kind: Kind
    var descriptor: Int32
}

/// Runs the script's actions at each callback and service event.
final class ProbeDelegate: ApplicationDelegate {
    let script: Script
    /// Memory kept by `allocate` (never freed).
    private var kept: [UnsafeMutableRawPointer] = []
    /// Task ids by name, latest last (ended ones included, for double-end probes).
    private var tasks: [String: [BackgroundTaskIdentifier]] = [:]
    /// Tasks still open, by id.
    private var open: Set<BackgroundTaskIdentifier> = []
    /// Locks held, by PATH as written on the command line.
    private var locks: [String: [HeldLock]] = [:]
    /// Descriptors `hold-open:` keeps, by PATH as written (at most 64).
    private var heldOpen: [String: Int32] = [:]
    /// The label of the window `window:TEXT` shows.
    private var label: Label?

    // The service objects, made at start so every event has a receiver.
    private let locationManager = LocationManager()
    private lazy var pushRegistry = PushRegistry(delegate: self)
    private lazy var central = CentralManager(delegate: self)
    private let peripheral = PeripheralManager()
    private let callProvider = CallProvider()
    /// Calls reported, latest last; `end-call` ends the last one still open.
    private var calls: [UUID] = []
    /// Calls reported by this process: their UUIDs are numbered, not random, so a
    /// scenario's log is the same in every run.
    private var callsReported = 0
    /// Background URL sessions made, by identifier (one per identifier, for the process's life).
    private var sessions: [String: BackgroundURLSession] = [:]
    /// handleEvents completions kept for urlSessionDidFinishEvents (--events-completion finish).
    private var eventsCompletions: [String: @Sendable () -> Void] = [:]
    /// Tasks ("session#N") whose first progress callback has been seen (the `progress` trigger).
    private var progressed: Set<String> = []
    /// Documents/downloads exists (made by the first finished download).
    /// `Documents/downloads` once made (the first download makes it).
    private var downloadsDirectory: String?
    /// Host timers scheduled by `timer:`, by name (latest), and how often each fired.
    private var hostTimers: [String: HostTimer] = [:]
    private var timerFires: [String: Int] = [:]

    init(script: Script) {
        self.script = script
        locationManager.delegate = self
        _ = pushRegistry
        _ = central
        AccessoryManager.shared.delegate = self
        AudioSession.shared.interruptionHandler = { [unowned self] began, reason in
            say("[ProbeApp] interruption \(began ? "began" : "ended"): \(reason)")
            fire(.interruption, application: Application.shared)
        }
    }

    func didFinishLaunching(_ application: Application, options: LaunchOptions) -> Bool {
        if options.afterJetsam { say("[ProbeApp] launched after jetsam (LaunchOptions.afterJetsam)") }
        if options.reason == .location { say("[ProbeApp] launched for a location event (LaunchOptions.reason location)") }
        run(.launch, "didFinishLaunching", application)
        return true
    }
    func willResignActive(_ application: Application) { run(.resign, "willResignActive", application) }
    func didEnterBackground(_ application: Application) { run(.background, "didEnterBackground", application) }
    func willEnterForeground(_ application: Application) { run(.foreground, "willEnterForeground", application) }
    func didBecomeActive(_ application: Application) { run(.active, "didBecomeActive", application) }
    func willTerminate(_ application: Application) { run(.terminate, "willTerminate", application) }
    func applicationDidReceiveMemoryWarning(_ application: Application) {
        run(.memoryWarning, "didReceiveMemoryWarning", application)
    }
    func protectedDataWillBecomeUnavailable(_ application: Application) {
        run(.dataUnavailable, "protectedDataWillBecomeUnavailable", application)
    }
    func protectedDataDidBecomeAvailable(_ application: Application) {
        run(.dataAvailable, "protectedDataDidBecomeAvailable", application)
    }

    func didRegisterForRemoteNotifications(_ application: Application, deviceToken: String) {
        say("[ProbeApp] push token \(deviceToken)")
    }
    func didFailToRegisterForRemoteNotifications(_ application: Application, error: ServiceError) {
        say("[ProbeApp] push registration failed: \(error)")
    }

    func performFetch(_ application: Application, completion: @escaping @Sendable (FetchResult) -> Void) {
        let id = application.backgroundEventIdentifier.map { "\($0)" } ?? "?"
        say("[ProbeApp] performFetch id=\(id) state=\(application.applicationState)")
        fire(.fetch, application: application)
        answer(script.fetchResult, "fetch", completion)
    }

    func didReceiveRemoteNotification(_ application: Application, userInfo: RemoteNotification,
                                      completion: @escaping @Sendable (FetchResult) -> Void) {
        say("[ProbeApp] remote notification silent=\(userInfo.isSilent) userInfo=\(oneLine(userInfo.json))")
        fire(.push, application: application)
        answer(script.pushResult, "push", completion)
    }

    func handleEventsForBackgroundURLSession(_ application: Application, identifier: String,
                                             completion: @escaping @Sendable () -> Void) {
        say("[ProbeApp] handleEvents \(identifier)")
        _ = session(identifier)
        fire(.urlEvents, application: application)
        switch script.eventsCompletion {
        case .now:
            say("[ProbeApp] events completed \(identifier)")
            completion()
        case .never:
            break
        case .finish:
            eventsCompletions[identifier] = completion
        }
    }

    /// Background session `identifier`, made (printing its tasks) if the probe has not yet,
    /// then discretionary, Wi-Fi only and/or without launch events as asked.
    private func session(_ identifier: String, discretionary: Bool = false, wifiOnly: Bool = false,
                         noLaunchEvents: Bool = false) -> BackgroundURLSession {
        if let session = sessions[identifier] { return session }
        var configuration = BackgroundURLSessionConfiguration.background(withIdentifier: identifier)
        configuration.isDiscretionary = discretionary
        configuration.allowsCellularAccess = !wifiOnly
        configuration.sessionSendsLaunchEvents = !noLaunchEvents
        let session = BackgroundURLSession(configuration: configuration, delegate: self)
        sessions[identifier] = session
        printTasks(identifier, session.getAllTasks())
        return session
    }

    /// "[ProbeApp] url-session ID: N tasks", then one line per task.
    private func printTasks(_ identifier: String, _ tasks: [BackgroundURLSessionTask]) {
        say("[ProbeApp] url-session \(identifier): \(tasks.count) tasks")
        for task in tasks {
            let bytes = task.kind == .download ? task.countOfBytesReceived : task.countOfBytesSent
            say("[ProbeApp] url-task \(task.taskIdentifier) \(task.kind.rawValue) \(task.state) \(task.url.absoluteString) bytes=\(bytes)")
        }
    }

    /// Resumes `task` and prints "[ProbeApp] LABEL started task=N" or why it failed.
    private func start(_ task: BackgroundURLSessionTask, _ label: String) {
        task.resume()
        if let error = task.error {
            say("[ProbeApp] \(label): failed: \(error)")
        } else {
            say("[ProbeApp] \(label) started task=\(task.taskIdentifier)")
        }
    }

    /// `downloads:ID:COUNT:URL`: resumes COUNT download tasks (pipelined: `resume()`
    /// does not wait for the host), `{n}` in the URL replaced by 1...COUNT, and prints
    /// one summary line rather than one a task, so the log stays small for 10,000 of
    /// them. The errors are read once every task is resumed (reading one waits for
    /// the host's answer to that task).
    private func startDownloads(_ session: BackgroundURLSession, count: Int, template: String) {
        var started = 0
        var firstError: String?
        var resumed: [(BackgroundURLSessionTask, String)] = []
        resumed.reserveCapacity(count)
        for n in 1...count {
            let text = template.replacingOccurrences(of: "{n}", with: String(n))
            guard let target = URL(string: text) else {
                firstError = firstError ?? "not a URL: \(text)"
                continue
            }
            let task = session.downloadTask(with: target)
            task.resume()
            resumed.append((task, text))
        }
        for (task, text) in resumed {
            if let error = task.error {
                firstError = firstError ?? "task for \(text): \(error)"
            } else {
                started += 1
            }
        }
        if let firstError {
            say("[ProbeApp] downloads started \(started) failed \(count - started): \(firstError)")
        } else {
            say("[ProbeApp] downloads started \(started)")
        }
    }

    /// Calls a fetch or push completion as `plan` says, printing
    /// "[ProbeApp] LABEL completed RESULT" just before (the host may suspend us after).
    private func answer(_ plan: CompletionPlan, _ label: String, _ completion: @escaping @Sendable (FetchResult) -> Void) {
        switch plan {
        case .now(let result):
            say("[ProbeApp] \(label) completed \(result.rawValue)")
            completion(result)
        case .never:
            break
        case .after(let seconds, let result):
            // On the host's clock, so a scenario on the virtual clock completes it at
            // its virtual time.
            later(seconds, "\(label) completion") {
                say("[ProbeApp] \(label) completed \(result.rawValue)")
                completion(result)
            }
        }
    }

    /// Runs `body` on the main queue `seconds` from now on the host's clock (a one-shot
    /// ``HostTimer``); says so on stderr if the host refuses the timer.
    private func later(_ seconds: Double, _ what: String, _ body: @escaping @MainActor @Sendable () -> Void) {
        do {
            try HostTimer.scheduledTimer(withTimeInterval: seconds, repeats: false) { _ in body() }
        } catch {
            complain("\(what) after \(seconds)s: no host timer: \(error)")
        }
    }

    /// A BGTaskScheduler launch: print, set the expiration handler, run the bgtask
    /// actions, then complete the task as --bgtask says.
    private func bgTaskLaunched(_ task: BGTask) {
        let kind = task is BGProcessingTask ? "processing" : "refresh"
        say("[ProbeApp] bgtask launch \(task.identifier) \(kind)")
        let ref = BGTaskRef(task)
        let onExpiry = script.bgTaskExpire
        task.expirationHandler = { [unowned self] in
            MainActor.assumeIsolated {
                say("[ProbeApp] bgtask expired \(task.identifier)")
                fire(.bgtaskExpire, application: .shared)
                if onExpiry == .complete { complete(ref, success: false) }
            }
        }
        fire(.bgtask, application: .shared)
        switch script.bgTask {
        case .complete:
            complete(ref, success: true)
        case .never:
            break
        case .after(let seconds):
            later(seconds, "bgtask completion") { [unowned self] in complete(ref, success: true) }
        }
    }

    /// Completes a BGTask once, printing "[ProbeApp] bgtask completed ID" first.
    private func complete(_ ref: BGTaskRef, success: Bool) {
        guard !ref.completed else { return }
        ref.completed = true
        say("[ProbeApp] bgtask completed \(ref.task.identifier)")
        ref.task.setTaskCompleted(success: success)
    }

    private func run(_ trigger: Trigger, _ callback: String, _ application: Application) {
        say("[ProbeApp] \(callback) state=\(application.applicationState)")
        fire(trigger, application: application)
    }

    /// Runs the actions given for `trigger`.
    fileprivate func fire(_ trigger: Trigger, application: Application) {
        for action in script.actions[trigger] ?? [] {
            perform(action, application)
        }
    }

    private func perform(_ action: Action, _ application: Application) {
        switch action {
        case .print(let text):
            say(text)
        case .holdTask(let name, let seconds):
            let id = begin(name, application)
            if seconds > 0 {
                later(seconds, "hold-task \(name)") { [unowned self] in
                    // Its expiration handler may have ended it already; a
                    // well-behaved app does not end a task twice.
                    if open.contains(id) {
                        end(name, id, application)
                    } else {
                        say("[ProbeApp] task \(name) id=\(id) already ended; not ending it again")
                    }
                }
            }
        case .holdTasks(let count, let prefix):
            for index in 1...count {
                begin("\(prefix)\(index)", application)
            }
        case .beginTask(let name):
            begin(name, application)
        case .endTask(let name):
            guard let id = tasks[name]?.last else {
                complain("end-task: no task named \(name) was begun")
                return
            }
            end(name, id, application)
        case .block(let seconds):
            // Real time on purpose, whatever the host's clock: this is the app misbehaving
            // (a main thread held in one turn), which the host's watchdogs must see.
            say("[ProbeApp] blocking the main thread for \(seconds)s")
            Thread.sleep(forTimeInterval: seconds)
            say("[ProbeApp] unblocked")
        case .blockForever:
            say("[ProbeApp] blocking the main thread forever")
            blockForever()
        case .logFlood(let mebibytes):
            let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 64 * 1024 - 1) + [0x0a]
            var written = 0
            for _ in 0..<(mebibytes * 16) {
                let n = chunk.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
                if n > 0 { written += n }
            }
            say("[ProbeApp] wrote \(written) bytes to stdout")
        case .spin(let seconds):
            // A slow app, not a blocked one: the thread runs (or waits for a CPU) throughout.
            say("[ProbeApp] spinning the main thread for \(seconds)s")
            let until = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
            var turns: UInt64 = 0
            while ContinuousClock.now < until { turns &+= 1 }
            say("[ProbeApp] spun (\(turns > 0 ? "done" : "no time"))")
        case .allocate(let mebibytes):
            for i in 0..<mebibytes {
                guard let block = malloc(1 << 20) else {
                    say("[ProbeApp] allocation failed after \(i) MiB")
                    return
                }
                memset(block, 0xA5, 1 << 20)
                kept.append(block)
            }
            say("[ProbeApp] allocated \(mebibytes) MiB")
            // The pages are touched (memset), so the kernel counts them; the host reads them now.
            application.footprintDidChange()
        case .fork(let count):
            let (pids, failure) = forkSleepers(count)
            say(forkLine("forked", pids, of: count, failure, listing: true))
        case .forkLimit(let count):
            let (pids, failure) = forkSleepers(count)
            say(forkLine("fork-limit: forked", pids, of: count, failure, listing: false))
            for pid in pids { Glibc.kill(pid, SIGKILL) }
            for pid in pids { reap(pid) }
        case .forkAllocate(let mebibytes):
            let pid = forkAllocator(mebibytes: mebibytes)
            guard pid > 0 else {
                say("[ProbeApp] fork-allocate: \(errnoName(-pid))")
                return
            }
            say("[ProbeApp] child \(pid) allocating \(mebibytes) MiB: \(reap(pid))")
        case .spawn(let path):
            say("[ProbeApp] spawn \(path): \(spawnAndReap(path))")
        case .threads(let count):
            let (started, error) = startBlockedThreads(count)
            say("[ProbeApp] threads: started \(started) of \(count)\(error == 0 ? "" : " (\(errnoName(error)))")")
        case .writeFile(let path, let bytes):
            let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else {
                say("[ProbeApp] write-file \(path): \(String(cString: strerror(errno)))")
                return
            }
            defer { close(fd) }
            let chunk = [UInt8](repeating: 0x5A, count: 1 << 20)
            var written: Int64 = 0
            var failure = ""
            while written < bytes {
                let n = chunk.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, Int(min(Int64(1 << 20), bytes - written))) }
                if n < 0 {
                    failure = " (\(errno == EFBIG ? "EFBIG" : String(cString: strerror(errno))))"
                    break
                }
                written += Int64(n)
            }
            say("[ProbeApp] wrote \(written) of \(bytes) to \(path)\(failure)")
        case .waitFIFO(let path):
            waitFIFO(path)
        case .hang:
            say("[ProbeApp] the main thread will hang once this callback returns")
            DispatchQueue.main.async {
                say("[ProbeApp] hanging the main thread forever")
                blockForever()
            }
        case .hangFIFO(let path):
            say("[ProbeApp] the main thread will wait on \(path) once this callback returns")
            DispatchQueue.main.async { waitFIFO(path) }
        case .lock(let path):
            takeLock(.flock, on: path)
        case .posixLock(let path):
            takeLock(.posix, on: path)
        case .unlock(let path):
            releaseLocks(on: path)
        case .exit(let code):
            say("[ProbeApp] exiting with status \(code)")
            exit(code)
        case .crash:
            say("[ProbeApp] crashing")
            fatalError("ProbeApp: crash requested by the script")
        case .garbage:
            say("[ProbeApp] writing garbage to the IPC socket")
            let payload = Array("this is not JSON".utf8)
            writeRaw([0, 0, 0, UInt8(payload.count)] + payload)
        case .oversized:
            say("[ProbeApp] writing an oversized frame header to the IPC socket")
            let length: UInt32 = 100 << 20
            writeRaw([UInt8(length >> 24), UInt8((length >> 16) & 0xff), UInt8((length >> 8) & 0xff), UInt8(length & 0xff)])
        case .timeRemaining:
            say("[ProbeApp] backgroundTimeRemaining=\(application.backgroundTimeRemaining)")
        case .window(let text):
            if let label {
                label.text = text
            } else {
                let label = Label(text: text, frame: Rect(x: 20, y: 100, width: Window.bounds.width - 40, height: 40))
                application.window = Window(backgroundColor: .white, rootView: label)
                self.label = label
            }
            say("[ProbeApp] window: \(text)")
        case .ignoreSnapshot:
            application.ignoreSnapshotOnNextApplicationLaunch()
            say("[ProbeApp] ignore-snapshot: ok")
        case .timer(let name, let seconds, let repeats):
            do {
                let timer = try HostTimer.scheduledTimer(withTimeInterval: seconds, repeats: repeats) { [unowned self] _ in
                    let count = (timerFires[name] ?? 0) + 1
                    timerFires[name] = count
                    say("[ProbeApp] timer \(name) fired \(count) state=\(Application.shared.applicationState)")
                    fire(.timer, application: .shared)
                }
                hostTimers[name] = timer
                say("[ProbeApp] timer \(name) scheduled interval=\(timer.timeInterval)\(repeats ? " repeats" : "")")
            } catch {
                say(outcome("timer \(name)", error))
            }
        case .invalidateTimer(let name):
            guard let timer = hostTimers[name] else {
                complain("invalidate-timer: no timer named \(name) was scheduled")
                return
            }
            timer.invalidate()
            say("[ProbeApp] timer \(name) invalidated")
        case .timers(let count, let seconds):
            var scheduled = 0
            var refusal: ServiceError?
            for _ in 0..<count {
                do {
                    try HostTimer.scheduledTimer(withTimeInterval: seconds, repeats: false) { _ in }
                    scheduled += 1
                } catch {
                    refusal = error
                    break
                }
            }
            let why = refusal.map { ": \($0.kind == .refused ? "refused: \($0.reason)" : "failed: \($0)")" } ?? ""
            say("[ProbeApp] timers: scheduled \(scheduled) of \(count)\(why)")
        case .timerChurn(let count):
            for index in 0..<count {
                do {
                    try HostTimer.scheduledTimer(withTimeInterval: 60, repeats: false) { _ in }.invalidate()
                } catch {
                    say("[ProbeApp] timer-churn: stopped at \(index) of \(count): \(error)")
                    return
                }
            }
            say("[ProbeApp] timer-churn: \(count) done")
        case .audioPlay(let seconds):
            let samples = tone(seconds: seconds, rate: 8000)
            report("audio-play") { () throws(ServiceError) in try AudioSession.shared.play(samples: samples, sampleRate: 8000) }
        case .audioStop:
            report("audio-stop") { () throws(ServiceError) in try AudioSession.shared.setActive(false) }
        case .locationAuth(let always):
            if always {
                locationManager.requestAlwaysAuthorization()
            } else {
                locationManager.requestWhenInUseAuthorization()
            }
            say("[ProbeApp] location authorization \(locationManager.authorizationStatus.rawValue)")
        case .locationStart:
            report("location-start") { () throws(ServiceError) in try locationManager.startUpdatingLocation() }
        case .locationStop:
            locationManager.stopUpdatingLocation()
            say(outcome("location-stop", nil))
        case .locationBackground(let on):
            report("location-background") { () throws(ServiceError) in try locationManager.setAllowsBackgroundLocationUpdates(on) }
        case .significantChanges(true):
            report("significant-changes") { () throws(ServiceError) in try locationManager.startMonitoringSignificantLocationChanges() }
        case .significantChanges(false):
            locationManager.stopMonitoringSignificantLocationChanges()
            say(outcome("significant-changes", nil))
        case .monitorRegion(let region):
            locationManager.startMonitoring(for: region)
            say(outcome("monitor-region", nil))
        case .stopRegion(let identifier):
            locationManager.stopMonitoring(for: CircularRegion(identifier: identifier, latitude: 0, longitude: 0, radius: 1))
            say(outcome("stop-region", nil))
        case .regions:
            let ids = locationManager.monitoredRegions.map(\.identifier).sorted()
            say("[ProbeApp] regions \(ids.isEmpty ? "none" : ids.joined(separator: ","))")
        case .voipRegister:
            do {
                say("[ProbeApp] voip token \(try pushRegistry.register())")
            } catch {
                say(outcome("voip-register", error))
            }
        case .reportCall:
            callsReported += 1
            let uuid = UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", callsReported)) ?? UUID()
            say("[ProbeApp] reporting call \(uuid.uuidString)")
            report("report-call") { () throws(ServiceError) in
                try callProvider.reportNewIncomingCall(uuid: uuid, handle: "ProbeApp")
                calls.append(uuid)
            }
        case .endCall:
            guard let uuid = calls.popLast() else {
                complain("end-call: no call was reported")
                return
            }
            say("[ProbeApp] ending call \(uuid.uuidString)")
            report("end-call") { () throws(ServiceError) in try callProvider.reportCallEnded(uuid: uuid) }
        case .bleScan(let services):
            report("ble-scan") { () throws(ServiceError) in try central.scanForPeripherals(withServices: services) }
        case .bleStopScan:
            central.stopScan()
            say(outcome("ble-stop-scan", nil))
        case .bleConnect(let id):
            report("ble-connect") { () throws(ServiceError) in try central.connect(id) }
        case .bleAdvertise(let services):
            report("ble-advertise") { () throws(ServiceError) in try peripheral.startAdvertising(services: services, localName: "ProbeApp") }
        case .bleStopAdvertise:
            peripheral.stopAdvertising()
            say(outcome("ble-stop-advertise", nil))
        case .accessoryList:
            let accessories = AccessoryManager.shared.connectedAccessories
            say("[ProbeApp] accessory-list: \(accessories.count) accessories")
            for accessory in accessories {
                say("[ProbeApp] accessory \(accessory.id) \(accessory.name) \(accessory.protocols.joined(separator: ","))")
            }
        case .registerPush:
            application.registerForRemoteNotifications()
        case .socket(let family):
            trySocket(family)
        case .open(let path):
            let fd = Glibc.open(resolved(path), O_RDWR | O_CLOEXEC)
            if fd >= 0 {
                close(fd)
                say("[ProbeApp] open \(path): ok")
            } else {
                say("[ProbeApp] open \(path): \(errnoName(errno))")
            }
        case .writeProtected(let path, let protection):
            let options: Data.WritingOptions = switch protection {
            case .complete: .completeFileProtection
            case .completeUnlessOpen: .completeFileProtectionUnlessOpen
            case .completeUntilFirstUserAuthentication: .completeFileProtectionUntilFirstUserAuthentication
            case .none: .noFileProtection
            }
            do {
                try Data("secret".utf8).writeProtected(to: URL(fileURLWithPath: resolved(path)), options: options)
                say("[ProbeApp] write-protected \(path): ok")
            } catch {
                say("[ProbeApp] write-protected \(path): failed: \((error as? CocoaError)?.userInfo[NSLocalizedDescriptionKey] ?? error)")
            }
        case .protectedData:
            say("[ProbeApp] protected data \(application.isProtectedDataAvailable ? "available" : "unavailable")")
        case .read(let path):
            let fd = Glibc.open(resolved(path), O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                say("[ProbeApp] read \(path): \(errnoName(errno))")
                break
            }
            var buffer = [UInt8](repeating: 0, count: 64)
            let n = Glibc.read(fd, &buffer, buffer.count)
            let code = errno
            close(fd)
            say("[ProbeApp] read \(path): \(n >= 0 ? "ok" : errnoName(code))")
        case .holdOpen(let path):
            guard heldOpen[path] != nil || heldOpen.count < 64 else {
                say("[ProbeApp] hold-open \(path): EMFILE (64 held)")
                break
            }
            let fd = Glibc.open(resolved(path), O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                say("[ProbeApp] hold-open \(path): \(errnoName(errno))")
                break
            }
            if let old = heldOpen.updateValue(fd, forKey: path) { close(old) }
            say("[ProbeApp] hold-open \(path): ok")
        case .readHeld(let path):
            guard let fd = heldOpen[path] else {
                say("[ProbeApp] read-held \(path): not held")
                break
            }
            var buffer = [UInt8](repeating: 0, count: 64)
            let n = pread(fd, &buffer, buffer.count, 0)
            say("[ProbeApp] read-held \(path): \(n >= 0 ? "ok" : errnoName(errno))")
        case .write(let path):
            let fd = Glibc.open(resolved(path), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o666) // the umask decides, as for Foundation's writers
            if fd >= 0 {
                close(fd)
                say("[ProbeApp] write \(path): ok")
            } else {
                say("[ProbeApp] write \(path): \(errnoName(errno))")
            }
        case .kill(let pid, let signal):
            say("[ProbeApp] kill \(pid): \(Glibc.kill(pid, signal) == 0 ? "ok" : errnoName(errno))")
        case .capabilities:
            let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
            for line in status.split(separator: "\n") where line.hasPrefix("Cap") {
                say("[ProbeApp] " + line.split(whereSeparator: { $0 == ":" || $0 == "\t" || $0 == " " }).joined(separator: " "))
            }
        case .group(let identifier):
            let url = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: identifier)
            say("[ProbeApp] group \(identifier): \(url?.path ?? "none")")
        case .fetchInterval(let interval):
            report("fetch-interval") { () throws(ServiceError) in try application.setMinimumBackgroundFetchInterval(interval) }
        case .refreshStatus:
            say("[ProbeApp] refresh status \(application.backgroundRefreshStatus.rawValue)")
        case .bgRegister(let identifier):
            // No queue: the handler runs on the main queue, inside the launch callback.
            let registered = BGTaskScheduler.shared.register(forTaskWithIdentifier: identifier) { [unowned self] task in
                MainActor.assumeIsolated { bgTaskLaunched(task) }
            }
            say(registered ? outcome("bg-register", nil)
                : "[ProbeApp] bg-register: refused: register(forTaskWithIdentifier: \(identifier)) returned false (reason on stderr)")
        case .bgSubmit(let kind, let identifier, let seconds, let power, let network):
            let request: BGTaskRequest
            switch kind {
            case .refresh:
                request = BGAppRefreshTaskRequest(identifier: identifier)
            case .processing:
                let processing = BGProcessingTaskRequest(identifier: identifier)
                processing.requiresExternalPower = power
                processing.requiresNetworkConnectivity = network
                request = processing
            }
            request.earliestBeginDate = seconds.map { Date(timeIntervalSinceNow: $0) }
            do {
                try BGTaskScheduler.shared.submit(request)
                say(outcome("bg-submit", nil))
            } catch {
                say(outcome("bg-submit", error))
            }
        case .bgCancel(let identifier):
            if let identifier {
                BGTaskScheduler.shared.cancel(taskRequestWithIdentifier: identifier)
            } else {
                BGTaskScheduler.shared.cancelAllTaskRequests()
            }
            say(outcome("bg-cancel", nil))
        case .bgPending:
            let pending = BGTaskScheduler.shared.pendingTaskRequests()
            say("[ProbeApp] bg-pending: \(pending.count) requests")
            for request in pending {
                var line = "[ProbeApp] bg-request \(request is BGProcessingTaskRequest ? "processing" : "refresh") \(request.identifier)"
                if let date = request.earliestBeginDate {
                    line += " earliest=\(Int(max(0, date.timeIntervalSinceNow).rounded()))"
                }
                if let processing = request as? BGProcessingTaskRequest {
                    if processing.requiresExternalPower { line += " power" }
                    if processing.requiresNetworkConnectivity { line += " network" }
                }
                say(line)
            }
        case .urlSession(let identifier, let discretionary, let wifiOnly, let noLaunchEvents):
            if let existing = sessions[identifier] {
                if discretionary || wifiOnly || noLaunchEvents {
                    complain("url-session: session \(identifier) exists already; its configuration stays as it was made")
                }
                printTasks(identifier, existing.getAllTasks())
            } else {
                _ = session(identifier, discretionary: discretionary, wifiOnly: wifiOnly, noLaunchEvents: noLaunchEvents)
            }
        case .urlTasks(let identifier):
            printTasks(identifier, session(identifier).getAllTasks())
        case .download(let identifier, let url):
            guard let target = URL(string: url) else {
                complain("download: not a URL: \(url)")
                return
            }
            start(session(identifier).downloadTask(with: target), "download")
        case .downloads(let identifier, let count, let url):
            startDownloads(session(identifier), count: count, template: url)
        case .dataTask(let identifier, let url):
            guard let target = URL(string: url) else {
                complain("data-task: not a URL: \(url)")
                return
            }
            say("[ProbeApp] data task \(identifier)")
            _ = session(identifier).dataTask(with: target)
        case .upload(let identifier, let url, let file):
            guard let target = URL(string: url) else {
                complain("upload: not a URL: \(url)")
                return
            }
            var request = BackgroundURLRequest(url: target)
            request.httpMethod = "POST"
            let path = file.hasPrefix("/") ? file : FileManager.default.currentDirectoryPath + "/" + file
            start(session(identifier).uploadTask(with: request, fromFile: URL(fileURLWithPath: path)), "upload")
        case .cancelTask(let identifier, let number):
            let tasks = session(identifier).getAllTasks()
            guard let task = tasks.first(where: { $0.taskIdentifier == number }) else {
                complain("cancel-task: session \(identifier) has no task \(number)")
                return
            }
            say("[ProbeApp] cancelling task \(number)")
            task.cancel()
        case .cancelResume(let identifier, let number):
            guard let task = session(identifier).getAllTasks().first(where: { $0.taskIdentifier == number }) else {
                complain("cancel-resume: session \(identifier) has no task \(number)")
                return
            }
            say("[ProbeApp] cancelling task \(number) with resume data")
            task.cancel(byProducingResumeData: { data in
                guard let data else {
                    say("[ProbeApp] resume data task=\(number) nil")
                    return
                }
                let path = FileManager.default.currentDirectoryPath + "/Documents/resume-\(number).plist"
                do {
                    try FileManager.default.createDirectory(atPath: FileManager.default.currentDirectoryPath + "/Documents",
                                                            withIntermediateDirectories: true)
                    try data.write(to: URL(fileURLWithPath: path))
                    say("[ProbeApp] resume data task=\(number) saved \(path) bytes=\(data.count)")
                } catch {
                    complain("cancel-resume: cannot save \(path): \(error)")
                }
            })
        case .downloadResume(let identifier, let file):
            let path = file.hasPrefix("/") ? file : FileManager.default.currentDirectoryPath + "/" + file
            guard let data = FileManager.default.contents(atPath: path) else {
                complain("download-resume: no resume data at \(path)")
                return
            }
            try? FileManager.default.removeItem(atPath: path)
            start(session(identifier).downloadTask(withResumeData: data), "download")
        }
    }

    /// Tries `socket(2)` in `family` and prints the outcome.
    private func trySocket(_ family: SocketFamily) {
        let (domain, type): (Int32, Int32) = switch family {
        case .bluetooth: (AF_BLUETOOTH, Int32(SOCK_SEQPACKET.rawValue))
        case .inet: (AF_INET, Int32(SOCK_STREAM.rawValue))
        case .unix: (AF_UNIX, Int32(SOCK_STREAM.rawValue))
        }
        let fd = socket(domain, type | Int32(SOCK_CLOEXEC.rawValue), 0)
        if fd >= 0 {
            close(fd)
            say("[ProbeApp] socket \(family.rawValue): ok")
        } else {
            say("[ProbeApp] socket \(family.rawValue): \(errnoName(errno))")
        }
    }

    @discardableResult
    private func begin(_ name: String, _ application: Application) -> BackgroundTaskIdentifier {
        let ref = TaskRef()  // the handler needs the id, which exists only after begin returns
        let id = application.beginBackgroundTask(withName: name) { [self] in
            say("[ProbeApp] task \(name) id=\(ref.id) expired")
            if script.ignoreExpiration {
                say("[ProbeApp] ignoring the expiration of task \(name) id=\(ref.id) (--ignore-expiration)")
            } else {
                end(name, ref.id, application)
            }
        }
        ref.id = id
        tasks[name, default: []].append(id)
        open.insert(id)
        say("[ProbeApp] began task \(name) id=\(id)")
        return id
    }

    private func end(_ name: String, _ id: BackgroundTaskIdentifier, _ application: Application) {
        // Print first: once the last task ends the host may suspend us at once.
        say("[ProbeApp] ending task \(name) id=\(id)\(open.remove(id) == nil ? " (already ended)" : "")")
        application.endBackgroundTask(id)
    }

    /// Opens (creating) `path` and locks it without waiting; on success the
    /// descriptor stays open so the lock is held until `unlock:` or exit.
    private func takeLock(_ kind: HeldLock.Kind, on path: String) {
        let action = kind == .flock ? "lock" : "posix-lock"
        let fd = Glibc.open(resolved(path), O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            complain("\(action): cannot open \(path): \(describeErrno(errno))")
            return
        }
        let result: Int32
        switch kind {
        case .flock:
            result = flock(fd, LOCK_EX | LOCK_NB)
        case .posix:
            var region = Glibc.flock()
            region.l_type = Int16(F_WRLCK)
            region.l_whence = Int16(SEEK_SET)
            region.l_start = 0
            region.l_len = 0  // to the end of the file, however long it grows
            result = fcntl(fd, F_SETLK, &region)
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            complain("\(action): cannot lock \(path): \(describeErrno(code))")
            return
        }
        locks[path, default: []].append(HeldLock(kind: kind, descriptor: fd))
        say("[ProbeApp] locked \(path) (\(kind.rawValue), fd \(fd))")
    }

    /// Releases and closes every lock taken on `path`.
    private func releaseLocks(on path: String) {
        guard let held = locks.removeValue(forKey: path), !held.isEmpty else {
            complain("unlock: no lock held on \(path)")
            return
        }
        for lock in held {
            switch lock.kind {
            case .flock:
                _ = flock(lock.descriptor, LOCK_UN)
            case .posix:
                var region = Glibc.flock()
                region.l_type = Int16(F_UNLCK)
                region.l_whence = Int16(SEEK_SET)
                _ = fcntl(lock.descriptor, F_SETLK, &region)
            }
            // Closing any descriptor of the file drops this process's POSIX locks on it anyway.
            close(lock.descriptor)
        }
        say("[ProbeApp] unlocked \(path) (\(held.map { "\($0.kind.rawValue), fd \($0.descriptor)" }.joined(separator: "; ")))")
    }

    /// `path` with a leading `group:ID/` replaced by that App Group's container
    /// (left as written when the app is not in the group: the open then fails).
    private func resolved(_ path: String) -> String {
        guard path.hasPrefix("group:") else { return path }
        let rest = path.dropFirst("group:".count)
        let identifier = rest.prefix { $0 != "/" }
        guard let url = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: String(identifier)) else {
            return path
        }
        return url.path + rest.dropFirst(identifier.count)
    }

    /// Writes bytes straight to the IPC descriptor, bypassing the SDK's framing.
    private func writeRaw(_ bytes: [UInt8]) {
        let fd = ProcessInfo.processInfo.environment["APPHOST_IPC_FD"].flatMap { Int32($0) } ?? 3
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { return }
        }
    }
}

// MARK: Service events: each prints its line, then runs the trigger's actions.

extension ProbeDelegate: LocationManagerDelegate {
    func didUpdateLocations(_ manager: LocationManager, _ locations: [LocationFix]) {
        for fix in locations {
            say("[ProbeApp] location \(fix.latitude),\(fix.longitude)")
        }
        fire(.location, application: .shared)
    }
    func didChangeAuthorization(_ manager: LocationManager, _ status: LocationAuthorization) {
        say("[ProbeApp] authorization \(status.rawValue)")
        fire(.authorization, application: .shared)
    }
    func didEnterRegion(_ manager: LocationManager, _ region: CircularRegion) {
        say("[ProbeApp] region enter \(region.identifier)")
        fire(.region, application: .shared)
    }
    func didExitRegion(_ manager: LocationManager, _ region: CircularRegion) {
        say("[ProbeApp] region exit \(region.identifier)")
        fire(.region, application: .shared)
    }
    func monitoringDidFail(_ manager: LocationManager, for region: CircularRegion?, error: LocationError) {
        say("[ProbeApp] region failed \(region?.identifier ?? "nil") \(error.code.rawValue): \(error.reason)")
    }
}

extension ProbeDelegate: PushRegistryDelegate {
    func didReceiveIncomingPush(_ registry: PushRegistry, payload: PushPayload) {
        say("[ProbeApp] voip push \(payload.json)")
        fire(.voipPush, application: .shared)
    }
}

extension ProbeDelegate: CentralManagerDelegate {
    func didDiscover(_ central: CentralManager, peripheral: BLEPeripheral) {
        say("[ProbeApp] ble discovered \(peripheral.id)")
        fire(.bleDiscovered, application: .shared)
    }
    func didConnect(_ central: CentralManager, peripheral: String) {
        say("[ProbeApp] ble connected \(peripheral)")
        fire(.bleConnected, application: .shared)
    }
    func didDisconnect(_ central: CentralManager, peripheral: String) {
        say("[ProbeApp] ble disconnected \(peripheral)")
        fire(.bleDisconnected, application: .shared)
    }
    func didUpdateValue(_ central: CentralManager, peripheral: String, characteristic: String, value: Data) {
        say("[ProbeApp] ble notify \(peripheral) \(characteristic) \(printable(value))")
        fire(.bleNotify, application: .shared)
    }
}

extension ProbeDelegate: AccessoryManagerDelegate {
    func didConnect(_ manager: AccessoryManager, accessory: Accessory) {
        say("[ProbeApp] accessory connected \(accessory.id) \(accessory.name) \(accessory.protocols.joined(separator: ","))")
        fire(.accessoryConnected, application: .shared)
    }
    func didDisconnect(_ manager: AccessoryManager, accessory: Accessory) {
        say("[ProbeApp] accessory disconnected \(accessory.id) \(accessory.name)")
        fire(.accessoryDisconnected, application: .shared)
    }
    func didReceive(_ manager: AccessoryManager, bytes: Data, from accessory: Accessory, protocolString: String) {
        say("[ProbeApp] accessory data \(accessory.name) \(protocolString): \(String(decoding: bytes, as: UTF8.self))")
        fire(.accessoryData, application: .shared)
    }
}

extension ProbeDelegate: BackgroundURLSessionDelegate {
    func urlSession(_ session: BackgroundURLSession, downloadTask: BackgroundURLSessionTask, didFinishDownloadingTo location: URL) {
        // Moved before returning: the file is deleted once this method returns. With
        // rename(2), which replaces an earlier file of the same task: FileManager's
        // moveItem (after a fileExists and a removeItem) made a dozen stat(2) calls and
        // URLs per file, half of this app's CPU in `apphost-bench transfers`.
        let destination: String
        do {
            let directory: String
            if let made = downloadsDirectory {
                directory = made
            } else {
                directory = FileManager.default.currentDirectoryPath + "/Documents/downloads"
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                downloadsDirectory = directory
            }
            destination = directory + "/\(downloadTask.taskIdentifier)"
        } catch {
            complain("download-finished: cannot make Documents/downloads: \(error)")
            fire(.downloadFinished, application: .shared)
            return
        }
        if rename(location.path, destination) == 0 {
            var info = stat()
            let bytes = stat(destination, &info) == 0 ? Int64(info.st_size) : 0
            say("[ProbeApp] downloaded task=\(downloadTask.taskIdentifier) to \(destination) bytes=\(bytes)")
        } else {
            complain("download-finished: cannot move \(location.path) to \(destination): \(String(cString: strerror(errno)))")
        }
        fire(.downloadFinished, application: .shared)
    }

    func urlSession(_ session: BackgroundURLSession, task: BackgroundURLSessionTask, didCompleteWithError error: BackgroundURLSessionError?) {
        var line = "[ProbeApp] task \(task.taskIdentifier) completed error=\(error.map { $0.code.rawValue } ?? "nil")"
        // Cancelled by the system: as an app reads it from Foundation's URLError.
        if let error, let why = error.backgroundTaskCancelledReason,
           let number = error.urlError.userInfo[NSURLErrorBackgroundTaskCancelledReasonKey] as? Int {
            line += " code=\(error.urlError.code.rawValue) NSURLErrorBackgroundTaskCancelledReasonKey=\(number) (\(why.name))"
        }
        say(line)
        fire(.taskCompleted, application: .shared)
    }

    func urlSession(_ session: BackgroundURLSession, downloadTask: BackgroundURLSessionTask, didWriteData bytesWritten: Int64,
                    totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        guard progressed.insert("\(session.identifier)#\(downloadTask.taskIdentifier)").inserted else { return }
        say("[ProbeApp] progress task=\(downloadTask.taskIdentifier) bytes=\(totalBytesWritten)")
        fire(.progress, application: .shared)
    }

    func urlSessionDidFinishEvents(forBackgroundURLSession session: BackgroundURLSession) {
        say("[ProbeApp] didFinishEvents \(session.identifier)")
        if let completion = eventsCompletions.removeValue(forKey: session.identifier) {
            say("[ProbeApp] events completed \(session.identifier)")
            completion()
        }
    }
}

/// `ProbeApp --raw-unread N`: an app that never reads. Without AppKitLess it says hello on
/// the IPC socket, sends N `backgroundTimeRemaining` requests and sleeps, reading none of
/// the answers (the host must kill it once they pile up, not keep them).
func rawUnread(_ count: Int) -> Never {
    let fd = ProcessInfo.processInfo.environment[IPCProtocol.descriptorEnvironmentKey].flatMap { Int32($0) } ?? IPCProtocol.descriptor
    func send(_ message: AppMessage) -> Bool {
        guard let bytes = try? Frame.encode(message) else { return false }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { return false }
        }
        return true
    }
    var sent = 0
    if send(.hello(version: IPCProtocol.version, pid: getpid())) {
        while sent < count, send(.request(id: UInt64(sent + 1), request: .backgroundTimeRemaining)) { sent += 1 }
    }
    let line = Array("[ProbeApp] raw-unread: sent \(sent) requests, reading nothing\n".utf8)
    _ = line.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    while true { pause() }
}

if CommandLine.arguments.count == 3, CommandLine.arguments[1] == "--raw-unread",
   let count = Int(CommandLine.arguments[2]), (1...1_000_000).contains(count) {
    rawUnread(count)
}

// APPHOST_BUNDLE_PATH: where the host says the bundle is (IPCProtocol.bundlePathEnvironmentKey).
let environment = ProcessInfo.processInfo.environment
let arguments = Script.savedArguments(bundle: environment["APPHOST_BUNDLE_PATH"], home: environment["HOME"])
    + CommandLine.arguments.dropFirst()
switch Result(catching: { () throws(ScriptError) in try Script.parse(arguments) }) {
case .success(.help):
    print(Script.usage)
    exit(0)
case .success(.run(let script)):
    ApplicationMain(delegate: ProbeDelegate(script: script))
case .failure(let error):
    FileHandle.standardError.write(Data("ProbeApp: \(error)\nRun ProbeApp --help for the grammar.\n".utf8))
    exit(64)
}
