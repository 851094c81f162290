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

@Suite struct TokenStoreTests {
    // MARK: Round trip

    @Test func savedRecordLoadsEqual() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        var record = try StoreFixture.record("com.example.shop", generation: .max)
        record.changedAt = Date(timeIntervalSinceReferenceDate: 785_123_456.123_456_7)

        try store.save(record)
        let loaded = try #require(try store.load(record.group))

        #expect(loaded == record)
        #expect(loaded.generation == .max)
        #expect(loaded.changedAt == record.changedAt)
        #expect(loaded.token?.claims.customerIds == ["registered": "user-1"])
        // A new instance (a restart) reads the same.
        #expect(try fixture.open().load(record.group) == record)
        #expect(fixture.warnings.isEmpty)
    }

    @Test func recordWithoutTokenKeepsCustomerIds() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        try store.save(try StoreFixture.record("g", generation: 1))
        let cleared = try StoreFixture.record("g", generation: 2, user: "user-2", withToken: false)

        try store.save(cleared)
        let loaded = try #require(try store.load(cleared.group))

        #expect(loaded.token == nil)
        #expect(loaded.customerIds == ["registered": "user-2", "cookie": "cookie-user-2"])
        #expect(loaded == cleared)
    }

    @Test func saveReplacesLoadAllListsAndRemoveDeletes() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let b = try StoreFixture.record("b-group", generation: 1)
        let a1 = try StoreFixture.record("a-group", generation: 1)
        let a2 = try StoreFixture.record("a-group", generation: 2, user: "user-2")
        try store.save(b)
        try store.save(a1)
        try store.save(a2)

        #expect(try store.loadAll() == [a2, b])
        #expect(try fixture.files() == ["a-group.token", "b-group.token"])

        try store.remove(a2.group)
        #expect(try store.load(a2.group) == nil)
        #expect(try store.loadAll() == [b])
        try store.remove(a2.group)  // already gone: fine
        try store.remove(try AppGroup("never-stored"))
        #expect(try fixture.files() == ["b-group.token"])
    }

    @Test func missingRecordLoadsNil() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        #expect(try fixture.open().load(try AppGroup("nothing")) == nil)
        #expect(try fixture.open().loadAll().isEmpty)
    }

    @Test func fileIsEncryptedAndHasHeader() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let record = try StoreFixture.record("g", user: "plain-user-id")
        try fixture.open().save(record)
        let bytes = try fixture.read("g.token")
        let text = String(decoding: bytes, as: UTF8.self)

        #expect(Array(bytes.prefix(5)) == Array("XATK".utf8) + [1])
        #expect(!text.contains("plain-user-id"))
        #expect(!text.contains(try #require(record.token?.compact.split(separator: ".")[1])))
    }

    @Test func staleTemporaryFilesAreRemovedAtOpen() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try fixture.open().save(try StoreFixture.record("g"))
        try fixture.write([1, 2, 3], to: ".g.token.tmp-0123456789abcdef")
        try fixture.write([1, 2, 3], to: ".store.key.tmp-0123456789abcdef")

        let store = try fixture.open()

        #expect(try fixture.files() == ["g.token"])
        #expect(try store.load(try AppGroup("g")) != nil)
    }

    // MARK: The directory

    @Test func refusesDirectoryThatOthersCanAccess() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        #expect(mkdir(fixture.storePath, 0o700) == 0)
        #expect(chmod(fixture.storePath, 0o755) == 0)

        let error = try #require(throws: TokenStoreError.self) { try fixture.open() }

        #expect(error.code == .directoryUnsafe)
        #expect(error.message.contains("mode 0755"))
        #expect(error.message.contains("chmod 0700 \(fixture.storePath)"))
        #expect(try fixture.files().isEmpty)
    }

    @Test func refusesGroupReadableDirectory() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        #expect(mkdir(fixture.storePath, 0o700) == 0)
        #expect(chmod(fixture.storePath, 0o740) == 0)
        #expect(throws: TokenStoreError.self) { try fixture.open() }
    }

    @Test(.enabled(if: geteuid() == 0, "only root can give a directory to another user"))
    func refusesDirectoryOwnedByAnotherUser() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        #expect(mkdir(fixture.storePath, 0o700) == 0)
        #expect(chown(fixture.storePath, 4242, 4242) == 0)

        let error = try #require(throws: TokenStoreError.self) { try fixture.open() }

        #expect(error.code == .directoryUnsafe)
        #expect(error.message.contains("owned by uid 4242"))
        #expect(error.message.contains("chown 0 \(fixture.storePath)"))
    }

    @Test func refusesFileInPlaceOfDirectory() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try Data("x".utf8).write(to: URL(fileURLWithPath: fixture.storePath))
        let error = try #require(throws: TokenStoreError.self) { try fixture.open() }
        #expect(error.code == .notADirectory)
    }

    @Test func missingParentIsAClearError() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let error = try #require(throws: TokenStoreError.self) {
            try TokenStore(
                directory: fixture.temporary.appending("no/such/store"), key: fixture.key(), logger: fixture.logger)
        }
        #expect(error.code == .systemCallFailed)
        #expect(error.systemCall == "mkdir")
        #expect(error.message.contains("parent directory does not exist"))
        #expect(error.description.contains("mkdir"))
    }

    // MARK: Group names

    @Test(arguments: [
        ("../x", AppGroupNameError.leadingDot),
        ("a/b", .invalidByte(UInt8(ascii: "/"), offset: 1)),
        ("", .empty),
        (String(repeating: "a", count: 200), .tooLong(length: 200)),
        ("a\u{0}b", .invalidByte(0, offset: 1)),
        (".", .leadingDot),
        ("..", .leadingDot),
        (".hidden", .leadingDot),
        ("x/../../etc", .invalidByte(UInt8(ascii: "/"), offset: 1)),
    ])
    func unsafeGroupNamesNeverReachTheStore(name: String, expected: AppGroupNameError) throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let before = try FileManager.default.contentsOfDirectory(atPath: fixture.temporary.path).sorted()

        #expect(throws: expected) {
            try store.save(TokenRecord(group: try AppGroup(name), token: nil, generation: 1, changedAt: Date()))
        }

        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.temporary.path).sorted() == before)
        #expect(try fixture.files().isEmpty)
    }
}

/// Tests that change the process umask: serialised, and the umask is restored.
@Suite(.serialized) struct TokenStorePermissionTests {
    @Test(arguments: [mode_t(0o022), 0])
    func directoryRecordAndKeyFileAreCreatedPrivate(umask mask: mode_t) throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let previous = umask(mask)
        defer { umask(previous) }

        // The key file first: none is made over existing records.
        let keyFileStore = try TokenStore(
            directory: fixture.storePath,
            key: StoreKey.fromKeyFile(inDirectory: fixture.storePath, logger: fixture.logger),
            logger: fixture.logger)
        let credentialStore = try fixture.open()
        try credentialStore.save(try StoreFixture.record("with-credential"))
        try keyFileStore.save(try StoreFixture.record("with-key-file"))

        #expect(try fixture.mode(fixture.storePath) == 0o700)
        #expect(try fixture.mode(fixture.path("with-credential.token")) == 0o600)
        #expect(try fixture.mode(fixture.path("with-key-file.token")) == 0o600)
        #expect(try fixture.mode(fixture.path(StoreKey.keyFileName)) == 0o600)
    }
}
