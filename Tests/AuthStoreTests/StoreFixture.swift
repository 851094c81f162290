// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Foundation
import Logging
import Testing

@testable import AuthStore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A temporary store directory, a credentials directory holding a random key, and a log capture.
struct StoreFixture {
    let temporary: TemporaryDirectory
    /// `<temporary>/store`, not created until a store or key opens it.
    let storePath: String
    /// `<temporary>/credentials`, as systemd's `$CREDENTIALS_DIRECTORY`.
    let credentialsPath: String
    let capture = LogCapture()
    let logger: Logger

    /// The environment that points at the credentials directory.
    var environment: [String: String] { ["CREDENTIALS_DIRECTORY": credentialsPath] }

    init(keyMaterial: [UInt8]? = StoreFixture.randomBytes(32)) throws {
        temporary = try TemporaryDirectory(prefix: "authstore-test")
        storePath = temporary.appending("store")
        credentialsPath = temporary.appending("credentials")
        try FileManager.default.createDirectory(atPath: credentialsPath, withIntermediateDirectories: false)
        logger = capture.logger()
        if let keyMaterial { try setCredential(keyMaterial) }
    }

    /// Replaces the key credential.
    func setCredential(_ bytes: [UInt8], name: String = StoreKey.defaultCredentialName) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: credentialsPath + "/" + name))
    }

    /// The key from the credential.
    func key() throws -> StoreKey {
        try #require(try StoreKey.fromCredential(environment: environment))
    }

    /// Opens the store with the credential key.
    func open() throws -> TokenStore {
        try TokenStore(directory: storePath, key: key(), logger: logger)
    }

    /// The names in the store directory, sorted.
    func files() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: storePath).sorted()
    }

    /// `store/name`.
    func path(_ name: String) -> String { storePath + "/" + name }

    /// The permission bits of `path` (not following a final symlink).
    func mode(_ path: String) throws -> mode_t {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return info.st_mode & 0o7777
    }

    func read(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: path(name))))
    }

    /// Writes `bytes` to `store/name` with the mode the daemon gives its records (0600), as a tampered record
    /// of the daemon's own would have.
    func write(_ bytes: [UInt8], to name: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path(name)))
        guard chmod(path(name), 0o600) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    /// Log entries at warning level or above.
    var warnings: [LogCapture.Entry] { capture.entries.filter { $0.level >= .warning } }

    func remove() { temporary.remove() }

    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// A record for `group` with a real token that expires in an hour.
    static func record(
        _ group: String, generation: UInt64 = 1, user: String = "user-1", withToken: Bool = true
    ) throws -> TokenRecord {
        let token = TestJWT().token(expiringIn: 3600, ids: ["registered": user])
        return TokenRecord(
            group: try AppGroup(group), token: withToken ? try StreamJWT(parsing: token) : nil,
            customerIds: ["registered": user, "cookie": "cookie-\(user)"], generation: generation,
            changedAt: Date())
    }
}
