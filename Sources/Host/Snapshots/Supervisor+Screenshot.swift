import AppHostProtocol
import Foundation
import Snapshots

/// `apphost io screenshot` (simctl's `io <device> screenshot`) and `apphost snapshot` of an
/// app in front: the screen as the user sees it now, that is the app drawn from its
/// current window. Unlike an app-switcher snapshot no snapshot policy applies (the screen
/// shows secure fields as the user sees them: bullets) and nothing joins the switcher or
/// the snapshot folders: on iOS a screenshot the user takes is not a switcher snapshot.
extension Supervisor {
    /// Screenshots kept in `screenshots/`: the CLI copies its own out at once, so a few
    /// suffice for concurrent callers; older ones are deleted.
    static let screenshotsKept = 8

    var screenshotsDirectory: String { configuration.stateDirectory + "/screenshots" }

    /// The app in front: active, or inactive in the foreground (launching, or a
    /// system alert over it).
    func frontmostApp() -> BundleID? {
        processes.ids.sorted().first { isInForeground($0) }
    }

    /// Whether the app is on the screen: active, or inactive in the foreground.
    func isInForeground(_ id: BundleID) -> Bool {
        guard let machine = processes[id]?.machine else { return false }
        return machine.state == .active || (machine.state == .inactive && machine.placement == .foreground)
    }

    /// Draws the app in front and writes the PNG under `screenshots/`.
    public func screenshot() async throws(ControlError) -> ScreenshotInfo {
        guard let id = frontmostApp() else {
            throw ControlError(.notRunning, "no app is in the foreground: the home screen has no picture here "
                + "(bring one forward with `apphost launch <bundle-id>` or `apphost foreground <bundle-id>`)")
        }
        return try await screenshot(of: id)
    }

    /// Draws `id`'s window as it is now, with no policy, and writes the PNG under
    /// `screenshots/`; the switcher and its snapshots are not touched.
    func screenshot(of id: BundleID) async throws(ControlError) -> ScreenshotInfo {
        guard let row = apps[id], let rt = processes[id] else {
            throw ControlError(.notRunning, "\(id) is not running: it has no window to picture")
        }
        let tree = rt.viewTree ?? ViewTree()
        let screen = configuration.screen
        let bundlePath = row.app.bundlePath
        let launchImage = row.app.manifest.launchImageFile
        let time = now()
        let directory = screenshotsDirectory
        // Named by the wall clock's milliseconds (zero-padded: names sort as times do)
        // and a random part, so that concurrent callers never share a file.
        let stamp = String(UInt64(max(0, Date().timeIntervalSince1970 * 1000)))
        let name = String(repeating: "0", count: max(0, 15 - stamp.count)) + stamp + "-" + String(UInt32.random(in: .min ... .max), radix: 16)
        let path = directory + "/\(name).png"
        // Drawn off the actor (tens of milliseconds), as snapshots are.
        let result = await Task.detached(priority: .userInitiated) { () -> Result<Void, ControlError> in
            Self.drawScreenshot(tree, screen: screen, bundlePath: bundlePath, launchImage: launchImage,
                                directory: directory, path: path)
        }.value
        try result.get()
        return ScreenshotInfo(bundleIdentifier: id, png: path, time: time, width: screen.width, height: screen.height)
    }

    private nonisolated static func drawScreenshot(_ tree: ViewTree, screen: ScreenSize, bundlePath: String, launchImage: String?,
                                                   directory: String, path: String) -> Result<Void, ControlError> {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            guard let drawn = try SnapshotRenderer.render(tree, screen: screen, policy: .default, bundlePath: bundlePath,
                                                          launchImage: launchImage) else {
                return .failure(ControlError(.internalError, "the renderer drew nothing"))
            }
            try PNGCodec.encode(drawn.image).write(to: URL(fileURLWithPath: path + ".tmp"))
            guard rename(path + ".tmp", path) == 0 else {
                let reason = String(cString: strerror(errno))
                unlink(path + ".tmp")
                return .failure(ControlError(.internalError, "cannot write \(path): \(reason)"))
            }
        } catch {
            unlink(path + ".tmp")
            return .failure(ControlError(.internalError, "cannot draw the screen: \(error)"))
        }
        // Bounded: only the latest few stay (a leftover .tmp of a crash goes too).
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
        for name in names.dropLast(screenshotsKept) where directory + "/" + name != path {
            unlink(directory + "/" + name)
        }
        return .success(())
    }
}
