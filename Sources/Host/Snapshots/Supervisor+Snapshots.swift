import AppHostProtocol
import Foundation
import Snapshots
import SystemPackage

/// The supervisor's side of the ``SnapshotKeeper``: the keeper decides, this performs
/// (renders off the actor, files, events) and keeps whoever waits.
struct SnapshotKeeperState {
    var keeper = SnapshotKeeper()
    /// `waitForSnapshots` callers.
    var idleWaiters: [CheckedContinuation<Void, Never>] = []
    /// Apps whose snapshot folder has been looked at in this host's life for what an
    /// earlier version left (numbered pictures, see ``Supervisor/adoptEarlierSnapshots(_:)``).
    var adopted: Set<BundleID> = []
}

/// The JSON written beside the switcher snapshot's PNG.
struct SnapshotTextLayerFile: Codable {
    var bundleIdentifier: BundleID
    var number: Int
    var reason: String
    var policy: SnapshotPolicy
    var time: Date
    var screen: ScreenSize
    var texts: [TextItem]
    var warnings: [String]
}

struct SnapshotWriteError: Error {
    let message: String
}

extension Supervisor {
    var snapshotsDirectory: String { configuration.stateDirectory + "/snapshots" }

    /// An app's one switcher snapshot: `snapshots/<bundle-id>/switcher.png`, with its text
    /// layer `switcher.json` beside it. Each new picture replaces both.
    nonisolated static let switcherPNG = "switcher.png"
    nonisolated static let switcherTextLayer = "switcher.json"

    /// The policy in force for an app: its own, or the host's when stricter.
    func snapshotPolicy(_ id: BundleID) -> SnapshotPolicy {
        (apps[id]?.app.manifest.snapshotPolicy ?? .default).stricter(configuration.snapshotPolicy)
    }

    /// An app became active: it is in the switcher, in front.
    func switcherActivated(_ id: BundleID) {
        seedSwitcher()
        performSnapshots(snapshots.keeper.handle(.activated(id)))
    }

    /// The user terminated the app, or it was uninstalled: out of the switcher.
    func switcherRemoved(_ id: BundleID, uninstalled: Bool) {
        seedSwitcher()
        performSnapshots(snapshots.keeper.handle(.removed(id, uninstalled: uninstalled)))
    }

    /// A callback returned: after `didEnterBackground` the host takes the app's picture.
    func snapshotAfterCallback(_ callback: LifecycleCallback, app id: BundleID) {
        guard callback == .didEnterBackground, let subject = snapshotSubject(id) else { return }
        performSnapshots(snapshots.keeper.handle(.callbackReturned(callback, subject)))
    }

    /// The app called a background fetch's or a remote notification's completion handler
    /// and the host accepted it: in the background, iOS updates the app's snapshot then
    /// (not when the delegate method returns: an app may complete later). The app sent
    /// its window before the completion, so the tree is the one it completed with. A
    /// completion in the foreground takes none.
    func snapshotAfterCompletion(_ request: ServiceRequest, reply: ServiceReply, app id: BundleID, state: AppState) {
        guard state == .background, case .ok = reply, let subject = snapshotSubject(id) else { return }
        performSnapshots(snapshots.keeper.handle(.completionReturned(request, reply: reply, state: state, subject)))
    }

    /// The app became active: `ignoreSnapshotOnNextApplicationLaunch` has done its work.
    func snapshotsActivated(_ id: BundleID) {
        processes[id]?.ignoreSnapshotsUntilActive = false
    }

    /// What the keeper needs to picture a running app now; nil when it is not installed
    /// and running.
    private func snapshotSubject(_ id: BundleID) -> SnapshotKeeper.Subject? {
        guard let row = apps[id], let rt = processes[id] else { return nil }
        adoptEarlierSnapshots(id)
        return SnapshotKeeper.Subject(
            app: id, tree: rt.viewTree ?? ViewTree(), policy: snapshotPolicy(id), ignoreUntilActive: rt.ignoreSnapshotsUntilActive,
            time: now(), bundlePath: row.app.bundlePath, launchImage: row.app.manifest.launchImageFile,
            highestOnDisk: snapshots.keeper.numbers(id) ? nil : highestSnapshotNumberOnDisk(id))
    }

    private func highestSnapshotNumberOnDisk(_ id: BundleID) -> Int {
        readTextLayer(snapshotsDirectory + "/" + id.rawValue + "/" + Self.switcherTextLayer)?.number ?? 0
    }

    private func readTextLayer(_ path: String) -> SnapshotTextLayerFile? {
        FileManager.default.contents(atPath: path).flatMap { try? WireJSON.decoder().decode(SnapshotTextLayerFile.self, from: $0) }
    }

    /// Once per app in this host's life, before its folder is read or written: what an
    /// earlier version of AppHost left there. It numbered every picture (`1.png`, `1.json`,
    /// ... and a `.spare.json`), the ones `apphost snapshot` took of an active app among
    /// them. The newest that was taken on the way to the background (any reason but
    /// `requested`) becomes the switcher snapshot, unless there is one already; every
    /// numbered file goes. A picture taken on request is never adopted: it was a
    /// screenshot of the app in front, not what the switcher may show.
    func adoptEarlierSnapshots(_ id: BundleID) {
        guard snapshots.adopted.insert(id).inserted else { return }
        let dir = snapshotsDirectory + "/" + id.rawValue
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        let numbered = names.filter { name in
            name == ".spare.json" || Int(name.prefix { $0 != "." }) != nil && (name.hasSuffix(".png") || name.hasSuffix(".json") || name.hasSuffix(".png.tmp"))
        }
        guard !numbered.isEmpty else { return }
        if !names.contains(Self.switcherPNG) {
            let numbers = Set(numbered.compactMap { $0.hasSuffix(".png") ? Int($0.dropLast(4)) : nil }).sorted(by: >)
            for n in numbers {
                guard var layer = readTextLayer(dir + "/\(n).json"), !layer.reason.hasPrefix("requested"),
                      rename(dir + "/\(n).png", dir + "/" + Self.switcherPNG) == 0 else { continue }
                layer.number = n
                // Written whole: a failure leaves a PNG without a layer, which reads as an earlier picture.
                if let data = try? WireJSON.encoder(pretty: true).encode(layer) {
                    try? Self.writeUnsynced(data, to: dir + "/" + Self.switcherTextLayer)
                }
                break
            }
        }
        for name in numbered { _ = unlink(dir + "/" + name) }
    }

    /// Performs what the keeper asked for.
    private func performSnapshots(_ effects: [SnapshotKeeper.Effect]) {
        // Virtual clock: drawn here, on the supervisor, once these effects are done, so
        // the snapshot's line lands in the log at the same place every run (off the
        // supervisor it landed wherever the render happened to end).
        var drawnHere: [SnapshotKeeper.Job] = []
        defer {
            for job in drawnHere {
                renderFinished(job, Self.renderAndWrite(job, screen: configuration.screen, directory: snapshotsDirectory + "/" + job.app.rawValue))
            }
        }
        for effect in effects {
            switch effect {
            case .render(let job) where configuration.clock == .virtual:
                drawnHere.append(job)
            case .render(let job):
                startRender(job)
            case .deleteAll(let id):
                try? FileManager.default.removeItem(atPath: snapshotsDirectory + "/" + id.rawValue)
            case .log(let kind, let id, let cause, let time):
                events.append(kind, app: id, pid: processes[id]?.pid, cause: cause, time: time)
            case .idle:
                for w in snapshots.idleWaiters { w.resume() }
                snapshots.idleWaiters.removeAll()
            }
        }
    }

    /// Draws and writes `job` off the supervisor, then tells the keeper.
    private func startRender(_ job: SnapshotKeeper.Job) {
        let screen = configuration.screen
        let dir = snapshotsDirectory + "/" + job.app.rawValue
        Task.detached(priority: .utility) {
            let outcome = Self.renderAndWrite(job, screen: screen, directory: dir)
            await self.renderFinished(job, outcome)
        }
    }

    private func renderFinished(_ job: SnapshotKeeper.Job, _ outcome: SnapshotKeeper.RenderOutcome) {
        performSnapshots(snapshots.keeper.handle(.renderFinished(app: job.app, number: job.number, outcome, time: now())))
    }

    /// Renders `job` and writes it over the app's switcher snapshot: the text layer first,
    /// then the PNG, which appears complete or not at all (written as `.tmp`, renamed over
    /// the last one). A reader of an older snapshot that reads the PNG and then finds the
    /// text layer still naming its number has read its own picture (see
    /// ``TakenSnapshot/rendered``).
    private nonisolated static func renderAndWrite(_ job: SnapshotKeeper.Job, screen: ScreenSize, directory dir: String) -> SnapshotKeeper.RenderOutcome {
        let png = dir + "/" + switcherPNG
        let json = dir + "/" + switcherTextLayer
        let tmp = png + ".tmp"
        do {
            // The app's folder is there after its first picture: one mkdir(2), not
            // FileManager's walk of the path, and the walk only when a parent is missing.
            if mkdir(dir, 0o755) != 0, errno == ENOENT {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            }
            let drawing: SnapshotDrawing
            var staged = true
            if let copy = job.copy, copy.png == png, access(png, F_OK) == 0 {
                // The same inputs as the app's last picture, which is in place: nothing to write.
                drawing = copy.drawing
                staged = false
            } else if let copy = job.copy, linkOrCopy(copy.png, to: tmp) {
                // The same inputs as another app's picture: the same file, without drawing it.
                drawing = copy.drawing
            } else {
                guard let drawn = try SnapshotRenderer.render(job.tree, screen: screen, policy: job.policy, bundlePath: job.bundlePath,
                                                              launchImage: job.launchImage) else {
                    return .failed("the renderer kept nothing")
                }
                // A new file: a `.tmp` a crash left between a link and its rename may be
                // another app's picture, which a write into it would change.
                _ = unlink(tmp)
                try writeUnsynced(PNGCodec.encode(drawn.image), to: tmp)
                // The pixels go with this scope: only the file keeps them.
                drawing = SnapshotDrawing(drawn)
            }
            let layer = SnapshotTextLayerFile(bundleIdentifier: job.app, number: job.number, reason: job.reason, policy: job.policy,
                                              time: job.time, screen: screen, texts: drawing.textLayer, warnings: drawing.warnings)
            // WireJSON: the time with its milliseconds, as every other AppHost file. The one
            // file written over each time: no inode per trip home (decision 0041).
            try writeUnsynced(WireJSON.encoder(pretty: true).encode(layer), to: json)
            if staged {
                guard rename(tmp, png) == 0 else {
                    let reason = String(cString: strerror(errno))
                    _ = unlink(tmp)
                    throw SnapshotWriteError(message: "rename \(png): \(reason)")
                }
                // A link to the file already in place renames as nothing and stays behind.
                _ = unlink(tmp)
            }
            return .written(drawing, png: png, textLayer: json)
        } catch let error as SnapshotWriteError {
            return .failed(error.message)
        } catch {
            _ = unlink(tmp)
            return .failed("\(error)")
        }
    }

    /// Writes a snapshot file without `fsync`: a snapshot is a cache of what the app
    /// showed (iOS redraws it at the next trip home), and `Data.write` synced every file,
    /// which held the supervisor for an fsync per snapshot on the virtual clock, where
    /// snapshots are drawn in line ([decision 0041](docs/decisions/0041-snapshot-files-unsynced.md)).
    /// The PNG still appears complete or not at all (written as `.tmp`, then renamed).
    ///
    /// A file written over (the text layer) is cut to its new length after the
    /// write, not truncated to nothing at the open: ext4 allocates the blocks of a file
    /// truncated to zero and written again when it is closed (`auto_da_alloc`), which made
    /// that `close` a tenth of the snapshot's cost.
    nonisolated static func writeUnsynced<Bytes: Sequence>(_ bytes: Bytes, to path: String) throws where Bytes.Element == UInt8 {
        let fd = try FileDescriptor.open(FilePath(path), .writeOnly, options: [.create, .closeOnExec, .noFollow],
                                         permissions: [.ownerReadWrite, .groupRead, .otherRead], retryOnInterrupt: true)
        try fd.closeAfter {
            let written = try fd.writeAll(bytes)
            try fd.resize(to: Int64(written), retryOnInterrupt: true)
        }
    }

    /// Links (or, across file systems, copies) a kept PNG: a PNG is never written again
    /// once renamed into place, so its pictures can share the file. False if it cannot
    /// (it was deleted), and then nothing is left at `to`.
    private nonisolated static func linkOrCopy(_ from: String, to: String) -> Bool {
        _ = unlink(to)
        if link(from, to) == 0 { return true }
        guard errno == EXDEV || errno == EPERM || errno == EMLINK else { return false }
        do {
            try FileManager.default.copyItem(atPath: from, toPath: to)
            return true
        } catch {
            try? FileManager.default.removeItem(atPath: to)
            return false
        }
    }

    // MARK: API

    /// Waits until no snapshot is being rendered or waiting to be (tests, privacy checks).
    public func waitForSnapshots() async {
        guard !snapshots.keeper.isIdle else { return }
        await withCheckedContinuation { snapshots.idleWaiters.append($0) }
    }

    /// Every snapshot taken of an app in this host's life, oldest first (with its tree).
    public func takenSnapshots(_ id: BundleID) -> [TakenSnapshot] {
        snapshots.keeper.taken[id] ?? []
    }

    /// The snapshots of an app taken after `mark` (a ``snapshotMark()``), oldest first:
    /// one run's pictures, not an earlier run's of the same bundle identifier.
    public func takenSnapshots(_ id: BundleID, since mark: UInt64) -> [TakenSnapshot] {
        (snapshots.keeper.taken[id] ?? []).filter { $0.serial > mark }
    }

    /// The serial of the latest snapshot taken (0 before any): snapshots taken after
    /// this call have a greater ``TakenSnapshot/serial``.
    public func snapshotMark() -> UInt64 {
        snapshots.keeper.serial
    }

    /// `apphost snapshot`: an app in the foreground with a window is a screenshot, drawn
    /// now as the screen shows it (``screenshot(of:)``: no policy, written under
    /// `screenshots/`, number 0, reason `screenshot`); it never becomes or replaces the
    /// switcher snapshot, as a screenshot the user takes on iOS does not. Any other app
    /// (on its way home, in the background, suspended, not running) is what the switcher
    /// shows: its switcher snapshot, with a picture still being drawn finished first.
    public func snapshot(_ id: BundleID) async throws(ControlError) -> SnapshotInfo {
        _ = try installed(id)
        if isInForeground(id), processes[id]?.viewTree != nil {
            let shot = try await screenshot(of: id)
            return SnapshotInfo(bundleIdentifier: id, number: 0, reason: Self.screenshotReason, policy: .default, png: shot.png,
                                textLayer: nil, time: shot.time)
        }
        // A picture still being drawn (the app just went home) is the one the switcher shows.
        await waitForSnapshots()
        if let info = latestSnapshot(id) { return info }
        throw ControlError(.notRunning, "\(id) has no snapshot yet: it has not drawn a window and left the foreground (or its policy is none)")
    }

    /// The ``SnapshotInfo/reason`` of a picture `apphost snapshot` drew of an app in front.
    public nonisolated static let screenshotReason = "screenshot"

    /// The app's switcher snapshot, from memory or from what an earlier host left on disk.
    func latestSnapshot(_ id: BundleID) -> SnapshotInfo? {
        if let info = snapshots.keeper.latest[id] { return info }
        adoptEarlierSnapshots(id)
        let dir = snapshotsDirectory + "/" + id.rawValue
        let png = dir + "/" + Self.switcherPNG
        guard access(png, F_OK) == 0 else { return nil }
        let json = dir + "/" + Self.switcherTextLayer
        let layer = readTextLayer(json)
        return SnapshotInfo(bundleIdentifier: id, number: layer?.number ?? 0, reason: layer?.reason ?? "earlier",
                            policy: layer?.policy ?? snapshotPolicy(id), png: png, textLayer: json,
                            time: layer?.time ?? Date(timeIntervalSince1970: 0))
    }

    /// Takes in, once, the installed apps an earlier host on this state directory left
    /// pictures of, newest first, behind those this host has seen active.
    private func seedSwitcher() {
        guard !snapshots.keeper.seeded else { return }
        let earlier = ((try? FileManager.default.contentsOfDirectory(atPath: snapshotsDirectory)) ?? [])
            .compactMap(BundleID.init)
            .filter { apps[$0] != nil && !snapshots.keeper.switcher.contains($0) }
            .compactMap { id in latestSnapshot(id).map { (id, $0.time) } }
            .sorted { $0.1 > $1.1 }.map(\.0)
        performSnapshots(snapshots.keeper.handle(.seed(earlier)))
    }

    /// `apphost switcher`: the apps in the switcher, most recent first, with the pictures
    /// being drawn when it is asked finished first.
    public func switcher() async -> [SwitcherEntry] {
        await waitForSnapshots()
        seedSwitcher()
        return snapshots.keeper.switcher.compactMap { id in
            guard let row = apps[id] else { return nil }
            return SwitcherEntry(bundleIdentifier: id, name: row.app.manifest.displayName ?? row.app.name,
                                 state: processes[id]?.machine.state ?? .notRunning, snapshot: latestSnapshot(id))
        }
    }
}
