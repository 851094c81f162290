// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Crypto
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The key that encrypts the token store's records at rest (AES-256-GCM).
///
/// The key is derived with HKDF-SHA256 from key material that comes, preferably, from a systemd credential
/// (`$CREDENTIALS_DIRECTORY/exponea-authd.store-key`), which systemd can keep encrypted and bound to the host
/// or its TPM:
///
/// ```sh
/// head -c 32 /dev/urandom | systemd-creds encrypt --name=exponea-authd.store-key - \
///     /etc/credstore.encrypted/exponea-authd.store-key
/// # in the unit: LoadCredentialEncrypted=exponea-authd.store-key
/// ```
///
/// Without one, a random key file ``keyFileName`` in the store directory is used (and a warning is logged
/// once per process): it protects against reading a copied record alone, not against copying the directory.
///
/// ```swift
/// let key = try StoreKey.resolve(directory: "/var/lib/exponea-authd",
///                                environment: ProcessInfo.processInfo.environment, logger: logger)
/// ```
///
/// `description` never shows key bytes.
public struct StoreKey: Sendable, CustomStringConvertible, CustomReflectable {
    /// Where key material came from.
    public enum Source: Hashable, Sendable, CustomStringConvertible {
        /// A systemd credential file.
        case credential(path: String)
        /// The key file in the store directory.
        case keyFile(path: String)
        /// Bytes handed to ``StoreKey/init(material:)``.
        case material

        public var description: String {
            switch self {
            case .credential(let path): "credential \(path)"
            case .keyFile(let path): "key file \(path)"
            case .material: "key material given directly"
            }
        }
    }

    /// The credential name looked up in `$CREDENTIALS_DIRECTORY` by default.
    public static let defaultCredentialName = "exponea-authd.store-key"
    /// The fewest bytes of key material accepted (256 bits).
    public static let minimumMaterialLength = 32
    /// The most bytes of key material accepted.
    public static let maximumMaterialLength = 64 * 1024
    /// The name of the generated key file in the store directory.
    public static let keyFileName = "store.key"
    /// The size of the generated key file.
    public static let keyFileLength = 32

    /// The HKDF `info`: binds derived keys to this use, so the same credential used elsewhere gives another key.
    private static let derivationInfo = Array("exponea-authd token store v1 AES-256-GCM".utf8)

    /// Where the key material came from.
    public let source: Source

    /// The derived 256-bit AES key. Kept as bytes: `SymmetricKey` is not `Sendable` in swift-crypto 3.
    private let derived: [UInt8]

    /// Derives a key from `material`.
    ///
    /// - Parameters:
    ///   - material: At least ``minimumMaterialLength`` bytes, ideally random.
    ///   - source: Where the bytes came from, for messages.
    /// - Throws: ``TokenStoreError/Code/keyMaterialLength`` when there are too few (or too many) bytes.
    public init(material: some Collection<UInt8>, source: Source = .material) throws(TokenStoreError) {
        guard (Self.minimumMaterialLength...Self.maximumMaterialLength).contains(material.count) else {
            throw TokenStoreError(
                code: .keyMaterialLength,
                message: "the token store key (\(source)) is \(material.count) bytes long; it must be "
                    + "\(Self.minimumMaterialLength) to \(Self.maximumMaterialLength) bytes: create it with "
                    + "'head -c 32 /dev/urandom | systemd-creds encrypt --name=\(Self.defaultCredentialName) - FILE'"
            )
        }
        let key = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: Array(material)), info: Self.derivationInfo, outputByteCount: 32)
        self.derived = key.withUnsafeBytes { Array($0) }
        self.source = source
    }

    /// The AES key, made when needed.
    var symmetricKey: SymmetricKey { SymmetricKey(data: derived) }

    public var description: String { "StoreKey(\(source))" }

    public var customMirror: Mirror { Mirror(self, children: ["source": source]) }

    // MARK: Finding the key

    /// The key from the credential `name` in `$CREDENTIALS_DIRECTORY`, or the key file in `directory` when there
    /// is no such credential.
    ///
    /// - Parameters:
    ///   - directory: The store directory (created with mode 0700 if missing, and checked).
    ///   - environment: The process environment; only `CREDENTIALS_DIRECTORY` is read.
    ///   - credentialName: The credential's name.
    ///   - logger: Receives the once-per-process warning when the key file is used.
    /// - Throws: ``TokenStoreError`` when the credential or key file exists but cannot be used.
    public static func resolve(
        directory: String, environment: [String: String], credentialName: String = defaultCredentialName,
        logger: Logger
    ) throws(TokenStoreError) -> StoreKey {
        if let key = try fromCredential(named: credentialName, environment: environment) {
            return key
        }
        return try fromKeyFile(inDirectory: directory, logger: logger)
    }

    /// The key from the systemd credential `name`, or nil when `CREDENTIALS_DIRECTORY` is unset or has no
    /// such credential.
    ///
    /// - Throws: ``TokenStoreError`` when the credential exists but cannot be read or is too short.
    public static func fromCredential(
        named name: String = defaultCredentialName, environment: [String: String]
    ) throws(TokenStoreError) -> StoreKey? {
        guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else {
            throw TokenStoreError(
                code: .invalidCredentialName,
                message: "the credential name '\(name)' is not a plain file name; use a name such as "
                    + "\(defaultCredentialName)")
        }
        guard let directory = environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty else { return nil }
        let path = directory + "/" + name
        let descriptor: CInt
        do {
            // O_NONBLOCK: a FIFO in its place must not hang the start (it is refused below).
            descriptor = try SystemCalls.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        } catch let failure where failure.errno == .noSuchFileOrDirectory {
            return nil
        } catch {
            throw TokenStoreError("cannot open the token store key credential \(path)", error)
        }
        defer { SystemCalls.close(descriptor) }
        let info: stat
        do {
            info = try SystemCalls.fstat(descriptor)
        } catch {
            throw TokenStoreError("cannot inspect the token store key credential \(path)", error)
        }
        guard SystemCalls.isRegularFile(info) else {
            throw TokenStoreError(
                code: .keyFileUnsafe,
                message: "the token store key credential \(path) is not a regular file; provide the key as a file")
        }
        let bytes: [UInt8]?
        do {
            bytes = try SystemCalls.readAll(descriptor, limit: maximumMaterialLength)
        } catch {
            throw TokenStoreError("cannot read the token store key credential \(path)", error)
        }
        guard let bytes else {
            throw TokenStoreError(
                code: .keyMaterialLength,
                message: "the token store key credential \(path) is larger than \(maximumMaterialLength) bytes; "
                    + "32 random bytes are enough")
        }
        return try StoreKey(material: bytes, source: .credential(path: path))
    }

    /// The key from the key file ``keyFileName`` in the store directory, created with 32 random bytes (mode
    /// 0600) on first use. Logs, once per process, a warning that the key is not bound to the device.
    ///
    /// - Parameter directory: The store directory (created with mode 0700 if missing, and checked).
    /// - Throws: ``TokenStoreError`` when the directory or the key file is unsafe or the file has the wrong size.
    public static func fromKeyFile(inDirectory directory: String, logger: Logger) throws(TokenStoreError) -> StoreKey {
        try fromKeyFile(inDirectory: directory, logger: logger, warning: .process)
    }

    static func fromKeyFile(
        inDirectory directory: String, logger: Logger, warning: OnceFlag
    ) throws(TokenStoreError) -> StoreKey {
        let directoryDescriptor = try StoreDirectory.open(directory)
        defer { SystemCalls.close(directoryDescriptor) }
        let path = directory + "/" + keyFileName
        let bytes = try readOrCreateKeyFile(directoryDescriptor, path: path)
        if warning.claim() {
            var metadata = OperatorEvent.storeKeyProblem.metadata { Logger.MetadataValue.string($0) }
            metadata["authd.key_file"] = "\(path)"
            logger.warning(Logger.Message(stringLiteral: unboundKeyWarning), metadata: metadata)
        }
        return try StoreKey(material: bytes, source: .keyFile(path: path))
    }

    /// Logged once per process when the key file is used.
    static let unboundKeyWarning =
        "The token store key is a file in the store directory, not bound to this device: anyone who can copy "
        + "the directory can read the stored tokens. Provide the key as an encrypted systemd credential instead: "
        + "'head -c 32 /dev/urandom | systemd-creds encrypt --name=\(defaultCredentialName) - "
        + "/etc/credstore.encrypted/\(defaultCredentialName)' and LoadCredentialEncrypted=\(defaultCredentialName) "
        + "in the unit"

    private static func readOrCreateKeyFile(_ directory: CInt, path: String) throws(TokenStoreError) -> [UInt8] {
        for _ in 0..<3 {
            if let bytes = try readKeyFile(directory, path: path) { return bytes }
            try refuseNewKeyOverRecords(directory, path: path)
            if let bytes = try createKeyFile(directory, path: path) { return bytes }
            // Another process created it between our read and our link: read theirs.
        }
        throw TokenStoreError(
            code: .keyFileInvalid,
            message: "the token store key file \(path) keeps appearing and disappearing; is another process "
                + "using the store directory?")
    }

    /// The key file's bytes, or nil when there is none.
    private static func readKeyFile(_ directory: CInt, path: String) throws(TokenStoreError) -> [UInt8]? {
        let descriptor: CInt
        do {
            // O_NONBLOCK: a FIFO in its place must not hang the start (it is refused below).
            descriptor = try SystemCalls.openat(
                directory, keyFileName, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        } catch let failure where failure.errno == .noSuchFileOrDirectory {
            return nil
        } catch let failure where failure.errno == .tooManySymbolicLinkLevels {
            throw TokenStoreError(
                code: .keyFileUnsafe,
                message: "the token store key file \(path) is a symbolic link; it must be a regular file: remove "
                    + "it, or provide the key as a systemd credential")
        } catch {
            throw TokenStoreError("cannot open the token store key file \(path)", error)
        }
        defer { SystemCalls.close(descriptor) }
        let info: stat
        do {
            info = try SystemCalls.fstat(descriptor)
        } catch {
            throw TokenStoreError("cannot inspect the token store key file \(path)", error)
        }
        guard SystemCalls.isRegularFile(info) else {
            throw TokenStoreError(
                code: .keyFileUnsafe,
                message: "the token store key file \(path) is not a regular file; remove it")
        }
        guard info.st_uid == geteuid() else {
            throw TokenStoreError(
                code: .keyFileUnsafe,
                message: "the token store key file \(path) is owned by uid \(info.st_uid), not by the daemon's "
                    + "uid \(geteuid()); run 'chown \(geteuid()) \(path)'")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw TokenStoreError(
                code: .keyFileUnsafe,
                message: "the token store key file \(path) has mode \(SystemCalls.modeString(info)), so group or "
                    + "others can read it; run 'chmod 0600 \(path)' (and consider the key exposed: a systemd "
                    + "credential is safer)")
        }
        let bytes: [UInt8]?
        do {
            bytes = try SystemCalls.readAll(descriptor, limit: keyFileLength)
        } catch {
            throw TokenStoreError("cannot read the token store key file \(path)", error)
        }
        guard let bytes, bytes.count == keyFileLength else {
            let size = bytes.map { "\($0.count) bytes" } ?? "too"
            let message: String =
                "the token store key file \(path) is \(size) long; it must be exactly \(keyFileLength) bytes. "
                + "Records written with it cannot be read without it: restore it from a backup, or delete it "
                + "(the stored tokens will then be set aside as unreadable)"
            throw TokenStoreError(code: .keyFileInvalid, message: message)
        }
        return bytes
    }

    /// Throws when the store directory holds records: they were written with a key, and a new one would make
    /// every one of them unreadable (and set aside) at once.
    private static func refuseNewKeyOverRecords(_ directory: CInt, path: String) throws(TokenStoreError) {
        let names: [String]
        do {
            names = try SystemCalls.listDirectory(directory)
        } catch {
            throw TokenStoreError("cannot list the token store directory of \(path)", error)
        }
        let records = names.filter { $0.hasSuffix(TokenStore.recordSuffix) }.count
        guard records > 0 else { return }
        let directoryPath = String(path.dropLast(keyFileName.count + 1))
        throw TokenStoreError(
            code: .keyFileMissing,
            message: "the token store key file \(path) is missing, but \(directoryPath) holds \(records) token "
                + "record\(records == 1 ? "" : "s") written with a key; a new key would make them unreadable, so "
                + "none is made and every file is kept. Restore \(keyFileName) from a backup (or provide the key "
                + "as the credential \(defaultCredentialName)); to start with an empty store instead, move the "
                + "*\(TokenStore.recordSuffix) files out of \(directoryPath)")
    }

    /// Writes a new key file (temp file, fsync, link to the final name so it appears whole or not at all); nil
    /// when another process created one first.
    private static func createKeyFile(_ directory: CInt, path: String) throws(TokenStoreError) -> [UInt8]? {
        let bytes = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        let temporary = try TemporaryFile.create(in: directory, prefix: "." + keyFileName, what: "key file", path: path)
        defer { try? SystemCalls.unlinkat(directory, temporary.name) }
        try temporary.writeAndClose(bytes, what: "key file", path: path)
        do {
            try SystemCalls.linkat(directory, temporary.name, keyFileName)
        } catch let failure where failure.errno == .fileExists {
            return nil
        } catch {
            throw TokenStoreError("cannot create the token store key file \(path)", error)
        }
        do {
            try SystemCalls.fsync(directory)
        } catch {
            throw TokenStoreError("cannot make the new token store key file \(path) durable", error)
        }
        return bytes
    }
}

/// A flag that can be claimed once: the first ``claim()`` returns true, every later one false.
final class OnceFlag: Sendable {
    /// The flag for the whole process.
    static let process = OnceFlag()

    private let claimed = Mutex(false)

    init() {}

    func claim() -> Bool {
        claimed.withLock { claimed in
            defer { claimed = true }
            return !claimed
        }
    }
}
