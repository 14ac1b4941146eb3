import AppHostProtocol
import Foundation
import Snapshots

/// The app switcher and its snapshots: which apps are in it (most recent first), and the
/// pictures the host keeps of them.
struct SnapshotKeeperState {
    /// Most recently active first; an app joins when it first becomes active and leaves
    /// when the user terminates it or it is uninstalled.
    var switcher: [String] = []
    /// Whether `switcher` has taken in the apps an earlier host on this state directory
    /// pictured (done once, before the first change, so a removal is not undone).
    var seeded = false
    /// The next snapshot number of each app.
    var counters: [String: Int] = [:]
    /// The latest kept snapshot of each app.
    var latest: [String: SnapshotInfo] = [:]
    /// How many snapshots this host has taken (of any app); each gets the next number.
    var serial: UInt64 = 0
    /// Every snapshot taken in this host's life, with the tree it was drawn from
    /// (privacy checks inspect them), newest last; bounded per app.
    var taken: [String: [TakenSnapshot]] = [:]
    /// Renders in progress; `waitForSnapshots` waits for them.
    var rendering = 0
    var idleWaiters: [CheckedContinuation<Void, Never>] = []
}

/// A snapshot with what it was drawn from.
public struct TakenSnapshot: Sendable {
    public var info: SnapshotInfo
    /// The app's window as it was (before the policy).
    public var tree: ViewTree
    /// What was rendered (nil under `none`).
    public var rendered: RenderedSnapshot?
    /// Its place among every snapshot this host took, of any app (1, 2, ...): compare
    /// with ``Supervisor/snapshotMark()`` to keep only those taken since.
    public var serial: UInt64
}

/// The JSON written beside each PNG.
struct SnapshotTextLayerFile: Codable {
    var bundleIdentifier: String
    var number: Int
    var reason: String
    var policy: SnapshotPolicy
    var time: Date
    var screen: ScreenSize
    var texts: [TextItem]
    var warnings: [String]
}

extension Supervisor {
    static let snapshotsKept = 10

    var snapshotsDirectory: String { configuration.stateDirectory + "/snapshots" }

    /// The policy in force for an app: its own, or the host's when stricter.
    func snapshotPolicy(_ id: String) -> SnapshotPolicy {
        (apps[id]?.app.manifest.snapshotPolicy ?? .default).stricter(configuration.snapshotPolicy)
    }

    /// An app became active: it is in the switcher, in front.
    func switcherActivated(_ id: String) {
        seedSwitcher()
        snapshots.switcher.removeAll { $0 == id }
        snapshots.switcher.insert(id, at: 0)
    }

    /// The user terminated the app, or it was uninstalled: out of the switcher.
    func switcherRemoved(_ id: String, uninstalled: Bool) {
        seedSwitcher()
        snapshots.switcher.removeAll { $0 == id }
        if uninstalled {
            snapshots.latest.removeValue(forKey: id)
            snapshots.taken.removeValue(forKey: id)
            snapshots.counters.removeValue(forKey: id)
            try? FileManager.default.removeItem(atPath: snapshotsDirectory + "/" + id)
        }
    }

    /// A callback returned: after `didEnterBackground` the host takes the app's picture.
    func snapshotAfterCallback(_ callback: LifecycleCallback, app id: String) {
        if callback == .didEnterBackground {
            takeSnapshot(id, reason: "didEnterBackground")
        }
    }

    /// The app called a background fetch's or a remote notification's completion handler
    /// and the host accepted it: in the background, iOS updates the app's snapshot then
    /// (not when the delegate method returns: an app may complete later). The app sent
    /// its window before the completion, so the tree is the one it completed with. A
    /// completion in the foreground takes none.
    func snapshotAfterCompletion(_ request: ServiceRequest, reply: ServiceReply, app id: String, state: AppState) {
        guard state == .background, case .ok = reply else { return }
        switch request {
        case .fetchCompleted:
            takeSnapshot(id, reason: "background fetch")
        case .remoteNotificationCompleted:
            takeSnapshot(id, reason: "silent push")
        default:
            break
        }
    }

    /// The app became active: `ignoreSnapshotOnNextApplicationLaunch` has done its work.
    func snapshotsActivated(_ id: String) {
        runtimes[id]?.ignoreSnapshotsUntilActive = false
    }

    /// Takes a snapshot of the app's window as it is now, under its policy. Rendering
    /// runs off the supervisor; the `snapshot` event says when it is on disk.
    @discardableResult
    func takeSnapshot(_ id: String, reason: String) -> Task<SnapshotInfo?, Never>? {
        guard let row = apps[id], let rt = runtimes[id] else { return nil }
        let tree = rt.viewTree ?? ViewTree()
        var policy = snapshotPolicy(id)
        var why = reason
        // Every snapshot until the app is next active, so a fetch or push refresh
        // after it does not replace the launch image the next launch shows.
        if rt.ignoreSnapshotsUntilActive {
            policy = policy.stricter(.launchImage)
            why += "; ignoreSnapshotOnNextApplicationLaunch"
        }
        snapshots.serial += 1
        let serial = snapshots.serial
        let dir = snapshotsDirectory + "/" + id
        let number = nextSnapshotNumber(id)
        let time = now()
        if policy == .none {
            // Nothing kept, and nothing kept from before either.
            try? FileManager.default.removeItem(atPath: dir)
            let info = SnapshotInfo(bundleIdentifier: id, number: number, reason: why, policy: policy, png: nil, textLayer: nil, time: time)
            snapshots.latest.removeValue(forKey: id)
            record(TakenSnapshot(info: info, tree: tree, rendered: nil, serial: serial))
            events.append(.snapshot, app: id, pid: rt.pid, cause: "snapshot \(number) not kept (\(why)): policy none; earlier snapshots deleted", time: time)
            return Task { info }
        }
        let screen = configuration.screen
        let bundle = row.app.bundlePath
        let launchImage = row.app.manifest.launchImageFile
        let png = dir + "/\(number).png"
        let json = dir + "/\(number).json"
        snapshots.rendering += 1
        let work = Task.detached(priority: .utility) { () -> Result<RenderedSnapshot, SnapshotWriteError> in
            do {
                guard let rendered = try SnapshotRenderer.render(tree, screen: screen, policy: policy, bundlePath: bundle, launchImage: launchImage) else {
                    return .failure(SnapshotWriteError(message: "the renderer kept nothing"))
                }
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
                try PNGCodec.encode(rendered.image).write(to: URL(fileURLWithPath: png + ".tmp"))
                let layer = SnapshotTextLayerFile(bundleIdentifier: id, number: number, reason: why, policy: policy, time: time,
                                                  screen: screen, texts: rendered.textLayer, warnings: rendered.warnings)
                // WireJSON: the time with its milliseconds, as every other AppHost file.
                try WireJSON.encoder(pretty: true).encode(layer).write(to: URL(fileURLWithPath: json))
                // The PNG appears complete or not at all.
                guard rename(png + ".tmp", png) == 0 else { throw SnapshotWriteError(message: "rename \(png): \(String(cString: strerror(errno)))") }
                return .success(rendered)
            } catch let error as SnapshotWriteError {
                return .failure(error)
            } catch {
                return .failure(SnapshotWriteError(message: "\(error)"))
            }
        }
        return Task {
            let result = await work.value
            defer { snapshotRendered() }
            switch result {
            case .success(let rendered):
                let info = SnapshotInfo(bundleIdentifier: id, number: number, reason: why, policy: policy, png: png, textLayer: json, time: time)
                snapshots.latest[id] = info
                record(TakenSnapshot(info: info, tree: tree, rendered: rendered, serial: serial))
                pruneSnapshots(id, keepingFrom: number - Self.snapshotsKept + 1)
                events.append(.snapshot, app: id, pid: runtimes[id]?.pid,
                              cause: "snapshot \(number) taken (\(why)), policy \(policy.rawValue): \(png)", time: time)
                return info
            case .failure(let error):
                events.append(.warning, app: id, cause: "snapshot \(number) failed (\(why)): \(error.message)", time: now())
                return nil
            }
        }
    }

    private func nextSnapshotNumber(_ id: String) -> Int {
        if snapshots.counters[id] == nil {
            // Go on after what an earlier host left.
            let names = (try? FileManager.default.contentsOfDirectory(atPath: snapshotsDirectory + "/" + id)) ?? []
            snapshots.counters[id] = (names.compactMap { Int(($0 as NSString).deletingPathExtension) }.max() ?? 0) + 1
        }
        let n = snapshots.counters[id]!
        snapshots.counters[id] = n + 1
        return n
    }

    private func record(_ snapshot: TakenSnapshot) {
        var list = snapshots.taken[snapshot.info.bundleIdentifier, default: []]
        list.append(snapshot)
        if list.count > 50 { list.removeFirst(list.count - 50) }
        snapshots.taken[snapshot.info.bundleIdentifier] = list
    }

    private func pruneSnapshots(_ id: String, keepingFrom first: Int) {
        let dir = snapshotsDirectory + "/" + id
        for name in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] {
            if let n = Int((name as NSString).deletingPathExtension.components(separatedBy: ".").first ?? ""), n < first {
                try? FileManager.default.removeItem(atPath: dir + "/" + name)
            }
        }
    }

    private func snapshotRendered() {
        snapshots.rendering -= 1
        if snapshots.rendering == 0 {
            for w in snapshots.idleWaiters { w.resume() }
            snapshots.idleWaiters.removeAll()
        }
    }

    // MARK: API

    /// Waits until no snapshot is being rendered (tests, privacy checks).
    public func waitForSnapshots() async {
        guard snapshots.rendering > 0 else { return }
        await withCheckedContinuation { snapshots.idleWaiters.append($0) }
    }

    /// Every snapshot taken of an app in this host's life, oldest first (with its tree).
    public func takenSnapshots(_ id: String) -> [TakenSnapshot] {
        snapshots.taken[id] ?? []
    }

    /// The snapshots of an app taken after `mark` (a ``snapshotMark()``), oldest first:
    /// one run's pictures, not an earlier run's of the same bundle identifier.
    public func takenSnapshots(_ id: String, since mark: UInt64) -> [TakenSnapshot] {
        (snapshots.taken[id] ?? []).filter { $0.serial > mark }
    }

    /// The serial of the latest snapshot taken (0 before any): snapshots taken after
    /// this call have a greater ``TakenSnapshot/serial``.
    public func snapshotMark() -> UInt64 {
        snapshots.serial
    }

    /// `apphost snapshot`: an app running code with a window is pictured now; otherwise (a
    /// suspended app is what the switcher shows) its latest kept snapshot.
    public func snapshot(_ bundle: BundleID) async throws(ControlError) -> SnapshotInfo {
        let id = bundle.rawValue
        _ = try installed(id)
        if runtimes[id]?.machine.isRunningCode == true, runtimes[id]?.viewTree != nil, let task = takeSnapshot(id, reason: "requested") {
            if let info = await task.value { return info }
            throw ControlError(.internalError, "the snapshot of \(id) could not be written (see `apphost events \(id)`)")
        }
        // A picture still being drawn (the app just went home) is the one the switcher shows.
        await waitForSnapshots()
        if let info = latestSnapshot(id) { return info }
        throw ControlError(.notRunning, "\(id) has no snapshot yet: it has not drawn a window and left the foreground (or its policy is none)")
    }

    /// The latest kept snapshot, from memory or from what an earlier host left on disk.
    func latestSnapshot(_ id: String) -> SnapshotInfo? {
        if let info = snapshots.latest[id] { return info }
        let dir = snapshotsDirectory + "/" + id
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
        guard !snapshots.seeded else { return }
        snapshots.seeded = true
        let earlier = ((try? FileManager.default.contentsOfDirectory(atPath: snapshotsDirectory)) ?? [])
            .filter { apps[$0] != nil && !snapshots.switcher.contains($0) }
            .compactMap { id in latestSnapshot(id).map { (id, $0.time) } }
            .sorted { $0.1 > $1.1 }.map(\.0)
        snapshots.switcher += earlier
    }

    /// `apphost switcher`: the apps in the switcher, most recent first, with the pictures
    /// being drawn when it is asked finished first.
    public func switcher() async -> [SwitcherEntry] {
        await waitForSnapshots()
        seedSwitcher()
        return snapshots.switcher.compactMap { id in
            guard let row = apps[id] else { return nil }
            return SwitcherEntry(bundleIdentifier: id, name: row.app.manifest.displayName ?? row.app.name,
                                 state: runtimes[id]?.machine.state ?? .notRunning, snapshot: latestSnapshot(id))
        }
    }
}

struct SnapshotWriteError: Error {
    let message: String
}
