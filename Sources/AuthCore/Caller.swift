// SPDX-License-Identifier: Apache-2.0

/// Who makes a call: the process at the other end of the connection, as the kernel recorded it when it connected
/// (`SO_PEERCRED`, `SO_PEERGROUPS`), and the systemd unit it runs in (its cgroup, found through its pidfd). Access
/// to a group, the operator's log lines and the bus's delivery are decided by it; the transport reads it once per
/// connection, before any call is handled.
///
/// These are the process's own credentials, not what the user database says the user could have: a process
/// that dropped a supplementary group (`setpriv --clear-groups`, `setgroups(2)`) does not hold it here.
public struct Caller: Hashable, Sendable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    /// The effective primary group.
    public var gid: UInt32
    /// The supplementary groups, ascending.
    public var groups: [UInt32]
    /// The process's unit in the system's service manager (`shop-app.service`, `session-3.scope`,
    /// `user@1000.service`), from its cgroup when it connected; nil when it has none the daemon can know.
    public var unit: String?
    /// The process's unit in a user's service manager, when ``unit`` is that manager (`user@UID.service`).
    public var userUnit: String?

    public init(
        pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32] = [], unit: String? = nil, userUnit: String? = nil
    ) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.groups = groups
        self.unit = unit
        self.userUnit = userUnit
    }

    /// Whether the process holds `gid`, as its primary or a supplementary group.
    public func holds(gid: UInt32) -> Bool { self.gid == gid || groups.contains(gid) }

    public var description: String {
        let units = unit.map { ", unit \($0)" + (userUnit.map { ", user unit \($0)" } ?? "") } ?? ""
        return "pid \(pid), uid \(uid), gid \(gid), groups \(groups)\(units)"
    }
}
