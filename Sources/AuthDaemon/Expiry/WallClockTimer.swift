// SPDX-License-Identifier: Apache-2.0
import CTimerFD

#if canImport(Glibc)
    import Glibc
#endif
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One Linux wall-clock timer: a `timerfd` on CLOCK_REALTIME armed for an absolute `Date` that also reports
/// when the wall clock is set (R14).
///
/// It is armed with `TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET`, so it fires when the wall clock reaches the
/// date (suspend included), and a read fails with `ECANCELED` when the clock is set (NTP at boot, `date -s`):
/// that is reported as ``Outcome/clockChanged``, and the timer re-arms itself for the same date so it keeps
/// watching. Watch ``fileDescriptor`` in the event loop and call ``readEvent()`` when it is readable
/// (``ExpiryTimerSource``):
///
/// ```swift
/// let timer = try WallClockTimer()
/// try timer.arm(at: scheduler.nextDeadline)
/// try loop.onReadable(timer.fileDescriptor) {
///     switch try? timer.readEvent() {
///     case .fired?: events = scheduler.fireDue(now: clock.now)
///     case .clockChanged?: events = scheduler.clockChanged(now: clock.now)
///     case nil: break
///     }
/// }
/// ```
///
/// It belongs to one owner on one thread (the daemon's ``AuthService``, on the loop), so it is not `Sendable` and
/// needs no lock.
public final class WallClockTimer {
    /// What a readable descriptor meant.
    public enum Outcome: Sendable, Hashable {
        /// The wall clock reached the armed date.
        case fired
        /// The wall clock was set (jumped, either way): every deadline must be re-checked.
        case clockChanged
    }

    /// The instant the timer is armed for when there is no deadline: 9999-12-31, so clock changes are still
    /// reported (`TFD_TIMER_CANCEL_ON_SET` only works while armed).
    static let noDeadlineSeconds = 253_402_300_799

    /// Slack added when converting a `Date`, so the timer never fires before the `Date` read back from the
    /// clock has reached the deadline (a `Double` of Unix time is only exact to ~0.2 µs).
    static let roundingSlackNanoseconds = 1_000

    /// The timerfd, for a caller with its own event loop: readable when the timer fired or the clock was set.
    public let fileDescriptor: Int32

    /// The `(seconds, nanoseconds)` last armed, to re-arm after a clock change.
    private var armed = (seconds: noDeadlineSeconds, nanoseconds: 0)
    /// Whether the kernel holds ``armed`` still: false once it fired, as a fired timer is disarmed.
    private var isArmed = false

    /// Creates the timer, armed with no deadline (watching for clock changes only).
    ///
    /// - Throws: ``WallClockTimerError`` from `timerfd_create` or `timerfd_settime`.
    public init() throws(WallClockTimerError) {
        let descriptor = timerfd_create(CLOCK_REALTIME, Int32(TFD_CLOEXEC | TFD_NONBLOCK))
        guard descriptor >= 0 else { throw WallClockTimerError(call: "timerfd_create", errno: errno) }
        fileDescriptor = descriptor
        try arm(at: nil)
    }

    deinit {
        close(fileDescriptor)
    }

    /// Arms the timer for the wall-clock instant `date`, replacing any earlier date; nil means no deadline.
    ///
    /// A date in the past (or at or before 1970) fires at once. With no deadline the timer never fires but
    /// still reports clock changes.
    ///
    /// - Throws: ``WallClockTimerError`` from `timerfd_settime`.
    public func arm(at date: Date?) throws(WallClockTimerError) {
        let value = Self.timespecValue(for: date)
        // Most changes of a group leave the earliest deadline where it was: no system call for those.
        guard !isArmed || value != armed else { return }
        try settime(value)
        armed = value
    }

    /// Takes what made ``fileDescriptor`` readable: ``Outcome/fired`` or ``Outcome/clockChanged``, or nil when
    /// nothing is pending. After a clock change the timer is re-armed for the same date.
    ///
    /// - Throws: ``WallClockTimerError`` from `read` or `timerfd_settime`.
    public func readEvent() throws(WallClockTimerError) -> Outcome? {
        while true {
            var expirations: UInt64 = 0
            let count = read(fileDescriptor, &expirations, MemoryLayout<UInt64>.size)
            if count == MemoryLayout<UInt64>.size {
                isArmed = false
                return .fired
            }
            let code = count < 0 ? errno : EIO
            switch code {
            case EINTR:
                continue
            case EAGAIN:
                return nil
            case ECANCELED:
                // The kernel stops reporting clock changes until the timer is armed again.
                try settime(armed)
                return .clockChanged
            default:
                throw WallClockTimerError(call: "read", errno: code)
            }
        }
    }

    private func settime(_ value: (seconds: Int, nanoseconds: Int)) throws(WallClockTimerError) {
        var spec = itimerspec(
            it_interval: timespec(tv_sec: 0, tv_nsec: 0),
            it_value: timespec(tv_sec: value.seconds, tv_nsec: value.nanoseconds)
        )
        let flags = Int32(TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET)
        isArmed = false
        guard timerfd_settime(fileDescriptor, flags, &spec, nil) == 0 else {
            throw WallClockTimerError(call: "timerfd_settime", errno: errno)
        }
        isArmed = true
    }

    /// The absolute `timespec` to arm for `date`: never zero (that would disarm), never before `date`.
    static func timespecValue(for date: Date?) -> (seconds: Int, nanoseconds: Int) {
        guard let date else { return (noDeadlineSeconds, 0) }
        let interval = date.timeIntervalSince1970
        guard interval > 0 else { return (0, 1) }
        guard interval < Double(noDeadlineSeconds) else { return (noDeadlineSeconds, 0) }
        var seconds = Int(interval.rounded(.down))
        var nanoseconds =
            Int(((interval - Double(seconds)) * 1_000_000_000).rounded(.up)) + roundingSlackNanoseconds
        if nanoseconds >= 1_000_000_000 {
            seconds += 1
            nanoseconds -= 1_000_000_000
        }
        return (seconds, nanoseconds)
    }
}
