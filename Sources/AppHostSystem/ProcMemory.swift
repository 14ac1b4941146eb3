#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// The fields of `/proc/<pid>/smaps_rollup` the host reads an app's memory footprint from.
///
/// The footprint is **Pss** (proportional set size): the app's private pages plus its
/// share of pages mapped by several processes (the Swift runtime and Foundation, mapped
/// by every app, are counted once across them). Pss, not Rss: the host adds the apps'
/// footprints up against the device's memory, and a sum of Rss would count each shared
/// library once per app. (iOS's `phys_footprint` counts dirty and compressed pages, about
/// what `Pss_Anon` is here; Pss also counts the clean file pages an app keeps in use.)
///
/// Cost: the kernel walks the process's page tables to answer, about 3.6 ms of kernel
/// time for a 185 MiB process on this VM (a `/proc/<pid>/statm` read is microseconds but
/// has no Pss), so the host reads it only when a footprint can have changed (see the
/// docs/decisions/0032-device-memory-and-jetsam.md), never for a suspended app twice.
public struct SmapsRollup: Sendable, Equatable {
    /// Resident set size, bytes.
    public var rss: UInt64
    /// Proportional set size, bytes.
    public var pss: UInt64
    /// Anonymous pages' share of Pss, bytes (nil on kernels before 5.9, which lack the line).
    public var pssAnon: UInt64?
    /// Swapped-out anonymous memory, bytes.
    public var swap: UInt64

    public init(rss: UInt64, pss: UInt64, pssAnon: UInt64? = nil, swap: UInt64 = 0) {
        self.rss = rss
        self.pss = pss
        self.pssAnon = pssAnon
        self.swap = swap
    }

    /// Reads `/proc/<pid>/smaps_rollup` (kernel 4.14 and later).
    public static func read(pid: Int32) throws(ProcFileError) -> SmapsRollup {
        let path = "/proc/\(pid)/smaps_rollup"
        return try parse(try readProcFile(path), path: path)
    }

    /// Parses the text of a smaps_rollup file: "Key:   N kB" lines after a header line.
    public static func parse(_ text: String, path: String = "smaps_rollup") throws(ProcFileError) -> SmapsRollup {
        var rss: UInt64?, pss: UInt64?, pssAnon: UInt64?, swap: UInt64 = 0
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let key = line[..<colon]
            guard key == "Rss" || key == "Pss" || key == "Pss_Anon" || key == "Swap" else { continue }
            let words = line[line.index(after: colon)...].split(separator: " ", omittingEmptySubsequences: true)
            guard words.count == 2, words[1] == "kB", let kib = UInt64(words[0]), kib < UInt64.max / 1024 else {
                throw .malformed(path: path, reason: "bad \(key) line \"\(line)\"")
            }
            switch key {
            case "Rss": rss = kib * 1024
            case "Pss": pss = kib * 1024
            case "Pss_Anon": pssAnon = kib * 1024
            default: swap = kib * 1024
            }
        }
        guard let rss, let pss else { throw .malformed(path: path, reason: "no Rss or Pss line") }
        return SmapsRollup(rss: rss, pss: pss, pssAnon: pssAnon, swap: swap)
    }
}

/// Reads a cgroup's memory use: `memory.current` (v2) or `memory.usage_in_bytes` (v1),
/// one number. Nil when the file cannot be read or does not hold a number.
public func readCgroupMemoryCurrent(_ path: String) -> UInt64? {
    guard let text = try? readProcFile(path) else { return nil }
    return UInt64(text.trimmingSpaces)
}

/// `/proc/<pid>/statm`'s resident set, in bytes: the kernel's counters, no page-table walk
/// (microseconds). The host uses it to tell whether an app's memory moved since its last
/// (costly) smaps_rollup reading.
public enum ProcStatm {
    public static func residentBytes(pid: Int32) throws(ProcFileError) -> UInt64 {
        let path = "/proc/\(pid)/statm"
        return try parseResident(try readProcFile(path), path: path)
    }

    /// The second field (resident pages) of a statm text, in bytes.
    public static func parseResident(_ text: String, path: String = "statm") throws(ProcFileError) -> UInt64 {
        let fields = text.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 2, let pages = UInt64(fields[1].trimmingSpaces), pages < UInt64.max / 65536 else {
            throw .malformed(path: path, reason: "no resident field")
        }
        return pages * UInt64(max(1, sysconf(Int32(_SC_PAGESIZE))))
    }
}
