@testable import AppHostSystem
import Foundation
import Testing

/// `LandlockRulesetCache` on an injected clock: a system path (`PathGrant.isSystemPath`)
/// is looked up at most once a second, an app's own path at every spawn, and the way to
/// the excluded paths at every spawn. Real rulesets (one descriptor each), no child.
@Suite("Landlock ruleset cache", .enabled(if: Landlock.abiVersion != nil,
                                          "Landlock is not available in this kernel (landlock_create_ruleset: ENOSYS or EOPNOTSUPP)"))
struct LandlockRulesetCacheTests {
    let abi = Landlock.abiVersion ?? 1
    static let second: UInt64 = 1_000_000_000

    @Test func aSystemPathMadeAgainIsSeenWithinASecondOfItsLastLook() throws {
        let root = try TemporaryDirectory("cache-system")
        let system = root.path + "/system"
        try FileManager.default.createDirectory(atPath: system, withIntermediateDirectories: false)
        let policy = LandlockPolicy(grants: [PathGrant(system, .readOnly, isSystemPath: true)])
        var cache = LandlockRulesetCache()

        let first = try #require(try cache.ruleset(policy, kernelABI: abi, now: 10 * Self.second))
        try FileManager.default.removeItem(atPath: system)
        try FileManager.default.createDirectory(atPath: system, withIntermediateDirectories: false)
        // Looked up at 10 s: trusted until 11 s.
        let within = try #require(try cache.ruleset(policy, kernelABI: abi, now: 10 * Self.second + Self.second / 2))
        #expect(within === first, "within the second, the kept ruleset is used without a lookup")
        let after = try #require(try cache.ruleset(policy, kernelABI: abi, now: 11 * Self.second + 1))
        #expect(after !== first, "after it, the path is looked up, found made again, and the ruleset built anew")
        let kept = try #require(try cache.ruleset(policy, kernelABI: abi, now: 11 * Self.second + 2))
        #expect(kept === after)
    }

    @Test func anAppsOwnPathIsLookedUpAtEverySpawn() throws {
        let root = try TemporaryDirectory("cache-own")
        let container = root.path + "/container"
        try FileManager.default.createDirectory(atPath: container, withIntermediateDirectories: false)
        let policy = LandlockPolicy(grants: [PathGrant(container, .readWrite)])
        var cache = LandlockRulesetCache()

        let first = try #require(try cache.ruleset(policy, kernelABI: abi, now: Self.second))
        #expect(try cache.ruleset(policy, kernelABI: abi, now: Self.second + 1) === first, "same inode: kept")
        // A reinstall: the container made again a microsecond later.
        try FileManager.default.removeItem(atPath: container)
        try FileManager.default.createDirectory(atPath: container, withIntermediateDirectories: false)
        #expect(try cache.ruleset(policy, kernelABI: abi, now: Self.second + 2) !== first)
    }

    /// The state directory moved beneath a granted system directory is kept out of reach
    /// at once, within the second: the way to an excluded path is walked at every spawn.
    @Test func anExcludedPathMovedBeneathASystemGrantIsSeenAtOnce() throws {
        let root = try TemporaryDirectory("cache-excluded")
        let system = root.path + "/system"
        let state = root.path + "/state"
        try FileManager.default.createDirectory(atPath: system, withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: false)
        let moved = system + "/state"
        let movedPolicy = LandlockPolicy(grants: [PathGrant(system, .readOnly, isSystemPath: true)],
                                         excluded: [moved])
        var cache = LandlockRulesetCache()
        let first = try #require(try cache.ruleset(movedPolicy, kernelABI: abi, now: Self.second))
        #expect(try cache.ruleset(movedPolicy, kernelABI: abi, now: Self.second + 1) === first)
        // The excluded path appears beneath the granted directory (a rename into it).
        try FileManager.default.moveItem(atPath: state, toPath: moved)
        let after = try cache.ruleset(movedPolicy, kernelABI: abi, now: Self.second + 2)
        #expect(after !== first, "the kept ruleset grants the whole directory, now holding the excluded path")
    }

    @Test func systemLookupsAreBounded() throws {
        #expect(LandlockRulesetCache.systemLookupCapacity == 4096)
        let root = try TemporaryDirectory("cache-bound")
        var cache = LandlockRulesetCache()
        // More distinct system paths than the bound: the lookups are dropped, nothing fails.
        for i in 0..<(LandlockRulesetCache.systemLookupCapacity / 64 + 1) {
            let grants = (0..<64).map { PathGrant(root.path + "/p\(i)-\($0)", .readOnly, isSystemPath: true) }
            _ = try cache.ruleset(LandlockPolicy(grants: grants), kernelABI: abi, now: Self.second)
        }
        #expect(cache.systemLookupCount <= LandlockRulesetCache.systemLookupCapacity)
    }
}
