import AppHostProtocol
import Foundation
import Testing
@testable import Host

/// The order of turns as a value: who the host gave work, in order; whose inputs wait.
@Suite("Turn order")
struct TurnOrderTests {
    typealias Party = TurnOrder.Party

    static func input(_ app: BundleID, _ n: UInt64) -> Supervisor.Input {
        .drainExpired(app: app, instance: n)
    }

    static func instances(_ inputs: [Supervisor.Input]) -> [UInt64] {
        inputs.compactMap(\.instance)
    }

    @Test func theFirstPartyGivenWorkHoldsTheTurnAndTheOthersWaitInThatOrder() {
        var turns = TurnOrder()
        turns.expect(.app("a"))
        turns.expect(.app("b"))
        turns.expect(.daemon)
        turns.expect(.app("b"))
        #expect(turns.holder == .app("a"))
        #expect(turns.queue == [.app("b"), .daemon])
    }

    @Test func aWaitingPartysInputsAreKeptAndGivenBackInOrderAtItsTurn() {
        var turns = TurnOrder()
        turns.expect(.app("a"))
        turns.expect(.app("b"))
        // c answers first, b second, a last: what arrives first is not what goes first.
        let r1 = turns.admit(.app("c"), Self.input("c", 1))
        #expect(!r1)
        let r2 = turns.admit(.app("b"), Self.input("b", 2))
        #expect(!r2)
        let r3 = turns.admit(.app("b"), Self.input("b", 3))
        #expect(!r3)
        let r4 = turns.admit(.app("a"), Self.input("a", 4))
        #expect(r4)
        #expect(turns.stashedCount == 3)
        #expect(turns.holder == .app("a"), "a holds the turn until the host finds it done")
        let b = turns.passOn()
        #expect(b?.party == .app("b"))
        #expect(Self.instances(b?.inputs ?? []) == [2, 3])
        let c = turns.passOn()
        #expect(c?.party == .app("c"), "c joined the line when it spoke, after b who was expected")
        #expect(Self.instances(c?.inputs ?? []) == [1])
        let none = turns.passOn()
        #expect(none == nil)
        #expect(turns.holder == nil)
        #expect(turns.stashedCount == 0)
        #expect(turns.isIdle { _ in true })
    }

    @Test func aBusyHolderIsWaitedForAndTheLineIsNotIdle() {
        var turns = TurnOrder()
        turns.expect(.daemon)
        turns.expect(.app("a"))
        #expect(!turns.isIdle { $0 == .daemon })
        #expect(!turns.isIdle { _ in false }, "a is still in line")
        let a = turns.passOn()
        #expect(a?.party == .app("a"))
        #expect(turns.isIdle { _ in false })
        #expect(turns.holder == .app("a") && turns.queue.isEmpty, "the daemon's turn is over")
    }

    @Test func nobodyHoldingTheTurnTakesAnInputAsItComes() {
        var turns = TurnOrder()
        let r5 = turns.admit(.app("x"), Self.input("x", 1))
        #expect(r5)
        #expect(turns.holder == .app("x"))
        let r6 = turns.admit(.app("x"), Self.input("x", 2))
        #expect(r6)
    }

    @Test func whatIsKeptIsBoundedAndPastTheBoundInputsAreHandledAsTheyCome() {
        var turns = TurnOrder()
        turns.expect(.app("holder"))
        for n in 0..<TurnOrder.stashLimit {
            let kept = !turns.admit(.app("flood"), Self.input("flood", UInt64(n)))
            #expect(kept)
        }
        #expect(turns.stashedCount == TurnOrder.stashLimit)
        let handled = turns.admit(.app("flood"), Self.input("flood", 0))
        #expect(handled, "past the bound: handled at once, not kept")
        #expect(turns.stashedCount == TurnOrder.stashLimit)
    }

    @Test func inputsNameTheirParty() {
        #expect(Self.input("a", 1).party == .app("a"))
        #expect(Supervisor.Input.transferEvents([], generation: 1).party == .daemon)
        #expect(Supervisor.Input.deadlinesDue.party == nil)
        #expect(Supervisor.Input.shutdownGraceOver(final: false).party == nil)
    }

    @Test func anExcusedInstanceStaysExcusedAndOthersDoNot() {
        var turns = TurnOrder()
        #expect(!turns.isExcused(7))
        turns.excuse(instance: 7)
        turns.excuse(instance: 7)
        #expect(turns.isExcused(7))
        #expect(!turns.isExcused(8), "a later instance of the same app is waited for again")
    }
}
