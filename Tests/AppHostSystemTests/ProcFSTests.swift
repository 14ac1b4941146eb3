import AppHostSystem
import Foundation
import Testing

@Suite("ProcStat")
struct ProcStatTests {
    @Test func parsesACommandNameWithSpacesAndParentheses() throws {
        let text = "1234 (a) b) T 1 1234 1230 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 7 0 98765 1234567 100 "
            + "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n"
        let info = try ProcStat.parse(text)
        #expect(info.pid == 1234)
        #expect(info.comm == "a) b")
        #expect(info.state == "T")
        #expect(info.isStopped)
        #expect(info.parentPID == 1)
        #expect(info.processGroup == 1234)
        #expect(info.session == 1230)
        #expect(info.userTicks == 5)
        #expect(info.systemTicks == 3)
        #expect(info.threadCount == 7)
        #expect(info.startTicks == 98765)
    }

    @Test func rejectsTruncatedText() {
        #expect(throws: ProcFileError.self) { try ProcStat.parse("12 (x) S 1 2") }
        #expect(throws: ProcFileError.self) { try ProcStat.parse("garbage") }
    }

    @Test func readsThisProcess() throws {
        let info = try ProcStat.read(pid: getpid())
        #expect(info.pid == getpid())
        #expect(!info.isStopped)
    }

    @Test func aMissingProcessIsReportedAsGone() {
        // Above the largest possible pid_max (2^22).
        do {
            _ = try ProcStat.read(pid: 5_000_000)
            Issue.record("read a nonexistent pid")
        } catch {
            #expect(error.processIsGone)
        }
    }
}

@Suite("ProcStatus")
struct ProcStatusTests {
    @Test func parsesFields() {
        let info = ProcStatus.parse("Name:\tsleep\nState:\tT (stopped)\nPPid:\t42\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n")
        #expect(info["Name"] == "sleep")
        #expect(info.state == "T")
        #expect(info.parentPID == 42)
        #expect(info.noNewPrivs == 1)
        #expect(info.seccompMode == 2)
        #expect(info.seccompFilters == 1)
    }

    @Test func readsThisProcess() throws {
        let info = try ProcStatus.read(pid: getpid())
        #expect(info["Pid"] == String(getpid()))
    }
}

@Suite("LoadedLibraries")
struct LoadedLibrariesTests {
    @Test func foldersOfExecutableSharedObjectMappings() {
        let maps = """
            55c9a0000000-55c9a0100000 r-xp 00000000 fd:01 1 /work/app/.build/debug/ProbeApp
            7f0000000000-7f0000100000 r-xp 00000000 fd:01 2 /opt/swift/usr/lib/swift/linux/libswiftCore.so
            7f0000200000-7f0000300000 r--p 00000000 fd:01 2 /opt/swift/usr/lib/swift/linux/libswiftCore.so
            7f0000400000-7f0000500000 r-xp 00000000 fd:01 3 /usr/lib/x86_64-linux-gnu/libc.so.6
            7f0000600000-7f0000700000 r-xp 00000000 fd:01 4 /tmp/gone/libx.so (deleted)
            7f0000800000-7f0000900000 r--p 00000000 fd:01 5 /data/only-read/liby.so
            7f0000a00000-7f0000b00000 r-xp 00000000 fd:01 6 /with space/lib z.so.1
            7f0000c00000-7f0000d00000 rw-p 00000000 00:00 0 [heap]
            7ffd00000000-7ffd00001000 r-xp 00000000 00:00 0 [vdso]
            """
        #expect(LoadedLibraries.parseDirectories(maps) == [
            "/opt/swift/usr/lib/swift/linux", "/usr/lib/x86_64-linux-gnu", "/with space",
        ])
    }

    @Test func thisProcessLoadedTheSwiftRuntimeFromSomewhere() {
        let folders = LoadedLibraries.directories()
        #expect(folders.contains { FileManager.default.fileExists(atPath: $0 + "/libswiftCore.so") }, "\(folders)")
    }

    @Test func ancestorsWalkUpToTheGivenStop() throws {
        // This test process's parents: the first is getppid(), and a walk that stops at
        // it lists nothing.
        let chain = ProcessTree.ancestors(of: getpid(), stoppingAt: 0)
        if getppid() > 1 {
            #expect(chain.first == getppid(), "\(chain)")
        }
        #expect(!chain.contains(1))
        #expect(ProcessTree.ancestors(of: getpid(), stoppingAt: getppid()).isEmpty)
        #expect(ProcessTree.ancestors(of: Int32.max).isEmpty, "a process that is gone has no parents")
    }

    @Test func cgroupPathsAreTheThirdField() {
        let paths = ProcessTree.cgroupPaths(of: getpid())
        #expect(!paths.isEmpty && paths.allSatisfy { $0.hasPrefix("/") }, "\(paths)")
        #expect(ProcessTree.cgroupPaths(of: Int32.max).isEmpty)
    }
}
