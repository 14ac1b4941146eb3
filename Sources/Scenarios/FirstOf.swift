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

/// Which of two operations finished first (the other is left to finish on its own, as
/// ``firstOf(_:limit:)`` leaves its loser).
enum Either<A: Sendable, B: Sendable>: Sendable {
    case first(A)
    case second(B)
}

func firstOf<A: Sendable, B: Sendable>(_ a: @escaping @Sendable () async -> A,
                                       _ b: @escaping @Sendable () async -> B) async -> Either<A, B> {
    let race = Race<Either<A, B>>()
    let winner = await withCheckedContinuation { (continuation: CheckedContinuation<Either<A, B>?, Never>) in
        race.arm(continuation)
        Task { race.finish(.first(await a())) }
        Task { race.finish(.second(await b())) }
    }
    // Both finish with a value: the first to finish resumed the continuation with it.
    guard let winner else { preconditionFailure("a race finished without a value") }
    return winner
}
