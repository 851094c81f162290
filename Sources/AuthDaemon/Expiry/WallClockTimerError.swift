// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#endif

/// A system call of ``WallClockTimer`` that failed: its name and the errno it left.
public struct WallClockTimerError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The system call, e.g. `timerfd_settime`.
    public var call: String
    /// The errno it left.
    public var errno: Int32

    public init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    public var description: String {
        "\(call): \(String(cString: strerror(errno))) (errno \(errno))"
    }
}
