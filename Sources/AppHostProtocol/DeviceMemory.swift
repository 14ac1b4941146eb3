import Foundation

/// How short of memory the device is, as iOS's memory pressure levels (`DISPATCH_MEMORYPRESSURE_NORMAL`,
/// `_WARN`, `_CRITICAL`): `normal`, `warning` (apps running code get
/// `didReceiveMemoryWarning`), `critical` (warnings, then jetsam).
public enum MemoryPressureLevel: String, Codable, Sendable, CaseIterable, Comparable {
    case normal, warning, critical

    private var rank: Int {
        switch self {
        case .normal: 0
        case .warning: 1
        case .critical: 2
        }
    }

    public static func < (a: Self, b: Self) -> Bool { a.rank < b.rank }
}

/// An app's jetsam priority band: who is killed first when the device is short of
/// memory. XNU keeps each process in a band (`JETSAM_PRIORITY_IDLE` 0 for suspended
/// apps, `BACKGROUND` 3, `FOREGROUND` 10, `AUDIO_AND_ACCESSORY` 12, in
/// `bsd/sys/kern_memorystatus.h`) and kills "in ascending priority order"
/// (xnu `doc/vm/memorystatus_kills.md`). AppHost keeps issue 17's order: an app kept
/// running by a background mode (audio, location, a VoIP call) goes before the
/// foreground app, where XNU ranks audio above it.
public enum JetsamBand: String, Codable, Sendable, Equatable, CaseIterable, Comparable, CustomStringConvertible {
    /// Suspended: frozen, no code running (`JETSAM_PRIORITY_IDLE`).
    case suspended
    /// In the background running code without an activity: finishing a task, a
    /// callback, being suspended (`JETSAM_PRIORITY_BACKGROUND`).
    case background
    /// In the background, kept running by a mode activity: audio playing, location
    /// updates, a VoIP call.
    case backgroundActivity
    /// In front (active, or inactive on its way in or out): killed last.
    case foreground

    private var rank: Int {
        switch self {
        case .suspended: 0
        case .background: 1
        case .backgroundActivity: 2
        case .foreground: 3
        }
    }

    public static func < (a: Self, b: Self) -> Bool { a.rank < b.rank }

    /// As `memory` events and jetsam reports write it.
    public var description: String { rawValue }
}
