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

/// Memory a burst of connections took goes back once the last one closes (issue 32:
/// 19,000 idle push connections left the host 26 MB larger after they closed).
@Suite struct BurstTrimTests {
    @Test func aBurstIsTrimmedAfterOnceItsLastConnectionCloses() async {
        let (trims, trimmed) = AsyncStream<Void>.makeStream()
        let burst = BurstTrim(burst: 3, trim: { trimmed.yield() })
        // Two open and closed: below the burst, nothing to give back.
        burst.opened(); burst.opened(); burst.closed(); burst.closed()
        // Three at once: the last one closing trims, once.
        for _ in 0..<3 { burst.opened() }
        burst.closed(); burst.closed()
        burst.closed()
        var iterator = trims.makeAsyncIterator()
        await iterator.next()
        // The next burst starts from nothing: one more open and closed is not one.
        burst.opened(); burst.closed()
        for _ in 0..<3 { burst.opened() }
        for _ in 0..<3 { burst.closed() }
        await iterator.next()
        trimmed.finish()
        #expect(await iterator.next() == nil, "two bursts, two trims, none between")
    }

    @Test func givingMemoryBackWorksHere() {
        // Freed blocks, then a trim: glibc says whether it released any.
        var blocks: [UnsafeMutableRawPointer] = []
        for _ in 0..<2_000 { blocks.append(malloc(4_000)!) }
        for b in blocks { free(b) }
        #expect(Allocator.giveBack())
    }
}
