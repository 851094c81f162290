// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing

@testable import AuthDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// Real timerfds on the real wall clock, with short waits. Serialized: the clock-set test cancels every armed
/// timerfd of the process.
@Suite("Wall-clock timer (timerfd)", .serialized, .offPool)
struct WallClockTimerTests {
    /// Whether this process has CAP_SYS_TIME.
    static let maySetTheClock: Bool = {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
            let mask = UInt64(line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return false }
        return mask & (1 << 25) != 0  // CAP_SYS_TIME
    }()

    /// A clock set (NTP at boot, `date -s`) wakes the wait with `.clockChanged`, so the caller re-arms for the
    /// new time. The test sets the clock to what it reads: the kernel counts that as a set, yet time stays put.
    @Test(.enabled(if: maySetTheClock, "needs CAP_SYS_TIME to set the clock"))
    func settingTheClockWakesTheWaitToReArm() throws {
        let timer = try WallClockTimer()
        try timer.arm(at: Date().addingTimeInterval(3600))
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        #expect(clock_settime(CLOCK_REALTIME, &now) == 0)
        #expect(try timer.wait(timeout: .seconds(2)) == .clockChanged)

        try timer.arm(at: Date().addingTimeInterval(0.05))
        #expect(try timer.wait(timeout: .seconds(2)) == .fired)
    }

    @Test func armedAheadFiresAfterTheDeadlineWithinABound() throws {
        let timer = try WallClockTimer()
        let deadline = Date().addingTimeInterval(0.1)
        try timer.arm(at: deadline)
        #expect(try timer.wait(timeout: .seconds(5)) == .fired)
        let now = Date()
        #expect(now >= deadline)  // never early, so fireDue(now:) sees the deadline as due
        #expect(try timer.readEvent() == nil)  // one expiration, taken
    }

    @Test func armedInThePastFiresAtOnce() throws {
        let timer = try WallClockTimer()
        for date in [Date().addingTimeInterval(-3600), Date(timeIntervalSince1970: 0), Date.distantPast] {
            try timer.arm(at: date)
            #expect(try timer.wait(timeout: .seconds(2)) == .fired)
        }
    }

    @Test func noDeadlineTimesOut() throws {
        let timer = try WallClockTimer()
        try timer.arm(at: Date().addingTimeInterval(0.05))
        try timer.arm(at: nil)
        #expect(try timer.wait(timeout: .milliseconds(200)) == nil)
    }

    @Test func aNewTimerHasNoDeadline() throws {
        let timer = try WallClockTimer()
        #expect(try timer.wait(timeout: .milliseconds(50)) == nil)
        #expect(try timer.readEvent() == nil)
    }

    @Test func reArmingReplacesTheOldDeadline() throws {
        let timer = try WallClockTimer()
        try timer.arm(at: Date().addingTimeInterval(0.05))
        try timer.arm(at: Date().addingTimeInterval(3600))
        #expect(try timer.wait(timeout: .milliseconds(200)) == nil)

        let deadline = Date().addingTimeInterval(0.1)
        try timer.arm(at: deadline)
        #expect(try timer.wait(timeout: .seconds(5)) == .fired)
        #expect(Date() >= deadline)
    }

    @Test func aFiredButUnreadTimerIsClearedByReArming() throws {
        let timer = try WallClockTimer()
        try timer.arm(at: Date().addingTimeInterval(-1))
        try timer.arm(at: Date().addingTimeInterval(3600))
        #expect(try timer.wait(timeout: .milliseconds(100)) == nil)
    }

    @Test func aCallerWithItsOwnEventLoopPollsTheDescriptor() throws {
        let timer = try WallClockTimer()
        try timer.arm(at: Date().addingTimeInterval(0.05))
        var request = pollfd(fd: timer.fileDescriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&request, 1, 5_000) == 1)
        #expect(try timer.readEvent() == .fired)
        #expect(try timer.readEvent() == nil)
        request.revents = 0
        #expect(poll(&request, 1, 0) == 0)
    }

    @Test func theDescriptorIsCloseOnExecAndNonBlocking() throws {
        let timer = try WallClockTimer()
        #expect(fcntl(timer.fileDescriptor, F_GETFD) & FD_CLOEXEC != 0)
        #expect(fcntl(timer.fileDescriptor, F_GETFL) & O_NONBLOCK != 0)
    }

    @Test func datesConvertToAbsoluteTimespecsNeverEarlyNeverZero() {
        let at = { (interval: Double) in WallClockTimer.timespecValue(for: Date(timeIntervalSince1970: interval)) }
        #expect(at(1_900_000_000) == (1_900_000_000, 1_000))
        #expect(at(1_900_000_000.5).seconds == 1_900_000_000)
        #expect(at(1_900_000_000.5).nanoseconds >= 500_000_000)
        #expect(at(0) == (0, 1))  // zero would disarm the timer
        #expect(at(-5) == (0, 1))
        #expect(at(1e300) == (WallClockTimer.noDeadlineSeconds, 0))
        #expect(WallClockTimer.timespecValue(for: nil) == (WallClockTimer.noDeadlineSeconds, 0))
        let value = at(1_899_999_999.999_999_9)
        #expect(value.nanoseconds < 1_000_000_000)
        #expect(Double(value.seconds) + Double(value.nanoseconds) / 1e9 >= 1_899_999_999.999_999_9)
    }

    @Test func errorsNameTheCallAndErrno() {
        let error = WallClockTimerError(call: "timerfd_settime", errno: EINVAL)
        #expect(error.description == "timerfd_settime: Invalid argument (errno 22)")
    }
}
