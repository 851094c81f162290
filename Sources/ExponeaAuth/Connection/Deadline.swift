// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A point in time on the clock `ContinuousClock` reads (`CLOCK_BOOTTIME`), in nanoseconds: what a call's waits are
/// bounded by. Plain integers, because reading `ContinuousClock` and doing `Duration` arithmetic (128-bit) cost
/// every call a share of its instructions that the benchmark's callgrind measure shows.
struct Deadline {
    private let nanoseconds: Int64

    /// Now.
    static var now: Deadline {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return Deadline(nanoseconds: Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec))
    }

    /// The deadline `duration` after this one (the end of time for a duration too long to count).
    func adding(_ duration: Duration) -> Deadline {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return adding(
            nanoseconds: overflow ? (seconds > 0 ? .max : .min) : whole.clampedSum(attoseconds / 1_000_000_000))
    }

    /// The deadline `milliseconds` after this one.
    func adding(milliseconds: Int64) -> Deadline { adding(nanoseconds: milliseconds.clampedProduct(1_000_000)) }

    private func adding(nanoseconds length: Int64) -> Deadline { Deadline(nanoseconds: nanoseconds.clampedSum(length)) }

    /// The milliseconds left, rounded up (a wait for them does not end just short of the deadline); 0 once it has
    /// passed.
    var millisecondsLeft: Int32 {
        let left = nanoseconds &- Self.now.nanoseconds
        guard left > 0 else { return 0 }
        return Int32(clamping: left / 1_000_000 + (left % 1_000_000 == 0 ? 0 : 1))
    }
}

extension Int64 {
    fileprivate func clampedSum(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }

    fileprivate func clampedProduct(_ other: Int64) -> Int64 {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        return overflow ? ((self > 0) == (other > 0) ? .max : .min) : product
    }
}
