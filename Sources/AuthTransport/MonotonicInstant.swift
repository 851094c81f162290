// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#endif

/// A point on CLOCK_MONOTONIC, the clock of the loop's timers, in nanoseconds: a connection's times.
///
/// A plain integer, not `ContinuousClock.Instant`: the standard library keeps that type's layout its own to
/// change, so a struct that holds one (``VarlinkConnectionStateMachine``) would be copied and destroyed through
/// the runtime's value witnesses on every call that touches it.
struct MonotonicInstant: Comparable, Hashable, Sendable {
    var nanoseconds: Int64

    /// Now.
    static var now: MonotonicInstant {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return MonotonicInstant(nanoseconds: Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec))
    }

    static func < (lhs: MonotonicInstant, rhs: MonotonicInstant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    /// The instant `duration` later; a duration too long to count ends at the end of time.
    static func + (instant: MonotonicInstant, duration: Duration) -> MonotonicInstant {
        MonotonicInstant(nanoseconds: instant.nanoseconds.addingClamped(duration.clampedNanoseconds))
    }

    /// The time from `start` to `end`.
    static func - (end: MonotonicInstant, start: MonotonicInstant) -> Duration {
        .nanoseconds(end.nanoseconds &- start.nanoseconds)
    }
}

extension Duration {
    /// The duration in nanoseconds, within Int64's range.
    var clampedNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return seconds > 0 ? .max : .min }
        return whole.addingClamped(attoseconds / 1_000_000_000)
    }
}

extension Int64 {
    fileprivate func addingClamped(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}
