// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The one builder of `sockaddr_un` for a file-system path, for the few places that call `bind(2)` or
/// `connect(2)` themselves (the daemon's stale-socket probe, the benchmark's blocking client, the test kit).
///
/// ```swift
/// let result = UnixSocketAddress.withAddress(path) { connect(descriptor, $0, $1) }
/// guard result == 0 else { throw POSIXError(...errno...) }
/// ```
public enum UnixSocketAddress {
    /// The longest path `sockaddr_un` holds, in bytes, without its NUL (107 on Linux).
    public static let maximumPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// Calls `body` (a `bind`, `connect` or the like) with the address of `path` and its length, and returns
    /// what it returns.
    ///
    /// A path that does not fit (longer than ``maximumPathLength`` bytes) or holds a NUL is never truncated to
    /// another path: `body` is not called, and the result is -1 with `errno` set to `ENAMETOOLONG` (or `EINVAL`),
    /// as the system call itself would fail.
    public static func withAddress(
        _ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32
    ) -> Int32 {
        let bytes = Array(path.utf8)
        guard bytes.count <= maximumPathLength else {
            errno = ENAMETOOLONG
            return -1
        }
        guard !bytes.contains(0) else {
            errno = EINVAL
            return -1
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes + [0]) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}
