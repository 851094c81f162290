// SPDX-License-Identifier: Apache-2.0
import Foundation

/// A fresh directory under the system's temporary directory, removed with everything in it on `remove()`.
public struct TemporaryDirectory: Sendable {
    /// The directory's absolute path.
    public let path: String

    /// Creates `/tmp/<prefix>.XXXXXX` (mode 0700).
    public init(prefix: String = "authd-test") throws {
        var template = Array("\(NSTemporaryDirectory())/\(prefix).XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        path = String(cString: made)
    }

    /// `path/name`.
    public func appending(_ name: String) -> String { path + "/" + name }

    /// Removes the directory and its contents.
    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// Writes an executable file (a script a test runs) so that no other process can hold it open for writing when it
/// is run: written through a close-on-exec descriptor (a child forked meanwhile by another test does not inherit
/// it) under a temporary name, then renamed into place. Otherwise exec(2) can fail with "Text file busy".
public func writeExecutable(_ text: String, to path: String) throws {
    let temporary = path + ".partial"
    let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o755)
    guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    let bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written > 0 else {
            close(descriptor)
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        offset += written
    }
    close(descriptor)
    guard rename(temporary, path) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
}
