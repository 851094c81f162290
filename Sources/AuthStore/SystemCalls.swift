// SPDX-License-Identifier: Apache-2.0
import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A system call that failed: its name and the errno it left.
package struct SystemCallError: Error, Sendable, CustomStringConvertible {
    var call: String
    var errno: Errno

    package var description: String { "\(call): \(errno) (errno \(errno.rawValue))" }
}

/// Thin wrappers over the system calls the store uses: `EINTR` is retried, `errno` is read at once and
/// reported with the call's name. Paths are always names relative to a directory descriptor.
enum SystemCalls {
    /// Runs `body` until it does not fail with `EINTR`; a negative result becomes a ``SystemCallError``.
    static func retrying<Result: BinaryInteger>(
        _ call: String, _ body: () -> Result
    ) throws(SystemCallError) -> Result {
        while true {
            let result = body()
            if result >= 0 { return result }
            let code = errno
            if code == EINTR { continue }
            throw SystemCallError(call: call, errno: Errno(rawValue: code))
        }
    }

    static func openat(_ directory: CInt, _ name: String, _ flags: CInt, mode: mode_t = 0) throws(SystemCallError)
        -> CInt
    {
        try retrying("openat") { Glibc.openat(directory, name, flags, mode) }
    }

    static func open(_ path: String, _ flags: CInt) throws(SystemCallError) -> CInt {
        try retrying("open") { Glibc.open(path, flags) }
    }

    static func mkdir(_ path: String, mode: mode_t) throws(SystemCallError) {
        _ = try retrying("mkdir") { Glibc.mkdir(path, mode) }
    }

    static func fstat(_ descriptor: CInt) throws(SystemCallError) -> stat {
        var info = stat()
        _ = try retrying("fstat") { Glibc.fstat(descriptor, &info) }
        return info
    }

    static func fsync(_ descriptor: CInt) throws(SystemCallError) {
        _ = try retrying("fsync") { Glibc.fsync(descriptor) }
    }

    static func renameat(_ directory: CInt, _ from: String, _ to: String) throws(SystemCallError) {
        _ = try retrying("renameat") { Glibc.renameat(directory, from, directory, to) }
    }

    /// Gives the file `from` the second name `to`; fails with `EEXIST` rather than replace anything.
    static func linkat(_ directory: CInt, _ from: String, _ to: String) throws(SystemCallError) {
        _ = try retrying("linkat") { Glibc.linkat(directory, from, directory, to, 0) }
    }

    static func unlinkat(_ directory: CInt, _ name: String) throws(SystemCallError) {
        _ = try retrying("unlinkat") { Glibc.unlinkat(directory, name, 0) }
    }

    /// Closes `descriptor`. Not retried: on Linux the descriptor is gone even when `close` reports `EINTR`.
    static func close(_ descriptor: CInt) {
        _ = Glibc.close(descriptor)
    }

    /// Writes all of `bytes`, continuing after short writes.
    static func writeAll(_ descriptor: CInt, _ bytes: [UInt8]) throws(SystemCallError) {
        var offset = 0
        while offset < bytes.count {
            let written = try retrying("write") {
                bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            }
            offset += written
        }
    }

    /// Reads to end of file, but at most `limit` bytes; returns nil when the file holds more.
    ///
    /// - Parameter expected: The size the file is thought to have (its `fstat`): the first read has room for that
    ///   and one byte more, to see the end in the same read: a buffer of `limit` bytes, zeroed for every record,
    ///   would cost a daemon that loads many records at start. A file that grew is read on, up to the limit.
    static func readAll(_ descriptor: CInt, limit: Int, expected: Int = 4095) throws(SystemCallError) -> [UInt8]? {
        var bytes: [UInt8] = []
        var room = min(limit, max(0, expected)) + 1
        while bytes.count <= limit {
            let (part, ended) = try read(descriptor, upTo: room)
            if bytes.isEmpty { bytes = part } else { bytes += part }
            if ended { return bytes }
            room = min(limit + 1 - bytes.count, max(room, 4096))
        }
        return nil
    }

    /// Up to `count` bytes of `descriptor`, and whether its end came first.
    private static func read(_ descriptor: CInt, upTo count: Int) throws(SystemCallError) -> ([UInt8], ended: Bool) {
        var failure: SystemCallError?
        var ended = false
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = 0
            while initialized < buffer.count {
                do throws(SystemCallError) {
                    let read = try retrying("read") {
                        Glibc.read(descriptor, buffer.baseAddress! + initialized, buffer.count - initialized)
                    }
                    if read == 0 {
                        ended = true
                        return
                    }
                    initialized += read
                } catch {
                    failure = error
                    return
                }
            }
        }
        if let failure { throw failure }
        return (bytes, ended)
    }

    /// The names in the directory `directory` (without `.` and `..`), read through a descriptor of its own so
    /// that listings on several threads do not share a position.
    static func listDirectory(_ directory: CInt) throws(SystemCallError) -> [String] {
        let descriptor = try openat(directory, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard let stream = fdopendir(descriptor) else {
            let code = errno
            close(descriptor)
            throw SystemCallError(call: "fdopendir", errno: Errno(rawValue: code))
        }
        defer { closedir(stream) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                let code = errno
                if code == 0 { break }
                throw SystemCallError(call: "readdir", errno: Errno(rawValue: code))
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Whether `info` describes a regular file / a directory.
    static func isRegularFile(_ info: stat) -> Bool { info.st_mode & S_IFMT == S_IFREG }
    static func isDirectory(_ info: stat) -> Bool { info.st_mode & S_IFMT == S_IFDIR }

    /// The permission bits of `info`, as an octal string such as `0755`.
    static func modeString(_ info: stat) -> String {
        let bits = String(info.st_mode & 0o7777, radix: 8)
        return String(repeating: "0", count: max(0, 4 - bits.count)) + bits
    }
}
