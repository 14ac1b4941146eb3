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
