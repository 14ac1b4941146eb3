/// What the interval of a host-clock timer (`HostTimer` in AppKitLess,
/// ``ServiceRequest/timerSchedule(id:interval:repeats:)`` on the wire) becomes. The
/// host applies it to what an app sends (apps are untrusted: the number can be anything
/// JSON and `"inf"`/`"nan"` spell); AppKitLess applies the same rule to say what a
/// timer's interval is.
///
/// - Not a number, or infinite: refused (`nil`). A timer that never fires is no timer,
///   and NaN has no meaning as a time.
/// - Below ``minimum`` (zero and negative included): ``minimum``. Foundation's `Timer`
///   does the same with zero and negative intervals (it takes 0.1 ms); a floor keeps a
///   repeating timer from asking the host for a fire on every turn of its loop.
/// - Above `Duration.longestWait` (100 years): cut to it, which every conversion in
///   AppHost can hold.
/// - Otherwise the interval, to the nanosecond.
public enum HostTimerInterval {
    /// The shortest interval: 1 ms.
    public static let minimum: Duration = .milliseconds(1)

    /// `seconds` as a timer interval, or nil when it is NaN or infinite.
    public static func duration(seconds: Double) -> Duration? {
        guard seconds.isFinite else { return nil }
        let floor = Double(minimum.components.attoseconds) / 1e18 + Double(minimum.components.seconds)
        let ceiling = Double(Duration.longestWait.components.seconds)
        let bounded = Swift.min(Swift.max(seconds, floor), ceiling)
        return .nanoseconds(Int64((bounded * 1e9).rounded()))
    }

    /// `seconds` as the interval a timer gets, in seconds (nil when refused).
    public static func seconds(_ seconds: Double) -> Double? {
        duration(seconds: seconds).map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
    }
}
