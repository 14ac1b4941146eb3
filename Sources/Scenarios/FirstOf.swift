import Synchronization

/// The result of `operation`, or nil once `limit` of real time has passed first,
/// whichever comes first. Unlike a task group, it does not wait for the loser: an
/// operation that cannot be cancelled (an unstructured task's value, a continuation
/// the host resumes later) is left to finish on its own.
func firstOf<T: Sendable>(_ operation: @escaping @Sendable () async -> T, limit: Duration) async -> T? {
    let race = Race<T>()
    return await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
        race.arm(continuation)
        Task { race.finish(await operation()) }
        Task {
            try? await Task.sleep(for: limit)
            race.finish(nil)
        }
    }
}

private final class Race<T: Sendable>: Sendable {
    private let state = Mutex<CheckedContinuation<T?, Never>?>(nil)

    func arm(_ c: CheckedContinuation<T?, Never>) {
        state.withLock { $0 = c }
    }

    func finish(_ value: T?) {
        let c = state.withLock { s -> CheckedContinuation<T?, Never>? in
            defer { s = nil }
            return s
        }
        c?.resume(returning: value)
    }
}
