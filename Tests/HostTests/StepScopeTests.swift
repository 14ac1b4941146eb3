import AppHostProtocol
import Foundation
import NIOCore
import NIOEmbedded
import Plugins
import Testing
@testable import Host

/// What a step of the supervisor defers to its end, as a value (``StepScope``).
@Suite("Step scope")
struct StepScopeTests {
    static func note(_ text: String) -> ModeEffect { .note(app: nil, text) }

    static func row(_ cause: String) -> Store.TransitionRow {
        Store.TransitionRow(bundleIdentifier: "com.example.a", pid: 7, from: .background, to: .suspended, cause: cause,
                            time: Date(timeIntervalSince1970: 0))
    }

    @Test func thePluginsEffectsGoNowOutsideAFeedAndAtTheEndOfTheOutermostFeedInside() {
        var scope = StepScope()
        #expect(scope.modeEffects([Self.note("now")]) == [Self.note("now")])
        scope.beginFeed()
        #expect(scope.modeEffects([Self.note("a")]).isEmpty)
        scope.beginFeed()
        #expect(scope.modeEffects([Self.note("b")]).isEmpty)
        // The inner feed's end is not the state change's end.
        #expect(scope.endFeed().isEmpty)
        #expect(scope.modeEffects([Self.note("c")]).isEmpty)
        #expect(scope.endFeed() == [Self.note("a"), Self.note("b"), Self.note("c")])
        // Given once.
        scope.beginFeed()
        #expect(scope.endFeed().isEmpty)
        #expect(scope.isIdle)
    }

    @Test func transitionsAreTakenOnceInTheOrderTheyWereRecorded() {
        var scope = StepScope()
        scope.record(Self.row("one"))
        scope.record(Self.row("two"))
        #expect(scope.takeTransitions().map(\.cause) == ["one", "two"])
        #expect(scope.takeTransitions().isEmpty)
    }

    @Test func theTimerIsRearmedAtOnceWhenIdleAndOnceAtTheEndOfAStepOtherwise() {
        var scope = StepScope()
        // (Each answer is taken before it is expected: the calls change the scope.)
        var answers = [scope.timerMovedNow(), scope.takeTimerMove()]
        #expect(answers == [true, false])
        scope.beginInput()
        answers = [scope.timerMovedNow()]
        scope.beginFeed()
        answers += [scope.timerMovedNow()]
        _ = scope.endFeed()
        // Still inside the input: not yet.
        answers += [scope.takeTimerMove()]
        #expect(answers == [false, false, false])
        scope.endInput()
        answers = [scope.takeTimerMove(), scope.takeTimerMove()]
        #expect(answers == [true, false])
    }

    @Test func framesAreKeptOnlyDuringAnInputOneWritePerConnectionInOrder() throws {
        var scope = StepScope()
        let a = EmbeddedChannel(), b = EmbeddedChannel()
        defer {
            _ = try? a.finish()
            _ = try? b.finish()
        }
        let outside = scope.keep([0], channel: a, writer: nil)
        #expect(!outside)
        scope.beginInput()
        let kept = [scope.keep([1], channel: a, writer: nil), scope.keep([2], channel: b, writer: nil),
                    scope.keep([3], channel: a, writer: nil)]
        #expect(kept == [true, true, true])
        let frames = scope.takeFrames()
        #expect(frames.map(\.bytes) == [[1, 3], [2]])
        #expect(frames.first.map { $0.channel === a } == true)
        #expect(scope.takeFrames().isEmpty)
        scope.endInput()
        let after = scope.keep([4], channel: a, writer: nil)
        #expect(!after)
    }

    @Test func unbalancedEndsNeverMakeADepthNegative() {
        var scope = StepScope()
        scope.endInput()
        #expect(scope.endFeed().isEmpty)
        #expect(scope.inputDepth == 0 && scope.feedDepth == 0)
        scope.beginInput()
        #expect(scope.inInput && !scope.isIdle)
    }
}
