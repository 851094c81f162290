// SPDX-License-Identifier: Apache-2.0

/// Keeps a flood from writing a log line per event: the first event of a kind and user logs at once, the next
/// ones within ``interval`` are only counted, and the first one after it logs again with the count.
///
/// ```swift
/// let throttle = LogThrottle(now: { ContinuousClock.now })
/// if let count = throttle.admit("refused", uid: peer.uid) {
///     logger.warning("Refusing a connection (\(count) since the last line)")
/// }
/// ```
///
/// It belongs to one thread (the loop's, or an actor's), so it needs no lock. It reads the clock it is given, a
/// monotonic one: a wall clock being set is one of the floods it holds back.
public final class LogThrottle {
    /// The default: one line per kind and user every 10 seconds.
    public static let defaultInterval: Duration = .seconds(10)

    /// How long after a line the same kind of event of the same user is only counted.
    public let interval: Duration

    private struct Key: Hashable {
        var event: String
        var uid: UInt32
    }

    private struct Window {
        var start: ContinuousClock.Instant
        var suppressed: Int
    }

    /// Windows kept before the stale ones are pruned: one per kind and user seen within an interval.
    private static let pruneThreshold = 4096

    private let now: () -> ContinuousClock.Instant
    private var windows: [Key: Window] = [:]

    /// - Parameters:
    ///   - interval: How long after a line the same kind of event of the same user is only counted.
    ///   - now: The clock: `ContinuousClock.now` in the daemon, a manual one in tests.
    public init(interval: Duration = defaultInterval, now: @escaping () -> ContinuousClock.Instant) {
        self.interval = interval
        self.now = now
    }

    /// Counts one `event` of `uid`.
    ///
    /// - Returns: nil when no line is due; otherwise the number of such events to report in the line: this
    ///   one and those counted since the last line.
    public func admit(_ event: String, uid: UInt32) -> Int? {
        let now = self.now()
        let interval = self.interval
        let key = Key(event: event, uid: uid)
        if var window = windows[key], now - window.start < interval {
            window.suppressed += 1
            windows[key] = window
            return nil
        }
        let count = (windows[key]?.suppressed ?? 0) + 1
        if windows.count >= Self.pruneThreshold {
            windows = windows.filter { now - $0.value.start < interval }
        }
        windows[key] = Window(start: now, suppressed: 0)
        return count
    }

    /// Counts one `event` that belongs to no user (the wall clock set, say), as ``admit(_:uid:)`` does.
    public func admit(_ event: String) -> Int? { admit(event, uid: .max) }

    /// `" (N since the last such line)"` when `count` is above 1, for the end of a log message.
    public static func suffix(_ count: Int) -> String {
        count > 1 ? " (\(count) since the last such line)" : ""
    }
}
