// SPDX-License-Identifier: Apache-2.0
/// Who is at the other end of a Unix socket: the kernel's `SO_PEERCRED`, read when the connection is accepted,
/// before any call is handled.
public struct PeerCredentials: Hashable, Sendable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    public var description: String { "pid \(pid), uid \(uid), gid \(gid)" }
}
