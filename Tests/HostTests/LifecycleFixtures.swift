import AppHostProtocol
@testable import Host

/// What the lifecycle table's tests share (`LifecycleTests`, `LifecycleModeTests`):
/// machines in a known state, and readers of the effects they return. No process.
protocol LifecycleFixtures {}

extension LifecycleFixtures {
    typealias Effect = Lifecycle.Effect

    /// A machine launched in the foreground and active.
    func activeMachine(exitsOnSuspend: Bool = false) -> Lifecycle {
        var m = Lifecycle(exitsOnSuspend: exitsOnSuspend)
        _ = m.handle(.launch(LaunchOptions(reason: .user), placement: .foreground))
        _ = m.handle(.spawned(pid: 42))
        _ = m.handle(.handshake)
        _ = m.handle(.callbackReturned(.didFinishLaunching(options: LaunchOptions(reason: .user))))
        _ = m.handle(.callbackReturned(.didBecomeActive))
        return m
    }

    /// Home pressed and every callback returned; returns the last effects.
    func home(_ m: inout Lifecycle, at t: Duration = .zero) -> [Effect] {
        _ = m.handle(.home, at: t)
        _ = m.handle(.callbackReturned(.willResignActive), at: t)
        return m.handle(.callbackReturned(.didEnterBackground), at: t)
    }

    /// A machine sent home from active and stopped.
    func suspended() -> Lifecycle {
        var m = activeMachine()
        _ = home(&m)
        _ = m.handle(.stopConfirmed)
        return m
    }

    func signals(_ fx: [Effect]) -> [Lifecycle.Signal] {
        fx.compactMap { if case .signal(let s, _) = $0 { s } else { nil } }
    }

    func sends(_ fx: [Effect]) -> [String] {
        fx.compactMap { if case .send(let cb, _) = $0 { cb.name } else { nil } }
    }

    /// The effects other than timer bookkeeping.
    func acts(_ fx: [Effect]) -> [Effect] {
        fx.filter {
            switch $0 {
            case .startTimer, .cancelTimer: false
            default: true
            }
        }
    }

    func transitions(_ fx: [Effect]) -> [String] {
        fx.compactMap { if case .transition(let f, let t, _) = $0 { "\(f.rawValue)→\(t.rawValue)" } else { nil } }
    }
}
