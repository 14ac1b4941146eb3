import AppHostProtocol
import AppHostSystem
import Foundation
import HostConfig
import NIOCore
import NIOPosix
import Plugins
import Synchronization
import SystemPackage
import TransferOptions

// The transfer daemon's process: found beside the host, started with the launcher,
// restarted with a backoff after a crash, stopped with the host; and the NIO handler
// that turns its frames into the supervisor's inputs. (The broker's effects and the
// batches of writes to the daemon are in TransferDaemonLink.swift.)

extension Supervisor {
    // MARK: - The daemon process

    /// Where `apphost-transferd` is: beside the app executables' product directories.
    func transferDaemonPath() -> String? {
        for dir in configuration.productDirectories + [ProcessInfo.processInfo.environment["APPHOST_PRODUCTS_DIR"] ?? ""]
        where !dir.isEmpty {
            let path = dir + "/" + Self.transferDaemonName
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        let beside = ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "") as NSString
        let path = beside.deletingLastPathComponent + "/" + Self.transferDaemonName
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }

    /// Starts (or restarts) the transfer daemon.
    func startTransferDaemon() {
        guard configuration.transferDaemon, !transfers.stopping, transfers.child == nil else { return }
        guard let path = transferDaemonPath() else {
            let reason = "\(Self.transferDaemonName) was not found beside the apps' executables (build it: swift build)"
            transfers.unavailable = reason
            events.append(.warning, cause: "transfer daemon not started: \(reason); background URLSession is unavailable", time: now())
            return
        }
        transfers.generation += 1
        let generation = transfers.generation
        // Virtual clock: the daemon's start and its `ready` are one turn of its own (see
        // ``TurnOrder``), so they never land among an app's events at whatever time the
        // real process answers.
        if takesTurns {
            transfers.daemonStarting = true
            expectTurn(.daemon)
        }
        let input = self.input
        let group = self.group
        let dir = configuration.stateDirectory + "/transfers"
        let logPath = configuration.logsDirectory + "/\(Self.transferDaemonName).log"
        let device = modes.deviceState
        transfers.starting = Task {
            defer { transfers.starting = nil }
            do {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
                let options = TransferDaemonOptions(stateDirectory: dir, containers: configuration.containersDirectory,
                                                    device: device, settings: configuration.transferSettings)
                let settings = SpawnSettings(
                    executablePath: path, arguments: [path] + options.arguments,
                    environment: ["HOME": dir, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                                  "APPHOST_TRANSFERD_FD": String(IPCProtocol.descriptor)],
                    workingDirectory: dir,
                    seccomp: .baseline,
                    // Apps under uids of their own: it writes downloads into, and reads uploads
                    // from, containers that are 0700 and the apps'. Nothing else survives.
                    keptCapabilities: identities == nil ? [] : [.dacOverride])
                let child: ChildProcess
                let channel: any Channel
                let writer: SocketWriter?
                do throws(ChildLauncher.Failure) {
                    (child, channel, writer) = try await ChildLauncher.launch(
                        settings, logPath: logPath, group: group,
                        makeHandler: { TransferDaemonHandler(input: input, generation: generation) },
                        onEvent: { event in
                            if case .exited(let status) = event { input.yield(.transferDaemonExited(status, generation: generation)) }
                        },
                        duplicateForWriting: true)
                } catch .attach(let started, let error) {
                    // It runs but cannot be reached: end it (its exit restarts it, after the backoff).
                    try? started.signal(SIGKILL)
                    throw error
                } catch .spawn(let error) {
                    throw error
                }
                // A step of its own, as if it came through the input stream (which a
                // shutdown may have ended: the start must still be taken in, to end it).
                step(.transferDaemonStarted(child: child, channel: channel, writer: writer, generation: generation))
            } catch {
                step(.transferDaemonFailed("\(error)", generation: generation))
            }
        }
    }

    /// Stops the daemon (host shutdown): closing its socket ends it; waits for its exit.
    func stopTransferDaemon() async {
        flushTransferDeletes()
        transfers.stopping = true
        if let starting = transfers.starting { await starting.value }
        // A start kept for the daemon's turn is handled now: its process must be ended too.
        for kept in turns.take(.daemon) { handle(kept) }
        guard transfers.child != nil else { return }
        transfers.writer?.close()
        transfers.channel?.close(promise: nil)
        await withCheckedContinuation { transfers.exitWaiters.append($0) }
    }

    func handleTransferInput(_ item: Input) {
        switch item {
        case .transferDaemonStarted(let child, let channel, let writer, let generation):
            guard generation == transfers.generation else {
                writer?.close()
                channel.close(promise: nil)
                try? child.signal(SIGKILL)
                return
            }
            transfers.child = child
            transfers.channel = channel
            transfers.writer = writer
            transfers.outgoing.removeAll()
            transfers.backoff.started(at: hostNow())
            // A shutdown that began meanwhile closes the channel and waits for the exit.
            guard !transfers.stopping else { return }
            events.append(.service, pid: child.pid, cause: "transfer daemon started (pid \(child.pid))", time: now())
            // Its `ready` may have been read before this arrived (the channel's handler
            // runs as soon as the socket is attached): it was kept, and is handled now.
            let early = transfers.saidBeforeStarted
            transfers.saidBeforeStarted.removeAll()
            for event in early {
                guard generation == transfers.generation else { return }
                handleDaemonEvent(event)
            }
        case .transferDaemonFailed(let error, let generation):
            guard generation == transfers.generation else { return }
            transfers.daemonStarting = false
            events.append(.warning, cause: "transfer daemon could not start: \(error)", time: now())
            scheduleTransferRestart()
        case .transferDaemonExited(let status, let generation):
            guard generation == transfers.generation else { return }
            transfers.daemonStarting = false
            transfers.child = nil
            transfers.channel = nil
            transfers.writer?.close()
            transfers.writer = nil
            transfers.outgoing.removeAll()
            transfers.urgentDaemonFrames = false
            transfers.awaitingAccept.removeAll()
            transfers.saidBeforeStarted.removeAll()
            transfers.broker.daemonGone()
            for w in transfers.exitWaiters { w.resume() }
            transfers.exitWaiters.removeAll()
            guard !transfers.stopping else { return }
            events.append(.warning, cause: "transfer daemon exited (\(status.description)); restarting", time: now())
            scheduleTransferRestart()
        case .transferDaemonRestart:
            startTransferDaemon()
        case .transferBatchSaved:
            // Nothing if a cancel, a listing or an exit already gave its answers.
            answerWrittenBatches()
        case .transferEvent(let event, let generation):
            guard generation == transfers.generation else { return }
            handleDaemonEvent(event)
        case .transferEvents(let events, let generation):
            for event in events {
                // Each is checked: handling one may restart the daemon.
                guard generation == transfers.generation else { return }
                handleDaemonEvent(event)
            }
        default:
            break
        }
    }

    /// One event of the current daemon; kept if the host has not taken in its start yet.
    private func handleDaemonEvent(_ event: TransferEvent) {
        guard transfers.child != nil else {
            transfers.saidBeforeStarted.append(event)
            return
        }
        if case .ready = event { transfers.daemonStarting = false }
        noteAccepted(event)
        performTransfer(transfers.broker.handle(event, world: transferWorld))
    }

    /// The daemon's answer to a job sent (accepted, finished at once, or refused).
    private func noteAccepted(_ event: TransferEvent) {
        guard !transfers.awaitingAccept.isEmpty else { return }
        switch event {
        case .accepted(let id), .finished(let id, _):
            transfers.awaitingAccept.remove(id)
        case .error(let text):
            // "enqueue <id>: why": the job was refused.
            if text.hasPrefix("enqueue "), let id = UInt64(text.dropFirst(8).prefix { $0.isNumber }) {
                transfers.awaitingAccept.remove(TransferID(id))
            }
        default:
            break
        }
    }

    private func scheduleTransferRestart() {
        guard !transfers.stopping else { return }
        let delay = transfers.backoff.ended(at: hostNow())
        let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
        events.append(.service, cause: "transfer daemon: next start in \(DurationText.format(seconds)) (\(transfers.backoff.failures) start(s) in a row did not stay up)", time: now())
        // A host-clock deadline (real or virtual): `TimerID.transferRestart`.
        startHostTimer(.transferRestart, app: nil, after: delay)
    }

    /// The transfer daemon's pid while it runs (for status and tests).
    public func transferDaemonPID() -> Int32? { transfers.child?.pid }

    /// Waits until the transfer daemon has said it is ready (tests, `status`).
    public func transferDaemonIsReady() -> Bool { transfers.broker.ready }
}

extension TransferDaemonOptions {
    /// What the host starts the daemon with: its folder, the apps' containers, the device
    /// as it is now (later changes are sent as requests), and the config file's
    /// `"transfers"` settings, where it has them (else the daemon's defaults).
    init(stateDirectory: String, containers: String, device: DeviceState, settings: TransferSettings) {
        self.init(stateDirectory: stateDirectory)
        self.containers = containers
        power = device.pluggedIn ? .plugged : .battery
        network = device.network
        extraCA = settings.extraCA
        if let perHost = settings.perHost { self.perHost = perHost }
        if let maxConcurrent = settings.maxConcurrent { self.maxConcurrent = maxConcurrent }
        if let retryBase = settings.retryBase { self.retryBase = retryBase }
        if let maxAttempts = settings.maxAttempts { self.maxAttempts = maxAttempts }
    }
}

/// Reads the daemon's frames and forwards them to the supervisor's input.
final class TransferDaemonHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let input: AsyncStream<Supervisor.Input>.Continuation
    private let generation: UInt64
    private var decoder = FrameDecoder()

    init(input: AsyncStream<Supervisor.Input>.Continuation, generation: UInt64) {
        self.input = input
        self.generation = generation
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        decoder.append(buffer.readableBytesView)
        // The events of this read go on together: one step of the supervisor per read.
        var events: [TransferEvent] = []
        defer {
            if events.count == 1 {
                input.yield(.transferEvent(events[0], generation: generation))
            } else if !events.isEmpty {
                input.yield(.transferEvents(events, generation: generation))
            }
        }
        do {
            while let payload = try decoder.next() {
                events.append(try Frame.decode(TransferEvent.self, from: payload))
            }
        } catch {
            // A daemon that breaks the protocol is restarted (closing makes it exit).
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
