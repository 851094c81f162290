// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Systemd

#if canImport(Glibc)
    import Glibc
#endif

/// Reads who is at the other end of a Unix socket (a ``Caller``, of AuthCore), as the kernel recorded it when the
/// peer connected: `SO_PEERCRED` (pid, uid, primary gid) and `SO_PEERGROUPS` (supplementary groups), and its
/// systemd unit (``PeerUnitResolver``: its pidfd's cgroup), when the connection is accepted, before any call is
/// handled.
enum PeerCredentials {
    /// Reads the credentials of the peer of the connected Unix socket `descriptor`: `SO_PEERCRED`, then
    /// `SO_PEERGROUPS` (Linux 4.13), whose length the kernel reports.
    ///
    /// - Throws: ``VarlinkServerError`` when the socket has no peer credentials.
    static func read(from descriptor: Int32) throws(VarlinkServerError) -> Caller {
        var credentials = KernelCredentials(pid: 0, uid: 0, gid: 0)
        var length = socklen_t(MemoryLayout<KernelCredentials>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else {
            throw VarlinkServerError(message: "cannot read the peer's credentials: \(String(cString: strerror(errno)))")
        }
        return Caller(
            pid: credentials.pid, uid: credentials.uid, gid: credentials.gid, groups: try groups(of: descriptor))
    }

    /// Adds to `caller`, the peer of `descriptor`, its unit, found by `units`.
    static func identify(_ caller: inout Caller, of descriptor: Int32, units: PeerUnitResolver) {
        let found = units.units(ofPeer: descriptor, pid: caller.pid)
        caller.unit = found?.unit
        caller.userUnit = found?.userUnit
    }

    /// `SO_PEERGROUPS`: into 64 entries first; with ERANGE the kernel says how many there are.
    private static func groups(of descriptor: Int32) throws(VarlinkServerError) -> [UInt32] {
        var capacity = 64
        while true {
            var groups = [UInt32](repeating: 0, count: capacity)
            var length = socklen_t(capacity * MemoryLayout<UInt32>.size)
            let result = groups.withUnsafeMutableBytes {
                getsockopt(descriptor, SOL_SOCKET, SO_PEERGROUPS, $0.baseAddress, &length)
            }
            if result == 0 {
                groups.removeLast(capacity - Int(length) / MemoryLayout<UInt32>.size)
                return groups
            }
            let needed = Int(length) / MemoryLayout<UInt32>.size
            guard errno == ERANGE, needed > capacity else {
                throw VarlinkServerError(
                    message: "cannot read the peer's groups: \(String(cString: strerror(errno)))")
            }
            capacity = needed
        }
    }
}
