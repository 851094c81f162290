// SPDX-License-Identifier: Apache-2.0
import CPidfd

#if canImport(Glibc)
    import Glibc
#endif

/// A pidfd: one process, whatever holds its pid later. Closed when released.
public final class ProcessDescriptor {
    /// The descriptor.
    public let descriptor: Int32

    /// Takes `descriptor`, a pidfd, to close it when released.
    public init(adopting descriptor: Int32) { self.descriptor = descriptor }

    /// What `SO_PEERPIDFD` gives of a socket's peer.
    public enum Peer {
        /// The process that connected.
        case process(ProcessDescriptor)
        /// The process is gone (a kernel that gives no pidfd of a reaped process).
        case gone
        /// The kernel has no `SO_PEERPIDFD` (before 6.5).
        case unsupported
    }

    /// The process that connected the Unix socket `socket` (`SO_PEERPIDFD`, Linux 6.5).
    public static func peer(of socket: Int32) -> Peer {
        let descriptor = authd_peer_pidfd(socket)
        if descriptor >= 0 { return .process(ProcessDescriptor(adopting: descriptor)) }
        return errno == ENOPROTOOPT || errno == EOPNOTSUPP ? .unsupported : .gone
    }

    /// The process that holds `pid` now (`pidfd_open(2)`), or nil when none does.
    public static func open(_ pid: Int32) -> ProcessDescriptor? {
        guard pid > 0 else { return nil }
        let descriptor = authd_pidfd_open(pid)
        return descriptor >= 0 ? ProcessDescriptor(adopting: descriptor) : nil
    }

    deinit { close(descriptor) }

    /// Whether the process still runs (it may run as a user the caller cannot signal).
    public var isRunning: Bool { authd_pidfd_alive(descriptor) == 1 }

    /// What `PIDFD_GET_INFO` says of the process.
    public enum CgroupInfo: Equatable, Sendable {
        /// Its cgroup (v2) and its effective uid.
        case cgroup(id: UInt64, euid: UInt32)
        /// It has exited.
        case exited
        /// The kernel has no `PIDFD_GET_INFO` (before 6.13), or no cgroup v2.
        case unsupported
    }

    /// The process's cgroup id and effective uid (`PIDFD_GET_INFO`, Linux 6.13): a question to the kernel about
    /// the descriptor's own process, which `/proc`'s visibility does not limit.
    public func cgroupInfo() -> CgroupInfo {
        var id: UInt64 = 0
        var euid: UInt32 = 0
        if authd_pidfd_cgroup(descriptor, &id, &euid) == 0 { return .cgroup(id: id, euid: euid) }
        return errno == ESRCH ? .exited : .unsupported
    }
}
