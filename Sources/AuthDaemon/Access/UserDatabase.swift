// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#endif

/// Resolves the user and group names of the access configuration when it is read: the system's (NSS:
/// `/etc/passwd`, `/etc/group`, userdb) or a test's. Never asked while a call is handled.
public protocol UserDatabase: Sendable {
    /// The uid of a user name, or nil when there is no such user.
    func uid(ofUser name: String) -> UInt32?
    /// The gid of a group name, or nil when there is no such group.
    func gid(ofGroup name: String) -> UInt32?
}

/// The system's user database, through the C library (NSS).
public struct SystemUserDatabase: UserDatabase {
    public init() {}

    public func uid(ofUser name: String) -> UInt32? {
        withEntry(name, getpwnam_r, { $0.pw_uid })
    }

    public func gid(ofGroup name: String) -> UInt32? {
        withEntry(name, getgrnam_r, { $0.gr_gid })
    }

    private func withEntry<Entry, Value>(
        _ name: String,
        _ lookup: (
            UnsafePointer<CChar>, UnsafeMutablePointer<Entry>, UnsafeMutablePointer<CChar>, Int,
            UnsafeMutablePointer<UnsafeMutablePointer<Entry>?>
        ) -> Int32,
        _ value: (Entry) -> Value
    ) -> Value? {
        let entry = UnsafeMutablePointer<Entry>.allocate(capacity: 1)
        defer { entry.deallocate() }
        var result: UnsafeMutablePointer<Entry>?
        var buffer = [CChar](repeating: 0, count: 16 * 1024)
        let status = name.withCString { lookup($0, entry, &buffer, buffer.count, &result) }
        guard status == 0, let found = result else { return nil }
        return value(found.pointee)
    }
}
