import AppHostProtocol
import Foundation
import Snapshots
import SystemPackage

/// The supervisor's side of the ``SnapshotKeeper``: the keeper decides, this performs
/// (renders off the actor, files, events) and keeps whoever waits.
struct SnapshotKeeperState {
    var keeper = SnapshotKeeper()
    /// `snapshot()` callers waiting for their picture, by the token given to the keeper.
    var requesters: [Int: CheckedContinuation<SnapshotInfo?, Never>] = [:]
    var nextRequester = 0
    /// `waitForSnapshots` callers.
    var idleWaiters: [CheckedContinuation<Void, Never>] = []
    /// Per app, the number below which its snapshot folder holds no picture: pruned
    /// whole at the first prune in this host's life (what an earlier host left); after
    /// that, a prune deletes only the numbers that fell out since.
    var prunedBelow: [BundleID: Int] = [:]
}

/// The JSON written beside each PNG.
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
    static var snapshotsKept: Int { SnapshotKeeper.snapshotsKept }

    var snapshotsDirectory: String { configuration.stateDirectory + "/snapshots" }

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
        return SnapshotKeeper.Subject(
            app: id, tree: rt.viewTree ?? ViewTree(), policy: snapshotPolicy(id), ignoreUntilActive: rt.ignoreSnapshotsUntilActive,
            time: now(), bundlePath: row.app.bundlePath, launchImage: row.app.manifest.launchImageFile,
            highestOnDisk: snapshots.keeper.numbers(id) ? nil : highestSnapshotNumberOnDisk(id))
    }

    private func highestSnapshotNumberOnDisk(_ id: BundleID) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: snapshotsDirectory + "/" + id.rawValue)) ?? []
        return names.compactMap { Int(($0 as NSString).deletingPathExtension) }.max() ?? 0
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
                snapshots.prunedBelow.removeValue(forKey: id)
                try? FileManager.default.removeItem(atPath: snapshotsDirectory + "/" + id.rawValue)
            case .deleteFiles(let id, let number):
                let base = snapshotsDirectory + "/" + id.rawValue + "/\(number)"
                for path in [base + ".png", base + ".png.tmp", base + ".json"] { try? FileManager.default.removeItem(atPath: path) }
            case .prune(let id, let first):
                pruneSnapshots(id, keepingFrom: first)
            case .log(let kind, let id, let cause, let time):
                events.append(kind, app: id, pid: processes[id]?.pid, cause: cause, time: time)
            case .resolve(let tokens, let info):
                for token in tokens { snapshots.requesters.removeValue(forKey: token)?.resume(returning: info) }
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

    /// Renders `job`, writes its PNG (complete or not at all) and its text layer.
    private nonisolated static func renderAndWrite(_ job: SnapshotKeeper.Job, screen: ScreenSize, directory dir: String) -> SnapshotKeeper.RenderOutcome {
        let png = dir + "/\(job.number).png"
        let json = dir + "/\(job.number).json"
        do {
            // The app's folder is there after its first picture: one mkdir(2), not
            // FileManager's walk of the path, and the walk only when a parent is missing.
            if mkdir(dir, 0o755) != 0, errno == ENOENT {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            }
            let drawing: SnapshotDrawing
            if let copy = job.copy, linkOrCopy(copy.png, to: png + ".tmp") {
                // The same inputs as the last picture: the same file, without drawing it.
                drawing = copy.drawing
            } else {
                guard let drawn = try SnapshotRenderer.render(job.tree, screen: screen, policy: job.policy, bundlePath: job.bundlePath,
                                                              launchImage: job.launchImage) else {
                    return .failed("the renderer kept nothing")
                }
                try writeUnsynced(PNGCodec.encode(drawn.image), to: png + ".tmp")
                // The pixels go with this scope: only the file keeps them.
                drawing = SnapshotDrawing(drawn)
            }
            let layer = SnapshotTextLayerFile(bundleIdentifier: job.app, number: job.number, reason: job.reason, policy: job.policy,
                                              time: job.time, screen: screen, texts: drawing.textLayer, warnings: drawing.warnings)
            // WireJSON: the time with its milliseconds, as every other AppHost file.
            // Into the spare a prune left, where there is one (see `pruneSnapshots`).
            _ = rename(dir + "/" + Self.spareTextLayer, json)
            try writeUnsynced(WireJSON.encoder(pretty: true).encode(layer), to: json)
            // The PNG appears complete or not at all.
            guard rename(png + ".tmp", png) == 0 else { throw SnapshotWriteError(message: "rename \(png): \(String(cString: strerror(errno)))") }
            return .written(drawing, png: png, textLayer: json)
        } catch let error as SnapshotWriteError {
            return .failed(error.message)
        } catch {
            return .failed("\(error)")
        }
    }

    /// Links (or, across file systems, copies) a kept PNG: a PNG is never written again
    /// once renamed into place, so its pictures can share the file. False if it cannot
    /// (it was deleted), and then nothing is left at `to`.
    /// Writes a snapshot file without `fsync`: a snapshot is a cache of what the app
    /// showed (iOS redraws it at the next trip home), and `Data.write` synced every file,
    /// which held the supervisor for an fsync per snapshot on the virtual clock, where
    /// snapshots are drawn in line ([decision 0041](docs/decisions/0041-snapshot-files-unsynced.md)).
    /// The PNG still appears complete or not at all (written as `.tmp`, then renamed).
    ///
    /// A file written over (the spare text layer) is cut to its new length after the
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

    /// The file name a pruned text layer is kept under, for the next snapshot's to be
    /// written into (no number: every reader of the folder skips it).
    ///
    /// On an ext4 file system without a journal (as /tmp here), allocating an inode skips
    /// every inode freed in the last seconds, reading each one's block: with a snapshot
    /// made and one pruned per trip home, a new text layer's `open` took about 150 µs, 15 %
    /// of the supervisor's CPU on the virtual clock. Renamed in and out, the one inode is
    /// used again. (PNGs are mostly hard links to the last one, which allocate nothing.)
    nonisolated static let spareTextLayer = ".spare.json"

    private func pruneSnapshots(_ id: BundleID, keepingFrom first: Int) {
        let dir = snapshotsDirectory + "/" + id.rawValue
        if let below = snapshots.prunedBelow[id] {
            for n in below..<max(below, first) {
                _ = unlink(dir + "/\(n).png")
                // Kept as the spare (one that was there goes: it was not taken since).
                if rename(dir + "/\(n).json", dir + "/" + Self.spareTextLayer) != 0 { _ = unlink(dir + "/\(n).json") }
            }
            snapshots.prunedBelow[id] = max(below, first)
            return
        }
        snapshots.prunedBelow[id] = first
        for name in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] {
            if let n = Int((name as NSString).deletingPathExtension.components(separatedBy: ".").first ?? ""), n < first {
                try? FileManager.default.removeItem(atPath: dir + "/" + name)
            }
        }
    }

    /// Pictures the app now; the snapshot once written (or the newer one that replaced
    /// the request while it waited behind another render), nil if none was.
    private func requestSnapshot(_ id: BundleID, reason: String) async -> SnapshotInfo? {
        guard let subject = snapshotSubject(id) else { return nil }
        let token = snapshots.nextRequester
        snapshots.nextRequester += 1
        return await withCheckedContinuation { continuation in
            snapshots.requesters[token] = continuation
            performSnapshots(snapshots.keeper.handle(.requested(subject, reason: reason, waiter: token)))
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

    /// `apphost snapshot`: an app running code with a window is pictured now; otherwise (a
    /// suspended app is what the switcher shows) its latest kept snapshot.
    public func snapshot(_ id: BundleID) async throws(ControlError) -> SnapshotInfo {
        _ = try installed(id)
        if processes[id]?.machine.isRunningCode == true, processes[id]?.viewTree != nil {
            if let info = await requestSnapshot(id, reason: "requested") { return info }
            throw ControlError(.internalError, "the snapshot of \(id) could not be written (see `apphost events \(id)`)")
        }
        // A picture still being drawn (the app just went home) is the one the switcher shows.
        await waitForSnapshots()
        if let info = latestSnapshot(id) { return info }
        throw ControlError(.notRunning, "\(id) has no snapshot yet: it has not drawn a window and left the foreground (or its policy is none)")
    }

    /// The latest kept snapshot, from memory or from what an earlier host left on disk.
    func latestSnapshot(_ id: BundleID) -> SnapshotInfo? {
        if let info = snapshots.keeper.latest[id] { return info }
        let dir = snapshotsDirectory + "/" + id.rawValue
        let numbers = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [])
            .filter { $0.hasSuffix(".png") }.compactMap { Int(($0 as NSString).deletingPathExtension) }
        guard let n = numbers.max() else { return nil }
        let json = dir + "/\(n).json"
        let decoder = WireJSON.decoder()
        let layer = FileManager.default.contents(atPath: json).flatMap { try? decoder.decode(SnapshotTextLayerFile.self, from: $0) }
        return SnapshotInfo(bundleIdentifier: id, number: n, reason: layer?.reason ?? "earlier", policy: layer?.policy ?? snapshotPolicy(id),
                            png: dir + "/\(n).png", textLayer: json, time: layer?.time ?? Date(timeIntervalSince1970: 0))
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
