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
