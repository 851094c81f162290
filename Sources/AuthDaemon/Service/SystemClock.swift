// SPDX-License-Identifier: Apache-2.0
import AuthCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The system's wall clock, with timers that are tasks sleeping on Swift's `ContinuousClock` (a timer's delay is
/// a duration, not a wall-clock instant: a clock set back does not stretch it).
public struct SystemClock: ServiceClock {
    public init() {}

    public var now: Date { Date() }

    public func schedule(after delay: Duration, _ action: @escaping @Sendable () async -> Void) {
        Task {
            try? await Task.sleep(for: delay)
            await action()
        }
    }
}
