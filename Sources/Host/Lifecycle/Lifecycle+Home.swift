import AppHostProtocol
import HostConfig

// The lifecycle's way home and back (Lifecycle.swift holds the table that calls these):
// willResignActive, then — once it has returned — the background and didEnterBackground,
// or willTerminate for an app that opted out of the background; the foreground's
// callbacks; and the foreground hang watchdog's deadline while the app is active.
extension Lifecycle {
    /// Home from active: the app is `inactive` and gets `willResignActive`; it enters the
    /// background only once that has returned (``resignReturned()``). iOS counts the 5 s
    /// of `didEnterBackground` from when that callback is sent, so a slow
    /// `willResignActive` is its own: it is bounded by the scene-update watchdog's
    /// `foregroundHang` (a deadline, since the app is no longer active and its run loop is
    /// not watched), and a kill for it names it.
    mutating func goHome(cause: String) -> [Effect] {
        var fx = stopHangCheck()
        fx += move(to: .inactive, cause: cause)
        resigning = true
        fx.append(.send(.willResignActive, state: .inactive))
        fx.append(.startTimer(.resignCallback, after: profile.duration(.foregroundHang)))
        return fx
    }

    /// `willResignActive` returned (not terminating): on to the background, or to
    /// willTerminate for an `UIApplicationExitsOnSuspend` app, or — brought back to the
    /// foreground meanwhile — active again.
    mutating func resignReturned() -> [Effect] {
        if placement == .foreground {
            var fx = move(to: .active, cause: "foreground")
            fx.append(.send(.didBecomeActive, state: .active))
            fx += startHangCheck()
            return fx
        }
        if exitsOnSuspend { return exitOnSuspend() }
        var fx = move(to: .background, cause: leavingCause)
        fx += startBackgroundBudget()
        fx += sendDidEnterBackground()
        return fx
    }

    /// An app that opted out of background execution leaves the foreground by
    /// terminating: `willTerminate` while still `inactive`, then its exit (or a kill after
    /// the grace period). It never enters the background (Apple, "Opting Out of
    /// Background Execution").
    mutating func exitOnSuspend() -> [Effect] {
        terminating = .exitsOnSuspend
        return [.send(.willTerminate, state: .inactive), .startTimer(.grace, after: grace)]
    }

    mutating func sendDidEnterBackground() -> [Effect] {
        backgroundCallbackReturned = false
        return [.send(.didEnterBackground, state: .background),
                .startTimer(.backgroundCallback, after: profile.duration(.didEnterBackground))]
    }

    mutating func enterForeground(cause: String) -> [Effect] {
        var fx: [Effect] = [.cancelTimer(.expirationWarning), .cancelTimer(.backgroundBudget), .cancelTimer(.backgroundCallback)]
        backgroundSince = nil
        expirationSent = false
        fx += move(to: .inactive, cause: cause)
        fx.append(.send(.willEnterForeground, state: .inactive))
        fx += move(to: .active, cause: cause)
        fx.append(.send(.didBecomeActive, state: .active))
        fx += startHangCheck()
        return fx
    }

    // MARK: the foreground hang watchdog (issue 18)

    /// Active now: one deadline, `foregroundHang` away, at which the host reads the
    /// app's run-loop stamp. Nothing is sent to the app, now or then.
    mutating func startHangCheck() -> [Effect] {
        activeSince = now
        guard !mainRunLoopUnwatched else { return [] }
        return [.startTimer(.hangCheck, after: profile.duration(.foregroundHang))]
    }

    /// How long a turn busy since `since` has blocked the main thread at `now` while
    /// active: counted from the activation at the earliest, never from the future.
    public func hangBlocked(since: Duration, at now: Duration) -> Duration {
        now - min(max(since, activeSince ?? since), now)
    }

    mutating func stopHangCheck() -> [Effect] {
        activeSince = nil
        return [.cancelTimer(.hangCheck)]
    }

    /// The hang check's rule. Idle: check again `foregroundHang` from now. Busy in one
    /// turn since `since` (counted from the activation at the earliest): killed once
    /// that is `foregroundHang` or more, else checked again when it would be.
    mutating func hangCheck(_ loop: MainRunLoop) -> [Effect] {
        let hang = profile.duration(.foregroundHang)
        switch loop {
        case .unwatched(let why):
            mainRunLoopUnwatched = true
            return [.log("the foreground hang watchdog does not watch this process: \(why)")]
        case .idle:
            return [.startTimer(.hangCheck, after: hang)]
        case .busy(let since):
            let blocked = hangBlocked(since: since, at: now)
            guard blocked >= hang else { return [.startTimer(.hangCheck, after: hang - blocked)] }
            return watchdog(reason: "main run loop blocked for \(DurationText.format(seconds(blocked))) while active",
                            budget: .foregroundHang, namespace: "FRONTBOARD")
        }
    }
}
