// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A new, private file in the store directory that is written in full before it is given its final name.
///
/// Its name starts with a dot and contains ``marker``; app group names never start with a dot, so it never
/// collides with a record, and a store that opens removes any such file left by a crash.
struct TemporaryFile {
    /// What every temporary file's name contains.
    static let marker = ".tmp-"

    let name: String
    private let descriptor: CInt

    /// Creates `<prefix>.tmp-<random>` with `O_EXCL` and mode 0600 (given to open, never chmod-ed).
    static func create(in directory: CInt, prefix: String, what: String, path: String) throws(TokenStoreError)
        -> TemporaryFile
    {
        var lastFailure: SystemCallError?
        for _ in 0..<8 {
            let name = prefix + marker + randomSuffix()
            do {
                let descriptor = try SystemCalls.openat(
                    directory, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode: 0o600)
                return TemporaryFile(name: name, descriptor: descriptor)
            } catch let failure where failure.errno == .fileExists {
                lastFailure = failure
            } catch {
                throw TokenStoreError("cannot create a temporary file to write the \(what) \(path)", error)
            }
        }
        throw TokenStoreError("cannot create a temporary file to write the \(what) \(path)", lastFailure!)
    }

    /// Writes `bytes`, flushes them to the disk and closes the file. The file is closed even when this throws.
    func writeAndClose(_ bytes: [UInt8], what: String, path: String) throws(TokenStoreError) {
        defer { SystemCalls.close(descriptor) }
        do {
            try SystemCalls.writeAll(descriptor, bytes)
            try SystemCalls.fsync(descriptor)
        } catch {
            throw TokenStoreError("cannot write the \(what) \(path)", error)
        }
    }

    /// Whether `name` is a temporary file's name.
    static func isTemporary(_ name: String) -> Bool {
        name.hasPrefix(".") && name.contains(marker)
    }

    /// 16 random hex digits.
    static func randomSuffix() -> String {
        let value = UInt64.random(in: .min ... .max)
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
