// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Synchronization
import Testing

@Suite("Log throttle: one line per kind and user per interval, with a count")
struct LogThrottleTests {
    final class ManualClock: Sendable {
        private let instant = Mutex(ContinuousClock.now)
        var now: ContinuousClock.Instant { instant.withLock { $0 } }
        func advance(by duration: Duration) { instant.withLock { $0 += duration } }
    }

    @Test func aFloodLogsOneLinePerIntervalWithTheCount() {
        let clock = ManualClock()
        let throttle = LogThrottle(interval: .seconds(10)) { clock.now }
        #expect(throttle.admit("refused", uid: 1001) == 1)
        for _ in 0..<250_000 { #expect(throttle.admit("refused", uid: 1001) == nil) }
        // Another user, or another kind of event, has its own line.
        #expect(throttle.admit("refused", uid: 1002) == 1)
        #expect(throttle.admit("denied", uid: 1001) == 1)
        clock.advance(by: .seconds(10))
        #expect(throttle.admit("refused", uid: 1001) == 250_001)
        #expect(throttle.admit("refused", uid: 1001) == nil)
        #expect(LogThrottle.suffix(250_001) == " (250001 since the last such line)")
        #expect(LogThrottle.suffix(1) == "")
    }

    @Test func anEventOfNoUserHasItsOwnLine() {
        let clock = ManualClock()
        let throttle = LogThrottle(interval: .seconds(10)) { clock.now }
        #expect(throttle.admit("clock set") == 1)
        #expect(throttle.admit("clock set") == nil)
        #expect(throttle.admit("clock set", uid: 0) == 1)
        clock.advance(by: .seconds(10))
        #expect(throttle.admit("clock set") == 2)
    }
}
