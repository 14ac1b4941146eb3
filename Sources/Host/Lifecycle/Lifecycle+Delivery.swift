import AppHostProtocol

// Service events (pushes, fetches, location, timers, ...) by state: sent at once to a
// running app, queued while it launches, waking a suspended app when the event may wake
// it, launching a terminated one in the background when it may launch it.
extension Lifecycle {
    /// Delivers a service event according to the state (see ``Event/deliver(_:wake:launch:)``).
    mutating func deliver(_ event: Event) -> [Effect] {
        guard case .deliver(let service, let wake, let launch) = event else { return [] }
        let callback = LifecycleCallback.service(service)
        if terminating != nil { return [.log("\(callback.name) not delivered: the app is terminating")] }
        switch state {
        case .notRunning:
            guard let reason = launch else { return [.log("\(callback.name) not delivered: the app is not running")] }
            reset()
            placement = .background
            launchOptions = LaunchOptions(reason: reason)
            queued = [service]
            var fx: [Effect] = [.spawn(launchOptions), .startTimer(.launch, after: profile.duration(.launch))]
            fx += move(to: .background, cause: "launched in the background for \(callback.name)")
            fx += startBackgroundBudget()
            return fx
        case _ where !connected || !launched:
            queued.append(service)
            return []
        case .active, .inactive:
            return [.send(callback, state: state)]
        case .background:
            var fx: [Effect] = []
            if stopPending {
                guard wake else { return [.log("\(callback.name) not delivered: the app is being suspended")] }
                stopPending = false
                fx.append(.signal(.cont, reason: "woken for \(callback.name) before the stop was confirmed"))
            }
            fx.append(.send(callback, state: .background))
            fx.append(.startTimer(.wake, after: profile.duration(.wake)))
            return fx
        case .suspended:
            guard wake else { return [.log("\(callback.name) not delivered: the app is suspended")] }
            var fx: [Effect] = [.signal(.cont, reason: "woken for \(callback.name)")]
            fx += move(to: .background, cause: "woken for \(callback.name)")
            fx += startBackgroundBudget()
            fx.append(.send(callback, state: .background))
            fx.append(.startTimer(.wake, after: profile.duration(.wake)))
            return fx
        }
    }

    /// Fires host-clock timer `id` at an app that runs code (the supervisor asks only
    /// then); queued like a service event while it is launching.
    mutating func fireTimer(_ id: HostTimerID) -> [Effect] {
        let event = ServiceEvent.timerFired(id: id)
        guard terminating == nil, isRunningCode else {
            return [.log("\(event.name) not delivered: the app runs no code (\(terminating != nil ? "terminating" : state.rawValue))")]
        }
        guard connected, launched else {
            queued.append(event)
            return []
        }
        return [.send(.service(event), state: state)]
    }

    /// Sends the service events that waited for the launch to finish.
    mutating func flushQueued() -> [Effect] {
        defer { queued.removeAll() }
        var fx: [Effect] = []
        let target: AppState = state == .background ? .background : state
        for event in queued {
            fx.append(.send(.service(event), state: target))
        }
        // Timers' fires are no wake-up's handlers: only other events start the wake budget.
        if target == .background, queued.contains(where: { if case .timerFired = $0 { false } else { true } }) {
            fx.append(.startTimer(.wake, after: profile.duration(.wake)))
        }
        return fx
    }
}
