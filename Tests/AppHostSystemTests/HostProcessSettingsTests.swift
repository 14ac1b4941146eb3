import AppHostSystem
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The settings a host process gives itself at start.
@Suite("Host process settings")
struct HostProcessSettingsTests {
    @Test func glibcTakesTheFixedMmapThreshold() {
        #expect(Allocator.holdLargeBlocksApart())
        #expect(Allocator.mmapThreshold == 128 * 1024)
    }

    @Test func theOpenFilesSoftLimitIsRaisedToTheHardOne() {
        let raised = HostLimits.raiseOpenFiles()
        var limit = rlimit()
        #expect(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0)
        #expect(limit.rlim_cur == limit.rlim_max)
        #expect(raised == UInt64(limit.rlim_cur))
    }
}
