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
