// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The lock that makes one process the owner of a store directory: `<directory>/daemon.lock`, locked with
/// `flock(2)` for as long as the returned value lives, with the holder's process id written in it.
///
/// Two daemons on one store would each keep their own idea of every group's generation and overwrite each
/// other's records; the second one refuses to start instead and names the first. The lock goes with the
/// process: a daemon killed with SIGKILL leaves the file, but not the lock, behind.
///
/// ```swift
/// let lock = try StoreLock(directory: "/var/lib/exponea-authd")   // before the key or the store is opened
/// ```
public final class StoreLock: Sendable {
    /// The lock file's name in the store directory.
    public static let fileName = "daemon.lock"

    private let descriptor: CInt

    /// Creates the store directory (mode 0700) if it is missing, checks it as ``TokenStore`` does, and takes the
    /// lock without waiting.
    ///
    /// - Throws: ``TokenStoreError`` with code ``TokenStoreError/Code/storeInUse`` naming the holder's process id
    ///   when another process holds the lock; other codes when the directory or the file cannot be used.
    public init(directory: String) throws(TokenStoreError) {
        let directoryDescriptor = try StoreDirectory.open(directory)
        defer { SystemCalls.close(directoryDescriptor) }
        let path = directory + "/" + Self.fileName
        do {
            // O_NONBLOCK: a FIFO planted under the name must not hang the start.
            descriptor = try SystemCalls.openat(
                directoryDescriptor, Self.fileName, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                mode: 0o600)
        } catch {
            throw TokenStoreError("cannot open the token store's lock file \(path)", error)
        }
        do throws(TokenStoreError) {
            let info: stat
            do {
                info = try SystemCalls.fstat(descriptor)
            } catch {
                throw TokenStoreError("cannot inspect the token store's lock file \(path)", error)
            }
            guard SystemCalls.isRegularFile(info), info.st_uid == geteuid() else {
                throw TokenStoreError(
                    code: .directoryUnsafe,
                    message: "the token store's lock file \(path) is not a regular file owned by this user; "
                        + "remove it")
            }
            if flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
                let code = errno
                guard code == EWOULDBLOCK else {
                    throw TokenStoreError(
                        "cannot lock the token store's lock file \(path)",
                        SystemCallError(call: "flock", errno: .init(rawValue: code)))
                }
                let holder = Self.holder(descriptor).map { "pid \($0)" } ?? "a process that has not yet written its pid"
                throw TokenStoreError(
                    code: .storeInUse,
                    message: "the token store \(directory) is in use by another exponea-authd (\(holder)); stop it "
                        + "first, or give this one another --state-directory")
            }
            let pid = Array("\(getpid())\n".utf8)
            _ = ftruncate(descriptor, 0)
            _ = pwrite(descriptor, pid, pid.count, 0)
        } catch {
            SystemCalls.close(descriptor)
            throw error
        }
    }

    deinit {
        SystemCalls.close(descriptor)
    }

    /// The process id the holder wrote in the file.
    private static func holder(_ descriptor: CInt) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 16)
        let count = pread(descriptor, &bytes, bytes.count, 0)
        guard count > 0 else { return nil }
        let text = String(decoding: bytes[..<count], as: UTF8.self).split(separator: "\n").first ?? ""
        return Int32(text)
    }
}
