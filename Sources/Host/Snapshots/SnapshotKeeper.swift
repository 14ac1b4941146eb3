import AppHostProtocol
import Foundation
import Snapshots

/// The app switcher and the snapshots of its apps, as a pure value: `handle(event) -> [Effect]`.
///
/// It owns which apps are in the switcher (most recent first), the numbering of each
/// app's snapshots, the one switcher snapshot of each (iOS keeps one per app and scene:
/// each new picture replaces the last, on disk as in memory), and every snapshot taken in
/// this host's life with the tree it was drawn from. It decides when a picture is taken
/// (after `didEnterBackground`, after a background fetch's or silent push's completion:
/// only on the way to or in the background; a picture the user asks for is a screenshot,
/// drawn by the supervisor and never seen here) and under which policy, and it coalesces
/// renders: at most one render in flight per app, and behind it only the newest request
/// (an older one waiting is superseded: it is recorded, with its tree, as taken but not
/// drawn). A picture whose inputs are those of the app's last drawn one (same tree, policy
/// and bundle, and nothing read from the bundle) is that file, not a render. The
/// ``Supervisor`` feeds events and performs the effects: it renders and writes files off
/// the actor, deletes files and logs events.
struct SnapshotKeeper: Sendable {
    /// Taken snapshots remembered per app (with their trees), newest last.
    static let takenKept = 50

    /// What the host knows of an app when something may picture it.
    struct Subject: Sendable, Equatable {
        var app: BundleID
        /// The app's window as it is now (an empty tree if it sent none).
        var tree: ViewTree
        /// The policy in force: the app's own, or the host's when stricter.
        var policy: SnapshotPolicy
        /// `ignoreSnapshotOnNextApplicationLaunch()` was called and the app has not been
        /// active since: the picture is the launch image.
        var ignoreUntilActive = false
        var time: Date
        var bundlePath: String
        var launchImage: String?
        /// The number of the switcher snapshot an earlier host left on disk (read only
        /// while the keeper has not numbered this app yet; see ``SnapshotKeeper/numbers(_:)``).
        var highestOnDisk: Int? = nil
    }

    /// One picture to draw and write.
    struct Job: Sendable, Equatable {
        var app: BundleID
        var number: Int
        /// Its place among every snapshot this host took (see ``TakenSnapshot/serial``).
        var serial: UInt64
        var tree: ViewTree
        var policy: SnapshotPolicy
        var reason: String
        var time: Date
        var bundlePath: String
        var launchImage: String?
        /// The app's last drawn picture (or another app's, see ``Inputs/sharedKey``) had
        /// the same inputs: keep or link its PNG (falling back to a render if it is gone)
        /// and take its rendering as this one's.
        var copy: Copy? = nil

        /// Everything the picture depends on besides the host's screen and font.
        var inputs: Inputs {
            Inputs(tree: tree, policy: policy, bundlePath: bundlePath, launchImage: launchImage)
        }
    }

    /// What a picture is drawn from (the screen and the font are the host's, fixed for its life).
    struct Inputs: Sendable, Equatable {
        var tree: ViewTree
        var policy: SnapshotPolicy
        var bundlePath: String
        var launchImage: String?

        /// These inputs without the app's bundle, when the picture cannot depend on it
        /// (`default` or `redact`, no image view): the same for any app with this window.
        var sharedKey: Inputs? {
            guard policy == .default || policy == .redact, isSelfContained else { return nil }
            return Inputs(tree: tree, policy: policy, bundlePath: "", launchImage: nil)
        }

        /// Whether the picture depends only on these values: nothing is read from the
        /// bundle (an image view, a launch image), whose files may change between renders.
        var isSelfContained: Bool {
            switch policy {
            case .none: return false
            case .launchImage: return launchImage == nil
            case .default, .redact: return !tree.views.contains { $0.drawsBundleImage }
            }
        }
    }

    /// An earlier picture with the same inputs.
    struct Copy: Sendable, Equatable {
        var png: String
        var drawing: SnapshotDrawing
    }

    /// How a render ended.
    enum RenderOutcome: Sendable {
        /// Drawn and on disk, replacing the app's switcher snapshot.
        case written(SnapshotDrawing, png: String, textLayer: String)
        case failed(String)
    }

    enum Event: Sendable {
        /// The apps an earlier host on this state directory pictured, newest first (taken
        /// in once, behind the apps this host has seen active).
        case seed([BundleID])
        /// The app became active: in front of the switcher; the launch-image rule ends.
        case activated(BundleID)
        /// The user terminated the app, or it was uninstalled (its snapshots go with it).
        case removed(BundleID, uninstalled: Bool)
        /// A delegate method returned: after `didEnterBackground` the app is pictured.
        case callbackReturned(LifecycleCallback, Subject)
        /// The host answered a service request in `state`: an accepted background fetch
        /// or silent push completion in the background pictures the app.
        case completionReturned(ServiceRequest, reply: ServiceReply, state: AppState, Subject)
        /// A ``Effect/render(_:)`` ended, at `time`.
        case renderFinished(app: BundleID, number: Int, RenderOutcome, time: Date)
    }

    enum Effect: Sendable, Equatable {
        /// Draw `job.tree` under `job.policy`, write it over the app's switcher snapshot
        /// (number `job.number`), then feed ``Event/renderFinished(app:number:_:time:)``.
        case render(Job)
        /// Delete the app's switcher snapshot (under `none`, on uninstall, and a render
        /// that finished after its app was uninstalled).
        case deleteAll(BundleID)
        /// Record a host event (`.snapshot` or `.warning`).
        case log(HostEvent.Kind, app: BundleID, cause: String, time: Date)
        /// Nothing is being drawn or waiting to be: resume `waitForSnapshots`.
        case idle
    }

    /// Most recently active first.
    private(set) var switcher: [BundleID] = []
    /// Whether ``Event/seed(_:)`` has been taken in.
    private(set) var seeded = false
    /// The next snapshot number of each app.
    private var counters: [BundleID: Int] = [:]
    /// The switcher snapshot of each app (in this host's life): the last one written.
    private(set) var latest: [BundleID: SnapshotInfo] = [:]
    /// How many snapshots this host has taken (of any app).
    private(set) var serial: UInt64 = 0
    /// Every snapshot taken, per app, oldest first, bounded by `takenKept`.
    private(set) var taken: [BundleID: [TakenSnapshot]] = [:]
    /// Per app: the render in flight and the newest request waiting behind it.
    private var work: [BundleID: AppWork] = [:]
    /// Per app: the last picture drawn and written, with its inputs (its switcher snapshot).
    private var lastDrawn: [BundleID: (inputs: Inputs, copy: Copy)] = [:]
    /// The last pictures drawn that depend on nothing of their app's (see
    /// ``Inputs/sharedKey``), newest last, at most ``sharedKept``: another app whose
    /// picture has the same inputs gets a copy of the file and shares the rendering (and
    /// its pixels) instead of drawing it again. A copy whose source file is gone meanwhile
    /// (replaced, its app uninstalled) falls back to a render.
    private var sharedDrawn: [(key: Inputs, app: BundleID, copy: Copy)] = []
    static let sharedKept = 8

    private struct AppWork: Sendable {
        var inFlight: Job?
        /// The app was uninstalled while this render ran: its files go when it ends.
        var orphaned = false
        var pending: Job?
    }

    /// Nothing drawn or waiting to be.
    var isIdle: Bool { work.isEmpty }

    /// Whether the keeper has numbered `app`'s snapshots yet (if not, the next request
    /// should carry ``Subject/highestOnDisk``).
    func numbers(_ app: BundleID) -> Bool { counters[app] != nil }

    /// The render in flight for `app`, and the request waiting behind it (tests, reports).
    func rendering(_ app: BundleID) -> (inFlight: Job?, pending: Job?) {
        (work[app]?.inFlight, work[app]?.pending)
    }

    mutating func handle(_ event: Event) -> [Effect] {
        switch event {
        case .seed(let earlier):
            if !seeded {
                seeded = true
                switcher += earlier.filter { !switcher.contains($0) }
            }
            return []
        case .activated(let app):
            switcher.removeAll { $0 == app }
            switcher.insert(app, at: 0)
            return []
        case .removed(let app, let uninstalled):
            switcher.removeAll { $0 == app }
            guard uninstalled else { return [] }
            return forget(app)
        case .callbackReturned(let callback, let subject):
            guard callback == .didEnterBackground else { return [] }
            return request(subject, reason: "didEnterBackground")
        case .completionReturned(let request, let reply, let state, let subject):
            guard state == .background, case .ok = reply else { return [] }
            switch request {
            case .fetchCompleted:
                return self.request(subject, reason: "background fetch")
            case .remoteNotificationCompleted:
                return self.request(subject, reason: "silent push")
            default:
                return []
            }
        case .renderFinished(let app, let number, let outcome, let time):
            return finished(app, number: number, outcome, time: time)
        }
    }

    // MARK: requests

    /// A picture of the app is wanted: numbered now, drawn now or after the one in flight.
    private mutating func request(_ subject: Subject, reason: String) -> [Effect] {
        var policy = subject.policy
        var why = reason
        // Every snapshot until the app is next active, so a fetch or push refresh after it
        // does not replace the launch image the next launch shows.
        if subject.ignoreUntilActive {
            policy = policy.stricter(.launchImage)
            why += "; ignoreSnapshotOnNextApplicationLaunch"
        }
        serial += 1
        let job = Job(app: subject.app, number: nextNumber(subject), serial: serial, tree: subject.tree, policy: policy,
                      reason: why, time: subject.time, bundlePath: subject.bundlePath, launchImage: subject.launchImage)
        guard var w = work[subject.app] else {
            return start(job)
        }
        var effects: [Effect] = []
        if let older = w.pending {
            // Superseded before it was drawn: only the newest picture matters to the switcher.
            effects += supersede(older, by: job)
        }
        w.pending = job
        work[subject.app] = w
        return effects
    }

    private mutating func nextNumber(_ subject: Subject) -> Int {
        // Go on after the picture an earlier host left.
        let n = counters[subject.app] ?? (subject.highestOnDisk ?? 0) + 1
        counters[subject.app] = n + 1
        return n
    }

    /// Starts `job` (nothing is in flight for its app): a render, or under `none` the
    /// deletion of the app's picture, done at once.
    private mutating func start(_ job: Job) -> [Effect] {
        guard job.policy == .none else {
            var job = job
            if let last = lastDrawn[job.app], last.inputs == job.inputs, job.inputs.isSelfContained {
                job.copy = last.copy
            } else if let key = job.inputs.sharedKey, let shared = sharedDrawn.last(where: { $0.key == key }) {
                job.copy = shared.copy
            }
            work[job.app] = AppWork(inFlight: job)
            return [.render(job)]
        }
        // Nothing kept, and nothing kept from before either.
        lastDrawn.removeValue(forKey: job.app)
        sharedDrawn.removeAll { $0.app == job.app }
        let info = SnapshotInfo(bundleIdentifier: job.app, number: job.number, reason: job.reason, policy: job.policy,
                                png: nil, textLayer: nil, time: job.time)
        latest.removeValue(forKey: job.app)
        record(TakenSnapshot(info: info, tree: job.tree, drawing: nil, serial: job.serial))
        return [
            .deleteAll(job.app),
            .log(.snapshot, app: job.app, cause: "snapshot \(job.number) not kept (\(job.reason)): policy none; the earlier one deleted", time: job.time),
        ]
    }

    /// `older` waited behind a render and a newer request came: it is taken (its tree
    /// recorded) but never drawn.
    private mutating func supersede(_ older: Job, by newer: Job) -> [Effect] {
        let info = SnapshotInfo(bundleIdentifier: older.app, number: older.number, reason: older.reason, policy: older.policy,
                                png: nil, textLayer: nil, time: older.time)
        record(TakenSnapshot(info: info, tree: older.tree, drawing: nil, serial: older.serial, supersededBy: newer.number))
        return [.log(.snapshot, app: older.app,
                     cause: "snapshot \(older.number) not drawn (\(older.reason)): superseded by snapshot \(newer.number) (\(newer.reason)) before its turn",
                     time: newer.time)]
    }

    // MARK: renders ending

    private mutating func finished(_ app: BundleID, number: Int, _ outcome: RenderOutcome, time: Date) -> [Effect] {
        guard let w = work[app], let job = w.inFlight, job.number == number else { return [] }
        var effects: [Effect] = []
        if w.orphaned {
            // Uninstalled while drawn: nothing of it stays (if the app is back and pictured
            // again, that picture is drawn after this deletion).
            if case .written = outcome { effects.append(.deleteAll(app)) }
        } else {
            switch outcome {
            case .written(let drawing, let png, let textLayer):
                let info = SnapshotInfo(bundleIdentifier: app, number: number, reason: job.reason, policy: job.policy,
                                        png: png, textLayer: textLayer, time: job.time)
                latest[app] = info
                lastDrawn[app] = (job.inputs, Copy(png: png, drawing: drawing))
                if let key = job.inputs.sharedKey {
                    sharedDrawn.removeAll { $0.key == key }
                    sharedDrawn.append((key, app, Copy(png: png, drawing: drawing)))
                    if sharedDrawn.count > Self.sharedKept { sharedDrawn.removeFirst(sharedDrawn.count - Self.sharedKept) }
                }
                record(TakenSnapshot(info: info, tree: job.tree, drawing: drawing, serial: job.serial))
                effects.append(.log(.snapshot, app: app,
                                    cause: "snapshot \(number) taken (\(job.reason)), policy \(job.policy.rawValue): \(png)", time: job.time))
            case .failed(let message):
                effects.append(.log(.warning, app: app, cause: "snapshot \(number) failed (\(job.reason)): \(message)", time: time))
            }
        }
        work[app] = nil
        if let next = w.pending {
            effects += start(next)
        }
        if work.isEmpty { effects.append(.idle) }
        return effects
    }

    // MARK: uninstall

    private mutating func forget(_ app: BundleID) -> [Effect] {
        latest.removeValue(forKey: app)
        lastDrawn.removeValue(forKey: app)
        sharedDrawn.removeAll { $0.app == app }
        taken.removeValue(forKey: app)
        counters.removeValue(forKey: app)
        if var w = work[app] {
            w.pending = nil
            w.orphaned = true
            work[app] = w
        }
        return [.deleteAll(app)]
    }

    // MARK: helpers

    /// Keeps `snapshot` among the app's taken ones, in serial order (a superseded request
    /// is recorded before the older render in flight ends).
    private mutating func record(_ snapshot: TakenSnapshot) {
        var list = taken[snapshot.info.bundleIdentifier, default: []]
        let at = list.lastIndex { $0.serial < snapshot.serial }.map { $0 + 1 } ?? 0
        list.insert(snapshot, at: at)
        if list.count > Self.takenKept { list.removeFirst(list.count - Self.takenKept) }
        taken[snapshot.info.bundleIdentifier] = list
    }
}

/// What the host keeps of a drawn picture: its text layer and warnings, not its
/// pixels. Those are in the PNG file; kept in memory they cost 11.3 MiB an app at the
/// default screen (1170 × 2532 × 4 bytes), which is what made an idle host with 200
/// suspended apps 2.36 GB (issue 17).
public struct SnapshotDrawing: Sendable, Equatable {
    /// Every visible string after the policy, in draw order.
    public var textLayer: [TextItem]
    /// Images that could not be read, text that could not be drawn.
    public var warnings: [String]
    /// The policy it was rendered under.
    public var policy: SnapshotPolicy

    public init(_ rendered: RenderedSnapshot) {
        self.textLayer = rendered.textLayer
        self.warnings = rendered.warnings
        self.policy = rendered.policy
    }
}

/// A snapshot with what it was drawn from.
public struct TakenSnapshot: Sendable {
    public var info: SnapshotInfo
    /// The app's window as it was (before the policy).
    public var tree: ViewTree
    /// What was drawn, without its pixels (nil under `none`, and for a snapshot
    /// superseded before it was drawn).
    public var drawing: SnapshotDrawing?
    /// Its place among every snapshot this host took, of any app (1, 2, ...): compare
    /// with ``Supervisor/snapshotMark()`` to keep only those taken since.
    public var serial: UInt64
    /// The number of the newer snapshot that replaced this one while it waited behind
    /// another render (then nothing was drawn or written of it: `drawing` and `info.png`
    /// are nil, as nothing of it can show in the switcher).
    public var supersededBy: Int?

    public init(info: SnapshotInfo, tree: ViewTree, drawing: SnapshotDrawing?, serial: UInt64, supersededBy: Int? = nil) {
        self.info = info
        self.tree = tree
        self.drawing = drawing
        self.serial = serial
        self.supersededBy = supersededBy
    }

    /// The picture with its pixels, read back from its PNG file: nil when nothing was
    /// drawn, or the file no longer holds this snapshot (the host keeps one picture per
    /// app, and a newer one replaces it), or it cannot be read. Each call reads the file.
    ///
    /// The PNG is read first and the text layer beside it after: a new picture's text
    /// layer is written before its PNG is renamed into place, so a PNG read before the
    /// text layer still names this snapshot is this snapshot's.
    public var rendered: RenderedSnapshot? {
        guard let drawing, let png = info.png, let textLayer = info.textLayer,
              let data = FileManager.default.contents(atPath: png),
              let image = try? PNGCodec.decode(data),
              let layerData = FileManager.default.contents(atPath: textLayer),
              let layer = try? WireJSON.decoder().decode(SnapshotTextLayerFile.self, from: layerData),
              layer.bundleIdentifier == info.bundleIdentifier, layer.number == info.number else { return nil }
        return RenderedSnapshot(image: image, textLayer: drawing.textLayer, warnings: drawing.warnings, policy: drawing.policy)
    }
}

extension ViewNode {
    /// Whether drawing this view (or a visible subview) reads an image from the bundle.
    var drawsBundleImage: Bool {
        if isHidden { return false }
        if case .image = content { return true }
        return subviews.contains { $0.drawsBundleImage }
    }
}
