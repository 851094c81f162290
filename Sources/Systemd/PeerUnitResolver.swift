// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#endif

/// Finds the systemd unit of a peer, race-free: the unit of the process itself, never of another that took its
/// pid later.
///
/// The process is a pidfd: `SO_PEERPIDFD` for a socket's peer (Linux 6.5), else `pidfd_open(2)` of its pid. Its
/// cgroup comes from the pidfd (`PIDFD_GET_INFO`, Linux 6.13) and is named by a ``CgroupUnitIndex``, which needs
/// no `/proc`; on older kernels from `/proc/PID/cgroup`, read and then checked against the pidfd: the process
/// still runs, so the pid was still its own when it was read. (With only `pidfd_open`, before Linux 6.5, a peer
/// that exits between its connect and the accept can leave its pid to another process before the pidfd is
/// opened; no kernel of that age gives more.) No call waits on a disk, a peer or the bus.
///
/// Used on one thread (the daemon's loop).
public final class PeerUnitResolver {
    /// The index of the cgroups' units.
    public let index: CgroupUnitIndex
    private let procRoot: String
    private let asksThePidfd: Bool

    /// - Parameters:
    ///   - index: the cgroups' units.
    ///   - procRoot: `/proc`, or another for tests.
    ///   - asksThePidfd: whether to ask the pidfd for its cgroup (`PIDFD_GET_INFO`); false takes the way of the
    ///     kernels without it (`/proc/PID/cgroup`, then the pidfd's check), for tests.
    public init(index: CgroupUnitIndex = CgroupUnitIndex(), procRoot: String = "/proc", asksThePidfd: Bool = true) {
        self.index = index
        self.procRoot = procRoot
        self.asksThePidfd = asksThePidfd
    }

    /// The units of the process that connected the Unix socket `socket`, whose `SO_PEERCRED` pid is `pid`; nil
    /// when it is known by no unit or is gone.
    public func units(ofPeer socket: Int32, pid: Int32) -> ProcessUnits? {
        switch ProcessDescriptor.peer(of: socket) {
        case .process(let process):
            return units(of: process, pid: pid)
        case .gone:
            return nil  // never pidfd_open(pid): another process may hold the pid by now
        case .unsupported:
            guard let process = ProcessDescriptor.open(pid) else { return nil }
            return units(of: process, pid: pid)
        }
    }

    /// The units of `process`, whose pid was `pid`, or nil when it is known by no unit or has exited.
    ///
    /// - Parameter uid: when given, the process's effective uid must be it (a bus peer's process, opened by its
    ///   pid: one of another user that took the pid is refused).
    public func units(of process: ProcessDescriptor, pid: Int32, uid: UInt32? = nil) -> ProcessUnits? {
        switch asksThePidfd ? process.cgroupInfo() : .unsupported {
        case .cgroup(let id, let euid):
            if let uid, euid != uid { return nil }
            return index.units(ofCgroup: id)
        case .exited:
            return nil
        case .unsupported:
            guard let path = cgroupPath(of: pid), let units = ProcessUnits(cgroupPath: path) else { return nil }
            // The pidfd's process still runs, so `pid` was still its own when the file was read.
            return process.isRunning ? units : nil
        }
    }

    /// The cgroup v2 path of `pid` (`0::/path` of `/proc/PID/cgroup`).
    private func cgroupPath(of pid: Int32) -> Substring? {
        let descriptor = Glibc.open("\(procRoot)/\(pid)/cgroup", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        let text = String(decoding: bytes[..<count], as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix("0::") {
            return line.dropFirst(3)
        }
        return nil
    }
}
