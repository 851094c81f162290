// SPDX-License-Identifier: Apache-2.0
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A wall clock that only moves when told to, for tests; safe to share between threads.
///
/// ```swift
/// let clock = ManualWallClock(Date(timeIntervalSince1970: 1_900_000_000))
/// clock.advance(by: 60)
/// clock.set(Date(timeIntervalSince1970: 0))   // a jump backward
/// ```
public final class ManualWallClock: WallClock {
    private let current: Mutex<Date>

    /// A clock that reads `now` until moved.
    public init(_ now: Date) {
        current = Mutex(now)
    }

    public var now: Date { current.withLock { $0 } }

    /// Moves the clock by `interval` seconds (negative moves it back).
    public func advance(by interval: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(interval) }
    }

    /// Sets the clock to `date`, forward or backward.
    public func set(_ date: Date) {
        current.withLock { $0 = date }
    }
}
