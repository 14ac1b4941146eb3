import AppHostProtocol

extension JetsamBand {
    /// The band of an app in `state` with or without a mode activity.
    public static func of(state: AppState, placement: Lifecycle.Placement, hasActivity: Bool) -> JetsamBand {
        switch state {
        case .suspended, .notRunning: .suspended
        case .active: .foreground
        case .inactive: placement == .foreground ? .foreground : .background
        case .background: hasActivity ? .backgroundActivity : .background
        }
    }
}

/// Who jetsam kills, as a pure function of the running apps: tested without a process
/// (`JetsamPolicyTests`).
public enum JetsamPolicy {
    /// A running app as jetsam sees it.
    public struct Candidate: Sendable, Equatable {
        public var app: BundleID
        public var band: JetsamBand
        /// Bytes, as last read from the kernel.
        public var footprint: UInt64
        /// Host time the user last had it in front (or its launch): least recent dies first.
        public var lastUsed: Duration
        /// Which use came first at one host time (a virtual clock that did not move
        /// between two apps' turns in front): a counter of uses, in the host's order.
        public var useOrder: UInt64

        public init(app: BundleID, band: JetsamBand, footprint: UInt64, lastUsed: Duration, useOrder: UInt64 = 0) {
            self.app = app
            self.band = band
            self.footprint = footprint
            self.lastUsed = lastUsed
            self.useOrder = useOrder
        }
    }

    /// One kill and what chose it.
    public struct Victim: Sendable, Equatable {
        public var app: BundleID
        public var band: JetsamBand
        public var footprint: UInt64
    }

    /// The kill order: band by band from `suspended` up, least recently used first in a
    /// band (host time, then the order of uses at one time), then by bundle id (so ties
    /// are the same in every run).
    public static func order(_ candidates: [Candidate]) -> [Candidate] {
        candidates.sorted {
            ($0.band, $0.lastUsed, $0.useOrder, $0.app) < ($1.band, $1.lastUsed, $1.useOrder, $1.app)
        }
    }

    /// The apps to kill, in order, until the sum of the footprints left is below `limit`,
    /// and at least `atLeast` of them (a reported critical level frees one app even when
    /// the footprints say nothing). `total` is the sum over every app counted, which may
    /// be more than the candidates' (apps already on their way out are no candidates).
    public static func victims(_ candidates: [Candidate], total: UInt64, below limit: UInt64, atLeast: Int = 0) -> [Victim] {
        var left = total
        var out: [Victim] = []
        for c in order(candidates) {
            guard left >= limit || out.count < atLeast else { break }
            out.append(Victim(app: c.app, band: c.band, footprint: c.footprint))
            left -= min(left, c.footprint)
        }
        return out
    }
}

/// The device's memory pressure as a value in the manner of ``Lifecycle``:
/// `handle(event) -> [Effect]`, tested without a process (`MemoryPressureTests`).
///
/// The computed level is the sum of the apps' footprints against the device memory:
/// `warning` from 80 %, `critical` from 95 %. A level reported by the user
/// (`apphost device memory`, kept until `normal`) or by the kernel (a PSI trigger, once)
/// goes on top. Rising to `warning` or `critical` warns the apps running code (the
/// supervisor picks them); a computed `critical` kills in ``JetsamPolicy`` order until
/// the footprints left are below the critical threshold, as XNU's
/// `JETSAM_REASON_MEMORY_VMPAGESHORTAGE` kills "until available pages is above
/// `memorystatus_available_pages_critical`"; a reported `critical` says memory is short
/// without saying how much, so it kills the first app in that order (and what the
/// footprints ask), and the next report the next one.
public struct MemoryPressure: Sendable, Equatable {
    /// Device memory, bytes.
    public let device: UInt64
    /// From this share of the device on, the computed level is `warning`.
    public static let warningShare = 0.80
    /// From this share on, `critical`.
    public static let criticalShare = 0.95

    /// The level the footprints give (after the kills already decided).
    public private(set) var computed: MemoryPressureLevel = .normal
    /// The level `apphost device memory` forced (nil: none).
    public private(set) var forced: MemoryPressureLevel?
    /// The sum of the footprints the last evaluation saw, minus the kills it decided.
    public private(set) var total: UInt64 = 0

    public init(device: UInt64) {
        self.device = device
    }

    /// The level in force: the higher of the computed and the forced one.
    public var level: MemoryPressureLevel { max(computed, forced ?? .normal) }

    /// Bytes from which the computed level is `warning` / `critical`.
    public var warningThreshold: UInt64 { UInt64(Double(device) * Self.warningShare) }
    public var criticalThreshold: UInt64 { UInt64(Double(device) * Self.criticalShare) }

    /// The computed level for a sum of footprints.
    public func level(for total: UInt64) -> MemoryPressureLevel {
        total >= criticalThreshold ? .critical : total >= warningThreshold ? .warning : .normal
    }

    /// Where a reported level came from.
    public enum Reporter: String, Sendable, Equatable {
        /// `apphost device memory`: kept until `normal`.
        case forced
        /// A PSI trigger fired: this once.
        case psi
    }

    public enum Event: Sendable, Equatable {
        /// The footprints were read: their sum (every running app's) and the apps jetsam may choose.
        case measured(total: UInt64, candidates: [JetsamPolicy.Candidate])
        /// A level reported from outside, with the footprints as last read.
        case reported(MemoryPressureLevel, by: Reporter, total: UInt64, candidates: [JetsamPolicy.Candidate])
    }

    public enum Effect: Sendable, Equatable {
        /// The level in force changed; `total` the footprints' sum.
        case levelChanged(from: MemoryPressureLevel, to: MemoryPressureLevel, total: UInt64)
        /// Send `didReceiveMemoryWarning` to every app running code.
        case warnRunningApps(MemoryPressureLevel)
        /// Kill this app (SIGKILL, a JETSAM vm-pageshortage report).
        case jetsam(JetsamPolicy.Victim)
    }

    public mutating func handle(_ event: Event) -> [Effect] {
        let before = level
        var current = before
        var fx: [Effect] = []
        func note(_ next: MemoryPressureLevel) {
            guard next != current else { return }
            fx.append(.levelChanged(from: current, to: next, total: total))
            current = next
        }
        switch event {
        case .measured(let sum, let candidates):
            total = sum
            computed = level(for: sum)
            note(level)
            if level > before { fx.append(.warnRunningApps(level)) }
            if computed == .critical {
                fx += kill(JetsamPolicy.victims(candidates, total: sum, below: criticalThreshold))
            }
        case .reported(let reported, let by, let sum, let candidates):
            total = sum
            computed = level(for: sum)
            if by == .forced { forced = reported == .normal ? nil : reported }
            let seen = max(level, reported)
            note(seen)
            // A report warns every time (as the Simulator's "Simulate Memory Warning"),
            // even at a level already in force.
            if reported >= .warning || seen > before { fx.append(.warnRunningApps(seen)) }
            if reported == .critical || computed == .critical {
                let atLeast = reported == .critical ? 1 : 0
                fx += kill(JetsamPolicy.victims(candidates, total: sum, below: criticalThreshold, atLeast: atLeast))
            }
        }
        note(level)
        return fx
    }

    /// The kills, with the total and the computed level made what they leave.
    private mutating func kill(_ victims: [JetsamPolicy.Victim]) -> [Effect] {
        for v in victims { total -= min(total, v.footprint) }
        computed = level(for: total)
        return victims.map { .jetsam($0) }
    }
}
