// SPDX-License-Identifier: Apache-2.0
import Testing

@testable import AuthTransport

@Suite("Accept rotation: one loop accepts, the one serving the fewest connections")
struct AcceptChoiceTests {
    @Test func oneShotConnectionsOnAnIdleServerNeverMoveTheAcceptingLoop() {
        var choice = AcceptChoice(loops: 2)
        for _ in 0..<5 {
            #expect(choice.opened(on: 0) == nil)
            #expect(choice.closed(on: 0) == nil)
        }
        #expect(choice.accepting == 0)
        #expect(choice.open == [0, 0])
    }

    @Test func longConnectionsSpreadWithinTwoOfEachOther() {
        var choice = AcceptChoice(loops: 3)
        var moves: [Int] = []
        for _ in 0..<30 {
            if let moved = choice.opened(on: choice.accepting) { moves.append(moved) }
        }
        #expect(choice.open.reduce(0, +) == 30)
        #expect(choice.open.max()! - choice.open.min()! <= 2)
        #expect(moves.first == 1)

        // Connections close on one loop: it takes the next ones once it serves two fewer than the accepting one.
        let drained = choice.open.indices.first { $0 != choice.accepting }!
        var moved: Int?
        for _ in 0..<4 where moved == nil { moved = choice.closed(on: drained) }
        #expect(moved == drained)
        #expect(choice.accepting == drained)
    }

    @Test func aSingleLoopAlwaysAccepts() {
        var choice = AcceptChoice(loops: 1)
        for _ in 0..<3 { #expect(choice.opened(on: 0) == nil) }
        #expect(choice.closed(on: 0) == nil)
        // More closes than opens (a connection refused before it was counted) never goes below zero.
        for _ in 0..<5 { _ = choice.closed(on: 0) }
        #expect(choice.open == [0])
    }
}
