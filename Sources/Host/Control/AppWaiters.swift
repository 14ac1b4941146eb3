import AppHostProtocol

/// The verbs waiting for an app: for a state (`waitUntil`), and for the kernel's word on a
/// stop the host sent (`status` answers with the state the kernel confirms). It owns them
/// alone: the supervisor adds a waiter, tells it what happened, and resumes what it hands
/// back, outside of it. Tested without a host (`AppWaitersTests`).
///
/// Generic over what waits so that a test can hold plain values; the host holds
/// continuations.
struct AppWaiters<Waiter> {
    private var forState: [BundleID: [(state: AppState, waiter: Waiter)]] = [:]
    private var forStop: [BundleID: [Waiter]] = [:]

    /// `waiter` waits until `app` is in `state`.
    mutating func wait(for state: AppState, of app: BundleID, _ waiter: Waiter) {
        forState[app, default: []].append((state, waiter))
    }

    /// `app` entered `state`: those who waited for it, in the order they came (no longer held).
    mutating func entered(_ state: AppState, by app: BundleID) -> [Waiter] {
        guard let list = forState[app], list.contains(where: { $0.state == state }) else { return [] }
        let left = list.filter { $0.state != state }
        forState[app] = left.isEmpty ? nil : left
        return list.filter { $0.state == state }.map(\.waiter)
    }

    /// `waiter` waits for the kernel's word on `app`'s stop.
    mutating func waitForStop(of app: BundleID, _ waiter: Waiter) {
        forStop[app, default: []].append(waiter)
    }

    /// Whether anyone waits for a stop (the bound on those waits is armed meanwhile).
    var waitsForStops: Bool { !forStop.isEmpty }

    /// `app`'s stop is confirmed, or no longer pending: those who waited for it.
    mutating func stopSettled(of app: BundleID) -> [Waiter] {
        forStop.removeValue(forKey: app) ?? []
    }

    /// The bound ran out: everyone waiting for a stop, in the order of their apps.
    mutating func allStopWaiters() -> [Waiter] {
        let all = forStop.keys.sorted().flatMap { forStop[$0] ?? [] }
        forStop.removeAll()
        return all
    }
}
