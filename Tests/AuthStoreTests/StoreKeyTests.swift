// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Foundation
import Testing

@testable import AuthStore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

@Suite struct StoreKeyTests {
    // MARK: Credential

    @Test func credentialIsUsedWhenPresent() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let key = try StoreKey.resolve(
            directory: fixture.storePath, environment: fixture.environment, logger: fixture.logger)

        #expect(key.source == .credential(path: fixture.credentialsPath + "/exponea-authd.store-key"))
        #expect(!FileManager.default.fileExists(atPath: fixture.path(StoreKey.keyFileName)))
        #expect(fixture.warnings.isEmpty)
    }

    @Test func recordWrittenWithOneCredentialDoesNotOpenWithAnother() throws {
        let fixture = try StoreFixture(keyMaterial: Array(repeating: 0xA1, count: 32))
        defer { fixture.remove() }
        let record = try StoreFixture.record("g")
        try fixture.open().save(record)

        try fixture.setCredential(Array(repeating: 0xB2, count: 32))
        let store = try fixture.open()

        #expect(try store.load(record.group) == nil)
        #expect(try fixture.files() == ["g.token.corrupt"])
        #expect(fixture.warnings.contains { $0.metadata["group"] == "g" })
    }

    @Test func longCredentialIsAccepted() throws {
        let fixture = try StoreFixture(keyMaterial: StoreFixture.randomBytes(4096))
        defer { fixture.remove() }
        let record = try StoreFixture.record("g")
        try fixture.open().save(record)
        #expect(try fixture.open().load(record.group) == record)
    }

    @Test func sameMaterialGivesSameKey() throws {
        let material = StoreFixture.randomBytes(32)
        let fixture = try StoreFixture(keyMaterial: material)
        defer { fixture.remove() }
        let record = try StoreFixture.record("g")
        try fixture.open().save(record)

        let store = try TokenStore(
            directory: fixture.storePath, key: StoreKey(material: material), logger: fixture.logger)
        #expect(try store.load(record.group) == record)
    }

    @Test func shortCredentialIsRefused() throws {
        let fixture = try StoreFixture(keyMaterial: StoreFixture.randomBytes(31))
        defer { fixture.remove() }

        let error = try #require(throws: TokenStoreError.self) {
            try StoreKey.resolve(directory: fixture.storePath, environment: fixture.environment, logger: fixture.logger)
        }

        #expect(error.code == .keyMaterialLength)
        #expect(error.message.contains("is 31 bytes long"))
        #expect(error.message.contains("head -c 32 /dev/urandom | systemd-creds encrypt"))
        #expect(!FileManager.default.fileExists(atPath: fixture.path(StoreKey.keyFileName)))
    }

    @Test func emptyCredentialIsRefused() throws {
        let fixture = try StoreFixture(keyMaterial: [])
        defer { fixture.remove() }
        let error = try #require(throws: TokenStoreError.self) {
            try StoreKey.fromCredential(environment: fixture.environment)
        }
        #expect(error.code == .keyMaterialLength)
    }

    @Test(arguments: ["", "a/b", "..", "."])
    func credentialNameMustBeAFileName(name: String) throws {
        let error = try #require(throws: TokenStoreError.self) {
            try StoreKey.fromCredential(named: name, environment: ["CREDENTIALS_DIRECTORY": "/tmp"])
        }
        #expect(error.code == .invalidCredentialName)
    }

    @Test func missingCredentialOrDirectoryMeansNone() throws {
        let fixture = try StoreFixture(keyMaterial: nil)
        defer { fixture.remove() }
        #expect(try StoreKey.fromCredential(environment: fixture.environment) == nil)
        #expect(try StoreKey.fromCredential(environment: [:]) == nil)
        #expect(try StoreKey.fromCredential(environment: ["CREDENTIALS_DIRECTORY": ""]) == nil)
    }

    @Test func descriptionShowsNoKeyBytes() throws {
        let key = try StoreKey(material: Array(repeating: 0x41, count: 32))
        var dumped = ""
        dump(key, to: &dumped)
        for text in [key.description, String(reflecting: key), dumped] {
            #expect(!text.contains("AAAA"))
            #expect(!text.contains("65, 65"))
            #expect(!text.contains("derived"))
        }
        #expect(key.description == "StoreKey(key material given directly)")
    }

    // MARK: Key file

    @Test func keyFileIsCreatedOnceAndReused() throws {
        let fixture = try StoreFixture(keyMaterial: nil)
        defer { fixture.remove() }
        let record = try StoreFixture.record("g")

        let firstKey = try StoreKey.resolve(
            directory: fixture.storePath, environment: fixture.environment, logger: fixture.logger)
        try TokenStore(directory: fixture.storePath, key: firstKey, logger: fixture.logger).save(record)
        let keyBytes = try fixture.read(StoreKey.keyFileName)
        let secondKey = try StoreKey.resolve(directory: fixture.storePath, environment: [:], logger: fixture.logger)
        let second = try TokenStore(directory: fixture.storePath, key: secondKey, logger: fixture.logger)

        #expect(firstKey.source == .keyFile(path: fixture.path("store.key")))
        #expect(keyBytes.count == 32)
        #expect(try fixture.read(StoreKey.keyFileName) == keyBytes)
        #expect(try fixture.mode(fixture.path(StoreKey.keyFileName)) == 0o600)
        #expect(try second.load(record.group) == record)
        #expect(try fixture.files() == ["g.token", "store.key"])
    }

    @Test func keyFileWarningIsLoggedOnce() throws {
        let fixture = try StoreFixture(keyMaterial: nil)
        defer { fixture.remove() }
        let once = OnceFlag()

        _ = try StoreKey.fromKeyFile(inDirectory: fixture.storePath, logger: fixture.logger, warning: once)
        _ = try StoreKey.fromKeyFile(inDirectory: fixture.storePath, logger: fixture.logger, warning: once)

        let warnings = fixture.warnings
        #expect(warnings.count == 1)
        let warning = try #require(warnings.first)
        #expect(warning.message.contains("not bound to this device"))
        #expect(warning.message.contains("systemd-creds encrypt --name=exponea-authd.store-key"))
        #expect(warning.message.contains("LoadCredentialEncrypted=exponea-authd.store-key"))
        #expect(warning.metadata["authd.key_file"] == fixture.path("store.key"))
    }

    @Test func processWideWarningIsLoggedAtMostOnce() throws {
        let fixture = try StoreFixture(keyMaterial: nil)
        defer { fixture.remove() }
        for _ in 0..<3 {
            _ = try StoreKey.fromKeyFile(inDirectory: fixture.storePath, logger: fixture.logger)
        }
        // Another test may already have claimed the process's one warning.
        #expect(fixture.warnings.count <= 1)
        #expect(OnceFlag.process.claim() == false)
    }

    @Test func keyFileOfWrongSizeIsRefused() throws {
        let fixture = try StoreFixture(keyMaterial: nil)
        defer { fixture.remove() }
        #expect(mkdir(fixture.storePath, 0o700) == 0)
        let descriptor = open(fixture.path("store.key"), O_WRONLY | O_CREAT | O_EXCL, 0o600)  // empty, as if torn
        #expect(descriptor >= 0)
        close(descriptor)

        let error = try #require(throws: TokenStoreError.self) {
            try StoreKey.fromKeyFile(inDirectory: fixture.storePath, logger: fixture.logger)
        }

        #expect(error.code == .keyFileInvalid)
        #expect(error.message.contains("is 0 bytes long; it must be exactly 32 bytes"))
    }

    @Test func keyFileOthersCanReadIsRefused() throws {
        let fixture = try StoreFixture(keyMaterial: nil)
        defer { fixture.remove() }
        _ = try StoreKey.fromKeyFile(inDirectory: fixture.storePath, logger: fixture.logger)
        #expect(chmod(fixture.path("store.key"), 0o644) == 0)

        let error = try #require(throws: TokenStoreError.self) {
            try StoreKey.fromKeyFile(inDirectory: fixture.storePath, logger: fixture.logger)
        }

        #expect(error.code == .keyFileUnsafe)
        #expect(error.message.contains("mode 0644"))
        #expect(error.message.contains("chmod 0600"))
    }

    @Test func keyFileThatIsASymlinkIsRefused() throws {
        let fixture = try StoreFixture(keyMaterial: nil)
        defer { fixture.remove() }
        #expect(mkdir(fixture.storePath, 0o700) == 0)
        try Data(StoreFixture.randomBytes(32)).write(to: URL(fileURLWithPath: fixture.temporary.appending("elsewhere")))
        #expect(symlink(fixture.temporary.appending("elsewhere"), fixture.path("store.key")) == 0)

        let error = try #require(throws: TokenStoreError.self) {
            try StoreKey.fromKeyFile(inDirectory: fixture.storePath, logger: fixture.logger)
        }
        #expect(error.code == .keyFileUnsafe)
    }

    @Test func keyFileDirectoryMustBePrivate() throws {
        let fixture = try StoreFixture(keyMaterial: nil)
        defer { fixture.remove() }
        #expect(mkdir(fixture.storePath, 0o700) == 0)
        #expect(chmod(fixture.storePath, 0o711) == 0)
        let error = try #require(throws: TokenStoreError.self) {
            try StoreKey.fromKeyFile(inDirectory: fixture.storePath, logger: fixture.logger)
        }
        #expect(error.code == .directoryUnsafe)
        #expect(!FileManager.default.fileExists(atPath: fixture.path("store.key")))
    }
}
