/// Times that come from apps (a fetch interval, a task's earliest begin, a session's
/// resource timeout) are `Double` seconds on the wire, and can be anything JSON and
/// `"inf"`/`"nan"` spell. Converting one to `Int64` milliseconds or nanoseconds traps on
/// overflow, which would kill the host or the transfer daemon: fuzzing the plugins found
/// it (SECURITY.md). Requests refuse what is not a finite number; what is finite but
/// absurd is cut to ``Duration/longestWait``, which every conversion in AppHost can hold.
extension Duration {
    /// The longest time AppHost waits for anything: 100 years. Longer waits are "never"
    /// in practice; in nanoseconds this still fits an `Int64`.
    public static let longestWait: Duration = .seconds(100 * 365 * 86_400)

    /// `seconds` rounded to milliseconds and kept within `0...longestWait`; NaN is zero.
    public init(clampingSeconds seconds: Double) {
        let bounded = seconds.isNaN ? 0 : Swift.min(Swift.max(seconds, 0), Double(Duration.longestWait.components.seconds))
        self = .milliseconds(Int64((bounded * 1000).rounded()))
    }

    /// Whole nanoseconds, kept within `0...longestWait` (for timers that take an `Int64`).
    public var clampedNanoseconds: Int64 {
        let d = Swift.min(Swift.max(self, .zero), Duration.longestWait)
        return d.components.seconds * 1_000_000_000 + d.components.attoseconds / 1_000_000_000
    }
}
