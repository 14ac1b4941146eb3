import AppHostProtocol
import AppHostSystem
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A benchmark step that failed; the run stops and says which.
struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Where SwiftPM put the products: the bench binary, `apphost` and the sample apps.
let productsDirectory: String = {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return (exe as NSString).deletingLastPathComponent
}()

/// This binary (for the helper process that measures raw signals).
let selfExecutable: String = {
    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
}()

/// Whether this is a release build (figures from a debug build are not representative).
let buildConfiguration: String = {
    #if DEBUG
    return "debug"
    #else
    return "release"
    #endif
}()

/// Progress lines go to stderr so stdout stays a table (or JSON).
func progress(_ line: String) {
    FileHandle.standardError.write(Data("apphost-bench: \(line)\n".utf8))
}

/// A temporary directory of the bench's own; short, because a control socket
/// path must stay under 108 bytes. Removed by `remove()`.
/// A scratch folder under `$TMPDIR` (else /tmp): `TMPDIR=/dev/shm` runs a bench on
/// tmpfs (the transfers bench then measures no file system's slowdowns, ext4's after a
/// mass deletion among them).
struct TempDir: Sendable {
    let path: String
    init(_ label: String) throws {
        let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        path = base + "/ahb-\(label)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Writes `dir/name.app/Info.plist` with the given identity; returns the bundle path.
func makeBundle(in dir: String, name: String, id: String, executable: String) throws -> String {
    let bundle = dir + "/\(name).app"
    try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
    let plist: [String: Any] = [
        "CFBundleIdentifier": id,
        "CFBundleExecutable": executable,
        "CFBundleName": name,
    ]
    let data = try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0)
    try data.write(to: URL(fileURLWithPath: bundle + "/Info.plist"))
    return bundle
}

/// Runs blocking work on a thread of its own (never on Swift's cooperative pool).
func onThread<T: Sendable>(_ name: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
        let thread = Thread {
            c.resume(with: Result { try body() })
        }
        thread.name = name
        thread.start()
    }
}

// MARK: - Durations

extension Duration {
    /// Nanoseconds, as an integer.
    var nanoseconds: Int64 {
        let (s, atto) = components
        return s * 1_000_000_000 + atto / 1_000_000_000
    }
}

/// Nanoseconds between two dates: event times, or a moment of the bench taken in the host's
/// clock (`Supervisor.hostDate(at:)`), never `Date()` against an event's time.
func nanoseconds(from a: Date, to b: Date) -> Int64 {
    Int64((b.timeIntervalSince1970 - a.timeIntervalSince1970) * 1e9)
}

/// Samples of one measured interval, in nanoseconds.
struct Samples: Sendable, Codable {
    var values: [Int64] = []

    mutating func add(_ ns: Int64) { values.append(ns) }
    mutating func add(_ d: Duration) { values.append(d.nanoseconds) }

    var count: Int { values.count }
    private var sorted: [Int64] { values.sorted() }

    /// The median (mean of the two middle values for an even count).
    var median: Double {
        let s = sorted
        guard !s.isEmpty else { return .nan }
        if s.count % 2 == 1 { return Double(s[s.count / 2]) }
        return (Double(s[s.count / 2 - 1]) + Double(s[s.count / 2])) / 2
    }

    /// The 90th percentile, nearest rank: the smallest value with at least 90 % of samples at or below it.
    var p90: Double {
        let s = sorted
        guard !s.isEmpty else { return .nan }
        let rank = Int((0.9 * Double(s.count)).rounded(.up))
        return Double(s[Swift.max(0, Swift.min(s.count - 1, rank - 1))])
    }

    var min: Double { sorted.first.map(Double.init) ?? .nan }
    var max: Double { sorted.last.map(Double.init) ?? .nan }
}

/// "12.3 ms", "45 µs".
func formatDuration(_ ns: Double) -> String {
    guard ns.isFinite else { return "—" }
    if ns >= 1e9 { return String(format: "%.2f s", ns / 1e9) }
    if ns >= 1e7 { return String(format: "%.1f ms", ns / 1e6) }
    if ns >= 1e6 { return String(format: "%.2f ms", ns / 1e6) }
    if ns >= 1e4 { return String(format: "%.0f µs", ns / 1e3) }
    return String(format: "%.1f µs", ns / 1e3)
}

/// "1.27×".
func formatRatio(_ r: Double) -> String {
    guard r.isFinite else { return "—" }
    return r >= 100 ? String(format: "%.0f×", r) : String(format: "%.2f×", r)
}

// MARK: - Report rows

/// One measured interval as printed: median, p90, and its ratio to the row it is compared with.
struct Row: Codable, Sendable {
    var label: String
    var count: Int
    var medianNanoseconds: Double
    var p90Nanoseconds: Double
    var minNanoseconds: Double
    var maxNanoseconds: Double
    /// Label of the baseline row of the ratio (nil for a baseline itself).
    var baseline: String?
    /// median / baseline median.
    var ratio: Double?
    /// p90 / baseline p90.
    var ratioP90: Double?
    /// What the ratio was meant to stay under, if there is a target.
    var target: Double?
    var targetMet: Bool?
    var note: String?
    /// A part of another row's interval (printed as "slice", not "baseline").
    var slice = false

    init(_ label: String, _ samples: Samples, against base: Row? = nil, target: Double? = nil, note: String? = nil,
         slice: Bool = false) {
        self.slice = slice
        self.label = label
        count = samples.count
        medianNanoseconds = samples.median
        p90Nanoseconds = samples.p90
        minNanoseconds = samples.min
        maxNanoseconds = samples.max
        if let base {
            baseline = base.label
            ratio = samples.median / base.medianNanoseconds
            ratioP90 = samples.p90 / base.p90Nanoseconds
        }
        self.target = target
        if let target, let ratio { targetMet = ratio <= target }
        self.note = note
    }
}

/// Prints rows as an aligned table.
func printTable(title: String, rows: [Row], notes: [String] = []) {
    print("")
    print(title)
    let width = max(44, (rows.map(\.label.count).max() ?? 0) + 2)
    func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
    func lpad(_ s: String, _ n: Int) -> String { s.count >= n ? s : String(repeating: " ", count: n - s.count) + s }
    print("  " + pad("interval", width) + lpad("n", 5) + lpad("median", 11) + lpad("p90", 11) + "   ratio (median, p90)")
    for r in rows {
        var line = "  " + pad(r.label, width) + lpad(String(r.count), 5)
            + lpad(formatDuration(r.medianNanoseconds), 11) + lpad(formatDuration(r.p90Nanoseconds), 11)
        if let ratio = r.ratio, let base = r.baseline {
            line += "   \(formatRatio(ratio)), \(formatRatio(r.ratioP90 ?? .nan)) of \(base.trimmingCharacters(in: .whitespaces))"
            if let target = r.target, let met = r.targetMet {
                line += "  [target ≤ \(formatRatio(target)): \(met ? "met" : "NOT met")]"
            }
        } else {
            line += r.slice ? "   slice" : "   baseline"
        }
        print(line)
        if let note = r.note { print("  " + pad("", width) + "     " + note) }
    }
    for n in notes { print("  " + n) }
}
