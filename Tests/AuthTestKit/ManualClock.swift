// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization

/// A wall clock that stands still until a test moves it, for the `now` the service takes: expiry logic is
/// tested at fixed times, with no sleeping.
///
/// ```swift
/// let clock = ManualClock(Date(timeIntervalSince1970: 1_900_000_000))
/// let service = AuthService(store: store, records: [], now: { clock.now }, logger: logger)
/// clock.advance(by: 30)
/// ```
public final class ManualClock: Sendable {
    private let current: Mutex<Date>

    /// A clock that reads `now` until moved.
    public init(_ now: Date) { current = Mutex(now) }

    /// The time the clock shows.
    public var now: Date { current.withLock { $0 } }

    /// Moves the clock by `interval` seconds (negative moves it back).
    public func advance(by interval: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(interval) } }

    /// Sets the clock to `date`, forward or backward.
    public func set(_ date: Date) { current.withLock { $0 = date } }
}
