// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#endif

/// The process's limit on open file descriptors (`RLIMIT_NOFILE`), which bounds how many clients the daemon
/// can hold: each connection is one descriptor.
public enum FileDescriptorLimit {
    /// Raises the soft limit to the hard limit and returns the soft limit then in force.
    ///
    /// systemd starts services with a soft limit of 1024 (for programs that still use `select(2)`) and a much
    /// higher hard one, and expects a program that does not use `select(2)`, like this one, to raise its own
    /// soft limit. Call it at start, before the first connection.
    @discardableResult
    public static func raiseToHardLimit() -> Int? {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return count(limit.rlim_cur)
    }

    private static let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)

    private static func count(_ value: rlim_t) -> Int {
        value > rlim_t(Int.max) ? Int.max : Int(value)
    }
}
