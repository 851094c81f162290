// SPDX-License-Identifier: Apache-2.0
import AuthDaemon
import Foundation
import Testing

@Suite("Wall clocks")
struct ManualWallClockTests {
    @Test func manualClockMovesOnlyWhenTold() {
        let start = Date(timeIntervalSince1970: 1_900_000_000)
        let clock = ManualWallClock(start)
        #expect(clock.now == start)
        clock.advance(by: 60)
        #expect(clock.now == start.addingTimeInterval(60))
        clock.set(Date(timeIntervalSince1970: 0))
        #expect(clock.now == Date(timeIntervalSince1970: 0))
        clock.advance(by: -1)
        #expect(clock.now == Date(timeIntervalSince1970: -1))
    }

    @Test func manualClockIsSharedAcrossTasks() async {
        let clock = ManualWallClock(Date(timeIntervalSince1970: 0))
        await withTaskGroup(of: Void.self) { tasks in
            for _ in 0..<100 { tasks.addTask { clock.advance(by: 1) } }
        }
        #expect(clock.now == Date(timeIntervalSince1970: 100))
    }

    @Test func systemClockIsTheWallClock() {
        let before = Date()
        let now = SystemWallClock().now
        #expect(now >= before)
        #expect(now.timeIntervalSince(before) < 5)
    }

    @Test func clocksAreInjectable() {
        func reading(_ clock: some WallClock) -> Date { clock.now }
        #expect(reading(ManualWallClock(.distantPast)) == .distantPast)
    }
}
