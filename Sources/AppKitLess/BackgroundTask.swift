/// Identifies a background task begun with
/// ``Application/beginBackgroundTask(withName:expirationHandler:)``, like
/// `UIBackgroundTaskIdentifier`.
public struct BackgroundTaskIdentifier: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The number the app chose for the task; unique per process, starting at 1.
    public var rawValue: Int

    /// Wraps a raw identifier.
    public init(rawValue: Int) {
        self.rawValue = rawValue
    }

    /// No task (iOS's `UIBackgroundTaskInvalid`, 0).
    public static let invalid = BackgroundTaskIdentifier(rawValue: 0)

    /// The raw number.
    public var description: String { "\(rawValue)" }
}

/// The background tasks this process has begun and not yet ended.
/// Plain value; ``Application`` keeps it behind a lock.
struct BackgroundTaskTable {
    /// What is kept for an open task.
    struct Entry {
        var name: String?
        var expirationHandler: (@MainActor @Sendable () -> Void)?
    }

    private(set) var lastID = 0
    private(set) var open: [Int: Entry] = [:]

    /// Records a new task and returns its id (1, 2, 3, ...).
    mutating func begin(name: String?, expirationHandler: (@MainActor @Sendable () -> Void)?) -> Int {
        lastID += 1
        open[lastID] = Entry(name: name, expirationHandler: expirationHandler)
        return lastID
    }

    /// Forgets task `id`; returns its entry, or nil if it was never begun or already ended.
    mutating func end(_ id: Int) -> Entry? {
        open.removeValue(forKey: id)
    }

    /// The entry of open task `id`; nil if it was never begun or already ended.
    func entry(of id: Int) -> Entry? {
        open[id]
    }
}
