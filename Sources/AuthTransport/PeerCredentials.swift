// SPDX-License-Identifier: Apache-2.0
internal import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// Who is at the other end of a Unix socket, as the kernel recorded it when the peer connected: `SO_PEERCRED`
/// (pid, uid, primary gid) and `SO_PEERGROUPS` (supplementary groups), read when the connection is accepted,
/// before any call is handled.
///
/// These are the process's own credentials, not what the user database says the user could have: a process
/// that dropped a supplementary group (`setpriv --clear-groups`, `setgroups(2)`) does not hold it here.
public struct PeerCredentials: Hashable, Sendable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    /// The effective primary group.
    public var gid: UInt32
    /// The supplementary groups, ascending.
    public var groups: [UInt32]

    public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32] = []) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }

    /// Whether the process holds `gid`, as its primary or a supplementary group.
    public func holds(gid: UInt32) -> Bool { self.gid == gid || groups.contains(gid) }

    public var description: String { "pid \(pid), uid \(uid), gid \(gid), groups \(groups)" }

    /// Reads the credentials of the peer of a connected Unix socket.
    static func read(from channel: any Channel) -> EventLoopFuture<PeerCredentials> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeFailedFuture(VarlinkServerError(message: "not a socket"))
        }
        let credentials: EventLoopFuture<KernelCredentials> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
        return credentials.flatMap { credentials in
            readGroups(provider, on: channel.eventLoop).map { groups in
                PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid, groups: groups)
            }
        }
    }

    /// `SO_PEERGROUPS` (Linux 4.13). NIO's getsockopt does not return the length the kernel wrote, but fills its
    /// buffer with zeros first, and the kernel keeps a process's groups sorted (it searches them by bisection):
    /// the groups are the entries up to the last one that is not zero. Only when every entry is zero must the
    /// count be asked for, with an empty buffer: the call succeeds when the process has no group, and fails
    /// with ERANGE when it has group 0 (root) only.
    private static func readGroups(_ provider: any SocketOptionProvider, on loop: any EventLoop)
        -> EventLoopFuture<[UInt32]>
    {
        let small: EventLoopFuture<InlineArray<64, UInt32>> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERGROUPS))
        return small.map { Optional(groups(in: $0)) }
            .flatMapError { error in
                guard (error as? IOError)?.errnoCode == ERANGE else { return loop.makeFailedFuture(error) }
                // More than 64 groups: as many as the kernel allows (NGROUPS_MAX), on the heap.
                let large: EventLoopFuture<InlineArray<65536, UInt32>> = provider.unsafeGetSocketOption(
                    level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERGROUPS))
                return large.map { Optional(groups(in: $0)) }
            }
            .flatMap { found -> EventLoopFuture<[UInt32]> in
                guard let found, found.isEmpty else { return loop.makeSucceededFuture(found ?? []) }
                let count: EventLoopFuture<EmptyOption> = provider.unsafeGetSocketOption(
                    level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERGROUPS))
                return count.map { _ in [] }.flatMapError { error in
                    guard (error as? IOError)?.errnoCode == ERANGE else { return loop.makeFailedFuture(error) }
                    return loop.makeSucceededFuture([0])
                }
            }
    }

    /// The entries of `buffer` up to its last one that is not zero.
    private static func groups<let count: Int>(in buffer: InlineArray<count, UInt32>) -> [UInt32] {
        var last = -1
        for index in buffer.indices where buffer[index] != 0 { last = index }
        return (0..<(last + 1)).map { buffer[$0] }
    }

    /// A buffer of no bytes, to ask only whether the peer has any group.
    private struct EmptyOption: Sendable {}
}
