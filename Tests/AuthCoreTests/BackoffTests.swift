// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Testing

@Suite("Backoff")
struct BackoffTests {
    @Test func eachDelayDoublesWithinItsJitterUntilTheCap() {
        var backoff = Backoff(initial: .seconds(1), maximum: .seconds(30))
        var previousBase = Duration.zero
        for attempt in 0..<10 {
            let delay = backoff.next()
            let base = min(Duration.seconds(1 << attempt), .seconds(30))
            #expect(delay >= base * 0.8 && delay <= min(base * 1.2, .seconds(30)), "attempt \(attempt): \(delay)")
            #expect(base >= previousBase)
            previousBase = base
        }
        #expect(backoff.attempts == 10)
    }

    @Test func theJitterSpreadsClientsThatFailedTogether() {
        let first = (0..<100).map { _ in
            var backoff = Backoff(initial: .seconds(10), maximum: .seconds(100))
            return backoff.next()
        }
        #expect(first.allSatisfy { $0 >= .seconds(8) && $0 <= .seconds(12) })
        #expect(Set(first).count > 50)
        #expect(first.contains { $0 < .seconds(9) } && first.contains { $0 > .seconds(11) })
    }

    @Test func neverMoreThanTheMaximumEvenAfterManyFailures() {
        var backoff = Backoff(initial: .milliseconds(500), maximum: .seconds(300))
        for _ in 0..<1000 { #expect(backoff.next() <= .seconds(300)) }
    }

    @Test func resetStartsAgainFromTheFirstDelay() {
        var backoff = Backoff(initial: .seconds(1), maximum: .seconds(60))
        for _ in 0..<5 { _ = backoff.next() }
        backoff.reset()
        #expect(backoff.next() <= .milliseconds(1200))
    }
}
