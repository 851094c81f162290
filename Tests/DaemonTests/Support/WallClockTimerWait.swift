// SPDX-License-Identifier: Apache-2.0
import AuthDaemon

#if canImport(Glibc)
    import Glibc
#endif

extension WallClockTimer {
    /// Waits until the timer fires or the wall clock is set, by polling its descriptor as the daemon's loop does;
    /// nil when `timeout` passes first.
    func wait(timeout: Duration) throws(WallClockTimerError) -> Outcome? {
        let end = ContinuousClock.now + timeout
        while true {
            let left = max(.zero, ContinuousClock.now.duration(to: end))
            var request = pollfd(fd: fileDescriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&request, 1, Int32(left / .milliseconds(1)) + 1)
            if ready < 0 && errno != EINTR { throw WallClockTimerError(call: "poll", errno: errno) }
            if ready > 0, let outcome = try readEvent() { return outcome }
            if ContinuousClock.now >= end { return nil }
        }
    }
}
