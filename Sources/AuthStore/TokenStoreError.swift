// SPDX-License-Identifier: Apache-2.0
import SystemPackage

/// Why the token store, or its key, cannot be used.
///
/// ``code`` is stable and can be matched on; ``message`` says what is wrong and what to do about it. Neither ever
/// holds a token, a key or a customer id (paths and app group names do appear).
///
/// ```swift
/// do {
///     store = try TokenStore(directory: path, key: key, logger: logger)
/// } catch let error where error.code == .directoryUnsafe {
///     print(error.message)  // "... run 'chmod 0700 /var/lib/exponea-authd' ..."
/// }
/// ```
public struct TokenStoreError: Error, Sendable, CustomStringConvertible {
    /// A stable name for the kind of failure. New codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name, such as `directoryUnsafe`.
        public let name: String

        private init(_ name: String) { self.name = name }

        public var description: String { name }

        /// The store path exists but is not a directory.
        public static let notADirectory = Code("notADirectory")
        /// The store directory is owned by another user, or group or others can access it.
        public static let directoryUnsafe = Code("directoryUnsafe")
        /// The key credential is shorter than ``StoreKey/minimumMaterialLength`` bytes (or absurdly long).
        public static let keyMaterialLength = Code("keyMaterialLength")
        /// The credential name is not a plain file name.
        public static let invalidCredentialName = Code("invalidCredentialName")
        /// The key file is owned by another user, is not a regular file, or others can read it.
        public static let keyFileUnsafe = Code("keyFileUnsafe")
        /// The key file does not hold exactly ``StoreKey/keyFileLength`` bytes.
        public static let keyFileInvalid = Code("keyFileInvalid")
        /// The key file is missing while the store holds records: a new key would make every one unreadable.
        public static let keyFileMissing = Code("keyFileMissing")
        /// The store holds records and not one decrypts with the key: the key is not the one they were written
        /// with (changed, damaged or replaced). Nothing was set aside.
        public static let keyMismatch = Code("keyMismatch")
        /// A record is owned by another user, or group or others can access it.
        public static let recordUnsafe = Code("recordUnsafe")
        /// A record could not be encoded (a bug rather than a condition of the system).
        public static let encodingFailed = Code("encodingFailed")
        /// Another process (another exponea-authd) holds the store's lock file.
        public static let storeInUse = Code("storeInUse")
        /// A system call failed; ``TokenStoreError/systemCall`` and ``TokenStoreError/errno`` say which and why.
        public static let systemCallFailed = Code("systemCallFailed")
    }

    /// The kind of failure.
    public var code: Code
    /// What is wrong and what to do about it.
    public var message: String
    /// The name of the system call that failed, when one did.
    public var systemCall: String?
    /// The error number the failed system call left, when one did.
    public var errno: Errno?

    /// Creates an error.
    public init(code: Code, message: String, systemCall: String? = nil, errno: Errno? = nil) {
        self.code = code
        self.message = message
        self.systemCall = systemCall
        self.errno = errno
    }

    init(_ message: String, _ failure: SystemCallError) {
        self.init(code: .systemCallFailed, message: message, systemCall: failure.call, errno: failure.errno)
    }

    public var description: String {
        guard let systemCall, let errno else { return message }
        return "\(message) (\(systemCall): \(errno), errno \(errno.rawValue))"
    }
}
