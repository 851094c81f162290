// SPDX-License-Identifier: Apache-2.0
/// Exponential backoff with jitter, for anything that retries: each delay doubles up to ``maximum``, and is
/// spread by ±20% so that many clients that failed together do not retry together.
///
/// ```swift
/// var backoff = Backoff(initial: .seconds(1), maximum: .seconds(300))
/// while true {
///     do { try await attempt(); backoff.reset(); break }
///     catch { try await Task.sleep(for: backoff.next()) }
/// }
/// ```
public struct Backoff: Sendable {
    /// The first delay, before jitter.
    public let initial: Duration
    /// The longest delay, jitter included.
    public let maximum: Duration
    /// The delays handed out since the last ``reset()``.
    public private(set) var attempts = 0

    public init(initial: Duration, maximum: Duration) {
        precondition(initial > .zero && maximum >= initial, "a backoff needs 0 < initial <= maximum")
        self.initial = initial
        self.maximum = maximum
    }

    /// The next delay: `initial`, doubled for each earlier one, capped at ``maximum``, times a random factor
    /// from 0.8 to 1.2 (capped again).
    public mutating func next() -> Duration {
        var generator = SystemRandomNumberGenerator()
        return next(using: &generator)
    }

    /// ``next()`` with the given source of randomness, for tests.
    public mutating func next(using generator: inout some RandomNumberGenerator) -> Duration {
        let doublings = min(attempts, 62)
        attempts += 1
        let base = min(initial * Double(1 << UInt64(min(doublings, 40))), maximum)
        return min(base * Double.random(in: 0.8...1.2, using: &generator), maximum)
    }

    /// Starts again from ``initial``, after a success.
    public mutating func reset() { attempts = 0 }
}
