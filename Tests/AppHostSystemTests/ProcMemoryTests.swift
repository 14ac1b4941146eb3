import AppHostSystem
import Foundation
import Synchronization
import Testing

@Suite("SmapsRollup")
struct SmapsRollupTests {
    @Test func parsesTheKernelsLines() throws {
        let text = """
            55ffd1f23000-7fff7b339000 ---p 00000000 00:00 0                          [rollup]
            Rss:              184872 kB
            Pss:              116399 kB
            Pss_Dirty:         78944 kB
            Pss_Anon:          78944 kB
            Pss_File:          37455 kB
            Swap:                 12 kB
            SwapPss:              12 kB
            """
        let r = try SmapsRollup.parse(text)
        #expect(r == SmapsRollup(rss: 184_872 * 1024, pss: 116_399 * 1024, pssAnon: 78_944 * 1024, swap: 12 * 1024))
    }

    @Test func rejectsWhatIsNotSmapsRollup() {
        #expect(throws: ProcFileError.self) { try SmapsRollup.parse("garbage") }
        #expect(throws: ProcFileError.self) { try SmapsRollup.parse("Rss: 12 kB\n") }
        #expect(throws: ProcFileError.self) { try SmapsRollup.parse("Rss: x kB\nPss: 1 kB\n") }
        #expect(throws: ProcFileError.self) { try SmapsRollup.parse("Rss: 18446744073709551615 kB\nPss: 1 kB\n") }
    }

    /// Two children of the same program, one of which touched 64 MiB more: measured in
    /// processes of their own, because the test process's own Pss moves with every test
    /// that runs beside this one (a CI run saw it shrink while 64 MiB were touched).
    @Test func readsAChildAndGrowsWithTouchedMemory() async throws {
        let script = "import sys\nb = b'Z' * (int(sys.argv[1]) << 20)\nprint('ready', flush=True)\nsys.stdin.read()\n"
        func pss(touching mib: Int) async throws -> SmapsRollup {
            let got = Mutex<SmapsRollup?>(nil)
            try await withLockingChild(SpawnSettings(
                executablePath: "/usr/bin/python3", arguments: ["python3", "-c", script, String(mib)], seccomp: .none)) { child in
                let r = try SmapsRollup.read(pid: child.pid)
                got.withLock { $0 = r }
            }
            return try #require(got.withLock { $0 })
        }
        let small = try await pss(touching: 0)
        #expect(small.pss > 0 && small.pss <= small.rss)
        let large = try await pss(touching: 64)
        #expect(large.pss >= small.pss + (32 << 20), "\(small.pss) -> \(large.pss)")
    }

    @Test func aGoneProcessIsUnreadable() {
        #expect { try SmapsRollup.read(pid: Int32.max) } throws: { ($0 as? ProcFileError)?.processIsGone == true }
    }
}

@Suite("PressureStallWatch")
struct PressureStallWatchTests {
    @Test func aMissingFileIsRefusedSayingSo() {
        #expect {
            _ = try PressureStallWatch(path: "/nonexistent/pressure/memory", triggers: [.init("some 150000 1000000", tag: 0)]) { _ in }
        } throws: { error in
            let text = "\(error)"
            return text.contains("/nonexistent/pressure/memory: cannot read") && text.contains("ENOENT")
        }
    }

    @Test func aFileThatIsNotAPressureFileIsRefused() throws {
        let path = NSTemporaryDirectory() + "not-psi-\(UUID().uuidString)"
        try "hello\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect {
            _ = try PressureStallWatch(path: path, triggers: [.init("some 150000 1000000", tag: 0)]) { _ in }
        } throws: { "\($0)".contains("not a pressure (PSI) file") }
    }

    @Test(.enabled(if: FileManager.default.isReadableFile(atPath: "/proc/pressure/memory"), "this kernel has no /proc/pressure/memory (CONFIG_PSI off, or psi=0)"))
    func aTriggerTheKernelRefusesIsRefusedNamingIt() {
        // A window below 500 ms is out of the kernel's range for everyone.
        #expect {
            _ = try PressureStallWatch(path: "/proc/pressure/memory", triggers: [.init("some 1000 100000", tag: 0)]) { _ in }
        } throws: { "\($0)".contains("refused the trigger \"some 1000 100000\"") }
    }

    @Test(.enabled(if: FileManager.default.isReadableFile(atPath: "/proc/pressure/memory"), "this kernel has no /proc/pressure/memory (CONFIG_PSI off, or psi=0)"))
    func validTriggersAreTakenAndClosed() throws {
        let watch: PressureStallWatch
        do {
            watch = try PressureStallWatch(path: "/proc/pressure/memory", triggers: [.init("some 300000 2000000", tag: 0), .init("full 1000000 2000000", tag: 1)]) { _ in }
        } catch {
            // No permission here (a container without write access to /proc/pressure).
            withKnownIssue("PSI triggers refused on this machine: \(error)") { throw error }
            return
        }
        watch.close()
    }
}

@Suite("ProcStatm")
struct ProcStatmTests {
    @Test func residentIsTheSecondFieldInPages() throws {
        let page = UInt64(sysconf(Int32(_SC_PAGESIZE)))
        #expect(try ProcStatm.parseResident("5000 1200 300 10 0 900 0\n") == 1200 * page)
        #expect(throws: ProcFileError.self) { try ProcStatm.parseResident("5000") }
        #expect(throws: ProcFileError.self) { try ProcStatm.parseResident("5000 x 1") }
        #expect(try ProcStatm.residentBytes(pid: getpid()) > 0)
    }
}
